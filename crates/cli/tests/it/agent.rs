//! The agent runtime through the real gate, against a scripted OpenAI-compatible server on
//! loopback (`agent/scripted.rs`, which stands in for the model only) and, for the Anthropic
//! client, a loopback server answering in the Messages API's documented format.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use crate::support::llama;
use crate::support::python;
use crate::support::scripted;

use std::sync::Arc;
use std::time::Duration;

use scripted::{Reply, Scripted, answer, call, call_raw};
use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::agent::config::{Price, ProviderKind};
use toolgate::agent::{AgentConfig, AgentLink, ProviderConfig, RunSpec, RunStatus, TeamConfig};
use toolgate::config::Config;
use toolgate::core::{CallContext, Identity};
use toolgate::store::SessionStore;
use toolgate::store::Store;

fn provider(url: &str) -> ProviderConfig {
    let mut p = ProviderConfig { base_url: url.to_owned(), max_retries: 2, timeout_secs: 20.0, ..Default::default() };
    p.prices.insert("m".into(), Price { input: 1.0, output: 2.0 });
    p
}

fn agent(description: &str) -> AgentConfig {
    AgentConfig { provider: "mock".into(), model: "m".into(), description: description.into(), ..Default::default() }
}

fn config(url: &str) -> Config {
    let mut c = Config::default();
    c.providers.insert("mock".into(), provider(url));
    let mut main = agent("the main agent");
    main.system_prompt = Some("Be brief.".into());
    c.agents.insert("main".into(), main);
    c
}

fn gate(dir: &std::path::Path, config: Config) -> Arc<Gate> {
    Gate::builder(dir).config(config).build_shared().unwrap()
}

fn store(dir: &std::path::Path) -> Store {
    Store::open(&dir.join(".toolgate/state.db")).unwrap()
}

fn tool_messages(store: &Store, session: &str) -> Vec<(bool, String)> {
    store
        .session_messages(session, 0)
        .unwrap()
        .into_iter()
        .filter(|m| m.role == "tool")
        .map(|m| (m.is_error, m.content))
        .collect()
}

