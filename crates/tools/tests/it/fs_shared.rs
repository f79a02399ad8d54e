//! The fs tools of two processes on one workspace, each with its own `FsState` and its own
//! connection to the workspace's state database: path locks and the write mutex hold between
//! them (issue 25). The real two-process case is `crates/cli/tests/it/fs_processes.rs`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{CallContext, Identity, Tool, ToolError, ToolOutput};
use toolgate_store::{Store, Stores};
use toolgate_tools::fs::{FsConfig, WriteSafety, tools_shared};

/// The fs tools one process would have: a state of their own, a connection of their own.
fn process(root: &Path, config: FsConfig) -> HashMap<String, Arc<dyn Tool>> {
    let store = Store::open(&root.join(".toolgate/state.db")).unwrap();
    let locks = Stores::sqlite(Arc::new(store)).locks;
    let tools = tools_shared(config, None, Some(locks)).unwrap();
    tools.into_iter().map(|t| (t.spec().name.clone(), t)).collect()
}

fn ctx(root: &Path, agent: &str, session: &str) -> CallContext {
    CallContext::new(root.to_path_buf()).with_identity(Identity {
        user: "local".into(),
        agent: agent.into(),
        session: session.into(),
    })
}

async fn call(
    tools: &HashMap<String, Arc<dyn Tool>>,
    ctx: &CallContext,
    name: &str,
    params: Value,
) -> Result<ToolOutput, ToolError> {
    tools[name].execute(ctx, params).await
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    (dir, root)
}

#[tokio::test]
async fn a_lock_taken_in_one_process_binds_the_other_until_released_or_expired() {
    let (_dir, root) = workspace();
    let (one, two) = (process(&root, FsConfig::default()), process(&root, FsConfig::default()));
    let (a, b) = (ctx(&root, "alice", "s1"), ctx(&root, "bob", "s2"));

    let out = call(&one, &a, "lock_paths", json!({ "globs": ["src/**"], "ttl_ms": 60000 })).await.unwrap();
    let token = out.meta.as_ref().and_then(|m| m["token"].as_str()).unwrap().to_owned();
    let refused = call(&two, &b, "write", json!({ "path": "src/x.rs", "content": "b" })).await.unwrap_err().to_string();
    assert!(refused.contains("locked by agent `alice`") && refused.contains("until"), "{refused}");
    assert!(!root.join("src/x.rs").exists());
    let clash = call(&two, &b, "lock_paths", json!({ "globs": ["src/db"] })).await.unwrap_err().to_string();
    assert!(clash.contains("conflicts with a lock held by another agent") && clash.contains("alice"), "{clash}");
    // The holder writes, through either process.
    call(&two, &a, "write", json!({ "path": "src/x.rs", "content": "a" })).await.unwrap();
    // Only the holder unlocks.
    let out = call(&two, &b, "unlock_paths", json!({ "tokens": [token.clone()] })).await.unwrap();
    assert!(out.text_content().contains("Released 0"), "{}", out.text_content());
    let out = call(&two, &a, "unlock_paths", json!({ "tokens": [token] })).await.unwrap();
    assert!(out.text_content().contains("Released 1"), "{}", out.text_content());
    call(&two, &b, "write", json!({ "path": "src/y.rs", "content": "b" })).await.unwrap();

    // An expired lock vanishes for the other process too.
    call(&one, &a, "lock_paths", json!({ "globs": ["doc.md"], "ttl_ms": 1 })).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    call(&two, &b, "write", json!({ "path": "doc.md", "content": "b" })).await.unwrap();
}

/// Writers per process, and edits per writer, in the concurrent-edit tests.
const WRITERS: usize = 6;
const EDITS: usize = 8;

/// `2 * WRITERS` threads, alternating between the two processes, each replacing its own
/// `EDITS` slots of `shared.txt` (`slot-NNN` → `done-NNN`); then no slot may be left.
fn edit_from_both(processes: &[Arc<HashMap<String, Arc<dyn Tool>>>; 2], root: &Path) {
    let threads: Vec<_> = (0..2 * WRITERS)
        .map(|w| {
            let tools = Arc::clone(&processes[w % 2]);
            let root = root.to_path_buf();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                let ctx = ctx(&root, "main", &format!("w{w}"));
                for e in 0..EDITS {
                    let i = w * EDITS + e;
                    let edit = json!({ "path": "shared.txt", "old_string": format!("slot-{i:03}"), "new_string": format!("done-{i:03}") });
                    rt.block_on(call(&tools, &ctx, "edit", edit)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let after = std::fs::read_to_string(root.join("shared.txt")).unwrap();
    let lost: Vec<&str> = after.lines().filter(|l| l.starts_with("slot-")).collect();
    assert!(lost.is_empty(), "edits lost: {lost:?}");
}

#[test]
fn two_processes_editing_one_file_lose_no_edit() {
    let (_dir, root) = workspace();
    let slots: String = (0..2 * WRITERS * EDITS).map(|i| format!("slot-{i:03}\n")).collect();
    std::fs::write(root.join("shared.txt"), &slots).unwrap();
    // No staleness check, so only the write mutex keeps one edit's read-modify-write from
    // overwriting another's.
    let config = FsConfig { write_safety: WriteSafety::Off, ..FsConfig::default() };
    let processes = [Arc::new(process(&root, config.clone())), Arc::new(process(&root, config))];
    edit_from_both(&processes, &root);
    let after = std::fs::read_to_string(root.join("shared.txt")).unwrap();
    assert_eq!(after.lines().count(), 2 * WRITERS * EDITS);
}

/// `git clean -xfd` (or an agent's shell) deletes the lock file while one process has it open:
/// the process that opened it before must not go on locking the deleted file while the other
/// locks a new one.
#[test]
fn two_processes_lose_no_edit_after_the_write_lock_file_is_deleted() {
    let (_dir, root) = workspace();
    let slots: String = (0..2 * WRITERS * EDITS + 1).map(|i| format!("slot-{i:03}\n")).collect();
    std::fs::write(root.join("shared.txt"), &slots).unwrap();
    let config = FsConfig { write_safety: WriteSafety::Off, ..FsConfig::default() };
    let processes = [Arc::new(process(&root, config.clone())), Arc::new(process(&root, config))];
    // The first process writes once, so it has the lock file open; then the file is deleted.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let first = json!({ "path": "shared.txt", "old_string": "slot-096", "new_string": "done-096" });
    rt.block_on(call(&processes[0], &ctx(&root, "main", "w"), "edit", first)).unwrap();
    let lock = root.join(".toolgate/fs-write.lock");
    assert!(lock.exists());
    std::fs::remove_file(&lock).unwrap();

    edit_from_both(&processes, &root);
    let after = std::fs::read_to_string(root.join("shared.txt")).unwrap();
    assert_eq!(after.lines().count(), 2 * WRITERS * EDITS + 1);
    assert!(lock.exists(), "the lock file is back");
}
