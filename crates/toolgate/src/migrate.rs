//! `toolgate admin migrate`: moves a single node's state from its workspace's SQLite file into
//! the PostgreSQL database that several nodes will share (`[store] url`). The node must be
//! stopped; the move is equivalent to restarting it on the shared database.
//!
//! Two ways, by area:
//! - Row for row, ids and times kept, in one PostgreSQL transaction (`toolgate_postgres::read_sqlite`): grants ("allow
//!   always" and tool grants), access requests, the approvals inbox and its events (a pending
//!   approval stays pending and can be decided on any node), agent sessions and their messages,
//!   team boards, mailboxes and read markers, handoff routes, jobs and their events (as they are,
//!   leases too: a job whose lease lapsed is ended `failed: interrupted` by the target's own
//!   sweep, as on one node; a job whose lease has not lapsed stops the move), routine fires and
//!   webhook deliveries seen, unexpired path locks and page sign-ins, the memory index (notes,
//!   managed ones with their text, chunks, vectors; the target's change counter for the
//!   workspace set to 1 so every node sees the moved notes as a change) and the embedding cache.
//! - Through the store traits, after that transaction: users, groups, agents and memberships;
//!   API keys (their digests: the keys people hold keep working); secrets (opened with the
//!   node's own key, sealed again under `TOOLGATE_SECRET_KEY`, which every node is given);
//!   routines; custom tools; undelivered messages (the outbox); and the audit log, row for row
//!   with its hash chain, so `toolgate audit verify` on the shared log ends at the same head hash.
//!
//! Not moved: records of background processes (they ended with the stopped node; a node
//! starting on the shared database drops its previous run's records too), the scheduler lease
//! and the audit log's writer records (they belong to live processes), and the SQLite file's
//! memory change counter (the target's is set to 1, above).
//!
//! Everything is read and checked before anything is written: a source row PostgreSQL could
//! not hold (text that is not UTF-8 or holds a NUL, a value of the wrong type, JSON that does
//! not parse, more than 1 GB) stops the move with an error naming the table, row and column,
//! and the target untouched; so do jobs held under a lease that has not lapsed (a toolgate
//! still runs them). The row-for-row transaction is all or nothing. The areas through the
//! store traits and the audit log are written after it commits, each by the traits' own
//! statements (a transaction spanning them would mean a second, transactional, copy of every
//! trait's writes): a failure there ([`MigrateError::Partial`]) says exactly what the database
//! then holds and to drop and recreate it before running again. The target must hold no state
//! yet: a second run, a run after a partial one, or a run into a database in use is refused
//! before anything is written.

use std::fmt;
use std::path::Path;

use toolgate_store::{
    AuditStore, CustomToolStore, IdentityStore, OutboxStore, PrincipalKind, RoutineStore, SECRET_KEY_ENV, SecretStore,
    SessionStore, Store,
};

use crate::state::PgAuditLog;

/// What was moved, area by area.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Users, groups and agents.
    pub principals: usize,
    /// Group memberships.
    pub memberships: usize,
    /// API keys (revoked and expired ones too: their history stays).
    pub keys: usize,
    /// "Allow always" grants.
    pub approval_grants: usize,
    /// Tool grants.
    pub tool_grants: usize,
    /// Secrets.
    pub secrets: usize,
    /// Routines.
    pub routines: usize,
    /// Custom tools added with `toolgate tools add`.
    pub custom_tools: usize,
    /// Messages in the outbox (sends that failed).
    pub undelivered: usize,
    /// Audit rows.
    pub audit_rows: u64,
    /// The areas copied row for row (grants, approvals, sessions, teams, jobs, memory...).
    pub copied: Copied,
}

pub use toolgate_postgres::Copied;

