//! [`ApprovalStore`] on PostgreSQL: the approvals inbox shared by every node, with the rules of
//! SQLite's (`toolgate-store`'s `approvals.rs`). A call waiting on node A is decided on node
//! B's page: the decision is the first statement of its transaction (`UPDATE ... WHERE status
//! = 'pending'`), so a second decider on any node waits for the first's row lock, then matches
//! nothing and is told who decided. Sweeps move rows with `UPDATE ... RETURNING` and write an
//! event only for the rows they moved, so two nodes sweeping at once expire an entry once.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use toolgate_store::{
    ApprovalDecision, ApprovalEvent, ApprovalFilter, ApprovalRecord, ApprovalStatus, ApprovalStore, DecideOutcome,
    Grant, StoreError,
};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "id, call_id, for_user, agent, session, tool, server, subject, args_digest, shown, reason, \
     policy_revision, batch, created_ms, expires_ms, status, decided_by, decided_ms, message, notify_error, used_ms, \
     fallback_ms";

/// The entries a list returns when the filter sets no limit (as SQLite's).
const DEFAULT_LIMIT: u32 = 1000;

fn record(r: &Row) -> Result<ApprovalRecord, PgError> {
    let shown: String = r.try_get(9)?;
    let status: String = r.try_get(15)?;
    Ok(ApprovalRecord {
        id: r.try_get(0)?,
        call_id: r.try_get(1)?,
        user: r.try_get(2)?,
        agent: r.try_get(3)?,
        session: r.try_get(4)?,
        tool: r.try_get(5)?,
        server: r.try_get(6)?,
        subject: r.try_get(7)?,
        args_digest: r.try_get(8)?,
        shown: serde_json::from_str(&shown).unwrap_or(serde_json::Value::String(shown)),
        reason: r.try_get(10)?,
        policy_revision: r.try_get(11)?,
        batch: r.try_get(12)?,
        created_ms: r.try_get(13)?,
        expires_ms: r.try_get(14)?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| PgError::Data(format!("unknown approval status `{status}`")))?,
        decided_by: r.try_get(16)?,
        decided_ms: r.try_get(17)?,
        message: r.try_get(18)?,
        notify_error: r.try_get(19)?,
        used_ms: r.try_get(20)?,
        fallback_ms: r.try_get(21)?,
    })
}

async fn get(c: &impl GenericClient, id: i64) -> Result<Option<ApprovalRecord>, PgError> {
    let sql = format!("SELECT {COLUMNS} FROM approvals WHERE id = $1");
    c.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(record).transpose()
}

/// An entry that the transaction just changed, so it exists.
async fn get_changed(c: &impl GenericClient, id: i64) -> Result<ApprovalRecord, PgError> {
    get(c, id).await?.ok_or_else(|| PgError::Data(format!("approval {id} vanished in its own transaction")))
}

/// Marks used the "allow always" entries of (`user`, `agent`, `tool`) whose standing grant, of
/// subject `grant_subject`, is being revoked: an identical call afterwards asks a person again
/// instead of resuming from one of them and writing the grant back.
pub(crate) async fn spend_allowed_always(
    c: &impl GenericClient,
    user: &str,
    agent: &str,
    tool: &str,
    grant_subject: &str,
) -> Result<(), PgError> {
    let Some((subject, digest)) = toolgate_store::approvals_of_grant_subject(grant_subject) else { return Ok(()) };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let spent = c
        .query(
            "UPDATE approvals SET used_ms = $6
             WHERE for_user = $1 AND agent = $2 AND tool = $3 AND subject = $4
               AND ($5::text IS NULL OR args_digest = $5) AND status = 'allowed_always' AND used_ms IS NULL
             RETURNING id",
            &[&user, &agent, &tool, &subject, &digest, &now],
        )
        .await?;
    for row in spent {
        event(c, row.try_get(0)?, "used", "toolgate", now, Some("its standing grant was revoked")).await?;
    }
    Ok(())
}

