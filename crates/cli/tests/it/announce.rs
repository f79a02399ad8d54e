//! Sessions as the seeds describe them (issue 25, items 2, 3, 4 and 8), through `gate.call` and
//! the runtime with scripted OpenAI-compatible servers on loopback standing in for the models:
//! a background sub-agent reports back by itself into its parent's next model request, a
//! message to a running session is read before its next turn, the session tools work with no
//! `[agents]` at all, and a secret a model writes is redacted everywhere it is kept.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::agent::{AgentConfig, ProviderConfig, RunSpec, RunStatus};
use toolgate::config::Config;
use toolgate::core::CallContext;
use toolgate::store::{SessionFilter, SessionStore, Store};

use crate::support::scripted::{Reply, Scripted, answer, call};

fn provider(url: &str) -> ProviderConfig {
    ProviderConfig { base_url: url.to_owned(), max_retries: 1, timeout_secs: 20.0, ..Default::default() }
}

fn agent(provider: &str, description: &str) -> AgentConfig {
    AgentConfig { provider: provider.into(), model: "m".into(), description: description.into(), ..Default::default() }
}

/// `main` on the `parent` server and `helper` (a sub-agent it may spawn) on the `child` one, so
/// the two scripts do not race for one server's replies.
fn config(parent: &str, child: &str) -> Config {
    let mut c = Config::default();
    c.providers.insert("parent".into(), provider(parent));
    c.providers.insert("child".into(), provider(child));
    c.agents.insert("main".into(), agent("parent", "the main agent"));
    c.agents.insert("helper".into(), agent("child", "looks things up"));
    c
}

fn gate(dir: &std::path::Path, config: Config) -> Arc<Gate> {
    Gate::builder(dir).config(config).build_shared().unwrap()
}

fn later(secs: f64, reply: Reply) -> Reply {
    Reply::Delay(Duration::from_secs_f64(secs), Box::new(reply))
}

/// The user messages of a Chat Completions request.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// The JSON an agent tool answered with (its text is inside the untrusted-output boundary).
fn json_of(out: &toolgate::core::ToolOutput) -> Value {
    json_of_text(&out.text_content())
}

