//! Who may use a team gateway: the [`IdentityStore`] trait (principals — users, groups and
//! agents —, group memberships, API keys) and its SQLite implementation on [`Store`] (tables
//! `principals`, `memberships`, `api_keys`, and the page's `page_sessions`; their migrations in
//! `db.rs`).
//!
//! The store keeps facts only: a key is kept as the SHA-256 digest of its text, never the text
//! (which is shown once, by whoever made it); what a key may do and whether it is valid now is
//! the gateway's rule (`toolgate-gateway`), checked against the record this store returns.
//! Names are unique across kinds, so a grant's subject names one principal.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// What a principal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    /// A person (or a service account that signs in like one).
    User,
    /// A set of users; grants to it apply to each member.
    Group,
    /// A program acting for its owner (a user or a group), with keys of its own.
    Agent,
}

impl PrincipalKind {
    fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::User => "user",
            PrincipalKind::Group => "group",
            PrincipalKind::Agent => "agent",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(PrincipalKind::User),
            "group" => Some(PrincipalKind::Group),
            "agent" => Some(PrincipalKind::Agent),
            _ => None,
        }
    }
}

/// A user, a group or an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Its name, unique across kinds.
    pub name: String,
    /// User, group or agent.
    pub kind: PrincipalKind,
    /// An agent's owner (a user or a group); `None` for users and groups.
    pub owner: Option<String>,
    /// May administer the gateway (users only).
    pub admin: bool,
    /// Refused everywhere while set (its keys too), without losing its grants.
    pub disabled: bool,
    /// A local sign-in's password, as an argon2id PHC string (never the password).
    pub password: Option<String>,
    /// When it was added, Unix milliseconds.
    pub created_ms: i64,
}

/// A user's place in a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The user.
    pub user: String,
    /// The group.
    pub group: String,
    /// Whether the user administers the group (approves its access requests).
    pub group_admin: bool,
}

/// An API key's record: what it is for and whether it still works, never its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// The public part of the key (`tg_<id>_...`), what lists and audit rows show.
    pub id: String,
    /// The principal it acts as.
    pub principal: String,
    /// SHA-256 of the whole key text.
    pub digest: [u8; 32],
    /// What it may reach (the gateway's JSON: tools, servers, workspace, source addresses).
    pub scope: serde_json::Value,
    /// When it was made, Unix milliseconds.
    pub created_ms: i64,
    /// Who made it.
    pub created_by: String,
    /// When it stops working, Unix milliseconds; `None`: never.
    pub expires_ms: Option<i64>,
    /// When it was revoked, Unix milliseconds.
    pub revoked_ms: Option<i64>,
    /// When it last let a request in, Unix milliseconds (recorded at most once a minute).
    pub last_used_ms: Option<i64>,
    /// What its maker said it is for.
    pub note: String,
}

/// Principals, memberships and API keys.
pub trait IdentityStore: Send + Sync + Debug {
    /// A number the store raises in the same transaction as every change of a principal, a
    /// membership or a key (not a key's last use): a cache of keys checks it on each request
    /// (`revisions.rs`).
    fn identity_revision(&self) -> Result<i64, StoreError>;

    /// Adds `principal`; `false` (and nothing written) when the name is taken.
    fn principal_add(&self, principal: &Principal) -> Result<bool, StoreError>;

    /// The principal named `name`.
    fn principal_get(&self, name: &str) -> Result<Option<Principal>, StoreError>;

    /// Every principal, or those of `kind`, by name.
    fn principals(&self, kind: Option<PrincipalKind>) -> Result<Vec<Principal>, StoreError>;

    /// Replaces the admin flag, the disabled flag and the password of `principal.name`;
    /// `false` when there is no such principal.
    fn principal_update(&self, principal: &Principal) -> Result<bool, StoreError>;

    /// Adds `user` to `group` (or changes its admin flag); `false` when either is missing or
    /// not of that kind.
    fn membership_set(&self, membership: &Membership) -> Result<bool, StoreError>;

    /// Removes `user` from `group`; whether it was a member.
    fn membership_remove(&self, user: &str, group: &str) -> Result<bool, StoreError>;

    /// The groups `user` belongs to.
    fn memberships(&self, user: &str) -> Result<Vec<Membership>, StoreError>;

    /// Stores a new key; `false` when its id is taken (the caller makes another).
    fn key_add(&self, key: &ApiKeyRecord) -> Result<bool, StoreError>;

