//! Opening one connection to a bridged server: a child process over stdio, or Streamable HTTP
//! (legacy HTTP+SSE through [`super::sse`]), then the MCP handshake.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use rmcp::service::{ClientInitializeError, Peer, QuitReason, RunningService, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpClientTransportConfig};
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolgate_fetch::proxy::{self, ProxyLog};
use toolgate_sandbox::{CommandSpec, RunningProcess, Sandbox};

use super::client::BridgeClient;
use super::link::{Containment, ServerLink, key_fingerprint, sign_in_message};
use super::mapping::clean_text;
use super::oauth::{OAuthError, SecretVault, authorized_client, key_vault_key, login_required_message};
use super::profile::{self, PROXY_PORT};
use super::sse::{SseClientTransport, SseError, SseOptions};
use super::{HttpTransport, expand_env};

/// How many of a child's last stderr lines a failed handshake quotes in the log.
const STDERR_TAIL_LINES: usize = 8;
/// Longest stderr line logged; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 1000;
/// Stderr bytes logged per connection; after that the child's stderr is read and dropped, so a
/// chatty or hostile server cannot flood the log.
const STDERR_LOG_BUDGET: usize = 256 * 1024;
/// How long a stopping stdio server gets to exit after its stdin closes, before its process
/// group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The variables that announce a proxy: curl, Python (urllib, requests, httpx), uv and pip use
/// the first four, npm its own two.
const PROXY_VARIABLES: [&str; 7] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "npm_config_proxy",
    "npm_config_https_proxy",
];

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The server's configuration cannot be used as it is.
    #[error("{0}")]
    Config(String),
    /// The stdio server's program could not be started.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server refused or broke off the MCP handshake.
    #[error("the MCP handshake failed: {detail}")]
    Handshake {
        /// rmcp's account of it, which may quote the server (cleaned and capped).
        detail: String,
    },
    /// The server wants an OAuth token toolgate does not have.
    #[error("the server requires authorization")]
    Unauthorized,
    /// No answer within the connect timeout.
    #[error("no answer to the MCP handshake within {} s", .0.as_secs())]
    Timeout(Duration),
    /// The legacy SSE stream could not be opened.
    #[error(transparent)]
    Sse(#[from] SseError),
    /// The stored OAuth credentials could not be used.
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// A server that takes each user's own key (`user_key_header`), and the user has none
    /// stored (or one a header cannot carry).
    #[error("the user has no key stored for the server")]
    NoUserKey,
    /// The user's stored key could not be read (the vault's words, never the key).
    #[error("the stored key could not be read: {0}")]
    KeyUnreadable(String),
}

impl ConnectError {
    /// Whether retrying cannot help: the configuration itself is wrong.
    pub(crate) fn is_permanent(&self) -> bool {
        matches!(self, ConnectError::Config(_))
    }

    /// What a model may read: the kind of failure in toolgate's own words, without the
    /// server's text (that goes to the log only).
    pub(crate) fn summary(&self, link: &ServerLink) -> String {
        let (server, gateway_gate) = (link.name.as_str(), link.gateway_gate);
        let user = link.signed_in_user.as_ref().map(|(user, _)| user.as_str());
        match self {
            // A per-user server in a team gateway: the user signs in (or stores their key),
            // nobody else's credential helps.
            ConnectError::Unauthorized
            | ConnectError::OAuth(OAuthError::LoginRequired { .. })
            | ConnectError::NoUserKey
                if let Some(user) = user =>
            {
                sign_in_message(server, user, link.by_key())
            }
            ConnectError::KeyUnreadable(_) => {
                "your stored key for it could not be read (details in toolgate's log); store it again".to_owned()
            }
            // The gateway's own gate, whose callers are many users: no one's token is used.
            ConnectError::Unauthorized if gateway_gate => format!(
                "the server requires authorization (HTTP 401), and in this gateway each user signs in to it for \
                 themself, which needs `[gateway] workspaces` (each user's connections are made by the user's own \
                 gate); set `workspaces`, or `shared = true` in [mcp.servers.{server}] for one sign-in that serves \
                 every user"
            ),
            ConnectError::Handshake { .. } => {
                "the MCP handshake failed (the server's messages are in toolgate's log)".to_owned()
            }
            ConnectError::Unauthorized => {
                format!(
                    "the server requires authorization (HTTP 401); run `toolgate mcp login {server}` to sign in, or check the credentials in its `headers`"
                )
            }
            ConnectError::Sse(_) => "the legacy SSE stream could not be opened (details in toolgate's log)".to_owned(),
            ConnectError::OAuth(e @ OAuthError::LoginRequired { .. }) => e.to_string(),
            ConnectError::OAuth(_) => "its OAuth sign-in could not be used (details in toolgate's log)".to_owned(),
            other => other.to_string(),
        }
    }
}