async fn event(
    c: &impl GenericClient,
    id: i64,
    kind: &str,
    by: &str,
    at_ms: i64,
    detail: Option<&str>,
) -> Result<(), PgError> {
    c.execute(
        "INSERT INTO approval_events (approval, kind, actor, at_ms, detail) VALUES ($1, $2, $3, $4, $5)",
        &[&id, &kind, &by, &at_ms, &detail],
    )
    .await?;
    Ok(())
}

/// Expires `id` if it is still pending; the event only when this call moved it.
async fn expire_one(c: &impl GenericClient, id: i64, now_ms: i64) -> Result<(), PgError> {
    let moved = c
        .execute(
            "UPDATE approvals SET status = 'expired', decided_by = 'toolgate', decided_ms = $2
             WHERE id = $1 AND status = 'pending'",
            &[&id, &now_ms],
        )
        .await?;
    if moved == 1 {
        event(c, id, "expired", "toolgate", now_ms, None).await?;
    }
    Ok(())
}

/// The message of an entry denied because nobody could be told of it (as SQLite's).
const UNNOTIFIED: &str = "'nobody could be notified (' || coalesce(notify_error, 'no notifier answered')
     || ') and nobody decided before the notification fallback'";

/// Denies `id`, pending with its notification fallback due; the event only when this call moved it.
async fn deny_unnotified(c: &impl GenericClient, id: i64, now_ms: i64) -> Result<(), PgError> {
    let sql = format!(
        "UPDATE approvals SET status = 'denied', decided_by = 'toolgate', decided_ms = $2, message = {UNNOTIFIED}
         WHERE id = $1 AND status = 'pending'"
    );
    if c.execute(sql.as_str(), &[&id, &now_ms]).await? == 1 {
        event(c, id, "denied", "toolgate", now_ms, Some("notification fallback")).await?;
    }
    Ok(())
}

