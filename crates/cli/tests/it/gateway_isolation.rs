//! Two users of one team gateway through the official MCP Python SDK (issue 28, item 2): beside
//! files (`gateway.rs`), neither sees or touches the other's processes, memory, sessions,
//! approvals or audit rows; and each user's `.toolgate/` is that user's alone (`0700`, files
//! `0600`), fixed when an older one is opened. The client's side is
//! `crates/cli/tests/python/gateway_isolation.py`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use toolgate_testkit::serve::HttpServer;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every folder under `dir` is 0700 and every file has no group or other bits.
fn assert_private(dir: &Path) {
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            assert_private(&path);
        } else if entry.file_type().unwrap().is_file() {
            assert_eq!(mode(&path) & 0o077, 0, "{} is {:o}", path.display(), mode(&path));
        }
    }
}

/// The audit rows of workspace `ws`.
fn audit(ws: &Path) -> Vec<Value> {
    let out =
        Command::new(TOOLGATE).arg("--workspace").arg(ws).args(["audit", "--json", "--tail", "500"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn two_users_cannot_see_each_others_processes_memory_sessions_approvals_or_audit() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[approval]\ntimeout_secs = 2\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let mut server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_isolation.py");
    let ws_path = server.ws.path().to_string_lossy().into_owned();
    let out = Command::new(python::sdk_python())
        .arg(script)
        .args([server.url.as_str(), &ann, &bob, TOOLGATE, &ws_path])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "isolation:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Audit rows: each user's calls are in that user's log only, and ann's marker is nowhere in
    // bob's.
    let users = server.ws.path().join("users");
    let (ann_rows, bob_rows) = (audit(&users.join("ann")), audit(&users.join("bob")));
    assert!(!ann_rows.is_empty() && ann_rows.iter().all(|r| r["user"] == "ann"), "{ann_rows:?}");
    assert!(!bob_rows.is_empty() && bob_rows.iter().all(|r| r["user"] == "bob"), "{bob_rows:?}");
    assert!(!serde_json::to_string(&bob_rows).unwrap().contains("ann-7f3a"), "{bob_rows:?}");

    // Each user's state is private on disk.
    for user in ["ann", "bob"] {
        assert_private(&users.join(user).join(".toolgate"));
        assert_eq!(mode(&users.join(user).join(".toolgate/state.db")), 0o600);
    }
    // An older per-user workspace, readable by all, is fixed when its user's gate opens it again
    // (after a restart, on bob's next request).
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);
    let state = ws.path().join("users/bob/.toolgate");
    for (f, m) in [("", 0o755), ("state.db", 0o644)] {
        std::fs::set_permissions(state.join(f), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_call.py");
    let out = Command::new(python::sdk_python())
        .arg(script)
        .args([server.url.as_str(), &bob, "echo", r#"{"message": "hi"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_private(&server.ws.path().join("users/bob/.toolgate"));
    assert_eq!(mode(&server.ws.path().join("users/bob/.toolgate/state.db")), 0o600);
}

/// `initialize` over raw HTTP with `key`: the status line and the body.
fn initialize(server: &HttpServer, key: &str) -> String {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// Keys of the issue's "Bad input": one past its `--expires` (its expiry moved into the past in
/// the real state database, as the clock passing it would), and a valid key of another gateway
/// (another workspace) are refused with a 401 that says why, and nothing is called.
#[test]
fn an_expired_key_and_another_gateways_key_are_refused() {
    let gateway = |users: &[&str]| {
        let ws = toolgate_testkit::serve::workspace();
        std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\n").unwrap();
        for user in users {
            admin(ws.path(), &["user", "add", user]);
        }
        ws
    };
    let here = gateway(&["ann"]);
    let elsewhere = gateway(&["ann"]);
    let ann = admin(here.path(), &["key", "create", "--user", "ann", "--expires", "90m"]);
    let theirs = admin(elsewhere.path(), &["key", "create", "--user", "ann"]);
    let server = HttpServer::start_in(TOOLGATE, here, &[]);
    assert!(initialize(&server, &ann).starts_with("HTTP/1.1 200"), "the key works before its expiry");

    let other = initialize(&server, &theirs);
    assert!(other.starts_with("HTTP/1.1 401") && other.contains("unknown API key"), "{other}");
    let db = rusqlite::Connection::open(server.ws.path().join(".toolgate/state.db")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let moved = db.execute("UPDATE api_keys SET expires_ms = created_ms - 1000 WHERE id = ?1", [&ann[3..19]]).unwrap();
    assert_eq!(moved, 1);
    drop(db);
    let expired = initialize(&server, &ann);
    assert!(
        expired.starts_with("HTTP/1.1 401") && expired.contains("has expired; ask an admin for a new one"),
        "{expired}"
    );
    let listed = admin(server.ws.path(), &["key", "list"]);
    assert!(listed.contains("expired"), "{listed}");
}
