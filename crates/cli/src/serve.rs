//! `toolgate serve [--http [ADDR]]`: the gate as an MCP server.
//!
//! Over stdio (the default) stdout carries nothing but protocol; every message for a person
//! goes to stderr. Over HTTP the endpoint is `http://ADDR/mcp`, loopback by default, behind a
//! bearer token generated on first start.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::approvals::{FirstAvailable, PendingApprovals};
use toolgate::family::Mounted;
use toolgate::mcp::{CallHandler, HttpConfig, HttpToken, McpApprover};

use super::GlobalArgs;

/// The address `--http` uses when given without one.
const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (default ADDR 127.0.0.1:8765).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_HTTP_ADDR)]
    http: Option<SocketAddr>,
    /// Another `Host` header value to accept over HTTP (loopback names are always accepted).
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    allow_hosts: Vec<String>,
    /// A browser `Origin` to accept over HTTP, e.g. `http://localhost:6274` (none by default).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origins: Vec<String>,
    /// The largest HTTP request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024, requires = "http")]
    max_body_bytes: usize,
    /// End an HTTP session (clients before 2026-07-28) after this many seconds without a
    /// request: a client that left without ending its session leaves it behind.
    #[arg(long, value_name = "SECS", default_value_t = toolgate_mcp::SESSION_IDLE.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    session_idle: u64,
    /// The most HTTP sessions kept at once; a new one beyond that ends the oldest.
    #[arg(long, value_name = "N", default_value_t = toolgate_mcp::MAX_SESSIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    max_sessions: u64,
}

impl Args {
    /// Serving over stdio (no `--http`).
    pub(crate) fn is_stdio(&self) -> bool {
        self.http.is_none()
    }
}

