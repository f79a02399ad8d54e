//! Which node holds each thing that cannot leave it (a background process from `exec` with
//! `background: true`, a browser session): the [`LocalStore`] trait and its SQLite
//! implementation on [`Store`] (tables `background_processes` and `browser_sessions`, their
//! migrations in `db.rs`).
//!
//! A background process runs on the machine of the `toolgate serve` that started it and nowhere
//! else (its pipes and its process group cannot move); so does a browser session (its Chromium,
//! tabs and cookies). With several nodes on one shared store, a call about it (`process poll`, a
//! `browser` action naming the session) may reach another node, which reads here who holds it:
//! the node's name and URL, the workspace and the user it belongs to (only that user, in that
//! workspace, may hear of it). A row lives as long as the owning node keeps the thing.

use std::fmt::Debug;

use crate::error::Context;
use crate::{Store, StoreError};

/// What of a node's own a [`LocalOwner`] record is about: each kind has a table of its own,
/// so an id of one kind never finds a record of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Local {
    /// A background process (`exec` with `background: true`; ids `tg-proc-...`).
    Process,
    /// A browser session (the `browser` tool; ids `tg-browser-...`).
    BrowserSession,
}

impl Local {
    /// Every kind.
    pub const ALL: [Local; 2] = [Local::Process, Local::BrowserSession];

    /// Its table (the same name on every backend).
    pub fn table(self) -> &'static str {
        match self {
            Local::Process => "background_processes",
            Local::BrowserSession => "browser_sessions",
        }
    }

    /// What it is called in messages: "background process", "browser session".
    pub fn noun(self) -> &'static str {
        match self {
            Local::Process => "background process",
            Local::BrowserSession => "browser session",
        }
    }
}

/// One background process or browser session, as every node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOwner {
    /// Its id (unique and unpredictable: `tg-proc-...`, `tg-browser-...`).
    pub id: String,
    /// The workspace it belongs to (its canonical path, as text).
    pub workspace: String,
    /// The user who started it.
    pub user: String,
    /// The node that holds it (`[node] name`).
    pub node: String,
    /// Where that node answers MCP (`[node] url`), when it says.
    pub node_url: Option<String>,
    /// What it is, for listing: a process's command line; a browser session's description.
    pub command: String,
    /// When it started, Unix milliseconds.
    pub started_ms: i64,
}

/// The background processes and browser sessions of every node on the database.
pub trait LocalStore: Send + Sync + Debug {
    /// Records `owner` of `kind` (replacing a row with the same id).
    fn local_record(&self, kind: Local, owner: &LocalOwner) -> Result<(), StoreError>;

    /// The `kind` record `id`, on whichever node.
    fn local_owner(&self, kind: Local, id: &str) -> Result<Option<LocalOwner>, StoreError>;

    /// The `kind` records of `user` in `workspace`, on every node, oldest first.
    fn locals_of(&self, kind: Local, workspace: &str, user: &str) -> Result<Vec<LocalOwner>, StoreError>;

    /// Removes the `kind` record `id` if `node` holds it (a node never removes another's);
    /// returns whether it did.
    fn local_forget(&self, kind: Local, id: &str, node: &str) -> Result<bool, StoreError>;

    /// Removes every record of every kind `node` holds (a node starting again holds nothing:
    /// its processes and browsers ended with its previous run); returns how many.
    fn locals_forget_node(&self, node: &str) -> Result<usize, StoreError>;
}

/// The tables, created by the migrations of the same names in `db.rs`.
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

/// See [`MIGRATION`]: the same columns for browser sessions.
pub(crate) const BROWSER_MIGRATION: &str = "CREATE TABLE IF NOT EXISTS browser_sessions (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        user TEXT NOT NULL,
        node TEXT NOT NULL,
        node_url TEXT,
        command TEXT NOT NULL,
        started_ms INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX IF NOT EXISTS browser_sessions_owner ON browser_sessions (workspace, user);
     CREATE INDEX IF NOT EXISTS browser_sessions_node ON browser_sessions (node);";

const COLUMNS: &str = "id, workspace, user, node, node_url, command, started_ms";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LocalOwner> {
    Ok(LocalOwner {
        id: r.get(0)?,
        workspace: r.get(1)?,
        user: r.get(2)?,
        node: r.get(3)?,
        node_url: r.get(4)?,
        command: r.get(5)?,
        started_ms: r.get(6)?,
    })
}

impl LocalStore for Store {
    fn local_record(&self, kind: Local, p: &LocalOwner) -> Result<(), StoreError> {
        let table = kind.table();
        self.with(|conn| {
            conn.execute(
                &format!("INSERT OR REPLACE INTO {table} ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                rusqlite::params![p.id, p.workspace, p.user, p.node, p.node_url, p.command, p.started_ms],
            )
            .map(drop)
            .doing("recording what a node holds")
        })
    }

    fn local_owner(&self, kind: Local, id: &str) -> Result<Option<LocalOwner>, StoreError> {
        let table = kind.table();
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM {table} WHERE id = ?1"))
                .doing("finding the node that holds an id")?;
            let mut rows = stmt.query_map([id], row).doing("finding the node that holds an id")?;
            rows.next().transpose().doing("finding the node that holds an id")
        })
    }

    fn locals_of(&self, kind: Local, workspace: &str, user: &str) -> Result<Vec<LocalOwner>, StoreError> {
        let table = kind.table();
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM {table} WHERE workspace = ?1 AND user = ?2 ORDER BY started_ms, id"
                ))
                .doing("listing what the nodes hold")?;
            let rows = stmt.query_map([workspace, user], row).doing("listing what the nodes hold")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing what the nodes hold")
        })
    }

    fn local_forget(&self, kind: Local, id: &str, node: &str) -> Result<bool, StoreError> {
        let table = kind.table();
        self.with(|conn| {
            conn.execute(&format!("DELETE FROM {table} WHERE id = ?1 AND node = ?2"), [id, node])
                .map(|n| n > 0)
                .doing("forgetting what a node held")
        })
    }

    fn locals_forget_node(&self, node: &str) -> Result<usize, StoreError> {
        self.with(|conn| {
            let mut n = 0;
            for kind in Local::ALL {
                n += conn
                    .execute(&format!("DELETE FROM {} WHERE node = ?1", kind.table()), [node])
                    .doing("forgetting what a node held in its previous run")?;
            }
            Ok(n)
        })
    }
}