/// What a move leaves behind, and why (`toolgate admin migrate` prints it).
pub const NOT_MOVED: &[(&str, &str)] = &[
    (
        "background process records",
        "the processes ended with the stopped node (a node starting on the shared database drops its previous \
         run's records too)",
    ),
    ("the scheduler lease and the audit log's writer records", "they belong to processes that are no longer running"),
    ("expired path locks, page sign-ins and webhook deliveries", "a restart would not honour them either"),
    (
        "the memory index's change counter",
        "the shared database keeps its own per workspace, set to 1 so every node sees the moved notes as a change",
    ),
];

impl fmt::Display for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} principals, {} memberships, {} API keys, {} \"allow always\" grants, {} tool grants, {} secrets, \
             {} routines, {} custom tools, {} undelivered messages, {} audit rows",
            self.principals,
            self.memberships,
            self.keys,
            self.approval_grants,
            self.tool_grants,
            self.secrets,
            self.routines,
            self.custom_tools,
            self.undelivered,
            self.audit_rows
        )?;
        for (area, n) in &self.copied.areas {
            if *area != "grants" {
                write!(f, ", {n} {area}")?;
            }
        }
        if self.copied.lapsed_jobs > 0 {
            write!(
                f,
                " ({} jobs whose lease had lapsed, copied as they were: the shared database's sweep ends them \
                 failed: interrupted)",
                self.copied.lapsed_jobs
            )?;
        }
        Ok(())
    }
}

/// Why a move did not happen (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A store could not be read or written. The cause is the error's source (printed after
    /// this message by the chain, so not in it).
    #[error("{doing}")]
    Store {
        /// What was being done.
        doing: String,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The move cannot start as things are (the message says what to do).
    #[error("{0}")]
    Refused(String),
    /// The database failed after the row-for-row copy committed: part of the state is written.
    #[error(
        "{doing} failed and the move stopped partway: the PostgreSQL database now holds {written} from this node, \
         nothing else (the SQLite file is unchanged). A move into it as it is is refused: drop and recreate the \
         database (`dropdb` and `createdb` as its owner), then run this again. What failed"
    )]
    Partial {
        /// What was being done.
        doing: String,
        /// What the database holds of the move.
        written: String,
        /// The store's error (after the message, as its cause).
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn failed<E: std::error::Error + Send + Sync + 'static>(doing: impl Into<String>) -> impl FnOnce(E) -> MigrateError {
    let doing = doing.into();
    move |e| MigrateError::Store { doing, source: Box::new(e) }
}

