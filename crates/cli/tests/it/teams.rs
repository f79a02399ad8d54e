//! Teams that run (seed 000 §8; issue 25, item 5), through the real gate and runtime, with the
//! scripted OpenAI-compatible server on loopback answering each agent by its request (the
//! members run at once, so replies in a fixed order would not do).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::agent::{AgentConfig, ProviderConfig, RunSpec, TeamConfig};
use toolgate::config::Config;
use toolgate::core::{CallContext, Identity};
use toolgate::store::{SessionFilter, SessionStore, Store, TaskFilter, TaskOrder};

use crate::support::scripted::{Reply, Respond, Scripted, answer, call, calls};

/// A token the leak detector knows (GitHub's format; not a real one).
const SECRET: &str = "ghp_FAKEaB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY";

/// A config with agents `lead`, `w1` and `w2` on the scripted server (each with the system
/// prompt `You are NAME.`) and team `crew` of them, changed by `team`.
fn config(url: &str, team: impl FnOnce(&mut TeamConfig)) -> Config {
    let mut c = Config::default();
    // No retries: a 500 fails the run at once (the crash test).
    c.providers.insert(
        "mock".into(),
        ProviderConfig { base_url: url.to_owned(), max_retries: 0, timeout_secs: 20.0, ..Default::default() },
    );
    for name in ["lead", "w1", "w2"] {
        let a = AgentConfig {
            provider: "mock".into(),
            model: "m".into(),
            description: format!("{name} of the crew"),
            system_prompt: Some(format!("You are {name}.")),
            ..Default::default()
        };
        c.agents.insert(name.into(), a);
    }
    let mut t = TeamConfig { lead: "lead".into(), members: vec!["w1".into(), "w2".into()], ..Default::default() };
    team(&mut t);
    c.teams.insert("crew".into(), t);
    c
}

fn gate(dir: &std::path::Path, config: Config) -> Arc<Gate> {
    Gate::builder(dir).config(config).build_shared().unwrap()
}

fn store(dir: &std::path::Path) -> Store {
    Store::open(&dir.join(".toolgate/state.db")).unwrap()
}

fn as_agent(gate: &Gate, agent: &str, session: &str) -> CallContext {
    let mut ctx = gate.context();
    ctx.identity = Identity { agent: agent.into(), session: session.into(), ..ctx.identity };
    ctx
}

/// The agent a request is from, by its system prompt (`You are NAME.`).
fn who(req: &Value) -> String {
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    system.strip_prefix("You are ").and_then(|s| s.split('.').next()).unwrap_or_default().to_owned()
}

