//! Whole-request routes beside `/mcp` (`HttpConfig::mounts`): who may reach them, which one
//! serves a path, bodies byte for byte, and server-sent events as they are sent. Raw HTTP/1.1
//! over a loopback socket, as any client would send it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_mcp::{CallHandler, HttpBody, HttpConfig, HttpRoute, HttpToken, Mount, RouteAuth, RouteRequest, reply};

#[derive(Debug)]
struct NoTools;

#[toolgate_core::async_trait]
impl CallHandler for NoTools {
    fn context(&self) -> CallContext {
        CallContext::new(std::env::temp_dir())
    }

    fn list(&self, _ctx: &CallContext) -> Vec<ToolSpec> {
        Vec::new()
    }

    async fn call(&self, _ctx: &CallContext, name: &str, _params: Value) -> Result<ToolOutput, ToolError> {
        Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None })
    }
}

/// Answers with its name, the method, the path and the body's length and first byte.
#[derive(Debug)]
struct Named(&'static str);

impl HttpRoute for Named {
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        let text = format!("{} {} {} {} bytes", self.0, req.method, req.uri.path(), req.body.len());
        Box::pin(async move { reply::text(200, text) })
    }
}

/// Three events, 50 ms apart.
#[derive(Debug)]
struct Ticks;

impl HttpRoute for Ticks {
    fn serve(&self, _req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        Box::pin(async move {
            let events = futures::stream::unfold(0, |n| async move {
                if n == 3 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some((format!("tick {n}\nsecond line"), n + 1))
            });
            reply::sse(events)
        })
    }
}

async fn server() -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = HttpConfig::new(HttpToken::fixed("test-token"));
    config.max_body_bytes = 1024;
    config.mounts = vec![
        Mount::new("/hooks", RouteAuth::Own, Arc::new(Named("hooks"))),
        Mount::new("/hooks/deep", RouteAuth::Own, Arc::new(Named("deep"))),
        Mount::new("/page", RouteAuth::Bearer, Arc::new(Named("page"))),
        Mount::new("/events", RouteAuth::Own, Arc::new(Ticks)),
    ];
    let shutdown = CancellationToken::new();
    tokio::spawn(toolgate_mcp::serve_http(Arc::new(NoTools), listener, config, shutdown.clone()));
    (addr, shutdown)
}

/// Sends `request` (with `Connection: close`) and returns the whole response.
async fn send(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn get(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}\r\n")
}

#[tokio::test]
async fn own_routes_need_no_token_and_bearer_routes_do() {
    let (addr, shutdown) = server().await;
    let hook = send(addr, &get("/hooks/deploy", "")).await;
    assert!(hook.starts_with("HTTP/1.1 200"), "{hook}");
    assert!(hook.contains("hooks GET /hooks/deploy 0 bytes"), "{hook}");

    let page = send(addr, &get("/page", "")).await;
    assert!(page.starts_with("HTTP/1.1 401"), "a bearer mount without the token: {page}");
    let page = send(addr, &get("/page/x", "Authorization: Bearer test-token\r\n")).await;
    assert!(page.contains("page GET /page/x"), "{page}");
    shutdown.cancel();
}

#[tokio::test]
async fn the_longest_prefix_serves_and_a_lookalike_path_is_not_served() {
    let (addr, shutdown) = server().await;
    assert!(send(addr, &get("/hooks/deep/a", "")).await.contains("deep GET /hooks/deep/a"));
    assert!(send(addr, &get("/hooks/deeper", "")).await.contains("hooks GET /hooks/deeper"));
    let lookalike = send(addr, &get("/hooksx", "")).await;
    assert!(lookalike.starts_with("HTTP/1.1 401"), "/hooksx is not /hooks: {lookalike}");
    shutdown.cancel();
}

#[tokio::test]
async fn host_is_checked_for_own_routes_origin_only_for_bearer_ones() {
    let (addr, shutdown) = server().await;
    let rebound = send(addr, "GET /hooks/a HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n").await;
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let own = send(addr, &get("/hooks/a", "Origin: https://evil.example\r\n")).await;
    assert!(own.starts_with("HTTP/1.1 200"), "an own-auth route judges origins itself: {own}");
    let bearer =
        send(addr, &get("/page", "Authorization: Bearer test-token\r\nOrigin: https://evil.example\r\n")).await;
    assert!(bearer.starts_with("HTTP/1.1 403"), "{bearer}");
    shutdown.cancel();
}

#[tokio::test]
async fn bodies_arrive_whole_and_are_limited() {
    let (addr, shutdown) = server().await;
    let body = "x".repeat(1000);
    let post = format!(
        "POST /hooks/a HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert!(send(addr, &post).await.contains("hooks POST /hooks/a 1000 bytes"));
    let body = "x".repeat(2000);
    let post = format!(
        "POST /hooks/a HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let refused = send(addr, &post).await;
    assert!(refused.starts_with("HTTP/1.1 413"), "{refused}");
    shutdown.cancel();
}

#[tokio::test]
async fn server_sent_events_arrive_one_data_line_per_line() {
    let (addr, shutdown) = server().await;
    let stream = send(addr, &get("/events", "")).await;
    assert!(stream.contains("content-type: text/event-stream"), "{stream}");
    for n in 0..3 {
        assert!(stream.contains(&format!("data: tick {n}\ndata: second line\n\n")), "{stream}");
    }
    shutdown.cancel();
}
