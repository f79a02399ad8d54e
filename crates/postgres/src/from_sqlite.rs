//! A single node's SQLite tables copied row for row into PostgreSQL, for `toolgate admin
//! migrate` (`toolgate::migrate`): ids, sequence numbers and times kept (an approval, a team
//! task or a mailbox message keeps the number people and read markers know). [`read_sqlite`]
//! reads and checks every row first; [`PgStore::import_sqlite`] writes them all in one
//! transaction. A row PostgreSQL could not hold stops the move before anything is written.
//!
//! Jobs move as they are, leases too: a job whose lease lapsed (its toolgate stopped) is ended
//! `failed: interrupted` with its event by the target's own sweep (`jobs_interrupt_expired`),
//! exactly as on one node. A job whose lease has not lapsed is still another process's work:
//! it stops the move before anything is written. Path locks, page sign-ins and webhook
//! deliveries already expired are left behind (a restart would not honour them either).

use toolgate_store::{Cell, Store, StoreError};

use crate::PgStore;
use crate::import::{ColumnKind as K, TableRows, Value};

/// PostgreSQL's largest field (1 GB less a byte).
const MAX_VALUE_BYTES: usize = (1 << 30) - 1;

/// The area of a table copied but not counted in the summary (bookkeeping, not state).
const UNCOUNTED: &str = "";

/// One table to copy.
struct Copy {
    /// The area, as the summary names it.
    area: &'static str,
    /// PostgreSQL's table.
    to: &'static str,
    /// The identity column given explicitly, if any.
    identity: Option<&'static str>,
    /// A `SELECT` over SQLite's tables, one column per entry of `columns`, in the same order.
    select: &'static str,
    /// PostgreSQL's columns.
    columns: &'static [(&'static str, K)],
}

