//! Hostile and oversized pages against real Chromium: a page that allocates without end, a page
//! taller than a screenshot takes, and what Chromium itself reaches (nothing but the pages).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_browser::canvas::{Canvas, CanvasConfig};
use toolgate_browser::{BrowserTool, Setup};
use toolgate_core::{CallContext, Identity, Tool, ToolOutput};

use crate::session::png_size;
use crate::support::{self, html};

fn ctx(dir: &std::path::Path) -> CallContext {
    CallContext::new(dir).with_identity(Identity { user: "local".into(), agent: "main".into(), session: "bad".into() })
}

fn meta(out: &ToolOutput, key: &str) -> Value {
    out.meta.as_ref().map_or(Value::Null, |m| m[key].clone())
}

/// The process group of `pid` (field 5 of `/proc/PID/stat`, after the command's parentheses).
fn pgrp(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split_whitespace().nth(2)?.parse().ok()
}

/// The process groups of the browser processes under `dir`.
fn browser_groups(dir: &std::path::Path) -> HashSet<u32> {
    support::processes_under(dir).iter().filter_map(|(pid, _)| pgrp(*pid)).collect()
}

/// Resident memory (KiB) of every process in `groups`, and how many processes that is.
fn memory_kib(groups: &HashSet<u32>) -> (u64, usize) {
    let (mut total, mut count) = (0, 0);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if !pgrp(pid).is_some_and(|g| groups.contains(&g)) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        total += rss;
        count += 1;
    }
    (total, count)
}