/// An open, initialized connection to a server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    /// Stops rmcp's service loop (which closes the transport).
    cancel: Option<RunningServiceCancellationToken>,
    /// rmcp's service loop; finishes when the transport closes or is cancelled (`None` once
    /// it has).
    service: Option<JoinHandle<Result<QuitReason, tokio::task::JoinError>>>,
    /// The stdio server's process group, killed when the connection goes.
    child: Option<ChildGuard>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("peer", &self.peer).field("child", &self.child).finish_non_exhaustive()
    }
}

impl Connection {
    fn new(service: RunningService<RoleClient, BridgeClient>, child: Option<ChildGuard>) -> Self {
        let peer = service.peer().clone();
        let cancel = Some(service.cancellation_token());
        Connection { peer, cancel, service: Some(tokio::spawn(service.waiting())), child }
    }

    /// The peer calls go through.
    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// Resolves when the server closed the connection (or its process ended).
    pub(crate) async fn closed(&mut self) {
        match &mut self.service {
            Some(service) => {
                let _ = service.await;
                self.service = None;
            }
            None => std::future::pending().await,
        }
    }

    /// Closes the connection: the transport first (a stdio server sees its stdin close), then
    /// the process group after a short grace.
    pub(crate) async fn close(mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(service) = self.service.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), service).await;
        }
        if let Some(mut child) = self.child.take() {
            child.stop(EXIT_GRACE).await;
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        // `child`'s own Drop kills the process group.
    }
}

/// A stdio server's process tree, killed when the connection goes.
#[derive(Debug)]
enum ChildGuard {
    /// Unconfined (`sandbox.enabled = false`): the child leads its own process group, so
    /// everything it starts dies with it.
    Plain(Box<dyn ChildWrapper>),
    /// In its sandbox: its own process group and PID namespace. The sandbox (its private
    /// temporary folder) lives as long as the process; the process is dropped first.
    Sandboxed {
        process: Box<RunningProcess>,
        _sandbox: Arc<Sandbox>,
        /// Its proxy, when its network is proxied: stopped with it; what it refused or could
        /// not reach.
        proxy: Option<(CancellationToken, Arc<ProxyLog>)>,
    },
}

impl ChildGuard {
    /// Waits up to `grace` for the child to exit, then kills its process tree.
    async fn stop(&mut self, grace: Duration) {
        match self {
            ChildGuard::Plain(child) => {
                let _ = tokio::time::timeout(grace, child.wait()).await;
                let _ = child.start_kill();
            }
            ChildGuard::Sandboxed { process, .. } => {
                if tokio::time::timeout(grace, process.wait_exit()).await.is_err() {
                    let _ = process.kill_tree().await;
                }
            }
        }
    }

    /// Why a sandboxed child ended before its handshake, when the sandbox knows (a setup step
    /// or `execve` refused), or what its proxy could not do (a launcher's registry out of
    /// reach). The hosts are cleaned: they come from the server's requests.
    fn start_failure(&mut self) -> Option<String> {
        let ChildGuard::Sandboxed { process, proxy, .. } = self else { return None };
        if let Some(error) = process.start_error() {
            return Some(error.to_string());
        }
        let (_, log) = proxy.as_ref()?;
        let failed: Vec<String> = log
            .events()
            .into_iter()
            .filter_map(|e| e.refused.map(|why| clean_text(&format!("{}: {why}", e.target), 300)))
            .collect();
        (!failed.is_empty()).then(|| format!("toolgate's proxy, its only network, answered: {}", failed.join("; ")))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // SIGKILL to the whole group (harmless when it is gone already); tokio reaps the leader,
        // and a sandboxed process kills and reaps its tree when dropped.
        match self {
            ChildGuard::Plain(child) => {
                let _ = child.start_kill();
            }
            ChildGuard::Sandboxed { proxy: Some((stop, _)), .. } => stop.cancel(),
            ChildGuard::Sandboxed { .. } => {}
        }
    }
}

