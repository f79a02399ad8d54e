//! The `http` capability end to end: the Python example `python-http` (componentize-py, built
//! by `cargo xtask deps` into `.cache/wasm/`) calls a real HTTP server on loopback, reached
//! through the gate's `[web] allow_private` with its exact port, as the web tools' tests do.
//! Every refusal is checked to reach NO server (the server counts what it receives).
//!
//! Capability files refuse IP addresses at install; these tests build the capability in code
//! (`127.0.0.1` as the allowed host) to reach a loopback server, which is also how they show
//! that the fetcher's address rules hold even when an allowlist names a private address.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use toolgate::Gate;
use toolgate::core::{Tool, ToolError};
use toolgate::store::SecretStore;
use toolgate::wasm::{Capabilities, RuntimeConfig, WasmRuntime, WasmTool};
use toolgate_testkit::receiver::{Receiver, Response};

/// The secret the host injects; no leak rule knows its shape, so only the injected-value
/// redaction can hide it.
const TOKEN: &str = "zq8Xw3Lr9Tn2Vb6Ks4Hd";
/// A credential shape the leak detector knows (a GitHub token).
const GITHUB_TOKEN: &str = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5";

/// A loopback HTTP/1.1 server. `/v1/echo` answers with the request it received (head and
/// body); `/v1/data` with a text and credential-bearing headers; `/v1/leak` with a body holding
/// a token; `/v1/redirect` with a 302 to another host.
fn serve() -> Receiver {
    Receiver::start(|request| {
        let path = request.path.split('?').next().unwrap_or("/");
        match path {
            "/v1/echo" => Response::text(200, request.text()),
            "/v1/data" => Response::text(200, "hello from the server")
                .header("set-cookie", "sid=abc")
                .header("www-authenticate", "Bearer")
                .header("proxy-authenticate", "Basic")
                .header("x-kept", "yes"),
            "/v1/big" => Response::text(200, "x".repeat(5 << 20)),
            "/v1/leak" => Response::text(200, format!("the key is {GITHUB_TOKEN}, keep it")),
            "/v1/redirect" => Response::text(302, "").header("location", "https://elsewhere.example/"),
            _ => Response::text(404, "no such page"),
        }
    })
}

pub(crate) fn component() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/python-http.wasm");
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{} is missing ({e}); run `cargo xtask deps` to build it from examples/wasm/python-http", path.display())
    })
}

/// A workspace with the credential stored as `toolgate tools secret TG_TEST_TOKEN` would.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".toolgate")).expect("state dir");
    let store = toolgate::store::Store::open(&dir.path().join(".toolgate/state.db")).expect("store");
    let key = format!("{}TG_TEST_TOKEN", toolgate::extensions::SECRET_PREFIX);
    store.secret_put(&key, TOKEN.as_bytes()).expect("secret");
    dir
}

/// A gate whose `[web] allow_private` lists `allow` (approval off: a tool with `http` asks).
fn gate(ws: &std::path::Path, allow: &[String]) -> Arc<Gate> {
    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    config.web.allow_private = allow.to_vec();
    Arc::new(Gate::builder(ws).config(config).build().expect("gate"))
}

