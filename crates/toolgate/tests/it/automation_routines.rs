//! Routines through `Gate::call`: a `tool` routine run by hand and by an event of the gate (its
//! `exec` a real command job in the sandbox, made as the routine's owner), the `cron` tool
//! without a model, `cron` from an agent session (its prompt injected into that session; the
//! model is an in-process stand-in), and the bad inputs a model may send (an invalid cron
//! field, an agent routine with no model configured, a context path outside the workspace).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::agent::{
    AgentConfig, AgentError, Message, ModelClient, ModelReply, ModelRequest, ProviderConfig, RunSpec, ToolCall,
};
use toolgate::config::{ApprovalMode, Config};
use toolgate::core::{CallContext, ToolError};
use toolgate::store::{AuditRecord, Store};

struct Fixture {
    dir: tempfile::TempDir,
    gate: Arc<Gate>,
}

fn fixture() -> Fixture {
    fixture_with(Config::default())
}

fn fixture_with(mut config: Config) -> Fixture {
    // The tests poll `routine_history` until a run ends, on purpose: the loop breaker would
    // refuse the fourth identical answer while a job runs, and the rate limit the 61st poll.
    config.loop_breaker.exempt.push("routine_history".into());
    config
        .rate_limits
        .tools
        .insert("routine_history".into(), toolgate::config::Window { per_minute: 100_000, per_hour: 100_000 });
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::builder(dir.path()).config(config).build_shared().unwrap();
    Fixture { gate, dir }
}

/// Calls that would ask run without asking (still in the sandbox): the routines' commands
/// write marker files.
fn never_ask() -> Config {
    let mut config = Config::default();
    config.approval.mode = ApprovalMode::Never;
    config
}

impl Fixture {
    fn ctx(&self, user: &str) -> CallContext {
        let mut ctx = self.gate.context();
        ctx.identity.user = user.into();
        ctx.identity.session = "s1".into();
        ctx
    }

    async fn call_as(&self, user: &str, name: &str, params: Value) -> Result<Value, ToolError> {
        let out = self.gate.call(&self.ctx(user), name, params).await?;
        Ok(out.structured.clone().unwrap_or_else(|| json!(out.text_content())))
    }

    async fn call(&self, name: &str, params: Value) -> Result<Value, ToolError> {
        self.call_as("ann", name, params).await
    }

    fn audit(&self) -> Vec<AuditRecord> {
        self.gate.flush_audit();
        Store::open(&self.dir.path().join(".toolgate/state.db")).unwrap().audit_tail(500).unwrap()
    }