/// How long `serve` waits for bridged MCP servers before it starts answering clients.
const MCP_START_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) async fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    let started = std::time::Instant::now();
    // Installed before anything is started.
    let stopped_by = stop_on_signals(shutdown.clone())?;
    let workspace = global.workspace()?;
    let (config, shared) = global.load_config_shared()?;
    super::logging::start_traces(&config.telemetry)?;
    // Approvals go to the MCP client's user (elicitation); stdin is the protocol, never a
    // prompt. Over HTTP, requests the client cannot answer wait in the approvals API.
    // Over HTTP the inbox is durable (the state database): entries outlive a restart and
    // another process (`toolgate approvals approve`) can decide them.
    let pending = match args.http {
        Some(_) => PendingApprovals::open(&workspace.join(".toolgate/state.db"), &config)
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        None => PendingApprovals::new(),
    };
    let approver: Arc<dyn toolgate::Approver> = match args.http {
        Some(_) => Arc::new(FirstAvailable(vec![Arc::new(McpApprover::default()), pending.clone()])),
        None => Arc::new(McpApprover::default()),
    };
    let gate = Gate::builder(&workspace).config(config).approver(Arc::clone(&approver)).build_shared()?;
    super::wasm::load(&gate).await;
    // Notes already in the workspace are indexed on one background thread: no call waits for it.
    if let Some(memory) = gate.memory() {
        Arc::clone(memory).start_indexing();
    }
    // Config, skills and stored custom tools are reloaded while serving (docs/extensions.md),
    // and notes edited on disk are re-indexed as they change (docs/memory.md).
    let reload_from = global.clone();
    let load: toolgate_watch::LoadConfig = match &shared {
        Some(shared) => {
            let shared = Arc::clone(shared);
            Box::new(move || shared.load())
        }
        None => Box::new(move || reload_from.load_config().map_err(|e| format!("{e:#}"))),
    };
    if let Err(e) = toolgate_watch::watch(&gate, global.config_file(), load, shutdown.clone()) {
        tracing::warn!("changes to the configuration will need a restart: cannot watch the files: {e}");
    }
    // A change another node stores is put in force here as soon as this node hears of it.
    if let Some(shared) = shared {
        gate.share_config(shared, shutdown.clone());
    }
    // Bridged MCP servers: wait (bounded) for each one's first connection so its tools are in
    // the client's first `tools/list`; later arrivals are announced with `list_changed`.
    // (Without bridged servers this returns at once.)
    tokio::select! {
        all = gate.connect_mcp(MCP_START_WAIT) => if !all {
            eprintln!(
                "toolgate: some MCP servers did not connect within {} s; their tools appear when they do \
                 (`toolgate mcp list`, and the log, say why)",
                MCP_START_WAIT.as_secs()
            );
        },
        () = shutdown.cancelled() => {
            gate.shutdown();
            return Ok(exit_code(&stopped_by));
        }
    }
    // The families' endpoints beside `/mcp` (with the approvals API), and their background
    // tasks, which end with the shutdown.
    let page = super::gateway_page::GatewayWiring::new(&gate, Arc::clone(&pending))?;
    let ops_pending = Arc::clone(&pending);
    let api = Arc::new(Mounted::new(gate.routes(), Some(pending)));
    // Only an HTTP server mounts them (the canvas writes files while none holds its pages), with
    // the probes and metrics a load balancer and an operator ask for (`ops.rs`).
    let mounts = match args.http {
        Some(_) => [gate.mounts(), toolgate::ops::mounts(&gate, ops_pending, started)].concat(),
        None => Vec::new(),
    };
    let users = per_user_gates(&gate, page.is_some(), &approver, &shutdown)?;
    // Grants written by another process (`toolgate admin grant ...`) reach connected MCP
    // clients as `list_changed` within a second, like this process's own.
    if let (Some(_), Some(stores)) = (&page, gate.services().stores.as_ref()) {
        let (grants, identity, stop) =
            (Arc::clone(&stores.grants), Arc::clone(&stores.identity), shutdown.clone().cancelled_owned());
        tokio::spawn(toolgate::gateway::follow_store(grants, identity, GRANTS_POLL, stop));
    }
    // A gateway caller's routines fire under that caller's grants as they are at each fire,
    // whether this process serves HTTP or not; set before the scheduler starts.
    if let Some(grants) = gateway_grants(&gate) {
        gate.hold_routines_to(Arc::new(toolgate::granted::PrincipalGrants::new(grants.clone())));
        if let Some(users) = &users {
            users.hold_routines_to(grants);
        }
    }
    let tasks = gate.start_tasks(&shutdown);
    // Over HTTP in gateway mode, each caller's grants limit what is listed and run.
    let http = args.http.is_some();
    let whole = granted(&gate, gate.clone(), http);
    match users {
        // A team gateway with per-user workspaces: each key's user is served by the gate on
        // its own workspace; this workspace's gate keeps the users, keys and approvals.
        Some(users) => {
            let config = Arc::clone(&gate.services().config);
            serve(granted(&gate, users, http), &workspace, args, api, mounts, page, config, shutdown.clone()).await?;
            gate.shutdown();
        }
        None => {
            let config = Arc::clone(&gate.services().config);
            serve(whole, &workspace, args, api, mounts, page, config, shutdown.clone()).await?;
        }
    }
    shutdown.cancel();
    for task in tasks {
        let _ = task.await;
    }
    Ok(exit_code(&stopped_by))
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP (a client or service manager stopping us): the first one
/// cancels `shutdown`, so the server stops as when its client leaves (running calls cancelled,
/// their processes killed, their audit rows completed, the audit log written out), and is kept
/// for the exit status. A second one exits at once (128 + its number), for when that shutdown
/// is slow (a post-tool-use hook of a cancelled call, say): what still runs dies with the
/// process, and the "started" rows of its calls are closed as interrupted by the next start.
fn stop_on_signals(shutdown: CancellationToken) -> anyhow::Result<Arc<OnceLock<i32>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let stopped_by = Arc::new(OnceLock::new());
    let first = Arc::clone(&stopped_by);
    tokio::spawn(async move {
        loop {
            let kind = tokio::select! {
                Some(()) = int.recv() => SignalKind::interrupt(),
                Some(()) = term.recv() => SignalKind::terminate(),
                Some(()) = hup.recv() => SignalKind::hangup(),
                else => return,
            };
            let number = kind.as_raw_value();
            if first.set(number).is_err() {
                eprintln!("toolgate: a second signal ({number}) while stopping: exiting at once");
                std::process::exit(128 + number);
            }
            tracing::debug!("signal {number}: stopping");
            shutdown.cancel();
        }
    });
    Ok(stopped_by)
}