/// The capability for the loopback server: `/v1/`, GET and POST, a bearer credential.
fn caps(insecure: bool) -> Capabilities {
    caps_with(insecure, &[r#"{"bearer": {}}"#])
}

/// The capability for the loopback server with the credential at each of `locations`.
fn caps_with(insecure: bool, locations: &[&str]) -> Capabilities {
    let credentials: Vec<String> = locations
        .iter()
        .map(|l| format!(r#"{{"secret": "TG_TEST_TOKEN", "host": "example.com", "location": {l}}}"#))
        .collect();
    Capabilities::from_json(&format!(
        r#"{{"limits": {{"memory_mb": 64, "instances": 16, "component_mb": 32}},
            "http": {{"allow": [{{"host": "example.com", "path_prefix": "/v1/", "methods": ["GET", "POST"]}}],
                      "credentials": [{}],
                      "allow_insecure": {insecure}}}}}"#,
        credentials.join(",")
    ))
    .map(|mut c| {
        // The only way to name a loopback server: in code, past the install-time validation.
        let http = c.http.as_mut().expect("http");
        http.allow[0].host = "127.0.0.1".into();
        for c in &mut http.credentials {
            c.host = "127.0.0.1".into();
        }
        c
    })
    .expect("caps")
}

/// The python-http tool with the gate's services, registered in the gate.
async fn tool(gate: &Arc<Gate>, caps: Capabilities) -> Arc<WasmTool> {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    let config =
        RuntimeConfig { epoch_tick: Duration::from_millis(50), cache_dir: Some(cache), ..RuntimeConfig::default() };
    let rt = WasmRuntime::new(config).expect("runtime");
    let prepared = rt.prepare(&component(), &caps).await.expect("python-http prepares");
    let tool = Arc::new(WasmTool::new(rt, prepared, "python-http", caps, toolgate::wasm::services(gate)));
    gate.registry().register_dynamic(Arc::clone(&tool) as Arc<dyn Tool>).expect("register");
    tool
}

/// What the guest itself returned (not the gate's shaped output): `{status, headers, body}`.
async fn guest(tool: &WasmTool, params: Value) -> Result<Value, ToolError> {
    let out = tool.execute(&toolgate::core::CallContext::new("/"), params).await?;
    Ok(serde_json::from_str(&out.text_content()).expect("the guest returns JSON"))
}

#[tokio::test]
async fn an_allowed_get_returns_the_body_through_the_gate() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    let gate = gate(ws.path(), &[format!("127.0.0.1:{port}")]);
    let tool = tool(&gate, caps(true)).await;

    let out = gate
        .call(&gate.context(), "wasm__python-http", json!({"url": format!("http://127.0.0.1:{port}/v1/data")}))
        .await
        .expect("allowed");
    let text = out.text_content();
    assert!(text.contains("hello from the server"), "{text}");
    assert!(text.contains("<tool_output"), "untrusted output is wrapped: {text}");

    // What the guest sees: credential-bearing response headers are gone, others kept.
    let got = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/data")})).await.expect("allowed");
    assert_eq!(got["status"], 200);
    assert_eq!(got["body"], "hello from the server");
    let names: Vec<&str> = got["headers"].as_array().expect("headers").iter().filter_map(|h| h[0].as_str()).collect();
    assert!(names.contains(&"x-kept"), "{names:?}");
    for hidden in ["set-cookie", "www-authenticate", "proxy-authenticate"] {
        assert!(!names.contains(&hidden), "{hidden} reached the guest: {names:?}");
    }

    // A redirect is returned as it is, never followed.
    let got = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/redirect")})).await.expect("3xx");
    assert_eq!(got["status"], 302);
    assert!(got["headers"].to_string().contains("https://elsewhere.example/"), "{got}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn requests_outside_the_allowlist_reach_no_server() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    let gate = gate(ws.path(), &[format!("127.0.0.1:{port}")]);
    let tool = tool(&gate, caps(true)).await;
    let base = format!("http://127.0.0.1:{port}");
    let cases = [
        (json!({"url": format!("{base}/v1/../admin")}), "path `/admin` is outside"),
        (json!({"url": format!("{base}/v1/%2e%2e/admin")}), "path `/admin` is outside"),
        (json!({"url": format!("{base}/v1/%2E%2e/%2e%2E/etc/passwd")}), "path `/etc/passwd` is outside"),
        (json!({"url": format!("{base}/v1/..%2Fadmin")}), "encoded `/`"),
        (json!({"url": format!("{base}/v1%2Fadmin")}), "encoded `/`"),
        (json!({"url": format!("{base}/v1/%5C..%5Cadmin")}), "encoded `\\`"),
        (json!({"url": format!("{base}/v10/data")}), "path `/v10/data` is outside"),
        (json!({"url": format!("{base}/v1/data"), "method": "DELETE"}), "method DELETE is not allowed"),
        (json!({"url": format!("http://user:pw@127.0.0.1:{port}/v1/data")}), "user name or password"),
        (json!({"url": format!("http://127.0.0.2:{port}/v1/data")}), "host `127.0.0.2` is not in"),
        (json!({"url": format!("http://localhost:{port}/v1/data")}), "host `localhost` is not in"),
        (json!({"url": format!("file:///etc/passwd")}), "refused URL"),
        // The guest cannot set or replace the credential.
        (json!({"url": format!("{base}/v1/echo"), "headers": {"Authorization": "Bearer mine"}}), "is set by the host"),
        (json!({"url": format!("{base}/v1/echo"), "headers": {"Cookie": "a=b"}}), "cannot set the header `Cookie`"),
        // An outgoing credential is refused, naming the rule.
        (
            json!({"url": format!("{base}/v1/echo"), "method": "POST", "body": format!("token={GITHUB_TOKEN}")}),
            "leak rule",
        ),
        (json!({"url": format!("{base}/v1/echo?key={GITHUB_TOKEN}")}), "leak rule"),
    ];
    for (params, expect) in cases {
        let err = guest(&tool, params.clone()).await.expect_err(&format!("refused: {params}"));
        let text = err.to_string();
        assert!(text.contains(expect), "{params}: {text}");
    }
    assert!(server.requests().is_empty(), "a refused request reached the server");

    // https is required unless the capability allows http.
    let strict = tool_named(&gate, caps(false)).await;
    let err = guest(&strict, json!({"url": format!("{base}/v1/data")})).await.expect_err("plain http");
    assert!(err.to_string().contains("plain http"), "{err}");
    assert!(server.requests().is_empty());
}

/// Compiles python-http into the shared cache, for tests that copy it into a workspace: the
/// runtime's compile lock makes tests running at the same time wait for one compile.
pub(crate) async fn compile_into_shared_cache() {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    let rt = WasmRuntime::new(RuntimeConfig { cache_dir: Some(cache), ..RuntimeConfig::default() }).expect("runtime");
    rt.prepare(&component(), &caps(true)).await.expect("python-http prepares");
}

/// Like [`tool`], for a second tool in the same gate (its name would clash).
async fn tool_named(gate: &Arc<Gate>, caps: Capabilities) -> Arc<WasmTool> {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    let rt = WasmRuntime::new(RuntimeConfig { cache_dir: Some(cache), ..RuntimeConfig::default() }).expect("runtime");
    let prepared = rt.prepare(&component(), &caps).await.expect("python-http prepares");
    Arc::new(WasmTool::new(rt, prepared, "python-http-strict", caps, toolgate::wasm::services(gate)))
}

#[tokio::test]
async fn a_private_address_needs_allow_private_with_its_port() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    for allow in [vec![], vec![format!("127.0.0.1:{}", port.wrapping_add(1))]] {
        let gate = gate(ws.path(), &allow);
        let tool = tool(&gate, caps(true)).await;
        let err = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/data")})).await.expect_err("private");
        assert!(err.to_string().contains("allow_private") || err.to_string().contains("loopback"), "{err}");
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn the_credential_reaches_the_server_and_never_the_guest() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    let gate = gate(ws.path(), &[format!("127.0.0.1:{port}")]);
    let tool = tool(&gate, caps(true)).await;

    // The server echoes the request it received, Authorization header included.
    let got = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/echo"), "headers": {"X-Mine": "1"}}))
        .await
        .expect("echo");
    let received = server.next(Duration::ZERO).expect("one request").text();
    assert!(received.to_ascii_lowercase().contains(&format!("authorization: bearer {}", TOKEN.to_ascii_lowercase())));
    assert!(received.contains("x-mine: 1"), "{received}");
    let body = got["body"].as_str().expect("body");
    assert!(!got.to_string().contains(TOKEN), "the guest saw the credential: {got}");
    assert!(body.contains("[REDACTED:http-credential]"), "{body}");

    // A secret in a response is redacted before the guest reads it.
    let got = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/leak")})).await.expect("leak");
    let body = got["body"].as_str().expect("body");
    assert!(!body.contains(GITHUB_TOKEN), "{body}");
    assert!(body.contains("[REDACTED:") && body.contains("keep it"), "{body}");

    // A missing secret refuses the request rather than sending it without the credential.
    let other = workspace();
    toolgate::store::Store::open(&other.path().join(".toolgate/state.db"))
        .expect("store")
        .secret_delete(&format!("{}TG_TEST_TOKEN", toolgate::extensions::SECRET_PREFIX))
        .expect("delete");
    let bare = gate_at(other.path(), port);
    let tool = tool_named(&bare, caps(true)).await;
    let before = server.requests().len();
    let err = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/echo")})).await.expect_err("no secret");
    assert!(err.to_string().contains("toolgate tools secret TG_TEST_TOKEN"), "{err}");
    assert_eq!(server.requests().len(), before);
}

fn gate_at(ws: &std::path::Path, port: u16) -> Arc<Gate> {
    gate(ws, &[format!("127.0.0.1:{port}")])
}

#[test]
fn the_example_capability_file_is_valid() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/wasm/python-http/python-http.capabilities.json");
    let caps = Capabilities::from_json(&std::fs::read_to_string(path).expect("read")).expect("valid");
    let http = caps.http.expect("http");
    let allowed = toolgate::wasm::check_request(&http, "GET", "https://api.example.com/v1/items").expect("allowed");
    assert_eq!(allowed.path, "/v1/items");
    assert!(toolgate::wasm::check_request(&http, "GET", "https://api.example.com/v2/items").is_err());
}

#[tokio::test]
async fn every_credential_location_is_injected_and_hidden() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    let gate = gate_at(ws.path(), port);
    let caps = caps_with(
        true,
        &[
            r#"{"basic": {"username": "bot"}}"#,
            r#"{"header": {"name": "X-Api-Key", "prefix": "Key "}}"#,
            r#"{"query": {"name": "api_key"}}"#,
        ],
    );
    let tool = tool(&gate, caps).await;
    let got = guest(&tool, json!({"url": format!("http://127.0.0.1:{port}/v1/echo?q=1")})).await.expect("echo");
    let received = server.next(Duration::ZERO).expect("one request").text();
    // base64("bot:zq8Xw3Lr9Tn2Vb6Ks4Hd")
    assert!(received.contains("authorization: Basic Ym90OnpxOFh3M0xyOVRuMlZiNktzNEhk"), "{received}");
    assert!(received.contains(&format!("x-api-key: Key {TOKEN}")), "{received}");
    assert!(received.starts_with(&format!("GET /v1/echo?q=1&api_key={TOKEN} ")), "{received}");
    let text = got.to_string();
    assert!(!text.contains(TOKEN) && !text.contains("Ym90OnpxOFh3M0xyOVRuMlZiNktzNEhk"), "{text}");
    assert!(text.contains("[REDACTED:http-credential]"), "{text}");

    // The guest can neither set nor replace any of them.
    let base = format!("http://127.0.0.1:{port}");
    for params in [
        json!({"url": format!("{base}/v1/echo"), "headers": {"x-api-key": "mine"}}),
        json!({"url": format!("{base}/v1/echo?api_key=mine")}),
        json!({"url": format!("{base}/v1/echo"), "headers": {"AUTHORIZATION": "Basic x"}}),
    ] {
        let err = guest(&tool, params.clone()).await.expect_err("refused");
        assert!(err.to_string().contains("is set by the host"), "{params}: {err}");
    }
    assert!(server.next(Duration::ZERO).is_none());

    // The response is bounded.
    let err = guest(&tool, json!({"url": format!("{base}/v1/big")})).await.expect_err("too large");
    assert!(err.to_string().contains("larger than 4194304 bytes"), "{err}");
}