/// Moves the state in `db` (a workspace's `.toolgate/state.db`) into the PostgreSQL database at
/// `url`; `workspace` is the name the nodes will give the workspace (its path on the shared
/// filesystem), which keys its audit chain there.
pub fn to_postgres(db: &Path, workspace: &Path, url: &str) -> Result<Moved, MigrateError> {
    if !db.is_file() {
        return Err(MigrateError::Refused(format!("no state database at {}: nothing to move", db.display())));
    }
    let source = Store::open(db).map_err(failed(format!("opening {}", db.display())))?;
    let target = crate::state::shared(url).map_err(failed("connecting to the PostgreSQL database"))?;
    let log =
        PgAuditLog::reader(&target, &workspace.to_string_lossy()).map_err(failed("opening the shared audit log"))?;
    refuse_unless_empty(&target, &log)?;
    // What a restart would close is closed first: calls and agent sessions of toolgates that
    // died. One still running stops the move: its rows would change in the file after they
    // were copied.
    source.close_interrupted_calls().map_err(failed("closing the calls of toolgates that died"))?;
    let now_ms = now_ms();
    source.sessions_fail_orphans(now_ms).map_err(failed("closing the agent sessions of toolgates that died"))?;
    let (ends, audit_rows) = source.audit_export().map_err(failed("reading the audit log"))?;
    let running = source
        .sessions(&toolgate_store::SessionFilter { status: Some("running"), limit: 1, ..Default::default() })
        .map_err(failed("reading the agent sessions"))?;
    if audit_rows.iter().any(|r| r.record.outcome == toolgate_store::STARTED) || !running.is_empty() {
        return Err(MigrateError::Refused(format!(
            "a toolgate is still running on {} (its calls or agent sessions are in progress): stop it, then move \
             its state",
            workspace.display()
        )));
    }
    let secret_names = source.secret_keys("").map_err(failed("listing the secrets"))?;
    if !secret_names.is_empty() && !target.keeps_secrets() {
        return Err(MigrateError::Refused(format!(
            "{} secrets (upstream sign-ins, the requestState key ring) are sealed with this node's own key: set \
             {SECRET_KEY_ENV} to the key every node will be given (64 hex characters, `openssl rand -hex 32`) and \
             run this again",
            secret_names.len()
        )));
    }

    // Everything is read (and checked) before anything is written.
    let mut principals = source.principals(None).map_err(failed("reading the principals"))?;
    // Groups and users before agents (an agent names its owner) and memberships.
    principals.sort_by_key(|p| p.kind == PrincipalKind::Agent);
    let mut memberships = Vec::new();
    for user in principals.iter().filter(|p| p.kind == PrincipalKind::User) {
        memberships.extend(source.memberships(&user.name).map_err(failed("reading the memberships"))?);
    }
    let keys = source.keys(None).map_err(failed("reading the API keys"))?;
    let mut secrets = Vec::with_capacity(secret_names.len());
    for name in &secret_names {
        if let Some(value) = source.secret_get(name).map_err(failed(format!("reading secret {name}")))? {
            secrets.push((name, value));
        }
    }
    let routines = source.routine_list(None).map_err(failed("reading the routines"))?;
    let custom_tools = source.custom_tools().map_err(failed("reading the custom tools"))?;
    let outbox = source.outbox_list(None, usize::MAX).map_err(failed("reading the outbox"))?;
    // Leases (and expiries) are judged by the shared database's clock, which every node's sweep
    // answers to, not by this machine's, which may run apart from it.
    let db_now_ms = target.clock_ms().map_err(failed("reading the PostgreSQL database's clock"))?;
    let rows =
        toolgate_postgres::read_sqlite(&source, &workspace.to_string_lossy(), db_now_ms).map_err(|e| match e {
            toolgate_postgres::SqliteReadError::Unmovable(why) | toolgate_postgres::SqliteReadError::Leased(why) => {
                MigrateError::Refused(why)
            }
            e => MigrateError::Store { doing: "reading the state to move".into(), source: Box::new(e) },
        })?;

    let mut moved = Moved::default();
    (moved.approval_grants, moved.tool_grants) = rows.grant_counts();
    moved.copied = target.import_sqlite(rows).map_err(failed(
        "copying grants, approvals, sessions, teams, jobs and memory (one transaction: nothing was written)",
    ))?;
    let copied: u64 = moved.copied.areas.iter().map(|(_, n)| n).sum();
    let mut done = vec![format!("the {copied} rows copied row for row (grants, approvals, sessions, jobs, memory...)")];
    moved.principals = write_all(
        &mut done,
        "principals",
        &principals,
        |p| format!("adding principal {}", p.name),
        |p| target.principal_add(p),
    )?;
    moved.memberships = write_all(
        &mut done,
        "memberships",
        &memberships,
        |m| format!("adding {} to {}", m.user, m.group),
        |m| target.membership_set(m),
    )?;
    moved.keys =
        write_all(&mut done, "API keys", &keys, |k| format!("adding API key {}", k.id), |k| target.key_add(k))?;
    moved.secrets = write_all(
        &mut done,
        "secrets",
        &secrets,
        |(name, _)| format!("storing secret {name}"),
        |(name, value)| target.secret_put(name, value),
    )?;
    moved.routines = write_all(
        &mut done,
        "routines",
        &routines,
        |r| format!("adding routine {}", r.name),
        |r| target.routine_insert(r),
    )?;
    moved.custom_tools = write_all(
        &mut done,
        "custom tools",
        &custom_tools,
        |t| format!("adding custom tool {}", t.name),
        |t| target.custom_tool_put(&t.name, &t.definition),
    )?;
    moved.undelivered = write_all(
        &mut done,
        "undelivered messages",
        &outbox,
        |e| format!("keeping message {} in the outbox", e.id),
        |e| target.outbox_put(e),
    )?;
    // One transaction of its own: on failure, no audit row is written.
    moved.audit_rows = log.import(&ends, audit_rows).map_err(|e| MigrateError::Partial {
        doing: "copying the audit log".into(),
        written: format!("{} and no audit row", done.join(", ")),
        cause: Box::new(e),
    })?;
    Ok(moved)
}

