//! [`JobStore`] on PostgreSQL: background jobs every node sees, with the rules of SQLite's
//! (`toolgate-store`'s `jobs.rs`): a job moves only forward, each move one conditional `UPDATE`
//! on the state it leaves, so two nodes never both start or both end a job.
//!
//! What several nodes add, and how it holds here:
//! - a queued job nobody holds is claimed with `FOR UPDATE SKIP LOCKED`: each node takes rows no
//!   other transaction has locked, so two nodes claiming at once get different jobs, and
//!   neither waits for the other;
//! - a job whose lease lapsed (its node died) is ended `failed: interrupted` with an event by
//!   `UPDATE ... RETURNING`, the events written only for the rows that statement moved: two
//!   nodes sweeping at once end it once, and no node ever runs it again (its tool calls may
//!   already have had effects);
//! - a job's events are numbered under a transaction-level advisory lock of that job, so two
//!   nodes writing events of one job at once never pick the same number.
//!
//! Times are the callers' wall clocks, as in SQLite: a lease written by one node is compared
//! with another node's clock, so nodes' clocks must agree to well within a lease (seconds; NTP
//! gives milliseconds).

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use toolgate_store::{JOB_INTERRUPTED, JobEvent, JobFilter, JobRecord, JobStore, StoreError};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "id, member, session, title, description, mode, project_dir, credentials, origin, state, \
     result, error, agent_session, created_ms, started_ms, finished_ms, lease_owner, lease_until_ms, spec";

/// The first key of the advisory locks that number a job's events (the bytes of "tjob"); the
/// second is the hash of the job's id.
const EVENT_LOCK: i32 = 0x746a_6f62;

fn record(r: &Row) -> Result<JobRecord, PgError> {
    let credentials: String = r.try_get(7)?;
    let credentials = serde_json::from_str(&credentials)
        .map_err(|e| PgError::Data(format!("a job's credentials are not a JSON list of names: {e}")))?;
    Ok(JobRecord {
        id: r.try_get(0)?,
        user: r.try_get(1)?,
        session: r.try_get(2)?,
        title: r.try_get(3)?,
        description: r.try_get(4)?,
        mode: r.try_get(5)?,
        project_dir: r.try_get(6)?,
        credentials,
        origin: r.try_get(8)?,
        state: r.try_get(9)?,
        result: r.try_get(10)?,
        error: r.try_get(11)?,
        agent_session: r.try_get(12)?,
        created_ms: r.try_get(13)?,
        started_ms: r.try_get(14)?,
        finished_ms: r.try_get(15)?,
        lease_owner: r.try_get(16)?,
        lease_until_ms: r.try_get(17)?,
        spec: r.try_get(18)?,
    })
}

/// Appends an event to `job`'s log inside the caller's transaction; returns its `seq`.
async fn event(c: &impl GenericClient, job: &str, kind: &str, text: &str, ts_ms: i64) -> Result<i64, PgError> {
    // Held until the transaction ends: the next writer of this job's events reads the number
    // this one wrote.
    c.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&EVENT_LOCK, &job]).await?;
    let row = c
        .query_one(
            "INSERT INTO job_events (job, seq, ts_ms, kind, body)
             SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM job_events WHERE job = $1
             RETURNING seq",
            &[&job, &ts_ms, &kind, &text],
        )
        .await?;
    Ok(row.try_get(0)?)
}

/// The upper end of the ids that start with `prefix` (the columns sort bytewise, `COLLATE "C"`):
/// a range over the primary key, so `%` and `_` in a prefix are plain characters.
fn prefix_end(prefix: &str) -> String {
    let mut upper = prefix.to_owned();
    upper.push(char::MAX);
    upper
}

impl JobStore for PgStore {
    fn job_create(&self, job: &JobRecord) -> Result<(), StoreError> {
        let j = job.clone();
        self.run("creating a job", move |mut c| async move {
            let credentials = serde_json::to_string(&j.credentials).unwrap_or_else(|_| "[]".to_owned());
            let spec = if j.spec.is_empty() { "{}" } else { j.spec.as_str() };
            let tx = c.transaction().await?;
            tx.execute(
                &format!(
                    "INSERT INTO jobs ({COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
                ),
                &[
                    &j.id,
                    &j.user,
                    &j.session,
                    &j.title,
                    &j.description,
                    &j.mode,
                    &j.project_dir,
                    &credentials,
                    &j.origin,
                    &j.state,
                    &j.result,
                    &j.error,
                    &j.agent_session,
                    &j.created_ms,
                    &j.started_ms,
                    &j.finished_ms,
                    &j.lease_owner,
                    &j.lease_until_ms,
                    &spec,
                ],
            )
            .await?;
            event(&tx, &j.id, "state", &j.state, j.created_ms).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let id = id.to_owned();
        self.run("reading a job", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id = $1");
            c.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(record).transpose()
        })
    }

    fn jobs_by_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<JobRecord>, StoreError> {
        let (prefix, upper, limit) = (prefix.to_owned(), prefix_end(prefix), limit as i64);
        self.run("finding jobs by id prefix", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id >= $1 AND id < $2 ORDER BY created_ms, id LIMIT $3");
            c.query(sql.as_str(), &[&prefix, &upper, &limit]).await?.iter().map(record).collect()
        })
    }

