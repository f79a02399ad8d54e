//! toolgate's state in PostgreSQL, so that several `toolgate serve` nodes share one database:
//! [`PgStore`] implements the per-area traits of `toolgate-store` on `tokio-postgres` with a
//! `deadpool-postgres` pool, TLS by rustls. SQLite (`toolgate_store::Store`) stays the embedded
//! default; this crate depends on `toolgate-store` for the traits and their types, never the
//! other way round.
//!
//! | Area | Trait | Module |
//! |---|---|---|
//! | revision numbers of identities and grants, kept in memory while `LISTEN` hears every change | (in both traits below) | `migrations` (triggers), `revisions`, `listen` |
//! | principals, memberships, API keys, page sessions | [`IdentityStore`] | `identity` |
//! | grants and access requests | [`GrantStore`] | `grants` |
//! | the approvals inbox and its history | [`ApprovalStore`] | `approvals` |
//! | secrets, sealed under the nodes' shared key | [`SecretStore`] | `secrets` |
//! | background jobs, their events and leases, the live job runners | [`JobStore`] | `jobs` |
//! | routines, their fires, the scheduler lease, webhook signatures seen | [`RoutineStore`] | `routines` |
//! | the audit log, one hash chain per workspace, written with `COPY` | `AuditStore` ([`PgAuditLog`]) | `audit` |
//! | path locks (`lock_paths`), one take at a time per workspace across nodes | [`LockStore`] | `locks` |
//! | custom tools added with `toolgate tools add` | [`CustomToolStore`] | `custom_tools` |
//! | undelivered messages (`message`'s outbox) | [`OutboxStore`] | `outbox` |
//! | agent sessions and messages, team boards and mailboxes, handoff routes | [`SessionStore`] | `sessions` |
//! | which node holds each background process and browser session | [`LocalStore`] | `processes` |
//! | cached embeddings (`skill_search`), one table for every workspace | [`EmbeddingCache`] | `embedding_cache` |
//! | a single node's SQLite tables copied row for row, ids kept (`toolgate admin migrate`) | [`read_sqlite`], [`PgStore::import_sqlite`] | `from_sqlite`, `import` |
//! | the configuration every node shares (`[tools]`, `[mcp]`, `[gate] dialect`), its `config` revision | (on [`PgStore`]) | `shared_config` |
//! | the memory index of a workspace: notes, chunks in PostgreSQL's own text search, vectors (ranked in process; pgvector is not used yet) | `IndexBackend` ([`PgStore::memory_index`]) | `memory` |
//!
//! # Synchronous calls on an async client
//!
//! The store traits are synchronous, and toolgate calls them from inside tokio runtimes (the
//! SQLite store runs its query inline). `tokio-postgres` is async, and blocking on a future
//! from inside a runtime (`Handle::block_on`) panics. So a [`PgStore`] owns one thread of its
//! own running a current-thread runtime that holds the pool (`bridge`): each trait method
//! sends its work there as a task and waits for the answer on a std channel. The caller's
//! thread blocks for the query's round trip, as it does for SQLite's query; the store's
//! thread runs any number of queries at once (up to the pool's size), so callers on many
//! threads are not serialized. The same method works from a plain thread, a multi-thread
//! runtime's worker and a current-thread runtime. Dropping the last handle ends the thread.
//!
//! # Schema
//!
//! `migrations` lists PostgreSQL's own DDL, in versions like SQLite's list; [`PgStore::connect`]
//! applies the missing ones in one transaction under a transaction-level advisory lock, so
//! two nodes starting at once do not both migrate (the second waits, then finds nothing to
//! do). A database newer than the build is refused.
//!
//! # Example
//!
//! ```no_run
//! use toolgate_postgres::PgStore;
//! use toolgate_store::IdentityStore;
//!
//! let store = PgStore::connect("postgres://toolgate@db.internal/toolgate?sslmode=require").unwrap();
//! println!("identity revision {}", store.identity_revision().unwrap());
//! ```

#![deny(missing_docs)]

mod approvals;
mod audit;
mod bridge;
mod custom_tools;
mod embedding_cache;
mod error;
mod from_sqlite;
mod grants;
mod identity;
mod import;
mod jobs;
mod lag;
mod listen;
mod locks;
mod memory;
mod migrations;
mod outbox;
mod processes;
mod revisions;
mod routines;
mod secrets;
mod sessions;
mod shared_config;
mod store;

pub use audit::PgAuditLog;
pub use from_sqlite::{Copied, SqliteReadError, SqliteRows, read_sqlite, sqlite_copy_tables};
pub use listen::LISTEN_APPLICATION_NAME;
pub use migrations::SCHEMA_VERSION;
pub use shared_config::StoredConfig;
pub use store::{PgStore, PoolUse};
#[doc(no_inline)]
pub use toolgate_store::{
    ApprovalStore, CustomToolStore, EmbeddingCache, GrantStore, IdentityStore, JobStore, LocalStore, LockStore,
    OutboxStore, RoutineStore, SecretStore, SessionStore, StoreError,
};
