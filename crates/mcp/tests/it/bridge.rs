#![allow(clippy::unwrap_used)]
//! The bridge's public API ([`Bridge`]) over Streamable HTTP against this crate's own server
//! (`serve_http`, in process, on a free port): tools registered from the listing, calls with
//! progress, a configured bearer header, a refused one, and reconnection after the server
//! restarts. Waits are bounded by [`HANG_GUARD`]; no assertion is about speed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, Progress, ProgressSink, Registry, ToolError, ToolOutput, ToolSpec,
};
use toolgate_mcp::bridge::{Bridge, BridgeOptions, BridgeTimings, McpConfig, ServerConfig, ServerState};
use toolgate_mcp::{CallHandler, HttpConfig, HttpToken};

const HANG_GUARD: Duration = Duration::from_secs(60);
const TOKEN: &str = "bridge-test-token";

/// A server with a read-only `echo`, an unannotated `count` that reports progress, and `boom`,
/// which fails.
#[derive(Debug)]
struct Tools;

#[toolgate_core::async_trait]
impl CallHandler for Tools {
    fn context(&self) -> CallContext {
        CallContext::new(std::env::temp_dir())
    }

    fn list(&self, _ctx: &CallContext) -> Vec<ToolSpec> {
        let object = json!({"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "integer"}}});
        vec![
            ToolSpec::new("echo", "Echo.", object.clone()).annotations(Annotations::PURE),
            ToolSpec::new("count", "Count to n, reporting progress.", object.clone()),
            ToolSpec::new("boom", "Fails.", object).annotations(Annotations::PURE),
        ]
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        match name {
            "echo" => Ok(ToolOutput::text(params["message"].as_str().unwrap_or_default())),
            "count" => {
                let n = params["n"].as_u64().unwrap_or(3);
                for i in 1..=n {
                    ctx.progress.report(i as f64, Some(n as f64), Some(format!("step {i}\u{1b}[31m")));
                }
                Ok(ToolOutput::text(format!("counted to {n}")))
            }
            "boom" => Err(ToolError::failed("it blew up")),
            _ => Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None }),
        }
    }
}

/// `serve_http` on `addr`, until the returned token is cancelled.
async fn serve(addr: SocketAddr) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let local = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let config = HttpConfig::new(HttpToken::fixed(TOKEN));
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            toolgate_mcp::serve_http(Arc::new(Tools), listener, config, shutdown).await.unwrap();
        }
    });
    (local, shutdown, task)
}

fn server(addr: SocketAddr, token: &str) -> ServerConfig {
    ServerConfig {
        url: Some(format!("http://{addr}/mcp")),
        headers: BTreeMap::from([("Authorization".into(), format!("Bearer {token}"))]),
        ..ServerConfig::default()
    }
}

fn timings() -> BridgeTimings {
    let mut t = BridgeTimings::default();
    t.health_interval = Duration::from_millis(200);
    t.ping_timeout = Duration::from_secs(5);
    t.connect_timeout = Duration::from_secs(20);
    t.backoff_initial = Duration::from_millis(50);
    t.backoff_max = Duration::from_millis(200);
    t.max_attempts = 50;
    t
}

fn start(servers: Vec<(&str, ServerConfig)>) -> (Bridge, Arc<Registry>) {
    let registry = Arc::new(Registry::new());
    let config = McpConfig { servers: servers.into_iter().map(|(n, s)| (n.to_owned(), s)).collect() };
    let options = BridgeOptions::new(std::env::temp_dir()).timings(timings());
    (Bridge::start(&config, Arc::clone(&registry), options), registry)
}

