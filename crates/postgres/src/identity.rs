//! [`IdentityStore`] on PostgreSQL: principals, memberships, API keys (as digests) and the
//! page's sessions; the same facts and rules as SQLite's (`toolgate-store`'s `identity.rs`).

use tokio_postgres::Row;
use toolgate_store::{ApiKeyRecord, IdentityStore, Membership, Principal, PrincipalKind, StoreError};

use crate::PgStore;
use crate::error::{PgError, added};

const PRINCIPAL_COLUMNS: &str = "name, kind, owner, admin, disabled, password, created_ms";
const KEY_COLUMNS: &str =
    "id, principal, digest, scope, created_ms, created_by, expires_ms, revoked_ms, last_used_ms, note";

/// The advisory lock that makes "count the live page sessions, then add one" atomic across
/// nodes ("tgpages").
const PAGE_SESSIONS_LOCK: i64 = 0x0074_6770_6167_6573;

fn kind_text(kind: PrincipalKind) -> &'static str {
    match kind {
        PrincipalKind::User => "user",
        PrincipalKind::Group => "group",
        PrincipalKind::Agent => "agent",
    }
}

fn principal_row(r: &Row) -> Result<Principal, PgError> {
    let kind: String = r.try_get(1)?;
    let kind = match kind.as_str() {
        "user" => PrincipalKind::User,
        "group" => PrincipalKind::Group,
        "agent" => PrincipalKind::Agent,
        other => return Err(PgError::Data(format!("unknown principal kind `{other}`"))),
    };
    Ok(Principal {
        name: r.try_get(0)?,
        kind,
        owner: r.try_get(2)?,
        admin: r.try_get(3)?,
        disabled: r.try_get(4)?,
        password: r.try_get(5)?,
        created_ms: r.try_get(6)?,
    })
}

fn key_row(r: &Row) -> Result<ApiKeyRecord, PgError> {
    let digest: Vec<u8> = r.try_get(2)?;
    let digest: [u8; 32] = digest.try_into().map_err(|_| PgError::Data("a key digest is not 32 bytes".into()))?;
    let scope: String = r.try_get(3)?;
    Ok(ApiKeyRecord {
        id: r.try_get(0)?,
        principal: r.try_get(1)?,
        digest,
        scope: serde_json::from_str(&scope).map_err(|e| PgError::Data(format!("a key's scope is not JSON: {e}")))?,
        created_ms: r.try_get(4)?,
        created_by: r.try_get(5)?,
        expires_ms: r.try_get(6)?,
        revoked_ms: r.try_get(7)?,
        last_used_ms: r.try_get(8)?,
        note: r.try_get(9)?,
    })
}

impl IdentityStore for PgStore {
    fn identity_revision(&self) -> Result<i64, StoreError> {
        self.revision("identity")
    }

    fn principal_add(&self, principal: &Principal) -> Result<bool, StoreError> {
        let p = principal.clone();
        self.run_changing("adding a principal", move |c| async move {
            let sql = format!("INSERT INTO principals ({PRINCIPAL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)");
            let inserted = c
                .execute(
                    sql.as_str(),
                    &[&p.name, &kind_text(p.kind), &p.owner, &p.admin, &p.disabled, &p.password, &p.created_ms],
                )
                .await;
            added(inserted)
        })
    }

