//! [`Bridge`]: starts one supervisor per enabled server and answers questions about them
//! (is a server still starting, why is it down, which tools does it have).

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolgate_core::{Registry, ToolError};

use super::connect::ConnectEnv;
use super::link::{LinkState, ServerLink};
use super::oauth::{SecretVault, UserVault};
use super::supervisor::{BridgeTimings, Supervisor};
use super::variants::Variants;
use super::{DEFAULT_PREFIX, McpConfig, ServerConfig};

/// What the bridge needs besides the configuration.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BridgeOptions {
    /// The workspace: stdio servers run in it unless their `cwd` says otherwise (a relative
    /// `cwd` is taken from it).
    pub workspace: PathBuf,
    /// Health-check and reconnection timings.
    pub timings: BridgeTimings,
    /// Where OAuth credentials are (`toolgate mcp login NAME` stores them); without a vault, an
    /// HTTP server that asks for authorization stays unavailable.
    pub vault: Option<Arc<dyn SecretVault>>,
    /// In a team gateway, whose calls this bridge makes (`None`: a single user's toolgate).
    pub gateway: Option<GatewayUser>,
}

/// Whose calls a bridge makes in a team gateway, which decides the credentials of a server
/// that is not `shared`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum GatewayUser {
    /// The gateway's own gate (no per-user workspaces): it has no user of its own, so a server
    /// that is not `shared` is connected without any stored credential.
    Gateway,
    /// One user's gate: a server that is not `shared` is connected with this user's own sign-in
    /// (kept in `vault`, the gateway's, under `mcp.user.USER.oauth.NAME`); a `shared` one with
    /// the server-wide sign-in in the same vault.
    User {
        /// The user.
        user: String,
        /// The gateway's vault.
        vault: Arc<dyn SecretVault>,
    },
}

impl BridgeOptions {
    /// Options for `workspace` with the default timings.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        BridgeOptions { workspace: workspace.into(), timings: BridgeTimings::default(), vault: None, gateway: None }
    }

    /// Makes this the bridge of a team gateway, for `user` ([`GatewayUser`]).
    pub fn gateway(mut self, user: GatewayUser) -> Self {
        self.gateway = Some(user);
        self
    }

    /// Sets the vault of OAuth credentials.
    pub fn vault(mut self, vault: Arc<dyn SecretVault>) -> Self {
        self.vault = Some(vault);
        self
    }

    /// Replaces the timings (tests use short ones).
    pub fn timings(mut self, timings: BridgeTimings) -> Self {
        self.timings = timings;
        self
    }
}

/// Where one server stands, for `toolgate mcp list` and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// The first connection attempt is running.
    Starting,
    /// Connected; its tools work.
    Connected,
    /// Down; toolgate reconnects (attempt `attempt` of `max`).
    Reconnecting {
        /// The next attempt.
        attempt: u32,
        /// The most attempts made.
        max: u32,
        /// Why it is down.
        error: String,
    },
    /// Down for good: every reconnection attempt failed.
    Unavailable {
        /// The last failure.
        error: String,
    },
    /// The bridge has shut down.
    Stopped,
}

/// One server's status.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// Its connection.
    pub state: ServerState,
    /// The gate names of its registered tools.
    pub tools: Vec<String>,
}

/// The client bridge: a supervised connection to every enabled `[mcp.servers.NAME]`, whose
/// tools are registered in a shared [`Registry`] as `mcp__NAME__tool`.
///
/// Dropping the bridge (or [`Bridge::shutdown`]) stops every connection and kills every stdio
/// server's process group.
#[derive(Debug)]
pub struct Bridge {
    /// Each server's link and the token that stops its supervisor alone.
    links: RwLock<Vec<(Arc<ServerLink>, CancellationToken)>>,
    /// Cancelled on shutdown; every supervisor watches it.
    shutdown: CancellationToken,
    /// What [`Bridge::update`] starts new supervisors with.
    registry: Arc<Registry>,
    options: BridgeOptions,
}