/// The gate's audit log, after its queue is written.
fn audit_rows(gate: &Gate, ws: &std::path::Path) -> Vec<toolgate::store::AuditRecord> {
    gate.flush_audit();
    let store = toolgate::store::Store::open(&ws.join(".toolgate/state.db")).expect("store");
    store.audit_tail(100).expect("audit")
}

#[tokio::test]
async fn every_guest_request_leaves_an_audit_row() {
    let server = serve();
    let port = server.port();
    let ws = workspace();
    let gate = gate_at(ws.path(), port);
    tool(&gate, caps(true)).await;
    let base = format!("http://127.0.0.1:{port}");
    let ctx = gate.context();
    gate.call(&ctx, "wasm__python-http", json!({"url": format!("{base}/v1/data?token=hunter2secret&q=1")}))
        .await
        .expect("allowed");
    let refused = gate.call(&ctx, "wasm__python-http", json!({"url": format!("{base}/v1/%2e%2e/admin")})).await;
    assert!(refused.is_err(), "{refused:?}");

    let rows = audit_rows(&gate, ws.path());
    let calls: Vec<_> = rows.iter().filter(|r| r.tool == "wasm__python-http" && !r.id.contains(".http")).collect();
    let http: Vec<_> = rows.iter().filter(|r| r.id.contains(".http")).collect();
    assert_eq!((calls.len(), http.len()), (2, 2), "{rows:#?}");
    for row in &http {
        assert_eq!(row.tool, "wasm__python-http");
        assert!(calls.iter().any(|c| row.id == format!("{}.http1", c.id)), "{} names its call", row.id);
        assert_eq!(row.subject.as_deref(), Some("127.0.0.1"));
        assert!(!format!("{row:?}").contains("hunter2secret"), "a query value reached the audit log: {row:?}");
        assert!(!format!("{row:?}").contains(TOKEN), "the credential reached the audit log: {row:?}");
    }
    let sent = http.iter().find(|r| r.outcome == "ok").expect("the sent request");
    assert_eq!(sent.decision, "wasm http: allowed");
    let params: Value = serde_json::from_str(&sent.params).expect("params are JSON");
    assert_eq!(params, json!({"method": "GET", "url": format!("{base}/v1/data?token=*&q=*")}));
    assert_eq!(sent.output_bytes, "hello from the server".len() as i64);
    assert_eq!(
        sent.detail.as_deref(),
        Some(format!("GET {base}/v1/data?token=*&q=* -> 200, 21 bytes").as_str()),
        "{sent:?}"
    );
    let denied = http.iter().find(|r| r.outcome == "denied").expect("the refused request");
    assert_eq!(denied.decision, "wasm http: refused");
    assert!(denied.error.as_deref().is_some_and(|e| e.contains("path `/admin` is outside")), "{denied:?}");
    assert_eq!(denied.output_bytes, 0);

    // A tool without the capability that tries anyway leaves a row too.
    let limits = r#"{"limits": {"memory_mb": 64, "instances": 16, "component_mb": 32}}"#;
    let ungranted = tool_named(&gate, Capabilities::from_json(limits).expect("caps")).await;
    let err = guest(&ungranted, json!({"url": format!("{base}/v1/data")})).await.expect_err("not granted");
    assert!(err.to_string().contains("not granted"), "{err}");
    let rows = audit_rows(&gate, ws.path());
    let row = rows.iter().find(|r| r.tool == "wasm__python-http-strict").expect("the ungranted request's row");
    assert_eq!((row.outcome.as_str(), row.decision.as_str()), ("denied", "wasm http: refused"), "{row:?}");
    assert!(row.error.as_deref().is_some_and(|e| e.contains("capability `http` is not granted")), "{row:?}");
}

