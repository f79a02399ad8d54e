//! `message` through `Gate::call` against real HTTP receivers on loopback: the generic webhook
//! (its HMAC-SHA256 signature verified here independently), a Slack incoming webhook and the
//! Telegram Bot API's `sendMessage` (request formats as their documentation gives them: Slack's
//! incoming webhooks `{"text"}` answered `ok`; Telegram Bot API `sendMessage` with `chat_id` and
//! `text`, answered `{"ok":true,...}`); a receiver that is down (retried, then kept in the
//! outbox); refusals (an unconfigured channel, a credential in the text, the rate limit).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate::config::Config;
use toolgate::core::{CallContext, ToolError};
use toolgate::store::{SecretStore, Store};
use toolgate::{ApprovalAnswer, ApprovalRequest, Approver, Gate};
use toolgate_automation::message::{ChannelConfig, ChannelKind};
use toolgate_testkit::receiver::{Receiver, Response};

#[derive(Debug)]
struct Yes;

#[toolgate::core::async_trait]
impl Approver for Yes {
    async fn ask(&self, _request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        Some(ApprovalAnswer::AllowOnce)
    }
}

const HMAC_KEY: &str = "whk-3c1f0a9e77d2b845";
const BOT_TOKEN: &str = "123456:AAE-test_token";

/// A gate on `dir` with `channels`, and the secrets `(name, value)` stored as
/// `toolgate tools secret NAME` stores them.
fn gate(dir: &tempfile::TempDir, channels: Vec<(&str, ChannelConfig)>, secrets: &[(&str, &str)]) -> Gate {
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    for (name, value) in secrets {
        store.secret_put(&format!("{}{name}", toolgate::extensions::SECRET_PREFIX), value.as_bytes()).unwrap();
    }
    drop(store);
    let mut config = Config::default();
    for (name, c) in channels {
        config.automation.channels.insert(name.to_owned(), c);
    }
    Gate::builder(dir.path()).config(config).approver(Arc::new(Yes)).build().unwrap()
}

fn channel(kind: ChannelKind, f: impl FnOnce(&mut ChannelConfig)) -> ChannelConfig {
    let mut c = ChannelConfig::new(kind);
    c.backoff_ms = 10;
    f(&mut c);
    c
}

/// HMAC-SHA256 (RFC 2104) on sha2 alone, to check the signature independently of the sender.
fn hmac_sha256(key: &[u8], data: &[u8]) -> String {
    let mut k = [0u8; 64];
    k[..key.len()].copy_from_slice(key);
    let inner: Vec<u8> = k.iter().map(|b| b ^ 0x36).chain(data.iter().copied()).collect();
    let inner = Sha256::digest(&inner);
    let outer: Vec<u8> = k.iter().map(|b| b ^ 0x5c).chain(inner.iter().copied()).collect();
    Sha256::digest(&outer).iter().map(|b| format!("{b:02x}")).collect()
}

async fn call(gate: &Gate, params: Value) -> Result<toolgate::core::ToolOutput, ToolError> {
    gate.call(&CallContext::new(gate.workspace()), "message", params).await
}