/// Where a connection's pieces come from besides the server's own configuration.
#[derive(Debug, Clone)]
pub(crate) struct ConnectEnv {
    /// stdio servers run here unless their `cwd` says otherwise.
    pub workspace: PathBuf,
    /// OAuth credentials of HTTP servers (`toolgate mcp login NAME` stores them).
    pub vault: Option<Arc<dyn SecretVault>>,
    /// How long the whole connection attempt may take.
    pub timeout: Duration,
}

/// Connects to `link`'s server and completes the MCP handshake within `env.timeout`.
pub(crate) async fn connect(link: &Arc<ServerLink>, env: &ConnectEnv) -> Result<Connection, ConnectError> {
    let handler = BridgeClient::new(Arc::clone(link));
    let config = &link.config;
    if let Some(command) = &config.command {
        return connect_stdio(link, command, &env.workspace, handler, env.timeout).await;
    }
    let Some(url) = config.url.as_deref() else {
        return Err(ConnectError::Config(format!("[mcp.servers.{}] has neither `command` nor `url`", link.name)));
    };
    let mut headers = headers(link)?;
    let keyed = user_key(link).await?;
    if let Some((name, value)) = &keyed {
        headers.insert(name.clone(), value.clone());
    }
    let client = http_client()?;
    // A stored OAuth sign-in, when there is one; without it a 401 says to log in.
    let authorized = match &env.vault {
        Some(vault) => tokio::time::timeout(env.timeout, authorized_client(&link.name, config, Arc::clone(vault)))
            .await
            .map_err(|_| ConnectError::Timeout(env.timeout))??,
        None => None,
    };
    link.with_token.store(authorized.is_some() || keyed.is_some(), std::sync::atomic::Ordering::Release);
    match config.http_transport() {
        HttpTransport::Http => {
            let transport = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            let serve = match authorized {
                Some(client) => handshake(&link.name, serve_streamable(client, transport, handler), env.timeout).await,
                None => handshake(&link.name, serve_streamable(client, transport, handler), env.timeout).await,
            };
            Ok(Connection::new(serve?, None))
        }
        HttpTransport::Sse => {
            let url = url::Url::parse(url)
                .map_err(|e| ConnectError::Config(format!("[mcp.servers.{}] `url`: {e}", link.name)))?;
            if let Some(authorized) = &authorized {
                let token = authorized.access_token().await.map_err(|_| ConnectError::Unauthorized)?;
                let mut bearer =
                    HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| ConnectError::Unauthorized)?;
                bearer.set_sensitive(true);
                headers.insert(http::header::AUTHORIZATION, bearer);
            }
            let options = SseOptions { endpoint_timeout: env.timeout, ..SseOptions::default() };
            let open = SseClientTransport::connect_with(url, client, headers.into_iter().collect(), options);
            let transport =
                tokio::time::timeout(env.timeout, open).await.map_err(|_| ConnectError::Timeout(env.timeout))??;
            let service = handshake(&link.name, handler.serve(transport), env.timeout).await?;
            Ok(Connection::new(service, None))
        }
    }
}

/// Serves the handshake over Streamable HTTP with any HTTP client rmcp accepts: a plain
/// `reqwest::Client`, or an OAuth-authorized client.
async fn serve_streamable<C>(
    client: C,
    config: StreamableHttpClientTransportConfig,
    handler: BridgeClient,
) -> Result<RunningService<RoleClient, BridgeClient>, ClientInitializeError>
where
    C: StreamableHttpClient + Send + Sync + 'static,
    C::Error: std::error::Error + Send + Sync + 'static,
{
    handler.serve(StreamableHttpClientTransport::with_client(client, config)).await
}

/// Runs a handshake future within `timeout`, turning rmcp's error into ours. `server` names the
/// server for the OAuth client's sign-in-again error.
async fn handshake(
    server: &str,
    serve: impl Future<Output = Result<RunningService<RoleClient, BridgeClient>, ClientInitializeError>>,
    timeout: Duration,
) -> Result<RunningService<RoleClient, BridgeClient>, ConnectError> {
    match tokio::time::timeout(timeout, serve).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) if e.is_authorization_required() => Err(ConnectError::Unauthorized),
        // The OAuth client's "sign in again" after its one refresh + retry.
        Ok(Err(e)) if e.to_string().contains(&login_required_message(server)) => Err(ConnectError::Unauthorized),
        Ok(Err(e)) => Err(ConnectError::Handshake { detail: clean_text(&e.to_string(), 2000) }),
        Err(_) => Err(ConnectError::Timeout(timeout)),
    }
}

