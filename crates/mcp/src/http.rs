//! Serving over Streamable HTTP at `/mcp`, behind a bearer token, Host/Origin allowlists and a
//! request size limit.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::http_sessions::{ClientGone, Sessions, Watched};
use crate::{Authenticator, CallHandler, Error, ExtraFeatures, HttpToken, McpServer};

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
    /// Whole-request endpoints beside `/mcp` and `/api/` (webhooks, pages, live streams): the
    /// longest matching prefix serves the request.
    pub mounts: Vec<Mount>,
    /// Callers known one by one (a team gateway's API keys): when set, it decides who may
    /// reach `/mcp`, `/api/` and bearer mounts instead of [`HttpConfig::token`], and the
    /// [`Caller`] it returns names the user of every call the request makes.
    pub authenticator: Option<Arc<dyn Authenticator>>,
    /// The URL of this server's RFC 9728 protected-resource metadata, named in the
    /// `WWW-Authenticate` challenge of every 401 (`Bearer resource_metadata="..."`), so OAuth
    /// clients find the authorization server. `None`: a bare `Bearer` challenge.
    pub resource_metadata: Option<String>,
    /// How long a session (clients before 2026-07-28) lives without a request or a message
    /// for it before the server ends it: a client that left without `DELETE` leaves one behind
    /// (default [`SESSION_IDLE`]). A connection with no request in flight is closed after this
    /// or [`CONNECTION_IDLE`], whichever is shorter.
    pub session_idle: std::time::Duration,
    /// The most sessions kept at once; a new one beyond that ends the oldest (default
    /// [`MAX_SESSIONS`]).
    pub max_sessions: usize,
}

/// How long a session lives without activity by default: 5 minutes, as rmcp's own default.
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

/// The most sessions one server keeps by default.
pub const MAX_SESSIONS: usize = 1024;

/// How long a connection waits for its next request at most (a client that went away without
/// closing it, or one that never sends a whole request head).
pub const CONNECTION_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// The body of a response from an [`HttpRoute`]: whole or streamed (server-sent events).
pub type HttpBody = BoxBody<Bytes, Infallible>;

/// One request to an [`HttpRoute`], its body already read (within
/// [`HttpConfig::max_body_bytes`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct RouteRequest {
    /// `GET`, `POST`, ...
    pub method: http::Method,
    /// The path and query as sent.
    pub uri: http::Uri,
    /// The request's headers (a webhook's signature, a page's cookies).
    pub headers: http::HeaderMap,
    /// The raw body, byte for byte (what an HMAC is computed over).
    pub body: Bytes,
    /// The client's address.
    pub peer: std::net::SocketAddr,
}

/// A whole-request endpoint: a page, a webhook receiver, a stream of server-sent events.
pub trait HttpRoute: Send + Sync + std::fmt::Debug {
    /// Answers `req`, whose path is the mount's prefix or below it.
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, Response<HttpBody>>;
}

/// Who checks that a request to a [`Mount`] may be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteAuth {
    /// The server's bearer token, as for `/mcp`, and the Host and Origin allowlists.
    Bearer,
    /// The route itself (an HMAC-signed webhook, a capability URL, a page with its own sign-in
    /// and CSRF tokens): the server checks only the Host allowlist (against DNS rebinding); the
    /// Origin allowlist does not apply, since a page posts to its own origin.
    Own,
    /// As [`RouteAuth::Bearer`], and the caller must be an admin (a team gateway's admin key;
    /// with the single-user bearer token, its holder is): what `/api/` asks (`/metrics`).
    Admin,
}

/// An [`HttpRoute`] mounted at a path prefix.
#[derive(Debug, Clone)]
pub struct Mount {
    /// The path it serves: the prefix itself and everything below it (`/hooks` serves
    /// `/hooks` and `/hooks/NAME`, not `/hooksx`).
    pub prefix: String,
    /// Who authenticates the request.
    pub auth: RouteAuth,
    /// The endpoint.
    pub route: Arc<dyn HttpRoute>,
}

impl Mount {
    /// `route` at `prefix` (which starts with `/` and does not end with one).
    pub fn new(prefix: impl Into<String>, auth: RouteAuth, route: Arc<dyn HttpRoute>) -> Self {
        Mount { prefix: prefix.into(), auth, route }
    }

    fn serves(&self, path: &str) -> bool {
        // A page mounted at `/` serves what `/mcp` and `/api/` do not.
        if self.prefix == "/" {
            return path != MCP_PATH && !path.starts_with("/api/");
        }
        path.strip_prefix(self.prefix.trim_end_matches('/'))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

/// The mount that serves `path`: the longest matching prefix.
fn mount_for<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    mounts.iter().filter(|m| m.serves(path)).max_by_key(|m| m.prefix.len())
}

/// Building [`HttpRoute`] responses.
pub mod reply {
    use std::convert::Infallible;

    use bytes::Bytes;
    use futures::{Stream, StreamExt};
    use http::{HeaderValue, Response, StatusCode, header};
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::HttpBody;

