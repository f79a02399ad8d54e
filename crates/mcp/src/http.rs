//! Serving over Streamable HTTP at `/mcp`, behind a bearer token, Host/Origin allowlists and a
//! request size limit.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{CallHandler, Error, ExtraFeatures, HttpToken, McpServer};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How the HTTP transport guards itself.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The token every request must carry as `Authorization: Bearer <token>`. `None` only for
    /// the test-only server the MCP conformance suite drives, which cannot send headers
    /// (`toolgate-conformance serve`): [`serve_http`] refuses any address but loopback without
    /// a token. `toolgate serve` always has one.
    pub token: Option<HttpToken>,
    /// `Host` values (name or `name:port`) accepted, against DNS rebinding. Default: loopback
    /// names only (`localhost`, `127.0.0.1`, `::1`).
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s accepted (`http://localhost:*`, ...). Requests without `Origin` (every
    /// non-browser client) pass; a request with any other `Origin` is refused. Default: none.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted, in bytes (default 4 MiB).
    pub max_body_bytes: usize,
    /// JSON endpoints served under `/api/` beside `/mcp` (the approvals API), behind the same
    /// token, Host/Origin checks and size limit.
    pub api: Option<Arc<dyn ApiHandler>>,
    /// Server features served beside the handler's tools ([`ExtraFeatures`]). `None` (the
    /// default, and `toolgate serve`): the handler's tools only.
    pub extra: Option<Arc<dyn ExtraFeatures>>,
}

/// JSON endpoints under `/api/` (the `toolgate` crate serves its approvals API through this).
pub trait ApiHandler: Send + Sync + std::fmt::Debug {
    /// Answers `method path` with `body`: an HTTP status and a JSON body, or `None` when the
    /// path is not one of its endpoints (404).
    fn handle(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, serde_json::Value)>;
}

impl HttpConfig {
    /// Loopback hosts only, no browser origins, 4 MiB bodies.
    pub fn new(token: HttpToken) -> Self {
        HttpConfig {
            token: Some(token),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), "[::1]".into()],
            allowed_origins: Vec::new(),
            max_body_bytes: 4 * 1024 * 1024,
            api: None,
            extra: None,
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// Serves `handler` on `listener` until `shutdown` is cancelled, then calls
/// [`CallHandler::shutdown`].
///
/// Clients before 2026-07-28 get a session (`Mcp-Session-Id`) after `initialize`; 2026-07-28
/// requests are served without one, and closing a request's stream cancels its call.
pub async fn serve_http<H: CallHandler>(
    handler: Arc<H>,
    listener: TcpListener,
    config: HttpConfig,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    if config.token.is_none() && !listener.local_addr().map_err(|source| Error::Http { source })?.ip().is_loopback() {
        let refusal = "serving without a bearer token is allowed on loopback addresses only";
        return Err(Error::Http { source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, refusal) });
    }
    let server = match &config.extra {
        Some(extra) => McpServer::with_extra(Arc::clone(&handler), Arc::clone(extra)),
        None => McpServer::new(Arc::clone(&handler)),
    };
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_allowed_origins(config.allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(config.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), rmcp_config);
    let token = Arc::new(config.token.clone());
    let guard = Arc::new(config);
    let result = loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_transient(&e) => {
                    tracing::warn!("MCP HTTP accept failed: {e}");
                    continue;
                }
                Err(source) => break Err(Error::Http { source }),
            },
        };
        // Small JSON-RPC messages must not wait for Nagle's algorithm (40 ms per round trip).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY for {peer}: {e}");
        }
        let service = service.clone();
        let token = Arc::clone(&token);
        let guard = Arc::clone(&guard);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                let token = Arc::clone(&token);
                let guard = Arc::clone(&guard);
                async move { Ok::<_, Infallible>(route(&service, token.as_ref().as_ref(), &guard, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                result = conn => if let Err(e) = result {
                    tracing::debug!("MCP HTTP connection from {peer} ended: {e}");
                },
                () = shutdown.cancelled() => {}
            }
        });
    };
    handler.shutdown();
    result
}

async fn route<H: CallHandler>(
    service: &StreamableHttpService<McpServer<H>, LocalSessionManager>,
    token: Option<&HttpToken>,
    config: &HttpConfig,
    req: Request<Incoming>,
) -> Response<Body> {
    if let Some(token) = token
        && !token.admits(req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes()))
    {
        return plain(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token: send `Authorization: Bearer <token>`; the token is in \
             <workspace>/.toolgate/http-token",
        );
    }
    if let (Some(api), true) = (&config.api, req.uri().path().starts_with("/api/")) {
        return serve_api(api.as_ref(), config, req).await;
    }
    if req.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
    }
    service.handle(req).await
}

/// `/api/...`: the same Host and Origin allowlists as `/mcp` (rmcp checks those only for its
/// own endpoint), a size-limited body, JSON out.
async fn serve_api(api: &dyn ApiHandler, config: &HttpConfig, req: Request<Incoming>) -> Response<Body> {
    let host_ok = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).is_some_and(|host| {
        let name = host.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(host, |(n, _)| n);
        config.allowed_hosts.iter().any(|allowed| allowed == host || allowed == name)
    });
    if !host_ok {
        return plain(StatusCode::FORBIDDEN, "this Host is not allowed (DNS rebinding protection)");
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|o| config.allowed_origins.iter().any(|a| a == o));
        if !allowed {
            return plain(StatusCode::FORBIDDEN, "this Origin is not allowed");
        }
    }
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let body = match http_body_util::Limited::new(req.into_body(), config.max_body_bytes).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large"),
    };
    let Some((status, json)) = api.handle(&method, &path, &body) else {
        return plain(StatusCode::NOT_FOUND, "no such endpoint under /api/");
    };
    let mut response = Response::new(Full::new(Bytes::from(json.to_string())).boxed());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    }
    response
}

/// Accept errors that concern one connection (or a momentary lack of file descriptors), not
/// the listener.
fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock) || e.raw_os_error() == Some(24)
}
