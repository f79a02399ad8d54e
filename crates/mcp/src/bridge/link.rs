//! One bridged server's live state, shared by its supervisor (which connects and reconnects)
//! and its tools (which call through the current connection or say why they cannot).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::sync::{Notify, watch};
use toolgate_core::{ProgressSink, ToolError};
use toolgate_sandbox::{DenialKind, Sandbox};

use super::ServerConfig;
use super::oauth::{SecretVault, is_logged_in, key_vault_key};

/// What a user of a team gateway is told when a per-user server has no sign-in of theirs
/// (`by_key`: no key of theirs, for a server with `user_key_header`).
pub(crate) fn sign_in_message(server: &str, user: &str, by_key: bool) -> String {
    if by_key {
        return format!(
            "MCP server `{server}` needs your own key (in this gateway each user gives it their own, and no one \
             else's key is used for you), and you (`{user}`) have none it accepts: paste yours under \"My upstream \
             sign-ins\" on the gateway's page, or store it with `toolgate mcp login {server} --user {user} --key` on \
             the gateway's machine (it reads the key from stdin), then call again"
        );
    }
    format!(
        "MCP server `{server}` needs your own sign-in (in this gateway each user signs in to it for themself, and \
         no one else's sign-in is used for you), and you (`{user}`) have none it accepts: sign in under \"My \
         upstream sign-ins\" on the gateway's page, or with `toolgate mcp login {server} --user {user}` on the \
         gateway's machine (or ask the gateway's admin to run it with you), then call again"
    )
}

/// A user's stored credential for a per-user link, beside the one its connection was opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// None is stored.
    Missing,
    /// One is stored: the connection's (for an OAuth sign-in, whatever it is now: rmcp refreshes it).
    Same,
    /// Another key is stored than the connection was opened with.
    Replaced,
}

