//! `message` end to end through the binary: a webhook channel in `toolgate.toml`, its key stored
//! with `toolgate tools secret`, a loopback receiver that checks the signature; without an
//! approver the message is not sent; a receiver that is down leaves it in the outbox that
//! `toolgate call message '{"action":"outbox"}'` lists.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const KEY: &str = "whk-51d0c3e9a7f2b864";

/// Runs `toolgate ARGS` in `ws` with `stdin`; (success, stdout + stderr).
fn toolgate(ws: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// A one-request-at-a-time HTTP receiver on loopback answering 200; each request's
/// (timestamp header, signature header, body) arrives on the channel.
fn receiver() -> (u16, mpsc::Receiver<(String, String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let mut raw = Vec::new();
            let mut buf = [0u8; 8192];
            let end = loop {
                if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                }
            };
            let head = String::from_utf8_lossy(&raw[..end]).to_lowercase();
            let header = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_owned()))
                    .unwrap_or_default()
            };
            let len: usize = header("content-length").parse().unwrap_or(0);
            let mut body = raw[end..].to_vec();
            while body.len() < len {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = tx.send((header("x-toolgate-timestamp"), header("x-toolgate-signature"), body));
        }
    });
    (port, rx)
}

/// HMAC-SHA256 of `data`, hex, computed by openssl (independent of the sender's code).
fn hmac(key: &str, data: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    out.rsplit("= ").next().unwrap().trim().to_owned()
}

#[test]
fn message_through_the_binary_is_signed_approved_and_kept_when_undelivered() {
    let (port, got) = receiver();
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[automation.channels.ops]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{port}/hook\"\nsecret = \"ops-key\"\n\n\
             [automation.channels.gone]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{dead}/hook\"\nsecret = \"ops-key\"\n\
             retries = 1\nbackoff_ms = 10\n"
        ),
    )
    .unwrap();
    let (ok, text) = toolgate(ws.path(), &["tools", "secret", "ops-key"], KEY);
    assert!(ok, "{text}");

    // Nobody to approve (no terminal): not sent.
    let send = r#"{"to": "ops:oncall", "content": "disk full"}"#;
    let (ok, text) = toolgate(ws.path(), &["call", "message", send], "");
    assert!(!ok && text.contains("approv"), "{text}");
    assert!(got.try_recv().is_err(), "nothing was sent without approval");

    let (ok, text) = toolgate(ws.path(), &["--approval", "never", "call", "message", send], "");
    assert!(ok && text.contains("Sent to ops:oncall"), "{text}");
    let (ts, signature, body) = got.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
    let signed: Vec<u8> = format!("{ts}.").into_bytes().into_iter().chain(body.iter().copied()).collect();
    assert_eq!(signature, format!("sha256={}", hmac(KEY, &signed)));
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["content"], "disk full");

    let (ok, text) =
        toolgate(ws.path(), &["--approval", "never", "call", "message", r#"{"to": "gone:x", "content": "later"}"#], "");
    assert!(!ok && text.contains("after 2 tries") && text.contains("kept in the outbox"), "{text}");
    let (ok, text) = toolgate(ws.path(), &["call", "message", r#"{"action": "outbox"}"#], "");
    assert!(ok && text.contains("1 undelivered") && text.contains("gone:x") && text.contains("later"), "{text}");
    let (ok, text) = toolgate(ws.path(), &["call", "message", r#"{"to": "signal:+15551234567", "content": "hi"}"#], "");
    assert!(!ok && text.contains("no adapter for `signal`") && text.contains("`ops:` (webhook)"), "{text}");
}

#[tokio::test]
async fn an_mcp_channel_reaches_the_calling_client_as_a_log_notification() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), "[automation.channels.me]\nkind = \"mcp\"\n").unwrap();
    let report = crate::support::python::report("message_mcp.py", [TOOLGATE, ws.path().to_str().unwrap()]).await;
    for mode in ["legacy", "modern"] {
        let r = &report[mode];
        assert_eq!(r["is_error"], false, "{mode}: {r}");
        let logs = r["logs"].as_array().unwrap();
        assert_eq!(logs.len(), 1, "{mode}: {r}");
        assert_eq!(logs[0]["logger"], "toolgate.message", "{mode}: {r}");
        assert_eq!(
            logs[0]["data"]["content"],
            format!("hello from {}", if mode == "legacy" { "legacy" } else { "auto" })
        );
    }
}
