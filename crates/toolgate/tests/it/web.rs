//! The web tools through `Gate::call` against real HTTP servers on loopback (let through
//! `[web] allow_private` with their exact port): the audit row's final URL and status, search
//! API keys from the encrypted secrets store, and download progress.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::config::Config;
use toolgate::core::{Progress, ProgressSink};
use toolgate::store::SecretStore;
use toolgate::store::Store;
use toolgate::{ApprovalAnswer, ApprovalRequest, Approver, Gate};

/// One answer of the test server.
enum Answer {
    /// Status, headers, body.
    Full(u16, Vec<(&'static str, String)>, Vec<u8>),
    /// `200`, `Content-Length` of the whole body, then `chunk` bytes every `every`.
    Slow { body: Vec<u8>, chunk: usize, every: Duration },
}

/// A raw HTTP/1.1 server on loopback, port 0: `route(path, request head)` answers each request.
async fn serve(route: impl Fn(&str, &str) -> Answer + Send + Sync + 'static) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let route = Arc::new(route);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let route = route.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_owned();
                match route(&path, &head) {
                    Answer::Full(status, headers, body) => {
                        let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                        for (k, v) in headers {
                            out.push_str(&format!("{k}: {v}\r\n"));
                        }
                        out.push_str("connection: close\r\n\r\n");
                        let _ = s.write_all(out.as_bytes()).await;
                        let _ = s.write_all(&body).await;
                    }
                    Answer::Slow { body, chunk, every } => {
                        let out = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(out.as_bytes()).await;
                        for part in body.chunks(chunk) {
                            tokio::time::sleep(every).await;
                            if s.write_all(part).await.is_err() || s.flush().await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// Says yes to every approval request (`http` asks on every call).
#[derive(Debug)]
struct Yes;

#[toolgate::core::async_trait]
impl Approver for Yes {
    async fn ask(&self, _request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        Some(ApprovalAnswer::AllowOnce)
    }
}

/// A gate on a fresh workspace whose `[web] allow_private` is exactly `addr`.
fn gate(dir: &tempfile::TempDir, addr: SocketAddr, search: toolgate::tools::web::SearchConfig) -> Gate {
    let mut config = Config::default();
    config.web.allow_private = vec![addr.to_string()];
    config.web.search = search;
    Gate::builder(dir.path()).config(config).approver(Arc::new(Yes)).build().unwrap()
}

fn state_db(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join(".toolgate/state.db")
}

#[tokio::test]
async fn the_audit_row_records_the_final_url_and_status() {
    let addr = serve(|path, _| match path {
        "/start" => Answer::Full(302, vec![("location", "/middle".into())], Vec::new()),
        "/middle" => Answer::Full(301, vec![("location", "/final?page=2".into())], Vec::new()),
        "/final" => Answer::Full(
            200,
            vec![("content-type", "text/html".into())],
            b"<html><body><main><h1>Landed</h1><p>After two hops.</p></main></body></html>".to_vec(),
        ),
        _ => Answer::Full(404, vec![("content-type", "text/plain".into())], b"no such page".to_vec()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, addr, Default::default());
    let ctx = gate.context();
    let out = gate.call(&ctx, "web_fetch", json!({"url": format!("http://{addr}/start")})).await.unwrap();
    assert!(out.text_content().contains("# Landed"), "{}", out.text_content());
    gate.call(&ctx, "web_fetch", json!({"url": format!("http://{addr}/gone")})).await.unwrap();
    // A second fetch of the first URL comes from web_fetch's cache, and says so.
    gate.call(&ctx, "web_fetch", json!({"url": format!("http://{addr}/start")})).await.unwrap();
    gate.flush_audit();

    let rows = Store::open(&state_db(&dir)).unwrap().audit_tail(10).unwrap();
    let details: Vec<Option<&str>> =
        rows.iter().filter(|r| r.tool == "web_fetch").map(|r| r.detail.as_deref()).collect();
    assert_eq!(
        details,
        [
            Some(format!("HTTP 200 http://{addr}/final?page=2 (from http://{addr}/start after 2 redirects)").as_str()),
            Some(format!("HTTP 404 http://{addr}/gone").as_str()),
            Some(format!("HTTP 200 http://{addr}/final?page=2 (from web_fetch's cache)").as_str()),
        ]
    );
    // A tool that notes nothing leaves the column empty.
    gate.call(&ctx, "echo", json!({"message": "hi"})).await.unwrap();
    gate.flush_audit();
    let rows = Store::open(&state_db(&dir)).unwrap().audit_tail(1).unwrap();
    assert_eq!((rows[0].tool.as_str(), rows[0].detail.as_deref()), ("echo", None));
}

#[tokio::test]
async fn search_keys_come_from_the_secrets_store_when_the_environment_has_none() {
    const STORED: &str = "brv-stored-7f3a91c2";
    let brave = br#"{"type":"search","query":{"original":"rust"},"web":{"type":"search","results":[{"title":"Rust Programming Language","url":"https://www.rust-lang.org/","description":"A language empowering everyone"}]}}"#;
    // A Brave Search API v1 stand-in that checks the key header like the real one.
    let addr = serve(move |_, head| {
        let key = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case("x-subscription-token").then(|| v.trim().to_owned())
        });
        if key.as_deref() == Some(STORED) {
            Answer::Full(200, vec![("content-type", "application/json".into())], brave.to_vec())
        } else {
            let body = br#"{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","status":401}}"#;
            Answer::Full(401, vec![("content-type", "application/json".into())], body.to_vec())
        }
    })
    .await;
    let names = ["TG_TEST_WEB_KEY_STORED", "TG_TEST_WEB_KEY_WRONG", "TG_TEST_WEB_KEY_NOWHERE"];
    for name in names {
        assert!(std::env::var_os(name).is_none(), "{name} must not be set for this test");
    }
    let dir = tempfile::tempdir().unwrap();
    // A real store file, written as `toolgate tools secret NAME` writes it.
    let store = Store::open(&state_db(&dir)).unwrap();
    let prefix = toolgate::extensions::SECRET_PREFIX;
    store.secret_put(&format!("{prefix}{}", names[0]), STORED.as_bytes()).unwrap();
    store.secret_put(&format!("{prefix}{}", names[1]), b"brv-wrong-key").unwrap();
    drop(store);
    let raw = std::fs::read(state_db(&dir)).unwrap();
    assert!(!raw.windows(STORED.len()).any(|w| w == STORED.as_bytes()), "the key is encrypted at rest");

    let search = |name: &str| {
        let config = toolgate::tools::web::SearchConfig {
            provider: Some("brave".into()),
            url: Some(format!("http://{addr}/res/v1/web/search")),
            api_key_env: Some(name.into()),
        };
        gate(&dir, addr, config)
    };
    let g = search(names[0]);
    let out = g.call(&g.context(), "web_search", json!({"query": "rust"})).await.unwrap();
    assert!(out.text_content().contains("Rust Programming Language"), "{}", out.text_content());

    let g = search(names[1]);
    let e = g.call(&g.context(), "web_search", json!({"query": "rust"})).await.unwrap_err();
    assert!(e.to_string().contains("HTTP 401"), "the server saw the stored (wrong) key: {e}");

    let g = search(names[2]);
    let e = g.call(&g.context(), "web_search", json!({"query": "rust"})).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("environment variable `{}`", names[2]))
            && text.contains(&format!("toolgate tools secret {}", names[2])),
        "{text}"
    );
    // The key appears in no audit row.
    g.flush_audit();
    let rows = Store::open(&state_db(&dir)).unwrap().audit_tail(10).unwrap();
    assert!(!format!("{rows:?}").contains(STORED));
}

#[tokio::test]
async fn a_slow_download_reports_progress() {
    // 3,000 bytes in 100-byte pieces every 50 ms: about 1.5 s of body.
    let addr =
        serve(|_, _| Answer::Slow { body: vec![b'z'; 3_000], chunk: 100, every: Duration::from_millis(50) }).await;
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, addr, Default::default());
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let ctx = gate.context().with_progress(ProgressSink::new(move |p| sink.lock().unwrap().push(p)));
    for (tool, params) in [
        ("web_fetch", json!({"url": format!("http://{addr}/slow.txt")})),
        ("http", json!({"method": "GET", "url": format!("http://{addr}/slow-api")})),
    ] {
        seen.lock().unwrap().clear();
        let out = gate.call(&ctx, tool, params).await.unwrap();
        assert!(out.text_content().contains(&"z".repeat(3_000)), "{tool}");
        let reports = seen.lock().unwrap().clone();
        assert!(reports.len() >= 5, "{tool}: progress while the body streamed in: {reports:?}");
        assert!(reports.windows(2).all(|w| w[0].progress < w[1].progress), "{reports:?}");
        assert!(reports.iter().all(|p| p.total == Some(3_000.0)), "{reports:?}");
        let last = reports.last().unwrap();
        assert_eq!(last.progress, 3_000.0);
        assert_eq!(last.message.as_deref(), Some("3000 of 3000 bytes received"));
    }
}

/// `http` refuses to send the value of one of the server's own secret environment variables
/// (a value no vendor rule recognises): the tool scans with the gate's detector, which knows
/// them, and no request reaches the server.
#[tokio::test]
#[allow(unsafe_code)] // std::env::set_var (see the SAFETY note)
async fn http_refuses_the_servers_own_secret_values() {
    let hits = Arc::new(Mutex::new(0usize));
    let counter = hits.clone();
    let addr = serve(move |_, _| {
        *counter.lock().unwrap() += 1;
        Answer::Full(200, Vec::new(), b"ok".to_vec())
    })
    .await;
    let value = "plain-words-no-vendor-shape-4471";
    // SAFETY: nextest runs each test in a process of its own, and the gate (which reads the
    // environment) is built after this, on this thread.
    unsafe { std::env::set_var("TG_TEST_DEPLOY_TOKEN", value) };
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, addr, Default::default());
    let ctx = gate.context();
    let url = format!("http://{addr}/api");
    let err = gate.call(&ctx, "http", json!({"method": "POST", "url": url, "body": value})).await.unwrap_err();
    assert!(err.to_string().contains("env-secret-value"), "{err}");
    assert_eq!(*hits.lock().unwrap(), 0, "nothing was sent");
    let sent = gate.call(&ctx, "http", json!({"method": "POST", "url": url, "body": "harmless"})).await.unwrap();
    assert!(sent.text_content().contains("200"), "{}", sent.text_content());
}
