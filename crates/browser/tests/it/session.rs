//! `Browsers` and `BrowserSession`: navigation, screenshots, isolation, cleanup.

use std::collections::HashMap;

use crate::support::{self, html};

/// Width and height from a PNG's IHDR chunk.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let h = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    (w, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigates_and_takes_screenshots_of_the_asked_size() {
    let (_tmp, dir) = support::tempdir();
    let mut pages = HashMap::new();
    pages.insert("/", html("<title>Hi</title><h1>Hello</h1><div style='height:3000px'>tall</div>"));
    let addr = support::serve(pages).await;
    let browsers = support::browsers(&dir, &[addr]);
    let session = browsers.session("a").await.expect("session");
    let nav = session.navigate(&format!("http://{addr}/")).await.expect("navigate");
    assert!(nav.loaded && nav.url.starts_with("http://127.0.0.1"), "{nav:?}");
    let png = session.screenshot(false, Some((800, 600))).await.expect("screenshot");
    assert_eq!(png_size(&png), (800, 600));
    let full = session.screenshot(true, None).await.expect("full page");
    let (w, h) = png_size(&full);
    assert!(w == 800 && h >= 3000, "{w}x{h}");
    // The viewport stays as last set, and setting it back works (a size already set is not set again).
    assert_eq!(png_size(&session.screenshot(false, None).await.expect("viewport")), (800, 600));
    assert_eq!(png_size(&session.screenshot(false, Some((1280, 800))).await.expect("again")), (1280, 800));
    assert_eq!(png_size(&session.screenshot(false, Some((1280, 800))).await.expect("same")), (1280, 800));
    // A new tab's viewport is exactly the default, 1280x800.
    let other = browsers.session("b").await.expect("session b");
    assert_eq!(png_size(&other.screenshot(false, None).await.expect("default")), (1280, 800));
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_chromium_is_a_clear_error() {
    let (_tmp, dir) = support::tempdir();
    let fetcher = toolgate_fetch::Fetcher::new(toolgate_fetch::FetchPolicy::default()).expect("fetcher");
    let config = toolgate_browser::BrowserConfig::new(dir.join("p"), fetcher).chromium("no-such-chromium-here");
    let browsers = toolgate_browser::Browsers::new(config);
    let err = browsers.session("a").await.expect_err("no chromium");
    assert!(err.to_string().contains("is not installed") && err.to_string().contains("cargo xtask deps"), "{err}");
}