    /// The key with `id`.
    fn key_get(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError>;

    /// Every key, or those of `principal`, newest first.
    fn keys(&self, principal: Option<&str>) -> Result<Vec<ApiKeyRecord>, StoreError>;

    /// Revokes key `id` at `now_ms`; `false` when there is no such key or it was revoked
    /// already (the first revocation's time is kept).
    fn key_revoke(&self, id: &str, now_ms: i64) -> Result<bool, StoreError>;

    /// Records that key `id` let a request in at `now_ms` (only when its last record is a
    /// minute older, so a busy key does not write on every call).
    fn key_used(&self, id: &str, now_ms: i64) -> Result<(), StoreError>;

    /// Keeps a page session: the SHA-256 `digest` of its cookie (never the cookie), its user
    /// and when it ends. Expired sessions are dropped first; `false` (nothing kept) when
    /// `max` live sessions exist already.
    fn page_session_open(
        &self,
        digest: &[u8; 32],
        user: &str,
        now_ms: i64,
        expires_ms: i64,
        max: usize,
    ) -> Result<bool, StoreError>;

    /// The user and end of the live session whose cookie has `digest`, if any.
    fn page_session_get(&self, digest: &[u8; 32], now_ms: i64) -> Result<Option<(String, i64)>, StoreError>;

    /// Ends the session whose cookie has `digest` (sign-out); `false` when there was none.
    fn page_session_close(&self, digest: &[u8; 32]) -> Result<bool, StoreError>;
}

const PRINCIPAL_COLUMNS: &str = "name, kind, owner, admin, disabled, password, created_ms";
const KEY_COLUMNS: &str =
    "id, principal, digest, scope, created_ms, created_by, expires_ms, revoked_ms, last_used_ms, note";

fn conversion(i: usize, e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
}

fn principal_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Principal> {
    let kind: String = r.get(1)?;
    let kind = PrincipalKind::parse(&kind)
        .ok_or_else(|| conversion(1, std::io::Error::other(format!("unknown principal kind `{kind}`"))))?;
    Ok(Principal {
        name: r.get(0)?,
        kind,
        owner: r.get(2)?,
        admin: r.get(3)?,
        disabled: r.get(4)?,
        password: r.get(5)?,
        created_ms: r.get(6)?,
    })
}

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyRecord> {
    let digest: Vec<u8> = r.get(2)?;
    let digest: [u8; 32] =
        digest.try_into().map_err(|_| conversion(2, std::io::Error::other("a key digest is not 32 bytes")))?;
    let scope: String = r.get(3)?;
    Ok(ApiKeyRecord {
        id: r.get(0)?,
        principal: r.get(1)?,
        digest,
        scope: serde_json::from_str(&scope).map_err(|e| conversion(3, e))?,
        created_ms: r.get(4)?,
        created_by: r.get(5)?,
        expires_ms: r.get(6)?,
        revoked_ms: r.get(7)?,
        last_used_ms: r.get(8)?,
        note: r.get(9)?,
    })
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

impl IdentityStore for Store {
    fn identity_revision(&self) -> Result<i64, StoreError> {
        self.revision("identity")
    }

    fn principal_add(&self, p: &Principal) -> Result<bool, StoreError> {
        self.with(|conn| {
            let inserted = conn.execute(
                &format!("INSERT INTO principals ({PRINCIPAL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                rusqlite::params![p.name, p.kind.as_str(), p.owner, p.admin, p.disabled, p.password, p.created_ms],
            );
            match inserted {
                Ok(_) => Ok(true),
                Err(e) if is_unique_violation(&e) => Ok(false),
                Err(e) => Err(e).doing("adding a principal"),
            }
        })
    }

    fn principal_get(&self, name: &str) -> Result<Option<Principal>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE name = ?1"))
                .doing("reading a principal")?;
            let mut rows = stmt.query_map([name], principal_row).doing("reading a principal")?;
            rows.next().transpose().doing("reading a principal")
        })
    }