/// The role and text of a request's last message.
fn last(req: &Value) -> (String, String) {
    let m = req["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    (m["role"].as_str().unwrap_or_default().to_owned(), m["content"].as_str().unwrap_or_default().to_owned())
}

/// The id of the task in a `claim` result.
fn claimed_id(content: &str) -> i64 {
    let after = &content[content.find("\"claimed\"").unwrap()..];
    let at = after.find("\"id\"").unwrap() + 4;
    let digits: String =
        after[at..].chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

fn respond(f: impl Fn(Value) -> Reply + Send + Sync + 'static) -> Respond {
    let f = Arc::new(f);
    Arc::new(move |req| {
        let f = f.clone();
        Box::pin(async move { f(req) })
    })
}

/// Polls `check` until it gives a value, failing after 30 s with `what`.
async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn team_sessions(store: &Store, agent: &str) -> Vec<toolgate::store::SessionRecord> {
    store.sessions(&SessionFilter { agent: Some(agent), kind: Some("team"), ..Default::default() }).unwrap()
}

/// Every message the lead wrote to the `crew` board's mailbox reader `lead` can see.
fn lead_mail(store: &Store) -> Vec<(String, String)> {
    store.team_messages("crew", "lead", Some(0)).unwrap().into_iter().map(|m| (m.from, m.content)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn posting_two_tasks_runs_both_members_at_once_and_the_lead_gets_both_results() {
    let dir = tempfile::tempdir().unwrap();
    let claimed = Arc::new(AtomicUsize::new(0));
    let counter = claimed.clone();
    let respond: Respond = Arc::new(move |req| {
        let claimed = counter.clone();
        Box::pin(async move {
            let (role, content) = last(&req);
            match who(&req).as_str() {
                "lead" if role == "user" && content.contains("teammate:") => answer("synthesized the results"),
                "lead" if role == "user" => calls(&[
                    ("team_tasks", json!({"action": "create", "subject": "Write the parser", "priority": 2})),
                    ("team_tasks", json!({"action": "create", "subject": "Write the docs"})),
                ]),
                "lead" => answer("posted two tasks"),
                member if role == "user" => {
                    assert!(
                        content.starts_with("[Team message from lead]: please claim a task"),
                        "{member}: {content}"
                    );
                    call("team_tasks", json!({"action": "claim"}))
                }
                member if content.contains("\"completed\"") => answer(&format!("{member} is done")),
                member if content.contains("\"claimed\"") => {
                    // Both members hold a task before either completes: they run at once.
                    claimed.fetch_add(1, Ordering::SeqCst);
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while claimed.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    if claimed.load(Ordering::SeqCst) < 2 {
                        return answer("the other member never claimed a task");
                    }
                    let id = claimed_id(&content);
                    call(
                        "team_tasks",
                        json!({"action": "complete", "task_id": id, "result": format!("{member} finished #{id}")}),
                    )
                }
                member => answer(&format!("{member}: nothing for me ({content})")),
            }
        })
    });
    let server = Scripted::by_request(respond).await;
    let gate = gate(dir.path(), config(&server.url, |_| {}));
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("lead", "Plan the release"), &gate.context()).await.unwrap();
    assert_eq!(out.answer, "posted two tasks");
    // The lead gets a model turn with both results, without asking for them.
    let lead_session = out.session.clone();
    let turns_with_results = wait_for("the lead's turns with both results", || {
        let seen: Vec<String> = server
            .requests()
            .into_iter()
            .filter(|r| who(r) == "lead")
            .map(|r| last(&r))
            .filter(|(role, c)| role == "user" && c.contains("teammate:"))
            .map(|(_, c)| c)
            .collect();
        let all = seen.join("\n");
        (all.contains("teammate:w1 completed task") && all.contains("teammate:w2 completed task")).then_some(seen)
    })
    .await;
    assert!(turns_with_results.len() <= 2, "{turns_with_results:?}");
    let store = store(dir.path());
    wait_for("the lead's synthesis stored", || {
        let msgs = store.session_messages(&lead_session, 0).unwrap();
        let answered = msgs.iter().filter(|m| m.role == "assistant" && m.content == "synthesized the results").count();
        // One answer per turn that carried results.
        (answered == turns_with_results.len() && store.session(&lead_session).unwrap()?.status == "done").then_some(())
    })
    .await;
    // Both tasks are done, each by a different member, each in its own `team` session.
    let tasks = store.team_tasks("crew", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
    assert!(tasks.iter().all(|t| t.status == "done"), "{tasks:?}");
    let mut owners: Vec<&str> = tasks.iter().filter_map(|t| t.owner.as_deref()).collect();
    owners.sort_unstable();
    assert_eq!(owners, ["w1", "w2"]);
    assert_eq!(claimed.load(Ordering::SeqCst), 2);
    for m in ["w1", "w2"] {
        let sessions = team_sessions(&store, m);
        assert_eq!(sessions.len(), 1, "{m}: {sessions:?}");
        assert_eq!(sessions[0].parent.as_deref(), Some(lead_session.as_str()), "a child of the lead's session");
        assert_eq!(sessions[0].status, "done");
    }
    // The lead never polled: its only tool calls were the two posts. Only it has TEAM.md.
    for r in server.requests() {
        let system = r["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
        assert_eq!(system.contains("# TEAM.md"), who(&r) == "lead", "{system}");
        if who(&r) != "lead" {
            continue;
        }
        for m in r["messages"].as_array().unwrap() {
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(args["action"], "create", "{c}");
            }
        }
    }
    // The results are in the lead's mailbox too.
    let mail = lead_mail(&store);
    assert_eq!(mail.iter().filter(|(_, c)| c.starts_with("teammate:")).count(), 2, "{mail:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_filters_orders_and_searches_and_the_mailbox_reads_unread_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::start(vec![]).await;
    let mut cfg = config(&server.url, |_| {});
    // Members without a model: the runtime starts nobody, the test plays them.
    for m in ["w1", "w2"] {
        cfg.agents.get_mut(m).unwrap().provider = "nowhere".into();
    }
    let gate = gate(dir.path(), cfg);
    let lead = as_agent(&gate, "lead", "lead-1");
    let (w1, w2) = (as_agent(&gate, "w1", "w1-1"), as_agent(&gate, "w2", "w2-1"));
    let tasks = |ctx: &CallContext, args: Value| {
        let (gate, ctx) = (gate.clone(), ctx.clone());
        async move { gate.call(&ctx, "team_tasks", args).await.map(|o| o.structured.unwrap()) }
    };
    let subjects = |v: &Value| -> Vec<String> {
        v["tasks"].as_array().unwrap().iter().map(|t| t["subject"].as_str().unwrap().to_owned()).collect()
    };
    for (subject, description, priority) in [
        ("Fix the login bug", "users are logged out after a minute", 1),
        ("Write release notes", "summarize the changes since 1.2", 0),
        ("Profile the parser", "the parser is slow on large config files", 5),
    ] {
        let created = tasks(
            &lead,
            json!({"action": "create", "subject": subject, "description": description, "priority": priority}),
        )
        .await
        .unwrap();
        assert!(created["note"].as_str().unwrap().contains("members are started"), "{created}");
    }
    let list = tasks(&w1, json!({"action": "list"})).await.unwrap();
    assert_eq!(subjects(&list), ["Profile the parser", "Fix the login bug", "Write release notes"], "by priority");
    let newest = tasks(&w1, json!({"action": "list", "order": "newest"})).await.unwrap();
    assert_eq!(subjects(&newest), ["Profile the parser", "Write release notes", "Fix the login bug"]);
    // Claim the next (highest priority) task, complete it: it leaves the active list.
    let claimed = tasks(&w1, json!({"action": "claim"})).await.unwrap();
    assert_eq!(claimed["claimed"]["subject"], "Profile the parser");
    assert!(
        claimed["claimed"]["lease_until_ms"].as_i64().unwrap() > claimed["claimed"]["claimed_ms"].as_i64().unwrap()
    );
    let id = claimed["claimed"]["id"].as_i64().unwrap();
    tasks(&w1, json!({"action": "complete", "task_id": id, "result": "hot loop in the tokenizer: fixed"}))
        .await
        .unwrap();
    assert_eq!(
        subjects(&tasks(&w2, json!({"action": "list", "filter": "active"})).await.unwrap()),
        ["Fix the login bug", "Write release notes"]
    );
    assert_eq!(
        subjects(&tasks(&w2, json!({"action": "list", "filter": "completed"})).await.unwrap()),
        ["Profile the parser"]
    );
    assert_eq!(subjects(&tasks(&w2, json!({"action": "list", "filter": "all", "limit": 1})).await.unwrap()).len(), 1);
    let err = tasks(&w2, json!({"action": "list", "filter": "mine"})).await.unwrap_err().to_string();
    assert!(err.contains("filter"), "{err}");
    // Full-text search over subject, description and result, taking words literally.
    let found = tasks(&w2, json!({"action": "search", "query": "tokenizer"})).await.unwrap();
    assert_eq!(subjects(&found), ["Profile the parser"], "the result is searched");
    let found = tasks(&w2, json!({"action": "search", "query": "logged OUT"})).await.unwrap();
    assert_eq!(subjects(&found), ["Fix the login bug"]);
    for hostile in ["\"", "NEAR(parser bug)", "parser*", "-bug", "subject:release", "a\" OR \"b"] {
        let found = tasks(&w2, json!({"action": "search", "query": hostile})).await;
        assert!(found.is_ok(), "{hostile}: {found:?}");
    }
    let none = tasks(&w2, json!({"action": "search", "query": "kubernetes"})).await.unwrap();
    assert!(subjects(&none).is_empty() && none["note"].as_str().unwrap().contains("no task matches"));
    // The mailbox: unread only, marked read; a broadcast reaches every other member once.
    let message = |ctx: &CallContext, args: Value| {
        let (gate, ctx) = (gate.clone(), ctx.clone());
        async move { gate.call(&ctx, "team_message", args).await.unwrap().structured.unwrap() }
    };
    let contents = |v: &Value| -> Vec<String> {
        v["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
    };
    message(&lead, json!({"action": "broadcast", "content": "standup at 10"})).await;
    message(&w1, json!({"action": "send", "to": "w2", "content": "can you review?"})).await;
    assert_eq!(contents(&message(&w2, json!({"action": "read"})).await), ["standup at 10", "can you review?"]);
    let again = message(&w2, json!({"action": "read"})).await;
    assert!(contents(&again).is_empty() && again["note"] == "no unread messages", "{again}");
    assert_eq!(contents(&message(&w1, json!({"action": "read"})).await), ["standup at 10"]);
    let lead_read = contents(&message(&lead, json!({"action": "read"})).await);
    assert_eq!(lead_read.len(), 1, "its own broadcast is not unread for it: {lead_read:?}");
    assert!(lead_read[0].starts_with(&format!("teammate:w1 completed task #{id}")), "{lead_read:?}");
    message(&w2, json!({"action": "broadcast", "content": "done reviewing"})).await;
    assert_eq!(contents(&message(&lead, json!({"action": "read"})).await), ["done reviewing"]);
    assert_eq!(contents(&message(&w1, json!({"action": "read"})).await), ["done reviewing"]);
    assert!(contents(&message(&w2, json!({"action": "read"})).await).is_empty());
    // The history is still there for whoever asks for it.
    assert_eq!(contents(&message(&w2, json!({"action": "read", "after": 0})).await).len(), 3);
    // Members without a model were never started.
    let store = store(dir.path());
    assert!(team_sessions(&store, "w1").is_empty() && team_sessions(&store, "w2").is_empty());
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_crashes_mid_task_loses_its_claim_when_the_lease_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = Arc::new(AtomicBool::new(false));
    let crash = crashed.clone();
    let server = Scripted::by_request(respond(move |req| {
        let (role, content) = last(&req);
        match who(&req).as_str() {
            _ if role == "user" => call("team_tasks", json!({"action": "claim"})),
            member if content.contains("\"completed\"") => answer(&format!("{member} is done")),
            // The first member to hold the task crashes: its model endpoint fails.
            _ if content.contains("\"claimed\"") && !crash.swap(true, Ordering::SeqCst) => Reply::Status(500),
            member if content.contains("\"claimed\"") => {
                let id = claimed_id(&content);
                let result = format!("{member} did it with {SECRET}");
                call("team_tasks", json!({"action": "complete", "task_id": id, "result": result}))
            }
            member => answer(&format!("{member}: nothing for me")),
        }
    }))
    .await;
    let gate = gate(dir.path(), config(&server.url, |t| t.lease_secs = 1.0));
    let lead = as_agent(&gate, "lead", "lead-mcp");
    gate.call(&lead, "team_tasks", json!({"action": "create", "subject": "Migrate the database"})).await.unwrap();
    let store = store(dir.path());
    let (event, done) = wait_for("the task done after the lapsed claim", || {
        let mail = lead_mail(&store);
        let event = mail.iter().find(|(from, c)| from == "toolgate" && c.contains("is pending again"))?.1.clone();
        let task = store.team_tasks("crew", TaskFilter::Completed, TaskOrder::Priority, 0).unwrap().pop()?;
        Some((event, task))
    })
    .await;
    assert!(crashed.load(Ordering::SeqCst));
    assert!(event.contains("did not complete it within its lease (1 s"), "{event}");
    let failed: Vec<_> =
        ["w1", "w2"].iter().flat_map(|m| team_sessions(&store, m)).filter(|s| s.status == "failed").collect();
    assert_eq!(failed.len(), 1, "the crashed run: {failed:?}");
    assert!(event.contains(&format!("`{}` claimed it", failed[0].agent)), "{event}");
    // The result, on the board and to the lead (an MCP caller here: its mailbox), passed the leak
    // detector: what one agent writes for another is scrubbed.
    let result = done.result.unwrap();
    assert!(result.starts_with(&format!("{} did it with [REDACTED:", done.owner.unwrap())), "{result}");
    let mail = lead_mail(&store);
    let to_lead = mail.iter().find(|(_, c)| c.starts_with("teammate:")).unwrap();
    assert!(!to_lead.1.contains(SECRET) && to_lead.1.contains("[REDACTED:"), "{to_lead:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_team_whose_member_keeps_rejecting_is_stopped_by_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::by_request(respond(|_| answer("I will not do that."))).await;
    let gate = gate(
        dir.path(),
        config(&server.url, |t| {
            t.members = vec!["w1".into()];
            t.max_turns = 5;
        }),
    );
    let lead = as_agent(&gate, "lead", "lead-mcp");
    gate.call(&lead, "team_tasks", json!({"action": "create", "subject": "Something unpleasant"})).await.unwrap();
    let store = store(dir.path());
    let stopped = wait_for("the team stopped", || {
        lead_mail(&store).into_iter().find(|(from, c)| from == "toolgate" && c.contains("was stopped")).map(|(_, c)| c)
    })
    .await;
    assert!(stopped.contains("5 model turns (max_turns = 5)"), "{stopped}");
    assert!(stopped.contains("\"Something unpleasant\" (pending)"), "it names the tasks left: {stopped}");
    let runs = team_sessions(&store, "w1").len();
    assert_eq!(runs, 5, "one turn each, stopped at the budget");
    // Posting again starts nobody, and says so.
    let created = gate
        .call(&lead, "team_tasks", json!({"action": "create", "subject": "Another one"}))
        .await
        .unwrap()
        .structured
        .unwrap();
    assert!(created["note"].as_str().unwrap().contains("is stopped"), "{created}");
    let requests = server.requests().len();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(25)).await;
        assert_eq!(team_sessions(&store, "w1").len(), runs);
    }
    assert_eq!(server.requests().len(), requests, "no model request after the stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_direct_message_starts_an_idle_member_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::by_request(respond(|req| {
        let (role, content) = last(&req);
        match who(&req).as_str() {
            "w1" if role == "user" => {
                assert!(content.starts_with("[Team message from lead]: you have a message"), "{content}");
                call("team_message", json!({"action": "read"}))
            }
            "w1" if content.contains("please review the parser") => {
                call("team_message", json!({"action": "send", "to": "lead", "content": "reviewed: looks fine"}))
            }
            member => answer(&format!("{member}: ok")),
        }
    }))
    .await;
    let gate = gate(dir.path(), config(&server.url, |_| {}));
    let lead = as_agent(&gate, "lead", "lead-msg");
    gate.call(&lead, "team_message", json!({"action": "send", "to": "w1", "content": "please review the parser"}))
        .await
        .unwrap();
    let store = store(dir.path());
    wait_for("w1's reply", || {
        lead_mail(&store).into_iter().find(|(from, c)| from == "w1" && c == "reviewed: looks fine")
    })
    .await;
    let runs = team_sessions(&store, "w1");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(team_sessions(&store, "w2").is_empty(), "only the member written to");
    // A message to the lead starts nobody: the lead is the user's agent.
    let w2 = as_agent(&gate, "w2", "w2-by-hand");
    gate.call(&w2, "team_message", json!({"action": "send", "to": "lead", "content": "hello"})).await.unwrap();
    assert!(server.requests().iter().all(|r| who(r) == "w1"), "only w1 ran");
}

/// The team flow on the real local model (SmolLM2-135M through llama.cpp, schema-constrained
/// steps): two tasks posted, the members it starts claim and complete what they can. Tolerant
/// of what the model writes, strict on the mechanics; what it managed is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_runs_on_the_real_local_model() {
    let (mut server, url) = crate::support::llama::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&url, |t| {
        t.max_turns = 6;
        t.lease_secs = 120.0;
    });
    let p = cfg.providers.get_mut("mock").unwrap();
    p.tool_calls = toolgate::agent::config::ToolCallMode::JsonSchema;
    p.max_tokens = Some(96);
    p.temperature = Some(0.0);
    p.timeout_secs = 600.0;
    p.max_retries = 1;
    for m in ["w1", "w2"] {
        let a = cfg.agents.get_mut(m).unwrap();
        a.system_prompt = Some(format!(
            "You are {m}, a team member. First claim a task: call team_tasks with action claim. Then finish it: \
             call team_tasks with action complete, the task_id you claimed, and your result."
        ));
        a.tools = vec!["team_tasks".into()];
        a.max_iterations = 3;
    }
    let gate = gate(dir.path(), cfg);
    let lead = as_agent(&gate, "lead", "lead-real");
    for subject in ["Name three colors", "Write one sentence about the sea"] {
        gate.call(&lead, "team_tasks", json!({"action": "create", "subject": subject})).await.unwrap();
    }
    let store = store(dir.path());
    let members = || -> Vec<toolgate::store::SessionRecord> {
        ["w1", "w2"].iter().flat_map(|m| team_sessions(&store, m)).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    let stopped = loop {
        let mail = lead_mail(&store);
        let stopped = mail.iter().any(|(from, c)| from == "toolgate" && c.contains("was stopped"));
        let tasks = store.team_tasks("crew", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
        let all_done = tasks.iter().all(|t| t.status == "done");
        let runs = members();
        let idle = !runs.is_empty() && runs.iter().all(|s| s.status != "running");
        if idle && (stopped || all_done) {
            break stopped;
        }
        assert!(Instant::now() < deadline, "the team neither finished nor stopped: {tasks:?} {runs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    gate.flush_audit();
    let runs = members();
    let audit = store.audit_tail(10_000).unwrap();
    let mut calls = 0;
    for s in &runs {
        assert_eq!((s.kind.as_str(), s.parent.as_deref()), ("team", Some("lead-real")), "{s:?}");
        for r in audit.iter().filter(|r| r.session == s.id) {
            assert_eq!((r.agent.as_str(), r.tool.as_str()), (s.agent.as_str(), "team_tasks"), "{r:?}");
            calls += 1;
        }
    }
    let tasks = store.team_tasks("crew", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
    let done: Vec<_> = tasks.iter().filter(|t| t.status == "done").collect();
    let results = lead_mail(&store).into_iter().filter(|(_, c)| c.starts_with("teammate:")).count();
    assert_eq!(results, done.len(), "one result to the lead per completed task");
    eprintln!(
        "real model team flow: {} member runs, {calls} audited tool calls, {} of {} tasks done, {results} results to the lead, team {}",
        runs.len(),
        done.len(),
        tasks.len(),
        if stopped { "stopped by its budget" } else { "finished" }
    );
    for t in &tasks {
        eprintln!("  #{} {:?}: {} by {:?}: {:?}", t.id, t.subject, t.status, t.owner, t.result);
    }
    for s in &runs {
        eprintln!("  run of {}: {} after {} messages {:?}", s.agent, s.status, s.message_count, s.error);
    }
    drop(server.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
}

/// A lead that answers every `teammate:` result with one new task: each result continues the
/// lead, which posts again, a member claims and completes it, and so on. The lead's automatic
/// continuations count against the team's budget, which does not start again when the board
/// goes idle between tasks, so the team is stopped (`max_turns`; with a budget too large for
/// that, the cap on automatic continuations), the lead is told, and nothing runs after.
async fn a_lead_that_keeps_posting_follow_ups_is_stopped(max_turns: u64, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let posted = Arc::new(AtomicUsize::new(0));
    let count = posted.clone();
    let server = Scripted::by_request(respond(move |req| {
        let (role, content) = last(&req);
        match who(&req).as_str() {
            "lead" if role == "user" && content.contains("was stopped") => answer("the team was stopped"),
            "lead" if role == "user" => {
                let n = count.fetch_add(1, Ordering::SeqCst);
                call("team_tasks", json!({"action": "create", "subject": format!("Follow-up {n}")}))
            }
            "lead" => answer("posted"),
            _ if role == "user" => call("team_tasks", json!({"action": "claim"})),
            member if content.contains("\"claimed\"") => {
                let id = claimed_id(&content);
                call(
                    "team_tasks",
                    json!({"action": "complete", "task_id": id, "result": format!("{member} did #{id}")}),
                )
            }
            member => answer(&format!("{member} is done")),
        }
    }))
    .await;
    let mut cfg = config(&server.url, |t| {
        t.members = vec!["w1".into()];
        t.max_turns = max_turns;
    });
    // The gate's rate limit (60 `team_tasks` calls a minute) would only slow the loop down.
    cfg.rate_limits.enabled = false;
    let gate = gate(dir.path(), cfg);
    let rt = gate.agents().unwrap().clone();
    let out = rt.run(RunSpec::new("lead", "Start the work"), &gate.context()).await.unwrap();
    let store = store(dir.path());
    let deadline = Instant::now() + Duration::from_secs(90);
    let stopped = loop {
        let mail = lead_mail(&store);
        if let Some((_, c)) = mail.into_iter().find(|(from, c)| from == "toolgate" && c.contains("was stopped")) {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the team was never stopped: {} tasks posted",
            posted.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert!(stopped.contains(expect), "{stopped}");
    // The lead gets a model turn that says so, then everything comes to rest.
    wait_for("the lead told of the stop and idle", || {
        let told = server.requests().iter().any(|r| who(r) == "lead" && last(r).1.contains("was stopped"));
        let lead_idle = store.session(&out.session).unwrap()?.status != "running";
        let members_idle = team_sessions(&store, "w1").iter().all(|s| s.status != "running");
        (told && lead_idle && members_idle).then_some(())
    })
    .await;
    let requests = server.requests().len();
    let tasks = posted.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(server.requests().len(), requests, "no model request after the stop");
    assert_eq!(posted.load(Ordering::SeqCst), tasks);
    let continuations = server
        .requests()
        .iter()
        .filter(|r| who(r) == "lead" && last(r).0 == "user" && last(r).1.contains("teammate:"))
        .count();
    assert!(continuations <= 51, "{continuations} continuations of the lead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lead_that_keeps_posting_follow_ups_is_stopped_by_the_turn_budget() {
    a_lead_that_keeps_posting_follow_ups_is_stopped(12, "model turns (max_turns = 12)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lead_that_keeps_posting_follow_ups_is_stopped_by_the_continuation_cap() {
    a_lead_that_keeps_posting_follow_ups_is_stopped(1_000_000, "continued the lead's session 50 times").await;
}

/// Two sessions of the lead post a task each; a task's result goes to the session that posted
/// it, not to whichever session of the lead used the board last.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_result_goes_to_the_session_that_posted_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let b_posted = Arc::new(AtomicBool::new(false));
    let flag = b_posted.clone();
    let respond: Respond = Arc::new(move |req| {
        let flag = flag.clone();
        Box::pin(async move {
            let (role, content) = last(&req);
            let first = req["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
            match who(&req).as_str() {
                "lead" if role == "user" && content.contains("teammate:") => answer("noted"),
                "lead" if role == "user" => {
                    let subject = if content.contains("Plan A") { "Task A" } else { "Task B" };
                    call("team_tasks", json!({"action": "create", "subject": subject}))
                }
                "lead" => {
                    if first.contains("Plan B") {
                        flag.store(true, Ordering::SeqCst);
                    }
                    answer("posted")
                }
                _ if role == "user" => call("team_tasks", json!({"action": "claim"})),
                member if content.contains("\"claimed\"") => {
                    // Task A is completed only after the lead's second session posted Task B.
                    if content.contains("Task A") {
                        let deadline = Instant::now() + Duration::from_secs(20);
                        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                    let id = claimed_id(&content);
                    call(
                        "team_tasks",
                        json!({"action": "complete", "task_id": id, "result": format!("{member} did #{id}")}),
                    )
                }
                member => answer(&format!("{member} is done")),
            }
        })
    });
    let server = Scripted::by_request(respond).await;
    let gate = gate(dir.path(), config(&server.url, |_| {}));
    let rt = gate.agents().unwrap().clone();
    let a = rt.run(RunSpec::new("lead", "Plan A"), &gate.context()).await.unwrap();
    let b = rt.run(RunSpec::new("lead", "Plan B"), &gate.context()).await.unwrap();
    assert_ne!(a.session, b.session);
    let store = store(dir.path());
    let results = |session: &str| -> Vec<String> {
        let msgs = store.session_messages(session, 0).unwrap();
        msgs.into_iter().filter(|m| m.role == "user" && m.content.contains("teammate:")).map(|m| m.content).collect()
    };
    wait_for("both results delivered", || {
        let idle = [&a.session, &b.session].iter().all(|s| store.session(s).unwrap().unwrap().status != "running");
        (idle && !results(&a.session).is_empty() && !results(&b.session).is_empty()).then_some(())
    })
    .await;
    let (to_a, to_b) = (results(&a.session).join("\n"), results(&b.session).join("\n"));
    assert!(to_a.contains("\"Task A\"") && !to_a.contains("\"Task B\""), "session A got: {to_a}");
    assert!(to_b.contains("\"Task B\"") && !to_b.contains("\"Task A\""), "session B got: {to_b}");
}

/// A team gateway's grants on the lead's caller (as the gateway attaches them): no `exec`.
#[derive(Debug)]
struct NoExec;

impl toolgate::core::CallGrants for NoExec {
    fn check(
        &self,
        _: &CallContext,
        spec: &toolgate::core::ToolSpec,
        _: &toolgate::core::Touches,
    ) -> Result<toolgate::core::GrantedCall, toolgate::core::ToolError> {
        if spec.name == "exec" {
            return Err(toolgate::core::ToolError::Denied { tool: "exec".into(), reason: "no grant for exec".into() });
        }
        Ok(toolgate::core::GrantedCall { trace: "test grant: allow".into(), ask: None })
    }

    fn listed(&self, _: &CallContext, tools: Vec<toolgate::core::ToolSpec>) -> Vec<toolgate::core::ToolSpec> {
        tools.into_iter().filter(|s| s.name != "exec").collect()
    }
}

/// Team results that arrive after the lead's run ended continue its session in a turn the
/// runtime starts: that turn is held to the grants the lead's caller had, as the first was (a
/// gateway user without `exec` must not get it from a member's result).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lead_continued_with_results_keeps_its_callers_grants() {
    let dir = tempfile::tempdir().unwrap();
    let server = Scripted::by_request(respond(|req| {
        let (role, content) = last(&req);
        match who(&req).as_str() {
            "lead" if role == "user" && content.contains("teammate:") => {
                call("exec", json!({"command": "touch escaped"}))
            }
            "lead" if role == "user" => call("team_tasks", json!({"action": "create", "subject": "Count the files"})),
            "lead" => answer(&format!("lead: {content}")),
            _ if role == "user" => call("team_tasks", json!({"action": "claim"})),
            _ if content.contains("\"claimed\"") => {
                let id = claimed_id(&content);
                call("team_tasks", json!({"action": "complete", "task_id": id, "result": "three files"}))
            }
            member => answer(&format!("{member}: done")),
        }
    }))
    .await;
    let mut config = config(&server.url, |t| t.members = vec!["w1".into()]);
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let gate = gate(dir.path(), config);
    let rt = gate.agents().unwrap().clone();
    let mut ctx = gate.context();
    ctx.grants = Some(Arc::new(NoExec));
    let out = rt.run(RunSpec::new("lead", "Count the files"), &ctx).await.unwrap();
    let store = store(dir.path());
    let refused = wait_for("the lead's continued turn to end", || {
        let msgs = store.session_messages(&out.session, 0).unwrap();
        let done = store.session(&out.session).unwrap()?.status != "running";
        let tool = msgs.iter().rev().find(|m| m.role == "tool" && m.content.contains("exec"))?;
        done.then(|| tool.content.clone())
    })
    .await;
    // Hidden by the grants, so unknown to the lead (as in its first turn).
    assert!(refused.contains("unknown tool `exec`"), "the continued turn is held to the grants: {refused}");
    assert!(!dir.path().join("escaped").exists(), "exec ran in the continued turn");
}
