//! `capture_screenshot` and the canvas's `snapshot` against real Chromium and loopback pages:
//! real PNGs of the asked size, the shown copy within its budget, blocked addresses refused with
//! no connection made, no browser process left.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use toolgate_browser::canvas::{Canvas, CanvasConfig};
use toolgate_browser::{Browsers, Setup};
use toolgate_core::{CallContext, Content, Tool, ToolOutput};

use crate::session::png_size;
use crate::support::{self, html};

fn tool(setup: &Setup, name: &str) -> Arc<dyn Tool> {
    toolgate_browser::tools(setup).into_iter().find(|t| t.spec().name == name).expect(name)
}

fn setup(browsers: &Browsers) -> Setup {
    let mut setup = Setup::default();
    setup.browsers = Some(browsers.clone());
    setup.canvas = Canvas::new(CanvasConfig::default());
    setup
}

/// The image block's PNG, decoded.
fn shown(out: &ToolOutput) -> Vec<u8> {
    let data = out
        .content
        .iter()
        .find_map(|c| match c {
            Content::Image { data, mime_type } if mime_type == "image/png" => Some(data.clone()),
            _ => None,
        })
        .expect("an image block");
    base64::engine::general_purpose::STANDARD.decode(data).expect("base64")
}

fn meta(out: &ToolOutput, key: &str) -> Value {
    out.meta.as_ref().map_or(Value::Null, |m| m[key].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captures_real_pngs_of_the_asked_size_and_fits_the_shown_copy_to_the_budget() {
    let (_tmp, dir) = support::tempdir();
    let mut pages = HashMap::new();
    pages.insert("/", html("<title>Shot</title><h1 style='color:#c00'>Hello</h1>"));
    pages.insert(
        "/tall",
        html("<h1>Top</h1><div style='height:5000px;background:linear-gradient(#fff,#00f)'>tall</div>"),
    );
    pages.insert("/alert", html("<script>alert('hi'); alert('again')</script><p>after the dialogs</p>"));
    let addr = support::serve(pages).await;
    let browsers = support::browsers(&dir, &[addr]);
    let capture = tool(&setup(&browsers), "capture_screenshot");
    let ctx = CallContext::new(&dir);

    let out =
        capture.execute(&ctx, json!({"url": format!("http://{addr}/"), "width": 800, "height": 600})).await.unwrap();
    assert_eq!(png_size(&shown(&out)), (800, 600));
    let path = dir.join(meta(&out, "path").as_str().unwrap());
    assert!(path.starts_with(dir.join("browser-output")), "{}", path.display());
    assert_eq!(png_size(&std::fs::read(&path).unwrap()), (800, 600));
    assert!(
        out.text_content().contains("800x600") && out.text_content().contains("browser-output/"),
        "{}",
        out.text_content()
    );
    assert_eq!(meta(&out, "loaded"), json!(true));

    // A whole tall page: the file at full size, the copy shown scaled within the budget.
    let out = capture
        .execute(&ctx, json!({"url": format!("http://{addr}/tall"), "full_page": true, "width": 1000, "height": 700, "delay_ms": 50}))
        .await
        .unwrap();
    let full = std::fs::read(dir.join(meta(&out, "path").as_str().unwrap())).unwrap();
    let (fw, fh) = png_size(&full);
    assert!(fw == 1000 && fh >= 5000, "{fw}x{fh}");
    let (sw, sh) = png_size(&shown(&out));
    assert!(sh <= 2000 && u64::from(sw) * u64::from(sh) <= 1_200_000 && sh < fh, "{sw}x{sh}");
    assert!(out.text_content().contains(&format!("scaled to {sw}x{sh}")), "{}", out.text_content());

    // Dialogs a page opens are dismissed, not waited on.
    let out = capture
        .execute(&ctx, json!({"url": format!("http://{addr}/alert"), "width": 400, "height": 300}))
        .await
        .unwrap();
    assert_eq!(png_size(&shown(&out)), (400, 300));

    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_and_non_web_urls_are_refused_and_nothing_connects() {
    let (_tmp, dir) = support::tempdir();
    let (blocked, seen) = support::counting_listener().await;
    let browsers = support::browsers(&dir, &[]);
    let capture = tool(&setup(&browsers), "capture_screenshot");
    let ctx = CallContext::new(&dir);

    let err = capture.execute(&ctx, json!({"url": format!("http://{blocked}/")})).await.unwrap_err().to_string();
    assert!(err.contains("private") || err.contains("refused") || err.contains("not opened"), "{err}");
    assert_eq!(support::count(&seen), 0, "the blocked listener saw a connection");
    for url in ["file:///etc/passwd", "javascript:alert(1)", "chrome://settings", "data:text/html,hi", "example.com"] {
        let err = capture.execute(&ctx, json!({"url": url})).await.unwrap_err().to_string();
        assert!(err.contains("http:// or https://"), "{url}: {err}");
    }
    assert!(!dir.join("browser-output").exists(), "nothing saved for refused calls");
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canvas_snapshot_is_a_png_of_the_sanitized_page() {
    let (_tmp, dir) = support::tempdir();
    let (blocked, seen) = support::counting_listener().await;
    let browsers = support::browsers(&dir, &[]);
    let setup = setup(&browsers);
    let canvas = tool(&setup, "canvas");
    let ctx = CallContext::new(&dir);
    // Content that would reach a listener if anything of it survived.
    let content = format!(
        "<h1>Chart</h1><svg width='200' height='100'><rect width='200' height='100' fill='#0a0'/></svg>\
         <img src='http://{blocked}/pixel.png'><p style=\"background-image:url(http://{blocked}/bg)\">x</p>"
    );
    canvas.execute(&ctx, json!({"action": "present", "content": content})).await.unwrap();
    let out = canvas.execute(&ctx, json!({"action": "snapshot", "width": 640, "height": 480})).await.unwrap();
    assert_eq!(png_size(&shown(&out)), (640, 480));
    assert_eq!(support::count(&seen), 0);
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}
