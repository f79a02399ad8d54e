//! The approvals inbox: tool calls waiting for a person's decision, kept in the store so they
//! outlive the process that asked, and decided exactly once. The [`ApprovalStore`] trait and
//! its SQLite implementation on [`Store`] (tables `approvals` and `approval_events`).
//!
//! An entry is bound to what was asked: the caller (user, agent), the tool and its bridged
//! server, the normalized subject and a digest of the exact arguments, the policy revision in
//! force, and an expiry. Every change (created, decided, expired, notification failed, used) is
//! an event row written in the same transaction as the change, so the history is the audit of
//! the inbox. Times are Unix milliseconds from the caller (the store reads no clock).

use std::fmt::{self, Debug};

use rusqlite::{OptionalExtension, Row, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// Where an entry stands. Only `pending` moves, once, to one of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved for this call.
    Allowed,
    /// Approved for this call and later ones with the same subject ("allow always").
    AllowedAlways,
    /// Refused.
    Denied,
    /// Nobody decided before its expiry.
    Expired,
}

impl ApprovalStatus {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Allowed => "allowed",
            ApprovalStatus::AllowedAlways => "allowed_always",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
        }
    }

    /// The status a stored word names (`None` for a word this build does not know).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => ApprovalStatus::Pending,
            "allowed" => ApprovalStatus::Allowed,
            "allowed_always" => ApprovalStatus::AllowedAlways,
            "denied" => ApprovalStatus::Denied,
            "expired" => ApprovalStatus::Expired,
            _ => return None,
        })
    }

    /// Whether the call may run.
    pub fn allows(self) -> bool {
        matches!(self, ApprovalStatus::Allowed | ApprovalStatus::AllowedAlways)
    }
}

impl fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The entry's number ("approval 12"); assigned by the store, ignored when adding.
    pub id: i64,
    /// The call that asked (a toolgate call id).
    pub call_id: String,
    /// The user the call is made for.
    pub user: String,
    /// The agent making it.
    pub agent: String,
    /// The caller's session.
    pub session: String,
    /// The canonical tool name.
    pub tool: String,
    /// The bridged MCP server the tool belongs to, if any.
    pub server: Option<String>,
    /// The normalized subject ("allow always" is stored against it).
    pub subject: String,
    /// The SHA-256 (hex) of the exact arguments; a decision applies to these arguments only.
    pub args_digest: String,
    /// What the approver is shown: the parameters with sensitive values redacted, the
    /// unwrapped command. Attacker-controlled text: escape it wherever it is displayed.
    pub shown: serde_json::Value,
    /// Why approval is asked.
    pub reason: String,
    /// The policy revision the call was decided under; a decision does not carry over to
    /// another revision.
    pub policy_revision: String,
    /// The batch (one model turn's calls waiting together), if any.
    pub batch: Option<String>,
    /// When it was asked.
    pub created_ms: i64,
    /// After this instant it can no longer be decided.
    pub expires_ms: i64,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// Who decided (or `expired`'s reason: the system).
    pub decided_by: Option<String>,
    /// When.
    pub decided_ms: Option<i64>,
    /// The decider's message (a denial's reason reaches the model).
    pub message: Option<String>,
    /// The last failure to notify an approver, if any.
    pub notify_error: Option<String>,
    /// Set when notifying failed: at this instant a still-pending entry is denied (seed 003's
    /// fallback). Stored, so a restart of the server that armed it does not disarm it.
    #[serde(default)]
    pub fallback_ms: Option<i64>,
    /// When the decision was used by a run of the call (an approval runs one call once).
    pub used_ms: Option<i64>,
}

/// A decision to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    /// `Allowed`, `AllowedAlways` or `Denied`.
    pub status: ApprovalStatus,
    /// Who decides.
    pub by: String,
    /// Their message.
    pub message: Option<String>,
    /// When.
    pub at_ms: i64,
}

/// What [`ApprovalStore::approval_decide`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideOutcome {
    /// This decision was recorded (it was the first).
    Decided(ApprovalRecord),
    /// Someone decided first, or it expired earlier: the entry as it stands.
    AlreadyDecided(ApprovalRecord),
    /// It was pending but past its expiry: now marked expired, the decision not recorded.
    Expired(ApprovalRecord),
    /// No such entry.
    NotFound,
}