async fn connect_stdio(
    link: &Arc<ServerLink>,
    command: &str,
    workspace: &Path,
    handler: BridgeClient,
    timeout: Duration,
) -> Result<Connection, ConnectError> {
    let config = &link.config;
    let cwd = match &config.cwd {
        Some(dir) => workspace.join(dir),
        None => workspace.to_path_buf(),
    };
    let program = resolve_program(command, &cwd);
    let spawn_error = |source| ConnectError::Spawn { command: command.to_owned(), source };
    if !program.is_absolute() || !is_executable(&program) {
        let what = if program.exists() { "not an executable file" } else { "no such program" };
        return Err(spawn_error(std::io::Error::new(std::io::ErrorKind::NotFound, what)));
    }
    let profile =
        profile::resolve(&link.name, link.sandbox_config(), workspace, &program, &cwd).map_err(ConnectError::Config)?;
    let (stdin, stdout, stderr, mut guard): (BoxedWrite, BoxedRead, Option<BoxedRead>, ChildGuard) = match profile {
        Some(profile) => {
            for warning in &profile.warnings {
                tracing::warn!(server = %link.name, "{warning}");
            }
            let sandbox = Sandbox::new(profile.policy.clone()).map_err(|e| {
                ConnectError::Config(format!(
                    "[mcp.servers.{}] cannot start in its sandbox: {e}; set `sandbox.enabled = false` for it to run \
                     unconfined",
                    link.name
                ))
            })?;
            let sandbox = Arc::new(sandbox);
            // Inside the sandbox the folders a `..` climbs through may be hidden: paths are
            // passed resolved (same file, same meaning on the host).
            let cwd = cwd.canonicalize().unwrap_or(cwd.clone());
            let args = config.args.iter().map(|arg| resolved_if_climbing(arg, &cwd));
            let mut spec = CommandSpec::new(resolved_if_climbing(&program.to_string_lossy(), &cwd), args, &cwd);
            spec.env = child_env(link)?;
            if profile.proxy.is_some() {
                // Announced the usual ways, unless its config says otherwise.
                let url = format!("http://127.0.0.1:{PROXY_PORT}");
                for key in PROXY_VARIABLES {
                    if !spec.env.iter().any(|(k, _)| k == key) {
                        spec.env.push((key.to_string(), url.clone()));
                    }
                }
            }
            spec.clear_env = true;
            let mut server =
                sandbox.spawn_server(spec).map_err(|e| spawn_error(std::io::Error::other(e.to_string())))?;
            let proxy = match (server.proxy_listener.take(), &profile.proxy) {
                (Some(listener), Some(proxied)) => {
                    if !proxied.registries.is_empty() {
                        tracing::info!(server = %link.name, "its launcher reaches {} through toolgate's proxy", proxied.registries.join(", "));
                    }
                    let listener = listener
                        .set_nonblocking(true)
                        .and_then(|()| tokio::net::TcpListener::from_std(listener))
                        .map_err(spawn_error)?;
                    let (stop, log) = (CancellationToken::new(), Arc::new(ProxyLog::default()));
                    let allow = Arc::new(proxied.allow.clone());
                    tokio::spawn(proxy::serve(listener, allow, Arc::clone(&log), link.name.clone(), stop.clone()));
                    Some((stop, log))
                }
                _ => None,
            };
            tracing::info!(server = %link.name, "{}", profile.summary());
            link.set_containment(Some(Containment { sandbox: Arc::clone(&sandbox), cwd: cwd.clone() }));
            let guard = ChildGuard::Sandboxed { process: Box::new(server.process), _sandbox: sandbox, proxy };
            (Box::pin(server.stdin), Box::pin(server.stdout), Some(Box::pin(server.stderr)), guard)
        }
        None => {
            tracing::warn!(
                server = %link.name,
                "runs unconfined: [mcp.servers.{}.sandbox] enabled = false",
                link.name
            );
            link.set_containment(None);
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&config.args)
                .env_clear()
                .envs(child_env(link)?)
                .current_dir(&cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            // The server and whatever it starts die with toolgate, however toolgate dies.
            toolgate_sandbox::contain(cmd.as_std_mut());
            let mut wrapped = CommandWrap::from(cmd);
            wrapped.wrap(ProcessGroup::leader());
            let mut child = wrapped.spawn().map_err(spawn_error)?;
            let stdin = child.stdin().take();
            let stdout = child.stdout().take();
            let stderr = child.stderr().take();
            let guard = ChildGuard::Plain(child);
            let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                return Err(spawn_error(std::io::Error::other("its stdin or stdout could not be connected")));
            };
            (Box::pin(stdin), Box::pin(stdout), stderr.map(|e| Box::pin(e) as BoxedRead), guard)
        }
    };
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(stderr) = stderr {
        tokio::spawn(drain_stderr(link.name.clone(), stderr, Arc::clone(&tail)));
    }
    match handshake(&link.name, handler.serve((stdout, stdin)), timeout).await {
        Ok(service) => Ok(Connection::new(service, Some(guard))),
        Err(e) => {
            // Let the child's last words reach the log before quoting them.
            guard.stop(Duration::from_millis(200)).await;
            if let Some(failure) = guard.start_failure() {
                return Err(spawn_error(std::io::Error::other(failure)));
            }
            let tail: Vec<String> = tail.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
            if !tail.is_empty() {
                tracing::warn!(server = %link.name, "its last stderr lines:\n  {}", tail.join("\n  "));
            }
            Err(e)
        }
    }
}