    /// A response with `body` as `content_type`, and `nosniff`.
    pub fn bytes(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Response<HttpBody> {
        let mut response = Response::new(Full::new(body.into()).boxed());
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        response
    }

    /// Plain text.
    pub fn text(status: u16, body: impl Into<String>) -> Response<HttpBody> {
        bytes(status, "text/plain; charset=utf-8", body.into())
    }

    /// An HTML page. The caller escapes every value in it and adds its Content-Security-Policy.
    pub fn html(status: u16, body: impl Into<String>) -> Response<HttpBody> {
        bytes(status, "text/html; charset=utf-8", body.into())
    }

    /// JSON.
    pub fn json(status: u16, body: &serde_json::Value) -> Response<HttpBody> {
        bytes(status, "application/json", body.to_string())
    }

    /// A stream of server-sent events: each item is one event's data (`data:` lines are added,
    /// one per line of the item), sent as it comes, until the stream ends or the client leaves.
    pub fn sse<S>(events: S) -> Response<HttpBody>
    where
        S: Stream<Item = String> + Send + Sync + 'static,
    {
        let frames = events.map(|event| {
            let mut data = String::with_capacity(event.len() + 16);
            for line in event.split('\n') {
                data.push_str("data: ");
                data.push_str(line.trim_end_matches('\r'));
                data.push('\n');
            }
            data.push('\n');
            Ok::<_, Infallible>(http_body::Frame::data(Bytes::from(data)))
        });
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// JSON endpoints under `/api/` (the `toolgate` crate serves its approvals API through this).
pub trait ApiHandler: Send + Sync + std::fmt::Debug {
    /// Answers `method path` with `body`: an HTTP status and a JSON body, or `None` when the
    /// path is not one of its endpoints (404).
    fn handle(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, serde_json::Value)>;

    /// [`ApiHandler::handle`], knowing who sent the request when the server knows its callers
    /// one by one (a team gateway's keys): an approvals inbox records who decided.
    fn handle_as(
        &self,
        caller: Option<&crate::Caller>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Option<(u16, serde_json::Value)> {
        let _ = caller;
        self.handle(method, path, body)
    }
}

impl HttpConfig {
    /// Loopback hosts only, no browser origins, 4 MiB bodies.
    pub fn new(token: HttpToken) -> Self {
        HttpConfig { token: Some(token), ..HttpConfig::base() }
    }

    /// Callers known one by one: [`HttpConfig::new`]'s defaults with `authenticator` instead of
    /// a shared token.
    pub fn with_authenticator(authenticator: Arc<dyn Authenticator>) -> Self {
        HttpConfig { authenticator: Some(authenticator), ..HttpConfig::base() }
    }

    fn base() -> Self {
        HttpConfig {
            token: None,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), "[::1]".into()],
            allowed_origins: Vec::new(),
            max_body_bytes: 4 * 1024 * 1024,
            api: None,
            extra: None,
            mounts: Vec::new(),
            authenticator: None,
            resource_metadata: None,
            session_idle: SESSION_IDLE,
            max_sessions: MAX_SESSIONS,
        }
    }
}

type Body = HttpBody;

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
    if config.token.is_none()
        && config.authenticator.is_none()
        && !listener.local_addr().map_err(|source| Error::Http { source })?.ip().is_loopback()
    {
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
    let sessions = Arc::new(Sessions::new(config.session_idle, config.max_sessions));
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.manager(), rmcp_config);
    let connection_idle = config.session_idle.min(CONNECTION_IDLE);
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
        let sessions = Arc::clone(&sessions);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                let token = Arc::clone(&token);
                let guard = Arc::clone(&guard);
                let sessions = Arc::clone(&sessions);
                async move {
                    let site = Site { service: &service, sessions: &sessions, token: token.as_ref().as_ref() };
                    Ok::<_, Infallible>(route(site, &guard, peer, req).await)
                }
            });
            // Without a timer hyper waits for a request head forever: the connection of a client
            // that vanished would stay open as long as the server.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(connection_idle)
                .serve_connection(TokioIo::new(stream), svc);
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

/// What every request of one server is served with.
struct Site<'a, H: CallHandler> {
    service: &'a StreamableHttpService<McpServer<H>, LocalSessionManager>,
    sessions: &'a Arc<Sessions>,
    token: Option<&'a HttpToken>,
}

