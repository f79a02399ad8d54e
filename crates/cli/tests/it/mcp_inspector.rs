//! `toolgate serve` driven by the MCP Inspector CLI (`@modelcontextprotocol/inspector@2.12.0
//! --cli`), over stdio and Streamable HTTP, in both protocol eras (`--protocol-era legacy`: the
//! `initialize` handshake; `modern`: 2026-07-28's per-request `_meta`): it lists the tools (with
//! `--strict`, which fails on schema portability errors) and calls `echo` and `read`, and we
//! assert on the JSON it prints (`--format json`).
//!
//! The Inspector and Node 22 are installed into `.cache/peers/npm` by `cargo xtask deps`; the
//! tests fail, never skip, when they are missing.

#![allow(clippy::unwrap_used)]

use crate::support::npm;

use std::path::Path;

use npm::{HttpServer, TOOLGATE};
use serde_json::Value;

/// What one Inspector run printed.
struct Run {
    code: Option<i32>,
    stdout: Value,
    stderr: String,
}

/// Where the Inspector connects: a command line (stdio) or a URL with headers.
enum Target<'a> {
    Stdio(&'a Path),
    Http { url: &'a str, token: Option<&'a str> },
}

fn inspector(target: &Target<'_>, era: &str, method: &[&str]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut cmd =
        npm::node_command(&npm::peer("@modelcontextprotocol/inspector/clients/launcher/build/index.js"), home.path());
    cmd.args(["--cli", "--format", "json", "--protocol-era", era, "--connect-timeout", "60000"]);
    match target {
        Target::Stdio(ws) => {
            cmd.arg(TOOLGATE).arg("--workspace").arg(ws).arg("serve");
        }
        Target::Http { url, token } => {
            // Never start an interactive OAuth login: a refused token must fail the run.
            cmd.args([url, "--transport", "http", "--stored-auth-only"]);
            if let Some(token) = token {
                cmd.args(["--header", &format!("Authorization: Bearer {token}")]);
            }
        }
    }
    cmd.args(method);
    let out = cmd.output().expect("run the Inspector CLI");
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("Inspector stdout is not JSON ({e}):\n{text}\n{stderr}"))
    };
    Run { code: out.status.code(), stdout, stderr }
}

/// The result of a run that must have succeeded.
fn ok(run: Run, what: &str) -> Value {
    assert_eq!(run.code, Some(0), "{what} failed:\n--- stdout\n{}\n--- stderr\n{}", run.stdout, run.stderr);
    run.stdout["result"].clone()
}

/// Everything the Inspector checks on both transports, in one era.
fn lists_and_calls(target: &Target<'_>, era: &str, version: &str) {
    let init = ok(inspector(target, era, &["--method", "initialize"]), "initialize");
    assert_eq!(init["serverInfo"]["name"], "toolgate", "{init}");
    assert_eq!(init["protocolVersion"], version, "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");

    let list = ok(inspector(target, era, &["--method", "tools/list", "--strict"]), "tools/list --strict");
    let tools = list["tools"].as_array().expect("a tools array");
    let tool = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no `{name}` in tools/list: {list}"))
    };
    let echo = tool("echo");
    assert_eq!(echo["inputSchema"]["required"][0], "message", "{echo}");
    assert_eq!(echo["annotations"]["readOnlyHint"], true, "{echo}");
    let read = tool("read");
    assert_eq!(read["annotations"]["destructiveHint"], false, "{read}");
    assert_eq!(tool("write")["annotations"]["readOnlyHint"], false);
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"), "every input schema is an object");
    let fixtures: Vec<&Value> =
        tools.iter().filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("test_"))).collect();
    assert!(fixtures.is_empty(), "the conformance fixtures are served only by toolgate-conformance: {fixtures:?}");

    let echoed = ok(
        inspector(
            target,
            era,
            &["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hello inspector"],
        ),
        "tools/call echo",
    );
    assert_eq!(echoed["isError"], false, "{echoed}");
    assert_eq!(echoed["content"][0], serde_json::json!({"type": "text", "text": "hello inspector"}));

    let file = ok(
        inspector(target, era, &["--method", "tools/call", "--tool-name", "read", "--tool-arg", "path=hello.txt"]),
        "tools/call read",
    );
    assert_eq!(file["isError"], false, "{file}");
    let text = file["content"][0]["text"].as_str().expect("text content");
    assert!(text.contains("hello file"), "{file}");
    // Text only: clients that read `structuredContent` would hand the model nothing else.
    assert!(file.get("structuredContent").is_none(), "{file}");
    assert_eq!(file["_meta"]["io.toolgate/result"]["path"], "hello.txt", "{file}");

    // A tool failure is a result with isError (the Inspector exits 5 and still prints it).
    let missing =
        inspector(target, era, &["--method", "tools/call", "--tool-name", "read", "--tool-arg", "path=nope.txt"]);
    assert_eq!(missing.code, Some(5), "{}\n{}", missing.stdout, missing.stderr);
    assert_eq!(missing.stdout["result"]["isError"], true, "{}", missing.stdout);
    assert_eq!(missing.stdout["result"]["_meta"]["io.toolgate/errorKind"], "not_found", "{}", missing.stdout);
    assert!(missing.stdout["result"]["content"][0]["text"].as_str().unwrap().contains("not found"));
}

#[test]
fn inspector_over_stdio_legacy() {
    let ws = npm::workspace();
    lists_and_calls(&Target::Stdio(ws.path()), "legacy", "2025-11-25");
}

#[test]
fn inspector_over_stdio_2026_07_28() {
    let ws = npm::workspace();
    lists_and_calls(&Target::Stdio(ws.path()), "modern", "2026-07-28");
}

#[test]
fn inspector_over_http_legacy() {
    let server = HttpServer::start(TOOLGATE, &[]);
    let token = server.token.as_deref().expect("a token");
    lists_and_calls(&Target::Http { url: &server.url, token: Some(token) }, "legacy", "2025-11-25");
}

#[test]
fn inspector_over_http_2026_07_28() {
    let server = HttpServer::start(TOOLGATE, &[]);
    let token = server.token.as_deref().expect("a token");
    lists_and_calls(&Target::Http { url: &server.url, token: Some(token) }, "modern", "2026-07-28");
}

#[test]
fn inspector_without_the_token_is_refused() {
    let server = HttpServer::start(TOOLGATE, &[]);
    for token in [None, Some("0123456789abcdef")] {
        let run = inspector(&Target::Http { url: &server.url, token }, "legacy", &["--method", "tools/list"]);
        assert_ne!(run.code, Some(0), "tools/list without the right token must fail: {}", run.stdout);
        assert!(run.stdout.is_null(), "nothing listed without the token: {}", run.stdout);
        assert_eq!(run.code, Some(3), "exit 3 is the Inspector's auth_required:\n{}", run.stderr);
        // The server's 401 says where the token is; the Inspector passes that on.
        assert!(run.stderr.contains(".toolgate/http-token"), "{}", run.stderr);
    }
}

/// A client that leaves without `initialize` (a 2026-07-28 client never sends one) ends a stdio
/// session normally: exit 0, no error printed.
#[test]
fn stdio_serve_ends_cleanly_when_the_client_leaves_without_initialize() {
    let ws = npm::workspace();
    let out = std::process::Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.path())
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("error"), "{stderr}");
}
