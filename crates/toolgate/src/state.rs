//! Where toolgate's state lives: each workspace's `.toolgate/state.db` (SQLite, embedded), and,
//! with `[store] url`, a PostgreSQL database that several `toolgate serve` nodes share for the
//! areas `toolgate-postgres` keeps (every area, the memory index too, opened by `memory.rs`;
//! secrets only when `TOOLGATE_SECRET_KEY` gives every node their key). Everything that opens
//! the state (the gate, `serve`'s inbox, the admin commands) opens it here, so a node and its
//! operator's commands never see two different inboxes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

pub use toolgate_postgres::PgAuditLog;
use toolgate_postgres::PgStore;
use toolgate_store::{AuditOptions, SECRET_KEY_ENV, SecretCipher, SecretStore, Store, StoreError, Stores};

use crate::config::StoreConfig;

/// The state of one workspace: its SQLite file, with the shared areas in PostgreSQL when
/// `config.url` is set. Connecting checks (and brings up to date) the database's schema.
pub fn open(config: &StoreConfig, db: &Path) -> Result<Stores, StoreError> {
    with_shared(config, Arc::new(Store::open(db)?))
}

/// The areas of `local` (a workspace's open state database), the shared ones in PostgreSQL
/// when `config.url` is set. Jobs and routines are shared too: every node's scheduler competes
/// for one lease, so one node at a time fires the routines, and a job runs on the node that
/// created or claimed it while every node reads, waits on and cancels it.
/// Path locks, stored custom tools and the message outbox are shared as well.
pub fn with_shared(config: &StoreConfig, local: Arc<Store>) -> Result<Stores, StoreError> {
    let local = Stores::sqlite(local);
    match &config.url {
        None => Ok(local),
        Some(url) => {
            let shared = Arc::new(shared(url)?);
            // Secrets are sealed with a key: shared only when every node can have it.
            let secrets: Arc<dyn SecretStore> =
                if shared.keeps_secrets() { shared.clone() } else { Arc::clone(&local.secrets) };
            Ok(Stores {
                approvals: shared.clone(),
                grants: shared.clone(),
                jobs: shared.clone(),
                routines: shared.clone(),
                sessions: shared.clone(),
                // Every node mounts the same workspaces: a path lock must stop the other nodes.
                locks: shared.clone(),
                custom_tools: shared.clone(),
                outbox: shared.clone(),
                // Vectors by model and text hash: one text's vector serves every node.
                embeddings: shared.clone(),
                // A call about a background process or a browser session may reach a node that
                // does not hold it.
                locals: shared.clone(),
                identity: shared,
                secrets,
            })
        }
    }
}

/// The audit log of `workspace` (its canonical path: the name every node gives it on the shared
/// filesystem) in the shared database when `config.url` is set: every node's calls in one hash
/// chain per workspace (a gateway's per-user gates too: `audit_url`). `None`: the log stays in
/// the workspace's `.toolgate/state.db`.
pub fn shared_audit_log(
    config: &StoreConfig,
    workspace: &Path,
    options: AuditOptions,
) -> Result<Option<PgAuditLog>, StoreError> {
    let Some(url) = config.url.as_ref().or(config.audit_url.as_ref()) else { return Ok(None) };
    PgAuditLog::open(&shared(url)?, &workspace.to_string_lossy(), options).map(Some)
}

/// [`shared_audit_log`] for reading only (`toolgate audit`): no writer.
pub fn shared_audit_reader(config: &StoreConfig, workspace: &Path) -> Result<Option<PgAuditLog>, StoreError> {
    let Some(url) = config.url.as_ref().or(config.audit_url.as_ref()) else { return Ok(None) };
    PgAuditLog::reader(&shared(url)?, &workspace.to_string_lossy()).map(Some)
}

/// How this process's connection to the shared database is doing (`/metrics`), when
/// `config.url` names one it has opened.
pub fn shared_status(config: &StoreConfig) -> Option<SharedStatus> {
    let pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let store = pools.get(config.url.as_ref().or(config.audit_url.as_ref())?)?;
    Some(SharedStatus { pool: store.pool_use(), in_step: store.revisions_in_step(), notify_lag: store.notify_lag() })
}

/// See [`shared_status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedStatus {
    /// The pool's connections.
    pub pool: toolgate_postgres::PoolUse,
    /// Whether changes other nodes make reach this one by `NOTIFY` (the `LISTEN` connection is
    /// up and read everything since it connected); otherwise each call reads them.
    pub in_step: bool,
    /// How long this node's latest probe notification took to reach its `LISTEN` connection;
    /// `None` until one has since that connection was made.
    pub notify_lag: Option<std::time::Duration>,
}

static POOLS: LazyLock<Mutex<HashMap<String, PgStore>>> = LazyLock::new(Mutex::default);

/// One pool per database in a process: a gateway builds a gate per user, and each would
/// otherwise open connections of its own to the same database.
pub(crate) fn shared(url: &str) -> Result<PgStore, StoreError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(StoreError::Backend {
            doing: "reading `[store] url`",
            source: "expected a PostgreSQL URL, postgres://user@host/database (leave `url` out to keep \
                     everything in .toolgate/state.db)"
                .into(),
        });
    }
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(store) = pools.get(url) {
        return Ok(store.clone());
    }
    let store = PgStore::connect(url)?;
    let store = match SecretCipher::from_env() {
        Ok(Some(cipher)) => store.with_secret_cipher(cipher),
        Ok(None) => {
            tracing::warn!(
                "secrets (upstream sign-ins, the key that seals requestStates) stay in each node's \
                 .toolgate/state.db: set {SECRET_KEY_ENV} to the same key on every node to share them"
            );
            store
        }
        Err(e) => {
            tracing::warn!("secrets stay in each node's .toolgate/state.db: {e}");
            store
        }
    };
    pools.insert(url.to_owned(), store.clone());
    Ok(store)
}
