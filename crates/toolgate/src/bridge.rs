//! The gate's side of the MCP client bridge (`[mcp.servers.NAME]`, `toolgate_mcp::bridge`):
//! starting it and waiting for servers that are still connecting. (What a server says in an
//! error is shaped like its output by the output stage, `pipeline/output.rs`.)
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! let gate = toolgate::Gate::builder(".").build()?;
//! gate.connect_mcp(Duration::from_secs(30)).await; // every server's first attempt, at most 30 s
//! let ctx = gate.context();
//! let out = gate.call(&ctx, "mcp__everything__echo", serde_json::json!({"message": "hi"})).await?;
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use toolgate_core::{RegisteredTool, Registry, ToolError};
use toolgate_mcp::bridge::oauth::SecretVault;
pub use toolgate_mcp::bridge::{
    Bridge, BridgeOptions, BridgeTimings, GatewayUser, McpConfig, ServerConfig, ServerNetwork, ServerSandbox,
    ServerState, ServerStatus, ToolFilter,
};

use crate::Gate;

/// How much longer than a connection attempt a call waits for a server that is starting.
const WAIT_SLACK: Duration = Duration::from_secs(5);

/// The bridge as the gate holds it: not started until [`Gate::start_mcp`].
#[derive(Debug, Default)]
pub(crate) struct McpBridge {
    /// Shared with `tool_list`, which reports each server's state.
    bridge: Arc<OnceLock<Bridge>>,
    /// OAuth credentials of HTTP servers (the state database's encrypted secrets).
    vault: Option<Arc<dyn SecretVault>>,
    /// Timings the bridge starts with; tests shorten them.
    timings: Mutex<BridgeTimings>,
    /// Set by [`Gate::start_mcp`]: a reload may then start the bridge too (when the servers
    /// enabled at start were none).
    wanted: std::sync::atomic::AtomicBool,
    /// In a team gateway, whose calls the bridge makes.
    gateway: Option<GatewayUser>,
}

impl McpBridge {
    pub(crate) fn new(
        vault: Option<Arc<dyn SecretVault>>,
        timings: Option<BridgeTimings>,
        gateway: Option<GatewayUser>,
    ) -> Self {
        McpBridge {
            bridge: Arc::new(OnceLock::new()),
            vault,
            timings: Mutex::new(timings.unwrap_or_default()),
            wanted: std::sync::atomic::AtomicBool::new(false),
            gateway,
        }
    }

    /// The vault of OAuth sign-ins.
    pub(crate) fn vault(&self) -> Option<Arc<dyn SecretVault>> {
        self.vault.clone()
    }

    /// The bridge once started, for the extension tools.
    pub(crate) fn handle(&self) -> Arc<OnceLock<Bridge>> {
        Arc::clone(&self.bridge)
    }

    fn timings(&self) -> BridgeTimings {
        *self.timings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long a call waits for its server's first connection attempt.
    fn first_attempt_wait(&self) -> Duration {
        self.timings().connect_timeout + WAIT_SLACK
    }

    /// For a tool name the registry does not know: if it belongs to a bridged server that is
    /// still connecting, waits for it and looks again; if the server is down, the error saying
    /// so. `None`: not a bridged server's tool (the caller reports an unknown tool).
    pub(crate) async fn resolve_missing(
        &self,
        registry: &Registry,
        name: &str,
    ) -> Option<Result<Arc<RegisteredTool>, ToolError>> {
        let bridge = self.bridge.get()?;
        if bridge.wait_for_tool(name, self.first_attempt_wait()).await
            && let Some(tool) = registry.resolve(name)
        {
            return Some(Ok(tool));
        }
        // A user who has signed in since their server's last attempt: connect now.
        if bridge.reconnect_signed_in(name, self.first_attempt_wait()).await
            && let Some(tool) = registry.resolve(name)
        {
            return Some(Ok(tool));
        }
        bridge.unavailable(name).map(Err)
    }

    pub(crate) fn shutdown(&self) {
        if let Some(bridge) = self.bridge.get() {
            bridge.shutdown();
        }
    }
}

impl Gate {
    /// Starts connecting the MCP servers of `[mcp.servers]` in the background (once; later calls
    /// do nothing) and returns at once. Their tools join the registry as each server's tool list
    /// arrives; a call to a tool of a server still connecting waits for it. A server that fails
    /// is logged and retried with backoff; it never fails the gate.
    ///
    /// Call it inside a Tokio runtime; outside one, every server is reported unavailable.
    pub fn start_mcp(&self) {
        self.mcp_bridge().wanted.store(true, std::sync::atomic::Ordering::Release);
        self.start_bridge(&self.config().mcp);
    }

