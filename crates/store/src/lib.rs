//! toolgate's persistence, in embedded SQLite: the audit log, "allow always" approval grants,
//! encrypted secrets (MCP OAuth tokens: [`Store::secret_put`], AES-256-GCM), and other state as
//! their issues land.
//!
//! [`Store::open`] opens (or creates) `<workspace>/.toolgate/state.db` in WAL mode and migrates
//! its schema. [`AuditLog`] takes [`AuditRecord`]s from the call path without waiting on disk: a
//! background thread batches them into transactions, and [`AuditLog::flush`] (or dropping the
//! log) waits until everything sent so far is written.
//!
//! # Example
//!
//! ```
//! use toolgate_store::{AuditLog, AuditRecord, Store};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let db = dir.path().join("state.db");
//! let log = AuditLog::open(&db).unwrap();
//! log.record(AuditRecord { tool: "echo".into(), outcome: "ok".into(), ..AuditRecord::default() });
//! log.flush();
//! let store = Store::open(&db).unwrap();
//! assert_eq!(store.audit_tail(10).unwrap().len(), 1);
//! ```
//!
//! Architecture invariant: only this crate knows SQL and the database layout.

#![deny(missing_docs)]

mod audit;
mod custom_tools;
mod db;
mod embedding_cache;
mod error;
mod grants;
// The sandbox's process token, the same file (this crate must not depend on toolgate-sandbox).
pub mod memory;
#[path = "../../sandbox/src/process_token.rs"]
mod process_token;
mod secrets;
mod sessions;

pub use audit::{AuditLog, AuditRecord, INTERRUPTED, STARTED};
pub use custom_tools::StoredCustomTool;
pub use db::Store;
pub use embedding_cache::embedding_key;
pub use error::StoreError;
pub use grants::Grant;
pub use secrets::{SECRET_KEY_ENV, SECRET_KEY_FILE, SecretError};
pub use sessions::{HandoffRoute, MessageRecord, SessionFilter, SessionRecord, TeamMessage, TeamTask};