fn as_agent(gate: &Gate, agent: &str, session: &str) -> CallContext {
    let mut ctx = gate.context();
    ctx.identity = Identity { agent: agent.into(), session: session.into(), ..ctx.identity };
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_calls_tools_through_the_gate_and_records_the_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the secret word is pineapple\n").unwrap();
    let server = Scripted::start(vec![call("read", json!({"path": "notes.txt"})), answer("pineapple")]).await;
    let gate = gate(dir.path(), config(&server.url));
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "What is the secret word?"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done, "{out:?}");
    assert_eq!((out.answer.as_str(), out.iterations, out.tool_calls), ("pineapple", 2, 1));
    assert_eq!((out.usage.input_tokens, out.usage.output_tokens), (30, 13));
    assert!((out.cost_usd - (30.0 + 26.0) / 1e6).abs() < 1e-12);

    let requests = server.requests();
    let tools: Vec<&str> =
        requests[0]["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(tools.contains(&"read") && tools.contains(&"subagents"), "{tools:?}");
    assert_eq!(requests[0]["messages"][0], json!({"role": "system", "content": "Be brief."}));
    let last = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert!(last["content"].as_str().unwrap().contains("pineapple"), "{last}");

    gate.flush_audit();
    let store = store(dir.path());
    let audited: Vec<_> = store.audit_tail(100).unwrap().into_iter().filter(|r| r.session == out.session).collect();
    assert_eq!(audited.len(), 1);
    assert_eq!(
        (audited[0].tool.as_str(), audited[0].agent.as_str(), audited[0].outcome.as_str()),
        ("read", "main", "ok")
    );
    let session = store.session(&out.session).unwrap().unwrap();
    assert_eq!((session.status.as_str(), session.message_count, session.kind.as_str()), ("done", 5, "run"));
    assert_eq!((session.input_tokens, session.output_tokens), (30, 13));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tool_calls_become_errors_for_the_model_and_an_endless_loop_stops() {
    let dir = tempfile::tempdir().unwrap();
    let huge = format!("{{\"message\": \"{}\"}}", "x".repeat((1 << 20) + 10));
    let mut script = vec![
        call_raw("read", "{not json"),
        call("no_such_tool", json!({})),
        call_raw("echo", &huge),
        call_raw("echo", "[1, 2]"),
    ];
    // `echo` is exempt from the gate's loop breaker: three identical calls all run...
    script.extend((0..3).map(|_| call("echo", json!({"message": "hi"}))));
    // ...`ls` is not: three run, the gate refuses the 4th and the 5th, and the run stops.
    script.extend((0..6).map(|_| call("ls", json!({"path": "."}))));
    let server = Scripted::start(script).await;
    let gate = gate(dir.path(), config(&server.url));
    let out = gate.agents().unwrap().run(RunSpec::new("main", "loop"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::Stopped, "{out:?}");
    assert!(out.error.as_deref().unwrap().contains("same `ls` call after the gate refused it"), "{:?}", out.error);
    assert_eq!(out.tool_calls, 8, "the well-formed calls reached the gate, the refused ones too");
    let msgs = tool_messages(&store(dir.path()), &out.session);
    assert_eq!(msgs.len(), 12, "{msgs:?}");
    assert!(msgs[0].0 && msgs[0].1.contains("not valid JSON"), "{:?}", msgs[0]);
    assert!(msgs[1].0 && msgs[1].1.contains("unknown tool `no_such_tool`"), "{:?}", msgs[1]);
    assert!(msgs[2].0 && msgs[2].1.contains("limit is 1048576"), "{}", &msgs[2].1[..200.min(msgs[2].1.len())]);
    assert!(msgs[3].0 && msgs[3].1.contains("must be a JSON object"), "{:?}", msgs[3]);
    assert!(msgs[4..10].iter().all(|m| !m.0), "exempt echo and the first three ls run: {:?}", &msgs[4..10]);
    assert!(msgs[10].0 && msgs[10].1.contains("loop detected"), "{:?}", msgs[10]);
    assert!(msgs[11].0 && msgs[11].1.contains("loop detected"), "{:?}", msgs[11]);
    gate.flush_audit();
    let rows: Vec<_> =
        store(dir.path()).audit_tail(100).unwrap().into_iter().filter(|r| r.session == out.session).collect();
    assert_eq!(rows.len(), 12, "every call the model made is audited, the ones refused before the gate too");
    let refused_early: Vec<&str> =
        rows.iter().filter(|r| r.decision.contains("refused before the gate")).map(|r| r.tool.as_str()).collect();
    assert_eq!(refused_early.len(), 4, "{rows:?}");
    assert!(refused_early.contains(&"no_such_tool") && refused_early.contains(&"read"), "{refused_early:?}");
    let huge_row = rows.iter().find(|r| r.tool == "echo" && r.outcome == "invalid_params").unwrap();
    assert!(huge_row.params.len() < 10_000, "the audit keeps the head of huge arguments only");
    assert_eq!(rows.iter().filter(|r| r.decision.contains("loop breaker: refused")).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_iterations_retries_and_failures() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        // max_iterations = 2: two distinct calls and no answer.
        call("echo", json!({"message": "a"})),
        call("echo", json!({"message": "b"})),
        // A 429 and a 500, then an answer: retried.
        Reply::Status(429),
        Reply::Status(500),
        answer("after retries"),
        // A 500 storm: three attempts (max_retries 2), then the run fails.
        Reply::Status(500),
        Reply::Status(503),
        Reply::Status(500),
        // A 400 is not retried.
        Reply::Status(400),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.agents.get_mut("main").unwrap().max_iterations = 2;
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap();
    let out = rt.run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::MaxIterations);
    assert!(out.error.unwrap().contains("max_iterations"));
    let out = rt.run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str()), (RunStatus::Done, "after retries"));
    let out = rt.run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let e = out.error.unwrap();
    assert!(e.contains("500") && e.contains("after 3 attempts"), "{e}");
    let out = rt.run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert!(out.error.unwrap().contains("400"));
    assert_eq!(server.requests().len(), 9);
    assert_eq!(store(dir.path()).session(&out.session).unwrap().unwrap().status, "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_replies_are_assembled() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        Reply::Stream(vec![
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "echo", "arguments": "{\"mess"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "age\": \"streamed\"}"}}]}, "finish_reason": "tool_calls"}]}),
        ]),
        Reply::Stream(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "all "}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}),
        ]),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.providers.get_mut("mock").unwrap().stream = true;
    let gate = gate(dir.path(), cfg);
    let out = gate.agents().unwrap().run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str(), out.usage.output_tokens), (RunStatus::Done, "all done", 2));
    assert_eq!(server.requests()[0]["stream"], true);
    let msgs = tool_messages(&store(dir.path()), &out.session);
    assert_eq!(msgs, vec![(false, "streamed".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagents_are_narrowed_and_cannot_nest() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        call("subagents", json!({"action": "run", "task": "look around"})),
        // The child tries to spawn further: it is not offered `subagents` (leaf deny at depth 1).
        call("subagents", json!({"action": "spawn", "task": "deeper"})),
        answer("child done"),
        answer("main done"),
    ])
    .await;
    let gate = gate(dir.path(), config(&server.url));
    let out = gate.agents().unwrap().run(RunSpec::new("main", "delegate it"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str()), (RunStatus::Done, "main done"));
    let store = store(dir.path());
    let main_msgs = tool_messages(&store, &out.session);
    assert!(main_msgs.len() == 1 && !main_msgs[0].0 && main_msgs[0].1.contains("child done"), "{main_msgs:?}");
    let children = store
        .sessions(&toolgate::store::SessionFilter { parent: Some(&out.session), limit: 10, ..Default::default() })
        .unwrap();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert_eq!((child.depth, child.kind.as_str(), child.status.as_str()), (1, "subagent", "done"));
    let child_msgs = tool_messages(&store, &child.id);
    assert!(child_msgs[0].0 && child_msgs[0].1.contains("unknown tool `subagents`"), "{child_msgs:?}");
    let requests = server.requests();
    let child_tools: Vec<&str> =
        requests[1]["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    for hidden in ["subagents", "agents_list", "sessions_send", "session_status"] {
        assert!(!child_tools.contains(&hidden), "{hidden} offered to a sub-agent: {child_tools:?}");
    }
    assert!(child_tools.contains(&"read"));
    // A sub-agent calling the gate directly is refused by policy too, and audited.
    let mut sub_ctx = gate.context().subagent("main");
    sub_ctx.identity.session = child.id.clone();
    let err = gate.call(&sub_ctx, "subagents", json!({"action": "list"})).await.unwrap_err();
    assert!(matches!(err.kind(), "denied" | "unknown_tool"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_list_cancel_steer_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let slow = || Reply::Delay(Duration::from_secs(60), Box::new(answer("too late")));
    let server = Scripted::start(vec![slow()]).await;
    let gate = gate(dir.path(), config(&server.url));
    let ctx = as_agent(&gate, "main", "parent-1");
    let spawned =
        gate.call(&ctx, "subagents", json!({"action": "spawn", "task": "slow work", "label": "slow"})).await.unwrap();
    let id = spawned.structured.unwrap()["id"].as_str().unwrap().to_owned();
    let list = gate.call(&ctx, "subagents", json!({"action": "list"})).await.unwrap().structured.unwrap();
    assert_eq!(list["subagents"][0]["status"], "running");
    // Another session sees none of it.
    let other = as_agent(&gate, "main", "someone-else");
    let err = gate.call(&other, "subagents", json!({"action": "cancel", "id": id})).await.unwrap_err();
    assert!(err.to_string().contains("no task"), "{err}");
    let t0 = std::time::Instant::now();
    let cancelled = gate.call(&ctx, "subagents", json!({"action": "cancel", "id": "last"})).await.unwrap();
    assert_eq!(cancelled.structured.unwrap()["cancelled"][0], id.as_str());
    let rt = gate.agents().unwrap();
    let done = rt.wait(&id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(done.status, RunStatus::Cancelled);
    assert!(t0.elapsed() < Duration::from_secs(10), "cancellation reached the model request");
    let err =
        gate.call(&ctx, "subagents", json!({"action": "steer", "id": id, "message": "faster"})).await.unwrap_err();
    assert!(err.to_string().contains("already finished"), "{err}");

    // Steer: cancel, settle, respawn with the message.
    server.push([slow(), answer("steered answer")]);
    let id2 = gate.call(&ctx, "subagents", json!({"action": "spawn", "task": "v1"})).await.unwrap().structured.unwrap()
        ["id"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let steered =
        gate.call(&ctx, "subagents", json!({"action": "steer", "id": id2, "message": "use v2"})).await.unwrap();
    let id3 = steered.structured.unwrap()["id"].as_str().unwrap().to_owned();
    let done = rt.wait(&id3, Duration::from_secs(20)).await.unwrap();
    assert_eq!((done.status, done.answer.as_str()), (RunStatus::Done, "steered answer"));
    let last = server.requests().last().unwrap().clone();
    assert!(last.to_string().contains("Update from the agent that started you: use v2"), "{last}");

    // Five children at once, not six.
    server.push((0..6).map(|_| slow()));
    for i in 0..5 {
        gate.call(&ctx, "subagents", json!({"action": "spawn", "task": format!("wait {i}")})).await.unwrap();
    }
    let err = gate.call(&ctx, "subagents", json!({"action": "spawn", "task": "one more"})).await.unwrap_err();
    assert!(err.to_string().contains("5/5"), "{err}");
    let all = gate.call(&ctx, "subagents", json!({"action": "cancel", "id": "all"})).await.unwrap().structured.unwrap();
    assert_eq!(all["cancelled"].as_array().unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_needs_a_link_and_respects_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        answer("helped"),
        answer("helped again"),
        Reply::Delay(Duration::from_secs(60), Box::new(answer("late"))),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.agents.get_mut("main").unwrap().links = vec!["helper".into()];
    let mut helper = agent("helps");
    helper.max_delegation_load = 1;
    cfg.agents.insert("helper".into(), helper);
    cfg.agents.insert("loner".into(), agent("alone"));
    cfg.agent_links.push(AgentLink { from: "loner".into(), to: "main".into(), ..Default::default() });
    let gate = gate(dir.path(), cfg);
    let ctx = as_agent(&gate, "main", "m-1");
    let out =
        gate.call(&ctx, "delegate", json!({"action": "delegate", "agent": "helper", "task": "help"})).await.unwrap();
    assert!(out.text_content().contains("helped"), "{}", out.text_content());
    // Seed 001's spelling: `delegate_to_agent {target_agent_id, task}`.
    let out = gate.call(&ctx, "delegate_to_agent", json!({"target_agent_id": "helper", "task": "help"})).await.unwrap();
    assert!(out.text_content().contains("helped again"), "{}", out.text_content());
    let err =
        gate.call(&ctx, "delegate", json!({"action": "delegate", "agent": "loner", "task": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("no delegation link to `loner`") && err.to_string().contains("helper"), "{err}");
    let asynced = gate
        .call(&ctx, "delegate", json!({"action": "delegate", "agent": "helper", "task": "slow", "mode": "async"}))
        .await
        .unwrap();
    let id = asynced.structured.unwrap()["id"].as_str().unwrap().to_owned();
    let err = gate
        .call(&ctx, "delegate", json!({"action": "delegate", "agent": "helper", "task": "more"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Agent at capacity (1/1). Try a different agent or handle it yourself."), "{err}");
    let list = gate.call(&ctx, "delegate", json!({"action": "list"})).await.unwrap().structured.unwrap();
    assert_eq!(list["delegations"].as_array().unwrap().len(), 3);
    gate.call(&ctx, "delegate", json!({"action": "cancel", "id": id})).await.unwrap();
    let history = gate.call(&ctx, "delegate", json!({"action": "history"})).await.unwrap().structured.unwrap();
    assert!(history["delegations"].as_array().unwrap().iter().any(|d| d["result"] == "helped"), "{history}");
    // The delegate ran as `helper`, in its own session, and its request reached the model.
    let agents = gate.call(&ctx, "agents_list", json!({})).await.unwrap().structured.unwrap();
    let helper_row = agents["agents"].as_array().unwrap().iter().find(|a| a["name"] == "helper").unwrap().clone();
    assert_eq!(helper_row["can_delegate"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_tools_and_sessions_send() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![answer("first"), answer("second")]).await;
    let gate = gate(dir.path(), config(&server.url));
    let out = gate.agents().unwrap().run(RunSpec::new("main", "hello"), &gate.context()).await.unwrap();
    let ctx = gate.context();
    let list = gate.call(&ctx, "sessions_list", json!({})).await.unwrap().structured.unwrap();
    assert_eq!(list["sessions"][0]["id"], out.session.as_str());
    let sent = gate.call(&ctx, "sessions_send", json!({"session_id": out.session, "message": "again"})).await.unwrap();
    assert!(sent.text_content().contains("second"), "{}", sent.text_content());
    let history =
        gate.call(&ctx, "sessions_history", json!({"session_id": out.session})).await.unwrap().structured.unwrap();
    let roles: Vec<&str> = history["messages"].as_array().unwrap().iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
    let status =
        gate.call(&ctx, "sessions_status", json!({"session_id": out.session})).await.unwrap().structured.unwrap();
    assert_eq!((status["messages"].as_u64(), status["output_tokens"].as_u64()), (Some(5), Some(10)));
    // The second request carried the whole conversation.
    assert_eq!(server.requests()[1]["messages"].as_array().unwrap().len(), 4);
    // Another user cannot read it.
    let mut stranger = gate.context();
    stranger.identity.user = "mallory".into();
    let err = gate.call(&stranger, "sessions_history", json!({"session_id": out.session})).await.unwrap_err();
    assert!(err.to_string().contains("no session"), "{err}");
}

/// A run limited to some tools (a build agent, a research spawn) keeps that limit when the
/// session is continued: `build_software`'s second round once offered every tool, shell included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_is_offered_only_the_tools_its_run_had() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![answer("first"), answer("second")]).await;
    let gate = gate(dir.path(), config(&server.url));
    let mut spec = RunSpec::new("main", "read the notes");
    spec.only_tools = Some(vec!["read".into(), "grep".into()]);
    let out = gate.agents().unwrap().run(spec, &gate.context()).await.unwrap();
    let stored = store(dir.path()).session(&out.session).unwrap().unwrap();
    assert_eq!(stored.only_tools.as_deref(), Some(&["read".to_owned(), "grep".to_owned()][..]));
    let sent = gate
        .call(&gate.context(), "sessions_send", json!({"session_id": out.session, "message": "now run a command"}))
        .await
        .unwrap();
    assert!(sent.text_content().contains("second"), "{}", sent.text_content());
    let offered = |request: &Value| -> Vec<String> {
        let mut names: Vec<String> = request["tools"]
            .as_array()
            .map(|tools| tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    let requests = server.requests();
    assert_eq!(offered(&requests[0]), ["grep", "read"]);
    assert_eq!(offered(&requests[1]), ["grep", "read"], "the continued session got more tools");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn team_claims_are_atomic_through_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![]).await;
    let mut cfg = config(&server.url);
    let members: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    for m in &members {
        // No model: the runtime starts no member, so only these claims race (teams.rs runs them).
        cfg.agents.insert(m.clone(), AgentConfig { provider: "nowhere".into(), ..agent("worker") });
    }
    cfg.teams.insert("crew".into(), TeamConfig { lead: "main".into(), members: members.clone(), ..Default::default() });
    let gate = gate(dir.path(), cfg);
    let lead = as_agent(&gate, "main", "lead");
    let a = gate
        .call(&lead, "team_tasks", json!({"action": "create", "subject": "build it"}))
        .await
        .unwrap()
        .structured
        .unwrap();
    let a_id = a["created"]["id"].as_i64().unwrap();
    let b = gate
        .call(&lead, "team_tasks", json!({"action": "create", "subject": "ship it", "blocked_by": [a_id]}))
        .await
        .unwrap()
        .structured
        .unwrap();
    assert_eq!(b["created"]["status"], "blocked");
    let w0 = as_agent(&gate, "w0", "w0");
    let err = gate.call(&w0, "team_tasks", json!({"action": "create", "subject": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("only the lead"), "{err}");
    let claims = members.iter().map(|m| {
        let gate = gate.clone();
        let ctx = as_agent(&gate, m, m);
        tokio::spawn(
            async move { gate.call(&ctx, "team_tasks", json!({"action": "claim", "task_id": a_id})).await.is_ok() },
        )
    });
    let mut winners = 0;
    for c in claims {
        winners += usize::from(c.await.unwrap());
    }
    assert_eq!(winners, 1);
    let tasks = gate.call(&lead, "team_tasks", json!({"action": "list"})).await.unwrap().structured.unwrap();
    let owner = tasks["tasks"][0]["owner"].as_str().unwrap().to_owned();
    let owner_ctx = as_agent(&gate, &owner, &owner);
    gate.call(&owner_ctx, "team_tasks", json!({"action": "complete", "task_id": a_id, "result": "built"}))
        .await
        .unwrap();
    let tasks =
        gate.call(&lead, "team_tasks", json!({"action": "search", "query": "ship"})).await.unwrap().structured.unwrap();
    assert_eq!(tasks["tasks"][0]["status"], "pending", "unblocked");
    gate.call(&owner_ctx, "team_message", json!({"action": "send", "to": "main", "content": "built"})).await.unwrap();
    let read = gate.call(&lead, "team_message", json!({"action": "read"})).await.unwrap().structured.unwrap();
    let contents: Vec<&str> =
        read["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(contents[0].starts_with(&format!("teammate:{owner} completed task #{a_id}")), "{contents:?}");
    assert_eq!(contents[1], "built");
    let outsider = as_agent(&gate, "nobody", "n");
    assert!(gate.call(&outsider, "team_message", json!({"action": "read"})).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_api_on_loopback() {
    // A loopback server answering in the Messages API's documented format (content blocks,
    // `tool_use`, `stop_reason`, `usage.input_tokens`): a test double for a commercial API.
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        Reply::Json(json!({"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Let me echo."}, {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"message": "hi"}}],
            "usage": {"input_tokens": 12, "output_tokens": 6}})),
        Reply::Json(json!({"id": "msg_2", "type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "It said hi."}], "usage": {"input_tokens": 20, "output_tokens": 4}})),
    ])
    .await;
    let mut cfg = config(&server.url.replace("/v1", ""));
    let p = cfg.providers.get_mut("mock").unwrap();
    p.kind = ProviderKind::Anthropic;
    let gate = gate(dir.path(), cfg);
    let out = gate.agents().unwrap().run(RunSpec::new("main", "echo hi"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str(), out.usage.input_tokens), (RunStatus::Done, "It said hi.", 32));
    let second = &server.requests()[1];
    assert_eq!(second["system"], "Be brief.");
    let turns = second["messages"].as_array().unwrap();
    let result: &Value = &turns.last().unwrap()["content"][0];
    assert_eq!((result["type"].as_str(), result["tool_use_id"].as_str()), (Some("tool_result"), Some("toolu_1")));
    assert_eq!(result["content"], "hi");
    assert!(
        server.requests()[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo" && t["input_schema"].is_object())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_mode_for_small_models() {
    let dir = tempfile::tempdir().unwrap();
    let step = |content: Value| {
        Reply::Json(
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}]}),
        )
    };
    let server = Scripted::start(vec![
        step(json!({"tool": "echo", "arguments": {"message": "constrained"}})),
        step(json!({"tool": "final_answer", "answer": "done"})),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.providers.get_mut("mock").unwrap().tool_calls = toolgate::agent::config::ToolCallMode::JsonSchema;
    cfg.agents.get_mut("main").unwrap().tools = vec!["echo".into(), "read".into()];
    let gate = gate(dir.path(), cfg);
    let out = gate.agents().unwrap().run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str(), out.tool_calls), (RunStatus::Done, "done", 1));
    let first = &server.requests()[0];
    assert!(first.get("tools").is_none());
    assert_eq!(first["response_format"]["type"], "json_schema");
    assert_eq!(first["response_format"]["json_schema"]["schema"]["anyOf"].as_array().unwrap().len(), 3);
    let second = server.requests()[1]["messages"].to_string();
    assert!(second.contains("Tool `echo` returned") && second.contains("constrained"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_agent_run_sessions_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        call("echo", json!({"message": "from the cli"})),
        answer("cli answer"),
        call("subagents", json!({"action": "run", "task": "echo it"})),
        call("echo", json!({"message": "from the child"})),
        answer("child said it"),
        answer("second answer"),
    ])
    .await;
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            "[providers.mock]\nbase_url = \"{}\"\n\n[agents.main]\nprovider = \"mock\"\nmodel = \"m\"\ndescription = \"main\"\n",
            server.url
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_toolgate");
    let run = |args: Vec<String>| {
        let dir = dir.path().to_owned();
        async move { tokio::process::Command::new(bin).arg("--workspace").arg(&dir).args(args).output().await.unwrap() }
    };
    let out = run(vec!["agent".into(), "run".into(), "main".into(), "say it".into(), "--json".into()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"]["answer"], "cli answer");
    assert_eq!(v["calls"][0]["tool"], "echo");
    assert_eq!(v["calls"][0]["outcome"], "ok");
    let session = v["outcome"]["session"].as_str().unwrap().to_owned();
    let out = run(vec!["agent".into(), "sessions".into()]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains(&session));
    let out = run(vec!["agent".into(), "history".into(), session.clone()]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tool echo: from the cli") && text.contains("assistant: cli answer"), "{text}");
    // The conversation's next message; the summary shows the sub-agent's calls too.
    let out = run(vec!["agent".into(), "send".into(), session.clone(), "and now?".into(), "--json".into()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["outcome"]["answer"].as_str(), v["outcome"]["session"].as_str()),
        (Some("second answer"), Some(session.as_str()))
    );
    let calls = v["calls"].as_array().unwrap();
    assert!(calls.iter().any(|c| c["tool"] == "subagents"), "{calls:?}");
    assert!(calls.iter().any(|c| c["params"].as_str().unwrap().contains("from the child")), "{calls:?}");
}

/// The local model (`cargo xtask deps`): SmolLM2-135M-Instruct served by llama.cpp (xllamacpp)
/// on loopback, with schema-constrained steps. Tolerant of what the model says, strict on the
/// mechanics: its tool calls ran through the gate and were audited, sessions were recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_local_model_calls_tools_spawns_and_delegates_through_the_gate() {
    let (mut server, url) = llama::start(&[]).await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "The secret word is pineapple.\n").unwrap();
    let mut cfg = Config::default();
    let mut p = provider(&url);
    p.tool_calls = toolgate::agent::config::ToolCallMode::JsonSchema;
    p.max_tokens = Some(96);
    p.temperature = Some(0.0);
    p.timeout_secs = 600.0;
    cfg.providers.insert("mock".into(), p);
    let mut main = agent("reads files");
    main.system_prompt = Some("You are a file assistant. Use the tools to look at files, then answer.".into());
    main.tools = vec!["read".into(), "grep".into(), "subagents".into(), "delegate".into()];
    main.max_iterations = 3;
    main.links = vec!["helper".into()];
    cfg.agents.insert("main".into(), main.clone());
    let mut helper = main.clone();
    helper.links.clear();
    helper.tools = vec!["read".into(), "grep".into()];
    cfg.agents.insert("helper".into(), helper);
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap().clone();
    let audited = |session: &str| {
        gate.flush_audit();
        store(dir.path()).audit_tail(1000).unwrap().into_iter().filter(|r| r.session == session).collect::<Vec<_>>()
    };

    // read
    let mut spec = RunSpec::new("main", "Use the read tool to read the file notes.txt.");
    spec.only_tools = Some(vec!["read".into()]);
    let out = rt.run(spec, &gate.context()).await.unwrap();
    assert_ne!(out.status, RunStatus::Failed, "{out:?}");
    let calls = audited(&out.session);
    assert!(out.tool_calls >= 1 && calls.len() as u32 == out.tool_calls, "{out:?} {calls:?}");
    assert!(calls.iter().all(|r| r.tool == "read" && r.agent == "main"), "{calls:?}");
    // grep
    let mut spec = RunSpec::new("main", "Use the grep tool to search for the pattern pineapple.");
    spec.only_tools = Some(vec!["grep".into()]);
    let out = rt.run(spec, &gate.context()).await.unwrap();
    let calls = audited(&out.session);
    assert!(out.tool_calls >= 1 && calls.len() as u32 == out.tool_calls, "{out:?} {calls:?}");
    assert!(calls.iter().all(|r| r.tool == "grep"), "{calls:?}");
    // a sub-agent, spawned as an MCP client would, runs on the model as a narrowed child
    let ctx = as_agent(&gate, "main", "real-parent");
    let run = gate.call(&ctx, "subagents", json!({"action": "run", "task": "Read the file notes.txt."})).await.unwrap();
    let child_id = run.meta.unwrap()["id"].as_str().unwrap().to_owned();
    let child = store(dir.path()).session(&child_id).unwrap().unwrap();
    assert_eq!((child.depth, child.parent.as_deref(), child.kind.as_str()), (1, Some("real-parent"), "subagent"));
    assert!(child.message_count >= 2 && child.output_tokens > 0, "{child:?}");
    assert!(audited(&child_id).iter().all(|r| r.agent == "main"));
    // a delegation to the linked agent
    let del = gate
        .call(&ctx, "delegate", json!({"action": "delegate", "agent": "helper", "task": "Read notes.txt."}))
        .await
        .unwrap();
    let del_id = del.meta.unwrap()["id"].as_str().unwrap().to_owned();
    let delegated = store(dir.path()).session(&del_id).unwrap().unwrap();
    assert_eq!((delegated.agent.as_str(), delegated.kind.as_str()), ("helper", "delegation"));
    assert!(audited(&del_id).iter().all(|r| r.agent == "helper"));
    drop(server.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
}

/// `toolgate call` builds its gate with the agent runtime bound: a sub-agent starts from the
/// command line too (it answered "not connected to a gate" when only `serve` bound it).
#[test]
fn cli_call_reaches_the_agent_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[providers.nowhere]\nbase_url = \"http://127.0.0.1:9/v1\"\nmax_retries = 0\n\
                  [agents.main]\ndescription = \"d\"\nprovider = \"nowhere\"\nmodel = \"none\"\n";
    std::fs::write(dir.path().join("toolgate.toml"), config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(dir.path())
        .args(["--approval", "never", "call", "subagents", r#"{"action":"spawn","task":"look around"}"#])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"status\": \"running\"") && stdout.contains("\"id\""), "{stdout}");
}

fn last_user_message(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let m = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    m["content"].as_str().unwrap().to_owned()
}

fn system_message(request: &Value) -> String {
    request["messages"][0]["content"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluate_loop_revises_until_the_evaluator_approves() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        answer("Our new plan is here."),
        answer("REJECTED: mention the price"),
        answer("Our new plan is here, for $5 a month."),
        answer("**APPROVED**"),
        answer("Draft."),
        answer("REJECTED: still too vague"),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.agents.get_mut("main").unwrap().links = vec!["writer".into(), "critic".into()];
    cfg.agents.insert("writer".into(), agent("writes announcements"));
    cfg.agents.insert("critic".into(), agent("reviews announcements"));
    cfg.agents.insert("loner".into(), agent("no link to it"));
    let gate = gate(dir.path(), cfg);
    let ctx = as_agent(&gate, "main", "m-1");
    let params = json!({"generator": "writer", "evaluator": "critic", "task": "Announce the plan.", "criteria": "mentions the price"});
    let out = gate.call(&ctx, "evaluate_loop", params.clone()).await.unwrap();
    let v = out.meta.clone().unwrap();
    assert_eq!((v["approved"].as_bool(), v["rounds"].as_u64()), (Some(true), Some(2)), "{v}");
    assert_eq!(v["output"], "Our new plan is here, for $5 a month.");
    assert!(out.text_content().contains("[approved after 2 round(s)]"), "{}", out.text_content());
    let requests = server.requests();
    assert!(last_user_message(&requests[1]).contains("Our new plan is here."), "the evaluator reads the draft");
    let revise = last_user_message(&requests[2]);
    assert!(revise.contains("mention the price") && revise.contains("Our new plan is here."), "{revise}");
    // Rounds run out: the last draft and feedback come back, not approved.
    let mut once = params.clone();
    once["max_rounds"] = json!(1);
    let v = gate.call(&ctx, "evaluate_loop", once).await.unwrap().meta.unwrap();
    assert_eq!((v["approved"].as_bool(), v["feedback"].as_str()), (Some(false), Some("still too vague")), "{v}");
    // Both agents need a link from the caller, and the rounds are capped at 5.
    let mut unlinked = params.clone();
    unlinked["evaluator"] = json!("loner");
    let err = gate.call(&ctx, "evaluate_loop", unlinked).await.unwrap_err();
    assert!(err.to_string().contains("no delegation link to `loner`"), "{err}");
    let mut many = params;
    many["max_rounds"] = json!(9);
    let err = gate.call(&ctx, "evaluate_loop", many).await.unwrap_err();
    assert!(err.to_string().contains("max_rounds"), "{err}");
    assert_eq!(server.requests().len(), 6, "refused loops never reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quality_gates_send_feedback_and_block_or_annotate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        // 1. A command gate (blocking, 1 retry): the first answer lacks PASS, the revision has it.
        answer("draft"),
        answer("PASS: revised"),
        // 2. A reviewer agent gate: rejected once, approved after the revision.
        answer("v1"),
        answer("REJECTED: add tests"),
        answer("v2 with tests"),
        answer("APPROVED"),
        // 3. Still failing after the retry: the delegating agent gets an error.
        answer("nope"),
        answer("still nope"),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.agents.get_mut("main").unwrap().links = vec!["helper".into()];
    cfg.agents.get_mut("main").unwrap().quality_gates = vec![toolgate::agent::QualityGate {
        command: Some("printf '%s' \"$TOOLGATE_RESULT\" | grep -c PASS".into()),
        block_on_failure: true,
        max_retries: 1,
        ..Default::default()
    }];
    cfg.agents.insert("helper".into(), agent("helps"));
    cfg.agents.insert("qa".into(), agent("reviews"));
    let gate_cfg = cfg.clone();
    let gate1 = gate(dir.path(), gate_cfg);
    let ctx = as_agent(&gate1, "main", "m-1");
    let delegate = json!({"action": "delegate", "agent": "helper", "task": "write it"});
    let out = gate1.call(&ctx, "delegate", delegate.clone()).await.unwrap();
    assert!(out.text_content().contains("PASS: revised"), "{}", out.text_content());
    let ask = last_user_message(&server.requests()[1]);
    assert!(ask.contains("A quality check (command") && ask.contains("exit code 1"), "{ask}");
    gate1.flush_audit();
    let execs: Vec<_> = store(dir.path()).audit_tail(100).unwrap().into_iter().filter(|r| r.tool == "exec").collect();
    assert_eq!(execs.len(), 2, "the gate's command ran through the gate, audited");
    assert!(execs.iter().all(|r| r.agent == "main" && r.session == "m-1"), "{execs:?}");
    assert!(!execs[0].params.contains("draft"), "the result is passed as a secret env value: {}", execs[0].params);
    gate1.shutdown();

    // A reviewer agent; its own run skips the gates (no recursion).
    let mut cfg2 = cfg.clone();
    cfg2.agents.get_mut("main").unwrap().quality_gates = vec![toolgate::agent::QualityGate {
        kind: toolgate::agent::config::GateKind::Agent,
        agent: Some("qa".into()),
        block_on_failure: true,
        max_retries: 1,
        ..Default::default()
    }];
    let dir2 = tempfile::tempdir().unwrap();
    let gate2 = gate(dir2.path(), cfg2);
    let ctx = as_agent(&gate2, "main", "m-2");
    let out = gate2.call(&ctx, "delegate", delegate.clone()).await.unwrap();
    assert!(out.text_content().contains("v2 with tests"), "{}", out.text_content());
    let requests = server.requests();
    assert!(last_user_message(&requests[3]).contains("v1"), "the reviewer read the work");
    assert!(last_user_message(&requests[4]).contains("add tests"), "the delegate read the feedback");
    let qa = store(dir2.path())
        .sessions(&toolgate::store::SessionFilter { agent: Some("qa"), limit: 10, ..Default::default() })
        .unwrap();
    assert_eq!(qa.len(), 2, "one review per version");
    assert!(qa.iter().all(|s| s.parent.as_deref() == Some("m-2") && s.kind == "delegation"), "{qa:?}");

    // Blocking and still failing after the retry: an error for the delegating model.
    let err_text = gate1_like_failure(&cfg, &delegate).await;
    assert!(err_text.contains("quality gate (command") && err_text.contains("after 1 revision"), "{err_text}");
}

/// Runs case 3 of `quality_gates_send_feedback_and_block_or_annotate` in a fresh gate.
async fn gate1_like_failure(cfg: &Config, delegate: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path(), cfg.clone());
    let ctx = as_agent(&gate, "main", "m-3");
    let out = gate.call(&ctx, "delegate", delegate.clone()).await.unwrap();
    out.text_content()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_moves_the_conversation_until_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        call("handoff", json!({"agent": "billing", "reason": "a billing question"})),
        answer("Refund issued."),
        answer("The invoice is on its way."),
        call("handoff", json!({"action": "clear"})),
        answer("Handing you back."),
        answer("Main agent here again."),
    ])
    .await;
    let mut cfg = config(&server.url);
    cfg.agents.get_mut("main").unwrap().links = vec!["billing".into()];
    cfg.agents.insert("billing".into(), agent("billing questions"));
    cfg.agents.insert("loner".into(), agent("no link"));
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "I was charged twice."), &gate.context()).await.unwrap();
    assert_eq!((out.agent.as_str(), out.answer.as_str(), out.status), ("billing", "Refund issued.", RunStatus::Done));
    let store = store(dir.path());
    let billing = store.session(&out.session).unwrap().unwrap();
    assert_eq!(billing.kind, "handoff");
    let conversation = billing.parent.clone().unwrap();
    let main = store.session(&conversation).unwrap().unwrap();
    assert_eq!((main.agent.as_str(), main.status.as_str()), ("main", "done"));
    let brief = last_user_message(&server.requests()[1]);
    assert!(brief.contains("a billing question") && brief.contains("charged twice"), "{brief}");
    // The user's next message to the conversation goes to billing...
    let next = rt.send(&conversation, "And the invoice?", None).await.unwrap();
    assert_eq!((next.agent.as_str(), next.answer.as_str()), ("billing", "The invoice is on its way."));
    // ...until billing hands it back.
    let back = rt.send(&conversation, "Something else.", None).await.unwrap();
    assert_eq!(back.answer, "Handing you back.");
    let main_again = rt.send(&conversation, "Hello?", None).await.unwrap();
    assert_eq!((main_again.agent.as_str(), main_again.answer.as_str()), ("main", "Main agent here again."));
    // Refused: no link, a sub-agent, a session that is not an agent's, clearing what was not handed over.
    let ctx = as_agent(&gate, "main", &conversation);
    let err = gate.call(&ctx, "handoff", json!({"agent": "loner", "reason": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("no link to `loner`") && err.to_string().contains("billing"), "{err}");
    let mut sub = gate.context().subagent("billing");
    sub.identity.session = conversation.clone();
    let err = gate.call(&sub, "handoff", json!({"agent": "main", "reason": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("handoff") || err.to_string().contains("sub-agent"), "{err}");
    let err = gate.call(&as_agent(&gate, "main", "mcp-1"), "handoff", json!({"agent": "billing"})).await.unwrap_err();
    assert!(err.to_string().contains("inside an agent session"), "{err}");
    let err = gate.call(&ctx, "handoff", json!({"action": "clear"})).await.unwrap_err();
    assert!(err.to_string().contains("nothing to clear"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_and_team_briefings_search_and_per_user_links() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![answer("ok"), answer("ok"), answer("secret done")]).await;
    let mut cfg = config(&server.url);
    let many: Vec<String> = (0..20).map(|i| format!("worker-{i:02}")).collect();
    for w in &many {
        cfg.agents.insert(w.clone(), agent("general chores"));
    }
    cfg.agents.insert("invoice-helper".into(), agent("Handles billing: refunds, invoices and charges."));
    let mut links = many.clone();
    links.push("invoice-helper".into());
    cfg.agents.get_mut("main").unwrap().links = links;
    let mut small = agent("a lead with a small crew");
    small.links = vec!["worker-00".into()];
    cfg.agents.insert("lead".into(), small);
    cfg.teams.insert(
        "crew".into(),
        TeamConfig { lead: "lead".into(), members: vec!["worker-01".into()], ..Default::default() },
    );
    cfg.agents.insert("secret".into(), agent("only for alice"));
    cfg.agent_links.push(AgentLink {
        from: "main".into(),
        to: "secret".into(),
        allow_users: vec!["alice".into()],
        ..Default::default()
    });
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap().clone();
    rt.run(RunSpec::new("main", "hi"), &gate.context()).await.unwrap();
    rt.run(RunSpec::new("lead", "hi"), &gate.context()).await.unwrap();
    let requests = server.requests();
    let main_system = system_message(&requests[0]);
    assert!(main_system.starts_with("Be brief.") && main_system.contains("# DELEGATION.md"), "{main_system}");
    assert!(main_system.contains("delegate_search") && !main_system.contains("worker-03"), "22 targets: search them");
    assert!(!main_system.contains("TEAM.md"), "main leads no team");
    let lead_system = system_message(&requests[1]);
    assert!(lead_system.contains("- `worker-00`: general chores"), "few targets: listed inline: {lead_system}");
    assert!(lead_system.contains("# TEAM.md") && lead_system.contains("`worker-01`"), "{lead_system}");
    // delegate_search ranks by name and description.
    let ctx = as_agent(&gate, "main", "m-1");
    let found = gate
        .call(&ctx, "delegate_search", json!({"query": "refund a double charge on an invoice"}))
        .await
        .unwrap()
        .structured
        .unwrap();
    assert_eq!(found["agents"][0]["agent"], "invoice-helper", "{found}");
    assert_eq!(found["of"], 21, "the link to `secret` is closed to this user");
    // Per-user link settings: the link to `secret` is alice's only.
    let delegate = json!({"action": "delegate", "agent": "secret", "task": "x"});
    let err = gate.call(&ctx, "delegate", delegate.clone()).await.unwrap_err();
    assert!(err.to_string().contains("no delegation link to `secret`"), "{err}");
    let mut alice = ctx.clone();
    alice.identity.user = "alice".into();
    let out = gate.call(&alice, "delegate", delegate).await.unwrap();
    assert!(out.text_content().contains("secret done"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_keeps_its_narrowing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        call("subagents", json!({"action": "run", "task": "look", "agent": "power"})),
        answer("looked"),
        answer("main done"),
        answer("looked again"),
        answer("research done"),
        answer("research again"),
    ])
    .await;
    let mut cfg: Config = toml::from_str("[tools.agents.main]\ndeny = [\"write\", \"edit\"]\n").unwrap();
    cfg.providers.insert("mock".into(), provider(&server.url));
    cfg.agents.insert("main".into(), agent("main"));
    cfg.agents.insert("power".into(), agent("may write"));
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    let store = store(dir.path());
    let child = &store
        .sessions(&toolgate::store::SessionFilter { parent: Some(&out.session), limit: 10, ..Default::default() })
        .unwrap()[0];
    let names = |r: &Value| -> Vec<String> {
        r["tools"].as_array().map_or_else(Vec::new, |t| {
            t.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect()
        })
    };
    assert!(!names(&server.requests()[1]).contains(&"write".to_owned()), "power under main cannot write");
    rt.send(&child.id, "look again", None).await.unwrap();
    let continued = names(&server.requests()[3]);
    assert!(continued.contains(&"read".to_owned()), "{continued:?}");
    assert!(!continued.contains(&"write".to_owned()), "still intersected with main's policy: {continued:?}");
    // A research sub-agent continued still has only the four read-only tools.
    let ctx = as_agent(&gate, "main", &out.session);
    gate.call(&ctx, "sessions_spawn", json!({"prompt": "find it"})).await.unwrap();
    let spawned = &store
        .sessions(&toolgate::store::SessionFilter { kind: Some("spawn"), limit: 10, ..Default::default() })
        .unwrap()[0];
    rt.send(&spawned.id, "more", None).await.unwrap();
    let mut research = names(&server.requests()[5]);
    research.sort();
    assert!(research.contains(&"read".to_owned()), "{research:?}");
    assert!(research.iter().all(|t| toolgate::agent::RESEARCH_TOOLS.contains(&t.as_str())), "{research:?}");
}

/// The agent tools served over MCP to the official Python client: it runs a sub-agent, a
/// delegation and an evaluate loop of toolgate agents (on the scripted model), and a handoff
/// outside an agent session is a tool error it can read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_runs_toolgate_agents() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        answer("the sub-agent's answer"),
        answer("the delegate's answer"),
        answer("a draft"),
        answer("APPROVED"),
    ])
    .await;
    let agent_toml = |name: &str, extra: &str| {
        format!("[agents.{name}]\nprovider = \"mock\"\nmodel = \"m\"\ndescription = \"{name}\"\n{extra}\n")
    };
    let config = format!(
        "[identity]\nagent = \"main\"\n[providers.mock]\nbase_url = \"{}\"\n{}{}{}{}",
        server.url,
        agent_toml("main", "links = [\"helper\", \"writer\", \"critic\"]"),
        agent_toml("helper", ""),
        agent_toml("writer", ""),
        agent_toml("critic", ""),
    );
    std::fs::write(dir.path().join("toolgate.toml"), config).unwrap();
    let calls = json!([
        ["subagents", {"action": "run", "task": "look around"}],
        ["delegate", {"action": "delegate", "agent": "helper", "task": "help"}],
        ["evaluate_loop", {"generator": "writer", "evaluator": "critic", "task": "write", "criteria": "short"}],
        ["handoff", {"agent": "helper", "reason": "x"}],
        ["agents_list", {}],
    ]);
    let calls = calls.to_string();
    let args = [env!("CARGO_BIN_EXE_toolgate").as_ref(), dir.path().as_os_str(), calls.as_ref()];
    let v = python::report("agent_client.py", args).await;
    let tools: Vec<&str> = v["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for t in ["agents_list", "subagents", "delegate", "delegate_search", "evaluate_loop", "handoff", "team_tasks"] {
        assert!(tools.contains(&t), "{t} not served: {tools:?}");
    }
    let r = &v["results"];
    assert!(r[0]["is_error"] == false && r[0]["text"].as_str().unwrap().contains("the sub-agent's answer"), "{}", r[0]);
    assert!(r[1]["is_error"] == false && r[1]["text"].as_str().unwrap().contains("the delegate's answer"), "{}", r[1]);
    assert!(r[2]["text"].as_str().unwrap().contains("[approved after 1 round(s)]"), "{}", r[2]);
    assert!(r[3]["is_error"] == true && r[3]["text"].as_str().unwrap().contains("inside an agent session"), "{}", r[3]);
    assert!(r[4]["text"].as_str().unwrap().contains("\"can_delegate\": true"), "{}", r[4]);
    // Every call was audited, the sub-agent's and delegates' sessions recorded.
    let store = store(dir.path());
    let audited: Vec<String> = store.audit_tail(100).unwrap().into_iter().map(|r| r.tool).collect();
    for t in ["subagents", "delegate", "evaluate_loop", "handoff", "agents_list"] {
        assert!(audited.iter().any(|a| a == t), "{t} not audited: {audited:?}");
    }
    let sessions = store.sessions(&toolgate::store::SessionFilter { limit: 10, ..Default::default() }).unwrap();
    let kinds: Vec<(&str, &str)> = sessions.iter().map(|s| (s.agent.as_str(), s.kind.as_str())).collect();
    assert_eq!(sessions.len(), 4, "{kinds:?}");
    assert!(kinds.contains(&("main", "subagent")) && kinds.contains(&("helper", "delegation")), "{kinds:?}");
}

/// A library user's own loop: it reads a file through the gate and answers. The runtime keeps
/// the session and the narrowing; the read is audited as the sub-agent's.
#[derive(Debug)]
struct ReadingRunner;

#[async_trait::async_trait]
impl toolgate::agent::AgentRunner for ReadingRunner {
    async fn run(
        &self,
        req: toolgate::agent::RunRequest<'_>,
    ) -> Result<toolgate::agent::RunReply, toolgate::agent::AgentError> {
        assert!(req.tools.iter().any(|t| t.name == "read"));
        let out = req.caller.call(req.ctx, "read", json!({"path": "notes.txt"})).await;
        let text = out.map(|o| o.text_content()).unwrap_or_else(|e| e.to_string());
        // A tool the sub-agent may not see is refused by the gate even from a custom loop.
        let refused = req.caller.call(req.ctx, "subagents", json!({"action": "list"})).await.is_err();
        Ok(toolgate::agent::RunReply {
            answer: format!("{} read: {} (subagents refused: {refused})", req.agent, text.trim()),
            iterations: 1,
            tool_calls: 2,
            ..Default::default()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn your_own_runner_runs_the_agents_through_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the word is kiwi\n").unwrap();
    let cfg = config("http://127.0.0.1:9/v1");
    let gate = gate(dir.path(), cfg);
    gate.agents().unwrap().set_runner(Arc::new(ReadingRunner));
    let ctx = as_agent(&gate, "main", "m-1");
    let out = gate.call(&ctx, "subagents", json!({"action": "run", "task": "read the notes"})).await.unwrap();
    let text = out.text_content();
    assert!(text.contains("main read:") && text.contains("kiwi") && text.contains("subagents refused: true"), "{text}");
    gate.flush_audit();
    let store = store(dir.path());
    let child = &store
        .sessions(&toolgate::store::SessionFilter { parent: Some("m-1"), limit: 10, ..Default::default() })
        .unwrap()[0];
    assert_eq!((child.kind.as_str(), child.status.as_str(), child.depth), ("subagent", "done", 1));
    let rows: Vec<_> = store.audit_tail(100).unwrap().into_iter().filter(|r| r.session == child.id).collect();
    let seen: Vec<(&str, &str)> = rows.iter().map(|r| (r.tool.as_str(), r.outcome.as_str())).collect();
    assert!(seen.contains(&("read", "ok")) && seen.iter().any(|(t, o)| *t == "subagents" && *o != "ok"), "{seen:?}");
    let last = store.session_messages(&child.id, 1).unwrap();
    assert!(last[0].role == "assistant" && last[0].content.contains("kiwi"), "the answer is in the session");
}

/// A run that stops in the middle of a tool call (its future dropped: what a dying process
/// leaves) has stored none of that turn, so the session, closed as an orphan and continued,
/// sends the model a well-formed conversation: no tool call without its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_mid_call_leaves_a_transcript_that_continues_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![
        // The parent waits on a sub-agent whose model is slow: the run is dropped meanwhile.
        call("subagents", json!({"action": "run", "task": "slow"})),
        Reply::Delay(Duration::from_secs(30), Box::new(answer("too late"))),
        answer("continued"),
    ])
    .await;
    let gate = gate(dir.path(), config(&server.url));
    let rt = gate.agents().unwrap().clone();
    let ctx = gate.context();
    let run = tokio::time::timeout(Duration::from_millis(1500), rt.run(RunSpec::new("main", "go"), &ctx));
    assert!(run.await.is_err(), "the run was still in its tool call");
    let store = store(dir.path());
    let filter = toolgate::store::SessionFilter { kind: Some("run"), ..Default::default() };
    let session = store.sessions(&filter).unwrap().remove(0).id;
    let roles: Vec<String> = store.session_messages(&session, 0).unwrap().into_iter().map(|m| m.role).collect();
    assert_eq!(roles, ["system", "user"], "the interrupted turn is not half stored");
    // What `sessions_fail_orphans` does for a process that ended.
    store.session_finish(&session, "failed", None, Some("the process running it ended"), 1).unwrap();
    let out = rt.send(&session, "go on", None).await.unwrap();
    assert_eq!((out.status, out.answer.as_str()), (RunStatus::Done, "continued"), "{out:?}");
    let requests = server.requests();
    let messages = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    let called: Vec<&str> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .filter_map(|c| c["id"].as_str())
        .collect();
    let answered: Vec<&str> = messages.iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    assert_eq!(called, answered, "every tool call has its result: {messages:?}");
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "user"]);
}