/// Writes `items` with `put`, one by one, after the row-for-row copy committed; returns how many.
/// A failure is [`MigrateError::Partial`], naming what `done` (the areas written before) and
/// this area hold; `done` gains this area once it is written whole.
fn write_all<T, R, E: std::error::Error + Send + Sync + 'static>(
    done: &mut Vec<String>,
    area: &str,
    items: &[T],
    doing: impl Fn(&T) -> String,
    mut put: impl FnMut(&T) -> Result<R, E>,
) -> Result<usize, MigrateError> {
    for (n, item) in items.iter().enumerate() {
        if let Err(e) = put(item) {
            let mut written = done.clone();
            written.push(format!("{n} of the {} {area}", items.len()));
            return Err(MigrateError::Partial { doing: doing(item), written: written.join(", "), cause: Box::new(e) });
        }
    }
    done.push(format!("{} {area}", items.len()));
    Ok(items.len())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The tables the areas moved after the row-for-row copy write into (identities, secrets,
/// routines, custom tools, the outbox): a row already there would clash only once that copy
/// has committed, so they are checked first with the rest.
const AREA_TABLES: [&str; 7] =
    ["principals", "memberships", "api_keys", "secrets", "routines", "custom_tools", "message_outbox"];

/// Refuses a target the nodes have used: any audit row of the workspace, or any row in a table
/// the move writes into (identities, grants, approvals, sessions, jobs, memory...).
fn refuse_unless_empty(target: &toolgate_postgres::PgStore, log: &PgAuditLog) -> Result<(), MigrateError> {
    let rows = log.audit_count().map_err(failed("reading the target's audit log"))?;
    let mut tables = AREA_TABLES.to_vec();
    tables.extend(toolgate_postgres::sqlite_copy_tables());
    let counts = target.count_rows(&tables).map_err(failed("reading the target's tables"))?;
    let used: Vec<String> =
        tables.iter().zip(&counts).filter(|(_, n)| **n > 0).map(|(t, n)| format!("{n} rows in {t}")).collect();
    if rows > 0 || !used.is_empty() {
        let mut held = vec![format!("{rows} audit rows of this workspace")];
        held.extend(used);
        return Err(MigrateError::Refused(format!(
            "the PostgreSQL database already holds state ({}): move a node's state into a database no node has \
             used yet (after a move that stopped partway, drop and recreate the database, then run this again). \
             Nothing was written",
            held.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of `e` and its sources, as a chain printer (`{:#}` of anyhow) joins them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        text
    }

    #[test]
    fn an_error_says_its_cause_once() {
        let io = || std::io::Error::other("disk on fire");
        let store = failed("reading the audit log")(io());
        assert_eq!(chain(&store), "reading the audit log: disk on fire");
        let workspace = crate::GateError::Workspace { path: "/nowhere".into(), cause: io() };
        assert_eq!(chain(&workspace), "workspace /nowhere: disk on fire");
        let config = crate::config::ConfigError::Read { path: "/etc/t.toml".into(), cause: io() };
        assert_eq!(chain(&config), "cannot read config file /etc/t.toml: disk on fire");
    }
}
