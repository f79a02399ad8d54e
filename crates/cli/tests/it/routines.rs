//! Routines through the real binary: a webhook routine at `/hooks/NAME` of `toolgate serve
//! --http`, signed by Python's `hmac` (an independent implementation of the documented
//! format), unsigned, tampered and replayed; and a cron routine across `kill -9` and restarts
//! of the server: every minute fired once, none lost, none twice.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_testkit::serve::HttpServer;

use crate::support::signed::{post, python_hmac};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// A workspace whose calls never ask (the routines' commands write marker files; they still
/// run in the sandbox).
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n").unwrap();
    ws
}

fn call(ws: &Path, tool: &str, params: Value) -> Value {
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["call", tool, &params.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "toolgate call {tool}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.get("structured").cloned().unwrap_or(v)
}

/// HMAC-SHA256 of `TIMESTAMP.BODY` as `sha256=HEX`, computed by Python.
fn python_signature(secret: &str, ts: i64, body: &str) -> String {
    format!("sha256={}", python_hmac(secret, &format!("{ts}.{body}")))
}

/// Kills `server` (SIGKILL) and keeps its workspace.
fn take_workspace(server: HttpServer) -> tempfile::TempDir {
    // A workspace cannot be moved out of a value with a destructor: swap in an empty one.
    let mut server = server;
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);
    ws
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Polls `routine_history` until `pred` holds (deadline `secs`).
fn history_until(ws: &Path, name: &str, secs: u64, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let t = Instant::now();
    loop {
        let h = call(ws, "routine_history", json!({"name": name, "limit": 200}));
        let runs = h["runs"].as_array().cloned().unwrap_or_default();
        if pred(&runs) {
            return runs;
        }
        assert!(t.elapsed() < Duration::from_secs(secs), "routine_history never got there: {h}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_webhook_routine_runs_on_a_signed_post_and_refuses_the_rest() {
    let ws = workspace();
    let secret = "a-shared-webhook-secret-0123456789";
    call(
        ws.path(),
        "routine_create",
        json!({"name": "deploy", "trigger_type": "webhook", "prompt": "note the delivery", "action_type": "tool",
               "tool": "exec", "params": {"command": "echo delivered >> hook.txt"}, "webhook_secret": secret}),
    );
    let listed = call(ws.path(), "routine_list", json!({}));
    assert!(listed["note"].as_str().unwrap().contains("no HTTP server"), "{listed}");
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path().to_owned();
    let body = r#"{"ref":"refs/heads/main"}"#;
    let ts = now_secs();
    let sig = python_signature(secret, ts, body);
    let signed = [("X-Toolgate-Timestamp", ts.to_string()), ("X-Toolgate-Signature", sig.clone())];
    let (status, reply) = post(&server.url, "/hooks/deploy", &signed, body);
    assert_eq!(status, 202, "{reply}");
    let runs = history_until(&ws, "deploy", 30, |r| r.first().is_some_and(|r| r["job"]["state"] == "completed"));
    assert_eq!(runs.len(), 1);
    assert_eq!(std::fs::read_to_string(ws.join("hook.txt")).unwrap(), "delivered\n");

    let (status, reply) = post(&server.url, "/hooks/deploy", &signed, body);
    assert_eq!(status, 409, "replayed: {reply}");
    let (status, reply) = post(&server.url, "/hooks/deploy", &[], body);
    assert_eq!(status, 401, "unsigned: {reply}");
    assert!(reply.contains("X-Toolgate-Timestamp"), "{reply}");
    let (status, _) = post(&server.url, "/hooks/deploy", &signed, r#"{"ref":"refs/heads/evil"}"#);
    assert_eq!(status, 401, "tampered");
    let bearer = [("Authorization", format!("Bearer {}", server.token.clone().unwrap_or_default()))];
    assert_eq!(post(&server.url, "/hooks/deploy", &bearer, body).0, 401, "the bearer token is no signature");
    assert_eq!(post(&server.url, "/hooks/nothing", &signed, body).0, 404);
    // Only the signed delivery ran.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(call(&ws, "routine_history", json!({"name": "deploy"}))["runs"].as_array().unwrap().len(), 1);
    assert_eq!(std::fs::read_to_string(ws.join("hook.txt")).unwrap(), "delivered\n");
}

#[test]
fn a_cron_routine_across_kill_9_and_restarts_fires_every_minute_once() {
    let ws = workspace();
    call(
        ws.path(),
        "routine_create",
        json!({"name": "minutely", "trigger_type": "cron", "schedule": "* * * * *", "timezone": "UTC",
               "prompt": "append a line", "action_type": "tool", "tool": "exec",
               "params": {"command": "echo fired >> fires.txt"}}),
    );
    // Every routine run is a job: a server killed while its job runs leaves that fire `failed:
    // interrupted` (never run again). This test is about the scheduler, so each kill waits
    // until the newest fire's job has ended.
    let ended = |r: &Value| matches!(r["job"]["state"].as_str(), Some("completed" | "failed" | "cancelled"));
    // First server: until its first fire, then killed with SIGKILL (its lease is not released).
    let first = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = first.ws.path().to_owned();
    history_until(&ws, "minutely", 75, |r| r.first().is_some_and(ended));
    // The server is killed (HttpServer's drop sends SIGKILL) and a second one starts at once
    // on the same workspace: it takes over when the lease lapses; two more minutes.
    let second = HttpServer::start_in(TOOLGATE, take_workspace(first), &[]);
    history_until(&ws, "minutely", 150, |r| r.len() >= 3 && ended(&r[0]));
    // Killed too, mid-minute, and a third: one more.
    let third = HttpServer::start_in(TOOLGATE, take_workspace(second), &[]);
    let runs = history_until(&ws, "minutely", 90, |r| r.len() >= 4 && ended(&r[0]));
    let _kept = take_workspace(third); // killed; the workspace stays for the checks below
    let mut minutes: Vec<i64> = runs.iter().map(|r| r["scheduled_ms"].as_i64().unwrap()).collect();
    minutes.sort();
    let n = minutes.len();
    minutes.dedup();
    assert_eq!(minutes.len(), n, "a minute fired twice: {runs:?}");
    // Consecutive minutes: none lost.
    for w in minutes.windows(2) {
        assert_eq!(w[1] - w[0], 60_000, "a minute was lost: {runs:?}");
    }
    for r in &runs {
        assert_eq!(r["status"], "started", "{r}");
    }
    // Each fire ran its command once: one line per fire.
    let lines = std::fs::read_to_string(ws.join("fires.txt")).unwrap().lines().count();
    let completed = runs.iter().filter(|r| r["job"]["state"] == "completed").count();
    assert_eq!(completed, runs.len(), "{runs:?}");
    assert_eq!(lines, runs.len(), "{lines} lines for {} fires: {runs:?}", runs.len());
}
