//! toolgate's persistence: every table and every query, by area, each area behind a trait so
//! that the rest of toolgate never names a backend. SQLite, embedded, is the backend today.
//!
//! | Area | Trait | Module |
//! |---|---|---|
//! | the audit log | [`AuditStore`] (SQLite: [`AuditLog`], a batching writer thread) | `audit` |
//! | grants ("allow always" decisions, a gateway's grants) and access requests | [`GrantStore`] | `grants` |
//! | encrypted secrets (OAuth tokens, custom tools' values) | [`SecretStore`] | `secrets` |
//! | agent sessions, messages, teams, handoff routes | [`SessionStore`] | `sessions` |
//! | stored custom tools | [`CustomToolStore`] | `custom_tools` |
//! | cached embeddings of skills | [`EmbeddingCache`] | `embedding_cache` |
//! | path locks (`lock_paths`), shared by every process on a workspace | [`LockStore`] | `locks` |
//! | background jobs, their event logs and leases | [`JobStore`] | `jobs` |
//! | routines, their fires, the scheduler lease, seen webhook signatures | [`RoutineStore`] | `routines` |
//! | undelivered messages (`message`'s outbox) | [`OutboxStore`] | `message_outbox` |
//! | which node holds each background process and browser session | [`LocalStore`] | `processes` |
//! | agent memory | [`memory::MemoryStore`] | [`memory`] |
//!
//! [`Store::open`] opens (or creates) `<workspace>/.toolgate/state.db` in WAL mode and migrates
//! its schema (`db`); [`Store`] implements every area's trait but the audit log's, and
//! [`Stores::sqlite`] hands it out as one trait object per area. [`AuditLog`] takes
//! [`AuditRecord`]s from the call path without waiting on disk: a background thread batches
//! them into transactions, and [`AuditStore::flush`] (or dropping the log) waits until
//! everything sent so far is written.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use toolgate_store::{AuditLog, AuditRecord, AuditStore, Store, Stores};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let db = dir.path().join("state.db");
//! let log = AuditLog::open(&db).unwrap();
//! log.record(AuditRecord { tool: "echo".into(), outcome: "ok".into(), ..AuditRecord::default() });
//! log.flush();
//! assert_eq!(log.audit_tail(10).unwrap().len(), 1);
//! let stores = Stores::sqlite(Arc::new(Store::open(&db).unwrap()));
//! stores.custom_tools.custom_tool_put("hello", "{}").unwrap();
//! assert_eq!(stores.custom_tools.custom_tools().unwrap()[0].name, "hello");
//! ```
//!
//! Architecture invariant: only this crate knows SQL and the database layout.

#![deny(missing_docs)]

mod approvals;
mod audit;
mod custom_tools;
mod db;
mod embedding_cache;
mod error;
mod export;
mod grants;
mod identity;
mod jobs;
mod locks;
pub mod memory;
mod outbox;
mod processes;
// The sandbox's process token, the same file (this crate must not depend on toolgate-sandbox).
#[path = "../../sandbox/src/process_token.rs"]
mod process_token;
mod revisions;
mod routines;
mod secrets;
mod sessions;
mod stores;

pub use approvals::{
    ApprovalDecision, ApprovalEvent, ApprovalFilter, ApprovalRecord, ApprovalStatus, ApprovalStore, DecideOutcome,
};
pub use audit::chain;
pub use audit::{
    AuditLog, AuditOptions, AuditRecord, AuditStore, Broken, ChainEnds, ChainReport, GAP, GAP_EVENT, GENESIS,
    INTERRUPTED, PRUNE_EVENT, Pruned, STARTED, SessionCalls, SessionQuery, TEXT_EVENT,
};
pub use custom_tools::{CustomToolStore, StoredCustomTool};
pub use db::{SCHEMA_VERSION, Store, audit_chain_version, create_at_version};
pub use embedding_cache::{EmbeddingCache, embedding_key};
pub use error::StoreError;
pub use export::Cell;
pub use grants::{
    AccessDecision, AccessRequest, AccessStatus, Grant, GrantMode, GrantStore, ToolGrant, approval_grant_subject,
    approvals_of_grant_subject,
};
pub use identity::{ApiKeyRecord, IdentityStore, Membership, Principal, PrincipalKind};
pub use jobs::{JOB_INTERRUPTED, JOB_INTERRUPTED_EVENT, JobEvent, JobFilter, JobRecord, JobStore};
pub use locks::{LockOwner, LockStore, PathLock};
pub use outbox::{OutboxEntry, OutboxStore};
pub use processes::{Local, LocalOwner, LocalStore};
pub use routines::{RoutineFire, RoutineStore, StoredRoutine};
pub use secrets::{SECRET_KEY_ENV, SECRET_KEY_FILE, SecretCipher, SecretError, SecretStore};
pub use sessions::{
    HandoffRoute, MessageRecord, SessionFilter, SessionRecord, SessionStore, TaskFilter, TaskOrder, TeamMessage,
    TeamTask,
};
pub use stores::Stores;