/// The tables, in the order they are written (a row that refers to another comes after it).
/// `{now}` in a `SELECT` is the move's time in Unix milliseconds.
const COPIES: &[Copy] = &[
    Copy {
        area: "grants",
        to: "grants",
        identity: Some("id"),
        select: "SELECT id, subject, agent, server, tool_allow, tool_deny, enabled, config_overrides, mode,
                        arg_subject, arg_rule, expires_ms, granted_by, request, note, created_ms
                 FROM grants ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("subject", K::Text),
            ("agent", K::Text),
            ("server", K::Text),
            ("tool_allow", K::Text),
            ("tool_deny", K::Text),
            ("enabled", K::Bool),
            ("config_overrides", K::Text),
            ("mode", K::Text),
            ("arg_subject", K::Text),
            ("arg_rule", K::Text),
            ("expires_ms", K::Int),
            ("granted_by", K::Text),
            ("request", K::Int),
            ("note", K::Text),
            ("created_ms", K::Int),
        ],
    },
    Copy {
        area: "access requests",
        to: "access_requests",
        identity: Some("id"),
        select: "SELECT id, requester, user, server, tool, reason, status, created_ms, decided_by, decided_ms,
                        message, grant_id, notify_error, notify_failed_ms
                 FROM access_requests ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("requester", K::Text),
            ("for_user", K::Text),
            ("server", K::Text),
            ("tool", K::Text),
            ("reason", K::Text),
            ("status", K::Text),
            ("created_ms", K::Int),
            ("decided_by", K::Text),
            ("decided_ms", K::Int),
            ("message", K::Text),
            ("grant_id", K::Int),
            ("notify_error", K::Text),
            ("notify_failed_ms", K::Int),
        ],
    },
    Copy {
        area: "approvals",
        to: "approvals",
        identity: Some("id"),
        select: "SELECT id, call_id, user, agent, session, tool, server, subject, args_digest, shown, reason,
                        policy_revision, batch, created_ms, expires_ms, status, decided_by, decided_ms, message,
                        notify_error, used_ms, fallback_ms
                 FROM approvals ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("call_id", K::Text),
            ("for_user", K::Text),
            ("agent", K::Text),
            ("session", K::Text),
            ("tool", K::Text),
            ("server", K::Text),
            ("subject", K::Text),
            ("args_digest", K::Text),
            ("shown", K::Text),
            ("reason", K::Text),
            ("policy_revision", K::Text),
            ("batch", K::Text),
            ("created_ms", K::Int),
            ("expires_ms", K::Int),
            ("status", K::Text),
            ("decided_by", K::Text),
            ("decided_ms", K::Int),
            ("message", K::Text),
            ("notify_error", K::Text),
            ("used_ms", K::Int),
            ("fallback_ms", K::Int),
        ],
    },
    Copy {
        area: "approval events",
        to: "approval_events",
        identity: Some("seq"),
        select: "SELECT seq, approval, kind, by, at_ms, detail FROM approval_events ORDER BY seq",
        columns: &[
            ("seq", K::Int),
            ("approval", K::Int),
            ("kind", K::Text),
            ("actor", K::Text),
            ("at_ms", K::Int),
            ("detail", K::Text),
        ],
    },
    Copy {
        area: "agent sessions",
        to: "agent_sessions",
        identity: None,
        select: "SELECT id, agent, user, parent, kind, label, status, depth, task, result, error, input_tokens,
                        output_tokens, cost_usd, created_ms, updated_ms,
                        (SELECT tools FROM agent_session_tools t WHERE t.session = s.id)
                 FROM agent_sessions s ORDER BY created_ms, rowid",
        columns: &[
            ("id", K::Text),
            ("agent", K::Text),
            ("member", K::Text),
            ("parent", K::Text),
            ("kind", K::Text),
            ("label", K::Text),
            ("status", K::Text),
            ("depth", K::Int),
            ("task", K::Text),
            ("result", K::Text),
            ("error", K::Text),
            ("input_tokens", K::Int),
            ("output_tokens", K::Int),
            ("cost_usd", K::Real),
            ("created_ms", K::Int),
            ("updated_ms", K::Int),
            ("only_tools", K::Text),
        ],
    },
    Copy {
        area: "session messages",
        to: "agent_messages",
        identity: None,
        select: "SELECT session, seq, role, content, tool_calls, tool_call_id, tool_name, is_error, ts_ms
                 FROM agent_messages ORDER BY session, seq",
        columns: &[
            ("session", K::Text),
            ("seq", K::Int),
            ("role", K::Text),
            ("content", K::Text),
            ("tool_calls", K::Text),
            ("tool_call_id", K::Text),
            ("tool_name", K::Text),
            ("is_error", K::Bool),
            ("ts_ms", K::Int),
        ],
    },
    Copy {
        area: "team tasks",
        to: "team_tasks",
        identity: Some("id"),
        select: "SELECT id, team, subject, description, priority, status, owner, blocked_by, result, created_ms,
                        claimed_ms, lease_until_ms, claim_session, posted_session, posted_user
                 FROM team_tasks ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("team", K::Text),
            ("subject", K::Text),
            ("description", K::Text),
            ("priority", K::Int),
            ("status", K::Text),
            ("owner", K::Text),
            ("blocked_by", K::Json),
            ("result", K::Text),
            ("created_ms", K::Int),
            ("claimed_ms", K::Int),
            ("lease_until_ms", K::Int),
            ("claim_session", K::Text),
            ("posted_session", K::Text),
            ("posted_user", K::Text),
        ],
    },
    Copy {
        area: "team messages",
        to: "team_messages",
        identity: Some("id"),
        select: "SELECT id, team, sender, recipient, content, ts_ms FROM team_messages ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("team", K::Text),
            ("sender", K::Text),
            ("recipient", K::Text),
            ("content", K::Text),
            ("ts_ms", K::Int),
        ],
    },
    Copy {
        area: "mailbox read markers",
        to: "team_message_reads",
        identity: None,
        select: "SELECT team, reader, last_id FROM team_message_reads ORDER BY team, reader",
        columns: &[("team", K::Text), ("reader", K::Text), ("last_id", K::Int)],
    },
    Copy {
        area: "handoff routes",
        to: "handoff_routes",
        identity: None,
        select: "SELECT conversation, user, from_agent, to_agent, to_session, reason, created_ms
                 FROM handoff_routes ORDER BY created_ms, conversation",
        columns: &[
            ("conversation", K::Text),
            ("member", K::Text),
            ("from_agent", K::Text),
            ("to_agent", K::Text),
            ("to_session", K::Text),
            ("reason", K::Text),
            ("created_ms", K::Int),
        ],
    },
    Copy {
        area: "jobs",
        to: "jobs",
        identity: None,
        select: "SELECT id, user, session, title, description, mode, project_dir, credentials, origin, state, result,
                        error, agent_session, created_ms, started_ms, finished_ms, lease_owner, lease_until_ms,
                        COALESCE((SELECT s.spec FROM job_specs s WHERE s.job = jobs.id), '{}')
                 FROM jobs ORDER BY created_ms, id",
        columns: &JOB_COLUMNS,
    },
    Copy {
        area: "job events",
        to: "job_events",
        identity: None,
        select: "SELECT job, seq, ts_ms, kind, text FROM job_events ORDER BY job, seq",
        columns: &[("job", K::Text), ("seq", K::Int), ("ts_ms", K::Int), ("kind", K::Text), ("body", K::Text)],
    },
    Copy {
        area: "routine fires",
        to: "routine_fires",
        identity: None,
        select: "SELECT routine, scheduled_ms, fired_ms, trigger, status, job_id, detail
                 FROM routine_fires ORDER BY routine, scheduled_ms",
        columns: &[
            ("routine", K::Text),
            ("scheduled_ms", K::Int),
            ("fired_ms", K::Int),
            ("trigger_kind", K::Text),
            ("status", K::Text),
            ("job_id", K::Text),
            ("detail", K::Text),
        ],
    },
    Copy {
        area: "webhook deliveries seen",
        to: "webhook_seen",
        identity: None,
        select: "SELECT routine, key, expires_ms FROM webhook_seen WHERE expires_ms > {now} ORDER BY routine, key",
        columns: &[("routine", K::Text), ("key", K::Text), ("expires_ms", K::Int)],
    },
    Copy {
        area: "path locks",
        to: "path_locks",
        identity: None,
        select: "SELECT token, workspace, user, agent, session, globs, created_ms, expires_ms
                 FROM path_locks WHERE expires_ms > {now} ORDER BY created_ms, rowid",
        columns: &[
            ("token", K::Text),
            ("workspace", K::Text),
            ("member", K::Text),
            ("agent", K::Text),
            ("session", K::Text),
            ("globs", K::Text),
            ("created_ms", K::Int),
            ("expires_ms", K::Int),
        ],
    },
    Copy {
        area: "page sign-ins",
        to: "page_sessions",
        identity: None,
        select: "SELECT digest, user, created_ms, expires_ms FROM page_sessions WHERE expires_ms > {now}
                 ORDER BY created_ms, digest",
        columns: &[("digest", K::Bytes), ("member", K::Text), ("created_ms", K::Int), ("expires_ms", K::Int)],
    },
    Copy {
        area: "memory notes",
        to: "memory_docs",
        identity: None,
        select: "SELECT scope, path, hash, mtime_ns, size, content, updated_ms FROM memory_docs ORDER BY scope, path",
        columns: &[
            ("workspace", K::Text),
            ("scope", K::Text),
            ("path", K::Text),
            ("hash", K::Text),
            ("mtime_ns", K::Int),
            ("size", K::Int),
            ("content", K::Text),
            ("updated_ms", K::Int),
        ],
    },
    // The memory index's change counter for the workspace, set to 1 when notes move (the
    // SQLite file's own counter is not copied). A node reads a workspace with no row as
    // generation 0 and keeps what it learnt of the index (vectors in memory, "no chunk lacks a
    // vector") until the generation changes; a node already started on this database saw 0, so
    // the moved notes must read as a change for it to look again. The target is empty (the
    // move refuses one with a row here), so 1 always differs from what any node saw.
    Copy {
        area: UNCOUNTED,
        to: "memory_generations",
        identity: None,
        select: "SELECT 1 WHERE EXISTS (SELECT 1 FROM memory_docs)",
        columns: &[("workspace", K::Text), ("generation", K::Int)],
    },
    Copy {
        area: "memory chunks",
        to: "memory_chunks",
        identity: Some("id"),
        select: "SELECT id, scope, path, start_line, end_line, heading, text, hash FROM memory_chunks ORDER BY id",
        columns: &[
            ("id", K::Int),
            ("workspace", K::Text),
            ("scope", K::Text),
            ("path", K::Text),
            ("start_line", K::Int),
            ("end_line", K::Int),
            ("heading", K::Text),
            ("text", K::Text),
            ("hash", K::Text),
            ("words", K::Words),
        ],
    },
    Copy {
        area: "memory vectors",
        to: "memory_vectors",
        identity: None,
        select: "SELECT chunk_id, scope, model, vec FROM memory_vectors ORDER BY chunk_id",
        columns: &[
            ("chunk_id", K::Int),
            ("workspace", K::Text),
            ("scope", K::Text),
            ("model", K::Text),
            ("vec", K::Bytes),
        ],
    },
    Copy {
        area: "cached embeddings",
        to: "embedding_cache",
        identity: None,
        select: "SELECT model, hash, vec, used_ms FROM embedding_cache ORDER BY model, hash",
        columns: &[("model", K::Text), ("hash", K::Text), ("vec", K::Bytes), ("used_ms", K::Int)],
    },
];

