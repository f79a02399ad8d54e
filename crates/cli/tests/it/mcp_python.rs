//! `toolgate serve` driven by a real peer: the official MCP Python SDK (`mcp==2.3.0`), over stdio
//! and Streamable HTTP, in both protocol eras (`mode="legacy"`, the `initialize` handshake, and
//! `mode="2026-07-28"`, per-request `_meta`). The checks themselves are in
//! `crates/mcp/tests/python/client.py`.
//!
//! The SDK lives in a venv at `<repo>/.cache/peers/venv`, installed by `cargo xtask deps` (and
//! `cargo xtask test`). These tests create it when it is missing and fail, never skip, when
//! that is impossible.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const PYTHON_MCP: &str = "mcp==2.3.0";
const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python, creating the venv if needed (once per test process).
fn python() -> PathBuf {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    READY
        .get_or_init(|| {
            let venv = repo().join(".cache/peers/venv");
            let python = venv.join("bin/python");
            let has_sdk = |py: &Path| {
                Command::new(py)
                    .args(["-c", "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '2.3.0')"])
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if has_sdk(&python) {
                return Ok(python);
            }
            if !python.exists() {
                let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().is_ok_and(|s| s.success());
                if !ok {
                    return Err(format!("cannot create the venv {}", venv.display()));
                }
            }
            let ok = Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYTHON_MCP])
                .status()
                .is_ok_and(|s| s.success());
            if ok && has_sdk(&python) { Ok(python) } else { Err(format!("cannot pip install {PYTHON_MCP}")) }
        })
        .clone()
        .unwrap_or_else(|e| panic!("the MCP Python SDK is not available ({e}); run `cargo xtask deps` and retry"))
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hello.txt"), "hello file\n").expect("write hello.txt");
    dir
}

/// A workspace with agents and a team, acting as the team's lead: the agent tools are served.
/// The provider's port has no server, so a sub-agent's run fails at once (its ids still work).
fn workspace_with_agents() -> tempfile::TempDir {
    let dir = workspace();
    let config = r#"
[identity]
agent = "coder"
[providers.nowhere]
base_url = "http://127.0.0.1:9/v1"
max_retries = 0
[agents.coder]
description = "Edits code"
provider = "nowhere"
model = "none"
[agents.reviewer]
description = "Reviews"
provider = "nowhere"
model = "none"
[teams.release]
lead = "coder"
members = ["reviewer"]
"#;
    std::fs::write(dir.path().join("toolgate.toml"), config).expect("write toolgate.toml");
    dir
}

/// The agent tools' ids (sub-agent and session ids, task ids) reach the client intact and work
/// in the next call, like the lock tokens and process ids of `python_sdk_over_stdio_*`.
#[test]
fn python_sdk_agent_tool_ids_over_stdio() {
    let ws = workspace_with_agents();
    run_client(&["stdio", "2026-07-28", TOOLGATE, ws.path().to_str().expect("utf-8 path")]);
}

fn client_script() -> PathBuf {
    repo().join("crates/mcp/tests/python/client.py")
}

fn run_client(args: &[&str]) {
    let out = Command::new(python()).arg(client_script()).args(args).output().expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "Python MCP client failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

fn stdio(mode: &str) {
    let ws = workspace();
    run_client(&["stdio", mode, TOOLGATE, ws.path().to_str().expect("utf-8 path")]);
}

#[test]
fn python_sdk_over_stdio_legacy() {
    stdio("legacy");
}

#[test]
fn python_sdk_over_stdio_2026_07_28() {
    stdio("2026-07-28");
}

/// `mode="auto"` probes with `server/discover` and must settle on 2026-07-28.
#[test]
fn python_sdk_over_stdio_discover() {
    stdio("auto");
}

#[test]
fn python_sdk_over_http_discover() {
    let server = http_server();
    run_client(&["http", "auto", &server.url, &server.token]);
}

/// `toolgate serve --http 127.0.0.1:0` (testkit's server), its token and address, and the
/// first-start checks: the token is printed once and its file is private.
struct HttpServer {
    url: String,
    addr: String,
    token: String,
    _server: toolgate_testkit::serve::HttpServer,
}

fn http_server() -> HttpServer {
    let server = toolgate_testkit::serve::HttpServer::start(TOOLGATE, &[]);
    let token = server.token.clone().expect("token file");
    assert!(server.banner.contains(&token), "the token is printed on first start:\n{}", server.banner);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let file = server.ws.path().join(".toolgate/http-token");
        let mode = std::fs::metadata(file).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is private");
    }
    let url = server.url.clone();
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    HttpServer { url, addr, token, _server: server }
}

#[test]
fn python_sdk_over_http_legacy() {
    let server = http_server();
    run_client(&["http", "legacy", &server.url, &server.token]);
}

#[test]
fn python_sdk_over_http_2026_07_28() {
    let server = http_server();
    run_client(&["http", "2026-07-28", &server.url, &server.token]);
}