/// A key's fingerprint kept in memory, to notice a replaced key (not the key itself).
pub(crate) fn key_fingerprint(key: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// Progress notifications kept for calls that have not registered their token yet.
const EARLY_PROGRESS_KEPT: usize = 32;
use super::mapping::{MAX_PROGRESS_MESSAGE_CHARS, clean_text};

/// Where a server's connection stands.
#[derive(Debug, Clone)]
pub(crate) enum LinkState {
    /// The first connection attempt is running.
    Connecting,
    /// Connected: calls go through this peer.
    Ready(Peer<RoleClient>),
    /// The connection failed or was lost; reconnection attempt `attempt` (of `max`) comes
    /// after `delay`.
    Retrying { error: String, attempt: u32, max: u32, delay: Duration },
    /// Every reconnection attempt failed; the server stays down until toolgate restarts.
    GaveUp { error: String, attempts: u32 },
    /// The configuration cannot work (a bad entry, an unset variable); not retried.
    Misconfigured { error: String },
    /// The bridge shut down.
    Stopped,
}

/// The sandbox a server's process runs in.
#[derive(Debug, Clone)]
pub(crate) struct Containment {
    /// For the denial heuristic.
    pub sandbox: Arc<Sandbox>,
    /// The server's working directory (relative paths in its messages).
    pub cwd: PathBuf,
}

/// A bridged server, as its tools and its supervisor share it.
#[derive(Debug)]
pub(crate) struct ServerLink {
    /// The server's name (`[mcp.servers.NAME]`).
    pub name: String,
    /// Its configuration.
    pub config: ServerConfig,
    /// Written by the supervisor only; tools read it on every call.
    state: RwLock<LinkState>,
    /// Becomes true when the first connection attempt has finished, either way; calls that
    /// arrive while the server is starting wait on it.
    first_attempt: watch::Sender<bool>,
    /// Progress sinks of the calls in flight, by the progress token their request carries, with
    /// the last progress value delivered.
    progress: Mutex<HashMap<ProgressToken, (ProgressSink, f64)>>,
    /// The latest notification for tokens with no route yet: rmcp sends the request before the
    /// call can register its token, and a fast server's first report can win that race. A
    /// few, oldest dropped first, so a server sending made-up tokens holds no memory.
    early_progress: Mutex<VecDeque<ProgressNotificationParam>>,
    /// Signalled by the client handler when the server says its tool list changed.
    pub list_changed: Notify,
    /// The gate names of the tools registered for this server now.
    tools: Mutex<Vec<String>>,
    /// Set when a configuration reload took the server out: its supervisor then unregisters
    /// its tools as it stops (it alone registers them, so nothing comes back afterwards).
    pub removed: std::sync::atomic::AtomicBool,
    /// The sandbox of the current connection's process, when it runs in one.
    containment: Mutex<Option<Containment>>,
    /// Becomes true when its supervisor has ended and cleaned up (at once when it never had
    /// one): a replacement of the same name waits for it, so the old one's clean-up cannot
    /// unregister the new one's tools.
    ended: watch::Sender<bool>,
    /// In a team gateway, the user whose own sign-in this server's connections use, with that
    /// user's view of the vault; `None` for a server-wide (or anonymous) connection.
    pub signed_in_user: Option<(String, Arc<dyn SecretVault>)>,
    /// A server that is not `shared`, on a team gateway's own gate (no per-user workspaces): its
    /// connection carries no stored token, and a 401 says how per-user sign-ins are set up.
    pub gateway_gate: bool,
    /// Whether the current connection was opened with a stored OAuth token.
    pub with_token: std::sync::atomic::AtomicBool,
    /// Asks the supervisor to drop the connection, or stop waiting between attempts, and connect
    /// again now (a user signed out, or signed in).
    pub kick: Notify,
    /// Connection attempts finished so far (for a call that waits for one after a kick).
    attempts: watch::Sender<u64>,
    /// The fingerprint of the user's key the current connection sends (`user_key_header`).
    pub key_used: Mutex<Option<u64>>,
    /// The server's own entry, when `config` has a grant's overrides merged in: the sandbox
    /// is resolved from it (an override's `args` never widen what the server may read).
    pub own_config: Option<ServerConfig>,
    /// The connections of callers whose grants override this server's settings (none on such
    /// a connection's own link).
    pub variants: Option<super::variants::Variants>,
}

impl ServerLink {
    pub(crate) fn new(name: String, config: ServerConfig) -> Self {
        ServerLink {
            name,
            config,
            state: RwLock::new(LinkState::Connecting),
            first_attempt: watch::Sender::new(false),
            progress: Mutex::new(HashMap::new()),
            early_progress: Mutex::new(VecDeque::new()),
            list_changed: Notify::new(),
            tools: Mutex::new(Vec::new()),
            removed: std::sync::atomic::AtomicBool::new(false),
            containment: Mutex::new(None),
            ended: watch::Sender::new(false),
            signed_in_user: None,
            gateway_gate: false,
            with_token: std::sync::atomic::AtomicBool::new(false),
            kick: Notify::new(),
            attempts: watch::Sender::new(0),
            key_used: Mutex::new(None),
            own_config: None,
            variants: None,
        }
    }

    /// The entry the server's sandbox is resolved from: its own, without a grant's overrides.
    pub(crate) fn sandbox_config(&self) -> &ServerConfig {
        self.own_config.as_ref().unwrap_or(&self.config)
    }

    /// This link for `user`'s own sign-in (a per-user server in a team gateway).
    pub(crate) fn for_user(mut self, user: &str, vault: Arc<dyn SecretVault>) -> Self {
        self.signed_in_user = Some((user.to_owned(), vault));
        self
    }

    /// Counts a finished connection attempt.
    pub(crate) fn attempt_done(&self) {
        self.attempts.send_modify(|n| *n += 1);
    }

    /// Whether the user of a per-user link has credentials stored now (`None`: not a per-user
    /// link, or the vault cannot say).
    pub(crate) async fn user_signed_in(&self) -> Option<bool> {
        self.stored_credential().await.map(|stored| stored != Stored::Missing)
    }

    /// Whether this link's servers take a key of each user's (`user_key_header`) rather than an
    /// OAuth sign-in.
    pub(crate) fn by_key(&self) -> bool {
        self.config.user_key_header.is_some()
    }

    /// The user's stored credential beside the current connection's (`None`: not a per-user
    /// link, or the vault cannot say). One read of the vault.
    pub(crate) async fn stored_credential(&self) -> Option<Stored> {
        let (_, vault) = self.signed_in_user.as_ref()?;
        let (vault, name) = (Arc::clone(vault), self.name.clone());
        if !self.by_key() {
            let signed_in =
                tokio::task::spawn_blocking(move || is_logged_in(&name, vault.as_ref()).ok()).await.ok().flatten()?;
            return Some(if signed_in { Stored::Same } else { Stored::Missing });
        }
        let key = tokio::task::spawn_blocking(move || vault.get(&key_vault_key(&name)).ok()).await.ok().flatten()?;
        let used = *self.key_used.lock().unwrap_or_else(PoisonError::into_inner);
        Some(match key {
            None => Stored::Missing,
            Some(key) if used.is_some_and(|used| used != key_fingerprint(&key)) => Stored::Replaced,
            Some(_) => Stored::Same,
        })
    }

    /// Asks the supervisor to connect again now and waits (at most `timeout`) for that attempt
    /// to finish.
    pub(crate) async fn reconnect_now(&self, timeout: Duration) {
        let mut rx = self.attempts.subscribe();
        let before = *rx.borrow_and_update();
        self.kick.notify_one();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|n| *n > before)).await;
    }

    /// Whether this is a per-user link that is down for want of its user's sign-in.
    pub(crate) fn needs_sign_in(&self) -> bool {
        let Some((user, _)) = &self.signed_in_user else { return false };
        match self.state() {
            LinkState::Retrying { error, .. } | LinkState::GaveUp { error, .. } => {
                error == sign_in_message(&self.name, user, self.by_key())
            }
            _ => false,
        }
    }

    /// The error of a call whose user has no usable sign-in of their own (a per-user server).
    pub(crate) fn sign_in_needed(&self) -> Option<ToolError> {
        let (user, _) = self.signed_in_user.as_ref()?;
        Some(ToolError::failed(sign_in_message(&self.name, user, self.by_key())))
    }

    /// Records the sandbox the server's current process runs in (`None`: unconfined or HTTP).
    pub(crate) fn set_containment(&self, containment: Option<Containment>) {
        *self.containment.lock().unwrap_or_else(PoisonError::into_inner) = containment;
    }

    /// What the sandbox blocked, by the server's own words in `text`, each with the config line
    /// that would allow it.
    pub(crate) fn explain_denials(&self, text: &str) -> Vec<String> {
        let guard = self.containment.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(containment) = guard.as_ref() else { return Vec::new() };
        containment
            .sandbox
            .explain(text, &containment.cwd)
            .into_iter()
            .map(|denial| {
                let line = |key: &str, path: &std::path::Path| {
                    format!("`[mcp.servers.{}.sandbox] {key} = [\"{}\"]`", self.name, path.display())
                };
                let allow = match &denial.kind {
                    // A path that does not exist here is one the server meant to create (or a
                    // folder the sandbox hides, where reads and writes look alike): its folder.
                    DenialKind::Path { path, write } => match (path.exists(), path.parent()) {
                        (false, Some(parent)) if *write => line("write", parent),
                        (false, Some(parent)) => {
                            format!("{} (or {} to write there)", line("read", parent), line("write", parent))
                        }
                        _ => line(if *write { "write" } else { "read" }, path),
                    },
                    DenialKind::Network => format!("`[mcp.servers.{}.sandbox] network = \"host\"`", self.name),
                    _ => format!("`[mcp.servers.{}.sandbox] enabled = false`", self.name),
                };
                format!("{denial}; to allow it, the user adds {allow}")
            })
            .collect()
    }

    pub(crate) fn state(&self) -> LinkState {
        self.state.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn set_state(&self, state: LinkState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
    }

    /// The gate names of this server's registered tools.
    pub(crate) fn tools(&self) -> Vec<String> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn set_tools(&self, tools: Vec<String>) {
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = tools;
    }

    /// Marks the first connection attempt as finished (waking every waiter).
    pub(crate) fn first_attempt_done(&self) {
        self.first_attempt.send_replace(true);
    }

    /// Marks the supervisor as ended (or never started).
    pub(crate) fn mark_ended(&self) {
        self.ended.send_replace(true);
    }

    /// Waits until [`ServerLink::mark_ended`].
    pub(crate) async fn wait_ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Whether the first connection attempt has finished.
    pub(crate) fn started(&self) -> bool {
        *self.first_attempt.borrow()
    }

    /// Waits until the first connection attempt has finished (or the bridge is dropped).
    pub(crate) async fn wait_started(&self) {
        let mut rx = self.first_attempt.subscribe();
        // An error means the sender is gone: nothing will change any more.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// `Err` when a reload took this server out of the configuration (or changed its entry): no
    /// new call reaches its old connections while they close.
    pub(crate) fn peer_allowed(&self) -> Result<(), ToolError> {
        if self.removed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ToolError::failed(format!(
                "MCP server `{}` was removed or changed in toolgate.toml and is being stopped; if it is still \
                 configured, try again in a few seconds (it restarts with its new entry)",
                self.name
            )));
        }
        Ok(())
    }

    /// The live peer, or the error a call gets while there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, ToolError> {
        self.peer_allowed()?;
        match self.state() {
            LinkState::Ready(peer) if !peer.is_transport_closed() => Ok(peer),
            other => Err(self.unavailable(&other)),
        }
    }

    /// The error for a call that cannot reach the server, saying why and what toolgate does.
    fn unavailable(&self, state: &LinkState) -> ToolError {
        let name = &self.name;
        let message = match state {
            LinkState::Connecting => {
                format!("MCP server `{name}` is still starting; try again in a few seconds")
            }
            LinkState::Ready(_) => {
                format!(
                    "MCP server `{name}` closed its connection; toolgate is reconnecting, try again in a few seconds"
                )
            }
            LinkState::Retrying { error, attempt, max, delay } => format!(
                "MCP server `{name}` is unavailable: {error}; toolgate retries (attempt {attempt} of {max} in {} s), try again later",
                delay.as_secs().max(1)
            ),
            LinkState::GaveUp { error, attempts } => format!(
                "MCP server `{name}` is unavailable after {attempts} reconnection attempts: {error}; fix the server \
                 (see toolgate's log) and restart toolgate to use its tools"
            ),
            LinkState::Misconfigured { error } => format!(
                "MCP server `{name}` is not usable: {error}; fix its entry in toolgate.toml (or the environment) and \
                 restart toolgate"
            ),
            LinkState::Stopped => format!("MCP server `{name}` is disconnected because toolgate is shutting down"),
        };
        ToolError::failed(message)
    }

    /// Routes progress notifications carrying `token` to `sink` until the guard drops.
    pub(crate) fn route_progress(&self, token: ProgressToken, sink: ProgressSink) -> ProgressRoute<'_> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner).insert(token.clone(), (sink, f64::NEG_INFINITY));
        let early: Vec<ProgressNotificationParam> = {
            let mut early = self.early_progress.lock().unwrap_or_else(PoisonError::into_inner);
            let (mine, others): (VecDeque<_>, VecDeque<_>) = early.drain(..).partition(|p| p.progress_token == token);
            *early = others;
            mine.into()
        };
        for params in early {
            self.progress(params);
        }
        ProgressRoute { link: self, token }
    }

    /// Delivers a progress notification to the call it belongs to; others are dropped (a
    /// server cannot report progress on calls it was not given). rmcp handles each
    /// notification in its own task, so they can arrive out of order: one that does not
    /// increase the call's progress is dropped, as the protocol says progress only grows.
    pub(crate) fn progress(&self, params: ProgressNotificationParam) {
        if !params.progress.is_finite() {
            return;
        }
        let sink = {
            let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.get_mut(&params.progress_token) {
                Some((sink, last)) if params.progress > *last => {
                    *last = params.progress;
                    sink.clone()
                }
                Some(_) => return,
                None => {
                    drop(routes);
                    let mut early = self.early_progress.lock().unwrap_or_else(PoisonError::into_inner);
                    if early.len() >= EARLY_PROGRESS_KEPT {
                        early.pop_front();
                    }
                    early.push_back(params);
                    return;
                }
            }
        };
        let total = params.total.filter(|t| t.is_finite());
        let message = params.message.as_deref().map(|m| clean_text(m, MAX_PROGRESS_MESSAGE_CHARS));
        sink.report(params.progress, total, message);
    }
}

