//! Grants and access requests: the [`GrantStore`] trait and its SQLite implementation on
//! [`Store`] (tables `grants` and `access_requests`, their migration [`MIGRATION`] in `db.rs`).
//!
//! There is one grant store. A team gateway's grants ([`ToolGrant`]: a principal may use some
//! of toolgate's tools or of a bridged server's, or is refused them) and the approval stage's
//! "allow always" decisions ([`Grant`]: one tool, one exact normalized subject, for a user and
//! an agent) are rows of the same table; the migration moved the rows of the old
//! `approval_grants` table into it. An access request ([`AccessRequest`]) asks for a grant; its
//! approval writes the grant in the same transaction.
//!
//! The store keeps facts: which principal names are valid, what a pattern matches and who may
//! decide are the gateway's rules (`toolgate-gateway`). Times are Unix milliseconds from the
//! caller (the store reads no clock).

use std::fmt::Debug;

use rusqlite::{OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// The tables, and the old "allow always" rows moved in (each becomes an `allow` grant of its
/// one tool to its user and agent, with its subject as the exact argument match). It can run
/// again on its own result (a test rewinds the schema past it): `approval_grants` is emptied,
/// not dropped, and every statement skips what exists.
pub(crate) const MIGRATION: &str = "CREATE TABLE IF NOT EXISTS grants (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        subject TEXT NOT NULL,
        agent TEXT,
        server TEXT,
        tool_allow TEXT NOT NULL DEFAULT '[]',
        tool_deny TEXT NOT NULL DEFAULT '[]',
        enabled INTEGER NOT NULL DEFAULT 1,
        config_overrides TEXT NOT NULL DEFAULT '{}',
        mode TEXT NOT NULL CHECK (mode IN ('allow', 'ask', 'deny')),
        arg_subject TEXT,
        expires_ms INTEGER,
        granted_by TEXT NOT NULL,
        request INTEGER,
        note TEXT NOT NULL DEFAULT '',
        created_ms INTEGER NOT NULL
     );
     CREATE INDEX IF NOT EXISTS grants_subject ON grants (subject);
     CREATE UNIQUE INDEX IF NOT EXISTS grants_always ON grants (subject, agent, tool_allow, arg_subject)
        WHERE arg_subject IS NOT NULL;
     INSERT OR IGNORE INTO grants (subject, agent, tool_allow, mode, arg_subject, granted_by, note, created_ms)
        SELECT user, agent, json_array(tool), 'allow', subject, user, shown, created_ms
        FROM approval_grants ORDER BY id;
     DELETE FROM approval_grants;
     CREATE TABLE IF NOT EXISTS access_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        requester TEXT NOT NULL,
        user TEXT NOT NULL,
        server TEXT,
        tool TEXT,
        reason TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        created_ms INTEGER NOT NULL,
        decided_by TEXT,
        decided_ms INTEGER,
        message TEXT,
        grant_id INTEGER
     );
     CREATE UNIQUE INDEX IF NOT EXISTS access_requests_pending
        ON access_requests (requester, ifnull(server, ''), ifnull(tool, '')) WHERE status = 'pending';
     CREATE INDEX IF NOT EXISTS access_requests_status ON access_requests (status, id);";

/// A grant's optional argument rule ([`ToolGrant::arg_rule`]).
pub(crate) const ARG_RULE_MIGRATION: &str = "ALTER TABLE grants ADD COLUMN arg_rule TEXT;";

/// Why the requester of a decided access request could not be told, and when
/// ([`AccessRequest::notify_error`]).
pub(crate) const NOTIFY_MIGRATION: &str = "ALTER TABLE access_requests ADD COLUMN notify_error TEXT;
     ALTER TABLE access_requests ADD COLUMN notify_failed_ms INTEGER;";

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

/// The `subject` of the standing approval an "allow always" writes: the call's normalized
/// subject, or for a tool without one the SHA-256 (hex) of its exact parameters (`args_digest`,
/// so a grant for one token never approves another, and no secret reaches the table).
pub fn approval_grant_subject(subject: Option<&str>, args_digest: &str) -> String {
    match subject.filter(|s| !s.is_empty()) {
        Some(s) => format!("subject:{s}"),
        None => format!("params-sha256:{args_digest}"),
    }
}

