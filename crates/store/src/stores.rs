//! [`Stores`]: one handle per area, all from one backend.

use std::sync::Arc;

use crate::{
    ApprovalStore, CustomToolStore, EmbeddingCache, GrantStore, IdentityStore, JobStore, LockStore, RoutineStore,
    SecretStore, SessionStore, Store,
};
use crate::{LocalStore, OutboxStore};

/// The state of one database, one trait object per area, for the code that wires families
/// together (the gate): each family takes the areas it uses, never the backend's type. The audit
/// log is not here: its writer is opened on its own ([`crate::AuditLog::open`]) when the audit
/// log is on.
#[derive(Debug, Clone)]
pub struct Stores {
    /// The approvals inbox: calls waiting for a person's decision.
    pub approvals: Arc<dyn ApprovalStore>,
    /// "Allow always" approval grants.
    pub grants: Arc<dyn GrantStore>,
    /// Encrypted secrets (OAuth tokens, custom tools' values, WASM manifests).
    pub secrets: Arc<dyn SecretStore>,
    /// Agent sessions, their messages, teams and handoff routes.
    pub sessions: Arc<dyn SessionStore>,
    /// Stored custom tool definitions.
    pub custom_tools: Arc<dyn CustomToolStore>,
    /// Cached embeddings (`skill_search`).
    pub embeddings: Arc<dyn EmbeddingCache>,
    /// Path locks (`lock_paths`), honoured by every process on the workspace.
    pub locks: Arc<dyn LockStore>,
    /// Messages the `message` tool could not deliver (`toolgate-automation`).
    pub outbox: Arc<dyn OutboxStore>,
    /// Background jobs, their event logs and leases (`toolgate-automation`).
    pub jobs: Arc<dyn JobStore>,
    /// Routines, their fires and the scheduler lease (`toolgate-automation`).
    pub routines: Arc<dyn RoutineStore>,
    /// Users, groups, agents and API keys (`toolgate-gateway`).
    pub identity: Arc<dyn IdentityStore>,
    /// Which node holds each background process (`process`) and browser session (`browser`).
    pub locals: Arc<dyn LocalStore>,
}

impl Stores {
    /// Every area in one SQLite database (one connection, shared).
    pub fn sqlite(store: Arc<Store>) -> Stores {
        Stores {
            approvals: store.clone(),
            grants: store.clone(),
            outbox: store.clone(),
            secrets: store.clone(),
            sessions: store.clone(),
            custom_tools: store.clone(),
            embeddings: store.clone(),
            jobs: store.clone(),
            routines: store.clone(),
            identity: store.clone(),
            locals: store.clone(),
            locks: store,
        }
    }
}
