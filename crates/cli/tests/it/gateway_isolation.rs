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
