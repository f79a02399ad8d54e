//! The connections of callers whose team gateway grants override a server's settings
//! (`config_overrides`, [`ServerOverrides`]): one per distinct set of overrides, keyed by the
//! server (each server has its own [`Variants`]) and the overrides, opened on the first call that
//! needs it and used by no caller whose overrides differ. Each is a [`ServerLink`] of its own
//! with the merged entry, the same credentials as the server's plain connection (the user's own
//! sign-in in a user's gate) and the sandbox of the server's own entry.
//!
//! No supervisor keeps them: a connection that closed is opened again by the next call that
//! needs it, and each closes when its server stops (a shutdown, a reload that changed or removed
//! the entry), when its user signs out, or when more than [`MAX_VARIANTS`] are open for the
//! server (the least recently used goes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;
use toolgate_core::ToolError;

use super::connect::{ConnectEnv, Connection, connect};
use super::link::{LinkState, ServerLink, Stored, sign_in_message};
use super::overrides::ServerOverrides;

/// Most connections with overrides kept open per server.
pub(crate) const MAX_VARIANTS: usize = 32;

/// One server's connections with overrides, by the overrides' key.
#[derive(Debug)]
pub(crate) struct Variants {
    env: ConnectEnv,
    /// The server's own stop token: cancelled, every connection here closes.
    stop: CancellationToken,
    /// A team gateway: the merged entry must pass its check (a credential header needs `shared`).
    in_gateway: bool,
    open: Mutex<HashMap<String, Arc<Variant>>>,
    /// A clock of uses, for the least recently used.
    uses: AtomicU64,
}

#[derive(Debug)]
struct Variant {
    link: Arc<ServerLink>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    /// Closes this variant's connections.
    stop: CancellationToken,
    /// Closes its current connection alone (a child of `stop`).
    current: Mutex<Option<CancellationToken>>,
    last_used: AtomicU64,
}

impl Variants {
    pub(crate) fn new(env: ConnectEnv, stop: CancellationToken, in_gateway: bool) -> Self {
        Variants { env, stop, in_gateway, open: Mutex::new(HashMap::new()), uses: AtomicU64::new(0) }
    }

    /// The link, connected, that a call with `overrides` (from grant `grant`) goes through.
    pub(crate) async fn link(
        &self,
        base: &ServerLink,
        overrides: &ServerOverrides,
        grant: i64,
    ) -> Result<Arc<ServerLink>, ToolError> {
        let name = &base.name;
        if self.stop.is_cancelled() {
            return Err(ToolError::failed(format!(
                "MCP server `{name}` is disconnected (toolgate is shutting down, or its entry changed); try again \
                 in a few seconds"
            )));
        }
        let config = overrides.apply(&base.config);
        let problem = overrides
            .args_problem(&base.config)
            .or_else(|| config.problem(name))
            .or_else(|| self.in_gateway.then(|| config.gateway_problem(name)).flatten());
        if let Some(problem) = problem {
            return Err(ToolError::failed(format!(
                "grant {grant} of this gateway gives your calls settings of MCP server `{name}` it cannot run with: \
                 {problem}; ask an admin to fix the grant"
            )));
        }
        let variant = self.variant(base, config, overrides.connection_key());
        let _one = variant.connecting.lock().await;
        if variant.link.peer().is_ok() {
            // Opened with a key its user has replaced since: closed, and opened with the new one.
            if variant.link.stored_credential().await != Some(Stored::Replaced) {
                return Ok(Arc::clone(&variant.link));
            }
            if let Some(open) = variant.current.lock().unwrap_or_else(PoisonError::into_inner).take() {
                open.cancel();
            }
        }
        match connect(&variant.link, &self.env).await {
            Ok(connection) => {
                variant.link.set_state(LinkState::Ready(connection.peer().clone()));
                let this = variant.stop.child_token();
                *variant.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(this.clone());
                tokio::spawn(keep(Arc::clone(&variant.link), connection, this));
                Ok(Arc::clone(&variant.link))
            }
            Err(e) => {
                tracing::error!(server = %name, grant, "cannot connect to MCP server with a grant's settings: {e}");
                let why = e.summary(&variant.link);
                if let Some((user, _)) = &variant.link.signed_in_user
                    && why == sign_in_message(name, user, variant.link.by_key())
                {
                    return Err(ToolError::failed(why));
                }
                Err(ToolError::failed(format!(
                    "MCP server `{name}` could not be reached with the settings grant {grant} of this gateway gives \
                     your calls: {why}"
                )))
            }
        }
    }

    /// The variant for `key`, made when there is none (the least recently used one closed when
    /// there are too many).
    fn variant(&self, base: &ServerLink, config: super::ServerConfig, key: String) -> Arc<Variant> {
        let now = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = open.get(&key) {
            found.last_used.store(now, Ordering::Relaxed);
            return Arc::clone(found);
        }
        if open.len() >= MAX_VARIANTS
            && let Some(oldest) =
                open.iter().min_by_key(|(_, v)| v.last_used.load(Ordering::Relaxed)).map(|(k, _)| k.clone())
            && let Some(gone) = open.remove(&oldest)
        {
            gone.stop.cancel();
        }
        let mut link = ServerLink::new(base.name.clone(), config);
        link.signed_in_user.clone_from(&base.signed_in_user);
        link.gateway_gate = base.gateway_gate;
        link.own_config = Some(base.config.clone());
        let variant = Arc::new(Variant {
            link: Arc::new(link),
            connecting: tokio::sync::Mutex::new(()),
            stop: self.stop.child_token(),
            current: Mutex::new(None),
            last_used: AtomicU64::new(now),
        });
        open.insert(key, Arc::clone(&variant));
        variant
    }
}

/// Keeps a connection until it closes, its server stops, or its user signs out.
async fn keep(link: Arc<ServerLink>, mut connection: Connection, stop: CancellationToken) {
    loop {
        tokio::select! {
            // Its state is left alone: a new connection of the link may be in place already.
            () = stop.cancelled() => {
                connection.close().await;
                return;
            }
            () = connection.closed() => {
                // The next call connects again.
                link.set_state(LinkState::Connecting);
                return;
            }
            () = link.kick.notified() => {
                if link.stored_credential().await == Some(Stored::Same) {
                    continue;
                }
                connection.close().await;
                link.set_state(LinkState::Connecting);
                return;
            }
        }
    }
}