const JOB_COLUMNS: [(&str, K); 19] = [
    ("id", K::Text),
    ("member", K::Text),
    ("session", K::Text),
    ("title", K::Text),
    ("description", K::Text),
    ("mode", K::Text),
    ("project_dir", K::Text),
    ("credentials", K::Text),
    ("origin", K::Text),
    ("state", K::Text),
    ("result", K::Text),
    ("error", K::Text),
    ("agent_session", K::Text),
    ("created_ms", K::Int),
    ("started_ms", K::Int),
    ("finished_ms", K::Int),
    ("lease_owner", K::Text),
    ("lease_until_ms", K::Int),
    ("spec", K::Text),
];

/// PostgreSQL's tables [`PgStore::import_sqlite`] fills: a database with rows in any of them
/// has been used.
pub fn sqlite_copy_tables() -> Vec<&'static str> {
    COPIES.iter().map(|c| c.to).collect()
}

/// Rows moved, per area, in the order they are written (areas of several tables summed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    /// `(area, rows)`.
    pub areas: Vec<(&'static str, u64)>,
    /// Queued or running jobs whose lease had lapsed (their toolgate stopped), copied as they
    /// were: the target's sweep ends them `failed: interrupted`.
    pub lapsed_jobs: usize,
}

/// A node's rows, read and checked, to write with [`PgStore::import_sqlite`].
#[derive(Debug)]
pub struct SqliteRows {
    tables: Vec<TableRows>,
    lapsed_jobs: usize,
}

