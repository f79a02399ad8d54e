//! A workspace's state belongs to its owner (`.toolgate/` 0700, its files 0600, whatever the
//! umask; an older workspace fixed on open), and `toolgate audit verify` finds a row changed,
//! deleted or reordered behind toolgate's back — all through the real binary.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use toolgate_testkit::serve::HttpServer;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `toolgate --workspace WS ARGS...` under umask 000 (so any mode left to the umask shows).
fn toolgate(ws: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg("umask 000 && exec \"$@\"").arg("sh").arg(TOOLGATE).arg("--workspace").arg(ws);
    cmd.args(["--approval", "never"]).args(args);
    cmd.output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Every folder under `.toolgate` is 0700 and every file 0600 (or 0700 if it is a program).
fn assert_private(ws: &Path) -> usize {
    let state = ws.join(".toolgate");
    assert_eq!(mode(&state), 0o700, ".toolgate");
    let mut stack = vec![state];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                assert_eq!(mode(&path), 0o700, "{}", path.display());
                stack.push(path);
            } else if kind.is_file() {
                assert_eq!(mode(&path) & 0o077, 0, "{} is {:o}", path.display(), mode(&path));
                files += 1;
            }
        }
    }
    files
}

#[test]
fn state_on_disk_is_its_owners_alone_whatever_the_umask() {
    let ws = tempfile::tempdir().unwrap();
    ok(toolgate(ws.path(), &["call", "echo", r#"{"message": "hi"}"#]));
    assert_private(ws.path());
    assert_eq!(mode(&ws.path().join(".toolgate/state.db")), 0o600);
    // A command's spilled output (`.toolgate/outputs/ID.log`) and the write lock.
    ok(toolgate(ws.path(), &["call", "exec", r#"{"command": "seq 1 50000"}"#]));
    ok(toolgate(ws.path(), &["call", "write", r#"{"path": "a.txt", "content": "a"}"#]));
    assert_eq!(mode(&ws.path().join(".toolgate/outputs")), 0o700);
    let files = assert_private(ws.path());
    assert!(files >= 3, "state.db, a log, the write lock: {files}");

    // `serve` (and a call beside it): the database's -wal and -shm exist while it runs.
    let server = HttpServer::start(TOOLGATE, &[]);
    ok(toolgate(server.ws.path(), &["call", "echo", r#"{"message": "hi"}"#]));
    assert_eq!(mode(&server.ws.path().join(".toolgate/http-token")), 0o600);
    assert_private(server.ws.path());
}

#[test]
fn an_older_workspace_readable_by_all_is_fixed_on_open() {
    let ws = tempfile::tempdir().unwrap();
    ok(toolgate(ws.path(), &["call", "echo", r#"{"message": "hi"}"#]));
    let state = ws.path().join(".toolgate");
    std::fs::write(state.join("custom-tools.changed"), "").unwrap();
    for (f, m) in [("", 0o755), ("state.db", 0o644), ("custom-tools.changed", 0o664)] {
        std::fs::set_permissions(state.join(f), std::fs::Permissions::from_mode(m)).unwrap();
    }
    ok(toolgate(ws.path(), &["audit", "--tail", "1"]));
    assert_private(ws.path());
    assert_eq!(mode(&state.join("state.db")), 0o600);
}

fn sql(ws: &Path, statement: &str) {
    rusqlite::Connection::open(ws.join(".toolgate/state.db")).unwrap().execute_batch(statement).unwrap();
}

/// A workspace with five completed calls, and `audit verify` saying it is intact.
fn five_calls() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    for i in 1..=5 {
        ok(toolgate(ws.path(), &["call", "echo", &format!(r#"{{"message": "call {i}"}}"#)]));
    }
    let out = ok(toolgate(ws.path(), &["audit", "verify"]));
    assert!(out.contains("audit chain intact: 5 rows"), "{out}");
    ws
}

fn verify_fails(ws: &Path) -> String {
    let out = toolgate(ws, &["audit", "verify"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("audit chain BROKEN at row"), "{text}");
    text
}

#[test]
fn audit_verify_names_the_first_row_changed_deleted_or_reordered() {
    let ws = five_calls();
    sql(ws.path(), "UPDATE audit SET params = '{\"message\": \"nothing to see\"}' WHERE seq = 3");
    let text = verify_fails(ws.path());
    assert!(text.contains("row 3 (call ") && text.contains("content was changed"), "{text}");

    let ws = five_calls();
    sql(ws.path(), "DELETE FROM audit WHERE seq = 2");
    let text = verify_fails(ws.path());
    assert!(text.contains("row 2 (call ") && text.contains("missing"), "{text}");

    let ws = five_calls();
    sql(
        ws.path(),
        "UPDATE audit SET seq = -4 WHERE seq = 4; UPDATE audit SET seq = 4 WHERE seq = 5;
         UPDATE audit SET seq = 5 WHERE seq = -4;",
    );
    let text = verify_fails(ws.path());
    assert!(text.contains("row 4 (call ") && text.contains("does not follow"), "{text}");

    // The JSON report names the row too.
    let out = toolgate(ws.path(), &["audit", "verify", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["broken"]["seq"], 4, "{report}");

    // Calls after a retention prune still verify (the prune row records the new start).
    let ws = five_calls();
    std::fs::write(ws.path().join("toolgate.toml"), "[audit]\nretention_days = 1\n").unwrap();
    sql(ws.path(), "UPDATE audit SET ts_ms = 1000 WHERE seq <= 2");
    // Rewriting ts_ms broke rows 1-2; pruning deletes exactly those, so the chain checks out again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        ok(toolgate(ws.path(), &["call", "echo", r#"{"message": "after"}"#]));
        let out = toolgate(ws.path(), &["audit", "verify"]);
        if out.status.success() {
            let text = String::from_utf8(out.stdout).unwrap();
            assert!(text.contains("positions 3.."), "{text}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "retention never ran: {}", String::from_utf8_lossy(&out.stdout));
    }
    let tail = ok(toolgate(ws.path(), &["audit", "--tail", "20", "--json"]));
    assert!(tail.contains("\"tool\":\"audit_prune\""), "{tail}");
}