    fn jobs_list(&self, filter: &JobFilter<'_>) -> Result<Vec<JobRecord>, StoreError> {
        let user = filter.user.map(str::to_owned);
        let states: Vec<String> = filter.states.iter().map(|s| (*s).to_owned()).collect();
        let origin = filter.origin.map(str::to_owned);
        let limit = if filter.limit == 0 { 100 } else { filter.limit } as i64;
        self.run("listing jobs", move |c| async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM jobs
                 WHERE ($1::text IS NULL OR member = $1)
                   AND (cardinality($2::text[]) = 0 OR state = ANY($2))
                   AND ($3::text IS NULL OR origin = $3)
                 ORDER BY created_ms DESC, id DESC LIMIT $4"
            );
            c.query(sql.as_str(), &[&user, &states, &origin, &limit]).await?.iter().map(record).collect()
        })
    }

    fn jobs_by_state(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.run("counting jobs", move |c| async move {
            let rows = c.query("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state", &[]).await?;
            rows.iter()
                .map(|r| Ok((r.try_get::<_, String>(0)?, u64::try_from(r.try_get::<_, i64>(1)?).unwrap_or(0))))
                .collect()
        })
    }

    fn job_start(&self, id: &str, lease_owner: &str, now_ms: i64) -> Result<bool, StoreError> {
        let (id, owner) = (id.to_owned(), lease_owner.to_owned());
        self.run("starting a job", move |mut c| async move {
            let tx = c.transaction().await?;
            let n = tx
                .execute(
                    "UPDATE jobs SET state = 'running', started_ms = $3
                     WHERE id = $1 AND state = 'queued' AND lease_owner = $2 AND lease_until_ms > $3",
                    &[&id, &owner, &now_ms],
                )
                .await?;
            if n > 0 {
                event(&tx, &id, "state", "running", now_ms).await?;
            }
            tx.commit().await?;
            Ok(n > 0)
        })
    }

    fn job_set_session(&self, id: &str, agent_session: &str) -> Result<(), StoreError> {
        let (id, session) = (id.to_owned(), agent_session.to_owned());
        self.run("recording a job's session", move |c| async move {
            c.execute("UPDATE jobs SET agent_session = $2 WHERE id = $1", &[&id, &session]).await?;
            Ok(())
        })
    }

    fn job_finish(
        &self,
        id: &str,
        state: &str,
        result: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (id, state) = (id.to_owned(), state.to_owned());
        let (result, error) = (result.map(str::to_owned), error.map(str::to_owned));
        self.run("ending a job", move |mut c| async move {
            let tx = c.transaction().await?;
            // A second ender on any node waits for this row's lock, then matches nothing.
            let n = tx
                .execute(
                    "UPDATE jobs SET state = $2, result = $3, error = $4, finished_ms = $5,
                                     lease_owner = NULL, lease_until_ms = NULL
                     WHERE id = $1 AND state IN ('queued', 'running')",
                    &[&id, &state, &result, &error, &now_ms],
                )
                .await?;
            if n > 0 {
                let text = match &error {
                    Some(e) => format!("{state}: {e}"),
                    None => state.clone(),
                };
                event(&tx, &id, "state", &text, now_ms).await?;
            }
            tx.commit().await?;
            Ok(n > 0)
        })
    }

    fn jobs_renew(&self, lease_owner: &str, lease_until_ms: i64) -> Result<Vec<String>, StoreError> {
        let owner = lease_owner.to_owned();
        self.run("renewing job leases", move |c| async move {
            let rows = c
                .query(
                    "UPDATE jobs SET lease_until_ms = $2
                     WHERE lease_owner = $1 AND state IN ('queued', 'running') RETURNING id",
                    &[&owner, &lease_until_ms],
                )
                .await?;
            rows.iter().map(|r| r.try_get(0).map_err(PgError::from)).collect()
        })
    }

    fn jobs_interrupt_expired(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        self.run("ending interrupted jobs", move |mut c| async move {
            let tx = c.transaction().await?;
            // Only the rows this statement moved get an event: a node sweeping at the same time
            // waits for these rows' locks, then finds them ended and skips them.
            let rows = tx
                .query(
                    "UPDATE jobs SET state = 'failed', error = $2, finished_ms = $1,
                                     lease_owner = NULL, lease_until_ms = NULL
                     WHERE state IN ('queued', 'running') AND lease_until_ms <= $1 RETURNING id",
                    &[&now_ms, &JOB_INTERRUPTED],
                )
                .await?;
            let mut ids = rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<Vec<_>, _>>()?;
            // Events in one order on every node: two sweeps never wait on each other's locks
            // in a cycle.
            ids.sort();
            for id in &ids {
                event(&tx, id, "state", toolgate_store::JOB_INTERRUPTED_EVENT, now_ms).await?;
            }
            tx.commit().await?;
            Ok(ids)
        })
    }

    fn job_event(&self, job: &str, kind: &str, text: &str, ts_ms: i64) -> Result<i64, StoreError> {
        let (job, kind, text) = (job.to_owned(), kind.to_owned(), text.to_owned());
        self.run("writing a job event", move |mut c| async move {
            let tx = c.transaction().await?;
            let seq = event(&tx, &job, &kind, &text, ts_ms).await?;
            tx.commit().await?;
            Ok(seq)
        })
    }

    fn job_events(&self, job: &str, after: i64, limit: usize) -> Result<Vec<JobEvent>, StoreError> {
        let (job, limit) = (job.to_owned(), limit as i64);
        self.run("reading job events", move |c| async move {
            let rows = if after < 0 {
                // The last `limit`, turned back to oldest first.
                c.query(
                    "SELECT * FROM (SELECT job, seq, ts_ms, kind, body FROM job_events WHERE job = $1
                                    ORDER BY seq DESC LIMIT $2) last ORDER BY seq",
                    &[&job, &limit],
                )
                .await?
            } else {
                c.query(
                    "SELECT job, seq, ts_ms, kind, body FROM job_events WHERE job = $1 AND seq > $2
                     ORDER BY seq LIMIT $3",
                    &[&job, &after, &limit],
                )
                .await?
            };
            rows.iter()
                .map(|r| {
                    Ok(JobEvent {
                        job: r.try_get(0)?,
                        seq: r.try_get(1)?,
                        ts_ms: r.try_get(2)?,
                        kind: r.try_get(3)?,
                        text: r.try_get(4)?,
                    })
                })
                .collect()
        })
    }

    fn jobs_claim(
        &self,
        lease_owner: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (owner, limit) = (lease_owner.to_owned(), limit as i64);
        self.run("claiming queued jobs", move |mut c| async move {
            let tx = c.transaction().await?;
            // `SKIP LOCKED`: rows another node's claim holds are passed over, not waited for,
            // so two nodes claiming at once take different jobs. The pick is `MATERIALIZED`:
            // run once, so the limit holds (as an `IN (...)` subquery the planner may scan it
            // again and lock more rows than asked).
            let sql = format!(
                "WITH picked AS MATERIALIZED (
                     SELECT id AS picked_id FROM jobs WHERE state = 'queued' AND lease_owner IS NULL
                     ORDER BY created_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED)
                 UPDATE jobs SET lease_owner = $1, lease_until_ms = $2
                 FROM picked WHERE id = picked_id
                 RETURNING {COLUMNS}"
            );
            let rows = tx.query(sql.as_str(), &[&owner, &lease_until_ms, &limit]).await?;
            let mut claimed = rows.iter().map(record).collect::<Result<Vec<_>, _>>()?;
            claimed.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            let text = format!("claimed by the toolgate server `{owner}`, which runs it");
            for j in &claimed {
                event(&tx, &j.id, "claim", &text, now_ms).await?;
            }
            tx.commit().await?;
            Ok(claimed)
        })
    }

    fn jobs_runner_beat(&self, runner: &str, until_ms: i64, now_ms: i64) -> Result<(), StoreError> {
        let runner = runner.to_owned();
        self.run("announcing a job runner", move |mut c| async move {
            let tx = c.transaction().await?;
            tx.execute("DELETE FROM job_runners WHERE until_ms <= $1", &[&now_ms]).await?;
            tx.execute(
                "INSERT INTO job_runners (runner, until_ms) VALUES ($1, $2)
                 ON CONFLICT (runner) DO UPDATE SET until_ms = excluded.until_ms",
                &[&runner, &until_ms],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn jobs_runner_gone(&self, runner: &str) -> Result<(), StoreError> {
        let runner = runner.to_owned();
        self.run("removing a job runner", move |c| async move {
            c.execute("DELETE FROM job_runners WHERE runner = $1", &[&runner]).await?;
            Ok(())
        })
    }

    fn jobs_runners(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        self.run("listing job runners", move |c| async move {
            let rows =
                c.query("SELECT runner FROM job_runners WHERE until_ms > $1 ORDER BY runner", &[&now_ms]).await?;
            rows.iter().map(|r| r.try_get(0).map_err(PgError::from)).collect()
        })
    }
}