/// 0, or 128 + the signal's number when a signal stopped the server (143 for SIGTERM, 130 for
/// SIGINT, 129 for SIGHUP), as shells and service managers expect.
fn exit_code(stopped_by: &OnceLock<i32>) -> ExitCode {
    match stopped_by.get() {
        Some(&number) => ExitCode::from(u8::try_from(128 + number).unwrap_or(u8::MAX)),
        None => ExitCode::SUCCESS,
    }
}

/// Serves `handler` over stdio or HTTP until the client leaves or `shutdown` (a signal).
// The pieces `run` built, each its own; bundling them would only rename them.
#[allow(clippy::too_many_arguments)]
async fn serve<H: CallHandler>(
    handler: Arc<H>,
    workspace: &Path,
    args: Args,
    api: Arc<Mounted>,
    mounts: Vec<toolgate::family::Mount>,
    gateway: Option<super::gateway_page::GatewayWiring>,
    node_config: Arc<toolgate::config::Config>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let Some(addr) = args.http else {
        toolgate::mcp::serve_stdio(handler, shutdown).await?;
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("cannot read the listening address")?;
    // Its background processes are recorded under this node's name and URL.
    toolgate::node::announce(&node_config, local);
    // A team gateway knows its callers by their API keys (or its OIDC provider's tokens): it
    // makes no shared token, and serves its page at `/`.
    let mut mounts = mounts;
    let (mut http, token) = match gateway {
        Some(gateway) => {
            let gateway = gateway.http(local, &shutdown).await?;
            mounts.extend(gateway.mounts);
            let mut http = HttpConfig::with_authenticator(gateway.authenticator);
            http.resource_metadata = gateway.resource_metadata;
            (http, None)
        }
        None => {
            let token = HttpToken::load_or_create(workspace)?;
            (HttpConfig::new(token.clone()), Some(token))
        }
    };
    if !local.ip().is_loopback() {
        eprintln!(
            "toolgate: warning: listening on {local}, which is reachable from other machines; \
             its credentials (the bearer token or API keys) travel in clear text without TLS"
        );
        if !local.ip().is_unspecified() {
            http.allowed_hosts.push(local.ip().to_string());
        }
    }
    http.allowed_hosts.extend(args.allow_hosts);
    http.allowed_origins = args.allow_origins;
    http.max_body_bytes = args.max_body_bytes;
    http.session_idle = std::time::Duration::from_secs(args.session_idle);
    http.max_sessions = usize::try_from(args.max_sessions).unwrap_or(usize::MAX);
    http.api = Some(api);
    http.mounts = mounts;
    match &token {
        Some(token) => print_banner(local, token),
        None => print_gateway_banner(local),
    }
    toolgate::mcp::serve_http(handler, listener, http, shutdown).await?;
    Ok(())
}

/// What a bare `toolgate` does: serve MCP over HTTP on loopback with the defaults.
pub(crate) async fn run_default(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let args = Args {
        http: Some(DEFAULT_HTTP_ADDR.parse().context("the default address")?),
        allow_hosts: Vec::new(),
        allow_origins: Vec::new(),
        max_body_bytes: 4 * 1024 * 1024,
        session_idle: toolgate_mcp::SESSION_IDLE.as_secs(),
        max_sessions: toolgate_mcp::MAX_SESSIONS as u64,
    };
    run(global, args).await
}

/// A team gateway over HTTP serves each caller only the tools its grants give
/// (`toolgate::granted::Granted`, docs/gateway.md "Grants"), with the gateway's own tools
/// (`request_access`, `gateway`) run on `gate`, which keeps the grants; otherwise `handler` as
/// it is (over stdio the gateway serves its local user).
fn granted(
    gate: &Arc<Gate>,
    handler: Arc<dyn toolgate::mcp::CallHandler>,
    http: bool,
) -> Arc<toolgate::granted::Granted> {
    let grants = if http { gateway_grants(gate) } else { None };
    Arc::new(toolgate::granted::Granted::new(handler, Arc::clone(gate), grants))
}

/// The team gateway's grants (its own database's), when `gate` is a gateway's.
fn gateway_grants(gate: &Gate) -> Option<toolgate::gateway::Grants> {
    let config = &gate.services().config;
    let stores = gate.services().stores.as_ref().filter(|_| config.gateway.enabled)?;
    Some(toolgate::gateway::Grants::new(
        Arc::clone(&stores.grants),
        Arc::clone(&stores.identity),
        toolgate::gateway_family::default_tools(&config.gateway),
    ))
}

/// With `[gateway] workspaces = "DIR"` (and an HTTP gateway), every user's calls run on
/// `DIR/USER` with a gate of its own, built from this configuration.
fn per_user_gates(
    gate: &Gate,
    gateway: bool,
    approver: &Arc<dyn toolgate::Approver>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Arc<toolgate::per_user::PerUserGates>>> {
    let config = &gate.services().config;
    let Some(root) = config.gateway.workspaces.as_ref().filter(|dir| gateway && !dir.as_os_str().is_empty()) else {
        return Ok(None);
    };
    // A relative folder is the gateway workspace's.
    let root = gate.workspace().join(root);
    let users =
        toolgate::per_user::PerUserGates::new(&root, (**config).clone(), Some(Arc::clone(approver)), shutdown.clone())
            .with_context(|| format!("cannot make the users' workspaces folder {}", root.display()))?;
    // Upstream sign-ins stay in the gateway's store, out of the users' reach.
    if let Some(vault) = gate.mcp_vault() {
        users.set_upstream_vault(vault);
    }
    // So are the users' "allow always" decisions: one grant store.
    if let Some(stores) = gate.services().stores.as_ref() {
        users.set_approval_grants(Arc::clone(&stores.grants));
    }
    eprintln!("toolgate: each user works in a workspace of its own under {}", users.root().display());
    let users = Arc::new(users);
    // A reload of the gateway's configuration (the watcher, `gateway reload`, `config_apply`)
    // reaches every user's gate.
    let follower = Arc::downgrade(&users);
    gate.services().config_control.on_reload(move |config| {
        if let Some(users) = follower.upgrade() {
            users.reload(config);
        }
    });
    Ok(Some(users))
}

/// How often a gateway reads the store's revisions for grants other processes wrote.
const GRANTS_POLL: std::time::Duration = std::time::Duration::from_secs(1);

fn print_gateway_banner(local: SocketAddr) {
    eprintln!("toolgate: serving a team gateway at http://{local}/mcp");
    eprintln!(
        "toolgate: every request needs an API key (`Authorization: Bearer tg_...`); make one with \
         `toolgate admin user add NAME` and `toolgate admin key create --user NAME`; Ctrl-C stops the server"
    );
}

fn print_banner(local: SocketAddr, token: &HttpToken) {
    let url = format!("http://{local}/mcp");
    eprintln!("toolgate: serving MCP over Streamable HTTP at {url}");
    let shown = if token.created() {
        eprintln!(
            "toolgate: generated a bearer token, stored in {} (mode 0600); it is shown only this once:\n  {}",
            token.path().display(),
            token.secret()
        );
        token.secret().to_owned()
    } else {
        eprintln!("toolgate: bearer token: the one stored in {}", token.path().display());
        format!("$(cat {})", token.path().display())
    };
    eprintln!(
        "toolgate: client config example:\n  {{\"mcpServers\": {{\"toolgate\": {{\"type\": \"http\", \"url\": \"{url}\", \
         \"headers\": {{\"Authorization\": \"Bearer {shown}\"}}}}}}}}"
    );
    eprintln!("toolgate: pending approvals: GET http://{local}/api/approvals (same token); Ctrl-C stops the server");
}