impl SqliteRows {
    /// The grants read: ("allow always" grants, tool grants).
    pub fn grant_counts(&self) -> (usize, usize) {
        let Some(grants) = self.tables.iter().find(|t| t.table == "grants") else { return (0, 0) };
        let arg_subject =
            grants.columns.iter().position(|(c, _)| *c == "arg_subject").expect("grants are copied with arg_subject");
        let always = grants.rows.iter().filter(|r| r[arg_subject] != Value::Null).count();
        (always, grants.rows.len() - always)
    }
}

/// Why [`read_sqlite`] could not read a node's rows.
#[derive(Debug, thiserror::Error)]
pub enum SqliteReadError {
    /// The SQLite file could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A row PostgreSQL cannot hold (the message names it and says what to do).
    #[error("{0}")]
    Unmovable(String),
    /// Jobs held under a lease that has not lapsed: a toolgate still runs them (the message
    /// names them and says what to do).
    #[error("{0}")]
    Leased(String),
}

impl PgStore {
    /// Writes `rows` in one transaction: all or nothing. Returns how many rows each area got.
    pub fn import_sqlite(&self, rows: SqliteRows) -> Result<Copied, StoreError> {
        let counts = self.import_rows(rows.tables)?;
        Ok(summary(&counts, rows.lapsed_jobs))
    }
}