/// Removes a call's progress route when the call ends.
#[derive(Debug)]
pub(crate) struct ProgressRoute<'a> {
    link: &'a ServerLink,
    token: ProgressToken,
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        self.link.progress.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
    use toolgate_core::ProgressSink;

    use super::*;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn recorder() -> (ProgressSink, Arc<Mutex<Vec<f64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = Arc::clone(&seen);
            ProgressSink::new(move |p| seen.lock().unwrap().push(p.progress))
        };
        (sink, seen)
    }

    #[test]
    fn progress_that_beats_the_route_is_delivered_when_the_call_registers() {
        let link = ServerLink::new("s".into(), ServerConfig::default());
        link.progress(ProgressNotificationParam::new(token(7), 0.0));
        link.progress(ProgressNotificationParam::new(token(7), 1.0));
        let (sink, seen) = recorder();
        let route = link.route_progress(token(7), sink);
        assert_eq!(*seen.lock().unwrap(), vec![0.0, 1.0]);
        link.progress(ProgressNotificationParam::new(token(7), 0.5));
        link.progress(ProgressNotificationParam::new(token(7), 2.0));
        assert_eq!(*seen.lock().unwrap(), vec![0.0, 1.0, 2.0], "progress only grows");
        drop(route);
        assert!(link.early_progress.lock().unwrap().is_empty());
    }

    #[test]
    fn made_up_tokens_hold_a_bounded_buffer() {
        let link = ServerLink::new("s".into(), ServerConfig::default());
        for n in 0..10_000 {
            link.progress(ProgressNotificationParam::new(token(n), 1.0));
        }
        assert_eq!(link.early_progress.lock().unwrap().len(), EARLY_PROGRESS_KEPT);
    }
}
