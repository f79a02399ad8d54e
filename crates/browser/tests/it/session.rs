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

/// A session's Chromium killed with `kill -9`: the pool notices at once (the DevTools pipe
/// closes) and drops the session's record from the shared store, so no node lists it or sends
/// calls to it; a call naming it hears that it ended and to start a new one (another user's
/// call, what an unknown id gets); the next session starts a new browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_browser_is_killed_has_ended_and_its_record_goes() {
    use std::sync::Arc;
    use toolgate_core::{CallContext, Tool, ToolError};
    use toolgate_store::{Local, LocalStore, Store};

    toolgate_tools::runtime::serve_as_node(toolgate_tools::runtime::ThisNode { name: "a".to_owned(), url: None });
    let (_tmp, dir) = support::tempdir();
    let store: Arc<dyn LocalStore> = Arc::new(Store::open(&dir.join(".toolgate/state.db")).expect("store"));
    let browsers = support::browsers(&dir, &[]);
    browsers.share_across_nodes(Arc::clone(&store));
    let id = browsers.session_for("k", "ann", &dir).await.expect("session").id().to_owned();
    assert!(store.local_owner(Local::BrowserSession, &id).unwrap().is_some(), "recorded while it runs");

    let chromium = support::processes_under(&dir);
    assert!(!chromium.is_empty(), "a browser runs");
    for (pid, _) in &chromium {
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    // Its record goes without any call (bounded wait: the pipe closes as the process dies).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.local_owner(Local::BrowserSession, &id).unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the dead session's record stays");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let tool = toolgate_browser::BrowserTool::new(browsers.clone());
    let call = |user: &str| {
        let mut ctx = CallContext::new(dir.clone());
        ctx.identity.user = user.to_owned();
        let params = serde_json::json!({"action": "snapshot", "session": id});
        let tool = &tool;
        async move { tool.execute(&ctx, params).await.expect_err("the session ended") }
    };
    let ended = call("ann").await.to_string();
    assert!(
        ended.contains(&format!("the browser session {id} on node `a` has ended")) && ended.contains("\"start\""),
        "{ended}"
    );
    assert!(matches!(call("bob").await, ToolError::NotFound { .. }), "bob learns nothing of ann's session");

    // A new session is a new browser.
    let again = browsers.session_for("k", "ann", &dir).await.expect("a new session");
    assert_ne!(again.id(), id);
    assert!(store.local_owner(Local::BrowserSession, again.id()).unwrap().is_some());
    drop(again);
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}