/// Which entries to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalFilter {
    /// Only these statuses.
    pub status: Vec<ApprovalStatus>,
    /// Only this user's calls.
    pub user: Option<String>,
    /// Only this agent's calls.
    pub agent: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only this batch.
    pub batch: Option<String>,
    /// Only entries created at or after this instant.
    pub since_ms: Option<i64>,
    /// At most this many (newest first); `None`: 1,000.
    pub limit: Option<u32>,
}

/// One change of an entry, in order: the inbox's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalEvent {
    /// The entry.
    pub approval: i64,
    /// `created`, `allowed`, `allowed_always`, `denied`, `expired`, `notify_failed`, `used`,
    /// `refused` (a decision that came too late or from the caller itself).
    pub kind: String,
    /// Who (a principal name, or `toolgate`).
    pub by: String,
    /// When.
    pub at_ms: i64,
    /// A message, an error, a reason.
    pub detail: Option<String>,
}

/// The approvals inbox's persistence. Every method is one transaction; a decision is the first
/// one or none (`UPDATE ... WHERE status = 'pending'`), whatever the number of processes or
/// nodes deciding at once.
pub trait ApprovalStore: Send + Sync + Debug {
    /// Adds a pending entry (its `id`, `status` and decision fields are ignored) with its
    /// `created` event; returns its id.
    fn approval_add(&self, record: &ApprovalRecord) -> Result<i64, StoreError>;