/// Sends one raw HTTP/1.1 POST to /mcp and returns the status code.
fn post(addr: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    request(addr, "POST", "/mcp", headers, body).0
}

/// Sends one raw HTTP/1.1 request and returns the status code and the body.
///
/// The request is written from another thread while this one reads: a server may answer (413
/// for an oversized body) and close before the whole body is sent, and the writer then gets a
/// broken pipe, which is not the test's concern; the answer is read as soon as it arrives.
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut writer = stream.try_clone().expect("clone the stream");
    let sending = std::thread::spawn(move || writer.write_all(req.as_bytes()));
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let _ = sending.join();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

#[test]
fn http_requires_the_token_and_a_loopback_host() {
    let server = http_server();
    let accept = ("Accept", "application/json, text/event-stream");
    let json = ("Content-Type", "application/json");
    let bearer = format!("Bearer {}", server.token);
    let auth = ("Authorization", bearer.as_str());
    let host = ("Host", server.addr.as_str());
    assert_eq!(post(&server.addr, &[host, accept, json], INIT), 401, "no token");
    assert_eq!(post(&server.addr, &[host, accept, json, ("Authorization", "Bearer wrong")], INIT), 401, "bad token");
    assert_eq!(post(&server.addr, &[host, accept, json, auth], INIT), 200, "good token");
    let rebound = post(&server.addr, &[("Host", "evil.example:80"), accept, json, auth], INIT);
    assert_eq!(rebound, 403, "a foreign Host header (DNS rebinding) is refused");
    let origin = post(&server.addr, &[host, ("Origin", "http://evil.example"), accept, json, auth], INIT);
    assert_eq!(origin, 403, "a browser Origin not allowed is refused");
    let big = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(5 << 20));
    assert_eq!(post(&server.addr, &[host, accept, json, auth], &big), 413, "oversized bodies are refused");
}

#[test]
fn stdio_stdout_carries_only_protocol() {
    let ws = workspace();
    let mut child = Command::new(TOOLGATE)
        .args(["--workspace"])
        .arg(ws.path())
        .arg("serve")
        .env("TOOLGATE_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolgate serve");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{INIT}").expect("send initialize");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).expect("send initialized");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).expect("send tools/list");
    let started = Instant::now();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = 0;
    while seen < 2 && started.elapsed() < Duration::from_secs(30) {
        let Some(Ok(line)) = lines.next() else { break };
        let value: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {line}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        seen += 1;
    }
    assert_eq!(seen, 2, "initialize and tools/list were answered");
    drop(stdin);
    let _ = child.wait();
}

fn approval(mode: &str) {
    let ws = workspace();
    let out = Command::new(python())
        .arg(repo().join("crates/mcp/tests/python/approval.py"))
        .args([mode, TOOLGATE, ws.path().to_str().expect("utf-8 path")])
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "approval checks failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

/// Elicitation as a server-to-client request (protocols up to 2025-11-25).
#[test]
fn python_sdk_approval_by_elicitation_legacy() {
    approval("legacy");
}

/// Elicitation through an `InputRequiredResult` round trip (2026-07-28).
#[test]
fn python_sdk_approval_by_input_required_2026_07_28() {
    approval("2026-07-28");
}

/// A call that needs approval waits in the approvals API until a person answers it there
/// (the Python client has no elicitation): `allow_once` runs it, `deny` makes it an error.
#[test]
fn approvals_are_answered_over_the_http_api() {
    let server = http_server();
    let script = repo().join("crates/cli/tests/python/approvals_http.py");
    let out = Command::new(python()).arg(script).args([&server.url, &server.token]).output().expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "approvals over HTTP failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_approvals_api_has_the_same_guards_as_mcp() {
    let server = http_server();
    let bearer = format!("Bearer {}", server.token);
    let auth = ("Authorization", bearer.as_str());
    let host = ("Host", server.addr.as_str());
    let get = |headers: &[(&str, &str)]| request(&server.addr, "GET", "/api/approvals", headers, "");
    assert_eq!(get(&[host]).0, 401, "no token");
    assert_eq!(get(&[("Host", "evil.example"), auth]).0, 403, "foreign Host");
    assert_eq!(get(&[host, auth, ("Origin", "http://evil.example")]).0, 403, "foreign Origin");
    assert_eq!(get(&[host, auth]), (200, r#"{"pending":[]}"#.to_owned()));
    let answer = request(&server.addr, "POST", "/api/approvals/nope", &[host, auth], r#"{"decision":"deny"}"#);
    assert_eq!(answer.0, 404, "{}", answer.1);
    let big = "x".repeat(5 * 1024 * 1024);
    assert_eq!(request(&server.addr, "POST", "/api/approvals/nope", &[host, auth], &big).0, 413);
    assert_eq!(request(&server.addr, "GET", "/api/other", &[host, auth], "").0, 404);
}
