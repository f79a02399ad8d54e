//! Revision numbers of the gateway's identities and grants, so a cache of what a request needs
//! (a key's verification, a principal's compiled grants) can tell at once that it is stale.
//!
//! Each is a row of `revisions` that the database itself bumps: triggers on `principals`,
//! `memberships`, `api_keys` (`identity`) and `grants` (`grants`) add one in the same
//! transaction as the change, whichever process or code path makes it (`toolgate admin` from
//! another process, an access request's approval, an "allow always" decision). Reading one is
//! one indexed read of a two-row table, cheap enough for every request; the row (not a process
//! counter) is what several nodes on one database can share, and a PostgreSQL store keeps the
//! same rows and triggers. A key's `last_used_ms`, written at most once a minute, does not bump
//! it: the triggers on `api_keys` name the other columns.

use crate::error::Context;
use crate::{Store, StoreError};

/// The migration: the table, its two rows and the triggers.
pub(crate) const MIGRATION: &str = "CREATE TABLE IF NOT EXISTS revisions (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
     ) WITHOUT ROWID;
     INSERT OR IGNORE INTO revisions (name, value) VALUES ('identity', 1), ('grants', 1);
     CREATE TRIGGER IF NOT EXISTS principals_added AFTER INSERT ON principals
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS principals_changed AFTER UPDATE ON principals
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS principals_removed AFTER DELETE ON principals
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS memberships_added AFTER INSERT ON memberships
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS memberships_changed AFTER UPDATE ON memberships
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS memberships_removed AFTER DELETE ON memberships
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS api_keys_added AFTER INSERT ON api_keys
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS api_keys_changed
        AFTER UPDATE OF id, principal, digest, scope, expires_ms, revoked_ms ON api_keys
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS api_keys_removed AFTER DELETE ON api_keys
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'identity'; END;
     CREATE TRIGGER IF NOT EXISTS grants_added AFTER INSERT ON grants
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'grants'; END;
     CREATE TRIGGER IF NOT EXISTS grants_changed AFTER UPDATE ON grants
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'grants'; END;
     CREATE TRIGGER IF NOT EXISTS grants_removed AFTER DELETE ON grants
        BEGIN UPDATE revisions SET value = value + 1 WHERE name = 'grants'; END;";

impl Store {
    /// The revision called `name` (`identity` or `grants`).
    pub(crate) fn revision(&self, name: &str) -> Result<i64, StoreError> {
        self.with(|conn| {
            conn.prepare_cached("SELECT value FROM revisions WHERE name = ?1")
                .and_then(|mut stmt| stmt.query_row([name], |r| r.get(0)))
                .doing("reading a revision")
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        AccessDecision, AccessRequest, AccessStatus, ApiKeyRecord, Grant, GrantStore, IdentityStore, Membership,
        Principal, PrincipalKind, Store, ToolGrant,
    };

    fn principal(name: &str, kind: PrincipalKind) -> Principal {
        Principal { name: name.into(), kind, owner: None, admin: false, disabled: false, password: None, created_ms: 1 }
    }

    /// Through serde, so the test does not name every field (the grant grows).
    fn tool_grant(subject: &str) -> ToolGrant {
        serde_json::from_value(serde_json::json!({
            "id": 0, "subject": subject, "server": null, "tool_allow": ["read"], "tool_deny": [],
            "enabled": true, "config_overrides": {}, "mode": "allow", "expires_ms": null,
            "granted_by": "root", "request": null, "note": "", "created_ms": 1
        }))
        .unwrap()
    }

    /// Every kind of change bumps its revision, seen through another connection (another
    /// process's `toolgate admin`); a key's use does not.
    #[test]
    fn every_change_bumps_its_revision_and_a_keys_use_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let writer = Store::open(&db).unwrap();
        let reader = Store::open(&db).unwrap();
        let ids = || reader.identity_revision().unwrap();
        let grants = || reader.grants_revision().unwrap();
        let mut last = (ids(), grants());
        // `Some(true)`: the identity revision moved by one; `Some(false)`: the grants'; `None`:
        // neither.
        let mut step = |what: &str, identity: Option<bool>| {
            let now = (ids(), grants());
            let expected = match identity {
                Some(true) => (last.0 + 1, last.1),
                Some(false) => (last.0, last.1 + 1),
                None => last,
            };
            assert_eq!(now, expected, "{what}");
            last = now;
        };
        writer.principal_add(&principal("ann", PrincipalKind::User)).unwrap();
        step("a user added", Some(true));
        writer.principal_add(&principal("ops", PrincipalKind::Group)).unwrap();
        step("a group added", Some(true));
        writer.membership_set(&Membership { user: "ann".into(), group: "ops".into(), group_admin: false }).unwrap();
        step("a member added", Some(true));
        writer.principal_update(&Principal { disabled: true, ..principal("ann", PrincipalKind::User) }).unwrap();
        step("a user disabled", Some(true));
        let key = ApiKeyRecord {
            id: "0123456789abcdef".into(),
            principal: "ann".into(),
            digest: [7; 32],
            scope: serde_json::json!({}),
            created_ms: 1,
            created_by: "root".into(),
            expires_ms: None,
            revoked_ms: None,
            last_used_ms: None,
            note: String::new(),
        };
        writer.key_add(&key).unwrap();
        step("a key added", Some(true));
        writer.key_used(&key.id, 100_000).unwrap();
        step("a key's use changes no revision", None);
        writer.key_revoke(&key.id, 200_000).unwrap();
        step("a key revoked", Some(true));
        writer.membership_remove("ann", "ops").unwrap();
        step("a member removed", Some(true));
        let id = writer.tool_grant_add(&tool_grant("ann")).unwrap();
        step("a grant added", Some(false));
        writer.tool_grant_enable(id, false).unwrap();
        step("a grant disabled", Some(false));
        writer.grant_revoke(id).unwrap();
        step("a grant revoked", Some(false));
        writer
            .grant_add(&Grant {
                id: 0,
                user: "ann".into(),
                agent: "main".into(),
                tool: "exec".into(),
                subject: "ls".into(),
                shown: "ls".into(),
                created_ms: 1,
            })
            .unwrap();
        step("an \"allow always\" decision", Some(false));
        let (request, _) = writer
            .access_request(&AccessRequest {
                id: 0,
                requester: "ann".into(),
                user: "ann".into(),
                server: None,
                tool: Some("time".into()),
                reason: "why".into(),
                status: AccessStatus::Pending,
                created_ms: 1,
                decided_by: None,
                decided_ms: None,
                message: None,
                grant_id: None,
                notify_error: None,
                notify_failed_ms: None,
            })
            .unwrap();
        step("a request alone grants nothing", None);
        writer
            .access_decide(&AccessDecision {
                id: request,
                grant: Some(tool_grant("ann")),
                by: "root".into(),
                at_ms: 2,
                message: None,
            })
            .unwrap();
        step("an access request approved", Some(false));
    }
}
