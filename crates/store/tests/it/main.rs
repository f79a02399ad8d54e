//! The store's contract, checked on every backend through the area traits only.
//!
//! Each test runs its checks on a fresh, empty database of every backend [`backends`] lists:
//! SQLite, and PostgreSQL (`toolgate-postgres` on a throwaway cluster) for the areas it keeps
//! so far ([`Area`]; a test of an area names it with [`on_every_backend_of`]). A new backend adds
//! one [`Database`] and one line there, and every test here runs against it; a new area adds its
//! trait's checks as a module here. What only one backend has (SQLite's key file, its rows poked
//! with SQL) is tested beside that backend's code.
#![allow(clippy::unwrap_used)]

mod approvals;
mod audit;
mod audit_chain;
mod custom_tools;
mod embedding_cache;
mod grants;
mod identity;
mod jobs;
mod locks;
mod outbox;
mod processes;
mod routines;
mod secrets;
mod sessions;
mod teams;

// Memory through the public API (local notes in real files, managed notes in the store) on
// every backend, and what the SQLite backend's encryption writes to disk.
mod memory;
mod sqlite_secrets;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_postgres::PgStore;
use toolgate_store::memory::MemoryIndex;
use toolgate_store::{AuditLog, AuditStore, SecretCipher, Store, Stores};
use toolgate_testkit::postgres::Cluster;

/// A fresh, empty database of one backend.
pub(crate) trait Database {
    /// A new connection to it, one handle per area: what another process (or node) would have.
    fn connect(&self) -> Stores;
    /// A new audit log over it, with a writer of its own.
    fn audit(&self) -> Arc<dyn AuditStore>;
    /// A new handle on the memory index of `workspace` (a folder), as a node opens it.
    fn memory(&self, workspace: &Path) -> MemoryIndex;
}

/// An area of the store whose test runs on the backends that keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    /// The approvals inbox.
    Approvals,
    /// Secrets.
    Secrets,
    /// Background jobs, their events and leases.
    Jobs,
    /// Routines, their fires, the scheduler lease and webhook signatures.
    Routines,
    /// Path locks (`lock_paths`).
    Locks,
    /// Stored custom tools.
    CustomTools,
    /// The message outbox.
    Outbox,
    /// Agent sessions and their messages, team boards and mailboxes, handoff routes.
    Sessions,
    /// Which node holds each background process.
    Processes,
    /// The memory index: notes, chunks, full text and vectors.
    Memory,
    /// Cached embeddings (`skill_search`).
    EmbeddingCache,
    /// Any area that only SQLite keeps so far.
    Other,
}

/// A backend under test.
struct Backend {
    name: &'static str,
    fresh: fn() -> Box<dyn Database>,
    keeps: fn(Area) -> bool,
}

/// Every backend the tests run on.
fn backends() -> Vec<Backend> {
    vec![
        Backend { name: "sqlite", fresh: Sqlite::fresh, keeps: |_| true },
        Backend {
            name: "postgres",
            fresh: Postgres::fresh,
            keeps: |area| {
                matches!(
                    area,
                    Area::Approvals
                        | Area::Secrets
                        | Area::Jobs
                        | Area::Routines
                        | Area::Locks
                        | Area::CustomTools
                        | Area::Outbox
                        | Area::Sessions
                        | Area::Memory
                        | Area::EmbeddingCache
                        | Area::Processes
                )
            },
        },
    ]
}

/// Runs `check` on a fresh database of every backend that keeps every area; a failure says
/// which backend failed.
pub(crate) fn on_every_backend(check: impl Fn(&dyn Database)) {
    on_every_backend_of(Area::Other, check);
}

/// Runs `check` on a fresh database of every backend that keeps `area`.
pub(crate) fn on_every_backend_of(area: Area, check: impl Fn(&dyn Database)) {
    for backend in backends().into_iter().filter(|b| (b.keeps)(area)) {
        let db = (backend.fresh)();
        if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| check(&*db))) {
            eprintln!("(the failure above is on the {} backend)", backend.name);
            std::panic::resume_unwind(panic);
        }
    }
}

/// SQLite: a database file in a temporary folder.
struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sqlite {
    fn fresh() -> Box<dyn Database> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".toolgate/state.db");
        Box::new(Sqlite { _dir: dir, path })
    }
}

impl Database for Sqlite {
    fn connect(&self) -> Stores {
        Stores::sqlite(Arc::new(Store::open(&self.path).unwrap()))
    }

    fn audit(&self) -> Arc<dyn AuditStore> {
        Arc::new(AuditLog::open(&self.path).unwrap())
    }

    /// In the workspace's own state database, where a node keeps it.
    fn memory(&self, workspace: &Path) -> MemoryIndex {
        MemoryIndex::open(Some(&workspace.join(".toolgate/state.db"))).unwrap()
    }
}

/// PostgreSQL: a database on a throwaway cluster for the areas it keeps, as a node configured
/// with `[store] url` has them; the audit log of these tests in a SQLite file beside it.
struct Postgres {
    url: String,
    local: Box<dyn Database>,
    /// Dropped last: stops the server.
    _cluster: Cluster,
}

impl Postgres {
    fn fresh() -> Box<dyn Database> {
        let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
        Box::new(Postgres { url, local: Sqlite::fresh(), _cluster: cluster })
    }
}

impl Database for Postgres {
    fn connect(&self) -> Stores {
        // Every node is given the same key (`TOOLGATE_SECRET_KEY`); a fixed one here.
        let cipher = SecretCipher::from_hex(&"5e".repeat(32)).unwrap();
        let shared = Arc::new(PgStore::connect(&self.url).unwrap_or_else(|e| panic!("{e}")).with_secret_cipher(cipher));
        Stores {
            approvals: shared.clone(),
            grants: shared.clone(),
            secrets: shared.clone(),
            jobs: shared.clone(),
            routines: shared.clone(),
            locks: shared.clone(),
            custom_tools: shared.clone(),
            outbox: shared.clone(),
            sessions: shared.clone(),
            embeddings: shared.clone(),
            locals: shared.clone(),
            identity: shared,
        }
    }

    fn audit(&self) -> Arc<dyn AuditStore> {
        self.local.audit()
    }

    /// Keyed by the workspace's path, on a connection of its own (another node).
    fn memory(&self, workspace: &Path) -> MemoryIndex {
        PgStore::connect(&self.url).unwrap_or_else(|e| panic!("{e}")).memory_index(&workspace.to_string_lossy())
    }
}
