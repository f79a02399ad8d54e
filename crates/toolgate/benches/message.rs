//! `message` throughput per channel through `gate.call`, against loopback receivers: a
//! keep-alive HTTP/1.1 receiver answering as each service does (the signed webhook, a Slack
//! incoming webhook, Telegram's `sendMessage`), and aiosmtpd with STARTTLS and AUTH for email
//! (one SMTP session per message: lettre's transport is built per send).
//!
//! Prints messages/s and the median per message for each channel. Rate limits are raised out of
//! the way and approval is off (both are part of the pipeline, not of the adapters).

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::Gate;
use toolgate::store::{SecretStore, Store};
use toolgate_automation::message::{ChannelConfig, ChannelKind};

const HTTP_MESSAGES: usize = 2_000;
const EMAIL_MESSAGES: usize = 100;

/// A keep-alive HTTP/1.1 receiver: answers `ok`, or Telegram's success JSON under `/bot`.
async fn receiver() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut buf = [0u8; 16384];
                loop {
                    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) else {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => raw.extend_from_slice(&buf[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&raw[..end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                        .unwrap_or(0);
                    while raw.len() < end + len {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => raw.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body =
                        if head.starts_with("post /bot") { r#"{"ok":true,"result":{"message_id":1}}"# } else { "ok" };
                    let out = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    if s.write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                    raw.drain(..end + len);
                }
            });
        }
    });
    addr
}

fn channel(kind: ChannelKind, f: impl FnOnce(&mut ChannelConfig)) -> ChannelConfig {
    let mut c = ChannelConfig::new(kind);
    c.approval = Some(false);
    c.rate_per_minute = u32::MAX;
    f(&mut c);
    c
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("workspace");
    let ws = dir.path();
    // aiosmtpd with a test CA (the same script and setup as the email test).
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join(".cache/peers/venv/bin/python");
    let openssl = |args: &[&str]| {
        let ok = std::process::Command::new("openssl")
            .args(args)
            .current_dir(ws)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "openssl {args:?} failed");
    };
    let ca = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench CA"];
    openssl(&[&ca[..], &["-keyout", "ca-key.pem", "-out", "ca.pem"]].concat());
    openssl(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "s.csr"]);
    std::fs::write(ws.join("ext.cnf"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n").expect("ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "s.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "cert.pem",
    ]);
    let mut smtp = std::process::Command::new(&python)
        .arg(repo.join("crates/toolgate/tests/python/smtp_starttls.py"))
        .args([ws.join("cert.pem"), ws.join("key.pem")])
        .args(["agent", "bench-pass-12345"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("aiosmtpd (run `cargo xtask deps`)");
    let mut lines = std::io::BufReader::new(smtp.stdout.take().expect("stdout")).lines();
    let port: u16 =
        lines.next().and_then(Result::ok).and_then(|l| l.strip_prefix("PORT ")?.parse().ok()).expect("port");
    std::thread::spawn(move || for _ in lines {});

    let addr = runtime.block_on(receiver());
    let base = format!("http://{addr}");
    let store = Store::open(&ws.join(".toolgate/state.db")).expect("store");
    let prefix = toolgate::extensions::SECRET_PREFIX;
    for (k, v) in [
        ("hook-key", "whk-0123456789abcdef".to_owned()),
        ("slack-url", format!("{base}/services/T0/B0/X")),
        ("tg", "123456:AAE-bench".to_owned()),
        ("smtp", "bench-pass-12345".to_owned()),
    ] {
        store.secret_put(&format!("{prefix}{k}"), v.as_bytes()).expect("secret");
    }
    drop(store);
    let mut config = toolgate::config::Config::default();
    config
        .rate_limits
        .tools
        .insert("message".into(), toolgate::config::Window { per_minute: u32::MAX, per_hour: u32::MAX });
    let channels = [
        (
            "hook",
            channel(ChannelKind::Webhook, |c| {
                c.url = Some(format!("{base}/hook"));
                c.secret = Some("hook-key".into());
            }),
        ),
        (
            "slack",
            channel(ChannelKind::Slack, |c| {
                c.api_base = Some(base.clone());
                c.secret = Some("slack-url".into());
            }),
        ),
        (
            "telegram",
            channel(ChannelKind::Telegram, |c| {
                c.api_base = Some(base.clone());
                c.secret = Some("tg".into());
            }),
        ),
        (
            "email",
            channel(ChannelKind::Email, |c| {
                c.host = Some("localhost".into());
                c.port = Some(port);
                c.from = Some("bench@example.com".into());
                c.username = Some("agent".into());
                c.secret = Some("smtp".into());
                c.ca_file = Some(ws.join("ca.pem"));
            }),
        ),
    ];
    for (name, c) in channels.iter().cloned() {
        config.automation.channels.insert(name.to_owned(), c);
    }
    let gate = Arc::new(Gate::builder(ws).config(config).build().expect("gate"));
    println!("message throughput through gate.call against loopback receivers (one task):");
    runtime.block_on(async {
        let ctx = gate.context();
        for (name, to, n) in [
            ("webhook", "hook:oncall", HTTP_MESSAGES),
            ("slack", "slack:", HTTP_MESSAGES),
            ("telegram", "telegram:123456789", HTTP_MESSAGES),
            ("email (STARTTLS + AUTH)", "email:ops@example.com", EMAIL_MESSAGES),
        ] {
            // A different text each time (the loop breaker refuses a call repeated verbatim).
            let params =
                |i: usize| json!({"to": to, "content": format!("nightly build {i} passed: 1,204 tests, 0 failures")});
            for i in 0..n / 20 {
                gate.call(&ctx, "message", params(i)).await.expect("warm-up");
            }
            let mut each = Vec::with_capacity(n);
            let start = Instant::now();
            for i in 0..n {
                let t = Instant::now();
                gate.call(&ctx, "message", params(n + i)).await.expect("send");
                each.push(t.elapsed());
            }
            let total = start.elapsed();
            each.sort();
            println!(
                "  {name:<24} {:>8.0} messages/s   median {:>8.1} µs   p99 {:>8.1} µs   ({n} messages)",
                n as f64 / total.as_secs_f64(),
                each[n / 2].as_secs_f64() * 1e6,
                each[n * 99 / 100].as_secs_f64() * 1e6,
            );
        }
    });
    let _ = smtp.stdin.take().map(|mut s| s.flush());
    let _ = smtp.kill();
    let _ = smtp.wait();
}