async fn route<H: CallHandler>(
    site: Site<'_, H>,
    config: &HttpConfig,
    peer: std::net::SocketAddr,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let mount = mount_for(&config.mounts, req.uri().path());
    if let Some(mount) = mount.filter(|m| m.auth == RouteAuth::Own) {
        return serve_mount(mount, config, peer, req).await;
    }
    if let Some(authenticator) = &config.authenticator {
        let authorization = req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match authenticator.authenticate(authorization, peer.ip()) {
            // `/api/` decides on everyone's pending approvals: admins only.
            Ok(caller) if !caller.admin && req.uri().path().starts_with("/api/") => {
                return plain(StatusCode::FORBIDDEN, "the approvals API needs an admin's key");
            }
            Ok(caller) if !caller.admin && mount.is_some_and(|m| m.auth == RouteAuth::Admin) => {
                return plain(StatusCode::FORBIDDEN, "this endpoint needs a gateway admin's key");
            }
            // Read where each call's context is made (`session::apply`).
            Ok(caller) => drop(req.extensions_mut().insert(caller)),
            Err(refusal) => return refuse(&refusal, config.resource_metadata.as_deref()),
        }
    } else if let Some(token) = site.token
        && !token.admits(req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes()))
    {
        return plain(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token: send `Authorization: Bearer <token>`; the token is in \
             <workspace>/.toolgate/http-token",
        );
    }
    if let Some(mount) = mount {
        if let Some(refused) = refuse_origin(config, &req) {
            return refused;
        }
        return serve_mount(mount, config, peer, req).await;
    }
    if let (Some(api), true) = (&config.api, req.uri().path().starts_with("/api/")) {
        return serve_api(api.as_ref(), config, req).await;
    }
    if req.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
    }
    let session = req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    // A call in a session learns when its client has gone (`http_sessions::ClientGone`); a
    // client that resumes its session's streams has not.
    let gone = (session.is_some() && req.method() == http::Method::POST).then(|| {
        let gone = ClientGone::default();
        req.extensions_mut().insert(gone.clone());
        gone
    });
    let resumes = req.method() == http::Method::GET && req.headers().contains_key("last-event-id");
    let response = site.service.handle(req).await;
    // Counted only when rmcp took it (a session it knows, an event id it can resume from).
    if resumes
        && response.status().is_success()
        && let Some(id) = &session
    {
        site.sessions.resumed(id);
    }
    // An `initialize` answered with a new session: counted against the cap.
    if session.is_none()
        && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())
    {
        site.sessions.opened(id).await;
    }
    let streamed =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    match (gone, session) {
        (Some(gone), Some(session)) if streamed => {
            let sessions = Arc::clone(site.sessions);
            response.map(|body| BodyExt::boxed(Watched::new(body, gone, sessions, session)))
        }
        _ => response,
    }
}

/// The header that names a session (clients before 2026-07-28).
const SESSION_HEADER: &str = "mcp-session-id";

/// A mounted route: the Host allowlist (the Origin one was checked for bearer routes), a
/// size-limited body, then the route.
async fn serve_mount(
    mount: &Mount,
    config: &HttpConfig,
    peer: std::net::SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    if let Some(refused) = refuse_host(config, &req) {
        return refused;
    }
    let (parts, body) = req.into_parts();
    let body = match http_body_util::Limited::new(body, config.max_body_bytes).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large"),
    };
    let request = RouteRequest { method: parts.method, uri: parts.uri, headers: parts.headers, body, peer };
    mount.route.serve(request).await
}

/// A request whose `Host` is not allowed (DNS rebinding protection).
fn refuse_host(config: &HttpConfig, req: &Request<Incoming>) -> Option<Response<Body>> {
    let host_ok = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).is_some_and(|host| {
        let name = host.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(host, |(n, _)| n);
        config.allowed_hosts.iter().any(|allowed| allowed == host || allowed == name)
    });
    (!host_ok).then(|| plain(StatusCode::FORBIDDEN, "this Host is not allowed (DNS rebinding protection)"))
}

/// A browser request from an `Origin` that is not allowed.
fn refuse_origin(config: &HttpConfig, req: &Request<Incoming>) -> Option<Response<Body>> {
    let origin = req.headers().get(header::ORIGIN)?;
    let allowed = origin.to_str().is_ok_and(|o| config.allowed_origins.iter().any(|a| a == o));
    (!allowed).then(|| plain(StatusCode::FORBIDDEN, "this Origin is not allowed"))
}

/// `/api/...`: the same Host and Origin allowlists as `/mcp` (rmcp checks those only for its
/// own endpoint), a size-limited body, JSON out.
async fn serve_api(api: &dyn ApiHandler, config: &HttpConfig, req: Request<Incoming>) -> Response<Body> {
    if let Some(refused) = refuse_host(config, &req).or_else(|| refuse_origin(config, &req)) {
        return refused;
    }
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let caller = req.extensions().get::<crate::Caller>().cloned();
    let body = match http_body_util::Limited::new(req.into_body(), config.max_body_bytes).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large"),
    };
    let Some((status, json)) = api.handle_as(caller.as_ref(), &method, &path, &body) else {
        return plain(StatusCode::NOT_FOUND, "no such endpoint under /api/");
    };
    let mut response = Response::new(Full::new(Bytes::from(json.to_string())).boxed());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

/// An authenticator's refusal, with the challenge a 401 needs.
fn refuse(refusal: &crate::Refusal, resource_metadata: Option<&str>) -> Response<Body> {
    let mut response = reply::text(refusal.status, refusal.message.clone());
    if refusal.status == 401 {
        let challenge = resource_metadata
            .and_then(|url| http::HeaderValue::from_str(&format!("Bearer resource_metadata=\"{url}\"")).ok())
            .unwrap_or(http::HeaderValue::from_static("Bearer"));
        response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    }
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
