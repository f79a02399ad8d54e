//! Path locks and custom tools on one PostgreSQL database (issue 29, `[store] url`): what a
//! `toolgate` process stores there binds, or is offered by, a process whose own workspace
//! state database is another file, as a second node's is.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use toolgate::config::StoreConfig;
use toolgate::store::{LockOwner, PathLock};
use toolgate_testkit::postgres::Cluster;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// A workspace whose calls never ask, with its shared state in the database at `url`.
fn workspace(url: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!("[approval]\nmode = \"never\"\n\n[store]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    ws
}

/// `toolgate --workspace WS ARGS...`: whether it succeeded, and its output.
fn run(ws: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).args(args).env_remove("RUST_LOG").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn a_path_lock_taken_by_one_process_refuses_a_clashing_take_by_another_node() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = workspace(&url);
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    let (ok, text) =
        run(ws.path(), &["call", "lock_paths", &json!({"globs": ["src/**"], "ttl_ms": 600_000}).to_string()]);
    assert!(ok && text.contains("Token: "), "{text}");

    // Another node: the same workspace path on the shared filesystem, its own state database.
    let elsewhere = tempfile::tempdir().unwrap();
    let config = StoreConfig { url: Some(url.clone()), audit_url: None };
    let node_b = toolgate::state::open(&config, &elsewhere.path().join(".toolgate/state.db")).unwrap();
    let workspace = std::fs::canonicalize(ws.path()).unwrap().to_string_lossy().into_owned();
    let live = node_b.locks.locks_live(&workspace, now_ms()).unwrap();
    assert_eq!(live.len(), 1, "the lock is in the shared database: {live:?}");
    assert_eq!(live[0].globs, ["src/**"]);
    let mine = PathLock {
        token: "node-b".into(),
        workspace: workspace.clone(),
        owner: LockOwner { user: "bea".into(), agent: "main".into(), session: "node-b".into() },
        globs: vec!["src/db/**".into()],
        created_ms: now_ms(),
        expires_ms: now_ms() + 60_000,
    };
    let refused = node_b.locks.lock_take(&mine, now_ms(), &|_| true).unwrap();
    assert_eq!(refused.as_ref(), Some(&live[0]), "node B is refused by the process's lock");
    assert_eq!(node_b.locks.locks_live(&workspace, now_ms()).unwrap().len(), 1, "nothing written");
}

#[test]
fn a_custom_tool_added_on_one_node_is_listed_and_runs_on_another() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (workspace(&url), workspace(&url));
    let def = json!({
        "name": "count_lines",
        "description": "Count the lines of a file in the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "command": "wc -l < {{.path}}",
        "timeout_seconds": 10
    });
    std::fs::write(a.path().join("def.json"), def.to_string()).unwrap();
    let (ok, text) = run(a.path(), &["tools", "add", "--file", a.path().join("def.json").to_str().unwrap()]);
    assert!(ok, "{text}");

    // B has its own state database: the definition came through PostgreSQL.
    let (ok, text) = run(b.path(), &["tools", "custom"]);
    assert!(ok && text.contains("count_lines"), "{text}");
    std::fs::write(b.path().join("data.txt"), "a\nb\nc\n").unwrap();
    let (ok, text) = run(b.path(), &["call", "count_lines", r#"{"path": "data.txt"}"#]);
    assert!(ok && text.contains('3'), "{text}");

    let (ok, text) = run(b.path(), &["tools", "remove", "count_lines"]);
    assert!(ok, "{text}");
    let (ok, text) = run(a.path(), &["tools", "custom"]);
    assert!(ok && !text.contains("count_lines"), "removed on B, gone on A: {text}");
}

/// The token in `lock_paths`'s answer ("... Token: tg-lock-... (pass it ...").
fn token(text: &str) -> String {
    let after = text.split("Token: ").nth(1).unwrap_or_else(|| panic!("no token in: {text}"));
    after.split_whitespace().next().unwrap_or_default().to_owned()
}

/// `toolgate call TOOL PARAMS` with `extra` arguments (a `--session`).
fn call(ws: &Path, tool: &str, params: serde_json::Value, extra: &[&str]) -> (bool, String) {
    let params = params.to_string();
    let mut args = vec!["call", tool, params.as_str()];
    args.extend_from_slice(extra);
    run(ws, &args)
}

/// Runs that name different sessions (agents taking turns on one workspace) are different
/// holders: a lock one took binds the other, on the workspace's SQLite file and on PostgreSQL.
/// Runs that name one session, or none (the workspace's `default`, as a person at a terminal),
/// share their locks.
#[test]
fn a_lock_taken_in_one_session_binds_toolgate_call_runs_of_another() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let sqlite = tempfile::tempdir().unwrap();
    std::fs::write(sqlite.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n").unwrap();
    let (a, b) = (["--session", "agent-a"], ["--session", "agent-b"]);
    for (backend, ws) in [("sqlite", sqlite), ("postgres", workspace(&url))] {
        let ws = ws.path();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let (ok, text) = call(ws, "lock_paths", json!({"globs": ["src/**"], "ttl_ms": 600_000}), &a);
        assert!(ok, "{backend}: {text}");
        let first = token(&text);

        // Another session, same user and agent: another holder.
        let (ok, why) = call(ws, "write", json!({"path": "src/new.rs", "content": "x\n"}), &b);
        assert!(!ok && why.contains("`src/new.rs` is locked by agent `main`"), "{backend}: {why}");
        assert!(why.contains("session `agent-a`"), "{backend}: names the holder: {why}");
        assert!(!ws.join("src/new.rs").exists(), "{backend}: nothing written");
        let (ok, why) = call(ws, "lock_paths", json!({"globs": ["src/db/**"]}), &b);
        assert!(!ok && why.contains("conflicts with a lock held by another agent"), "{backend}: {why}");
        let (ok, out) = call(ws, "unlock_paths", json!({"tokens": [first]}), &b);
        assert!(ok && out.contains("Released 0 locks"), "{backend}: another session's token: {out}");
        // The holder's own later runs write and release.
        let (ok, out) = call(ws, "write", json!({"path": "src/new.rs", "content": "x\n"}), &a);
        assert!(ok, "{backend}: the session's own lock: {out}");
        let (ok, out) = call(ws, "unlock_paths", json!({"tokens": [first]}), &a);
        assert!(ok && out.contains("Released 1 lock."), "{backend}: {out}");

        // Runs that name no session share the default one, which binds a named session.
        let (ok, text) = call(ws, "lock_paths", json!({"globs": ["docs/**"], "ttl_ms": 600_000}), &[]);
        assert!(ok, "{backend}: {text}");
        let docs = token(&text);
        let (ok, out) = call(ws, "write", json!({"path": "docs/a.md", "content": "a\n"}), &[]);
        assert!(ok, "{backend}: the default session's own lock: {out}");
        let (ok, why) = call(ws, "write", json!({"path": "docs/b.md", "content": "b\n"}), &b);
        assert!(!ok && why.contains("session `default`"), "{backend}: {why}");
        let (ok, out) = call(ws, "unlock_paths", json!({"tokens": [docs]}), &[]);
        assert!(ok && out.contains("Released 1 lock."), "{backend}: {out}");
        let (ok, out) = call(ws, "write", json!({"path": "docs/b.md", "content": "b\n"}), &b);
        assert!(ok, "{backend}: released: {out}");

        let (ok, why) = call(ws, "echo", json!({"message": "hi"}), &["--session", "../x y"]);
        assert!(!ok && why.contains("is not a session name"), "{backend}: {why}");
    }
}