    /// One entry.
    fn approval_get(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError>;

    /// The entries `filter` selects, newest first.
    fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Records a decision if the entry is still pending and `decision.at_ms` is before its
    /// expiry; a pending entry past its expiry is marked expired instead.
    fn approval_decide(&self, id: i64, decision: &ApprovalDecision) -> Result<DecideOutcome, StoreError>;

    /// Marks every pending entry whose expiry is at or before `now_ms` expired, and denies every
    /// one whose notification fallback is due (its message says nobody could be told); returns
    /// them.
    fn approval_expire(&self, now_ms: i64) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Marks a decision (allowed or denied) used by a run of its call; `false` when it was
    /// used already or is not decided (a decision answers one run of its call).
    fn approval_use(&self, id: i64, now_ms: i64) -> Result<bool, StoreError>;

    /// Records that notifying an approver failed (the entry stays pending) and, with
    /// `fallback_ms`, when it is to be denied unless decided (an earlier instant already set
    /// stands); `false` when there is no such entry.
    fn approval_notify_failed(
        &self,
        id: i64,
        error: &str,
        now_ms: i64,
        fallback_ms: Option<i64>,
    ) -> Result<bool, StoreError>;

    /// Records a decision that was refused (too late, self-approval) in the entry's history.
    fn approval_refused(&self, id: i64, by: &str, reason: &str, now_ms: i64) -> Result<(), StoreError>;

    /// The newest entry for exactly this call (user, agent, tool, argument digest, policy
    /// revision) that is pending, or decided and not yet used, and not past its expiry at
    /// `now_ms`: the one a retried call resumes from.
    fn approval_find(
        &self,
        user: &str,
        agent: &str,
        tool: &str,
        args_digest: &str,
        policy_revision: &str,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError>;

    /// An entry's history, oldest first.
    fn approval_events(&self, id: i64) -> Result<Vec<ApprovalEvent>, StoreError>;

    /// Has `wake` called soon after an entry changes in another process or node, when the
    /// backend can tell (PostgreSQL's `LISTEN`); `false` when it cannot, and waiters find
    /// other processes' decisions by reading the entry again. Lossy either way: a waiter still
    /// reads its entry now and then, and a call to `wake` says only "look again".
    fn approval_watch(&self, wake: Box<dyn Fn() + Send + Sync>) -> bool {
        drop(wake);
        false
    }
}

const COLUMNS: &str = "id, call_id, user, agent, session, tool, server, subject, args_digest, shown, reason, \
     policy_revision, batch, created_ms, expires_ms, status, decided_by, decided_ms, message, notify_error, used_ms, \
     fallback_ms";

fn record(r: &Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    let shown: String = r.get(9)?;
    let status: String = r.get(15)?;
    Ok(ApprovalRecord {
        id: r.get(0)?,
        call_id: r.get(1)?,
        user: r.get(2)?,
        agent: r.get(3)?,
        session: r.get(4)?,
        tool: r.get(5)?,
        server: r.get(6)?,
        subject: r.get(7)?,
        args_digest: r.get(8)?,
        shown: serde_json::from_str(&shown).unwrap_or(serde_json::Value::String(shown)),
        reason: r.get(10)?,
        policy_revision: r.get(11)?,
        batch: r.get(12)?,
        created_ms: r.get(13)?,
        expires_ms: r.get(14)?,
        // The column's CHECK admits only known words.
        status: ApprovalStatus::parse(&status).unwrap_or(ApprovalStatus::Expired),
        decided_by: r.get(16)?,
        decided_ms: r.get(17)?,
        message: r.get(18)?,
        notify_error: r.get(19)?,
        used_ms: r.get(20)?,
        fallback_ms: r.get(21)?,
    })
}

fn get(conn: &rusqlite::Connection, id: i64) -> rusqlite::Result<Option<ApprovalRecord>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"))?.query_row([id], record).optional()
}

fn event(
    conn: &rusqlite::Connection,
    id: i64,
    kind: &str,
    by: &str,
    at_ms: i64,
    detail: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO approval_events (approval, kind, by, at_ms, detail) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(rusqlite::params![id, kind, by, at_ms, detail])
        .map(drop)
}

/// Marks used the "allow always" entries of (`user`, `agent`, `tool`) whose standing grant, of
/// subject `grant_subject`, is being revoked: an identical call afterwards asks a person again
/// instead of resuming from one of them and writing the grant back.
pub(crate) fn spend_allowed_always(
    conn: &rusqlite::Connection,
    user: &str,
    agent: &str,
    tool: &str,
    grant_subject: &str,
) -> rusqlite::Result<()> {
    let Some((subject, digest)) = crate::grants::approvals_of_grant_subject(grant_subject) else { return Ok(()) };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let ids: Vec<i64> = conn
        .prepare_cached(
            "SELECT id FROM approvals WHERE user = ?1 AND agent = ?2 AND tool = ?3 AND subject = ?4
               AND (?5 IS NULL OR args_digest = ?5) AND status = 'allowed_always' AND used_ms IS NULL",
        )?
        .query_map(rusqlite::params![user, agent, tool, subject, digest], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        conn.execute("UPDATE approvals SET used_ms = ?2 WHERE id = ?1", rusqlite::params![id, now])?;
        event(conn, id, "used", "toolgate", now, Some("its standing grant was revoked"))?;
    }
    Ok(())
}

impl ApprovalStore for Store {
    fn approval_add(&self, r: &ApprovalRecord) -> Result<i64, StoreError> {
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
                .doing("adding an approval")?;
            tx.execute(
                "INSERT INTO approvals (call_id, user, agent, session, tool, server, subject, args_digest, shown,
                     reason, policy_revision, batch, created_ms, expires_ms, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'pending')",
                rusqlite::params![
                    r.call_id,
                    r.user,
                    r.agent,
                    r.session,
                    r.tool,
                    r.server,
                    r.subject,
                    r.args_digest,
                    r.shown.to_string(),
                    r.reason,
                    r.policy_revision,
                    r.batch,
                    r.created_ms,
                    r.expires_ms
                ],
            )
            .doing("adding an approval")?;
            let id = tx.last_insert_rowid();
            event(&tx, id, "created", &r.user, r.created_ms, None).doing("adding an approval")?;
            tx.commit().doing("adding an approval")?;
            Ok(id)
        })
    }

    fn approval_get(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        self.with(|conn| get(conn, id).doing("reading an approval"))
    }

    fn approvals(&self, f: &ApprovalFilter) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.with(|conn| {
            let mut sql = format!("SELECT {COLUMNS} FROM approvals WHERE 1");
            let mut args: Vec<rusqlite::types::Value> = Vec::new();
            let mut arg = |sql: &mut String, clause: &str, v: rusqlite::types::Value| {
                args.push(v);
                sql.push_str(&format!(" AND {clause} ?{}", args.len()));
            };
            if !f.status.is_empty() {
                let words: Vec<String> = f.status.iter().map(|s| format!("'{}'", s.as_str())).collect();
                // Fixed words from the enum, never caller text.
                sql.push_str(&format!(" AND status IN ({})", words.join(", ")));
            }
            if let Some(v) = &f.user {
                arg(&mut sql, "user =", v.clone().into());
            }
            if let Some(v) = &f.agent {
                arg(&mut sql, "agent =", v.clone().into());
            }
            if let Some(v) = &f.tool {
                arg(&mut sql, "tool =", v.clone().into());
            }
            if let Some(v) = &f.batch {
                arg(&mut sql, "batch =", v.clone().into());
            }
            if let Some(v) = f.since_ms {
                arg(&mut sql, "created_ms >=", v.into());
            }
            sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", f.limit.unwrap_or(1000)));
            let mut stmt = conn.prepare(&sql).doing("listing approvals")?;
            let rows = stmt.query_map(rusqlite::params_from_iter(args), record).doing("listing approvals")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing approvals")
        })
    }

    fn approval_decide(&self, id: i64, d: &ApprovalDecision) -> Result<DecideOutcome, StoreError> {
        const DOING: &str = "deciding an approval";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let changed = tx
                .execute(
                    "UPDATE approvals SET status = ?2, decided_by = ?3, decided_ms = ?4, message = ?5
                     WHERE id = ?1 AND status = 'pending' AND expires_ms > ?4
                       AND (fallback_ms IS NULL OR fallback_ms > ?4)",
                    rusqlite::params![id, d.status.as_str(), d.by, d.at_ms, d.message],
                )
                .doing(DOING)?;
            let outcome = if changed == 1 {
                event(&tx, id, d.status.as_str(), &d.by, d.at_ms, d.message.as_deref()).doing(DOING)?;
                let decided = get(&tx, id).doing(DOING)?.ok_or(missing(DOING))?;
                // "Allow always" is the grant as much as the decision: both or neither, even
                // when the call that asked is gone and never comes to write it.
                if decided.status == ApprovalStatus::AllowedAlways {
                    crate::grants::insert_approval_grant(&tx, &crate::Grant::of_approval(&decided, d.at_ms))
                        .doing(DOING)?;
                }
                DecideOutcome::Decided(decided)
            } else {
                match get(&tx, id).doing(DOING)? {
                    None => DecideOutcome::NotFound,
                    Some(r) if r.status == ApprovalStatus::Pending && r.expires_ms <= d.at_ms => {
                        expire_one(&tx, id, d.at_ms).doing(DOING)?;
                        event(&tx, id, "refused", &d.by, d.at_ms, Some("decided after its expiry")).doing(DOING)?;
                        DecideOutcome::Expired(get(&tx, id).doing(DOING)?.ok_or(missing(DOING))?)
                    }
                    Some(r) if r.status == ApprovalStatus::Pending => {
                        // Its notification fallback is due: denied as the sweep would have.
                        deny_unnotified(&tx, id, d.at_ms).doing(DOING)?;
                        let why = "decided after the notification fallback denied it";
                        event(&tx, id, "refused", &d.by, d.at_ms, Some(why)).doing(DOING)?;
                        DecideOutcome::AlreadyDecided(get(&tx, id).doing(DOING)?.ok_or(missing(DOING))?)
                    }
                    Some(r) => {
                        let why = format!("already {}", r.status);
                        event(&tx, id, "refused", &d.by, d.at_ms, Some(&why)).doing(DOING)?;
                        DecideOutcome::AlreadyDecided(r)
                    }
                }
            };
            tx.commit().doing(DOING)?;
            Ok(outcome)
        })
    }

    fn approval_expire(&self, now_ms: i64) -> Result<Vec<ApprovalRecord>, StoreError> {
        const DOING: &str = "expiring approvals";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let due = |sql: &str| -> Result<Vec<i64>, StoreError> {
                let mut stmt = tx.prepare_cached(sql).doing(DOING)?;
                stmt.query_map([now_ms], |r| r.get(0)).doing(DOING)?.collect::<Result<_, _>>().doing(DOING)
            };
            let expired = due("SELECT id FROM approvals WHERE status = 'pending' AND expires_ms <= ?1")?;
            let fallen_back =
                due("SELECT id FROM approvals WHERE status = 'pending' AND fallback_ms <= ?1 AND expires_ms > ?1")?;
            let mut out = Vec::with_capacity(expired.len() + fallen_back.len());
            for id in expired {
                expire_one(&tx, id, now_ms).doing(DOING)?;
                out.extend(get(&tx, id).doing(DOING)?);
            }
            for id in fallen_back {
                deny_unnotified(&tx, id, now_ms).doing(DOING)?;
                out.extend(get(&tx, id).doing(DOING)?);
            }
            tx.commit().doing(DOING)?;
            Ok(out)
        })
    }

    fn approval_use(&self, id: i64, now_ms: i64) -> Result<bool, StoreError> {
        const DOING: &str = "using an approval";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let changed = tx
                .execute(
                    "UPDATE approvals SET used_ms = ?2
                     WHERE id = ?1 AND status IN ('allowed', 'allowed_always', 'denied') AND used_ms IS NULL",
                    rusqlite::params![id, now_ms],
                )
                .doing(DOING)?;
            if changed == 1 {
                event(&tx, id, "used", "toolgate", now_ms, None).doing(DOING)?;
            }
            tx.commit().doing(DOING)?;
            Ok(changed == 1)
        })
    }

    fn approval_notify_failed(
        &self,
        id: i64,
        error: &str,
        now_ms: i64,
        fallback_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        const DOING: &str = "recording a failed approval notification";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let changed = tx
                .execute(
                    "UPDATE approvals SET notify_error = ?2,
                         fallback_ms = CASE WHEN status = 'pending' THEN min(coalesce(fallback_ms, ?3), coalesce(?3, fallback_ms))
                                            ELSE fallback_ms END
                     WHERE id = ?1",
                    rusqlite::params![id, error, fallback_ms],
                )
                .doing(DOING)?;
            if changed == 1 {
                event(&tx, id, "notify_failed", "toolgate", now_ms, Some(error)).doing(DOING)?;
            }
            tx.commit().doing(DOING)?;
            Ok(changed == 1)
        })
    }

    fn approval_refused(&self, id: i64, by: &str, reason: &str, now_ms: i64) -> Result<(), StoreError> {
        self.with(|conn| {
            let exists = get(conn, id).doing("recording a refused decision")?.is_some();
            if exists {
                event(conn, id, "refused", by, now_ms, Some(reason)).doing("recording a refused decision")?;
            }
            Ok(())
        })
    }

    fn approval_find(
        &self,
        user: &str,
        agent: &str,
        tool: &str,
        args_digest: &str,
        policy_revision: &str,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.with(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals
                 WHERE user = ?1 AND agent = ?2 AND tool = ?3 AND args_digest = ?4 AND policy_revision = ?5
                   AND used_ms IS NULL AND expires_ms > ?6
                   AND status IN ('pending', 'allowed', 'allowed_always', 'denied')
                 ORDER BY id DESC LIMIT 1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(rusqlite::params![user, agent, tool, args_digest, policy_revision, now_ms], record)
                    .optional()
            })
            .doing("finding an approval")
        })
    }

    fn approval_events(&self, id: i64) -> Result<Vec<ApprovalEvent>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT approval, kind, by, at_ms, detail FROM approval_events WHERE approval = ?1 ORDER BY seq",
                )
                .doing("reading an approval's history")?;
            let rows = stmt
                .query_map([id], |r| {
                    Ok(ApprovalEvent {
                        approval: r.get(0)?,
                        kind: r.get(1)?,
                        by: r.get(2)?,
                        at_ms: r.get(3)?,
                        detail: r.get(4)?,
                    })
                })
                .doing("reading an approval's history")?;
            rows.collect::<Result<Vec<_>, _>>().doing("reading an approval's history")
        })
    }
}

fn expire_one(conn: &rusqlite::Connection, id: i64, now_ms: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE approvals SET status = 'expired', decided_by = 'toolgate', decided_ms = ?2
         WHERE id = ?1 AND status = 'pending'",
        rusqlite::params![id, now_ms],
    )?;
    event(conn, id, "expired", "toolgate", now_ms, None)
}

/// Denies a pending entry whose notification failed and whose fallback is due.
fn deny_unnotified(conn: &rusqlite::Connection, id: i64, now_ms: i64) -> rusqlite::Result<()> {
    let changed = conn.execute(
        "UPDATE approvals SET status = 'denied', decided_by = 'toolgate', decided_ms = ?2,
             message = 'nobody could be notified (' || coalesce(notify_error, 'no notifier answered')
                 || ') and nobody decided before the notification fallback'
         WHERE id = ?1 AND status = 'pending'",
        rusqlite::params![id, now_ms],
    )?;
    if changed == 1 {
        event(conn, id, "denied", "toolgate", now_ms, Some("notification fallback"))?;
    }
    Ok(())
}

fn missing(doing: &'static str) -> StoreError {
    StoreError::Query { doing, source: rusqlite::Error::QueryReturnedNoRows }
}
