//! Background jobs through `Gate::call`: the six job tools, every job's tool calls made through
//! the gate as its owner (audit rows, policy decisions), credentials that never show, ownership,
//! id prefixes, approvals, cancellation and the bad inputs of issue 27.
//!
//! `sandbox` jobs run an agent whose model is an in-process scripted `ModelClient` (a stand-in
//! for a model only: everything else, the gate, the store, `exec` in the sandbox, is real).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate::agent::{
    AgentConfig, AgentError, Message, ModelClient, ModelReply, ModelRequest, ProviderConfig, ToolCall,
};
use toolgate::config::Config;
use toolgate::core::{CallContext, ToolError};
use toolgate::store::{AuditRecord, SecretStore, Store};
use toolgate::{ApprovalAnswer, Gate};
use toolgate_testkit::approver::Scripted;

struct Fixture {
    dir: tempfile::TempDir,
    gate: Arc<Gate>,
}

fn fixture(config: Config, approver: Option<Arc<Scripted>>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = Gate::builder(dir.path()).config(config);
    if let Some(a) = approver {
        builder = builder.approver(a);
    }
    Fixture { gate: builder.build_shared().unwrap(), dir }
}

/// A config whose agent `worker` talks to the scripted provider `script`.
fn with_agent() -> Config {
    let mut config = Config::default();
    // Never dialled: the provider gets a scripted client.
    config
        .providers
        .insert("script".into(), ProviderConfig { base_url: "http://127.0.0.1:9/v1".into(), ..Default::default() });
    config
        .agents
        .insert("worker".into(), AgentConfig { provider: "script".into(), model: "m".into(), ..Default::default() });
    config
}

impl Fixture {
    fn ctx(&self, user: &str, session: &str) -> CallContext {
        let mut ctx = self.gate.context();
        ctx.identity.user = user.into();
        ctx.identity.session = session.into();
        ctx
    }

    async fn call_as(&self, ctx: &CallContext, name: &str, params: Value) -> Result<Value, ToolError> {
        let out = self.gate.call(ctx, name, params).await?;
        Ok(out.structured.clone().unwrap_or_else(|| json!(out.text_content())))
    }

    async fn call(&self, name: &str, params: Value) -> Result<Value, ToolError> {
        self.call_as(&self.ctx("ann", "s1"), name, params).await
    }

    fn audit(&self) -> Vec<AuditRecord> {
        self.gate.flush_audit();
        Store::open(&self.dir.path().join(".toolgate/state.db")).unwrap().audit_tail(500).unwrap()
    }

    fn put_secret(&self, name: &str, value: &str) {
        let store = Store::open(&self.dir.path().join(".toolgate/state.db")).unwrap();
        store.secret_put(&format!("custom/{name}"), value.as_bytes()).unwrap();
    }

