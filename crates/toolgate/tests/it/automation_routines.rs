//! Routines through `Gate::call`: a `tool` routine run by hand and by an event of the gate (its
//! `exec` a real command job in the sandbox, made as the routine's owner), the `cron` tool
//! without a model, and the bad inputs a model may send (an invalid cron field, an agent
//! routine with no model configured, a context path outside the workspace).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::Gate;
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

fn fixture_with(config: Config) -> Fixture {
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