#[tokio::test]
async fn webhook_slack_and_telegram_requests_follow_their_formats() {
    let server = Receiver::start(|got| {
        if got.path.starts_with("/bot") {
            Response::text(
                200,
                r#"{"ok":true,"result":{"message_id":7,"chat":{"id":-100123},"date":1700000000,"text":"x"}}"#,
            )
        } else {
            Response::text(200, "ok")
        }
    });
    let base = server.url("");
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(
        &dir,
        vec![
            (
                "ops",
                channel(ChannelKind::Webhook, |c| {
                    c.url = Some(format!("{base}/hook"));
                    c.secret = Some("ops-key".into());
                }),
            ),
            (
                "team",
                channel(ChannelKind::Slack, |c| {
                    c.api_base = Some(base.clone());
                    c.secret = Some("team-hook".into());
                }),
            ),
            (
                "tg",
                channel(ChannelKind::Telegram, |c| {
                    c.api_base = Some(base.clone());
                    c.secret = Some("tg-token".into());
                }),
            ),
        ],
        &[("ops-key", HMAC_KEY), ("team-hook", &format!("{base}/services/T0/B0/XXXX")), ("tg-token", BOT_TOKEN)],
    );

    let out = call(&gate, json!({"to": "ops:oncall", "content": "disk full on db-1"})).await.unwrap();
    assert!(out.text_content().contains("Sent to ops:oncall"), "{}", out.text_content());
    call(&gate, json!({"to": "team:", "content": "deploy <!channel> & done"})).await.unwrap();
    call(&gate, json!({"to": "tg:-100123", "content": "build green"})).await.unwrap();

    let got = server.requests();
    assert_eq!(got.len(), 3, "{got:?}");
    // The webhook: JSON body, signed over "{timestamp}.{raw body}".
    let hook = &got[0];
    assert_eq!(hook.path, "/hook");
    let ts = hook.header("x-toolgate-timestamp").unwrap();
    let expected = format!(
        "sha256={}",
        hmac_sha256(
            HMAC_KEY.as_bytes(),
            format!("{ts}.").as_bytes().iter().chain(&hook.body).copied().collect::<Vec<_>>().as_slice()
        )
    );
    assert_eq!(hook.header("x-toolgate-signature"), Some(expected.as_str()));
    let body = hook.json();
    assert_eq!(
        (body["to"].as_str(), body["content"].as_str(), body["channel"].as_str()),
        (Some("oncall"), Some("disk full on db-1"), Some("ops"))
    );
    assert!(!String::from_utf8_lossy(&hook.body).contains(HMAC_KEY), "the key is never in the body");
    assert_eq!(hook.header("x-toolgate-message-id"), body["id"].as_str());
    // Slack: POST to the webhook URL, `{"text"}` with &, <, > escaped (no mention, no link).
    assert_eq!(got[1].path, "/services/T0/B0/XXXX");
    assert_eq!(got[1].json(), json!({"text": "deploy &lt;!channel&gt; &amp; done"}));
    // Telegram: /bot<token>/sendMessage, numeric chat id, plain text (no parse_mode).
    assert_eq!(got[2].path, format!("/bot{BOT_TOKEN}/sendMessage"));
    assert_eq!(got[2].json(), json!({"chat_id": -100123, "text": "build green"}));
}

#[tokio::test]
async fn a_receiver_that_is_down_is_retried_then_the_message_is_kept_in_the_outbox() {
    let server = Receiver::answering(Response::text(503, "down for maintenance"));
    // A port nobody listens on: connection refused.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(
        &dir,
        vec![
            (
                "ops",
                channel(ChannelKind::Webhook, |c| {
                    c.url = Some(server.url("/hook"));
                    c.secret = Some("ops-key".into());
                    c.retries = 2;
                }),
            ),
            (
                "gone",
                channel(ChannelKind::Webhook, |c| {
                    c.url = Some(format!("http://{dead}/hook"));
                    c.secret = Some("ops-key".into());
                    c.retries = 1;
                }),
            ),
        ],
        &[("ops-key", HMAC_KEY)],
    );
    let err = call(&gate, json!({"to": "ops:oncall", "content": "first"})).await.unwrap_err().to_string();
    assert_eq!(server.requests().len(), 3, "one try and two retries");
    assert!(
        err.contains("not delivered after 3 tries") && err.contains("503") && err.contains("kept in the outbox"),
        "{err}"
    );
    let ids: Vec<String> =
        server.requests().iter().map(|g| g.header("x-toolgate-message-id").unwrap().to_owned()).collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "every retry carries the same id: {ids:?}");
    let err = call(&gate, json!({"to": "gone:oncall", "content": "second"})).await.unwrap_err().to_string();
    assert!(err.contains("not delivered after 2 tries") && err.contains("connect"), "{err}");

    let listed = call(&gate, json!({"action": "outbox"})).await.unwrap();
    let text = listed.text_content();
    assert!(text.contains("2 undelivered") && text.contains("ops:oncall") && text.contains("gone:oncall"), "{text}");
    assert!(text.contains("\"first\"") && text.contains("\"second\""), "{text}");
    // Kept in the state database: another process sees it.
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    let kept = toolgate::store::OutboxStore::outbox_list(&store, None, 10).unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept.iter().find(|e| e.channel == "ops").unwrap().attempts, 3);
}