/// What the "allow always" entries a standing approval was made from record, by its `subject`
/// ([`approval_grant_subject`]): their subject, and for a tool without one their argument
/// digest. `None` for a subject no approval makes.
pub fn approvals_of_grant_subject(grant_subject: &str) -> Option<(String, Option<String>)> {
    if let Some(subject) = grant_subject.strip_prefix("subject:") {
        return Some((subject.to_owned(), None));
    }
    grant_subject.strip_prefix("params-sha256:").map(|digest| (String::new(), Some(digest.to_owned())))
}

impl Grant {
    /// The standing approval an "allow always" decision of `record` makes, granted at `at_ms`.
    pub fn of_approval(record: &crate::ApprovalRecord, at_ms: i64) -> Grant {
        let shown = if record.subject.is_empty() { record.shown["params"].to_string() } else { record.subject.clone() };
        Grant {
            id: 0,
            user: record.user.clone(),
            agent: record.agent.clone(),
            tool: record.tool.clone(),
            subject: approval_grant_subject(Some(&record.subject), &record.args_digest),
            shown,
            created_ms: at_ms,
        }
    }
}

/// Inserts `grant` unless the same one is there (a standing approval is written by the decision
/// and again by the call that uses it).
pub(crate) fn insert_approval_grant(conn: &rusqlite::Connection, grant: &Grant) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT OR IGNORE INTO grants (subject, agent, tool_allow, mode, arg_subject, granted_by, note, created_ms)
         VALUES (?1, ?2, ?3, 'allow', ?4, ?1, ?5, ?6)",
        rusqlite::params![
            grant.user,
            grant.agent,
            json_list(std::slice::from_ref(&grant.tool)),
            grant.subject,
            grant.shown,
            grant.created_ms
        ],
    )
    .map(drop)
}

/// What a [`ToolGrant`] does to the calls it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantMode {
    /// The calls may be made.
    Allow,
    /// The calls may be made once a person approves each.
    Ask,
    /// The calls are refused, whatever else allows them.
    Deny,
}

impl GrantMode {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantMode::Allow => "allow",
            GrantMode::Ask => "ask",
            GrantMode::Deny => "deny",
        }
    }

    /// The mode `text` names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "allow" => Some(GrantMode::Allow),
            "ask" => Some(GrantMode::Ask),
            "deny" => Some(GrantMode::Deny),
            _ => None,
        }
    }
}

/// A principal's grant on toolgate's own tools (`server: None`) or on one bridged server's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolGrant {
    /// Row id; ignored when adding.
    pub id: i64,
    /// The principal it is given to (a user, a group or an agent).
    pub subject: String,
    /// The bridged MCP server it is about; `None`: toolgate's own tools.
    pub server: Option<String>,
    /// Tool names or `*` patterns it covers (a server's tools by their names on that server);
    /// empty: every tool of the resource.
    pub tool_allow: Vec<String>,
    /// Tools it never covers (names or patterns); deny wins over every allow.
    pub tool_deny: Vec<String>,
    /// Off: kept, but as if it did not exist.
    pub enabled: bool,
    /// Settings of the server for this grant's agent (a JSON object; `{}` when none).
    pub config_overrides: serde_json::Value,
    /// Allow, ask or deny.
    pub mode: GrantMode,
    /// An argument rule in the policy's syntax (`exec(git *)`, `read(src/**)`) that narrows
    /// the grant to the calls it matches (the gateway parses and applies it); `None`: every
    /// call of the tools it covers.
    #[serde(default)]
    pub arg_rule: Option<String>,
    /// When it stops applying; `None`: never.
    pub expires_ms: Option<i64>,
    /// Who granted it.
    pub granted_by: String,
    /// The access request it was made from, if any.
    pub request: Option<i64>,
    /// Why it was given.
    pub note: String,
    /// When it was made.
    pub created_ms: i64,
}

/// Where an access request stands; only `pending` moves, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessStatus {
    /// Waiting for an approver.
    Pending,
    /// Approved: its grant exists.
    Approved,
    /// Rejected.
    Rejected,
}