impl ApprovalStore for PgStore {
    fn approval_add(&self, record: &ApprovalRecord) -> Result<i64, StoreError> {
        let r = record.clone();
        self.run("adding an approval", move |mut c| async move {
            let tx = c.transaction().await?;
            let row = tx
                .query_one(
                    "INSERT INTO approvals (call_id, for_user, agent, session, tool, server, subject, args_digest,
                         shown, reason, policy_revision, batch, created_ms, expires_ms, status)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'pending')
                     RETURNING id",
                    &[
                        &r.call_id,
                        &r.user,
                        &r.agent,
                        &r.session,
                        &r.tool,
                        &r.server,
                        &r.subject,
                        &r.args_digest,
                        &r.shown.to_string(),
                        &r.reason,
                        &r.policy_revision,
                        &r.batch,
                        &r.created_ms,
                        &r.expires_ms,
                    ],
                )
                .await?;
            let id: i64 = row.try_get(0)?;
            event(&tx, id, "created", &r.user, r.created_ms, None).await?;
            tx.commit().await?;
            Ok(id)
        })
    }

    fn approval_get(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        self.run("reading an approval", move |c| async move { get(&c, id).await })
    }

    fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRecord>, StoreError> {
        let f = filter.clone();
        self.run("listing approvals", move |c| async move {
            let mut sql = format!("SELECT {COLUMNS} FROM approvals WHERE true");
            let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
            // `clause` has `?` where its parameter goes.
            let mut arg = |sql: &mut String, clause: &str, value: Box<dyn ToSql + Sync + Send>| {
                args.push(value);
                sql.push_str(" AND ");
                sql.push_str(&clause.replace('?', &format!("${}", args.len())));
            };
            if !f.status.is_empty() {
                let words: Vec<String> = f.status.iter().map(|s| s.as_str().to_owned()).collect();
                arg(&mut sql, "status = ANY(?)", Box::new(words));
            }
            if let Some(v) = f.user {
                arg(&mut sql, "for_user = ?", Box::new(v));
            }
            if let Some(v) = f.agent {
                arg(&mut sql, "agent = ?", Box::new(v));
            }
            if let Some(v) = f.tool {
                arg(&mut sql, "tool = ?", Box::new(v));
            }
            if let Some(v) = f.batch {
                arg(&mut sql, "batch = ?", Box::new(v));
            }
            if let Some(v) = f.since_ms {
                arg(&mut sql, "created_ms >= ?", Box::new(v));
            }
            sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", f.limit.unwrap_or(DEFAULT_LIMIT)));
            let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a.as_ref() as &(dyn ToSql + Sync)).collect();
            c.query(sql.as_str(), &refs).await?.iter().map(record).collect()
        })
    }

    fn approval_decide(&self, id: i64, decision: &ApprovalDecision) -> Result<DecideOutcome, StoreError> {
        let d = decision.clone();
        // Changing: an "allow always" writes its grant, which raises the grants revision.
        self.run_changing("deciding an approval", move |mut c| async move {
            let tx = c.transaction().await?;
            // First, and only if still pending and in time: a concurrent decider on any node
            // blocks on this row until the first commits, then matches nothing.
            let moved = tx
                .execute(
                    "UPDATE approvals SET status = $2, decided_by = $3, decided_ms = $4, message = $5
                     WHERE id = $1 AND status = 'pending' AND expires_ms > $4
                       AND (fallback_ms IS NULL OR fallback_ms > $4)",
                    &[&id, &d.status.as_str(), &d.by, &d.at_ms, &d.message],
                )
                .await?;
            let outcome = if moved == 1 {
                event(&tx, id, d.status.as_str(), &d.by, d.at_ms, d.message.as_deref()).await?;
                let decided = get_changed(&tx, id).await?;
                // "Allow always" is the grant as much as the decision: both or neither, even
                // when the call that asked is gone (its node died) and never comes to write it.
                if decided.status == ApprovalStatus::AllowedAlways {
                    crate::grants::insert_approval_grant(&tx, &Grant::of_approval(&decided, d.at_ms)).await?;
                }
                DecideOutcome::Decided(decided)
            } else {
                // Locked, so a sweep on another node cannot move it between the look and the change.
                let sql = format!("SELECT {COLUMNS} FROM approvals WHERE id = $1 FOR UPDATE");
                match tx.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(record).transpose()? {
                    None => DecideOutcome::NotFound,
                    Some(r) if r.status == ApprovalStatus::Pending && r.expires_ms <= d.at_ms => {
                        expire_one(&tx, id, d.at_ms).await?;
                        event(&tx, id, "refused", &d.by, d.at_ms, Some("decided after its expiry")).await?;
                        DecideOutcome::Expired(get_changed(&tx, id).await?)
                    }
                    Some(r) if r.status == ApprovalStatus::Pending => {
                        // Its notification fallback is due: denied as the sweep would have.
                        deny_unnotified(&tx, id, d.at_ms).await?;
                        let why = "decided after the notification fallback denied it";
                        event(&tx, id, "refused", &d.by, d.at_ms, Some(why)).await?;
                        DecideOutcome::AlreadyDecided(get_changed(&tx, id).await?)
                    }
                    Some(r) => {
                        let why = format!("already {}", r.status);
                        event(&tx, id, "refused", &d.by, d.at_ms, Some(&why)).await?;
                        DecideOutcome::AlreadyDecided(r)
                    }
                }
            };
            tx.commit().await?;
            Ok(outcome)
        })
    }

    fn approval_expire(&self, now_ms: i64) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.run("expiring approvals", move |mut c| async move {
            let tx = c.transaction().await?;
            // Each statement moves rows and names the ones it moved: a sweep on another node at
            // the same instant moves the others, or none, never the same ones twice.
            let expired = tx
                .query(
                    "UPDATE approvals SET status = 'expired', decided_by = 'toolgate', decided_ms = $1
                     WHERE status = 'pending' AND expires_ms <= $1 RETURNING id",
                    &[&now_ms],
                )
                .await?;
            let sql = format!(
                "UPDATE approvals SET status = 'denied', decided_by = 'toolgate', decided_ms = $1, message = {UNNOTIFIED}
                 WHERE status = 'pending' AND fallback_ms <= $1 AND expires_ms > $1 RETURNING id"
            );
            let denied = tx.query(sql.as_str(), &[&now_ms]).await?;
            let mut out = Vec::with_capacity(expired.len() + denied.len());
            for (rows, kind, detail) in [(expired, "expired", None), (denied, "denied", Some("notification fallback"))] {
                let mut ids = rows.iter().map(|r| r.try_get::<_, i64>(0)).collect::<Result<Vec<_>, _>>()?;
                ids.sort_unstable();
                for id in ids {
                    event(&tx, id, kind, "toolgate", now_ms, detail).await?;
                    out.push(get_changed(&tx, id).await?);
                }
            }
            tx.commit().await?;
            Ok(out)
        })
    }

    fn approval_use(&self, id: i64, now_ms: i64) -> Result<bool, StoreError> {
        self.run("using an approval", move |mut c| async move {
            let tx = c.transaction().await?;
            let moved = tx
                .execute(
                    "UPDATE approvals SET used_ms = $2
                     WHERE id = $1 AND status IN ('allowed', 'allowed_always', 'denied') AND used_ms IS NULL",
                    &[&id, &now_ms],
                )
                .await?;
            if moved == 1 {
                event(&tx, id, "used", "toolgate", now_ms, None).await?;
            }
            tx.commit().await?;
            Ok(moved == 1)
        })
    }

    fn approval_notify_failed(
        &self,
        id: i64,
        error: &str,
        now_ms: i64,
        fallback_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        let error = error.to_owned();
        self.run("recording a failed approval notification", move |mut c| async move {
            let tx = c.transaction().await?;
            // An earlier fallback already set stands (`least` ignores NULLs).
            let moved = tx
                .execute(
                    "UPDATE approvals SET notify_error = $2,
                         fallback_ms = CASE WHEN status = 'pending' THEN least(fallback_ms, $3) ELSE fallback_ms END
                     WHERE id = $1",
                    &[&id, &error, &fallback_ms],
                )
                .await?;
            if moved == 1 {
                event(&tx, id, "notify_failed", "toolgate", now_ms, Some(&error)).await?;
            }
            tx.commit().await?;
            Ok(moved == 1)
        })
    }

    fn approval_refused(&self, id: i64, by: &str, reason: &str, now_ms: i64) -> Result<(), StoreError> {
        let (by, reason) = (by.to_owned(), reason.to_owned());
        self.run("recording a refused decision", move |c| async move {
            // One statement: nothing is written for an entry that does not exist.
            c.execute(
                "INSERT INTO approval_events (approval, kind, actor, at_ms, detail)
                 SELECT id, 'refused', $2, $3, $4 FROM approvals WHERE id = $1",
                &[&id, &by, &now_ms, &reason],
            )
            .await?;
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
        let keys = [user, agent, tool, args_digest, policy_revision].map(str::to_owned);
        self.run("finding an approval", move |c| async move {
            let [user, agent, tool, digest, revision] = keys;
            let sql = format!(
                "SELECT {COLUMNS} FROM approvals
                 WHERE for_user = $1 AND agent = $2 AND tool = $3 AND args_digest = $4 AND policy_revision = $5
                   AND used_ms IS NULL AND expires_ms > $6
                   AND status IN ('pending', 'allowed', 'allowed_always', 'denied')
                 ORDER BY id DESC LIMIT 1"
            );
            let row = c.query_opt(sql.as_str(), &[&user, &agent, &tool, &digest, &revision, &now_ms]).await?;
            row.as_ref().map(record).transpose()
        })
    }

    fn approval_watch(&self, wake: Box<dyn Fn() + Send + Sync>) -> bool {
        // The trigger of migration 5 notifies `toolgate_approvals` when an entry's status
        // changes; the store's `LISTEN` connection (`listen.rs`) hears it.
        self.watch_approvals(wake);
        true
    }

    fn approval_events(&self, id: i64) -> Result<Vec<ApprovalEvent>, StoreError> {
        self.run("reading an approval's history", move |c| async move {
            let rows = c
                .query(
                    "SELECT approval, kind, actor, at_ms, detail FROM approval_events WHERE approval = $1 ORDER BY seq",
                    &[&id],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(ApprovalEvent {
                        approval: r.try_get(0)?,
                        kind: r.try_get(1)?,
                        by: r.try_get(2)?,
                        at_ms: r.try_get(3)?,
                        detail: r.try_get(4)?,
                    })
                })
                .collect()
        })
    }
}