/// Grows its memory by about 200 MB every 50 ms, kept reachable, in JavaScript arrays and in
/// typed arrays (outside the JavaScript heap), for as long as it lives.
const MEMORY_BOMB: &str = r#"<title>Hungry</title><p>allocating</p><script>
  const kept = [];
  setInterval(() => {
    for (let i = 0; i < 10; i++) {
      kept.push(new Array(1e6).fill(i));
      kept.push(new Uint8Array(12e6).fill(1));
    }
  }, 50);
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_allocates_without_end_is_bounded_and_leaves_nothing_behind() {
    let (_tmp, dir) = support::tempdir();
    let addr = support::serve(HashMap::from([
        ("/", html(MEMORY_BOMB)),
        ("/calm", html("<title>Calm</title><p>a quiet page</p>")),
    ]))
    .await;
    let browsers = support::browsers(&dir, &[addr]);
    let tool = BrowserTool::new(browsers.clone());
    let ctx = ctx(&dir);
    // The most memory the browser's process groups held at once, sampled while the page runs,
    // and every group seen (checked empty at the end).
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, dir) = (Arc::clone(&peak), Arc::clone(&done), dir.clone());
        tokio::task::spawn_blocking(move || {
            let mut seen = HashSet::new();
            while !done.load(Ordering::Relaxed) {
                let groups = browser_groups(&dir);
                peak.fetch_max(memory_kib(&groups).0, Ordering::Relaxed);
                seen.extend(groups);
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        })
    };
    let opened = tool.execute(&ctx, json!({"action": "navigate", "url": format!("http://{addr}/")})).await;
    assert!(opened.is_ok(), "{opened:?}");
    // Waits for text that never comes: the renderer reaches its data cap and crashes (or the
    // wait ends); either way the call ends with an error that says what happened.
    let waited = tool
        .execute(&ctx, json!({"action": "wait_for", "text": "never shown", "timeout_ms": 90_000}))
        .await
        .map(|out| out.text_content());
    let error = waited.expect_err("the wait cannot succeed").to_string();
    assert!(error.contains("crashed") && error.contains("memory"), "{error}");
    done.store(true, Ordering::Relaxed);
    let groups = sampler.await.expect("sampler");
    assert!(!groups.is_empty(), "no browser process was seen");
    let peak_mib = peak.load(Ordering::Relaxed) / 1024;
    eprintln!("the browser's processes held at most {peak_mib} MiB; the call ended with: {error}");
    // The renderer's cap is 2 GiB of data; with the browser's other processes (and shared
    // pages counted once per process) the group stays well under 4 GiB.
    assert!(peak_mib < 4096, "the browser's processes held {peak_mib} MiB");
    // The session goes on in a new tab.
    let calm = tool
        .execute(&ctx, json!({"action": "open", "url": format!("http://{addr}/calm")}))
        .await
        .expect("a new tab after the crash")
        .text_content();
    assert!(calm.contains("Opened"), "{calm}");
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while memory_kib(&groups).1 > 0 {
        assert!(tokio::time::Instant::now() < deadline, "processes of the browser's groups {groups:?} are left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_page_taller_than_16384_px_is_cut_there_and_the_result_says_so() {
    let (_tmp, dir) = support::tempdir();
    let tall = "<title>Tall</title><body style='margin:0'>\
                <div style='height:20000px;background:linear-gradient(#c00,#00c)'>top</div></body>";
    let addr = support::serve(HashMap::from([("/", html(tall))])).await;
    let browsers = support::browsers(&dir, &[addr]);
    let ctx = ctx(&dir);
    let tool = BrowserTool::new(browsers.clone());
    tool.execute(&ctx, json!({"action": "navigate", "url": format!("http://{addr}/")})).await.expect("navigate");
    let out = tool.execute(&ctx, json!({"action": "screenshot", "full_page": true})).await.expect("full page");
    let text = out.text_content();
    assert_eq!(meta(&out, "cut"), json!(true), "{text}");
    assert!(text.contains("The page is 1280x20000 pixels") && text.contains("top-left 1280x16384"), "{text}");
    let path = meta(&out, "path").as_str().expect("path").to_owned();
    assert_eq!(png_size(&std::fs::read(dir.join(path)).expect("saved")), (1280, 16384));
    // A page that fits is not cut, and says nothing about it.
    let viewport = tool.execute(&ctx, json!({"action": "screenshot"})).await.expect("viewport");
    assert_eq!(meta(&viewport, "cut"), json!(false));
    assert!(!viewport.text_content().contains("larger than"), "{}", viewport.text_content());

    // capture_screenshot: the same cut, said the same way; the shown copy fits its budget.
    let mut setup = Setup::default();
    setup.browsers = Some(browsers.clone());
    setup.canvas = Canvas::new(CanvasConfig::default());
    let capture = toolgate_browser::tools(&setup)
        .into_iter()
        .find(|t| t.spec().name == "capture_screenshot")
        .expect("capture_screenshot");
    let shot = capture
        .execute(&ctx, json!({"url": format!("http://{addr}/"), "full_page": true}))
        .await
        .expect("capture_screenshot");
    let text = shot.text_content();
    assert_eq!(meta(&shot, "cut"), json!(true), "{text}");
    assert_eq!((meta(&shot, "width"), meta(&shot, "height")), (json!(1280), json!(16384)), "{text}");
    assert!(text.contains("The page is 1280x20000 pixels"), "{text}");
    assert!(meta(&shot, "shown_height").as_u64().is_some_and(|h| h <= 2000), "{text}");
    let path = meta(&shot, "path").as_str().expect("path").to_owned();
    assert_eq!(png_size(&std::fs::read(dir.join(path)).expect("saved")), (1280, 16384));
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_browser_asks_its_proxy_for_nothing_but_the_pages() {
    let (_tmp, dir) = support::tempdir();
    let addr = support::serve(HashMap::from([("/", html("<title>Only</title><p>the one page</p>"))])).await;
    let browsers = support::browsers(&dir, &[addr]);
    let tool = BrowserTool::new(browsers.clone());
    let ctx = ctx(&dir);
    tool.execute(&ctx, json!({"action": "navigate", "url": format!("http://{addr}/")})).await.expect("navigate");
    tool.execute(&ctx, json!({"action": "snapshot"})).await.expect("snapshot");
    // Chromium's calls home came within a second of the start and again seconds later
    // (accounts.google.com, www.google.com, android.clients.google.com): give them the time.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let seen = browsers.connections().await;
    assert!(!seen.is_empty(), "the proxy saw not even the page");
    let others: Vec<_> = seen.iter().filter(|e| e.target != addr.to_string()).collect();
    assert!(others.is_empty(), "Chromium asked the proxy for other hosts: {others:?}");
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}