#[tokio::test]
async fn unconfigured_channels_secrets_in_the_text_and_the_rate_limit_are_refused() {
    let server = Receiver::answering(Response::text(200, "ok"));
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(
        &dir,
        vec![(
            "ops",
            channel(ChannelKind::Webhook, |c| {
                c.url = Some(server.url("/hook"));
                c.secret = Some("ops-key".into());
                c.rate_per_minute = 2;
            }),
        )],
        &[("ops-key", HMAC_KEY)],
    );
    // Seed 002's example: no adapter for Signal.
    let err = call(&gate, json!({"to": "signal:+15551234567", "content": "hi"})).await.unwrap_err().to_string();
    assert!(
        err.contains("no adapter for `signal`")
            && err.contains("`ops:` (webhook)")
            && err.contains("[automation.channels.NAME]"),
        "{err}"
    );
    let err = call(&gate, json!({"to": "slack:#general", "content": "hi"})).await.unwrap_err().to_string();
    assert!(err.contains("no channel `slack` is configured"), "{err}");
    // A credential the detector knows, and the channel's own key: never sent.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let err =
        call(&gate, json!({"to": "ops:x", "content": format!("the token is {token}")})).await.unwrap_err().to_string();
    assert!(err.contains("not sent") && err.contains("credential"), "{err}");
    let err = call(&gate, json!({"to": "ops:x", "content": format!("key: {HMAC_KEY}")})).await.unwrap_err().to_string();
    assert!(err.contains("not sent"), "{err}");
    assert!(server.requests().is_empty(), "nothing reached the receiver");
    // Two a minute, then a clear refusal.
    call(&gate, json!({"to": "ops:x", "content": "one"})).await.unwrap();
    call(&gate, json!({"to": "ops:x", "content": "two"})).await.unwrap();
    let err = call(&gate, json!({"to": "ops:x", "content": "three"})).await.unwrap_err().to_string();
    assert!(err.contains("at most 2 messages a minute"), "{err}");
    assert_eq!(server.requests().len(), 2);
}

/// The venv's python with aiosmtpd (installed by `cargo xtask deps`).
fn smtp_python() -> std::path::PathBuf {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/venv/bin/python");
    let ok = std::process::Command::new(&python).args(["-c", "import aiosmtpd"]).status().is_ok_and(|s| s.success());
    assert!(ok, "aiosmtpd is missing in {}: run `cargo xtask deps` and retry", python.display());
    python
}

/// A test CA (self-signed, trusted through the channel's `ca_file`) and a certificate for
/// `localhost` it signed, made with openssl: (CA cert, server cert, server key) paths in `dir`.
fn test_pki(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let p = |name: &str| dir.join(name);
    let openssl = |args: &[&str]| {
        let ok = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "openssl {args:?} failed");
    };
    openssl(
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=toolgate test CA"]
            .iter()
            .copied()
            .chain(["-keyout", "ca-key.pem", "-out", "ca.pem"])
            .collect::<Vec<_>>(),
    );
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "smtp-key.pem",
        "-out",
        "smtp.csr",
    ]);
    std::fs::write(p("ext.cnf"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "smtp.csr",
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
        "smtp-cert.pem",
    ]);
    (p("ca.pem"), p("smtp-cert.pem"), p("smtp-key.pem"))
}