    /// Starts the bridge over `config` unless it runs or no server is enabled.
    fn start_bridge(&self, config: &McpConfig) {
        if config.servers.values().all(|s| !s.enabled) {
            return;
        }
        let mcp = self.mcp_bridge();
        if mcp.bridge.get().is_none() {
            self.audit_opt_outs(config, config.servers.keys());
        }
        mcp.bridge.get_or_init(|| {
            let mut options = BridgeOptions::new(self.workspace()).timings(mcp.timings());
            if let Some(vault) = &mcp.vault {
                options = options.vault(Arc::clone(vault));
            }
            if let Some(gateway) = &mcp.gateway {
                options = options.gateway(gateway.clone());
            }
            Bridge::start(config, Arc::clone(&self.services().registry), options)
        });
    }

    /// [`start_mcp`](Self::start_mcp), then waits until every server's first connection attempt
    /// has finished (their tools are registered), at most `timeout`. Returns whether all had.
    pub async fn connect_mcp(&self, timeout: Duration) -> bool {
        self.start_mcp();
        match self.mcp_bridge().bridge.get() {
            Some(bridge) => bridge.wait_started(timeout).await,
            None => true,
        }
    }

    /// Applies `config`'s `[mcp.servers]` to a gate whose bridge was started
    /// ([`start_mcp`](Self::start_mcp)): servers removed, switched off or changed are stopped
    /// and their tools unregistered, new ones connected in the background (see
    /// [`Bridge::update`]). Returns the servers stopped and started; nothing when MCP was never
    /// started (a one-shot `toolgate call`).
    pub fn reload_mcp(&self, config: &McpConfig) -> (Vec<String>, Vec<String>) {
        if !self.mcp_bridge().wanted.load(std::sync::atomic::Ordering::Acquire) {
            return (Vec::new(), Vec::new());
        }
        match self.mcp_bridge().bridge.get() {
            Some(bridge) => {
                let (stopped, started) = bridge.update(config);
                self.audit_opt_outs(config, started.iter());
                (stopped, started)
            }
            None => {
                self.start_bridge(config);
                let started = config.servers.iter().filter(|(_, s)| s.enabled).map(|(n, _)| n.clone()).collect();
                (Vec::new(), started)
            }
        }
    }

    /// One audit row per stdio server among `names` that starts outside its sandbox
    /// (`enabled = false`) or with the host's network: the opt-outs are on record, not only in
    /// the log.
    fn audit_opt_outs<'a>(&self, config: &McpConfig, names: impl Iterator<Item = &'a String>) {
        let Some(log) = self.audit_log() else { return };
        for name in names {
            let Some(server) = config.servers.get(name).filter(|s| s.enabled && s.command.is_some()) else { continue };
            let why = if !server.sandbox.enabled {
                "started unconfined: [mcp.servers.NAME.sandbox] enabled = false"
            } else if server.sandbox.network == Some(ServerNetwork::Host) {
                "started with the host's network: [mcp.servers.NAME.sandbox] network = \"host\""
            } else {
                continue;
            };
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            log.record(toolgate_store::AuditRecord {
                id: format!("mcp-{name}-{}", now.as_nanos()),
                ts_ms: now.as_millis() as i64,
                tool: format!("mcp__{name}"),
                decision: format!("MCP server `{name}` {}", why.replace("NAME", name)),
                outcome: "ok".into(),
                subject: server.command.clone(),
                ..toolgate_store::AuditRecord::default()
            });
        }
    }

    /// The configured bridged server whose tool-name prefix `tool` has, whether or not the tool
    /// exists (`None` before [`start_mcp`](Self::start_mcp)).
    pub fn bridged_server_of(&self, tool: &str) -> Option<String> {
        self.mcp_bridge().bridge.get()?.server_of(tool)
    }

    /// Where each bridged MCP server stands (empty until [`start_mcp`](Self::start_mcp)).
    pub fn mcp_status(&self) -> Vec<ServerStatus> {
        self.mcp_bridge().bridge.get().map(Bridge::status).unwrap_or_default()
    }
}