    fn principal_get(&self, name: &str) -> Result<Option<Principal>, StoreError> {
        let name = name.to_owned();
        self.run("reading a principal", move |c| async move {
            let stmt = c.prepare_cached(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE name = $1")).await?;
            c.query_opt(&stmt, &[&name]).await?.as_ref().map(principal_row).transpose()
        })
    }

    fn principals(&self, kind: Option<PrincipalKind>) -> Result<Vec<Principal>, StoreError> {
        let kind = kind.map(kind_text);
        self.run("listing principals", move |c| async move {
            let stmt = c
                .prepare_cached(&format!(
                    "SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE $1::text IS NULL OR kind = $1 ORDER BY name"
                ))
                .await?;
            c.query(&stmt, &[&kind]).await?.iter().map(principal_row).collect()
        })
    }

    fn principal_update(&self, principal: &Principal) -> Result<bool, StoreError> {
        let p = principal.clone();
        self.run_changing("updating a principal", move |c| async move {
            let n = c
                .execute(
                    "UPDATE principals SET admin = $2, disabled = $3, password = $4 WHERE name = $1",
                    &[&p.name, &p.admin, &p.disabled, &p.password],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn membership_set(&self, membership: &Membership) -> Result<bool, StoreError> {
        let m = membership.clone();
        self.run_changing("adding a group member", move |c| async move {
            // Both ends must exist with the right kinds, checked in the statement itself.
            let n = c
                .execute(
                    "INSERT INTO memberships (member, grp, group_admin)
                     SELECT $1::text, $2::text, $3::boolean
                     WHERE EXISTS (SELECT 1 FROM principals WHERE name = $1 AND kind = 'user')
                       AND EXISTS (SELECT 1 FROM principals WHERE name = $2 AND kind = 'group')
                     ON CONFLICT (member, grp) DO UPDATE SET group_admin = excluded.group_admin",
                    &[&m.user, &m.group, &m.group_admin],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn membership_remove(&self, user: &str, group: &str) -> Result<bool, StoreError> {
        let (user, group) = (user.to_owned(), group.to_owned());
        self.run_changing("removing a group member", move |c| async move {
            Ok(c.execute("DELETE FROM memberships WHERE member = $1 AND grp = $2", &[&user, &group]).await? > 0)
        })
    }

    fn memberships(&self, user: &str) -> Result<Vec<Membership>, StoreError> {
        let user = user.to_owned();
        self.run("listing a user's groups", move |c| async move {
            let stmt = c
                .prepare_cached("SELECT member, grp, group_admin FROM memberships WHERE member = $1 ORDER BY grp")
                .await?;
            let rows = c.query(&stmt, &[&user]).await?;
            rows.iter()
                .map(|r| Ok(Membership { user: r.try_get(0)?, group: r.try_get(1)?, group_admin: r.try_get(2)? }))
                .collect()
        })
    }

    fn key_add(&self, key: &ApiKeyRecord) -> Result<bool, StoreError> {
        let k = key.clone();
        self.run_changing("adding an API key", move |c| async move {
            let sql = format!("INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");
            let inserted = c
                .execute(
                    sql.as_str(),
                    &[
                        &k.id,
                        &k.principal,
                        &k.digest.as_slice(),
                        &k.scope.to_string(),
                        &k.created_ms,
                        &k.created_by,
                        &k.expires_ms,
                        &k.revoked_ms,
                        &k.last_used_ms,
                        &k.note,
                    ],
                )
                .await;
            added(inserted)
        })
    }

    fn key_get(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        let id = id.to_owned();
        self.run("reading an API key", move |c| async move {
            let stmt = c.prepare_cached(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1")).await?;
            c.query_opt(&stmt, &[&id]).await?.as_ref().map(key_row).transpose()
        })
    }

    fn keys(&self, principal: Option<&str>) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let principal = principal.map(str::to_owned);
        self.run("listing API keys", move |c| async move {
            let stmt = c
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE $1::text IS NULL OR principal = $1
                     ORDER BY created_ms DESC, id"
                ))
                .await?;
            c.query(&stmt, &[&principal]).await?.iter().map(key_row).collect()
        })
    }

    fn key_revoke(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run_changing("revoking an API key", move |c| async move {
            let n = c
                .execute("UPDATE api_keys SET revoked_ms = $2 WHERE id = $1 AND revoked_ms IS NULL", &[&id, &now_ms])
                .await?;
            Ok(n > 0)
        })
    }

    fn key_used(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.run("recording an API key's use", move |c| async move {
            c.execute(
                "UPDATE api_keys SET last_used_ms = $2::bigint
                 WHERE id = $1 AND (last_used_ms IS NULL OR last_used_ms < $2::bigint - 60000)",
                &[&id, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    fn page_session_open(
        &self,
        digest: &[u8; 32],
        user: &str,
        now_ms: i64,
        expires_ms: i64,
        max: usize,
    ) -> Result<bool, StoreError> {
        let (digest, user) = (digest.to_vec(), user.to_owned());
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.run("opening a page session", move |mut c| async move {
            let tx = c.transaction().await?;
            // Every node counts under the same lock, so two sign-ins at once cannot both take
            // the last place.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PAGE_SESSIONS_LOCK]).await?;
            tx.execute("DELETE FROM page_sessions WHERE expires_ms <= $1", &[&now_ms]).await?;
            let live: i64 = tx.query_one("SELECT count(*) FROM page_sessions", &[]).await?.try_get(0)?;
            if live >= max {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO page_sessions (digest, member, created_ms, expires_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (digest) DO UPDATE
                 SET member = excluded.member, created_ms = excluded.created_ms, expires_ms = excluded.expires_ms",
                &[&digest, &user, &now_ms, &expires_ms],
            )
            .await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    fn page_session_get(&self, digest: &[u8; 32], now_ms: i64) -> Result<Option<(String, i64)>, StoreError> {
        let digest = digest.to_vec();
        self.run("reading a page session", move |c| async move {
            let stmt = c
                .prepare_cached("SELECT member, expires_ms FROM page_sessions WHERE digest = $1 AND expires_ms > $2")
                .await?;
            let row = c.query_opt(&stmt, &[&digest, &now_ms]).await?;
            row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
        })
    }

    fn page_session_close(&self, digest: &[u8; 32]) -> Result<bool, StoreError> {
        let digest = digest.to_vec();
        self.run("ending a page session", move |c| async move {
            Ok(c.execute("DELETE FROM page_sessions WHERE digest = $1", &[&digest]).await? > 0)
        })
    }
}