/// aiosmtpd on loopback requiring STARTTLS and AUTH; its stdout's lines arrive on the channel.
struct Smtp {
    child: std::process::Child,
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Smtp {
    fn start(cert: &std::path::Path, key: &std::path::Path, user: &str, password: &str) -> Smtp {
        use std::io::BufRead;
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/smtp_starttls.py");
        let mut child = std::process::Command::new(smtp_python())
            .arg(script)
            .args([cert.as_os_str(), key.as_os_str()])
            .args([user, password])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = lines.recv_timeout(std::time::Duration::from_secs(60)).expect("the SMTP server did not start");
        let port = first.strip_prefix("PORT ").unwrap().parse().unwrap();
        Smtp { child, port, lines }
    }

    /// The next message it accepted (waits up to a minute).
    fn next(&self) -> Value {
        serde_json::from_str(&self.lines.recv_timeout(std::time::Duration::from_secs(60)).unwrap()).unwrap()
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn email_goes_over_starttls_with_auth_and_an_untrusted_or_down_server_gets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_pki(dir.path());
    let smtp = Smtp::start(&cert, &key, "agent", "smtp-pass-9f2c41");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let email = |port: u16, ca: Option<&std::path::Path>| {
        channel(ChannelKind::Email, |c| {
            c.host = Some("localhost".into());
            c.port = Some(port);
            c.from = Some("toolgate@example.com".into());
            c.username = Some("agent".into());
            c.secret = Some("smtp-pass".into());
            c.ca_file = ca.map(std::path::Path::to_path_buf);
            c.retries = 1;
            c.timeout_secs = 10;
        })
    };
    let gate = gate(
        &dir,
        vec![
            ("mail", email(smtp.port, Some(&ca))),
            ("untrusted", email(smtp.port, None)),
            ("down", email(dead, Some(&ca))),
        ],
        &[("smtp-pass", "smtp-pass-9f2c41")],
    );
    let out = call(&gate, json!({"to": "mail:ops@example.com", "subject": "Disk", "content": "db-1 is at 91%"}))
        .await
        .unwrap();
    assert!(out.text_content().contains("Sent to mail:ops@example.com"), "{}", out.text_content());
    let got = smtp.next();
    assert_eq!(got["tls"], true, "STARTTLS before the message: {got}");
    assert_eq!(got["auth"], true, "authenticated: {got}");
    assert_eq!(got["mail_from"], "toolgate@example.com");
    assert_eq!(got["rcpt_tos"], json!(["ops@example.com"]));
    let data = got["data"].as_str().unwrap();
    assert!(data.contains("Subject: Disk") && data.contains("db-1 is at 91%"), "{data}");

    // A header injected through the subject or the address is refused before any connection.
    let err =
        call(&gate, json!({"to": "mail:ops@example.com", "subject": "x\r\nBcc: all@example.com", "content": "x"}))
            .await
            .unwrap_err()
            .to_string();
    assert!(err.contains("one line"), "{err}");
    let err = call(&gate, json!({"to": "mail:ops@example.com, all@example.com", "content": "x"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an email address"), "{err}");

    // A certificate nobody trusts: no retry, no password sent, kept.
    let err =
        call(&gate, json!({"to": "untrusted:ops@example.com", "content": "second"})).await.unwrap_err().to_string();
    assert!(err.contains("after 1 try") && err.contains("ca_file") && err.contains("kept in the outbox"), "{err}");
    // A server that is down: retried, then kept.
    let err = call(&gate, json!({"to": "down:ops@example.com", "content": "third"})).await.unwrap_err().to_string();
    assert!(err.contains("after 2 tries") && err.contains("kept in the outbox"), "{err}");
    let listed = call(&gate, json!({"action": "outbox"})).await.unwrap().text_content();
    assert!(listed.contains("untrusted:ops@example.com") && listed.contains("down:ops@example.com"), "{listed}");
    assert!(smtp.lines.try_recv().is_err(), "nothing else reached the server");
}

/// Keeps the notes a call sends its client (what the MCP server turns into logging
/// notifications; the end-to-end path through `toolgate serve` is in the CLI tests).
#[derive(Default)]
struct Notes(Mutex<Vec<toolgate::core::ClientNote>>);

#[toolgate::core::async_trait]
impl toolgate::core::ClientNotifier for Notes {
    async fn notify(&self, note: toolgate::core::ClientNote) -> Result<(), String> {
        self.0.lock().unwrap().push(note);
        Ok(())
    }
}

#[tokio::test]
async fn an_mcp_channel_notifies_the_calls_own_client_and_needs_no_approval() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, vec![("me", channel(ChannelKind::Mcp, |_| {}))], &[]);
    let notes = Arc::new(Notes::default());
    let mut ctx = CallContext::new(gate.workspace());
    ctx.client = toolgate::core::ClientChannel::new(notes.clone());
    // No approver behind this gate's default would matter: mcp does not leave the workspace.
    let out = gate.call(&ctx, "message", json!({"to": "mcp:", "content": "build finished"})).await.unwrap();
    assert!(out.text_content().contains("Sent to me:"), "{}", out.text_content());
    let got = notes.0.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].logger, "toolgate.message");
    assert_eq!(
        (got[0].data["channel"].as_str(), got[0].data["content"].as_str()),
        (Some("me"), Some("build finished"))
    );
    // A call with no client (the CLI, a job): a clear failure, kept.
    let err = call(&gate, json!({"to": "me:", "content": "again"})).await.unwrap_err().to_string();
    assert!(err.contains("no MCP client is connected") && err.contains("kept in the outbox"), "{err}");
}

#[tokio::test]
async fn an_outbox_entry_is_resent_or_deleted_by_its_owner_only() {
    // A webhook receiver that is down (503) until `up` is set.
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = up.clone();
    let server = Receiver::start(move |_| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            Response::text(200, "ok")
        } else {
            Response::text(503, "down")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(
        &dir,
        vec![(
            "ops",
            channel(ChannelKind::Webhook, |c| {
                c.url = Some(server.url("/hook"));
                c.secret = Some("ops-key".into());
                c.retries = 0;
            }),
        )],
        &[("ops-key", HMAC_KEY)],
    );
    let as_user = |user: &str| {
        let mut ctx = CallContext::new(gate.workspace());
        ctx.identity.user = user.into();
        ctx
    };
    for text in ["first", "second"] {
        call(&gate, json!({"to": "ops:oncall", "content": text})).await.unwrap_err();
    }
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    let kept = toolgate::store::OutboxStore::outbox_list(&store, None, 10).unwrap();
    let id_of = |text: &str| kept.iter().find(|e| e.content == text).unwrap().id.clone();
    let (first, second) = (id_of("first"), id_of("second"));

    // Another user can neither resend nor delete it, nor learn that it exists.
    for action in ["resend", "delete"] {
        let err = gate
            .call(&as_user("bob"), "message", json!({"action": action, "id": first}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("not found") || err.contains("no outbox entry"), "{action}: {err}");
    }
    assert_eq!(toolgate::store::OutboxStore::outbox_list(&store, None, 10).unwrap().len(), 2);
    let missing = call(&gate, json!({"action": "resend"})).await.unwrap_err().to_string();
    assert!(missing.contains("`id` is required"), "{missing}");

    // Still down: the resend fails, the entry stays (same id, tries added up).
    let tries_before = server.requests().len();
    let err = call(&gate, json!({"action": "resend", "id": first})).await.unwrap_err().to_string();
    assert!(err.contains("kept in the outbox as") && err.contains(&first), "{err}");
    assert_eq!(server.requests().len(), tries_before + 1);
    let entry = toolgate::store::OutboxStore::outbox_list(&store, None, 10)
        .unwrap()
        .into_iter()
        .find(|e| e.id == first)
        .unwrap();
    assert_eq!(entry.attempts, 2);

    // Up again: the resend is delivered with the same message id, and leaves the outbox.
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = call(&gate, json!({"action": "resend", "id": first})).await.unwrap();
    assert!(sent.text_content().contains("Sent to ops:oncall"), "{}", sent.text_content());
    let last = server.requests().last().cloned().unwrap();
    assert_eq!(last.header("x-toolgate-message-id"), Some(first.as_str()));
    assert_eq!(last.json()["content"], "first");
    // Deleting the other one drops it unsent; a second delete finds nothing.
    let before = server.requests().len();
    call(&gate, json!({"action": "delete", "id": second})).await.unwrap();
    assert_eq!(server.requests().len(), before, "a delete sends nothing");
    assert!(toolgate::store::OutboxStore::outbox_list(&store, None, 10).unwrap().is_empty());
    let again = call(&gate, json!({"action": "delete", "id": second})).await.unwrap_err().to_string();
    assert!(again.contains("not found") || again.contains("no outbox entry"), "{again}");
    let listed = call(&gate, json!({"action": "outbox"})).await.unwrap();
    assert!(listed.text_content().contains("empty"), "{}", listed.text_content());
}