/// Reads and checks every table a node's SQLite file (`source`) holds that PostgreSQL has;
/// `workspace` is the name the nodes give the workspace (the memory tables are keyed by it),
/// `now_ms` the move's time. Reads only. A queued or running job whose lease has not lapsed at
/// `now_ms` stops it ([`SqliteReadError::Leased`]).
pub fn read_sqlite(source: &Store, workspace: &str, now_ms: i64) -> Result<SqliteRows, SqliteReadError> {
    let mut tables = Vec::with_capacity(COPIES.len());
    let mut lapsed_jobs = 0;
    for copy in COPIES {
        let select = copy.select.replace("{now}", &now_ms.to_string());
        let cells = source.export_rows(&select)?;
        let mut rows = Vec::with_capacity(cells.len());
        for (i, row) in cells.into_iter().enumerate() {
            let mut row = row.into_iter();
            let mut values = Vec::with_capacity(copy.columns.len());
            for &(column, kind) in copy.columns {
                let value = match (copy.to, column) {
                    ("memory_docs" | "memory_generations" | "memory_chunks" | "memory_vectors", "workspace") => {
                        Value::Text(workspace.to_owned())
                    }
                    ("memory_chunks", "words") => Value::Text(crate::memory::words(
                        text_of(&values, copy, "path"),
                        text_of(&values, copy, "text"),
                    )),
                    _ => {
                        let cell = row.next().unwrap_or(Cell::Null);
                        checked(cell, kind).map_err(|why| corrupt(copy, i, &values, column, &why))?
                    }
                };
                values.push(value);
            }
            rows.push(values);
        }
        if copy.to == "jobs" {
            let leased = leased(&rows, now_ms);
            if let Some(refusal) = refuse_leased(&leased.live, now_ms) {
                return Err(SqliteReadError::Leased(refusal));
            }
            lapsed_jobs = leased.lapsed;
        }
        tables.push(TableRows { table: copy.to, columns: copy.columns.to_vec(), identity: copy.identity, rows });
    }
    Ok(SqliteRows { tables, lapsed_jobs })
}

/// The queued and running jobs of `jobs` (rows of [`JOB_COLUMNS`]) that hold a lease.
#[derive(Debug, Default, PartialEq)]
struct Leased<'a> {
    /// Whose lease has not lapsed at the move's time: (id, lease until), by id.
    live: Vec<(&'a str, i64)>,
    /// How many have a lease that lapsed (the target's sweep ends them).
    lapsed: usize,
}

/// Sorts `jobs` by their lease at `now_ms`, by the rule the sweep (`jobs_interrupt_expired`)
/// applies: a lease lapsed when `lease_until_ms <= now`.
fn leased(jobs: &[Vec<Value>], now_ms: i64) -> Leased<'_> {
    let at = |name: &str| JOB_COLUMNS.iter().position(|(c, _)| *c == name).expect("a column of JOB_COLUMNS");
    let (id, state, until) = (at("id"), at("state"), at("lease_until_ms"));
    let mut leased = Leased::default();
    for job in jobs {
        if !matches!(&job[state], Value::Text(s) if s == "queued" || s == "running") {
            continue;
        }
        match (&job[id], int(&job[until])) {
            (Value::Text(id), Some(until)) if until > now_ms => leased.live.push((id, until)),
            (_, Some(_)) => leased.lapsed += 1,
            _ => {}
        }
    }
    leased.live.sort();
    leased
}