impl AccessStatus {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessStatus::Pending => "pending",
            AccessStatus::Approved => "approved",
            AccessStatus::Rejected => "rejected",
        }
    }

    /// The status `text` names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(AccessStatus::Pending),
            "approved" => Some(AccessStatus::Approved),
            "rejected" => Some(AccessStatus::Rejected),
            _ => None,
        }
    }
}

/// A request for a grant: a user or an agent asks for a tool or a server, with a reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRequest {
    /// Row id; ignored when adding.
    pub id: i64,
    /// Who asks: the principal the grant would be given to (a user, or an agent).
    pub requester: String,
    /// The user the requester acts for (itself, or an agent's owner).
    pub user: String,
    /// The bridged server asked for; `None`: toolgate's own tools.
    pub server: Option<String>,
    /// The tool (or pattern) asked for; `None` with a server: the whole server.
    pub tool: Option<String>,
    /// Why, in the requester's words.
    pub reason: String,
    /// Where it stands.
    pub status: AccessStatus,
    /// When it was asked.
    pub created_ms: i64,
    /// Who decided.
    pub decided_by: Option<String>,
    /// When.
    pub decided_ms: Option<i64>,
    /// What the approver said.
    pub message: Option<String>,
    /// The grant an approval made.
    pub grant_id: Option<i64>,
    /// Why the requester could not be told of the decision (their webhook failed), when so.
    #[serde(default)]
    pub notify_error: Option<String>,
    /// When that failure was recorded.
    #[serde(default)]
    pub notify_failed_ms: Option<i64>,
}

/// The decision on a pending access request.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessDecision {
    /// The request.
    pub id: i64,
    /// Approve with this grant (its `request` is set to the request's id), or reject (`None`).
    pub grant: Option<ToolGrant>,
    /// Who decides.
    pub by: String,
    /// When.
    pub at_ms: i64,
    /// What the approver says to the requester.
    pub message: Option<String>,
}

/// Grants ("allow always" decisions and a gateway's grants) and access requests.
pub trait GrantStore: Send + Sync + Debug {
    /// A number the store raises in the same transaction as every change of a grant (added,
    /// revoked, turned on or off, an access request's approval, "allow always"): a cache of
    /// compiled grants checks it on each request (`revisions.rs`).
    fn grants_revision(&self) -> Result<i64, StoreError>;

    /// Records an "allow always" grant; its `id` is ignored. A second grant of the same (user,
    /// agent, tool, subject) is a no-op.
    fn grant_add(&self, grant: &Grant) -> Result<(), StoreError>;

    /// Whether an "allow always" grant covers calls of `tool` by `agent` for `user` with this
    /// subject.
    fn grant_exists(&self, user: &str, agent: &str, tool: &str, subject: &str) -> Result<bool, StoreError>;

    /// Every "allow always" grant, oldest first, each with the id [`GrantStore::grant_revoke`]
    /// takes.
    fn grants(&self) -> Result<Vec<Grant>, StoreError>;

    /// Removes a grant of either kind; returns whether it existed.
    fn grant_revoke(&self, id: i64) -> Result<bool, StoreError>;

    /// Adds a gateway grant (its `id` is ignored); returns its id.
    fn tool_grant_add(&self, grant: &ToolGrant) -> Result<i64, StoreError>;

    /// The gateway grant with `id`.
    fn tool_grant_get(&self, id: i64) -> Result<Option<ToolGrant>, StoreError>;

    /// The gateway grants given to any of `subjects` (every one when `None`), oldest first,
    /// enabled or not, expired or not.
    fn tool_grants(&self, subjects: Option<&[String]>) -> Result<Vec<ToolGrant>, StoreError>;

    /// Turns a gateway grant on or off; `false` when there is no such grant.
    fn tool_grant_enable(&self, id: i64, enabled: bool) -> Result<bool, StoreError>;

    /// Files an access request (its `id`, `status` and decision fields are ignored). A pending
    /// request of the same requester for the same server and tool is the same request: its id
    /// is returned with `false`, and nothing is written.
    fn access_request(&self, request: &AccessRequest) -> Result<(i64, bool), StoreError>;

    /// The access request with `id`.
    fn access_get(&self, id: i64) -> Result<Option<AccessRequest>, StoreError>;

