//! `toolgate admin migrate`: moves a single node's state from its workspace's SQLite file into
//! the PostgreSQL database that several nodes will share (`[store] url`), area by area, through
//! the same store traits the nodes use. The source is only read.
//!
//! What moves: users, groups, agents and memberships; API keys (their digests: the keys people
//! hold keep working); "allow always" grants and tool grants; secrets (opened with the node's
//! own key, sealed again under `TOOLGATE_SECRET_KEY`, which every node is given); routines;
//! custom tools added with `toolgate tools add`; undelivered messages (the outbox); and the audit
//! log, row for row with its hash chain, so `toolgate audit verify` on the shared log ends at the
//! same head hash. What stays: the approvals inbox (a pending call belongs to the process that
//! waits for it), access requests, jobs (their output is on the node's disk), path locks (held by
//! the processes that run on the node, gone when they expire), agent sessions and team boards
//! (not moved yet), and memory (not moved yet: with `[store] url` local notes are indexed again
//! from their files, and managed notes stay in the SQLite file).
//!
//! The target must hold no state yet (a database the nodes have not used): a second run, or a
//! run into a database in use, is refused before anything is written.

use std::fmt;
use std::path::Path;

use toolgate_store::{
    AuditStore, CustomToolStore, GrantStore, IdentityStore, OutboxStore, PrincipalKind, RoutineStore, SECRET_KEY_ENV,
    SecretStore, Store,
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
}

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
        )
    }
}

/// Why a move did not happen (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A store could not be read or written.
    #[error("{doing}: {source}")]
    Store {
        /// What was being done.
        doing: String,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The move cannot start as things are (the message says what to do).
    #[error("{0}")]
    Refused(String),
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
    // Calls a dead toolgate left running are closed first; one still running stops the move:
    // its row would be completed in the file after it was copied.
    source.close_interrupted_calls().map_err(failed("closing the calls of toolgates that died"))?;
    let (ends, rows) = source.audit_export().map_err(failed("reading the audit log"))?;
    if rows.iter().any(|r| r.record.outcome == toolgate_store::STARTED) {
        return Err(MigrateError::Refused(format!(
            "a toolgate is still running on {} (its calls are in progress): stop it, then move its state",
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

    let mut moved = Moved::default();
    // Groups and users before agents (an agent names its owner) and memberships.
    let mut principals = source.principals(None).map_err(failed("reading the principals"))?;
    principals.sort_by_key(|p| p.kind == PrincipalKind::Agent);
    for p in &principals {
        target.principal_add(p).map_err(failed(format!("adding principal {}", p.name)))?;
        moved.principals += 1;
    }
    for user in principals.iter().filter(|p| p.kind == PrincipalKind::User) {
        for m in source.memberships(&user.name).map_err(failed("reading the memberships"))? {
            target.membership_set(&m).map_err(failed(format!("adding {} to {}", m.user, m.group)))?;
            moved.memberships += 1;
        }
    }
    for key in source.keys(None).map_err(failed("reading the API keys"))? {
        target.key_add(&key).map_err(failed(format!("adding API key {}", key.id)))?;
        moved.keys += 1;
    }
    for grant in source.grants().map_err(failed("reading the \"allow always\" grants"))? {
        target.grant_add(&grant).map_err(failed("adding an \"allow always\" grant"))?;
        moved.approval_grants += 1;
    }
    for grant in source.tool_grants(None).map_err(failed("reading the tool grants"))? {
        target.tool_grant_add(&grant).map_err(failed(format!("adding the tool grant of {}", grant.subject)))?;
        moved.tool_grants += 1;
    }
    for name in &secret_names {
        if let Some(value) = source.secret_get(name).map_err(failed(format!("reading secret {name}")))? {
            target.secret_put(name, &value).map_err(failed(format!("storing secret {name}")))?;
            moved.secrets += 1;
        }
    }
    for routine in source.routine_list(None).map_err(failed("reading the routines"))? {
        target.routine_insert(&routine).map_err(failed(format!("adding routine {}", routine.name)))?;
        moved.routines += 1;
    }
    for tool in source.custom_tools().map_err(failed("reading the custom tools"))? {
        target
            .custom_tool_put(&tool.name, &tool.definition)
            .map_err(failed(format!("adding custom tool {}", tool.name)))?;
        moved.custom_tools += 1;
    }
    for entry in source.outbox_list(None, usize::MAX).map_err(failed("reading the outbox"))? {
        target.outbox_put(&entry).map_err(failed(format!("keeping message {} in the outbox", entry.id)))?;
        moved.undelivered += 1;
    }
    moved.audit_rows = log.import(&ends, rows).map_err(failed("copying the audit log"))?;
    Ok(moved)
}

/// Refuses a target the nodes have used: any principal, tool grant or audit row.
fn refuse_unless_empty(target: &toolgate_postgres::PgStore, log: &PgAuditLog) -> Result<(), MigrateError> {
    let principals = target.principals(None).map_err(failed("reading the target's principals"))?.len();
    let grants = target.tool_grants(None).map_err(failed("reading the target's grants"))?.len();
    let rows = log.audit_count().map_err(failed("reading the target's audit log"))?;
    if principals + grants > 0 || rows > 0 {
        return Err(MigrateError::Refused(format!(
            "the PostgreSQL database already holds state ({principals} principals, {grants} tool grants, {rows} audit \
             rows of this workspace): move a node's state into a database no node has used yet"
        )));
    }
    Ok(())
}