/// The refusal for jobs still held under a live lease (none: `None`).
fn refuse_leased(live: &[(&str, i64)], now_ms: i64) -> Option<String> {
    const SHOWN: usize = 5;
    let last = live.iter().map(|(_, until)| *until).max()?;
    let mut ids = live.iter().take(SHOWN).map(|(id, _)| *id).collect::<Vec<_>>().join(", ");
    if live.len() > SHOWN {
        ids.push_str(&format!(" and {} more", live.len() - SHOWN));
    }
    let wait_s = (last - now_ms + 999) / 1000;
    Some(format!(
        "{} jobs ({ids}) are held under a lease that has not lapsed: a toolgate still runs them on this workspace. \
         Stop the toolgate that runs them, or wait for their lease to lapse (the last in {wait_s} s; a stopped \
         toolgate's jobs then end `failed: interrupted` on the shared database), and run this again. Nothing was \
         written",
        live.len()
    ))
}

/// Sums the rows written per area.
fn summary(counts: &[u64], lapsed_jobs: usize) -> Copied {
    let mut areas: Vec<(&'static str, u64)> = Vec::new();
    for (copy, n) in COPIES.iter().zip(counts).filter(|(copy, _)| copy.area != UNCOUNTED) {
        match areas.iter_mut().find(|(area, _)| *area == copy.area) {
            Some((_, sum)) => *sum += n,
            None => areas.push((copy.area, *n)),
        }
    }
    Copied { areas, lapsed_jobs }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn text_of<'a>(values: &'a [Value], copy: &Copy, column: &str) -> &'a str {
    let i = copy.columns.iter().position(|(c, _)| *c == column).unwrap_or(usize::MAX);
    match values.get(i) {
        Some(Value::Text(s)) => s,
        _ => "",
    }
}

/// `cell` as PostgreSQL's `kind` takes it, or why it cannot be.
fn checked(cell: Cell, kind: K) -> Result<Value, String> {
    Ok(match (cell, kind) {
        (Cell::Null, _) => Value::Null,
        (Cell::Int(n), K::Int) => Value::Int(n),
        (Cell::Int(n), K::Bool) => Value::Bool(n != 0),
        (Cell::Int(n), K::Real) => Value::Real(n as f64),
        (Cell::Real(x), K::Real) => Value::Real(x),
        (Cell::Text(bytes), K::Text | K::Json | K::Words) => {
            if bytes.len() > MAX_VALUE_BYTES {
                return Err(format!("{} bytes of text, more than PostgreSQL holds in one value (1 GB)", bytes.len()));
            }
            let text = String::from_utf8(bytes).map_err(|e| format!("text that is not UTF-8 ({e})"))?;
            if let Some(at) = text.find('\0') {
                return Err(format!("text with a NUL character (at byte {at}), which PostgreSQL's text cannot hold"));
            }
            if kind == K::Json
                && let Err(e) = serde_json::from_str::<serde_json::Value>(&text)
            {
                return Err(format!("{text:.80?} where JSON was expected ({e})"));
            }
            Value::Text(text)
        }
        (Cell::Bytes(bytes), K::Bytes) => {
            if bytes.len() > MAX_VALUE_BYTES {
                return Err(format!("{} bytes, more than PostgreSQL holds in one value (1 GB)", bytes.len()));
            }
            Value::Bytes(bytes)
        }
        (cell, kind) => {
            let found = match cell {
                Cell::Null => "NULL",
                Cell::Int(_) => "an integer",
                Cell::Real(_) => "a floating-point number",
                Cell::Text(_) => "text",
                Cell::Bytes(_) => "a blob",
            };
            let wanted = match kind {
                K::Int => "an integer",
                K::Real => "a number",
                K::Bool => "0 or 1",
                K::Bytes => "a blob",
                K::Text | K::Json | K::Words => "text",
            };
            return Err(format!("{found} where {wanted} was expected"));
        }
    })
}

