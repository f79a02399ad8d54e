//! "Allow always" approval grants: the [`GrantStore`] trait and its SQLite implementation on
//! [`Store`] (table `approval_grants`, migration 2 in `db.rs`).

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// A standing approval: calls of `tool` by `agent` for `user` whose normalized subject equals
/// `subject` run without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Row id (for `toolgate approvals revoke ID`); ignored when adding.
    pub id: i64,
    /// The user.
    pub user: String,
    /// The agent.
    pub agent: String,
    /// The canonical tool name.
    pub tool: String,
    /// The normalized thing approved (for `exec`, the unwrapped commands), or a hash of the
    /// exact parameters for tools without a subject. Never a raw secret.
    pub subject: String,
    /// What a person sees when listing grants (sensitive values redacted).
    pub shown: String,
    /// When it was granted, in Unix milliseconds.
    pub created_ms: i64,
}

/// The approval stage's standing grants ("allow always"), kept across restarts and listed and
/// revoked by `toolgate approvals`.
pub trait GrantStore: Send + Sync + Debug {
    /// Records a grant; its `id` is ignored. A second grant of the same (user, agent, tool,
    /// subject) is a no-op.
    fn grant_add(&self, grant: &Grant) -> Result<(), StoreError>;

    /// Whether a grant covers calls of `tool` by `agent` for `user` with this subject.
    fn grant_exists(&self, user: &str, agent: &str, tool: &str, subject: &str) -> Result<bool, StoreError>;

    /// Every grant, oldest first, each with the id [`GrantStore::grant_revoke`] takes.
    fn grants(&self) -> Result<Vec<Grant>, StoreError>;

    /// Removes a grant; returns whether it existed.
    fn grant_revoke(&self, id: i64) -> Result<bool, StoreError>;
}

impl GrantStore for Store {
    fn grant_add(&self, grant: &Grant) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                "INSERT OR IGNORE INTO approval_grants (user, agent, tool, subject, shown, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![grant.user, grant.agent, grant.tool, grant.subject, grant.shown, grant.created_ms],
            )
            .map(drop)
            .doing("saving an approval grant")
        })
    }

    fn grant_exists(&self, user: &str, agent: &str, tool: &str, subject: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.prepare_cached(
                "SELECT 1 FROM approval_grants WHERE user = ?1 AND agent = ?2 AND tool = ?3 AND subject = ?4",
            )
            .and_then(|mut stmt| stmt.exists(rusqlite::params![user, agent, tool, subject]))
            .doing("checking approval grants")
        })
    }

    fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, user, agent, tool, subject, shown, created_ms FROM approval_grants ORDER BY id",
                )
                .doing("listing approval grants")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(Grant {
                        id: r.get(0)?,
                        user: r.get(1)?,
                        agent: r.get(2)?,
                        tool: r.get(3)?,
                        subject: r.get(4)?,
                        shown: r.get(5)?,
                        created_ms: r.get(6)?,
                    })
                })
                .doing("listing approval grants")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing approval grants")
        })
    }

    fn grant_revoke(&self, id: i64) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM approval_grants WHERE id = ?1", [id]).map(|n| n > 0).doing("revoking a grant")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_persist_and_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let grant = Grant {
            id: 0,
            user: "ann".into(),
            agent: "main".into(),
            tool: "exec".into(),
            subject: "cargo test".into(),
            shown: "cargo test".into(),
            created_ms: 1,
        };
        {
            let store = Store::open(&db).unwrap();
            store.grant_add(&grant).unwrap();
            store.grant_add(&grant).unwrap();
        }
        let store = Store::open(&db).unwrap();
        assert!(store.grant_exists("ann", "main", "exec", "cargo test").unwrap());
        assert!(!store.grant_exists("ann", "other", "exec", "cargo test").unwrap(), "scoped to the agent");
        let all = store.grants().unwrap();
        assert_eq!(all.len(), 1, "no duplicates");
        assert!(store.grant_revoke(all[0].id).unwrap());
        assert!(!store.grant_revoke(all[0].id).unwrap());
        assert!(!store.grant_exists("ann", "main", "exec", "cargo test").unwrap());
    }
}