type BoxedRead = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;
type BoxedWrite = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// The child's whole environment: exactly `env`, with `${VAR}` taken from toolgate's own.
fn child_env(link: &ServerLink) -> Result<Vec<(String, String)>, ConnectError> {
    link.config
        .env
        .iter()
        .map(|(key, value)| {
            expand_env(value)
                .map(|v| (key.clone(), v))
                .map_err(|e| ConnectError::Config(format!("[mcp.servers.{}] env `{key}`: {e}", link.name)))
        })
        .collect()
}

/// The program to run: a path with a `/` is taken relative to the server's working directory;
/// a bare name is looked up in toolgate's own `PATH` (the child's `PATH` is only what `env`
/// gives it), so `command = "npx"` works without passing `PATH` on.
fn resolve_program(command: &str, cwd: &Path) -> PathBuf {
    if command.contains('/') {
        return cwd.join(command);
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).map(|dir| dir.join(command)).find(|candidate| is_executable(candidate))
    });
    found.unwrap_or_else(|| PathBuf::from(command))
}

/// `arg` resolved (canonical) when it is an existing path with a `..` component; as it is
/// otherwise. For a program, only its folder is resolved: a symlinked program keeps its name.
fn resolved_if_climbing(arg: &str, cwd: &Path) -> String {
    let path = Path::new(arg);
    if !path.components().any(|c| c == std::path::Component::ParentDir) {
        return arg.to_owned();
    }
    let full = cwd.join(path);
    let resolved = match (full.parent().and_then(|p| p.canonicalize().ok()), full.file_name()) {
        (Some(dir), Some(name)) if full.exists() => dir.join(name),
        _ => return arg.to_owned(),
    };
    resolved.to_string_lossy().into_owned()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Logs a child's stderr line by line (capped per line and per connection) and keeps the last
/// lines for a failed handshake's report. Reads to the end, so the child never blocks on a
/// full pipe.
async fn drain_stderr(server: String, mut stderr: BoxedRead, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut logged = 0usize;
    let mut line: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let emit = |line: &mut Vec<u8>, logged: &mut usize| {
        let text = clean_text(&String::from_utf8_lossy(line), MAX_STDERR_LINE);
        line.clear();
        if text.trim().is_empty() {
            return;
        }
        if *logged < STDERR_LOG_BUDGET {
            *logged += text.len();
            tracing::info!(server = %server, "MCP server stderr: {text}");
            if *logged >= STDERR_LOG_BUDGET {
                tracing::warn!(server = %server, "MCP server stderr: over {STDERR_LOG_BUDGET} bytes; not logging more of it");
            }
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&mut line, &mut logged);
            } else if line.len() < MAX_STDERR_LINE * 4 {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line, &mut logged);
    }
}