    /// Access requests, newest first: those with `status` (all when `None`), of the requesters
    /// in `requesters` (everyone's when `None`).
    fn access_requests(
        &self,
        status: Option<AccessStatus>,
        requesters: Option<&[String]>,
    ) -> Result<Vec<AccessRequest>, StoreError>;

    /// Decides a pending request: one transaction that moves it from pending (only if it still
    /// is: the first decision wins) and, on approval, adds its grant. Returns the request as
    /// it then stands, or `None` when there is no such request; a request that was decided
    /// already comes back unchanged.
    fn access_decide(&self, decision: &AccessDecision) -> Result<Option<AccessRequest>, StoreError>;

    /// Records on decided request `id` that its requester could not be told of the decision
    /// (`error`, at `at_ms`); a later failure replaces an earlier one. `false` when there is no
    /// such decided request.
    fn access_notify_failed(&self, id: i64, error: &str, at_ms: i64) -> Result<bool, StoreError>;
}

const GRANT_COLUMNS: &str = "id, subject, server, tool_allow, tool_deny, enabled, config_overrides, mode, expires_ms, \
                             granted_by, request, note, created_ms, arg_rule";
const ACCESS_COLUMNS: &str = "id, requester, user, server, tool, reason, status, created_ms, decided_by, decided_ms, message, grant_id, \
     notify_error, notify_failed_ms";

fn conversion(i: usize, e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
}