impl Bridge {
    /// Starts connecting every enabled server in the background and returns at once; use
    /// [`Bridge::wait_started`] to wait for the first attempts. Needs a Tokio runtime; without
    /// one, every server is reported unavailable.
    ///
    /// A server that fails to start is logged and its tools are absent; toolgate keeps
    /// retrying it with backoff.
    pub fn start(config: &McpConfig, registry: Arc<Registry>, options: BridgeOptions) -> Bridge {
        let bridge = Bridge { links: RwLock::new(Vec::new()), shutdown: CancellationToken::new(), registry, options };
        for (name, server) in &config.servers {
            if server.enabled {
                bridge.launch(name, server, None);
            }
        }
        bridge
    }

    /// Applies a new configuration to the running bridge (a reload of `toolgate.toml`): a
    /// server removed, switched off or changed is stopped and its tools unregistered; a server
    /// added, switched on or changed is started like at [`Bridge::start`]. Servers whose entry
    /// did not change keep their connection. Returns the names of the servers stopped and
    /// started.
    pub fn update(&self, config: &McpConfig) -> (Vec<String>, Vec<String>) {
        let wanted =
            |name: &str, current: &ServerConfig| config.servers.get(name).is_some_and(|s| s.enabled && s == current);
        let mut stopped = Vec::new();
        let mut retired: Vec<Arc<ServerLink>> = Vec::new();
        {
            let mut links = self.links.write().unwrap_or_else(PoisonError::into_inner);
            links.retain(|(link, stop)| {
                if wanted(&link.name, &link.config) {
                    return true;
                }
                link.removed.store(true, std::sync::atomic::Ordering::Release);
                stop.cancel();
                stopped.push(link.name.clone());
                retired.push(Arc::clone(link));
                false
            });
        }
        let mut started = Vec::new();
        for (name, server) in &config.servers {
            let running =
                self.links.read().unwrap_or_else(PoisonError::into_inner).iter().any(|(l, _)| &l.name == name);
            if server.enabled && !running {
                let replaces = retired.iter().find(|l| &l.name == name).cloned();
                self.launch(name, server, replaces);
                started.push(name.clone());
            }
        }
        (stopped, started)
    }