/// A loopback server that reads one request and never answers. `got` fires when the request
/// has arrived, `closed` when the client closed the connection.
async fn silent_server() -> (u16, tokio::sync::oneshot::Receiver<()>, tokio::sync::oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (got_tx, got) = tokio::sync::oneshot::channel();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else { return };
        let mut buf = vec![0u8; 65536];
        let mut head = Vec::new();
        let mut got_tx = Some(got_tx);
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.windows(4).any(|w| w == b"\r\n\r\n")
                && let Some(tx) = got_tx.take()
            {
                let _ = tx.send(());
            }
        }
        let _ = closed_tx.send(());
    });
    (port, got, closed)
}

/// A gate whose `[web]` timeout (300 s) is far beyond the test's waits, so only cancellation
/// can end the request.
fn patient_gate(ws: &std::path::Path, port: u16) -> Arc<Gate> {
    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    config.web.allow_private = vec![format!("127.0.0.1:{port}")];
    config.web.timeout_secs = 300;
    Arc::new(Gate::builder(ws).config(config).build().expect("gate"))
}

/// Generous bounds against a hang (not a measurement): the `[web]` timeout is 300 s.
const HANG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn cancelling_the_call_aborts_the_request_in_flight() {
    let (port, got, closed) = silent_server().await;
    let ws = workspace();
    let gate = patient_gate(ws.path(), port);
    tool(&gate, caps(true)).await;
    let ctx = gate.context();
    let cancel = ctx.cancel.clone();
    let caller = Arc::clone(&gate);
    let url = format!("http://127.0.0.1:{port}/v1/slow");
    let call = tokio::spawn(async move { caller.call(&ctx, "wasm__python-http", json!({"url": url})).await });
    tokio::time::timeout(HANG, got).await.expect("the request reaches the server").expect("server");
    cancel.cancel();
    let result = tokio::time::timeout(HANG, call).await.expect("the call ends when cancelled").expect("join");
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    tokio::time::timeout(HANG, closed).await.expect("the connection is closed when cancelled").expect("server");
    // The request's row says what happened to it.
    let rows = audit_rows(&gate, ws.path());
    let row = rows.iter().find(|r| r.id.contains(".http")).expect("the request's row");
    assert_eq!(row.outcome, "cancelled", "{row:?}");
}

#[tokio::test]
async fn the_call_token_reaches_the_fetcher() {
    // Straight through the runtime (no gate, no tool wrapper dropping the future): the token
    // of the call's context alone stops the request, and the guest sees why.
    let (port, got, closed) = silent_server().await;
    let ws = workspace();
    let gate = patient_gate(ws.path(), port);
    let tool = tool(&gate, caps(true)).await;
    let ctx = toolgate::core::CallContext::new(ws.path());
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        if tokio::time::timeout(HANG, got).await.is_ok() {
            cancel.cancel();
        }
    });
    let params = json!({"url": format!("http://127.0.0.1:{port}/v1/slow")}).to_string();
    let caps = Arc::new(tool.capabilities().clone());
    let run = tool.runtime().execute(
        tool.prepared(),
        Arc::from("wasm__python-http"),
        caps,
        toolgate::wasm::services(&gate),
        Some(ctx),
        &params,
    );
    let (result, _) = tokio::time::timeout(HANG, run).await.expect("the guest ends when cancelled");
    let message = result.expect("the guest runs").expect_err("the guest reports the failure");
    assert!(message.contains("cancelled"), "{message}");
    tokio::time::timeout(HANG, closed).await.expect("the connection is closed when cancelled").expect("server");
}