fn json_list(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

fn tool_grant_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolGrant> {
    let list = |i: usize| -> rusqlite::Result<Vec<String>> {
        let text: String = r.get(i)?;
        serde_json::from_str(&text).map_err(|e| conversion(i, e))
    };
    let overrides: String = r.get(6)?;
    let mode: String = r.get(7)?;
    Ok(ToolGrant {
        id: r.get(0)?,
        subject: r.get(1)?,
        server: r.get(2)?,
        tool_allow: list(3)?,
        tool_deny: list(4)?,
        enabled: r.get(5)?,
        config_overrides: serde_json::from_str(&overrides).map_err(|e| conversion(6, e))?,
        mode: GrantMode::parse(&mode)
            .ok_or_else(|| conversion(7, std::io::Error::other(format!("unknown grant mode `{mode}`"))))?,
        expires_ms: r.get(8)?,
        granted_by: r.get(9)?,
        request: r.get(10)?,
        note: r.get(11)?,
        created_ms: r.get(12)?,
        arg_rule: r.get(13)?,
    })
}

fn access_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AccessRequest> {
    let status: String = r.get(6)?;
    Ok(AccessRequest {
        id: r.get(0)?,
        requester: r.get(1)?,
        user: r.get(2)?,
        server: r.get(3)?,
        tool: r.get(4)?,
        reason: r.get(5)?,
        status: AccessStatus::parse(&status)
            .ok_or_else(|| conversion(6, std::io::Error::other(format!("unknown request status `{status}`"))))?,
        created_ms: r.get(7)?,
        decided_by: r.get(8)?,
        decided_ms: r.get(9)?,
        message: r.get(10)?,
        grant_id: r.get(11)?,
        notify_error: r.get(12)?,
        notify_failed_ms: r.get(13)?,
    })
}

fn insert_tool_grant(conn: &rusqlite::Connection, g: &ToolGrant) -> rusqlite::Result<i64> {
    let overrides = if g.config_overrides.is_null() { "{}".to_owned() } else { g.config_overrides.to_string() };
    conn.execute(
        "INSERT INTO grants (subject, server, tool_allow, tool_deny, enabled, config_overrides, mode, expires_ms,
                             granted_by, request, note, created_ms, arg_rule)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        rusqlite::params![
            g.subject,
            g.server,
            json_list(&g.tool_allow),
            json_list(&g.tool_deny),
            g.enabled,
            overrides,
            g.mode.as_str(),
            g.expires_ms,
            g.granted_by,
            g.request,
            g.note,
            g.created_ms,
            g.arg_rule
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

fn get_access(conn: &rusqlite::Connection, id: i64) -> rusqlite::Result<Option<AccessRequest>> {
    conn.prepare_cached(&format!("SELECT {ACCESS_COLUMNS} FROM access_requests WHERE id = ?1"))?
        .query_row([id], access_row)
        .optional()
}

impl GrantStore for Store {
    fn grants_revision(&self) -> Result<i64, StoreError> {
        self.revision("grants")
    }

    fn grant_add(&self, grant: &Grant) -> Result<(), StoreError> {
        self.with(|conn| insert_approval_grant(conn, grant).doing("saving an approval grant"))
    }

    fn grant_exists(&self, user: &str, agent: &str, tool: &str, subject: &str) -> Result<bool, StoreError> {
        let tools = json_list(&[tool.to_owned()]);
        self.with(|conn| {
            conn.prepare_cached(
                "SELECT 1 FROM grants WHERE subject = ?1 AND agent = ?2 AND tool_allow = ?3 AND arg_subject = ?4
                   AND enabled = 1",
            )
            .and_then(|mut stmt| stmt.exists(rusqlite::params![user, agent, tools, subject]))
            .doing("checking approval grants")
        })
    }

    fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, subject, agent, tool_allow, arg_subject, note, created_ms FROM grants
                     WHERE arg_subject IS NOT NULL ORDER BY id",
                )
                .doing("listing approval grants")?;
            let rows = stmt
                .query_map([], |r| {
                    let tools: String = r.get(3)?;
                    let tools: Vec<String> = serde_json::from_str(&tools).map_err(|e| conversion(3, e))?;
                    Ok(Grant {
                        id: r.get(0)?,
                        user: r.get(1)?,
                        agent: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        tool: tools.into_iter().next().unwrap_or_default(),
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
        const DOING: &str = "revoking a grant";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let standing = tx
                .query_row(
                    "SELECT subject, agent, tool_allow, arg_subject FROM grants WHERE id = ?1 AND arg_subject IS NOT NULL",
                    [id],
                    |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
                    },
                )
                .optional()
                .doing(DOING)?;
            if let Some((user, Some(agent), tools, subject)) = standing {
                let tools: Vec<String> = serde_json::from_str(&tools).unwrap_or_default();
                for tool in &tools {
                    crate::approvals::spend_allowed_always(&tx, &user, &agent, tool, &subject).doing(DOING)?;
                }
            }
            let removed = tx.execute("DELETE FROM grants WHERE id = ?1", [id]).doing(DOING)? > 0;
            tx.commit().doing(DOING)?;
            Ok(removed)
        })
    }

    fn tool_grant_add(&self, grant: &ToolGrant) -> Result<i64, StoreError> {
        self.with(|conn| insert_tool_grant(conn, grant).doing("adding a grant"))
    }

    fn tool_grant_get(&self, id: i64) -> Result<Option<ToolGrant>, StoreError> {
        self.with(|conn| {
            conn.prepare_cached(&format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = ?1 AND arg_subject IS NULL"))
                .and_then(|mut stmt| stmt.query_row([id], tool_grant_row).optional())
                .doing("reading a grant")
        })
    }

    fn tool_grants(&self, subjects: Option<&[String]>) -> Result<Vec<ToolGrant>, StoreError> {
        const DOING: &str = "listing grants";
        // The subjects as one JSON array parameter, so the statement is cached whatever their
        // number.
        let wanted = subjects.map(json_list);
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {GRANT_COLUMNS} FROM grants WHERE arg_subject IS NULL
                       AND (?1 IS NULL OR subject IN (SELECT value FROM json_each(?1)))
                     ORDER BY id"
                ))
                .doing(DOING)?;
            let rows = stmt.query_map([wanted], tool_grant_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn tool_grant_enable(&self, id: i64, enabled: bool) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE grants SET enabled = ?2 WHERE id = ?1 AND arg_subject IS NULL",
                rusqlite::params![id, enabled],
            )
            .map(|n| n > 0)
            .doing("turning a grant on or off")
        })
    }

    fn access_request(&self, r: &AccessRequest) -> Result<(i64, bool), StoreError> {
        const DOING: &str = "filing an access request";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let existing: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM access_requests WHERE status = 'pending' AND requester = ?1
                       AND ifnull(server, '') = ifnull(?2, '') AND ifnull(tool, '') = ifnull(?3, '')",
                )
                .and_then(|mut stmt| stmt.query_row(rusqlite::params![r.requester, r.server, r.tool], |row| row.get(0)))
                .optional()
                .doing(DOING)?;
            if let Some(id) = existing {
                return Ok((id, false));
            }
            tx.execute(
                "INSERT INTO access_requests (requester, user, server, tool, reason, status, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6)",
                rusqlite::params![r.requester, r.user, r.server, r.tool, r.reason, r.created_ms],
            )
            .doing(DOING)?;
            let id = tx.last_insert_rowid();
            tx.commit().doing(DOING)?;
            Ok((id, true))
        })
    }

    fn access_get(&self, id: i64) -> Result<Option<AccessRequest>, StoreError> {
        self.with(|conn| get_access(conn, id).doing("reading an access request"))
    }

    fn access_requests(
        &self,
        status: Option<AccessStatus>,
        requesters: Option<&[String]>,
    ) -> Result<Vec<AccessRequest>, StoreError> {
        const DOING: &str = "listing access requests";
        let wanted = requesters.map(json_list);
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {ACCESS_COLUMNS} FROM access_requests
                     WHERE (?1 IS NULL OR status = ?1)
                       AND (?2 IS NULL OR requester IN (SELECT value FROM json_each(?2)))
                     ORDER BY id DESC"
                ))
                .doing(DOING)?;
            let rows =
                stmt.query_map(rusqlite::params![status.map(AccessStatus::as_str), wanted], access_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn access_decide(&self, d: &AccessDecision) -> Result<Option<AccessRequest>, StoreError> {
        const DOING: &str = "deciding an access request";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let Some(request) = get_access(&tx, d.id).doing(DOING)? else { return Ok(None) };
            if request.status != AccessStatus::Pending {
                return Ok(Some(request));
            }
            let grant_id = match &d.grant {
                Some(grant) => {
                    let grant = ToolGrant { request: Some(d.id), ..grant.clone() };
                    Some(insert_tool_grant(&tx, &grant).doing(DOING)?)
                }
                None => None,
            };
            let status = if d.grant.is_some() { AccessStatus::Approved } else { AccessStatus::Rejected };
            // Conditional on pending: with the IMMEDIATE transaction no other decision can land
            // between the read and this write, and the condition says so in the statement too.
            let changed = tx
                .execute(
                    "UPDATE access_requests SET status = ?2, decided_by = ?3, decided_ms = ?4, message = ?5, grant_id = ?6
                     WHERE id = ?1 AND status = 'pending'",
                    rusqlite::params![d.id, status.as_str(), d.by, d.at_ms, d.message, grant_id],
                )
                .doing(DOING)?;
            if changed == 0 {
                return Ok(Some(request));
            }
            let decided = get_access(&tx, d.id).doing(DOING)?;
            tx.commit().doing(DOING)?;
            Ok(decided)
        })
    }

    fn access_notify_failed(&self, id: i64, error: &str, at_ms: i64) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE access_requests SET notify_error = ?2, notify_failed_ms = ?3 WHERE id = ?1 AND status <> 'pending'",
                rusqlite::params![id, error, at_ms],
            )
            .map(|n| n > 0)
            .doing("recording that a requester could not be told of a decision")
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

    /// A database made before this migration keeps its "allow always" decisions: they are
    /// grants of the one store afterwards, found and listed as before.
    #[test]
    fn allow_always_rows_are_migrated_into_the_grant_store() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let at = crate::db::MIGRATIONS.iter().position(|m| *m == MIGRATION).unwrap();
        {
            let mut conn = rusqlite::Connection::open(&db).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &crate::db::MIGRATIONS[..at] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", at as i64).unwrap();
            tx.execute(
                "INSERT INTO approval_grants (user, agent, tool, subject, shown, created_ms)
                 VALUES ('ann', 'main', 'exec', 'cargo test', 'cargo test', 7)",
                [],
            )
            .unwrap();
            tx.commit().unwrap();
        }
        let store = Store::open(&db).unwrap();
        assert!(store.grant_exists("ann", "main", "exec", "cargo test").unwrap());
        let all = store.grants().unwrap();
        assert_eq!((all.len(), all[0].shown.as_str(), all[0].created_ms), (1, "cargo test", 7));
        assert!(store.tool_grants(None).unwrap().is_empty(), "an exact-subject grant is no tool grant");
    }
}