    /// The configuration a server runs with now.
    pub fn server_config(&self, name: &str) -> Option<ServerConfig> {
        self.links
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(l, _)| l.name == name)
            .map(|(l, _)| l.config.clone())
    }

    /// Starts one server's supervisor.
    fn launch(&self, name: &str, server: &ServerConfig, replaces: Option<Arc<ServerLink>>) {
        let options = &self.options;
        // Which sign-in this server's connections use (docs/gateway.md, "Upstream sign-ins").
        let (vault, user) = match (&options.gateway, server.shared) {
            (None, _) | (Some(GatewayUser::Gateway), true) => (options.vault.clone(), None),
            (Some(GatewayUser::Gateway), false) => (None, None),
            (Some(GatewayUser::User { vault, .. }), true) => (Some(Arc::clone(vault)), None),
            (Some(GatewayUser::User { user, vault }), false) => {
                let mine: Arc<dyn SecretVault> = Arc::new(UserVault::new(Arc::clone(vault), user));
                (Some(Arc::clone(&mine)), Some((user.clone(), mine)))
            }
        };
        let mut link = ServerLink::new(name.to_owned(), server.clone());
        if let Some((user, mine)) = user {
            link = link.for_user(&user, mine);
        }
        link.gateway_gate = matches!(options.gateway, Some(GatewayUser::Gateway)) && !server.shared;
        let stop = self.shutdown.child_token();
        let env = ConnectEnv { workspace: options.workspace.clone(), vault, timeout: options.timings.connect_timeout };
        link.variants = Some(Variants::new(env.clone(), stop.clone(), options.gateway.is_some()));
        let link = Arc::new(link);
        self.links.write().unwrap_or_else(PoisonError::into_inner).push((Arc::clone(&link), stop.clone()));
        let problem =
            server.problem(name).or_else(|| options.gateway.as_ref().and_then(|_| server.gateway_problem(name)));
        if let Some(problem) = problem {
            tracing::error!(server = %name, "MCP server not started: {problem}");
            link.set_state(LinkState::Misconfigured { error: problem });
            link.first_attempt_done();
            link.mark_ended();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let error = "toolgate started the bridge outside an async runtime (a bug)".to_owned();
            tracing::error!(server = %name, "MCP server not started: {error}");
            link.set_state(LinkState::Misconfigured { error });
            link.first_attempt_done();
            link.mark_ended();
            return;
        };
        let supervisor = Supervisor {
            link,
            registry: Arc::clone(&self.registry),
            env,
            timings: options.timings,
            shutdown: stop,
            registered: Default::default(),
            replaces,
        };
        runtime.spawn(supervisor.run());
    }

    /// The links now (a snapshot: a reload may change them).
    fn snapshot(&self) -> Vec<Arc<ServerLink>> {
        self.links.read().unwrap_or_else(PoisonError::into_inner).iter().map(|(l, _)| Arc::clone(l)).collect()
    }

    /// Waits until every server's first connection attempt has finished (its tools are
    /// registered if it succeeded), at most `timeout`. Returns whether all had.
    pub async fn wait_started(&self, timeout: Duration) -> bool {
        let links = self.snapshot();
        let all = futures::future::join_all(links.iter().map(|l| l.wait_started()));
        tokio::time::timeout(timeout, all).await.is_ok()
    }

    /// The server a tool name belongs to (by its prefix), whether or not the tool exists.
    pub fn server_of(&self, tool: &str) -> Option<String> {
        self.link_of(tool).map(|l| l.name.clone())
    }

    /// For a call to `tool` that is not registered: when it belongs to a server whose first
    /// connection attempt is still running, waits for that attempt (at most `timeout`).
    /// Returns whether it waited, so the caller looks the tool up again.
    pub async fn wait_for_tool(&self, tool: &str, timeout: Duration) -> bool {
        let Some(link) = self.link_of(tool) else { return false };
        if link.started() {
            return false;
        }
        let _ = tokio::time::timeout(timeout, link.wait_started()).await;
        true
    }

    /// For a call to `tool` that is not registered and belongs to a per-user server whose user
    /// has signed in since its last connection attempt: connects again now and waits for that
    /// attempt (at most `timeout`). Returns whether it did, so the caller looks the tool up again.
    pub async fn reconnect_signed_in(&self, tool: &str, timeout: Duration) -> bool {
        let Some(link) = self.link_of(tool) else { return false };
        if !link.needs_sign_in() || link.user_signed_in().await != Some(true) {
            return false;
        }
        link.reconnect_now(timeout).await;
        true
    }

    /// For a call to `tool` that is not registered: the error to give when it belongs to a
    /// server that is down (so the model learns why, instead of "unknown tool").
    pub fn unavailable(&self, tool: &str) -> Option<ToolError> {
        let link = self.link_of(tool)?;
        if link.needs_sign_in() {
            return link.sign_in_needed();
        }
        link.peer().err()
    }

    /// Every server's status, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.snapshot()
            .iter()
            .map(|link| {
                let state = match link.state() {
                    LinkState::Connecting => ServerState::Starting,
                    LinkState::Ready(_) => ServerState::Connected,
                    LinkState::Retrying { error, attempt, max, .. } => {
                        ServerState::Reconnecting { attempt, max, error }
                    }
                    LinkState::GaveUp { error, .. } | LinkState::Misconfigured { error } => {
                        ServerState::Unavailable { error }
                    }
                    LinkState::Stopped => ServerState::Stopped,
                };
                ServerStatus { name: link.name.clone(), state, tools: link.tools() }
            })
            .collect()
    }

    /// Stops every connection (stdio servers get their stdin closed, then their process group
    /// killed). Their tools stay registered and fail with a message saying toolgate is
    /// shutting down.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The link whose tool-name prefix `tool` starts with (the longest, when prefixes nest). An
    /// empty `prefix` claims no names: every unknown name would otherwise be that server's.
    fn link_of(&self, tool: &str) -> Option<Arc<ServerLink>> {
        self.snapshot()
            .into_iter()
            .filter_map(|link| {
                let prefix = match &link.config.prefix {
                    Some(prefix) => prefix.clone(),
                    None => format!("{DEFAULT_PREFIX}{}__", link.name),
                };
                (!prefix.is_empty() && tool.len() > prefix.len() && tool.starts_with(&prefix))
                    .then_some((prefix.len(), link))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, link)| link)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
