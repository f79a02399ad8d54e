//! Which node holds each background process (`exec` with `background: true`): the
//! [`ProcessStore`] trait and its SQLite implementation on [`Store`] (table
//! `background_processes`, its migration in `db.rs`).
//!
//! A process runs on the machine of the `toolgate serve` that started it and nowhere else; its
//! pipes and its process group cannot move. With several nodes on one shared store, a call
//! about it (`process poll`) may reach another node, which reads here who holds it: the node's
//! name and URL, the workspace and the user it belongs to (only that user, in that workspace,
//! may hear of it). A row lives as long as the owning node keeps the process in its table.

use std::fmt::Debug;

use crate::error::Context;
use crate::{Store, StoreError};

/// One background process, as every node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOwner {
    /// The id `exec` returned (unique: an unpredictable `tg-proc-...`).
    pub id: String,
    /// The workspace it runs in (its canonical path, as text).
    pub workspace: String,
    /// The user who started it.
    pub user: String,
    /// The node that runs it (`[node] name`).
    pub node: String,
    /// Where that node answers MCP (`[node] url`), when it says.
    pub node_url: Option<String>,
    /// The command line, for listing.
    pub command: String,
    /// When it started, Unix milliseconds.
    pub started_ms: i64,
}

/// The background processes of every node on the database.
pub trait ProcessStore: Send + Sync + Debug {
    /// Records `process` (replacing a row with the same id).
    fn process_record(&self, process: &ProcessOwner) -> Result<(), StoreError>;

    /// The process `id`, on whichever node.
    fn process_owner(&self, id: &str) -> Result<Option<ProcessOwner>, StoreError>;

    /// The processes of `user` in `workspace`, on every node, oldest first.
    fn processes_of(&self, workspace: &str, user: &str) -> Result<Vec<ProcessOwner>, StoreError>;

    /// Removes the process `id` if `node` holds it (a node never removes another's); returns
    /// whether it did.
    fn process_forget(&self, id: &str, node: &str) -> Result<bool, StoreError>;

    /// Removes every process `node` holds (a node starting again holds none: they ended with
    /// its previous run); returns how many.
    fn processes_forget_node(&self, node: &str) -> Result<usize, StoreError>;
}

/// The table, created by the migration of the same name in `db.rs`.
pub(crate) const MIGRATION: &str = "CREATE TABLE IF NOT EXISTS background_processes (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        user TEXT NOT NULL,
        node TEXT NOT NULL,
        node_url TEXT,
        command TEXT NOT NULL,
        started_ms INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX IF NOT EXISTS background_processes_owner ON background_processes (workspace, user);
     CREATE INDEX IF NOT EXISTS background_processes_node ON background_processes (node);";

const COLUMNS: &str = "id, workspace, user, node, node_url, command, started_ms";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProcessOwner> {
    Ok(ProcessOwner {
        id: r.get(0)?,
        workspace: r.get(1)?,
        user: r.get(2)?,
        node: r.get(3)?,
        node_url: r.get(4)?,
        command: r.get(5)?,
        started_ms: r.get(6)?,
    })
}

impl ProcessStore for Store {
    fn process_record(&self, p: &ProcessOwner) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                &format!("INSERT OR REPLACE INTO background_processes ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                rusqlite::params![p.id, p.workspace, p.user, p.node, p.node_url, p.command, p.started_ms],
            )
            .map(drop)
            .doing("recording a background process")
        })
    }

    fn process_owner(&self, id: &str) -> Result<Option<ProcessOwner>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM background_processes WHERE id = ?1"))
                .doing("finding a background process")?;
            let mut rows = stmt.query_map([id], row).doing("finding a background process")?;
            rows.next().transpose().doing("finding a background process")
        })
    }

    fn processes_of(&self, workspace: &str, user: &str) -> Result<Vec<ProcessOwner>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM background_processes WHERE workspace = ?1 AND user = ?2
                     ORDER BY started_ms, id"
                ))
                .doing("listing background processes")?;
            let rows = stmt.query_map([workspace, user], row).doing("listing background processes")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing background processes")
        })
    }

    fn process_forget(&self, id: &str, node: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM background_processes WHERE id = ?1 AND node = ?2", [id, node])
                .map(|n| n > 0)
                .doing("forgetting a background process")
        })
    }

    fn processes_forget_node(&self, node: &str) -> Result<usize, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM background_processes WHERE node = ?1", [node])
                .doing("forgetting a node's background processes")
        })
    }
}
