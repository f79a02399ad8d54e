//! The `browser` tool, action by action, against real Chromium and loopback pages.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};
use toolgate_browser::{BrowserTool, Browsers};
use toolgate_core::{CallContext, Identity, Tool, ToolError};

use crate::support::{self, html, redirect};

struct Rig {
    tool: BrowserTool,
    browsers: Browsers,
    ctx: CallContext,
}

impl Rig {
    fn new(dir: &Path, allowed: &[SocketAddr]) -> Rig {
        let browsers = support::browsers(dir, allowed);
        Rig { tool: BrowserTool::new(browsers.clone()), browsers, ctx: ctx(dir, "alice") }
    }

    async fn call(&self, params: Value) -> Result<String, ToolError> {
        self.call_as(&self.ctx, params).await
    }

    async fn call_as(&self, ctx: &CallContext, params: Value) -> Result<String, ToolError> {
        self.tool.execute(ctx, params).await.map(|out| out.text_content())
    }

    async fn ok(&self, params: Value) -> String {
        match self.call(params.clone()).await {
            Ok(text) => text,
            Err(e) => panic!("{params} failed: {e}"),
        }
    }

    async fn fails(&self, params: Value) -> String {
        match self.call(params.clone()).await {
            Ok(text) => panic!("{params} should have failed, got: {text}"),
            Err(e) => e.to_string(),
        }
    }
}

fn ctx(dir: &Path, session: &str) -> CallContext {
    CallContext::new(dir).with_identity(Identity {
        user: "local".into(),
        agent: "main".into(),
        session: session.into(),
    })
}

/// The ref of the first snapshot line containing `needle`.
fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle} in:\n{snapshot}"));
    let start = line.find("[ref=").unwrap_or_else(|| panic!("no ref in {line}")) + 5;
    line[start..].split(']').next().unwrap_or_default().to_owned()
}

const FORM: &str = r#"<title>Form</title>
<form action="/done" method="get">
  <label>Name <input name="name"></label>
  <label><input type="checkbox" name="agree"> I agree</label>
  <label>Colour <select name="colour"><option value="r">Red</option><option value="g">Green</option></select></label>
  <button type="submit">Send it</button>
</form>"#;