async fn call(registry: &Registry, name: &str, params: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
    let tool = registry.resolve(name).unwrap_or_else(|| panic!("`{name}` is not registered"));
    tokio::time::timeout(HANG_GUARD, tool.tool.execute(ctx, params)).await.expect("the call hung")
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(HANG_GUARD, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_register_and_calls_carry_progress_and_errors() {
    let (addr, _shutdown, _task) = serve("127.0.0.1:0".parse().unwrap()).await;
    let (bridge, registry) = start(vec![("own", server(addr, TOKEN)), ("refused", server(addr, "wrong"))]);
    assert!(bridge.wait_started(HANG_GUARD).await);
    let status: BTreeMap<String, ServerState> = bridge.status().into_iter().map(|s| (s.name, s.state)).collect();
    assert_eq!(status["own"], ServerState::Connected);
    let ServerState::Reconnecting { error, .. } = &status["refused"] else { panic!("{status:?}") };
    assert!(error.contains("HTTP 401") && error.contains("`headers`"), "{error}");

    let names: Vec<String> = registry.all().iter().map(|t| t.tool.spec().name.clone()).collect();
    assert_eq!(names, ["mcp__own__boom", "mcp__own__count", "mcp__own__echo"]);
    let echo = registry.resolve("mcp__own__echo").unwrap();
    assert_eq!(echo.tool.spec().group, "mcp:own");
    assert_eq!(echo.tool.safety(&json!({})).approval, ApprovalRequirement::Never);
    // The host, for policy's `domain:` rules.
    assert_eq!(echo.tool.safety(&json!({})).touches.hosts, ["127.0.0.1"]);
    // toolgate's own server marks tools without annotations destructive: approval.
    let count = registry.resolve("mcp__own__count").unwrap();
    assert_eq!(count.tool.safety(&json!({})).approval, ApprovalRequirement::UnlessAutoApproved);

    let ctx = CallContext::new(std::env::temp_dir());
    let out = call(&registry, "mcp__own__echo", json!({"message": "over http"}), &ctx).await.unwrap();
    assert_eq!(out.text_content(), "over http");

    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = {
        let seen = Arc::clone(&seen);
        ProgressSink::new(move |p| seen.lock().unwrap().push(p))
    };
    let ctx = ctx.with_progress(sink);
    let out = call(&registry, "mcp__own__count", json!({"n": 3}), &ctx).await.unwrap();
    assert_eq!(out.text_content(), "counted to 3");
    // rmcp handles notifications in tasks of their own: reports can race the result (on a busy
    // machine all of them can come after it), but what arrives is in increasing order, for this
    // call, cleaned.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while seen.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "no progress report arrived within 5 s of the result");
    assert!(seen.windows(2).all(|w| w[0].progress < w[1].progress), "{seen:?}");
    for p in &seen {
        assert!((1.0..=3.0).contains(&p.progress) && p.total == Some(3.0), "{seen:?}");
        assert_eq!(
            p.message.as_deref(),
            Some(format!("step {}[31m", p.progress).as_str()),
            "control characters dropped"
        );
    }

    let err = call(&registry, "mcp__own__boom", json!({}), &ctx).await.unwrap_err();
    assert_eq!(err.kind(), "external_service");
    assert!(err.to_string().contains("it blew up"), "{err}");

    // Unknown names and shutdown.
    assert_eq!(bridge.server_of("mcp__own__nothing").as_deref(), Some("own"));
    assert_eq!(bridge.server_of("mcp__ownx__echo"), None);
    assert!(bridge.unavailable("mcp__own__nothing").is_none(), "a connected server is not unavailable");
    assert!(bridge.unavailable("mcp__refused__x").unwrap().to_string().contains("HTTP 401"));
    bridge.shutdown();
    eventually("stopped", || bridge.status().iter().all(|s| s.state == ServerState::Stopped)).await;
    let err = call(&registry, "mcp__own__echo", json!({"message": "x"}), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("shutting down"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_http_server_is_reconnected() {
    let (addr, shutdown, task) = serve("127.0.0.1:0".parse().unwrap()).await;
    let (bridge, registry) = start(vec![("own", server(addr, TOKEN))]);
    assert!(bridge.wait_started(HANG_GUARD).await);
    let ctx = CallContext::new(std::env::temp_dir());
    assert!(call(&registry, "mcp__own__echo", json!({"message": "1"}), &ctx).await.is_ok());

    shutdown.cancel();
    task.await.unwrap();
    eventually("the loss noticed", || !matches!(bridge.status()[0].state, ServerState::Connected)).await;
    let err = call(&registry, "mcp__own__echo", json!({"message": "2"}), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("MCP server `own`"), "{err}");
    assert!(registry.resolve("mcp__own__echo").is_some(), "tools stay registered while the server is down");

    let (_same, _shutdown, _task) = serve(addr).await;
    eventually("reconnected", || bridge.status()[0].state == ServerState::Connected).await;
    let out = call(&registry, "mcp__own__echo", json!({"message": "3"}), &ctx).await.unwrap();
    assert_eq!(out.text_content(), "3");
}