    fn principals(&self, kind: Option<PrincipalKind>) -> Result<Vec<Principal>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE ?1 IS NULL OR kind = ?1 ORDER BY name"
                ))
                .doing("listing principals")?;
            let rows = stmt.query_map([kind.map(PrincipalKind::as_str)], principal_row).doing("listing principals")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing principals")
        })
    }

    fn principal_update(&self, p: &Principal) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE principals SET admin = ?2, disabled = ?3, password = ?4 WHERE name = ?1",
                rusqlite::params![p.name, p.admin, p.disabled, p.password],
            )
            .map(|n| n > 0)
            .doing("updating a principal")
        })
    }

    fn membership_set(&self, m: &Membership) -> Result<bool, StoreError> {
        self.with(|conn| {
            // Both ends must exist with the right kinds: checked in the statement itself, so a
            // principal removed meanwhile cannot leave a dangling membership.
            conn.execute(
                "INSERT INTO memberships (user, grp, group_admin)
                 SELECT ?1, ?2, ?3
                 WHERE EXISTS (SELECT 1 FROM principals WHERE name = ?1 AND kind = 'user')
                   AND EXISTS (SELECT 1 FROM principals WHERE name = ?2 AND kind = 'group')
                 ON CONFLICT (user, grp) DO UPDATE SET group_admin = excluded.group_admin",
                rusqlite::params![m.user, m.group, m.group_admin],
            )
            .map(|n| n > 0)
            .doing("adding a group member")
        })
    }

    fn membership_remove(&self, user: &str, group: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM memberships WHERE user = ?1 AND grp = ?2", [user, group])
                .map(|n| n > 0)
                .doing("removing a group member")
        })
    }

    fn memberships(&self, user: &str) -> Result<Vec<Membership>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT user, grp, group_admin FROM memberships WHERE user = ?1 ORDER BY grp")
                .doing("listing a user's groups")?;
            let rows = stmt
                .query_map([user], |r| Ok(Membership { user: r.get(0)?, group: r.get(1)?, group_admin: r.get(2)? }))
                .doing("listing a user's groups")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing a user's groups")
        })
    }

    fn key_add(&self, k: &ApiKeyRecord) -> Result<bool, StoreError> {
        self.with(|conn| {
            let inserted = conn.execute(
                &format!("INSERT INTO api_keys ({KEY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                rusqlite::params![
                    k.id,
                    k.principal,
                    k.digest.as_slice(),
                    k.scope.to_string(),
                    k.created_ms,
                    k.created_by,
                    k.expires_ms,
                    k.revoked_ms,
                    k.last_used_ms,
                    k.note
                ],
            );
            match inserted {
                Ok(_) => Ok(true),
                Err(e) if is_unique_violation(&e) => Ok(false),
                Err(e) => Err(e).doing("adding an API key"),
            }
        })
    }

    fn key_get(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?1"))
                .doing("reading an API key")?;
            let mut rows = stmt.query_map([id], key_row).doing("reading an API key")?;
            rows.next().transpose().doing("reading an API key")
        })
    }

    fn keys(&self, principal: Option<&str>) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE ?1 IS NULL OR principal = ?1
                     ORDER BY created_ms DESC, id"
                ))
                .doing("listing API keys")?;
            let rows = stmt.query_map([principal], key_row).doing("listing API keys")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing API keys")
        })
    }

    fn key_revoke(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE api_keys SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL",
                rusqlite::params![id, now_ms],
            )
            .map(|n| n > 0)
            .doing("revoking an API key")
        })
    }

    fn key_used(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE api_keys SET last_used_ms = ?2
                 WHERE id = ?1 AND (last_used_ms IS NULL OR last_used_ms < ?2 - 60000)",
                rusqlite::params![id, now_ms],
            )
            .map(drop)
            .doing("recording an API key's use")
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
        self.with(|conn| {
            let tx = conn.unchecked_transaction().doing("opening a page session")?;
            tx.execute("DELETE FROM page_sessions WHERE expires_ms <= ?1", [now_ms])
                .doing("dropping old page sessions")?;
            let live: i64 =
                tx.query_row("SELECT count(*) FROM page_sessions", [], |r| r.get(0)).doing("counting page sessions")?;
            if usize::try_from(live).unwrap_or(usize::MAX) >= max {
                return Ok(false);
            }
            tx.execute(
                "INSERT OR REPLACE INTO page_sessions (digest, user, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![&digest[..], user, now_ms, expires_ms],
            )
            .doing("opening a page session")?;
            tx.commit().doing("opening a page session")?;
            Ok(true)
        })
    }

    fn page_session_get(&self, digest: &[u8; 32], now_ms: i64) -> Result<Option<(String, i64)>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT user, expires_ms FROM page_sessions WHERE digest = ?1 AND expires_ms > ?2")
                .doing("reading a page session")?;
            let mut rows = stmt
                .query_map(rusqlite::params![&digest[..], now_ms], |r| Ok((r.get(0)?, r.get(1)?)))
                .doing("reading a page session")?;
            rows.next().transpose().doing("reading a page session")
        })
    }

    fn page_session_close(&self, digest: &[u8; 32]) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM page_sessions WHERE digest = ?1", [&digest[..]])
                .map(|n| n > 0)
                .doing("ending a page session")
        })
    }
}