/// The error for a row that cannot move: the table, the row (by its first column: its key), the
/// column and what is wrong, and what to do.
fn corrupt(copy: &Copy, index: usize, values: &[Value], column: &str, why: &str) -> SqliteReadError {
    let key = match values.first() {
        Some(Value::Text(s)) => format!(" ({} {s:.60?})", copy.columns[0].0),
        Some(Value::Int(n)) => format!(" ({} {n})", copy.columns[0].0),
        _ => String::new(),
    };
    SqliteReadError::Unmovable(format!(
        "the SQLite file's {} row {}{key} cannot move: its {column} is {why}. Nothing was written: repair or \
         delete that row in the file (the node stopped), then run this again",
        copy.to,
        index + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_against_the_column_they_go_to() {
        assert_eq!(checked(Cell::Int(1), K::Bool), Ok(Value::Bool(true)));
        assert_eq!(checked(Cell::Int(3), K::Real), Ok(Value::Real(3.0)));
        assert_eq!(checked(Cell::Text(b"[1]".to_vec()), K::Json), Ok(Value::Text("[1]".into())));
        assert!(checked(Cell::Text(b"[1".to_vec()), K::Json).unwrap_err().contains("JSON"));
        assert!(checked(Cell::Text(vec![0xff]), K::Text).unwrap_err().contains("not UTF-8"));
        assert!(checked(Cell::Text(b"a\0b".to_vec()), K::Text).unwrap_err().contains("NUL"));
        assert_eq!(checked(Cell::Text(b"soon".to_vec()), K::Int), Err("text where an integer was expected".into()));
        assert_eq!(checked(Cell::Null, K::Int), Ok(Value::Null));
    }

    #[test]
    fn a_job_under_a_live_lease_stops_the_move_and_a_lapsed_one_moves() {
        let job = |id: &str, state: &str, until: Option<i64>| -> Vec<Value> {
            JOB_COLUMNS
                .iter()
                .map(|(c, _)| match *c {
                    "id" => Value::Text(id.into()),
                    "state" => Value::Text(state.into()),
                    "lease_owner" => until.map_or(Value::Null, |_| Value::Text("node-a".into())),
                    "lease_until_ms" => until.map_or(Value::Null, Value::Int),
                    _ => Value::Null,
                })
                .collect()
        };
        let jobs = vec![
            job("j-run", "running", Some(150)),
            job("j-claimed", "queued", Some(101)),
            job("j-lapsed", "running", Some(100)),
            job("j-free", "queued", None),
            job("j-done", "completed", Some(500)),
        ];
        let found = leased(&jobs, 100);
        assert_eq!(found, Leased { live: vec![("j-claimed", 101), ("j-run", 150)], lapsed: 1 }, "lapsed at <= now");
        let why = refuse_leased(&found.live, 100).unwrap();
        assert!(why.starts_with("2 jobs (j-claimed, j-run) are held under a lease"), "{why}");
        assert!(why.contains("Stop the toolgate") && why.contains("in 1 s") && why.ends_with("Nothing was written"));
        assert_eq!(refuse_leased(&[], 100), None);
        let many: Vec<(String, i64)> = (0..8).map(|i| (format!("j{i}"), 2_000)).collect();
        let many: Vec<(&str, i64)> = many.iter().map(|(id, until)| (id.as_str(), *until)).collect();
        assert!(refuse_leased(&many, 100).unwrap().starts_with("8 jobs (j0, j1, j2, j3, j4 and 3 more)"));
    }
}