const DONE: &str = r#"<title>Done</title><p id="out"></p>
<script>document.getElementById('out').textContent = 'Got ' + decodeURIComponent(location.search);</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_and_submitted_by_refs_and_refs_stay_stable() {
    let (_tmp, dir) = support::tempdir();
    let addr = support::serve(HashMap::from([("/", html(FORM)), ("/done", html(DONE))])).await;
    let rig = Rig::new(&dir, &[addr]);
    let opened = rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    assert!(opened.contains("Opened http://127.0.0.1"), "{opened}");
    let first = rig.ok(json!({"action": "snapshot"})).await;
    let second = rig.ok(json!({"action": "snapshot"})).await;
    assert_eq!(first, second, "the same page gives the same refs");
    let name = ref_of(&first, "textbox \"Name\"");
    let agree = ref_of(&first, "checkbox \"I agree\"");
    let colour = ref_of(&first, "combobox \"Colour\"");
    let send = ref_of(&first, "button \"Send it\"");
    let filled = rig
        .ok(json!({"action": "fill_form", "fields": [
            {"ref": name, "value": "Ada \"quoted\""},
            {"ref": agree, "value": "true"},
            {"ref": colour, "value": "Green"}
        ]}))
        .await;
    assert!(filled.contains("Filled 3 field(s)"), "{filled}");
    let after = rig.ok(json!({"action": "snapshot"})).await;
    assert_eq!(ref_of(&after, "button \"Send it\""), send, "refs survive a change of the page");
    assert!(after.contains("[checked]"), "{after}");
    let clicked = rig.ok(json!({"action": "click", "ref": send})).await;
    assert!(clicked.contains("/done?"), "{clicked}");
    let waited = rig.ok(json!({"action": "wait_for", "text": "Got ?name=", "timeout_ms": 10000})).await;
    assert!(waited.contains("holds"), "{waited}");
    let done = rig.ok(json!({"action": "snapshot"})).await;
    assert!(done.contains(r#"Got ?name=Ada+\"quoted\"&agree=on&colour=g"#), "{done}");
    // The form's refs belonged to the old document.
    let stale = rig.fails(json!({"action": "click", "ref": send})).await;
    assert!(stale.contains("stale"), "{stale}");
    let unknown = rig.fails(json!({"action": "click", "ref": "e99999"})).await;
    assert!(unknown.contains("not from a snapshot"), "{unknown}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_rendered_content_is_in_the_snapshot_and_find_sees_it() {
    let (_tmp, dir) = support::tempdir();
    let page = r#"<title>JS</title><div id="app">Loading…</div>
<script>setTimeout(() => { document.getElementById('app').innerHTML = '<h2>Rendered by script 42</h2><a href="/x">a link</a>'; }, 300);</script>"#;
    let addr = support::serve(HashMap::from([("/", html(page))])).await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    rig.ok(json!({"action": "wait_for", "text": "Rendered by script", "timeout_ms": 10000})).await;
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    assert!(snap.contains("- heading \"Rendered by script 42\" [level=2]"), "{snap}");
    let found = rig.ok(json!({"action": "find", "text": "script \\d+", "regex": true})).await;
    assert!(found.contains("1 match") && found.contains("Rendered by script 42"), "{found}");
    let sub = rig.ok(json!({"action": "snapshot", "ref": ref_of(&snap, "link \"a link\"")})).await;
    assert!(sub.contains("link \"a link\"") && !sub.contains("heading"), "{sub}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_reaches_no_blocked_address_by_fetch_image_websocket_or_redirect() {
    let (_tmp, dir) = support::tempdir();
    let (blocked, seen) = support::counting_listener().await;
    let page = format!(
        r#"<title>Attack</title><p id="s">started</p><img src="http://{blocked}/img.png">
<script>
  fetch('http://{blocked}/fetch').catch(() => {{}});
  try {{ new WebSocket('ws://{blocked}/ws'); }} catch (e) {{}}
  const x = new XMLHttpRequest(); x.open('GET', 'http://{blocked}/xhr'); x.send();
  setTimeout(() => {{ document.getElementById('s').textContent = 'attempted'; }}, 500);
</script>"#
    );
    let to_blocked = format!("http://{blocked}/redirected");
    let addr = support::serve(HashMap::from([("/", html(&page)), ("/redir", redirect(&to_blocked))])).await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    rig.ok(json!({"action": "wait_for", "text": "attempted", "timeout_ms": 10000})).await;
    let redirected = rig.fails(json!({"action": "navigate", "url": format!("http://{addr}/redir")})).await;
    assert!(redirected.contains("toolgate's proxy refused it"), "{redirected}");
    let direct = rig.fails(json!({"action": "navigate", "url": format!("http://{blocked}/")})).await;
    assert!(direct.contains("proxy refused it") && direct.contains("loopback"), "{direct}");
    // Names that point home are refused by the proxy too (it resolves, Chromium does not).
    let local = rig.fails(json!({"action": "navigate", "url": format!("http://localhost:{}/", blocked.port())})).await;
    assert!(local.contains("was not opened"), "{local}");
    assert_eq!(support::count(&seen), 0, "the blocked listener was reached");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_and_browser_schemes_are_refused() {
    let (_tmp, dir) = support::tempdir();
    let page =
        r#"<title>Links</title><a href="file:///etc/passwd">passwd</a> <a href="chrome://settings">settings</a>"#;
    let addr = support::serve(HashMap::from([("/", html(page))])).await;
    let rig = Rig::new(&dir, &[addr]);
    for url in [
        "file:///etc/passwd",
        "chrome://settings",
        "javascript:alert(1)",
        "view-source:http://example.com",
        "devtools://devtools/bundled/inspector.html",
        "FILE:///etc/hosts",
    ] {
        let refused = rig.fails(json!({"action": "navigate", "url": url})).await;
        assert!(refused.contains("are refused"), "{url}: {refused}");
        let refused = rig.fails(json!({"action": "open", "url": url})).await;
        assert!(refused.contains("are refused"), "{url}: {refused}");
    }
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    rig.ok(json!({"action": "click", "ref": ref_of(&snap, "link \"passwd\"")})).await;
    let after = rig.ok(json!({"action": "snapshot"})).await;
    assert!(after.starts_with(&format!("Page: http://{addr}/")), "a click did not leave for file: {after}");
    assert!(!after.contains("root:"), "{after}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_share_no_cookies() {
    let (_tmp, dir) = support::tempdir();
    let page = r#"<title>Cookies</title><p id="c"></p><script>
  if (location.search === '?set') document.cookie = 'secret=alice-only; path=/';
  document.getElementById('c').textContent = 'cookies:[' + document.cookie + ']';
</script>"#;
    let addr = support::serve(HashMap::from([("/", html(page))])).await;
    let rig = Rig::new(&dir, &[addr]);
    let bob = ctx(&dir, "bob");
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/?set")})).await;
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let alice = rig.ok(json!({"action": "find", "text": "cookies:"})).await;
    assert!(alice.contains("cookies:[secret=alice-only]"), "{alice}");
    rig.call_as(&bob, json!({"action": "navigate", "url": format!("http://{addr}/")})).await.expect("bob");
    let bobs = rig.call_as(&bob, json!({"action": "find", "text": "cookies:"})).await.expect("bob");
    assert!(bobs.contains("cookies:[]"), "{bobs}");
    // Stopping a session forgets its cookies.
    rig.ok(json!({"action": "stop"})).await;
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let fresh = rig.ok(json!({"action": "find", "text": "cookies:"})).await;
    assert!(fresh.contains("cookies:[]"), "{fresh}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_are_reported_and_answered() {
    let (_tmp, dir) = support::tempdir();
    let page = r#"<title>Dialogs</title><button onclick="document.getElementById('r').textContent = 'answer:' + prompt('Your name?')">Ask</button><p id="r"></p>"#;
    let addr = support::serve(HashMap::from([("/", html(page))])).await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    let clicked = rig.ok(json!({"action": "click", "ref": ref_of(&snap, "button \"Ask\"")})).await;
    assert!(clicked.contains("A prompt dialog is open: \"Your name?\""), "{clicked}");
    let blocked = rig.fails(json!({"action": "snapshot"})).await;
    assert!(blocked.contains("dialog is open"), "{blocked}");
    let answered = rig.ok(json!({"action": "dialog", "accept": true, "prompt_text": "Grace"})).await;
    assert!(answered.contains("Accepted the prompt"), "{answered}");
    let found = rig.ok(json!({"action": "find", "text": "answer:"})).await;
    assert!(found.contains("answer:Grace"), "{found}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_never_loads_and_one_that_opens_100_tabs_are_bounded() {
    let (_tmp, dir) = support::tempdir();
    let popups = r#"<title>Popups</title><button onclick="for (let i = 0; i < 100; i++) window.open('/x' + i)">Open</button>
<script>for (let i = 0; i < 100; i++) window.open('/y' + i);</script>"#;
    let addr = support::serve(HashMap::from([("/", html(popups)), ("/x0", html("x"))])).await;
    let rig = Rig::new(&dir, &[addr]);
    // `/hang` is never answered.
    let hung = rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/hang"), "timeout_ms": 1000})).await;
    assert!(hung.contains("had not finished loading after 1000 ms"), "{hung}");
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    rig.ok(json!({"action": "click", "ref": ref_of(&snap, "button \"Open\"")})).await;
    let tabs = rig.ok(json!({"action": "tabs"})).await;
    let count: usize = tabs.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!((1..=20).contains(&count), "{tabs}");
    // The model cannot pass the cap either.
    let mut refused = None;
    for _ in 0..25 {
        if let Err(e) = rig.call(json!({"action": "open", "url": "about:blank"})).await {
            refused = Some(e.to_string());
            break;
        }
    }
    assert!(refused.is_some_and(|e| e.contains("the most allowed")), "opening past the cap was not refused");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_are_pngs_of_the_asked_size_and_saved_in_the_workspace() {
    let (_tmp, dir) = support::tempdir();
    let addr = support::serve(HashMap::from([(
        "/",
        html("<title>S</title><h1 style='width:300px;height:120px;background:red'>Box</h1>"),
    )]))
    .await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let out = rig
        .tool
        .execute(&rig.ctx, json!({"action": "screenshot", "width": 640, "height": 480}))
        .await
        .expect("screenshot");
    let path = out.meta.as_ref().and_then(|m| m["path"].as_str()).expect("path").to_owned();
    let png = std::fs::read(dir.join(&path)).expect("saved");
    assert_eq!(crate::session::png_size(&png), (640, 480));
    assert!(
        out.content
            .iter()
            .any(|c| matches!(c, toolgate_core::Content::Image { mime_type, .. } if mime_type == "image/png"))
    );
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    let element = rig
        .tool
        .execute(&rig.ctx, json!({"action": "screenshot", "ref": ref_of(&snap, "heading \"Box\"")}))
        .await
        .expect("element screenshot");
    let path = element.meta.as_ref().and_then(|m| m["path"].as_str()).expect("path").to_owned();
    assert_eq!(crate::session::png_size(&std::fs::read(dir.join(path)).expect("saved")), (300, 120));
    let bad = rig.fails(json!({"action": "screenshot", "width": 640})).await;
    assert!(bad.contains("both"), "{bad}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_over_budget_is_saved_and_summarized() {
    let (_tmp, dir) = support::tempdir();
    let items: String = (0..2000).map(|i| format!("<li><a href='/p{i}'>Item number {i}</a></li>")).collect();
    let addr = support::serve(HashMap::from([("/", html(&format!("<title>Big</title><ul>{items}</ul>")))])).await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    let snap = rig.ok(json!({"action": "snapshot", "max_chars": 2000})).await;
    assert!(snap.chars().count() < 2600, "{} chars", snap.chars().count());
    let path = snap.split("saved to ").nth(1).and_then(|s| s.split(' ').next()).expect("a path");
    let whole = std::fs::read_to_string(dir.join(path)).expect("saved snapshot");
    assert!(whole.contains("Item number 1999"));
    let shallow = rig.ok(json!({"action": "snapshot", "depth": 0})).await;
    assert!(!shallow.contains("Item number"), "{shallow}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iframes_are_in_the_snapshot_and_their_refs_work() {
    let (_tmp, dir) = support::tempdir();
    let outer = r#"<title>Outer</title><h1>Outside</h1><iframe src="/inner" width="400" height="200"></iframe>"#;
    let inner = r#"<title>Inner</title><button onclick="this.textContent = 'Pressed inside'">Inside button</button>"#;
    let addr = support::serve(HashMap::from([("/", html(outer)), ("/inner", html(inner))])).await;
    let rig = Rig::new(&dir, &[addr]);
    rig.ok(json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    rig.ok(json!({"action": "wait_for", "text": "Inside button", "timeout_ms": 10000})).await;
    let snap = rig.ok(json!({"action": "snapshot"})).await;
    let iframe_line = snap.lines().position(|l| l.contains("Iframe")).unwrap_or_else(|| panic!("{snap}"));
    let button_line = snap.lines().position(|l| l.contains("Inside button")).unwrap_or_else(|| panic!("{snap}"));
    assert!(button_line > iframe_line, "the frame's content goes under its iframe: {snap}");
    rig.ok(json!({"action": "click", "ref": ref_of(&snap, "button \"Inside button\"")})).await;
    let after = rig.ok(json!({"action": "snapshot"})).await;
    assert!(after.contains("button \"Pressed inside\""), "{after}");
    rig.browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}
