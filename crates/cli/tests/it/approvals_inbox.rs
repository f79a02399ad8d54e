//! The durable approvals inbox through the binary: `toolgate serve --http` with a real MCP
//! client (the MCP Python SDK, no elicitation, so calls wait in the inbox), decided from other
//! processes (`toolgate approvals ...`, `/api/approvals`), and across a restart of the server.
//! The client's side is `crates/cli/tests/python/approvals_inbox.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use toolgate_testkit::serve::HttpServer;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The MCP Python SDK's venv (`cargo xtask deps` makes it; `mcp_python` tests do too).
fn python() -> PathBuf {
    let python = repo().join(".cache/peers/venv/bin/python");
    assert!(python.exists(), "no MCP Python SDK at {}; run `cargo xtask deps`", python.display());
    python
}

/// Runs the client's `phase` against `server`; its stdout.
fn client(server: &HttpServer, phase: &str, extra: &[&str]) -> String {
    let script = repo().join("crates/cli/tests/python/approvals_inbox.py");
    let token = server.token.clone().expect("token");
    let ws = server.ws.path().to_str().unwrap().to_owned();
    let out = Command::new(python())
        .arg(script)
        .args([phase, &server.url, &token, TOOLGATE, &ws])
        .args(extra)
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "{phase} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn cli(ws: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).args(args).output().expect("run toolgate");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn a_waiting_call_is_decided_from_another_process_once() {
    let server = HttpServer::start(TOOLGATE, &[]);
    client(&server, "decide", &[]);
    // The history, filtered: both entries, who decided, and that each decision ran one call.
    let (ok, out) = cli(server.ws.path(), &["approvals", "history", "--tool", "write", "--json"]);
    assert!(ok, "{out}");
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[1]["decided_by"], "ops", "{out}");
    assert!(rows.iter().all(|r| r["used_ms"].is_i64()), "each decision ran its call: {out}");
    let (ok, out) = cli(server.ws.path(), &["approvals", "history", "--status", "pending"]);
    assert!(ok && !out.contains("write"), "{out}");
    let (ok, out) = cli(server.ws.path(), &["approvals", "history", "--status", "maybe"]);
    assert!(!ok && out.contains("unknown state `maybe`"), "{out}");
    let (ok, out) = cli(server.ws.path(), &["approvals", "approve", "999"]);
    assert!(!ok && out.contains("no approval 999"), "{out}");
}

#[test]
fn pending_entries_survive_a_restart_and_bind_to_the_arguments() {
    let ws = toolgate_testkit::serve::workspace();
    // The call waits 2 s at most, then is told which entry it waits on.
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\ntimeout_secs = 2\n").unwrap();
    let mut first = HttpServer::start_in(TOOLGATE, ws, &[]);
    let out = client(&first, "wait", &[]);
    assert!(out.contains("error=True") && out.contains("waiting for approval 1"), "{out}");
    // Restart: the same workspace, a new process.
    let ws = std::mem::replace(&mut first.ws, tempfile::tempdir().unwrap());
    drop(first);
    let second = HttpServer::start_in(TOOLGATE, ws, &[]);
    let (ok, out) = cli(second.ws.path(), &["approvals", "pending"]);
    assert!(ok && out.contains("    1  pending") && out.contains("AGENTS.md"), "still pending after a restart:\n{out}");
    let (ok, out) = cli(second.ws.path(), &["approvals", "approve", "1"]);
    assert!(ok, "{out}");
    // Other arguments do not reuse the approval; the same ones do, once.
    let out = client(&second, "retry", &["changed content\n"]);
    assert!(out.contains("waiting for approval 2"), "a changed argument asks anew:\n{out}");
    let out = client(&second, "retry", &["after the restart\n"]);
    assert!(out.contains("error=False"), "the approved retry ran:\n{out}");
    let written = std::fs::read_to_string(second.ws.path().join("AGENTS.md")).unwrap();
    assert_eq!(written, "after the restart\n");
}