async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(v) = f() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_subagent_reports_back_into_the_parents_next_request_without_a_poll() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(dir.path().join(f), "x\n").unwrap();
    }
    // The parent spawns, then works on (each reply a second late, so the child, which answers
    // at once, has finished before the parent's later requests); it never polls.
    let parent = Scripted::start(vec![
        call("subagents", json!({"action": "spawn", "agent": "helper", "task": "find the port"})),
        later(1.0, call("read", json!({"path": "a.txt"}))),
        later(1.0, call("read", json!({"path": "b.txt"}))),
        later(1.0, call("read", json!({"path": "c.txt"}))),
        answer("the port is 8417"),
    ])
    .await;
    let child = Scripted::start(vec![answer("the port is 8417")]).await;
    let gate = gate(dir.path(), config(&parent.url, &child.url));
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "Which port?"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done, "{out:?}");

    let requests = parent.requests();
    assert_eq!(requests.len(), 5, "no extra turn: the announcement rides on a request the parent makes anyway");
    let first = requests
        .iter()
        .position(|r| user_messages(r).iter().any(|m| m.starts_with("[subagent:") && m.contains("the port is 8417")))
        .expect("the child's result reached the parent without a poll");
    assert!(first >= 1, "not before the child ran");
    let last = user_messages(requests.last().unwrap());
    assert_eq!(last.iter().filter(|m| m.starts_with("[subagent:")).count(), 1, "announced once: {last:?}");
    let announcement = last.iter().find(|m| m.starts_with("[subagent:")).unwrap();
    assert!(announcement.contains("`helper` finished (done)"), "{announcement}");
    let polled = requests.iter().flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default()).any(|m| {
        m["tool_calls"].as_array().into_iter().flatten().any(|c| {
            c["function"]["name"] == "subagents" && c["function"]["arguments"].as_str().unwrap_or("").contains("list")
        })
    });
    assert!(!polled, "the parent never listed its sub-agents");

    // The transcript keeps it where the model read it.
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    let kept = store.session_messages(&out.session, 0).unwrap();
    assert!(kept.iter().any(|m| m.role == "user" && m.content.starts_with("[subagent:")), "{kept:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_to_an_idle_session_waits_in_its_transcript() {
    let dir = tempfile::tempdir().unwrap();
    // The parent spawns and answers at once; the child answers two seconds later.
    let parent = Scripted::start(vec![
        call("subagents", json!({"action": "spawn", "agent": "helper", "task": "slow lookup"})),
        answer("started it"),
        answer("the helper said 12"),
    ])
    .await;
    let child = Scripted::start(vec![later(2.0, answer("it is 12"))]).await;
    let gate = gate(dir.path(), config(&parent.url, &child.url));
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "Look it up"), &gate.context()).await.unwrap();
    assert_eq!(out.answer, "started it");
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    until("the announcement in the idle parent's transcript", || {
        let messages = store.session_messages(&out.session, 0).unwrap();
        messages.iter().any(|m| m.role == "user" && m.content.contains("it is 12")).then_some(())
    })
    .await;
    // sessions_history shows it; the next turn of the conversation reads it.
    let mut ctx = gate.context();
    ctx.identity.agent = "main".into();
    let history = gate.call(&ctx, "sessions_history", json!({"session_id": out.session})).await.unwrap();
    assert!(history.text_content().contains("it is 12"), "{}", history.text_content());
    let next = rt.send(&out.session, "What did the helper say?", None).await.unwrap();
    assert_eq!(next.answer, "the helper said 12");
    let last = parent.requests().last().cloned().unwrap();
    let users = user_messages(&last);
    let at = users.iter().position(|m| m.contains("it is 12")).expect("the announcement is in the conversation");
    assert!(at < users.len() - 1, "before the new message: {users:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_send_to_a_running_session_is_read_before_its_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "y\n").unwrap();
    let parent = Scripted::start(vec![
        later(1.0, call("read", json!({"path": "a.txt"}))),
        later(1.0, call("read", json!({"path": "b.txt"}))),
        later(1.0, answer("done, and bananas")),
    ])
    .await;
    let gate = gate(dir.path(), config(&parent.url, &parent.url));
    let rt = gate.agents().unwrap().clone();
    let run = {
        let (rt, ctx) = (rt.clone(), gate.context());
        tokio::spawn(async move { rt.run(RunSpec::new("main", "Read the files"), &ctx).await })
    };
    let session = until("the running session", || {
        let filter = SessionFilter { agent: Some("main"), limit: 5, ..Default::default() };
        rt.sessions(&filter).unwrap().into_iter().find(|s| s.status == "running").map(|s| s.id)
    })
    .await;
    let mut ctx: CallContext = gate.context();
    ctx.identity.session = "mcp-other".into();
    let sent = gate
        .call(&ctx, "sessions_send", json!({"session_id": session, "message": "also mention bananas"}))
        .await
        .unwrap();
    let sent = json_of(&sent);
    assert_eq!(sent["status"], "queued", "{sent}");
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.status, RunStatus::Done);
    let requests = parent.requests();
    let seen = requests.iter().position(|r| user_messages(r).iter().any(|m| m == "also mention bananas"));
    assert!(seen.is_some_and(|i| i >= 1), "the queued message reached a later request: {requests:?}");

    // A hostile flood is bounded, with an error that says what to do.
    let again = parent.clone();
    // Two slow answers: CI (2026-11-30) once saw the flood never refused 0.4 s after the first
    // run, as if the second run's only slow answer had been taken by another model request and
    // it got an instant "(script exhausted)"; the cause is not established, so a failure below
    // prints every request the model saw.
    again.push([later(3.0, answer("slow")), later(3.0, answer("slow"))]);
    let run = {
        let (rt, ctx) = (rt.clone(), gate.context());
        tokio::spawn(async move { rt.run(RunSpec::new("main", "wait"), &ctx).await })
    };
    // Not the first run's session: its status may still read `running` for a moment after its
    // run returned, and messages to a session that ends are not bounded by its queue.
    let busy = until("the second run", || {
        let filter = SessionFilter { agent: Some("main"), limit: 5, ..Default::default() };
        rt.sessions(&filter).unwrap().into_iter().find(|s| s.status == "running" && s.id != session).map(|s| s.id)
    })
    .await;
    let mut refused = None;
    for i in 0..=toolgate::agent::MAX_QUEUED {
        if let Err(e) = gate.call(&ctx, "sessions_send", json!({"session_id": busy, "message": format!("m{i}")})).await
        {
            refused = Some((i, e.to_string()));
            break;
        }
    }
    let (at, error) = refused.unwrap_or_else(|| {
        let seen: Vec<Vec<String>> = parent.requests().iter().map(user_messages).collect();
        panic!(
            "the queue is bounded, but {} messages were taken; the model's requests (user messages): {seen:?}",
            toolgate::agent::MAX_QUEUED + 1
        )
    });
    assert_eq!(at, toolgate::agent::MAX_QUEUED);
    assert!(error.contains("messages waiting") && error.contains("send again"), "{error}");
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_a_model_writes_is_redacted_in_the_store_history_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "ghp_FAKEaB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY";
    let parent = Scripted::start(vec![
        call("subagents", json!({"action": "run", "agent": "helper", "task": "get the token"})),
        answer(&format!("The token is {secret}.")),
    ])
    .await;
    let child = Scripted::start(vec![answer(&format!("found it: {secret}"))]).await;
    let gate = gate(dir.path(), config(&parent.url, &child.url));
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("main", "Find the token"), &gate.context()).await.unwrap();
    assert!(!out.answer.contains(secret) && out.answer.contains("[REDACTED:"), "{}", out.answer);
    // What the child said reached the parent redacted (an agent-to-agent message).
    let to_parent = parent.requests()[1].to_string();
    assert!(!to_parent.contains(secret) && to_parent.contains("[REDACTED:"), "{to_parent}");

    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    for s in store.sessions(&SessionFilter { limit: 10, ..Default::default() }).unwrap() {
        for m in store.session_messages(&s.id, 0).unwrap() {
            assert!(!m.content.contains(secret), "stored in {}: {}", s.id, m.content);
        }
        assert!(!s.result.unwrap_or_default().contains(secret));
    }
    let mut ctx = gate.context();
    ctx.identity.agent = "main".into();
    let history = gate.call(&ctx, "sessions_history", json!({"session_id": out.session})).await.unwrap();
    assert!(!history.text_content().contains(secret));
    gate.flush_audit();
    let events: Vec<_> =
        store.audit_tail(100).unwrap().into_iter().filter(|r| r.tool == toolgate::store::TEXT_EVENT).collect();
    assert!(!events.is_empty() && events.iter().all(|e| e.decision.contains("github")), "{events:?}");
    assert!(store.audit_tail(100).unwrap().iter().all(|r| !format!("{r:?}").contains(secret)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_clients_session_gets_its_background_results_and_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let child = Scripted::start(vec![answer("lookup result: 7")]).await;
    let gate = gate(dir.path(), config(&child.url, &child.url));
    let mut ctx = gate.context();
    ctx.identity.session = "mcp-3f2a".into();
    let spawned = gate
        .call(&ctx, "subagents", json!({"action": "spawn", "agent": "helper", "task": "look it up"}))
        .await
        .unwrap();
    assert!(spawned.text_content().contains("running"), "{}", spawned.text_content());
    let history = until("the announcement kept for the MCP session", || {
        let rt = gate.agents().unwrap();
        rt.kept_announcements("local", "mcp-3f2a").first().map(|(_, t)| t.clone())
    })
    .await;
    assert!(history.starts_with("[subagent:") && history.contains("lookup result: 7"), "{history}");
    let shown = gate.call(&ctx, "sessions_history", json!({"session_id": "mcp-3f2a"})).await.unwrap();
    assert!(shown.text_content().contains("lookup result: 7"), "{}", shown.text_content());
    let status = gate.call(&ctx, "session_status", json!({})).await.unwrap();
    let status = json_of(&status);
    assert_eq!((status["id"].as_str(), status["kind"].as_str()), (Some("mcp-3f2a"), Some("mcp (HTTP session)")));
    assert!(status["calls"].as_u64().unwrap() >= 2, "{status}");
    assert_eq!(status["agent_sessions_started"], 1, "{status}");
    // Another session of the same user cannot read this one's history.
    let mut other = gate.context();
    other.identity.session = "mcp-9999".into();
    let refused = gate.call(&other, "sessions_history", json!({"session_id": "mcp-3f2a"})).await.unwrap_err();
    assert!(refused.to_string().contains("no session"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_tools_work_with_no_agents_configured() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(dir.path(), Config::default());
    let ctx = gate.context();
    let names: Vec<String> = gate.visible_tools(&ctx).into_iter().map(|s| s.name).collect();
    for tool in ["sessions_list", "sessions_history", "sessions_send", "session_status", "agents_list", "subagents"] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
    gate.call(&ctx, "echo", json!({"message": "hi"})).await.unwrap();
    let status = gate.call(&ctx, "sessions_status", json!({})).await.unwrap();
    let status = json_of(&status);
    assert_eq!(status["kind"], "cli or library", "{status}");
    assert!(status["calls"].as_u64().unwrap() >= 1, "{status}");
    for (tool, params) in [
        ("sessions_spawn", json!({"prompt": "look around"})),
        ("delegate", json!({"agent": "reviewer", "task": "review"})),
        ("subagents", json!({"action": "spawn", "task": "x"})),
    ] {
        let e = gate.call(&ctx, tool, params).await.unwrap_err().to_string();
        assert!(e.contains("[agents.main]") && e.contains("[providers.local]"), "{tool}: {e}");
    }
    let agents = gate.call(&ctx, "agents_list", json!({})).await.unwrap();
    let agents = json_of(&agents);
    assert_eq!(agents["agents"], json!([]));
    assert!(agents["note"].as_str().unwrap().contains("[agents.NAME]"), "{agents}");

    // The `minimal` profile is `session_status` alone, and now shows it.
    let mut config = Config::default();
    config.tools.profile = Some(toolgate::policy::Profile::Minimal);
    let minimal = Gate::builder(dir.path()).config(config).build_shared().unwrap();
    let names: Vec<String> = minimal.visible_tools(&minimal.context()).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["session_status"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_subagents_leave_the_list_when_archived_and_stay_in_history() {
    let dir = tempfile::tempdir().unwrap();
    let child = Scripted::start(vec![answer("first"), answer("second")]).await;
    for (minutes, listed) in [(60, true), (0, false)] {
        let mut config = config(&child.url, &child.url);
        config.agents_defaults.archive_after_minutes = minutes;
        let gate = gate(dir.path(), config);
        let mut ctx = gate.context();
        ctx.identity.session = format!("mcp-archive-{minutes}");
        let spawned =
            gate.call(&ctx, "subagents", json!({"action": "spawn", "agent": "helper", "task": "look"})).await.unwrap();
        let id = json_of(&spawned)["id"].as_str().unwrap().to_owned();
        let rt = gate.agents().unwrap().clone();
        let session = ctx.identity.session.clone();
        until("the child's announcement", || (!rt.kept_announcements("local", &session).is_empty()).then_some(()))
            .await;
        let list = gate.call(&ctx, "subagents", json!({"action": "list"})).await.unwrap();
        assert_eq!(
            list.text_content().contains(&id),
            listed,
            "archive_after_minutes = {minutes}: {}",
            list.text_content()
        );
        let history = gate.call(&ctx, "sessions_history", json!({"session_id": id})).await.unwrap();
        assert!(history.text_content().contains("\"role\""), "still in history: {}", history.text_content());
    }
}

/// Over MCP, as a client uses it: `toolgate serve` (stdio, the rmcp client) with a scripted model
/// for its one agent. The client spawns a sub-agent in the background, never polls it, and
/// finds its result in its own session's history; `session_status` names that session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_gets_its_background_result_in_its_own_sessions_history() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let model = Scripted::start(vec![answer("the build is green")]).await;
    let ws = tempfile::tempdir().unwrap();
    let config = format!(
        "[providers.local]\nbase_url = {:?}\nmax_retries = 1\n\n[agents.main]\nprovider = \"local\"\nmodel = \"m\"\ndescription = \"checks builds\"\n",
        model.url
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(ws.path()).args(["--approval", "never", "serve"]);
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.expect("MCP handshake");
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let Value::Object(map) = args else { unreachable!() };
            let result = client.call_tool(CallToolRequestParams::new(name).with_arguments(map)).await.unwrap();
            let text: String = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
            (result.is_error == Some(true), text)
        }
    };
    let (failed, spawned) = call("subagents", json!({"action": "spawn", "task": "is the build green?"})).await;
    assert!(!failed && spawned.contains("running"), "{spawned}");
    let (_, status) = call("session_status", json!({})).await;
    let session = json_of_text(&status)["id"].as_str().unwrap().to_owned();
    assert!(session.starts_with("mcp-stdio-"), "{status}");
    let mut history = String::new();
    for _ in 0..600 {
        history = call("sessions_history", json!({"session_id": session})).await.1;
        if history.contains("the build is green") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(history.contains("[subagent:") && history.contains("the build is green"), "{history}");
    let (_, status) = call("session_status", json!({})).await;
    assert_eq!(json_of_text(&status)["announcements"], 1, "{status}");
    client.cancel().await.unwrap();
}

fn json_of_text(text: &str) -> Value {
    let (start, end) = (text.find('{').expect(text), text.rfind('}').expect(text));
    serde_json::from_str(&text[start..=end]).expect(text)
}

/// A caller that gives up on `subagents run` (its call cancelled) cancels the child, which still
/// ends properly: its session is not left `running`, its task no longer counts as running, and
/// nothing sent to it later is queued for a loop that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_ends_the_child_properly() {
    let dir = tempfile::tempdir().unwrap();
    let child = Scripted::start(vec![later(30.0, answer("too late")), answer("continued")]).await;
    let gate = gate(dir.path(), config(&child.url, &child.url));
    let rt = gate.agents().unwrap().clone();
    let mut ctx = gate.context();
    ctx.identity.session = "mcp-waiting".into();
    let call = {
        let (gate, ctx) = (gate.clone(), ctx.clone());
        tokio::spawn(async move {
            gate.call(&ctx, "subagents", json!({"action": "run", "agent": "helper", "task": "slow"})).await
        })
    };
    let filter = SessionFilter { agent: Some("helper"), limit: 5, ..Default::default() };
    let id = until("the child running", || {
        rt.sessions(&filter).unwrap().into_iter().find(|s| s.status == "running").map(|s| s.id)
    })
    .await;
    ctx.cancel.cancel();
    call.abort();
    let status = until("the child to end", || {
        let s = rt.store().session(&id).unwrap().unwrap();
        (s.status != "running").then_some(s.status)
    })
    .await;
    assert_eq!(status, "cancelled");
    let listed = rt.list("mcp-waiting", false);
    assert!(listed.iter().all(|t| t.status != "running"), "{listed:?}");
    let mut other = gate.context();
    other.identity.session = "mcp-other".into();
    let sent = gate.call(&other, "sessions_send", json!({"session_id": id, "message": "go on"})).await.unwrap();
    assert!(!sent.text_content().contains("queued"), "continued, not queued for a gone loop: {}", sent.text_content());
}
