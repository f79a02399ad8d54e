//! One server's life: connect, register its tools, check its health, follow its tool-list
//! changes, and reconnect with backoff when the connection goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, PaginatedRequestParams, PingRequest, Tool as McpTool};
use rmcp::service::{Peer, ServiceError};
use tokio_util::sync::CancellationToken;
use toolgate_core::{Registry, RegistryError};

use super::connect::{ConnectEnv, Connection, connect};
use super::link::{LinkState, ServerLink, Stored};
use super::mapping::{BridgedSpec, Skip, bridged_spec};
use super::tool::BridgedTool;

/// Most tools taken from one server; the rest are dropped with a warning.
const MAX_TOOLS: usize = 512;
/// Most `tools/list` pages read from one server.
const MAX_PAGES: usize = 64;

/// The most bytes of tool definitions taken from one server's list (its JSON size).
const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;

/// How often and how patiently the bridge checks servers and reconnects them. The defaults are
/// the documented behaviour; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BridgeTimings {
    /// Time between health checks (an MCP `ping`) of a connected server. Default 30 s.
    pub health_interval: Duration,
    /// How long a health check waits for the answer. Default 10 s.
    pub ping_timeout: Duration,
    /// How long one connection attempt may take: start, handshake and tool listing. Default 30 s.
    pub connect_timeout: Duration,
    /// The wait before the first reconnection attempt; it doubles after each failure. Default 2 s.
    pub backoff_initial: Duration,
    /// The longest wait between reconnection attempts. Default 60 s.
    pub backoff_max: Duration,
    /// Reconnection attempts before the server is given up. Default 10.
    pub max_attempts: u32,
}

impl Default for BridgeTimings {
    fn default() -> Self {
        BridgeTimings {
            health_interval: Duration::from_secs(30),
            ping_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(2),
            backoff_max: Duration::from_secs(60),
            max_attempts: 10,
        }
    }
}

impl BridgeTimings {
    /// The wait before reconnection attempt `attempt` (1-based): 2, 4, 8, 16, 32, 60, 60, ... s.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.backoff_initial.saturating_mul(factor).min(self.backoff_max)
    }
}

/// What one connection attempt gave.
enum Attempt {
    /// Connected, tools registered.
    Connected(Connection),
    /// Failed; the text says why in toolgate's words (details are logged). `permanent`: the
    /// configuration is wrong, retrying cannot help.
    Failed { why: String, permanent: bool },
    /// The bridge is shutting down.
    Shutdown,
}

/// Why a connection ended.
enum Ended {
    /// The bridge is shutting down.
    Shutdown,
    /// The connection was lost; the text says how.
    Lost(String),
}

/// Runs one server until the bridge shuts down.
pub(crate) struct Supervisor {
    pub link: Arc<ServerLink>,
    pub registry: Arc<Registry>,
    pub env: ConnectEnv,
    pub timings: BridgeTimings,
    pub shutdown: CancellationToken,
    /// What this server has in the registry now, by gate name.
    pub registered: BTreeMap<String, BridgedSpec>,
    /// The supervisor this one replaces (a reloaded entry of the same name): it must have
    /// ended, its tools unregistered, before this one registers any.
    pub replaces: Option<Arc<ServerLink>>,
}

