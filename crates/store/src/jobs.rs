//! Background jobs (`toolgate-automation`'s `jobs`): the [`JobStore`] trait and its SQLite
//! implementation on [`Store`] (tables `jobs` and `job_events`, their migration in `db.rs`).
//!
//! A job moves `queued → running → completed | failed | cancelled`, and only forward: every
//! transition is one conditional `UPDATE` on the state it leaves, so two processes can never
//! both start a job or both end it. The process that created a job holds its lease
//! (`lease_owner`, `lease_until_ms`) and renews every lease it holds with one heartbeat
//! ([`JobStore::jobs_renew`]); a queued or running job whose lease lapsed belonged to a process
//! that died, and [`JobStore::jobs_interrupt_expired`] ends it as `failed` with the error
//! `interrupted` and an event, in one transaction: such a job is never lost and never run
//! again. Times are wall-clock Unix milliseconds passed in by the caller.
//!
//! A job stored without a lease (`lease_owner` NULL: created by a short-lived process, the
//! CLI) waits `queued` for a long-lived server: [`JobStore::jobs_claim`] takes it with one
//! conditional update, so exactly one process runs it, and servers announce themselves with
//! [`JobStore::jobs_runner_beat`] (a row of `scheduler_leases` named `jobs-runner:ID`) so the
//! creator can say whether one is there. A lease-less job is never swept as interrupted.

use std::fmt::Debug;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// The error a job whose process died while it was queued or running ends with.
pub const JOB_INTERRUPTED: &str = "interrupted";

/// The `state` event such a job ends with, on every backend.
pub const JOB_INTERRUPTED_EVENT: &str =
    "failed: interrupted (the process running it stopped before it ended; it was not run again)";

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its id (a UUID).
    pub id: String,
    /// The user who owns it.
    pub user: String,
    /// The session that created it (`job_events` and `job_prompt` answer only that session).
    pub session: String,
    /// A short title.
    pub title: String,
    /// What to do (an agent's task, a command line).
    pub description: String,
    /// `sandbox`, `command` or `claude_code`.
    pub mode: String,
    /// The working directory, relative to the workspace root (`""`: the root).
    pub project_dir: String,
    /// Names of secrets the job's tools may use (never their values).
    pub credentials: Vec<String>,
    /// What started it besides a person (`routine:NAME`), if anything.
    pub origin: Option<String>,
    /// `queued`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    /// The result (an agent's answer, a command's output), once it ended.
    pub result: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// The agent session running it (`sandbox` mode).
    pub agent_session: Option<String>,
    /// When it was created.
    pub created_ms: i64,
    /// When it started running.
    pub started_ms: Option<i64>,
    /// When it ended.
    pub finished_ms: Option<i64>,
    /// Who holds its lease (a process), while it is queued or running.
    pub lease_owner: Option<String>,
    /// When the lease lapses unless renewed.
    pub lease_until_ms: Option<i64>,
    /// What a process that claims the job needs to run it, as JSON (the owner's agent name,
    /// the agent, the credentials' variables; never a secret's value). `{}` when empty.
    pub spec: String,
}

impl JobRecord {
    /// Whether it has ended (`completed`, `failed`, `cancelled`).
    pub fn is_finished(&self) -> bool {
        matches!(self.state.as_str(), "completed" | "failed" | "cancelled")
    }
}

/// One entry of a job's event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    /// The job.
    pub job: String,
    /// Its position in the job's log, from 1.
    pub seq: i64,
    /// When it happened.
    pub ts_ms: i64,
    /// `state`, `model`, `tool_call`, `tool_result`, `output`, `prompt`, ...
    pub kind: String,
    /// What happened (already scrubbed of secrets by the writer).
    pub text: String,
}

/// Which jobs to list.
#[derive(Debug, Clone, Default)]
pub struct JobFilter<'a> {
    /// Only this user's.
    pub user: Option<&'a str>,
    /// Only jobs in one of these states (empty: every state).
    pub states: &'a [&'a str],
    /// Only jobs with this origin.
    pub origin: Option<&'a str>,
    /// At most this many, newest first (0: 100).
    pub limit: usize,
}

