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