impl Supervisor {
    pub(crate) async fn run(mut self) {
        // Marks the link ended however this task ends (a panic in a tool mapping included).
        struct Ended(Arc<ServerLink>);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.mark_ended();
            }
        }
        let _ended = Ended(Arc::clone(&self.link));
        if let Some(old) = self.replaces.take() {
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    self.link.set_state(LinkState::Stopped);
                    self.link.first_attempt_done();
                    return;
                }
                () = old.wait_ended() => {}
            }
        }
        self.run_inner().await;
    }

    async fn run_inner(&mut self) {
        let name = self.link.name.clone();
        let max = self.timings.max_attempts;
        let mut retry = 0u32;
        loop {
            let attempt = self.attempt().await;
            self.link.attempt_done();
            let error = match attempt {
                Attempt::Connected(connection) => {
                    retry = 0;
                    match self.serve(connection).await {
                        Ended::Shutdown => break,
                        Ended::Lost(why) => {
                            tracing::warn!(server = %name, "MCP server connection lost: {why}; reconnecting");
                            why
                        }
                    }
                }
                Attempt::Failed { why, permanent: true } => {
                    self.link.set_state(LinkState::Misconfigured { error: why });
                    self.link.first_attempt_done();
                    self.shutdown.cancelled().await;
                    break;
                }
                Attempt::Failed { why, permanent: false } => why,
                Attempt::Shutdown => break,
            };
            retry += 1;
            if retry > max {
                tracing::error!(
                    server = %name,
                    "MCP server is unavailable after {max} reconnection attempts ({error}); its tools fail until toolgate restarts"
                );
                self.link.set_state(LinkState::GaveUp { error, attempts: max });
                self.link.first_attempt_done();
                // A per-user server's user may sign in later: a call then asks for a new try.
                tokio::select! {
                    () = self.shutdown.cancelled() => break,
                    () = self.link.kick.notified() => {
                        retry = 0;
                        continue;
                    }
                }
            }
            let delay = self.timings.backoff(retry);
            self.link.set_state(LinkState::Retrying { error, attempt: retry, max, delay });
            // Only now: whoever waited for the first attempt must see why it failed.
            self.link.first_attempt_done();
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
                () = self.link.kick.notified() => {}
            }
        }
        self.link.set_state(LinkState::Stopped);
        self.link.first_attempt_done();
        if self.link.removed.load(std::sync::atomic::Ordering::Acquire) {
            for gate_name in std::mem::take(&mut self.registered).into_keys() {
                self.registry.unregister_dynamic(&gate_name);
            }
            self.link.set_tools(Vec::new());
            tracing::info!(server = %name, "MCP server removed from the configuration; its tools are gone");
        }
    }

    /// One connection attempt, tools listed and registered.
    async fn attempt(&mut self) -> Attempt {
        let name = self.link.name.clone();
        let timeout = self.timings.connect_timeout;
        let connected = tokio::select! {
            () = self.shutdown.cancelled() => return Attempt::Shutdown,
            connected = connect(&self.link, &self.env) => connected,
        };
        let connection = match connected {
            Ok(connection) => connection,
            Err(e) => {
                tracing::error!(server = %name, "cannot connect to MCP server: {e}");
                let why = e.summary(&self.link);
                return Attempt::Failed { why, permanent: e.is_permanent() };
            }
        };
        let peer = connection.peer().clone();
        let shutdown = self.shutdown.clone();
        let synced = tokio::select! {
            () = shutdown.cancelled() => {
                connection.close().await;
                return Attempt::Shutdown;
            }
            synced = tokio::time::timeout(timeout, self.sync_tools(&peer)) => synced,
        };
        match synced {
            Ok(Ok(())) => {
                self.link.set_state(LinkState::Ready(peer));
                self.link.first_attempt_done();
                Attempt::Connected(connection)
            }
            Ok(Err(e)) => {
                connection.close().await;
                tracing::error!(server = %name, "MCP server connected but its tools could not be listed: {e}");
                let why = "its tool list could not be read (details in toolgate's log)".to_owned();
                Attempt::Failed { why, permanent: false }
            }
            Err(_) => {
                connection.close().await;
                let why = format!("it did not list its tools within {} s", timeout.as_secs());
                Attempt::Failed { why, permanent: false }
            }
        }
    }

    /// Keeps a connection: health checks, tool-list refreshes, until it ends.
    async fn serve(&mut self, mut connection: Connection) -> Ended {
        let peer = connection.peer().clone();
        let mut health = tokio::time::interval(self.timings.health_interval);
        health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        health.tick().await;
        let shutdown = self.shutdown.clone();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => {
                    connection.close().await;
                    return Ended::Shutdown;
                }
                () = connection.closed() => {
                    return Ended::Lost("the server closed the connection (or its process ended)".to_owned());
                }
                () = self.link.kick.notified() => {
                    // A kick left from before this connection, while its user's credential is
                    // the one it was opened with.
                    if self.link.stored_credential().await == Some(Stored::Same) {
                        continue;
                    }
                    // Its user signed out or stored another key: this connection carries the
                    // credential they use no longer.
                    connection.close().await;
                    return Ended::Lost("its user's sign-in or key was removed or replaced".to_owned());
                }
                () = self.link.list_changed.notified() => {
                    let refreshed = tokio::time::timeout(self.timings.connect_timeout, self.sync_tools(&peer)).await;
                    match refreshed {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!(server = %self.link.name, "cannot refresh the tool list: {e}"),
                        Err(_) => tracing::warn!(server = %self.link.name, "the tool list refresh timed out"),
                    }
                }
                _ = health.tick() => {
                    if !self.healthy(&peer).await {
                        let why = format!(
                            "it did not answer a health check (ping) within {} s",
                            self.timings.ping_timeout.as_secs_f64()
                        );
                        connection.close().await;
                        return Ended::Lost(why);
                    }
                }
            }
        }
    }

    /// A health check: an answer to `ping`, even an error (a server without `ping` is alive).
    async fn healthy(&self, peer: &Peer<RoleClient>) -> bool {
        let ping = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
        match tokio::time::timeout(self.timings.ping_timeout, ping).await {
            Ok(Ok(_) | Err(ServiceError::McpError(_))) => true,
            Ok(Err(_)) | Err(_) => false,
        }
    }

    /// Lists the server's tools and makes the registry match: new tools are added, gone ones
    /// removed, changed ones replaced.
    async fn sync_tools(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        let listed = list_tools(peer).await?;
        let name = self.link.name.clone();
        if listed.len() > MAX_TOOLS {
            tracing::warn!(server = %name, "the server lists {} tools; only the first {MAX_TOOLS} are taken", listed.len());
        }
        let mut wanted: BTreeMap<String, BridgedSpec> = BTreeMap::new();
        for tool in listed.iter().take(MAX_TOOLS) {
            match bridged_spec(&name, &self.link.config, tool) {
                Ok(bridged) if wanted.contains_key(&bridged.spec.name) => {
                    tracing::warn!(server = %name, "the server lists `{}` twice; the first one is kept", bridged.remote);
                }
                Ok(bridged) => {
                    wanted.insert(bridged.spec.name.clone(), bridged);
                }
                Err(Skip::Filtered) => {}
                Err(Skip::Unusable(why)) => tracing::warn!(server = %name, "skipping a tool: {why}"),
            }
        }
        let mut removed = Vec::new();
        self.registered.retain(|gate_name, old| {
            if wanted.get(gate_name) == Some(old) {
                return true;
            }
            self.registry.unregister_dynamic(gate_name);
            if !wanted.contains_key(gate_name) {
                removed.push(gate_name.clone());
            }
            false
        });
        let mut added = Vec::new();
        for (gate_name, bridged) in wanted {
            if self.registered.contains_key(&gate_name) {
                continue;
            }
            let tool = Arc::new(BridgedTool::new(Arc::clone(&self.link), bridged.clone()));
            match self.registry.register_dynamic(tool) {
                Ok(()) => {
                    added.push(gate_name.clone());
                    self.registered.insert(gate_name, bridged);
                }
                Err(RegistryError::ProtectedName { .. }) => tracing::warn!(
                    server = %name,
                    "skipping `{}`: its name `{gate_name}` would shadow a built-in tool (set another `prefix`)",
                    bridged.remote
                ),
                Err(RegistryError::Duplicate { .. }) => tracing::warn!(
                    server = %name,
                    "skipping `{}`: another tool is already named `{gate_name}` (set another `prefix`)",
                    bridged.remote
                ),
                Err(e) => tracing::warn!(server = %name, "skipping `{}`: {e}", bridged.remote),
            }
        }
        self.link.set_tools(self.registered.keys().cloned().collect());
        if !added.is_empty() || !removed.is_empty() {
            tracing::info!(
                server = %name,
                "MCP server tools: {} registered (added {}; removed {})",
                self.registered.len(),
                list_or_none(&added),
                list_or_none(&removed)
            );
        }
        Ok(())
    }
}

/// Every page of `tools/list`, bounded in pages, tools and bytes: a server sending 64 pages of
/// one tool with a 16 MiB schema each must not make toolgate hold a gigabyte.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, ServiceError> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer.list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor))).await?;
        for tool in page.tools {
            bytes += serde_json::to_string(&tool).map_or(usize::MAX / 2, |t| t.len());
            if bytes > MAX_LIST_BYTES {
                tracing::warn!("a tool list larger than {MAX_LIST_BYTES} bytes: the rest is not taken");
                return Ok(tools);
            }
            tools.push(tool);
        }
        cursor = page.next_cursor;
        if cursor.is_none() || tools.len() > MAX_TOOLS {
            break;
        }
    }
    Ok(tools)
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_2_s_to_60_s() {
        let t = BridgeTimings::default();
        let waits: Vec<u64> = (1..=10).map(|a| t.backoff(a).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60, 60, 60]);
        assert_eq!(t.backoff(u32::MAX), Duration::from_secs(60));
        assert_eq!(t.max_attempts, 10);
        assert_eq!(t.health_interval, Duration::from_secs(30));
    }
}
