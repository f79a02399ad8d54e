//! Path locks across processes (issue 25, item 1): two `toolgate serve` over stdio on one
//! workspace, as two coding agents each starting their own server, driven by the rmcp client.
//! Each process is its own MCP session; the locks are rows of the workspace's state database,
//! so one process's lock binds the other's writes until it is released or expires.

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn serve(ws: &Path) -> Client {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .arg("--workspace")
        .arg(ws)
        .args(["--approval", "never", "serve"])
        .env("XDG_CONFIG_HOME", ws.join(".xdg"))
        .env_remove("RUST_LOG");
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("start toolgate serve");
    ().serve(transport).await.expect("MCP handshake")
}

/// Calls `name`; returns whether it failed and its text.
async fn call(client: &Client, name: &str, args: Value) -> (bool, String) {
    let mut request = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(map) = args.clone() {
        request = request.with_arguments(map);
    }
    let result: CallToolResult = client.call_tool(request).await.unwrap_or_else(|e| panic!("{name} {args}: {e}"));
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n");
    (result.is_error == Some(true), text)
}

async fn ok(client: &Client, name: &str, args: Value) -> String {
    let (failed, text) = call(client, name, args.clone()).await;
    assert!(!failed, "{name} {args} failed: {text}");
    text
}

async fn refused(client: &Client, name: &str, args: Value) -> String {
    let (failed, text) = call(client, name, args.clone()).await;
    assert!(failed, "{name} {args} should have been refused: {text}");
    text
}

/// The token in `lock_paths`'s answer ("... Token: tg-lock-... (pass it ...").
fn token(text: &str) -> String {
    let after = text.split("Token: ").nth(1).unwrap_or_else(|| panic!("no token in: {text}"));
    after.split_whitespace().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stdio_servers_on_one_workspace_honour_each_other_s_locks() {
    let ws = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(ws.path().join("src")).expect("mkdir");
    std::fs::write(ws.path().join("src/x.rs"), "fn main() {}\n").expect("write");
    let (a, b) = (serve(ws.path()).await, serve(ws.path()).await);
    assert!(ws.path().join(".toolgate/state.db").is_file(), "the servers keep a state database");

    // A locks src/**; B may read but not write or edit there, and cannot lock it either.
    let locked = ok(&a, "lock_paths", json!({"globs": ["src/**"], "ttl_ms": 60_000})).await;
    let a_token = token(&locked);
    ok(&b, "read", json!({"path": "src/x.rs"})).await;
    let edit = json!({"path": "src/x.rs", "old_string": "fn main() {}", "new_string": "fn main() { b() }"});
    let why = refused(&b, "edit", edit.clone()).await;
    assert!(why.contains("`src/x.rs` is locked by agent `main`") && why.contains("with `src/**` until"), "{why}");
    assert!(why.contains("session `mcp-stdio-"), "names A's session: {why}");
    assert!(why.contains("wait until then, or work on other files"), "{why}");
    let why = refused(&b, "write", json!({"path": "src/x.rs", "content": "b\n"})).await;
    assert!(why.contains("is locked by agent `main`"), "{why}");
    let why = refused(&b, "lock_paths", json!({"globs": ["src/db/**"]})).await;
    assert!(why.contains("conflicts with a lock held by another agent"), "{why}");
    assert_eq!(std::fs::read_to_string(ws.path().join("src/x.rs")).expect("read"), "fn main() {}\n");
    // B's tokens do not release A's lock; A's own calls are not bound by it.
    let out = ok(&b, "unlock_paths", json!({"tokens": [a_token.clone()]})).await;
    assert!(out.contains("Released 0 locks"), "{out}");
    ok(&a, "write", json!({"path": "src/a.rs", "content": "a\n"})).await;

    // A unlocks: B's edit goes through.
    let out = ok(&a, "unlock_paths", json!({"tokens": [a_token]})).await;
    assert!(out.contains("Released 1 lock."), "{out}");
    ok(&b, "edit", edit).await;
    assert_eq!(std::fs::read_to_string(ws.path().join("src/x.rs")).expect("read"), "fn main() { b() }\n");

    // A lock that expires vanishes for the other process too.
    ok(&a, "lock_paths", json!({"globs": ["src/x.rs"], "ttl_ms": 1_500})).await;
    let why = refused(&b, "write", json!({"path": "src/x.rs", "content": "late\n"})).await;
    assert!(why.contains("is locked by agent `main`"), "{why}");
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    ok(&b, "write", json!({"path": "src/x.rs", "content": "late\n"})).await;
    assert_eq!(std::fs::read_to_string(ws.path().join("src/x.rs")).expect("read"), "late\n");
    // And B may lock what A's expired lock held.
    ok(&b, "lock_paths", json!({"globs": ["src/**"], "ttl_ms": 60_000})).await;
    let why = refused(&a, "write", json!({"path": "src/a.rs", "content": "a2\n"})).await;
    assert!(why.contains("is locked by agent `main`"), "now B's lock binds A: {why}");

    a.cancel().await.expect("close A");
    b.cancel().await.expect("close B");
}
