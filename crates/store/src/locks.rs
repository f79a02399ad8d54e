//! Path locks (`lock_paths`): the [`LockStore`] trait and its SQLite implementation on
//! [`Store`] (table `path_locks`, its migration in `db.rs`).
//!
//! Locks live in the state database so that every process serving one workspace (two
//! `toolgate serve` started by two coding agents, later several nodes) honours the others'.
//! Which locks conflict (glob overlap) is the fs tools' rule, not the store's: taking a lock
//! hands the caller's predicate each live lock of another owner, inside the one transaction
//! that then inserts the new lock, so the check and the insert are atomic across processes.
//! Times are wall-clock Unix milliseconds passed in by the caller (processes share no
//! `Instant`), so a lock whose `expires_ms` is not after `now_ms` no longer exists.

use std::fmt::Debug;

use rusqlite::{Connection, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// Who holds a lock: the caller's identity. Two calls with equal owners share their locks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LockOwner {
    /// The user.
    pub user: String,
    /// The agent.
    pub agent: String,
    /// The session (an MCP session, an agent session, a CLI call's).
    pub session: String,
}

/// One lock on some paths of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathLock {
    /// What the holder releases it with; unique.
    pub token: String,
    /// The workspace it applies to (its canonical path, as text).
    pub workspace: String,
    /// Who holds it.
    pub owner: LockOwner,
    /// The workspace-relative globs it covers, as the holder gave them (normalized).
    pub globs: Vec<String>,
    /// When it was taken, Unix milliseconds.
    pub created_ms: i64,
    /// When it lapses, Unix milliseconds: from then on it is ignored and may be swept.
    pub expires_ms: i64,
}

/// The path locks of every workspace the database serves.
pub trait LockStore: Send + Sync + Debug {
    /// Takes `lock` unless a live lock (`expires_ms > now_ms`) of the same workspace held by
    /// another owner is one `conflicts` says clashes with it: atomically, so of two callers
    /// (threads, processes, nodes) racing for clashing locks exactly one gets it. Returns
    /// `None` when taken, or the first clashing lock, in which case nothing was written.
    /// Expired locks are swept on the way.
    fn lock_take(
        &self,
        lock: &PathLock,
        now_ms: i64,
        conflicts: &dyn Fn(&PathLock) -> bool,
    ) -> Result<Option<PathLock>, StoreError>;

    /// Releases the live lock `token` if `owner` holds it; returns whether it did. Another
    /// owner's token, an unknown one and an expired one all release nothing.
    fn lock_release(&self, token: &str, owner: &LockOwner, now_ms: i64) -> Result<bool, StoreError>;

    /// The live locks of `workspace` (of every owner), oldest first: the caller decides which
    /// cover a path.
    fn locks_live(&self, workspace: &str, now_ms: i64) -> Result<Vec<PathLock>, StoreError>;

    /// Deletes every expired lock (of every workspace); returns how many.
    fn locks_sweep(&self, now_ms: i64) -> Result<usize, StoreError>;
}

const COLUMNS: &str = "token, workspace, user, agent, session, globs, created_ms, expires_ms";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PathLock> {
    let globs: String = r.get(5)?;
    let globs = serde_json::from_str(&globs)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(PathLock {
        token: r.get(0)?,
        workspace: r.get(1)?,
        owner: LockOwner { user: r.get(2)?, agent: r.get(3)?, session: r.get(4)? },
        globs,
        created_ms: r.get(6)?,
        expires_ms: r.get(7)?,
    })
}

fn live(conn: &Connection, workspace: &str, now_ms: i64, doing: &'static str) -> Result<Vec<PathLock>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM path_locks WHERE workspace = ?1 AND expires_ms > ?2 ORDER BY created_ms, rowid"
        ))
        .doing(doing)?;
    let rows = stmt.query_map(rusqlite::params![workspace, now_ms], row).doing(doing)?;
    rows.collect::<Result<Vec<_>, _>>().doing(doing)
}

impl LockStore for Store {
    fn lock_take(
        &self,
        lock: &PathLock,
        now_ms: i64,
        conflicts: &dyn Fn(&PathLock) -> bool,
    ) -> Result<Option<PathLock>, StoreError> {
        const DOING: &str = "taking a path lock";
        let globs = serde_json::to_string(&lock.globs).unwrap_or_else(|_| "[]".to_owned());
        self.with(|conn| {
            // IMMEDIATE: the write lock is taken before the read, so no other connection can
            // insert a clashing lock between this check and this insert (it waits, up to the
            // busy timeout, and then sees this lock).
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            tx.execute("DELETE FROM path_locks WHERE expires_ms <= ?1", [now_ms]).doing(DOING)?;
            let clash = live(&tx, &lock.workspace, now_ms, DOING)?
                .into_iter()
                .find(|other| other.owner != lock.owner && conflicts(other));
            if clash.is_some() {
                // Dropping the transaction rolls it back (the sweep too, which is harmless).
                return Ok(clash);
            }
            tx.execute(
                &format!("INSERT INTO path_locks ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                rusqlite::params![
                    lock.token,
                    lock.workspace,
                    lock.owner.user,
                    lock.owner.agent,
                    lock.owner.session,
                    globs,
                    lock.created_ms,
                    lock.expires_ms
                ],
            )
            .doing(DOING)?;
            tx.commit().doing(DOING)?;
            Ok(None)
        })
    }

    fn lock_release(&self, token: &str, owner: &LockOwner, now_ms: i64) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "DELETE FROM path_locks
                 WHERE token = ?1 AND user = ?2 AND agent = ?3 AND session = ?4 AND expires_ms > ?5",
                rusqlite::params![token, owner.user, owner.agent, owner.session, now_ms],
            )
            .map(|n| n > 0)
            .doing("releasing a path lock")
        })
    }

    fn locks_live(&self, workspace: &str, now_ms: i64) -> Result<Vec<PathLock>, StoreError> {
        self.with(|conn| live(conn, workspace, now_ms, "listing path locks"))
    }

    fn locks_sweep(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM path_locks WHERE expires_ms <= ?1", [now_ms]).doing("sweeping expired path locks")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_take_writes_nothing_and_expired_rows_are_gone_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let owner = |s: &str| LockOwner { user: "u".into(), agent: "a".into(), session: s.into() };
        let lock = |token: &str, s: &str, expires_ms| PathLock {
            token: token.into(),
            workspace: "/w".into(),
            owner: owner(s),
            globs: vec!["src/**".into()],
            created_ms: 0,
            expires_ms,
        };
        assert_eq!(store.lock_take(&lock("old", "x", 50), 0, &|_| true).unwrap(), None);
        assert_eq!(store.lock_take(&lock("a", "a", 1_000), 100, &|_| true).unwrap(), None);
        let refused = store.lock_take(&lock("b", "b", 1_000), 100, &|_| true).unwrap();
        assert_eq!(refused.map(|l| l.token), Some("a".to_owned()));
        let tokens: Vec<String> = store
            .with(|c| {
                let mut s = c.prepare("SELECT token FROM path_locks ORDER BY token").doing("test")?;
                let rows = s.query_map([], |r| r.get(0)).doing("test")?;
                rows.collect::<Result<Vec<_>, _>>().doing("test")
            })
            .unwrap();
        // The expired `old` was swept by the first successful take after it lapsed; the refused
        // `b` never reached the table.
        assert_eq!(tokens, ["a"]);
    }
}