/// The jobs of every workspace the database serves.
pub trait JobStore: Send + Sync + Debug {
    /// Stores a new job (its `state` as given, normally `queued`, with the creator's lease).
    fn job_create(&self, job: &JobRecord) -> Result<(), StoreError>;

    /// The job `id`.
    fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError>;

    /// The jobs whose id starts with `prefix` (at most `limit`, oldest first): the caller
    /// resolves a short id and reports an ambiguous one.
    fn jobs_by_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<JobRecord>, StoreError>;

    /// The jobs `filter` selects, newest first.
    fn jobs_list(&self, filter: &JobFilter<'_>) -> Result<Vec<JobRecord>, StoreError>;

    /// How many jobs are in each state, for every user (the queue depths `/metrics` shows).
    fn jobs_by_state(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// `queued → running`, only while `lease_owner` holds its lease: returns whether it did
    /// (`false`: cancelled first, or interrupted). Writes a `state` event.
    fn job_start(&self, id: &str, lease_owner: &str, now_ms: i64) -> Result<bool, StoreError>;

    /// Records the agent session that runs the job.
    fn job_set_session(&self, id: &str, agent_session: &str) -> Result<(), StoreError>;

    /// Ends a queued or running job as `state` (`completed`, `failed`, `cancelled`) with its
    /// result or error, dropping its lease, plus a `state` event; returns whether it did (a job
    /// that already ended keeps how it ended).
    fn job_finish(
        &self,
        id: &str,
        state: &str,
        result: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Renews every lease `lease_owner` holds on a queued or running job until
    /// `lease_until_ms`; returns the ids renewed (a job missing from them is no longer its).
    fn jobs_renew(&self, lease_owner: &str, lease_until_ms: i64) -> Result<Vec<String>, StoreError>;

    /// Ends every queued or running job whose lease lapsed before `now_ms` as `failed` with the
    /// error [`JOB_INTERRUPTED`] and a `state` event, in one transaction; returns their ids.
    fn jobs_interrupt_expired(&self, now_ms: i64) -> Result<Vec<String>, StoreError>;

    /// Appends an event to job `job`'s log; returns its `seq`.
    fn job_event(&self, job: &str, kind: &str, text: &str, ts_ms: i64) -> Result<i64, StoreError>;

    /// Job `job`'s events with `seq > after`, oldest first, at most `limit`; with `after < 0`,
    /// the last `limit` events.
    fn job_events(&self, job: &str, after: i64, limit: usize) -> Result<Vec<JobEvent>, StoreError>;

    /// Gives `lease_owner` at most `limit` queued jobs that no process holds (oldest first),
    /// with a lease until `lease_until_ms` and a `state` event, in one transaction: a job is
    /// claimed by one process only. Returns them.
    fn jobs_claim(
        &self,
        lease_owner: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError>;

    /// Records that `runner` (a long-lived server) runs jobs until `until_ms`, and forgets
    /// runners whose record lapsed before `now_ms`.
    fn jobs_runner_beat(&self, runner: &str, until_ms: i64, now_ms: i64) -> Result<(), StoreError>;

    /// Drops `runner`'s record (it stops).
    fn jobs_runner_gone(&self, runner: &str) -> Result<(), StoreError>;

    /// The runners whose record is live at `now_ms`.
    fn jobs_runners(&self, now_ms: i64) -> Result<Vec<String>, StoreError>;
}

/// The prefix of a job runner's row in `scheduler_leases`.
const RUNNER: &str = "jobs-runner:";

const STORED: &str = "id, user, session, title, description, mode, project_dir, credentials, origin, state, result, \
                       error, agent_session, created_ms, started_ms, finished_ms, lease_owner, lease_until_ms";
/// [`STORED`] and the spec, kept in its own table (`job_specs`: a migration that can run again
/// on its own result, which an added column cannot).
const COLUMNS: &str = "id, user, session, title, description, mode, project_dir, credentials, origin, state, result, \
                       error, agent_session, created_ms, started_ms, finished_ms, lease_owner, lease_until_ms, \
                       COALESCE((SELECT s.spec FROM job_specs s WHERE s.job = jobs.id), '{}')";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRecord> {
    let credentials: String = r.get(7)?;
    let credentials = serde_json::from_str(&credentials)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(7, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(JobRecord {
        id: r.get(0)?,
        user: r.get(1)?,
        session: r.get(2)?,
        title: r.get(3)?,
        description: r.get(4)?,
        mode: r.get(5)?,
        project_dir: r.get(6)?,
        credentials,
        origin: r.get(8)?,
        state: r.get(9)?,
        result: r.get(10)?,
        error: r.get(11)?,
        agent_session: r.get(12)?,
        created_ms: r.get(13)?,
        started_ms: r.get(14)?,
        finished_ms: r.get(15)?,
        lease_owner: r.get(16)?,
        lease_until_ms: r.get(17)?,
        spec: r.get(18)?,
    })
}

fn event(conn: &Connection, job: &str, kind: &str, text: &str, ts_ms: i64) -> Result<i64, StoreError> {
    const DOING: &str = "writing a job event";
    let seq: i64 = conn
        .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job = ?1", [job], |r| r.get(0))
        .doing(DOING)?;
    conn.execute(
        "INSERT INTO job_events (job, seq, ts_ms, kind, text) VALUES (?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![job, seq, ts_ms, kind, text],
    )
    .doing(DOING)?;
    Ok(seq)
}

/// `f` in one IMMEDIATE transaction (the write lock taken first, so a read and the write that
/// depends on it are atomic across processes).
fn write<T>(
    conn: &Connection,
    doing: &'static str,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(doing)?;
    let out = f(&tx)?;
    tx.commit().doing(doing)?;
    Ok(out)
}

impl JobStore for Store {
    fn job_create(&self, job: &JobRecord) -> Result<(), StoreError> {
        const DOING: &str = "creating a job";
        let credentials = serde_json::to_string(&job.credentials).unwrap_or_else(|_| "[]".to_owned());
        self.with(|conn| {
            write(conn, DOING, |tx| {
                tx.execute(
                    &format!(
                        "INSERT INTO jobs ({STORED}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, \
                         ?15, ?16, ?17, ?18)"
                    ),
                    rusqlite::params![
                        job.id,
                        job.user,
                        job.session,
                        job.title,
                        job.description,
                        job.mode,
                        job.project_dir,
                        credentials,
                        job.origin,
                        job.state,
                        job.result,
                        job.error,
                        job.agent_session,
                        job.created_ms,
                        job.started_ms,
                        job.finished_ms,
                        job.lease_owner,
                        job.lease_until_ms
                    ],
                )
                .doing(DOING)?;
                if !job.spec.is_empty() && job.spec != "{}" {
                    tx.execute("INSERT INTO job_specs (job, spec) VALUES (?1, ?2)", [&job.id, &job.spec])
                        .doing(DOING)?;
                }
                event(tx, &job.id, "state", &job.state, job.created_ms)?;
                Ok(())
            })
        })
    }

    fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.with(|conn| {
            conn.query_row(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"), [id], row)
                .optional()
                .doing("reading a job")
        })
    }

    fn jobs_by_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<JobRecord>, StoreError> {
        const DOING: &str = "finding jobs by id prefix";
        // A range over the primary key, not LIKE: `%` and `_` in a prefix match nothing special.
        let mut upper = prefix.to_owned();
        upper.push(char::MAX);
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM jobs WHERE id >= ?1 AND id < ?2 ORDER BY created_ms, id LIMIT ?3"
                ))
                .doing(DOING)?;
            let rows = stmt.query_map(rusqlite::params![prefix, upper, limit as i64], row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn jobs_list(&self, filter: &JobFilter<'_>) -> Result<Vec<JobRecord>, StoreError> {
        const DOING: &str = "listing jobs";
        let states = serde_json::to_string(filter.states).unwrap_or_else(|_| "[]".to_owned());
        let limit = if filter.limit == 0 { 100 } else { filter.limit } as i64;
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM jobs
                     WHERE (?1 IS NULL OR user = ?1)
                       AND (json_array_length(?2) = 0 OR state IN (SELECT value FROM json_each(?2)))
                       AND (?3 IS NULL OR origin = ?3)
                     ORDER BY created_ms DESC, id DESC LIMIT ?4"
                ))
                .doing(DOING)?;
            let rows =
                stmt.query_map(rusqlite::params![filter.user, states, filter.origin, limit], row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn jobs_by_state(&self) -> Result<Vec<(String, u64)>, StoreError> {
        const DOING: &str = "counting jobs";
        self.with(|conn| {
            let mut stmt =
                conn.prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state").doing(DOING)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0))))
                .doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn job_start(&self, id: &str, lease_owner: &str, now_ms: i64) -> Result<bool, StoreError> {
        const DOING: &str = "starting a job";
        self.with(|conn| {
            write(conn, DOING, |tx| {
                let n = tx
                    .execute(
                        "UPDATE jobs SET state = 'running', started_ms = ?3
                         WHERE id = ?1 AND state = 'queued' AND lease_owner = ?2 AND lease_until_ms > ?3",
                        rusqlite::params![id, lease_owner, now_ms],
                    )
                    .doing(DOING)?;
                if n > 0 {
                    event(tx, id, "state", "running", now_ms)?;
                }
                Ok(n > 0)
            })
        })
    }

    fn job_set_session(&self, id: &str, agent_session: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute("UPDATE jobs SET agent_session = ?2 WHERE id = ?1", [id, agent_session])
                .map(drop)
                .doing("recording a job's session")
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
        const DOING: &str = "ending a job";
        self.with(|conn| {
            write(conn, DOING, |tx| {
                let n = tx
                    .execute(
                        "UPDATE jobs SET state = ?2, result = ?3, error = ?4, finished_ms = ?5,
                                         lease_owner = NULL, lease_until_ms = NULL
                         WHERE id = ?1 AND state IN ('queued', 'running')",
                        rusqlite::params![id, state, result, error, now_ms],
                    )
                    .doing(DOING)?;
                if n > 0 {
                    let text = match error {
                        Some(e) => format!("{state}: {e}"),
                        None => state.to_owned(),
                    };
                    event(tx, id, "state", &text, now_ms)?;
                }
                Ok(n > 0)
            })
        })
    }

    fn jobs_renew(&self, lease_owner: &str, lease_until_ms: i64) -> Result<Vec<String>, StoreError> {
        const DOING: &str = "renewing job leases";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE jobs SET lease_until_ms = ?2
                     WHERE lease_owner = ?1 AND state IN ('queued', 'running') RETURNING id",
                )
                .doing(DOING)?;
            let rows = stmt.query_map(rusqlite::params![lease_owner, lease_until_ms], |r| r.get(0)).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn jobs_interrupt_expired(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        const DOING: &str = "ending interrupted jobs";
        self.with(|conn| {
            write(conn, DOING, |tx| {
                let ids: Vec<String> = {
                    let mut stmt = tx
                        .prepare_cached(
                            "UPDATE jobs SET state = 'failed', error = ?2, finished_ms = ?1,
                                             lease_owner = NULL, lease_until_ms = NULL
                             WHERE state IN ('queued', 'running') AND lease_until_ms <= ?1 RETURNING id",
                        )
                        .doing(DOING)?;
                    let rows = stmt.query_map(rusqlite::params![now_ms, JOB_INTERRUPTED], |r| r.get(0)).doing(DOING)?;
                    rows.collect::<Result<Vec<_>, _>>().doing(DOING)?
                };
                for id in &ids {
                    event(tx, id, "state", JOB_INTERRUPTED_EVENT, now_ms)?;
                }
                Ok(ids)
            })
        })
    }

    fn job_event(&self, job: &str, kind: &str, text: &str, ts_ms: i64) -> Result<i64, StoreError> {
        self.with(|conn| write(conn, "writing a job event", |tx| event(tx, job, kind, text, ts_ms)))
    }

    fn job_events(&self, job: &str, after: i64, limit: usize) -> Result<Vec<JobEvent>, StoreError> {
        const DOING: &str = "reading job events";
        let ev = |r: &rusqlite::Row<'_>| {
            Ok(JobEvent { job: r.get(0)?, seq: r.get(1)?, ts_ms: r.get(2)?, kind: r.get(3)?, text: r.get(4)? })
        };
        self.with(|conn| {
            let mut out = if after < 0 {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT job, seq, ts_ms, kind, text FROM job_events WHERE job = ?1 ORDER BY seq DESC LIMIT ?2",
                    )
                    .doing(DOING)?;
                let rows = stmt.query_map(rusqlite::params![job, limit as i64], ev).doing(DOING)?;
                let mut v = rows.collect::<Result<Vec<_>, _>>().doing(DOING)?;
                v.reverse();
                v
            } else {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT job, seq, ts_ms, kind, text FROM job_events WHERE job = ?1 AND seq > ?2
                         ORDER BY seq LIMIT ?3",
                    )
                    .doing(DOING)?;
                let rows = stmt.query_map(rusqlite::params![job, after, limit as i64], ev).doing(DOING)?;
                rows.collect::<Result<Vec<_>, _>>().doing(DOING)?
            };
            out.shrink_to_fit();
            Ok(out)
        })
    }

    fn jobs_claim(
        &self,
        lease_owner: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        const DOING: &str = "claiming queued jobs";
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.with(|conn| {
            write(conn, DOING, |tx| {
                let ids: Vec<String> = {
                    let mut stmt = tx
                        .prepare_cached(
                            "UPDATE jobs SET lease_owner = ?1, lease_until_ms = ?2
                             WHERE id IN (SELECT id FROM jobs WHERE state = 'queued' AND lease_owner IS NULL
                                          ORDER BY created_ms, id LIMIT ?3)
                               AND state = 'queued' AND lease_owner IS NULL
                             RETURNING id",
                        )
                        .doing(DOING)?;
                    let rows = stmt
                        .query_map(rusqlite::params![lease_owner, lease_until_ms, limit as i64], |r| r.get(0))
                        .doing(DOING)?;
                    rows.collect::<Result<Vec<String>, _>>().doing(DOING)?
                };
                let mut claimed = Vec::with_capacity(ids.len());
                for id in &ids {
                    claimed.push(
                        tx.query_row(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"), [id], row).doing(DOING)?,
                    );
                }
                for j in &claimed {
                    event(
                        tx,
                        &j.id,
                        "claim",
                        &format!("claimed by the toolgate server `{lease_owner}`, which runs it"),
                        now_ms,
                    )?;
                }
                claimed.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
                Ok(claimed)
            })
        })
    }

    fn jobs_runner_beat(&self, runner: &str, until_ms: i64, now_ms: i64) -> Result<(), StoreError> {
        const DOING: &str = "announcing a job runner";
        self.with(|conn| {
            write(conn, DOING, |tx| {
                tx.execute(
                    "DELETE FROM scheduler_leases WHERE name >= ?1 AND name < ?2 AND expires_ms <= ?3",
                    rusqlite::params![RUNNER, format!("{RUNNER}{}", char::MAX), now_ms],
                )
                .doing(DOING)?;
                tx.execute(
                    "INSERT INTO scheduler_leases (name, holder, expires_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms",
                    rusqlite::params![format!("{RUNNER}{runner}"), runner, until_ms],
                )
                .doing(DOING)?;
                Ok(())
            })
        })
    }

    fn jobs_runner_gone(&self, runner: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM scheduler_leases WHERE name = ?1", [format!("{RUNNER}{runner}")])
                .map(drop)
                .doing("removing a job runner")
        })
    }

    fn jobs_runners(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        const DOING: &str = "listing job runners";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT holder FROM scheduler_leases WHERE name >= ?1 AND name < ?2 AND expires_ms > ?3 ORDER BY name",
                )
                .doing(DOING)?;
            let rows = stmt
                .query_map(rusqlite::params![RUNNER, format!("{RUNNER}{}", char::MAX), now_ms], |r| r.get(0))
                .doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }
}