    /// Waits (deadline 30 s) until the routine's latest run has a job that ended; returns it.
    async fn latest_job(&self, routine: &str) -> Value {
        let t = Instant::now();
        loop {
            let h = self.call("routine_history", json!({"name": routine})).await.unwrap();
            if let Some(run) = h["runs"].get(0)
                && let Some(state) = run["job"]["state"].as_str()
                && matches!(state, "completed" | "failed" | "cancelled")
            {
                return run.clone();
            }
            assert!(t.elapsed() < Duration::from_secs(30), "no finished job: {h}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn exec_routine(name: &str, trigger: &str, command: &str) -> Value {
    json!({
        "name": name,
        "trigger_type": trigger,
        "prompt": "write the marker",
        "action_type": "tool",
        "tool": "exec",
        "params": {"command": command},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_gets_the_approvals_an_interactive_call_gets() {
    // Nobody to ask in the background: a command that needs approval fails, it does not run.
    let f = fixture();
    f.call("routine_create", exec_routine("mark", "manual", "echo by-hand > ran.txt")).await.unwrap();
    f.call("routine_run", json!({"name": "mark"})).await.unwrap();
    let run = f.latest_job("mark").await;
    assert_eq!(run["job"]["state"], "failed", "{run}");
    assert!(run["job"]["error"].as_str().unwrap().contains("needs approval"), "{run}");
    assert!(!f.dir.path().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_routine_runs_by_hand_as_a_job_of_its_owner() {
    let f = fixture_with(never_ask());
    let created = f.call("routine_create", exec_routine("mark", "manual", "echo by-hand > ran.txt")).await.unwrap();
    assert_eq!(created["created"]["action_type"], "tool");
    assert!(created["created"]["timezone"].as_str().is_some_and(|z| !z.is_empty()));
    let started = f.call("routine_run", json!({"name": "mark"})).await.unwrap();
    assert_eq!(started["status"], "started", "{started}");
    let job_id = started["job_id"].as_str().unwrap().to_owned();
    let run = f.latest_job("mark").await;
    assert_eq!(run["job"]["state"], "completed", "{run}");
    assert_eq!(run["trigger"], "manual");
    assert_eq!(std::fs::read_to_string(f.dir.path().join("ran.txt")).unwrap().trim(), "by-hand");
    // The job's `exec` went through the gate as the routine's owner.
    let audit = f.audit();
    let exec = audit.iter().find(|r| r.tool == "exec" && r.session == format!("job:{job_id}")).expect("an exec row");
    assert_eq!(exec.user, "ann");
    // Another user sees neither the routine nor its history, and cannot run it.
    let other = f.call_as("bob", "routine_run", json!({"name": "mark"})).await.unwrap_err();
    assert!(other.to_string().contains("no routine named `mark`"), "{other}");
    let listed = f.call_as("bob", "routine_list", json!({})).await.unwrap();
    assert!(listed["routines"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_routine_fires_on_a_tool_call_of_the_gate() {
    let f = fixture_with(never_ask());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let tasks = f.gate.start_tasks(&shutdown);
    let mut spec = exec_routine("on-echo", "event", "echo saw-echo > event.txt");
    spec["event_channel"] = json!("tool");
    spec["event_pattern"] = json!("echo");
    f.call("routine_create", spec).await.unwrap();
    // A call of another tool does not match; `echo` does.
    f.call("time", json!({"operation": "now"})).await.unwrap();
    f.call("echo", json!({"message": "hello"})).await.unwrap();
    let run = f.latest_job("on-echo").await;
    assert_eq!(run["trigger"], "event");
    assert_eq!(run["job"]["state"], "completed", "{run}");
    assert_eq!(std::fs::read_to_string(f.dir.path().join("event.txt")).unwrap().trim(), "saw-echo");
    // Its own job's `exec` call did not fire it again (one run).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let h = f.call("routine_history", json!({"name": "on-echo"})).await.unwrap();
    assert_eq!(h["runs"].as_array().unwrap().len(), 1, "{h}");
    shutdown.cancel();
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_routines_are_refused_with_what_to_do() {
    let f = fixture();
    let mut spec = exec_routine("bad", "cron", "true");
    spec["schedule"] = json!("0 9 * * 8");
    let e = f.call("routine_create", spec).await.unwrap_err();
    assert!(matches!(e, ToolError::InvalidParams { .. }), "{e:?}");
    assert!(e.to_string().contains("day of week"), "{e}");
    // No model configured: an agent routine is refused with the configuration to add.
    let e = f
        .call("routine_create", json!({"name": "agent", "trigger_type": "manual", "prompt": "tidy the docs"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("[agents.main]"), "{e}");
    let mut spec = exec_routine("ctx", "manual", "true");
    spec["context_paths"] = json!(["../outside.md"]);
    let e = f.call("routine_create", spec).await.unwrap_err();
    assert!(e.to_string().contains("leaves the workspace"), "{e}");
    let e =
        f.call("cron", json!({"action": "add", "schedule": "*/5 * * * *", "prompt": "check mail"})).await.unwrap_err();
    assert!(e.to_string().contains("no model is configured"), "{e}");
    assert!(f.call("routine_list", json!({})).await.unwrap()["routines"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_adds_lists_and_removes_a_tool_routine() {
    let f = fixture();
    let added = f
        .call(
            "cron",
            json!({"action": "add", "schedule": "0 9 * * 1-5", "timezone": "America/New_York", "prompt": "",
                   "tool": "exec", "params": {"command": "date"}}),
        )
        .await
        .unwrap();
    assert_eq!(added["runs_as"], "tool");
    let id = added["id"].as_str().unwrap().to_owned();
    let next = added["next_fire"].as_str().unwrap();
    assert!(next.contains("T09:00:00-0"), "09:00 New York time: {next}");
    let listed = f.call("cron", json!({"action": "list"})).await.unwrap();
    assert_eq!(listed["jobs"][0]["id"], id);
    assert_eq!(listed["jobs"][0]["timezone"], "America/New_York");
    // Listing twice moves nothing.
    let again = f.call("cron", json!({"action": "list"})).await.unwrap();
    assert_eq!(again["jobs"][0]["next_fire"], listed["jobs"][0]["next_fire"]);
    let routines = f.call("routine_list", json!({})).await.unwrap();
    assert_eq!(routines["routines"][0]["trigger_type"], "cron");
    f.call("cron", json!({"action": "remove", "id": id})).await.unwrap();
    assert!(f.call("cron", json!({"action": "list"})).await.unwrap()["jobs"].as_array().unwrap().is_empty());
}

/// A stand-in for a model (in process; everything else — the gate, the store, the runtime's
/// sessions — is real). Asked for a schedule, it calls `cron add`; woken by a cron message, it
/// calls `echo` once and then answers; otherwise it answers with what the tool said.
#[derive(Debug)]
struct Scheduler;

#[toolgate::core::async_trait]
impl ModelClient for Scheduler {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let last_user = req.messages.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap_or(0);
        let Message::User { content: said } = &req.messages[last_user] else { unreachable!() };
        let results: Vec<&str> = req.messages[last_user..]
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let call = |name: &str, args: Value| ModelReply {
            tool_calls: vec![ToolCall {
                id: format!("c{}", req.messages.len()),
                name: name.into(),
                arguments: args.to_string(),
            }],
            ..ModelReply::default()
        };
        Ok(match (said.starts_with("[cron "), results.first()) {
            (false, None) => {
                call("cron", json!({"action": "add", "schedule": "0 9 * * 1-5", "prompt": "check the build"}))
            }
            (true, None) => call("echo", json!({"message": "build checked"})),
            (true, Some(_)) => ModelReply { content: Some(format!("woken by: {said}")), ..ModelReply::default() },
            (false, Some(r)) => ModelReply { content: Some(format!("scheduled: {r}")), ..ModelReply::default() },
        })
    }
}

/// A config whose agent `worker` talks to the stand-in provider `script`.
fn with_agent() -> Config {
    let mut config = never_ask();
    // Never dialled: the provider gets the in-process client.
    config
        .providers
        .insert("script".into(), ProviderConfig { base_url: "http://127.0.0.1:9/v1".into(), ..Default::default() });
    config
        .agents
        .insert("worker".into(), AgentConfig { provider: "script".into(), model: "m".into(), ..Default::default() });
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_from_an_agent_session_injects_its_prompt_into_that_session() {
    let f = fixture_with(with_agent());
    let rt = f.gate.agents().unwrap();
    rt.set_client("script", Arc::new(Scheduler));
    // An agent session asks for a schedule: its `cron add` goes through the gate from the session.
    let outcome = rt.run(RunSpec::new("worker", "Check the build every weekday at 9."), &f.ctx("ann")).await.unwrap();
    assert!(outcome.answer.contains("injected") || outcome.answer.contains("appended"), "{}", outcome.answer);
    let session = outcome.session.clone();
    let listed = f.call("cron", json!({"action": "list"})).await.unwrap();
    let entry = &listed["jobs"][0];
    assert_eq!(entry["runs_as"], "session_turn", "{listed}");
    assert_eq!(entry["injects_into_session"], session.as_str());
    let id = entry["id"].as_str().unwrap().to_owned();

    // A fire (by hand: the same path the scheduler takes) appends the prompt to that session
    // and runs one turn of it.
    let fired = f.call("routine_run", json!({"name": id})).await.unwrap();
    assert_eq!(fired["status"], "started", "{fired}");
    assert!(fired["job_id"].as_str().unwrap().starts_with("turn:"), "{fired}");
    let t = Instant::now();
    let run = loop {
        let h = f.call("routine_history", json!({"name": id})).await.unwrap();
        if h["runs"][0]["status"] == "completed" || h["runs"][0]["status"] == "failed" {
            break h["runs"][0].clone();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the turn did not end: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(run["status"], "completed", "{run}");
    let prompt = format!("[cron {id}] check the build");
    assert_eq!(run["detail"], format!("woken by: {prompt}"), "the turn's answer is the run's record");

    // The same session's transcript: the prompt as a user turn, then the turn's tool call and answer.
    let messages = rt.store().session_messages(&session, 0).unwrap();
    let at = messages.iter().position(|m| m.role == "user" && m.content == prompt).expect("the prompt as a user turn");
    let after: Vec<(&str, &str)> = messages[at + 1..].iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
    assert_eq!(after.last().unwrap(), &("assistant", format!("woken by: {prompt}").as_str()), "{after:?}");
    assert!(after.iter().any(|(role, _)| *role == "tool"), "{after:?}");
    assert_eq!(rt.sessions(&Default::default()).unwrap().len(), 1, "no new session, no job: {messages:?}");
    // The turn's tool call went through the gate as the session's user, in that session.
    let audit = f.audit();
    let echo = audit.iter().find(|r| r.tool == "echo" && r.session == session).expect("the turn's echo row");
    assert_eq!((echo.user.as_str(), echo.agent.as_str()), ("ann", "worker"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_without_an_agent_session_runs_jobs_and_says_so() {
    let f = fixture_with(with_agent());
    let rt = f.gate.agents().unwrap();
    rt.set_client("script", Arc::new(Scheduler));
    // A plain client (no session of the runtime behind it).
    let out = f
        .gate
        .call(&f.ctx("ann"), "cron", json!({"action": "add", "schedule": "*/5 * * * *", "prompt": "tidy"}))
        .await
        .unwrap();
    let v = out.structured.clone().unwrap();
    assert_eq!(v["runs_as"], "full_job", "{v}");
    assert!(v["injects_into_session"].is_null(), "{v}");
    assert!(out.text_content().contains("no agent session"), "{}", out.text_content());
    // Naming another user's agent session does not reach it: bob's call from ann's session id
    // gets a job of his own, not a turn of her session.
    let ann = rt.run(RunSpec::new("worker", "Check the build every weekday at 9."), &f.ctx("ann")).await.unwrap();
    let mut bob = f.ctx("bob");
    bob.identity.session = ann.session.clone();
    let out = f
        .gate
        .call(&bob, "cron", json!({"action": "add", "schedule": "*/5 * * * *", "prompt": "leak it"}))
        .await
        .unwrap();
    assert_eq!(out.structured.clone().unwrap()["runs_as"], "full_job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_routine_calling_any_tool_is_a_job_record_with_events_and_a_result() {
    let f = fixture_with(never_ask());
    let spec = json!({
        "name": "greet", "trigger_type": "manual", "prompt": "say hi", "action_type": "tool",
        "tool": "echo", "params": {"message": "hi from a routine"},
    });
    f.call("routine_create", spec).await.unwrap();
    let started = f.call("routine_run", json!({"name": "greet"})).await.unwrap();
    let job_id = started["job_id"].as_str().unwrap_or_else(|| panic!("{started}")).to_owned();
    assert!(!job_id.starts_with("call:"), "a bare call, not a job: {started}");
    let run = f.latest_job("greet").await;
    assert_eq!(run["job"]["state"], "completed", "{run}");
    assert!(run["job"]["result"].as_str().unwrap().contains("hi from a routine"), "{run}");
    let store = Store::open(&f.dir.path().join(".toolgate/state.db")).unwrap();
    let job = toolgate::store::JobStore::job(&store, &job_id).unwrap().unwrap();
    assert_eq!((job.mode.as_str(), job.user.as_str(), job.origin.as_deref()), ("tool", "ann", Some("routine:greet")));
    let events: Vec<String> = toolgate::store::JobStore::job_events(&store, &job_id, 0, 100)
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {}", e.kind, e.text))
        .collect();
    assert!(events.iter().any(|e| e.starts_with("tool_call echo")), "{events:#?}");
    assert!(events.iter().any(|e| e.starts_with("output ") && e.contains("hi from a routine")), "{events:#?}");
    assert_eq!(events.last().map(String::as_str), Some("state completed"), "{events:#?}");
    // Its call went through the gate as the owner, in the job's session.
    let audit = f.audit();
    assert!(audit.iter().any(|r| r.tool == "echo" && r.user == "ann" && r.session == format!("job:{job_id}")));
    // A tool the owner may not call fails the job with the gate's words.
    f.call(
        "routine_create",
        json!({"name": "nope", "trigger_type": "manual", "prompt": "x", "action_type": "tool", "tool": "no_such_tool", "params": {}}),
    )
    .await
    .unwrap();
    f.call("routine_run", json!({"name": "nope"})).await.unwrap();
    let run = f.latest_job("nope").await;
    assert_eq!(run["job"]["state"], "failed", "{run}");
    assert!(run["job"]["error"].as_str().unwrap().contains("no_such_tool"), "{run}");
}

/// Records the tools each request offered; answers in text, or (`greedy`) asks for `exec`.
#[derive(Debug, Default)]
struct Lightweight {
    offered: std::sync::Mutex<Vec<usize>>,
    greedy: bool,
}

#[toolgate::core::async_trait]
impl ModelClient for Lightweight {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        self.offered.lock().unwrap().push(req.tools.len());
        Ok(if self.greedy {
            ModelReply {
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "exec".into(),
                    arguments: json!({"command": "echo took > took.txt"}).to_string(),
                }],
                ..ModelReply::default()
            }
        } else {
            ModelReply { content: Some("the summary".into()), ..ModelReply::default() }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lightweight_routine_offers_the_model_no_tools_and_one_turn() {
    let f = fixture_with(with_agent());
    let rt = f.gate.agents().unwrap();
    let quiet = Arc::new(Lightweight::default());
    rt.set_client("script", quiet.clone());
    let spec = json!({"name": "sum", "trigger_type": "manual", "prompt": "summarize", "action_type": "lightweight"});
    f.call("routine_create", spec).await.unwrap();
    f.call("routine_run", json!({"name": "sum"})).await.unwrap();
    let run = f.latest_job("sum").await;
    assert_eq!(run["job"]["state"], "completed", "{run}");
    assert_eq!(run["job"]["result"], "the summary");
    // One request, and it offered no tools at all (not merely told not to use them).
    assert_eq!(*quiet.offered.lock().unwrap(), [0]);

    // A model that asks for a tool anyway: refused, the run ends after that one answer, and the
    // command never ran.
    let greedy = Arc::new(Lightweight { greedy: true, ..Lightweight::default() });
    rt.set_client("script", greedy.clone());
    f.call("routine_run", json!({"name": "sum"})).await.unwrap();
    let t = Instant::now();
    let run = loop {
        let h = f.call("routine_history", json!({"name": "sum"})).await.unwrap();
        let latest = h["runs"][0].clone();
        if (latest["job"]["state"] == "failed" || latest["job"]["state"] == "completed")
            && latest["job"]["result"] != "the summary"
        {
            break latest;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no second run ended: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(run["job"]["state"], "failed", "{run}");
    assert!(run["job"]["error"].as_str().unwrap().contains("lightweight run, which offers none"), "{run}");
    assert_eq!(*greedy.offered.lock().unwrap(), [0]);
    assert!(!f.dir.path().join("took.txt").exists(), "a lightweight run's model ran a command");
}
