//! `message` end to end through the binary: a webhook channel in `toolgate.toml`, its key stored
//! with `toolgate tools secret`, a loopback receiver that checks the signature; without an
//! approver the message is not sent; a receiver that is down leaves it in the outbox that
//! `toolgate call message '{"action":"outbox"}'` lists.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::toolgate_with_input as toolgate;
use toolgate_testkit::receiver::{Receiver, Response};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const KEY: &str = "whk-51d0c3e9a7f2b864";

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
    let got = Receiver::answering(Response::new(200));
    let hook = got.url("/hook");
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[automation.channels.ops]\nkind = \"webhook\"\nurl = \"{hook}\"\nsecret = \"ops-key\"\n\n\
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
    assert!(got.next(Duration::ZERO).is_none(), "nothing was sent without approval");

    let (ok, text) = toolgate(ws.path(), &["--approval", "never", "call", "message", send], "");
    assert!(ok && text.contains("Sent to ops:oncall"), "{text}");
    let sent = got.next(Duration::from_secs(60)).unwrap();
    let (ts, signature) = (sent.header("x-toolgate-timestamp").unwrap(), sent.header("x-toolgate-signature").unwrap());
    let body = &sent.body;
    let signed: Vec<u8> = format!("{ts}.").into_bytes().into_iter().chain(body.iter().copied()).collect();
    assert_eq!(signature, format!("sha256={}", hmac(KEY, &signed)));
    let body: serde_json::Value = serde_json::from_slice(body).unwrap();
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