    /// Polls `job_status` until the job ends (deadline 30 s).
    async fn finished(&self, id: &str) -> Value {
        let t = Instant::now();
        loop {
            let v = self.call("job_status", json!({ "job_id": id })).await.unwrap();
            if ["completed", "failed", "cancelled"].contains(&v["state"].as_str().unwrap()) {
                return v;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "job did not end: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_job_runs_exec_as_its_owner_with_credentials_that_never_show() {
    // Its exec call carries a credential in `env`, which the gate asks about (values hidden).
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce]);
    let f = fixture(Config::default(), Some(approver.clone()));
    std::fs::create_dir(f.dir.path().join("proj")).unwrap();
    let secret = "s3cr3t-Value-9f8e7d6c5b4a";
    f.put_secret("ci-token", secret);
    // A value no leak pattern knows: the job's own redaction must catch it.
    let phrase = "horse battery staple";
    f.put_secret("phrase", phrase);
    let v = f
        .call(
            "create_job",
            json!({
                "title": "build", "mode": "command", "wait": true, "project_dir": "proj",
                "description": "pwd; printf 'len=%s\\n' \"${#CI_TOKEN}\"; echo \"token=$CI_TOKEN\"; echo \"said=$WORDS\"",
                "credentials": ["ci-token", {"secret": "phrase", "env": "WORDS"}],
            }),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let asked = approver.seen.lock().unwrap()[0].clone();
    assert!(!format!("{asked:?}").contains(secret), "the approval request shows no value");
    let result = v["result"].as_str().unwrap();
    assert!(result.contains("/proj") && result.contains(&format!("len={}", secret.len())), "{result}");
    assert!(!result.contains(secret) && result.contains("token=[REDACTED"), "{result}");
    assert!(!result.contains(phrase) && result.contains("said=[REDACTED:WORDS]"), "{result}");
    let id = v["job_id"].as_str().unwrap();
    let events = f.call("job_events", json!({ "job_id": id })).await.unwrap();
    let text = events.to_string();
    assert!(text.contains("tool_call") && text.contains("output"), "{text}");
    assert!(!text.contains(secret) && !text.contains(phrase), "{text}");
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"state"));
    // The exec call went through the gate as ann, in the job's own session, its env redacted.
    let audit = f.audit();
    let exec = audit.iter().find(|r| r.tool == "exec").expect("an exec row");
    assert_eq!((exec.user.as_str(), exec.session.as_str()), ("ann", format!("job:{id}").as_str()));
    for r in &audit {
        let row = format!("{r:?}");
        assert!(!row.contains(secret) && !row.contains(phrase), "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_fails_the_job_with_its_exit_code() {
    let f = fixture(Config::default(), None);
    let v = f
        .call("create_job", json!({"title": "t", "mode": "command", "wait": true, "description": "echo oops; exit 3"}))
        .await
        .unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    assert!(v["error"].as_str().unwrap().contains("exited with code 3"), "{v}");
    // A blocked command is refused by the gate, before it runs: the job fails with that reason.
    let v = f
        .call(
            "create_job",
            json!({"title": "t", "mode": "command", "wait": true, "description": "rm -rf / --no-preserve-root"}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "failed", "{v}");
}

/// The tool results a scripted model has been sent so far, oldest first.
fn tool_results(req: &ModelRequest) -> Vec<&str> {
    req.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// Calls `echo` once, then `exec` (which policy denies), then answers with what it saw.
#[derive(Debug)]
struct Worker;

#[toolgate::core::async_trait]
impl ModelClient for Worker {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let results = tool_results(req);
        let call = |id: &str, name: &str, args: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        };
        Ok(match results.len() {
            0 => ModelReply {
                content: Some("Looking.".into()),
                tool_calls: vec![call("c1", "echo", json!({"message": "hi"}))],
                ..ModelReply::default()
            },
            1 => ModelReply {
                tool_calls: vec![call("c2", "exec", json!({"command": "echo no"}))],
                ..ModelReply::default()
            },
            _ => {
                ModelReply { content: Some(format!("answer after {} results", results.len())), ..ModelReply::default() }
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_job_runs_an_agent_whose_calls_pass_the_gate_as_the_owner() {
    let mut config = with_agent();
    config.tools.policy.deny.push("exec".into());
    let f = fixture(config, None);
    f.gate.agents().unwrap().set_client("script", Arc::new(Worker));
    let v =
        f.call("create_job", json!({"title": "look around", "description": "Say hi.", "wait": true})).await.unwrap();
    assert_eq!((v["state"].as_str(), v["mode"].as_str()), (Some("completed"), Some("sandbox")), "{v}");
    assert_eq!(v["result"], "answer after 2 results");
    let session = v["agent_session"].as_str().unwrap().to_owned();
    let events = f.call("job_events", json!({ "job_id": v["job_id"] })).await.unwrap();
    let lines: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e["kind"].as_str().unwrap(), e["text"].as_str().unwrap()))
        .collect();
    assert!(lines.iter().any(|l| l == "model Looking."), "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("tool_result echo ok")), "{lines:#?}");
    // The policy decision is in the log: exec is denied to this caller.
    assert!(lines.iter().any(|l| l.starts_with("tool_result exec error")), "{lines:#?}");
    assert_eq!(lines.last().unwrap(), "state completed");
    let audit = f.audit();
    let echo = audit.iter().find(|r| r.tool == "echo" && r.session == session).expect("the agent's echo row");
    assert_eq!((echo.user.as_str(), echo.agent.as_str()), ("ann", "worker"));
    let exec = audit.iter().find(|r| r.tool == "exec" && r.session == session).expect("the denied exec row");
    assert_ne!(exec.outcome, "ok", "{exec:?}");
}

/// Blocks its first turn until told, then answers with the last user message it read.
#[derive(Debug)]
struct Listener {
    started: Arc<Notify>,
    go: Arc<Notify>,
    turns: Arc<Mutex<u32>>,
}

#[toolgate::core::async_trait]
impl ModelClient for Listener {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let turn = {
            let mut t = self.turns.lock().unwrap();
            *t += 1;
            *t
        };
        if turn == 1 {
            self.started.notify_one();
            self.go.notified().await;
            let call =
                ToolCall { id: "c1".into(), name: "echo".into(), arguments: json!({"message": "x"}).to_string() };
            return Ok(ModelReply { tool_calls: vec![call], ..ModelReply::default() });
        }
        let last_user = req.messages.iter().rev().find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        });
        Ok(ModelReply { content: Some(format!("read: {}", last_user.unwrap_or_default())), ..ModelReply::default() })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_prompt_reaches_the_running_agent_with_approval_and_only_from_the_owner_session() {
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce; 3]);
    let f = fixture(with_agent(), Some(approver.clone()));
    let (started, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let client = Listener { started: started.clone(), go: go.clone(), turns: Arc::default() };
    f.gate.agents().unwrap().set_client("script", Arc::new(client));
    let v = f.call("create_job", json!({"title": "chat", "description": "Wait for instructions."})).await.unwrap();
    let id = v["job_id"].as_str().unwrap().to_owned();
    tokio::time::timeout(Duration::from_secs(10), started.notified()).await.unwrap();
    // Another session of the same user may see the job, not prompt it or read its events.
    let other = f.ctx("ann", "s2");
    assert!(f.call_as(&other, "job_status", json!({"job_id": id})).await.is_ok());
    let e = f.call_as(&other, "job_prompt", json!({"job_id": id, "content": "hijack"})).await.unwrap_err();
    assert!(e.to_string().contains("only the session that created"), "{e}");
    assert_eq!(approver.asked(), 0, "refused before anyone was asked");
    let e = f.call_as(&other, "job_events", json!({"job_id": id})).await.unwrap_err();
    assert!(e.to_string().contains("only the session that created"), "{e}");
    let asked = approver.asked();
    let v = f.call("job_prompt", json!({"job_id": id, "content": "use the blue one", "done": true})).await;
    let seen: Vec<String> = approver.seen.lock().unwrap().iter().map(|r| format!("{r:?}")).collect();
    let v = v.unwrap_or_else(|e| panic!("{e} {seen:#?}"));
    assert_eq!(v["status"], "queued", "{v}");
    assert_eq!(approver.asked(), asked + 1, "job_prompt asks for approval");
    go.notify_one();
    let done = f.finished(&id).await;
    assert_eq!(done["result"], "read: use the blue one", "{done}");
    // Its input is closed, and it ended anyway: a later prompt is refused.
    let e = f.call("job_prompt", json!({"job_id": id, "content": "more"})).await.unwrap_err();
    assert!(e.to_string().contains("already ended"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_job_asks_first_and_stops_a_running_command() {
    let approver = Scripted::new(vec![
        ApprovalAnswer::Deny { message: None },
        ApprovalAnswer::AllowOnce,
        ApprovalAnswer::AllowOnce,
    ]);
    let f = fixture(Config::default(), Some(approver.clone()));
    let token = format!("jobsleep{}", std::process::id());
    let v = f
        .call(
            "create_job",
            json!({"title": "long", "mode": "command", "description": format!("exec -a {token} sleep 60")}),
        )
        .await
        .unwrap();
    let id = v["job_id"].as_str().unwrap().to_owned();
    let t = Instant::now();
    while f.call("job_status", json!({"job_id": id})).await.unwrap()["state"] != "running" {
        assert!(t.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let e = f.call("cancel_job", json!({"job_id": &id[..8]})).await.unwrap_err();
    let seen: Vec<String> = approver.seen.lock().unwrap().iter().map(|r| format!("{r:?}")).collect();
    assert!(matches!(e, ToolError::ApprovalDenied { .. }), "{e} {seen:#?}");
    assert_eq!(f.call("job_status", json!({"job_id": id})).await.unwrap()["state"], "running");
    let v = f.call("cancel_job", json!({"job_id": &id[..8]})).await.unwrap();
    assert_eq!(v["state"], "cancelled", "{v}");
    assert_eq!(v["error"], "cancelled by ann");
    // The command is gone, and the job's end stays `cancelled`.
    let t = Instant::now();
    while processes_with(&token) {
        assert!(t.elapsed() < Duration::from_secs(10), "the job's command outlived its cancellation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(f.call("job_status", json!({"job_id": id})).await.unwrap()["state"], "cancelled");
    let asked = approver.asked();
    let e = f.call("cancel_job", json!({"job_id": id})).await.unwrap_err();
    assert!(e.to_string().contains("already ended"), "{e}");
    assert_eq!(approver.asked(), asked, "refused before anyone was asked");
    // The approval request named the job.
    let first = format!("{:?}", approver.seen.lock().unwrap()[0]);
    assert!(first.contains(&id) && first.contains("long"), "{first}");
    let listed = f.call("list_jobs", json!({"filter": "failed"})).await.unwrap();
    assert_eq!(listed["jobs"][0]["job_id"], id.as_str());
    assert!(f.call("list_jobs", json!({"filter": "active"})).await.unwrap()["jobs"].as_array().unwrap().is_empty());
}

/// A model polls a running job more often than the loop breaker's three identical answers: each
/// answer says how long it has run, so the polls are progress; a finished job's answer stops
/// changing and repeating it is a loop again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_a_running_job_is_not_a_loop() {
    let f = fixture(Config::default(), Some(Scripted::new(vec![ApprovalAnswer::AllowOnce])));
    let v = f.call("create_job", json!({"title": "long", "mode": "command", "description": "sleep 30"})).await.unwrap();
    let id = v["job_id"].as_str().unwrap().to_owned();
    let t = Instant::now();
    while f.call("job_status", json!({"job_id": id})).await.unwrap()["state"] != "running" {
        assert!(t.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let v = f.call("job_status", json!({"job_id": id})).await.unwrap();
        assert!(v["running_ms"].as_i64().is_some(), "{v}");
    }
    f.call("cancel_job", json!({"job_id": id})).await.unwrap();
    for _ in 0..3 {
        f.call("job_status", json!({"job_id": id})).await.unwrap();
    }
    let e = f.call("job_status", json!({"job_id": id})).await.unwrap_err();
    assert!(e.to_string().contains("loop detected"), "{e}");
}

fn processes_with(token: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(token))
            .unwrap_or(false)
            && e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) != Some(std::process::id())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_job_is_not_found_and_prefixes_must_be_unambiguous() {
    let f = fixture(Config::default(), None);
    let mut ids = Vec::new();
    // Enough jobs that two share a first character, and usually more.
    for i in 0..40 {
        let v = f
            .call("create_job", json!({"title": format!("j{i}"), "mode": "command", "description": "true"}))
            .await
            .unwrap();
        ids.push(v["job_id"].as_str().unwrap().to_owned());
    }
    let bob = f.ctx("bob", "b1");
    let e = f.call_as(&bob, "job_status", json!({"job_id": ids[0]})).await.unwrap_err();
    assert!(matches!(e, ToolError::NotFound { .. }), "{e}");
    // Refused as not found before any approval is asked.
    let e = f.call_as(&bob, "cancel_job", json!({"job_id": ids[0]})).await.unwrap_err();
    assert!(matches!(e, ToolError::NotFound { .. }), "{e}");
    assert!(f.call_as(&bob, "list_jobs", json!({})).await.unwrap()["jobs"].as_array().unwrap().is_empty());
    // Too short.
    let e = f.call("job_status", json!({"job_id": "abc"})).await.unwrap_err();
    assert!(e.to_string().contains("at least 4 characters"), "{e}");
    // A 4-character prefix that two of ann's jobs share: both are listed.
    let mut sorted = ids.clone();
    sorted.sort();
    let pair =
        sorted.windows(2).max_by_key(|w| w[0].chars().zip(w[1].chars()).take_while(|(a, b)| a == b).count()).unwrap();
    let common = pair[0].chars().zip(pair[1].chars()).take_while(|(a, b)| a == b).count();
    if common >= 4 {
        let prefix = &pair[0][..common];
        let e = f.call("job_status", json!({"job_id": prefix})).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&pair[0]) && text.contains(&pair[1]) && text.contains("give more characters"), "{text}");
    }
    // A unique prefix resolves.
    let v = f.call("job_status", json!({"job_id": &ids[3][..13]})).await.unwrap();
    assert_eq!(v["job_id"], ids[3].as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_what_to_do() {
    let mut config = Config::default();
    config.automation.jobs.claude_bin = Some("/nonexistent/claude".into());
    let f = fixture(config, None);
    std::fs::write(f.dir.path().join("file.txt"), "x").unwrap();
    let bad = |params: Value| {
        let f = &f;
        async move { f.call("create_job", params).await.unwrap_err().to_string() }
    };
    let e = bad(json!({"title": "t", "description": "d"})).await;
    assert!(e.contains("none is configured") && e.contains("[agents.main]"), "{e}");
    let e = bad(json!({"title": "t", "description": "d", "mode": "claude_code"})).await;
    assert!(e.contains("not installed") && e.contains("claude_bin"), "{e}");
    for dir in ["..", "../..", "/etc", "proj/../../x"] {
        let e = bad(json!({"title": "t", "description": "d", "mode": "command", "project_dir": dir})).await;
        assert!(e.contains("project_dir"), "{dir}: {e}");
    }
    let e = bad(json!({"title": "t", "description": "d", "mode": "command", "project_dir": ".toolgate"})).await;
    assert!(e.contains("toolgate's own state"), "{e}");
    let e = bad(json!({"title": "t", "description": "d", "mode": "command", "project_dir": "file.txt"})).await;
    assert!(e.contains("not a folder"), "{e}");
    let e = bad(json!({"title": "t", "description": "d", "mode": "command", "credentials": ["missing"]})).await;
    assert!(e.contains("no secret `missing`") && e.contains("toolgate tools secret"), "{e}");
    f.put_secret("k", "v");
    let e = bad(json!({"title": "t", "description": "d", "mode": "command", "credentials": [{"secret": "k", "env": "LD_PRELOAD"}]})).await;
    assert!(e.contains("LD_"), "{e}");
    let e =
        bad(json!({"title": "t", "description": "d", "mode": "command", "credentials": [{"secret": "../k"}]})).await;
    assert!(e.contains("not a secret name"), "{e}");
    let e = bad(json!({"title": "t", "description": "d", "mode": "telepathy"})).await;
    assert!(e.contains("mode"), "{e}");
    let e = bad(json!({"title": "   ", "description": "d", "mode": "command"})).await;
    assert!(e.contains("title"), "{e}");
    // Nothing was stored for any of them.
    assert!(f.call("list_jobs", json!({})).await.unwrap()["jobs"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_announced_and_waits_are_bounded() {
    let f = fixture(Config::default(), None);
    let v =
        f.call("create_job", json!({"title": "quick", "mode": "command", "description": "echo fine"})).await.unwrap();
    assert!(["queued", "running", "completed"].contains(&v["state"].as_str().unwrap()), "{v}");
    let done = f.finished(v["job_id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "completed");
    assert!(done["result"].as_str().unwrap().contains("fine"));
    assert!(done["finished_ms"].as_i64().unwrap() >= done["started_ms"].as_i64().unwrap());
}

/// The job's `decision` events, waiting (deadline 30 s) until there are `n`: the gate's events
/// reach the jobs through the server's forwarding task, which may run after the job ended. Read
/// from the state database (polling `job_events` would trip the loop breaker).
async fn decisions(f: &Fixture, id: &str, n: usize) -> Vec<String> {
    let store = toolgate::store::Store::open(&f.dir.path().join(".toolgate/state.db")).unwrap();
    let t = std::time::Instant::now();
    loop {
        let events = toolgate::store::JobStore::job_events(&store, id, 0, 500).unwrap();
        let found: Vec<String> = events.iter().filter(|e| e.kind == "decision").map(|e| e.text.clone()).collect();
        if found.len() >= n {
            return found;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no {n} decision events: {events:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_log_holds_each_calls_decision_trace() {
    // A command job whose exec a person allows: the trace names the approval and the outcome.
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce]);
    let f = fixture(Config::default(), Some(approver));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _tasks = f.gate.start_tasks(&shutdown);
    let v = f
        .call(
            "create_job",
            json!({"title": "t", "mode": "command", "description": "echo traced > traced.txt", "wait": true}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let d = decisions(&f, v["job_id"].as_str().unwrap(), 1).await;
    assert!(d[0].starts_with("exec: ") && d[0].contains("approval: allowed once") && d[0].ends_with("-> ok"), "{d:?}");
    shutdown.cancel();

    // A sandbox job whose agent calls echo: its call's trace, by the agent's session (its exec
    // is not offered under this policy, so it never reaches the gate: no trace, a refusal).
    let mut config = with_agent();
    config.tools.policy.deny.push("exec".into());
    let f = fixture(config, None);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _tasks = f.gate.start_tasks(&shutdown);
    f.gate.agents().unwrap().set_client("script", Arc::new(Worker));
    let v = f.call("create_job", json!({"title": "look", "description": "Say hi.", "wait": true})).await.unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let d = decisions(&f, v["job_id"].as_str().unwrap(), 1).await;
    assert!(d[0].starts_with("echo: policy:") && d[0].ends_with("-> ok"), "{d:?}");
    // A command job under the same policy: the gate's verdict on its exec is in the trace.
    let v = f
        .call("create_job", json!({"title": "t", "mode": "command", "description": "echo no", "wait": true}))
        .await
        .unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    let d = decisions(&f, v["job_id"].as_str().unwrap(), 1).await;
    // The trace names the rule that refused it.
    assert!(d[0].starts_with("exec: policy: refused: ") && d[0].ends_with("-> denied"), "{d:?}");
    assert!(d[0].contains("deny"), "{d:?}");
    eprintln!("decision traces: {d:#?}");
    shutdown.cancel();
}

/// A sandbox job's model with a credential: it asks for the token with `printenv` (setting the
/// variable itself, which the credential overrides), then with `echo $CI_TOKEN` while writing
/// its hash and the token to files, reads that file back, and answers with what it last read,
/// trying to leak it. Records every request it gets.
#[derive(Debug, Default)]
struct CredentialUser {
    requests: Mutex<Vec<String>>,
}

#[toolgate::core::async_trait]
impl ModelClient for CredentialUser {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        self.requests.lock().unwrap().push(format!("{:?}", req.messages));
        let results = tool_results(req);
        let call = |name: &str, args: Value| ToolCall {
            id: format!("c{}", results.len()),
            name: name.into(),
            arguments: args.to_string(),
        };
        Ok(match results.len() {
            0 => ModelReply {
                tool_calls: vec![call("exec", json!({"command": "printenv CI_TOKEN", "env": {"CI_TOKEN": "forged"}}))],
                ..ModelReply::default()
            },
            1 => ModelReply {
                tool_calls: vec![call(
                    "exec",
                    json!({"command": "echo \"token: $CI_TOKEN\"; printf %s \"$CI_TOKEN\" | sha256sum > hash.txt; echo \"$CI_TOKEN\" > tok.txt"}),
                )],
                ..ModelReply::default()
            },
            2 => ModelReply { tool_calls: vec![call("read", json!({"path": "tok.txt"}))], ..ModelReply::default() },
            _ => ModelReply { content: Some(format!("I saw: {}", results.join(" | "))), ..ModelReply::default() },
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_jobs_agent_uses_credentials_it_never_sees() {
    // exec with a credential in its env asks a person (values hidden): two execs, two answers.
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce; 2]);
    let f = fixture(with_agent(), Some(approver.clone()));
    let model = Arc::new(CredentialUser::default());
    f.gate.agents().unwrap().set_client("script", model.clone());
    // A value no leak pattern knows: only the job's own redaction can catch it.
    let secret = "plain-words-77 zebra quartz";
    f.put_secret("ci-token", secret);
    let v = f
        .call(
            "create_job",
            json!({"title": "use the token", "description": "Check the CI token works.", "wait": true,
                   "credentials": ["ci-token"]}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let id = v["job_id"].as_str().unwrap();

    // The commands really had the value (not the model's forged one): its hash is on disk.
    let hash = std::fs::read_to_string(f.dir.path().join("hash.txt")).unwrap();
    let expected = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$V\" | sha256sum"])
        .env("V", secret)
        .output()
        .unwrap();
    assert_eq!(hash, String::from_utf8(expected.stdout).unwrap());

    // The model read only the redacted form, in every tool result, across all its requests.
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for r in &requests {
        assert!(!r.contains(secret) && !r.contains("zebra"), "a request carried the value: {r}");
    }
    // The credential won over the variable the model set itself.
    assert!(requests[1].contains("output:\\n[REDACTED:CI_TOKEN]\\n"), "{}", requests[1]);
    assert!(!requests[1].contains("output:\\nforged"), "{}", requests[1]);
    assert!(requests[2].contains("token: [REDACTED:CI_TOKEN]"), "{}", requests[2]);
    assert!(requests[3].contains("[REDACTED:CI_TOKEN]"), "the file read back is redacted too: {}", requests[3]);

    // Nor the job's result, its events, the audit log, the approval requests or the transcript.
    let result = v["result"].as_str().unwrap();
    assert!(result.starts_with("I saw: ") && !result.contains(secret), "{result}");
    let events = f.call("job_events", json!({ "job_id": id, "limit": 200 })).await.unwrap().to_string();
    assert!(events.contains("tool_call exec") || events.contains("\"tool_call\""), "{events}");
    assert!(!events.contains(secret) && !events.contains("zebra"), "{events}");
    let audit = f.audit();
    let session = v["agent_session"].as_str().unwrap();
    let execs: Vec<&AuditRecord> = audit.iter().filter(|r| r.tool == "exec" && r.session == session).collect();
    assert_eq!(execs.len(), 2, "{audit:#?}");
    for r in &audit {
        let row = format!("{r:?}");
        assert!(!row.contains(secret) && !row.contains("zebra"), "{row}");
    }
    assert!(format!("{:?}", execs[0]).contains("CI_TOKEN"), "the row names the variable: {:?}", execs[0]);
    let asked = format!("{:?}", approver.seen.lock().unwrap());
    assert!(asked.contains("CI_TOKEN") && !asked.contains(secret) && !asked.contains("zebra"), "{asked}");
    let store = Store::open(&f.dir.path().join(".toolgate/state.db")).unwrap();
    let transcript = format!("{:?}", toolgate::store::SessionStore::session_messages(&store, session, 0).unwrap());
    assert!(!transcript.contains(secret) && !transcript.contains("zebra"), "{transcript}");
    // The record keeps the secret's name only.
    assert_eq!(v["credentials"], json!(["ci-token"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_run_with_no_server_still_logs_its_decisions_before_its_end() {
    // No `start_tasks`: nothing forwards the gate's events, as in the CLI's `call create_job`
    // with `wait`. The job reads its own calls' decisions and writes them before it ends.
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce]);
    let f = fixture(Config::default(), Some(approver));
    let v = f
        .call("create_job", json!({"title": "t", "mode": "command", "description": "echo one > one.txt", "wait": true}))
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let events = f.call("job_events", json!({ "job_id": v["job_id"] })).await.unwrap();
    let lines: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e["kind"].as_str().unwrap(), e["text"].as_str().unwrap()))
        .collect();
    let decisions: Vec<&String> = lines.iter().filter(|l| l.starts_with("decision ")).collect();
    assert_eq!(decisions.len(), 1, "{lines:#?}");
    assert!(decisions[0].contains("approval: allowed once") && decisions[0].ends_with("-> ok"), "{lines:#?}");
    assert_eq!(lines.last().unwrap(), "state completed", "the decision comes before the end: {lines:#?}");
    // A policy refusal names its rule.
    let mut config = Config::default();
    config.tools.policy.deny.push("exec".into());
    let f = fixture(config, None);
    let v = f
        .call("create_job", json!({"title": "t", "mode": "command", "description": "echo no", "wait": true}))
        .await
        .unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    let events = f.call("job_events", json!({ "job_id": v["job_id"] })).await.unwrap().to_string();
    assert!(events.contains("exec: policy: refused: ") && events.contains("in [tools].deny -> denied"), "{events}");
}

/// Starts a background command that prints the credential, then polls it with `process` until
/// its output shows (at most 10 polls), then answers with everything it read.
#[derive(Debug, Default)]
struct BackgroundUser {
    requests: Mutex<Vec<String>>,
}

#[toolgate::core::async_trait]
impl ModelClient for BackgroundUser {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        self.requests.lock().unwrap().push(format!("{:?}", req.messages));
        let results = tool_results(req);
        let call = |name: &str, args: Value| ToolCall {
            id: format!("c{}", results.len()),
            name: name.into(),
            arguments: args.to_string(),
        };
        let Some(first) = results.first() else {
            let command = "sleep 0.3; echo \"bg $CI_TOKEN\"; sleep 0.3";
            return Ok(ModelReply {
                tool_calls: vec![call("exec", json!({"command": command, "background": true}))],
                ..ModelReply::default()
            });
        };
        let id = first
            .split("started background process ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("none")
            .to_owned();
        let seen = results.iter().any(|r| r.contains("bg "));
        Ok(if seen || results.len() > 10 {
            ModelReply { content: Some(format!("read: {}", results.join(" | "))), ..ModelReply::default() }
        } else {
            ModelReply {
                tool_calls: vec![call("process", json!({"action": "poll", "id": id, "wait": 5}))],
                ..ModelReply::default()
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_commands_credential_is_redacted_from_what_process_reads() {
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce; 4]);
    let f = fixture(with_agent(), Some(approver));
    let model = Arc::new(BackgroundUser::default());
    f.gate.agents().unwrap().set_client("script", model.clone());
    let secret = "quiet-otter-5521 maple";
    f.put_secret("ci-token", secret);
    let v = f
        .call(
            "create_job",
            json!({"title": "bg", "description": "Run it in the background.", "wait": true, "credentials": ["ci-token"]}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let result = v["result"].as_str().unwrap();
    // The background process had the value; `process poll` showed it redacted.
    assert!(result.contains("bg [REDACTED:CI_TOKEN]"), "{result}");
    for r in model.requests.lock().unwrap().iter() {
        assert!(!r.contains(secret) && !r.contains("otter"), "{r}");
    }
    let events = f.call("job_events", json!({ "job_id": v["job_id"], "limit": 200 })).await.unwrap().to_string();
    assert!(!events.contains("otter"), "{events}");
    for r in f.audit() {
        assert!(!format!("{r:?}").contains("otter"), "{r:?}");
    }
}

/// A command line that prints `match=yes` when `CI_TOKEN` holds `value` and fails otherwise:
/// it names the value by its SHA-256 only, so the value is never in a model's request.
fn token_is(value: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$V\" | sha256sum | cut -c1-64"])
        .env("V", value)
        .output()
        .unwrap();
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    format!("test \"$(printf %s \"$CI_TOKEN\" | sha256sum | cut -c1-64)\" = {hash} && echo match=yes")
}

/// Asks once what the job's commands see of `CI_TOKEN` (whether it is set, and whether it is
/// the secret, by its hash), then answers with what it read.
#[derive(Debug)]
struct EnvProbe {
    /// [`token_is`] of the secret.
    check: String,
}

#[toolgate::core::async_trait]
impl ModelClient for EnvProbe {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let results = tool_results(req);
        if results.is_empty() {
            let command = format!("echo \"set=${{CI_TOKEN+yes}}\"; {} || echo match=no", self.check);
            return Ok(ModelReply {
                tool_calls: vec![ToolCall {
                    id: "c0".into(),
                    name: "exec".into(),
                    arguments: json!({ "command": command }).to_string(),
                }],
                ..ModelReply::default()
            });
        }
        Ok(ModelReply { content: Some(format!("saw: {}", results.join(" | "))), ..ModelReply::default() })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_job_given_a_credential_sees_it() {
    // Three sandbox jobs at once on one gate: Ann's with the credential, Ann's from another
    // session without it, Bob's without it. Only the first one's command has the variable.
    let mut config = with_agent();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let f = fixture(config, None);
    let secret = "lantern-0915 given only once";
    f.gate.agents().unwrap().set_client("script", Arc::new(EnvProbe { check: token_is(secret) }));
    f.put_secret("ci-token", secret);
    let job = |user: &'static str, session: &'static str, credentials: Value| {
        let (f, ctx) = (&f, f.ctx(user, session));
        async move {
            let params = json!({"title": "probe", "description": "What do your commands see?", "wait": true,
                                "credentials": credentials});
            f.call_as(&ctx, "create_job", params).await.unwrap()
        }
    };
    let (given, same_user, other_user) =
        tokio::join!(job("ann", "s1", json!(["ci-token"])), job("ann", "s2", json!([])), job("bob", "b1", json!([])));
    let given_result = given["result"].as_str().unwrap();
    assert_eq!(given["state"], "completed", "{given}");
    assert!(given_result.contains("set=yes") && given_result.contains("match=yes"), "{given_result}");
    for v in [&same_user, &other_user] {
        assert_eq!(v["state"], "completed", "{v}");
        let r = v["result"].as_str().unwrap();
        assert!(r.contains("set=\n") && r.contains("match=no") && !r.contains("match=yes"), "{r}");
    }
    // Bob's job's own exec row carries no env at all; the value is in no row.
    let audit = f.audit();
    let bobs: Vec<&AuditRecord> = audit.iter().filter(|r| r.tool == "exec" && r.user == "bob").collect();
    assert_eq!(bobs.len(), 1, "{audit:#?}");
    assert!(!bobs[0].params.contains(r#""env""#), "{:?}", bobs[0]);
    for r in &audit {
        assert!(!format!("{r:?}").contains("lantern"), "{r:?}");
    }
}

/// A team gateway's grants on a caller, as the gateway attaches them to its calls: everything
/// but `exec`, unless `exec` is given.
#[derive(Debug)]
struct TestGrants {
    exec: bool,
}

impl toolgate::core::CallGrants for TestGrants {
    fn check(
        &self,
        _: &CallContext,
        spec: &toolgate::core::ToolSpec,
        _: &toolgate::core::Touches,
    ) -> Result<toolgate::core::GrantedCall, ToolError> {
        if spec.name == "exec" && !self.exec {
            return Err(ToolError::Denied { tool: "exec".into(), reason: "test grants give no exec".into() });
        }
        Ok(toolgate::core::GrantedCall { trace: "test grant: allow".into(), ask: None })
    }

    fn listed(&self, _: &CallContext, tools: Vec<toolgate::core::ToolSpec>) -> Vec<toolgate::core::ToolSpec> {
        tools.into_iter().filter(|s| self.exec || s.name != "exec").collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_users_job_is_held_to_its_grants_and_gets_no_secret_it_was_not_given() {
    // The gateway's own gate (shared by its users): Bob's grants give no exec.
    let mut config = Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    config.gateway.enabled = true;
    let f = fixture(config, None);
    let secret = "admins-own 4411 harbor";
    f.put_secret("ci-token", secret);
    let mut bob = f.ctx("bob", "b1");
    bob.grants = Some(Arc::new(TestGrants { exec: false }));

    // A job is no way around the grants: its exec is refused as Bob's own would be, and the
    // decision names the grants.
    let v = f
        .call_as(
            &bob,
            "create_job",
            json!({"title": "t", "mode": "command", "description": "echo ran > ran.txt", "wait": true}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    assert!(!f.dir.path().join("ran.txt").exists(), "the refused command ran");
    let d = decisions(&f, v["job_id"].as_str().unwrap(), 1).await;
    assert!(d[0].contains("gateway grants: refused") && d[0].ends_with("-> denied"), "{d:?}");

    // The admin's secret is not Bob's to name, even with exec granted; the refusal says how he
    // gets one of his own, and no job is stored.
    bob.grants = Some(Arc::new(TestGrants { exec: true }));
    let e = f
        .call_as(
            &bob,
            "create_job",
            json!({"title": "t", "mode": "command", "description": "env", "credentials": ["ci-token"]}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("`ci-token`") && e.contains("workspaces") && e.contains("users/bob tools secret"), "{e}");
    // Only the refused-exec job above is Bob's: the refused create_job stored none.
    let bobs_jobs = f.call_as(&bob, "list_jobs", json!({"filter": "all"})).await.unwrap();
    assert_eq!(bobs_jobs["jobs"].as_array().unwrap().len(), 1, "{bobs_jobs}");
    // The local user (no grants) still can.
    let v = f
        .call(
            "create_job",
            json!({"title": "t", "mode": "command", "description": token_is(secret),
                   "credentials": ["ci-token"], "wait": true}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    assert!(v["result"].as_str().unwrap().contains("match=yes"), "{v}");

    // A per-user gate (not the gateway's own: its store is the user's) gives its user's job the
    // user's secret, under the user's grants.
    let mut config = Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let f = fixture(config, None);
    f.put_secret("ci-token", "bobs-own 7812");
    let mut bob = f.ctx("bob", "b1");
    bob.grants = Some(Arc::new(TestGrants { exec: true }));
    let v = f
        .call_as(
            &bob,
            "create_job",
            json!({"title": "t", "mode": "command", "description": token_is("bobs-own 7812"),
                   "credentials": ["ci-token"], "wait": true}),
        )
        .await
        .unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    assert!(v["result"].as_str().unwrap().contains("match=yes"), "{v}");
    let d = decisions(&f, v["job_id"].as_str().unwrap(), 1).await;
    assert!(d[0].contains("test grant: allow") && d[0].ends_with("-> ok"), "{d:?}");
}
