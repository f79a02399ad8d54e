//! `capture_screenshot` through the real binary: `toolgate call` and `toolgate serve` over stdio
//! driven by the official MCP Python SDK (`tests/python/capture_mcp.py`), against a page served
//! on loopback and reached through `allow_private` with its exact port. Checked: a real PNG of
//! the asked size, the full-resolution file in the workspace, the image block the model gets,
//! and a blocked address refused before anything connects to it.
//!
//! With `TOOLGATE_KEEP_SCREENSHOTS` set, the screenshots the tests take are also copied to
//! `/tmp/toolgate-screens/` (see [`keep`]), to be looked at by a person.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::support::pages;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

const PAGE: &str = "<!doctype html><title>Captured</title><style>body{margin:0;background:#0b6e4f;color:#fff;\
                    font:32px sans-serif}</style><h1>Served on loopback</h1><p id=late></p>\
                    <script>setTimeout(()=>{document.getElementById('late').textContent='drawn by script'},50)</script>";

/// A loopback listener outside `allow_private` that counts the connections it gets.
fn blocked_listener() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            count.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (addr, seen)
}

/// Width and height from a PNG's IHDR chunk; `None` when `png` is not a PNG.
pub(crate) fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if !png.starts_with(b"\x89PNG\r\n\x1a\n") || png.get(12..16) != Some(b"IHDR") {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

/// Standard base64 (the image blocks' encoding), without a dependency for it.
pub(crate) fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).unwrap_or_else(|| panic!("not base64: {:?}", c as char));
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Copies the screenshot at `path` to `/tmp/toolgate-screens/NAME` when
/// `TOOLGATE_KEEP_SCREENSHOTS` is set, and says where on stderr.
pub(crate) fn keep(path: &Path, name: &str) {
    if std::env::var_os("TOOLGATE_KEEP_SCREENSHOTS").is_none() {
        return;
    }
    let dir = Path::new("/tmp/toolgate-screens");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(path, dir.join(name)).unwrap();
    eprintln!("kept screenshot {}", dir.join(name).display());
}

/// `toolgate call --json TOOL PARAMS` in `ws`: whether it succeeded, and its JSON (or stderr).
fn call(ws: &Path, tool: &str, params: &Value) -> (bool, Value, String) {
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["call", "--json", tool, &params.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.success(), json, format!("{stdout}\n{stderr}"))
}

#[test]
fn capture_screenshot_through_toolgate_call() {
    let addr = pages::serve(PAGE);
    let (blocked, seen) = blocked_listener();
    let ws = pages::workspace(addr);
    let url = format!("http://{addr}/");
    let params = json!({"url": url, "width": 640, "height": 360, "delay_ms": 200});
    let (ok, result, output) = call(ws.path(), "capture_screenshot", &params);
    assert!(ok, "{output}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("Screenshot of {url} (640x360 pixels) saved to browser-output/capture-")),
        "{output}"
    );
    // The image block the model gets is a PNG of the asked size (under the budget: not scaled).
    let image = &result["content"][1];
    assert_eq!(image["type"], "image", "{output}");
    assert_eq!(image["mime_type"], "image/png", "{output}");
    let shown = base64_decode(image["data"].as_str().unwrap());
    assert_eq!(png_size(&shown), Some((640, 360)), "{output}");
    // The full-resolution file is in the workspace, where the result says.
    let path = result["meta"]["path"].as_str().unwrap();
    assert!(path.starts_with("browser-output/capture-") && path.ends_with(".png"), "{output}");
    let saved = std::fs::read(ws.path().join(path)).unwrap();
    assert_eq!(png_size(&saved), Some((640, 360)));
    assert_eq!(result["meta"]["bytes"], saved.len(), "{output}");
    assert!(saved.len() > 1000, "a real picture, not an empty one: {} bytes", saved.len());
    keep(&ws.path().join(path), "capture_screenshot.png");

    // Full page: at least the viewport's height.
    let (ok, result, output) =
        call(ws.path(), "capture_screenshot", &json!({"url": url, "full_page": true, "width": 300, "height": 200}));
    assert!(ok, "{output}");
    let full = std::fs::read(ws.path().join(result["meta"]["path"].as_str().unwrap())).unwrap();
    let (w, h) = png_size(&full).unwrap();
    assert!(w == 300 && h >= 200, "{w}x{h}");

    // A loopback port outside `allow_private` is refused by the proxy; nothing connects there.
    let (ok, _, output) = call(ws.path(), "capture_screenshot", &json!({"url": format!("http://{blocked}/")}));
    assert!(!ok, "{output}");
    assert!(output.contains("toolgate's proxy refused it") && output.contains("loopback"), "{output}");
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the blocked listener was connected to");
    // Not a web address, and a bad size: refused up front with what to do.
    let (ok, _, output) = call(ws.path(), "capture_screenshot", &json!({"url": "file:///etc/passwd"}));
    assert!(!ok && output.contains("is not an http:// or https:// URL"), "{output}");
    let (ok, _, output) = call(ws.path(), "capture_screenshot", &json!({"url": url, "width": 100000}));
    assert!(!ok && output.contains("width"), "{output}");
    // Only the two good shots were saved.
    let files = std::fs::read_dir(ws.path().join("browser-output")).unwrap().count();
    assert_eq!(files, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_screenshot_over_mcp_with_the_python_sdk() {
    let addr = pages::serve(PAGE);
    let (blocked, seen) = blocked_listener();
    let ws = pages::workspace(addr);
    let args = [
        TOOLGATE.to_owned(),
        ws.path().to_str().unwrap().to_owned(),
        format!("http://{addr}/"),
        format!("http://{blocked}/"),
    ];
    let report = crate::support::python::report("capture_mcp.py", &args).await;
    assert_eq!(report["tools"], json!(["browser", "canvas", "capture_screenshot"]), "{report}");

    let shot = &report["shot"];
    assert_eq!(shot["is_error"], false, "{report}");
    assert_eq!(shot["images"], json!([{"mime": "image/png", "size": [400, 300], "bytes": shot["images"][0]["bytes"]}]));
    let text = shot["text"].as_str().unwrap();
    let path = text.split("saved to ").nth(1).and_then(|t| t.split(".png").next()).map(|p| format!("{p}.png"));
    let path = path.unwrap_or_else(|| panic!("no path in {text}"));
    let saved = std::fs::read(ws.path().join(&path)).unwrap();
    assert_eq!(png_size(&saved), Some((400, 300)), "{path}");

    let refused = &report["refused"];
    assert_eq!(refused["is_error"], true, "{report}");
    assert!(refused["text"].as_str().unwrap().contains("toolgate's proxy refused it"), "{report}");
    assert_eq!(refused["images"], json!([]));
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the blocked listener was connected to");
    let not_http = &report["not_http"];
    assert!(not_http["is_error"] == true && not_http["text"].as_str().unwrap().contains("http://"), "{report}");

    // Under stdio the canvas is a file; its snapshot is rendered by the same browser.
    let present = report["present"]["text"].as_str().unwrap();
    assert!(present.contains("open file://") && present.contains("reloads itself every 2 seconds"), "{report}");
    let snapshot = &report["snapshot"];
    assert_eq!(snapshot["is_error"], false, "{report}");
    assert_eq!(snapshot["images"][0]["size"], json!([320, 200]), "{report}");
}
