//! The `browser` tool through the real binary: `toolgate call` (one process: the browser starts
//! and goes with it), refused input with a non-zero exit, and `kill -9` of `toolgate serve`
//! over stdio while its browser runs: no Chromium process outlives it.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::pages;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

const PAGE: &str = "<title>CLI page</title><h1>Served on loopback</h1><a href=\"/next\">next</a>";

/// Processes whose command line mentions `dir` (the browser's profile is under it).
fn browser_processes(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) && cmdline.contains("--user-data-dir") {
            found.push(cmdline.chars().take(160).collect());
        }
    }
    found
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool, detail: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {}", detail());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn toolgate_call_opens_a_page_and_refuses_local_schemes() {
    let addr = pages::serve(PAGE);
    let ws = pages::workspace(addr);
    let params = json!({"action": "navigate", "url": format!("http://{addr}/"), "snapshot": true}).to_string();
    let out =
        Command::new(TOOLGATE).arg("--workspace").arg(ws.path()).args(["call", "browser", &params]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("heading \"Served on loopback\""), "{stdout}");
    assert!(stdout.contains("link \"next\"") && stdout.contains("[ref=e2]"), "{stdout}");
    let bad = json!({"action": "navigate", "url": "file:///etc/passwd"}).to_string();
    let out =
        Command::new(TOOLGATE).arg("--workspace").arg(ws.path()).args(["call", "browser", &bad]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`file:` URLs are refused"), "{stderr}");
    assert!(browser_processes(ws.path()).is_empty(), "{:?}", browser_processes(ws.path()));
}

#[test]
fn a_killed_serve_leaves_no_browser_behind() {
    let addr = pages::serve(PAGE);
    let ws = pages::workspace(addr);
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.path())
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}));
    let init: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "browser", "arguments": {"action": "navigate", "url": format!("http://{addr}/")}}}));
    let answer: Value = loop {
        let line = lines.next().unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("Opened http://127.0.0.1"), "{answer}");
    assert!(!browser_processes(ws.path()).is_empty(), "the browser should be running");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    wait_until(
        "every browser process to end",
        || browser_processes(ws.path()).is_empty(),
        || format!("{:?}", browser_processes(ws.path())),
    );
}