/// `headers`, with `${VAR}` expanded, as HTTP headers.
fn headers(link: &ServerLink) -> Result<HashMap<HeaderName, HeaderValue>, ConnectError> {
    let bad = |what: String| ConnectError::Config(format!("[mcp.servers.{}] headers: {what}", link.name));
    let mut out = HashMap::new();
    for (key, value) in &link.config.headers {
        let name = HeaderName::try_from(key.as_str()).map_err(|_| bad(format!("`{key}` is not a header name")))?;
        let expanded = expand_env(value).map_err(|e| bad(format!("`{key}`: {e}")))?;
        let mut value = HeaderValue::try_from(expanded)
            .map_err(|_| bad(format!("the value of `{key}` has characters a header cannot carry")))?;
        value.set_sensitive(true);
        out.insert(name, value);
    }
    Ok(out)
}

/// The header with the link's user's own key, for a server with `user_key_header` (`None`: the
/// server takes none). Read from the user's view of the gateway's vault, so no one else's key can
/// be read; the key is kept only in the (sensitive) header value, its fingerprint in the link.
async fn user_key(link: &ServerLink) -> Result<Option<(HeaderName, HeaderValue)>, ConnectError> {
    let Some(header) = &link.config.user_key_header else { return Ok(None) };
    let name = &link.name;
    let Some((_, vault)) = &link.signed_in_user else {
        return Err(ConnectError::Config(if link.gateway_gate {
            format!(
                "[mcp.servers.{name}] takes each user's own key (`user_key_header`), which needs `[gateway] \
                 workspaces` (each user's connections are made by the user's own gate)"
            )
        } else {
            format!(
                "[mcp.servers.{name}] `user_key_header` is for the users of a team gateway ([gateway] enabled, with \
                 `workspaces`); outside one, put the key in `headers`"
            )
        }));
    };
    let header_name = HeaderName::try_from(header.as_str())
        .map_err(|_| ConnectError::Config(format!("[mcp.servers.{name}] `user_key_header` is not a header name")))?;
    let (vault, record) = (Arc::clone(vault), key_vault_key(name));
    let stored = tokio::task::spawn_blocking(move || vault.get(&record))
        .await
        .map_err(|e| ConnectError::KeyUnreadable(format!("the vault task failed: {e}")))?
        .map_err(|e| ConnectError::KeyUnreadable(e.0))?;
    let Some(key) = stored else { return Err(ConnectError::NoUserKey) };
    let prefix = link.config.user_key_prefix.as_deref().unwrap_or_default().as_bytes();
    let mut value = HeaderValue::from_bytes(&[prefix, key.as_slice()].concat()).map_err(|_| ConnectError::NoUserKey)?;
    value.set_sensitive(true);
    *link.key_used.lock().unwrap_or_else(PoisonError::into_inner) = Some(key_fingerprint(&key));
    Ok(Some((header_name, value)))
}

/// The HTTP client of bridged servers: rustls with the ring provider (installed as the process
/// default once, so every reqwest client in the process, rmcp's OAuth ones included, finds it)
/// and the system's certificate store.
pub(crate) fn http_client() -> Result<reqwest::Client, ConnectError> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Another part of the process may have installed one first; that one is used then.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    // No redirects: one could carry the configured headers (and messages) to another host.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ConnectError::Config(format!("cannot set up the HTTP client: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_in_toolgates_path_or_the_working_directory() {
        let sh = resolve_program("sh", Path::new("/nowhere"));
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(resolve_program("./run.sh", Path::new("/srv")), Path::new("/srv/./run.sh"));
        assert_eq!(resolve_program("/bin/true", Path::new("/srv")), Path::new("/bin/true"));
        assert_eq!(resolve_program("surely-not-a-program-xyz", Path::new("/")), Path::new("surely-not-a-program-xyz"));
    }

    #[test]
    fn paths_that_climb_are_passed_resolved() {
        let root = std::env::temp_dir().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir_in(&root).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("script.js"), "").unwrap_or_else(|e| panic!("{e}"));
        let cwd = dir.path().join("a/b");
        assert_eq!(resolved_if_climbing("../../script.js", &cwd), dir.path().join("script.js").display().to_string());
        assert_eq!(resolved_if_climbing("stdio", &cwd), "stdio");
        assert_eq!(resolved_if_climbing("--flag=../x", &cwd), "--flag=../x");
        assert_eq!(resolved_if_climbing("../../missing", &cwd), "../../missing");
    }

    #[test]
    fn https_clients_build_with_the_ring_provider() {
        assert!(http_client().is_ok());
        assert!(http_client().is_ok(), "installing the provider twice is fine");
    }
}
