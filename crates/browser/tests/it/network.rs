//! Chromium's network namespace: where this machine allows one, Chromium has only loopback, and
//! its one way out is toolgate's proxy (listening inside that namespace).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::json;
use toolgate_browser::BrowserTool;
use toolgate_core::{CallContext, Identity, Tool};

use crate::support::{self, html};

/// The network namespace of process `pid` (device and inode of `/proc/PID/ns/net`).
fn net_ns(pid: &str) -> Option<(u64, u64)> {
    std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether a process in the namespace of `pid` can open a TCP connection to 127.0.0.1:`port`
/// (what a Chromium that ignored its proxy settings would try).
fn reaches_from(pid: u32, port: u16) -> bool {
    let status = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .args(["bash", "-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("nsenter (util-linux)");
    status.success()
}

fn ctx(dir: &Path) -> CallContext {
    CallContext::new(dir).with_identity(Identity { user: "local".into(), agent: "main".into(), session: "n".into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_has_no_way_out_but_the_proxy() {
    let (_tmp, dir) = support::tempdir();
    let addr =
        support::serve(HashMap::from([("/", html("<title>Home</title><h1>Loaded through the proxy</h1>"))])).await;
    let (listener, connections) = support::counting_listener().await;
    let browsers = support::browsers(&dir, &[addr]);
    let tool = BrowserTool::new(browsers.clone());
    let ctx = ctx(&dir);
    let started = tool.execute(&ctx, json!({"action": "start"})).await.expect("start").text_content();
    let namespaces_work = toolgate_sandbox::NetNamespace::new().is_ok();
    if !namespaces_work {
        // The fallback says so.
        assert!(started.contains("no network namespace on this machine"), "{started}");
        browsers.shutdown().await;
        return;
    }
    assert!(started.contains("network namespace of its own whose only way out is toolgate's proxy"), "{started}");
    // Pages still load, through the proxy.
    let opened =
        tool.execute(&ctx, json!({"action": "navigate", "url": format!("http://{addr}/")})).await.expect("navigate");
    assert!(opened.text_content().contains("Opened http://127.0.0.1"), "{}", opened.text_content());
    let snap = tool.execute(&ctx, json!({"action": "snapshot"})).await.expect("snapshot").text_content();
    assert!(snap.contains("Loaded through the proxy"), "{snap}");
    // Every browser process is in another network namespace than ours...
    let ours = net_ns("self").expect("our namespace");
    let processes = support::processes_under(&dir);
    assert!(!processes.is_empty(), "no browser process found");
    for (pid, cmdline) in &processes {
        if let Some(theirs) = net_ns(&pid.to_string()) {
            assert_ne!(theirs, ours, "{pid} ({cmdline}) shares toolgate's network namespace");
        }
    }
    // ...where the host's loopback listeners are out of reach: a direct connection, around the
    // proxy, is not possible, and the listener never sees one.
    let (pid, _) = &processes[0];
    assert!(reaches_from(std::process::id(), addr.port()), "control: from our namespace the page server is reachable");
    assert!(!reaches_from(*pid, listener.port()), "a process in Chromium's namespace reached a host port");
    assert!(!reaches_from(*pid, addr.port()), "a process in Chromium's namespace reached the page server directly");
    assert_eq!(support::count(&connections), 0);
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_load_timeout_bounds_a_page_that_never_loads() {
    let (_tmp, dir) = support::tempdir();
    // `/hang` is never answered.
    let addr = support::serve(HashMap::new()).await;
    let fetcher = toolgate_fetch::Fetcher::new(toolgate_fetch::FetchPolicy {
        allow_private: toolgate_fetch::AllowPrivate::parse(&[addr.to_string()]).expect("allow"),
        ..toolgate_fetch::FetchPolicy::default()
    })
    .expect("fetcher");
    let config = toolgate_browser::BrowserConfig::new(dir.join(".toolgate/browser"), fetcher)
        .load_timeout(std::time::Duration::from_millis(700));
    let browsers = toolgate_browser::Browsers::new(config);
    let session = browsers.session("a").await.expect("session");
    let nav = session.navigate(&format!("http://{addr}/hang")).await.expect("navigate");
    assert!(!nav.loaded, "{nav:?}");
    // The tool's default wait is the pool's too.
    let tool = BrowserTool::new(browsers.clone());
    let out = tool
        .execute(&ctx(&dir), json!({"action": "navigate", "url": format!("http://{addr}/hang2")}))
        .await
        .expect("navigate");
    assert!(out.text_content().contains("had not finished loading after 700 ms"), "{}", out.text_content());
    browsers.shutdown().await;
    support::no_processes_left(&dir).await;
}
