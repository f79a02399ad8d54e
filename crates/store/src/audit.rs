//! The audit log: the [`AuditStore`] trait and its SQLite implementation, [`AuditLog`] (a writer
//! thread that batches records into transactions, and the reads of [`Store`]; table `audit`,
//! migrations 1, 5 and 8 in `db.rs`).

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::db::open_connection;
use crate::error::Context;
use crate::process_token::start_token;
use crate::{Store, StoreError};

/// One call, as the audit log keeps it. Sensitive parameters are already redacted by the gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The call id.
    pub id: String,
    /// When the call started, in Unix milliseconds.
    pub ts_ms: i64,
    /// The user.
    pub user: String,
    /// The agent.
    pub agent: String,
    /// The session.
    pub session: String,
    /// The model provider, when known.
    pub provider: Option<String>,
    /// The tool (canonical name; an unknown name is kept as asked).
    pub tool: String,
    /// The parameters as JSON, sensitive values redacted.
    pub params: String,
    /// The decision and the trace of the stages that made it.
    pub decision: String,
    /// `ok`, or the error kind (`denied`, `timeout`, ...).
    pub outcome: String,
    /// The error message, when the call failed.
    pub error: Option<String>,
    /// How long the call took, in microseconds.
    pub duration_us: i64,
    /// Bytes of output returned.
    pub output_bytes: i64,
    /// What an approval would name (the normalized command, path or host), when the tool has
    /// one: kept from the "started" row when the completed record has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// What the tool added while it ran (`CallContext::audit`), e.g. a web request's status
    /// and final URL after redirects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The name the caller used, when its dialect names the tool differently (`Read` for
    /// `read`, `apply_patch` for `edit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called_as: Option<String>,
}

/// The outcome of a call that has been decided and is running (see
/// [`AuditStore::record_started`]).
pub const STARTED: &str = "started";
/// The outcome of a "started" call whose process ended before it completed.
pub const INTERRUPTED: &str = "interrupted";

/// The audit log: one record per call, written off the call path, read by `toolgate audit`.
///
/// Writing never fails for the caller: a record that cannot be written is reported in the log
/// (`tracing`) by the writer. Reading returns the records as written, with their ids.
pub trait AuditStore: Send + Sync + Debug {
    /// Queues a record: it is written soon, possibly in a batch with others (see
    /// [`AuditStore::flush`]). A record with the id of a [`STARTED`] row completes that row,
    /// keeping its subject when the record has none.
    fn record(&self, record: AuditRecord);

    /// Writes the record of a call that is about to run (outcome [`STARTED`]) and returns once
    /// it is written, so that the call leaves a row even if the process dies while it runs. The
    /// row names this process, so that a later start closes it as [`INTERRUPTED`] only if this
    /// process is gone (see [`AuditStore::close_interrupted_calls`]).
    fn record_started(&self, record: AuditRecord);

    /// Waits until every record queued before this call is written.
    fn flush(&self);

    /// The last `n` records, oldest first.
    fn audit_tail(&self, n: usize) -> Result<Vec<AuditRecord>, StoreError>;

    /// How many records there are.
    fn audit_count(&self) -> Result<u64, StoreError>;

    /// Closes the [`STARTED`] rows of processes that are no longer running (killed, crashed):
    /// their outcome becomes [`INTERRUPTED`], with an error saying so. Rows of a live toolgate
    /// are kept. Returns how many rows were closed.
    fn close_interrupted_calls(&self) -> Result<usize, StoreError>;

    /// The calls of `user`'s sessions since `since_ms`: `session` alone, or else every session
    /// whose id starts with `prefix`, most recently active first, at most `limit`. Events that
    /// are not calls (tool [`TEXT_EVENT`]) are not counted. Sees every record queued before it.
    fn audit_sessions(&self, query: &SessionQuery<'_>) -> Result<Vec<SessionCalls>, StoreError>;
}

/// The tool name of an audit event for redacted model text or an agent-to-agent message: not a
/// call.
pub const TEXT_EVENT: &str = "agent_text";

/// Which sessions [`AuditStore::audit_sessions`] summarises.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionQuery<'a> {
    /// Only this user's calls.
    pub user: &'a str,
    /// This session alone.
    pub session: Option<&'a str>,
    /// Without `session`: sessions whose id starts with this (`mcp-`).
    pub prefix: &'a str,
    /// Calls at or after this time (ms since the epoch).
    pub since_ms: i64,
    /// At most this many sessions.
    pub limit: usize,
}

/// What the audit log knows of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionCalls {
    /// The session id.
    pub session: String,
    /// The agent of its latest call.
    pub agent: String,
    /// Calls recorded.
    pub calls: u64,
    /// Its first call (ms since the epoch).
    pub first_ms: i64,
    /// Its latest call.
    pub last_ms: i64,
}

enum Message {
    Record(Box<AuditRecord>),
    Flush(SyncSender<()>),
}

/// The audit log in SQLite. [`record`](AuditStore::record) only queues; a background thread,
/// on a connection of its own, writes batches in single transactions, so the call path never
/// waits on `fsync`. Reads go through a [`Store`] opened on the first read.
///
/// Dropping the log writes everything queued before returning: nothing is lost on a clean
/// shutdown. The queue holds 65,536 records; when the disk falls that far behind, `record`
/// waits (back-pressure) rather than dropping records or growing without bound.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    tx: Option<SyncSender<Message>>,
    writer: Option<JoinHandle<()>>,
    reader: OnceLock<Store>,
}

impl AuditLog {
    /// Opens the database at `path` and starts the writer thread, which first closes the rows
    /// of dead processes (as [`AuditStore::close_interrupted_calls`] does).
    pub fn open(path: &Path) -> Result<AuditLog, StoreError> {
        let conn = open_connection(path)?;
        let (tx, rx) = sync_channel(65_536);
        let writer = std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_loop(conn, rx))
            .map_err(|e| StoreError::Open { path: path.to_owned(), source: Box::new(e) })?;
        Ok(AuditLog { path: path.to_owned(), tx: Some(tx), writer: Some(writer), reader: OnceLock::new() })
    }

    /// The connection reads go through (the call path never reads: opened on the first read).
    fn reader(&self) -> Result<&Store, StoreError> {
        if let Some(store) = self.reader.get() {
            return Ok(store);
        }
        let store = Store::open(&self.path)?;
        Ok(self.reader.get_or_init(|| store))
    }

    /// Ends the writer's wait for more records (see `LINGER`).
    fn wake_writer(&self) {
        if let Some(writer) = &self.writer {
            writer.thread().unpark();
        }
    }
}

impl AuditStore for AuditLog {
    fn record(&self, record: AuditRecord) {
        if let Some(tx) = &self.tx {
            // The writer only stops when this log is dropped, so a send cannot fail while `self`
            // exists; if the thread died anyway, the records were already being lost.
            let _ = tx.send(Message::Record(Box::new(record)));
        }
    }

    fn record_started(&self, record: AuditRecord) {
        self.record(record);
        self.flush();
    }

    fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (ack_tx, ack_rx) = sync_channel(1);
            if tx.send(Message::Flush(ack_tx)).is_ok() {
                self.wake_writer();
                let _ = ack_rx.recv();
            }
        }
    }

    fn audit_tail(&self, n: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.reader()?.audit_tail(n)
    }

    fn audit_count(&self) -> Result<u64, StoreError> {
        self.reader()?.audit_count()
    }

    fn close_interrupted_calls(&self) -> Result<usize, StoreError> {
        self.reader()?.close_interrupted_calls()
    }

    fn audit_sessions(&self, query: &SessionQuery<'_>) -> Result<Vec<SessionCalls>, StoreError> {
        self.flush();
        self.reader()?.audit_sessions(query)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        drop(self.tx.take());
        self.wake_writer();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The audit log's reads, which [`AuditLog`] answers with, for code that opens the database to
/// read the log (`toolgate audit`).
impl Store {
    /// The last `n` audit records, oldest first.
    pub fn audit_tail(&self, n: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, ts_ms, user, agent, session, provider, tool, params, decision, outcome, error,
                            duration_us, output_bytes, subject, detail, called_as
                     FROM audit ORDER BY ts_ms DESC, rowid DESC LIMIT ?1",
                )
                .doing("reading the audit log")?;
            let rows = stmt
                .query_map([n as i64], |row| {
                    Ok(AuditRecord {
                        id: row.get(0)?,
                        ts_ms: row.get(1)?,
                        user: row.get(2)?,
                        agent: row.get(3)?,
                        session: row.get(4)?,
                        provider: row.get(5)?,
                        tool: row.get(6)?,
                        params: row.get(7)?,
                        decision: row.get(8)?,
                        outcome: row.get(9)?,
                        error: row.get(10)?,
                        duration_us: row.get(11)?,
                        output_bytes: row.get(12)?,
                        subject: row.get(13)?,
                        detail: row.get(14)?,
                        called_as: row.get(15)?,
                    })
                })
                .doing("reading the audit log")?;
            let mut out = rows.collect::<Result<Vec<_>, _>>().doing("reading the audit log")?;
            out.reverse();
            Ok(out)
        })
    }

    /// Closes the audit rows left "started" by a process that is no longer running (killed,
    /// crashed): their outcome becomes "interrupted". Rows of a live toolgate are kept. Returns
    /// how many rows were closed. [`AuditLog::open`] does this in its writer thread.
    pub fn close_interrupted_calls(&self) -> Result<usize, StoreError> {
        self.with(|conn| close_interrupted(conn).doing("closing interrupted audit rows"))
    }

    /// See [`AuditStore::audit_sessions`].
    pub fn audit_sessions(&self, q: &SessionQuery<'_>) -> Result<Vec<SessionCalls>, StoreError> {
        // `prefix` is a literal: `%` and `_` in it match themselves.
        let like = format!("{}%", q.prefix.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT session, (SELECT agent FROM audit b WHERE b.session = a.session ORDER BY ts_ms DESC LIMIT 1),
                            COUNT(*), MIN(ts_ms), MAX(ts_ms)
                     FROM audit a
                     WHERE user = ?1 AND ts_ms >= ?2 AND tool != ?3
                       AND (CASE WHEN ?4 IS NULL THEN session LIKE ?5 ESCAPE '\\' ELSE session = ?4 END)
                     GROUP BY session ORDER BY MAX(ts_ms) DESC LIMIT ?6",
                )
                .doing("reading the audit log")?;
            let rows = stmt
                .query_map(
                    rusqlite::params![q.user, q.since_ms, TEXT_EVENT, q.session, like, q.limit as i64],
                    |r| {
                        Ok(SessionCalls {
                            session: r.get(0)?,
                            agent: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                            calls: r.get::<_, i64>(2)? as u64,
                            first_ms: r.get(3)?,
                            last_ms: r.get(4)?,
                        })
                    },
                )
                .doing("reading the audit log")?;
            rows.collect::<Result<Vec<_>, _>>().doing("reading the audit log")
        })
    }

    /// How many audit records there are.
    pub fn audit_count(&self) -> Result<u64, StoreError> {
        self.with(|conn| {
            conn.query_row("SELECT COUNT(*) FROM audit", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .doing("counting audit records")
        })
    }
}

/// How long the writer waits after a record for more to commit in the same transaction. Records
/// reach the database up to this much later; [`AuditStore::flush`] and drop do not wait for it.
const LINGER: std::time::Duration = std::time::Duration::from_millis(5);

fn write_loop(mut conn: Connection, rx: Receiver<Message>) {
    // Off the opener's path: rows a dead toolgate left "started" become "interrupted".
    match close_interrupted(&conn) {
        Ok(0) => {}
        Ok(n) => tracing::warn!(rows = n, "audit: closed calls left running by a toolgate that died as interrupted"),
        Err(e) => tracing::error!(error = %e, "could not close interrupted audit rows"),
    }
    let writer = Writer::this_process();
    let mut batch: Vec<Box<AuditRecord>> = Vec::with_capacity(256);
    let mut acks: Vec<SyncSender<()>> = Vec::new();
    // Block for the first message, then drain whatever else is queued into the same batch.
    while let Ok(first) = rx.recv() {
        if matches!(first, Message::Record(_)) {
            // Let a burst of calls gather into this transaction. While this thread is parked (not
            // blocked in `recv`) a send wakes nobody: sequential calls cost one wake-up and one
            // commit per LINGER instead of one each. `flush` and drop unpark it at once.
            std::thread::park_timeout(LINGER);
        }
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Record(r) => batch.push(r),
                Message::Flush(ack) => acks.push(ack),
            }
            if batch.len() >= 4096 {
                break;
            }
            next = rx.try_recv().ok();
        }
        if !batch.is_empty() {
            if let Err(e) = write_batch(&mut conn, &batch, writer) {
                tracing::error!(error = %e, records = batch.len(), "could not write audit records");
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

/// The process that writes rows (audit rows, agent sessions): its pid and start token.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    pub(crate) pid: i64,
    pub(crate) token: Option<String>,
}

impl Writer {
    /// This process (read from `/proc` once).
    pub(crate) fn this_process() -> &'static Writer {
        static THIS: std::sync::OnceLock<Writer> = std::sync::OnceLock::new();
        THIS.get_or_init(|| Writer { pid: i64::from(std::process::id()), token: start_token(std::process::id()) })
    }
}

fn write_batch(conn: &mut Connection, batch: &[Box<AuditRecord>], writer: &Writer) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        // A completed record updates its "started" row (same id) and keeps its subject.
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit
             (id, ts_ms, user, agent, session, provider, tool, params, decision, outcome, error, duration_us,
              output_bytes, subject, writer_pid, writer_token, detail, called_as)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
             ON CONFLICT(id) DO UPDATE SET
               ts_ms = excluded.ts_ms, user = excluded.user, agent = excluded.agent,
               session = excluded.session, provider = excluded.provider, tool = excluded.tool,
               params = excluded.params, decision = excluded.decision, outcome = excluded.outcome,
               error = excluded.error, duration_us = excluded.duration_us,
               output_bytes = excluded.output_bytes, subject = COALESCE(excluded.subject, audit.subject),
               writer_pid = excluded.writer_pid, writer_token = excluded.writer_token,
               detail = excluded.detail, called_as = excluded.called_as",
        )?;
        for r in batch {
            stmt.execute(rusqlite::params![
                r.id,
                r.ts_ms,
                r.user,
                r.agent,
                r.session,
                r.provider,
                r.tool,
                r.params,
                r.decision,
                r.outcome,
                r.error,
                r.duration_us,
                r.output_bytes,
                r.subject,
                writer.pid,
                writer.token,
                r.detail,
                r.called_as
            ])?;
        }
    }
    tx.commit()
}

/// Whether the process that wrote a row (its pid and start token, as [`Writer`] records them)
/// still runs. Rows from before writers were recorded count as dead.
pub(crate) fn writer_alive(pid: Option<i64>, token: Option<&str>) -> bool {
    match (pid.and_then(|p| u32::try_from(p).ok()), token) {
        (Some(pid), Some(token)) => start_token(pid).as_deref() == Some(token),
        _ => false,
    }
}

/// Marks the "started" rows of writers that are no longer running as "interrupted".
pub(crate) fn close_interrupted(conn: &Connection) -> rusqlite::Result<usize> {
    let writers: Vec<(Option<i64>, Option<String>)> = {
        let mut stmt = conn.prepare_cached("SELECT DISTINCT writer_pid, writer_token FROM audit WHERE outcome = ?1")?;
        stmt.query_map([STARTED], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?
    };
    let mut closed = 0;
    for (pid, token) in writers {
        if writer_alive(pid, token.as_deref()) {
            continue;
        }
        let error = match pid {
            Some(pid) => format!(
                "toolgate (pid {pid}) ended while this call ran (killed, crashed or out of memory): its effects, if \
                 any, are unknown"
            ),
            None => "toolgate ended while this call ran: its effects, if any, are unknown".to_owned(),
        };
        closed += conn.execute(
            "UPDATE audit SET outcome = ?1, error = ?2
             WHERE outcome = ?3 AND writer_pid IS ?4 AND writer_token IS ?5",
            rusqlite::params![INTERRUPTED, error, STARTED, pid, token],
        )?;
    }
    Ok(closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn record(i: usize) -> AuditRecord {
        AuditRecord {
            id: format!("call-{i}"),
            ts_ms: i as i64,
            tool: "echo".into(),
            params: "{}".into(),
            outcome: "ok".into(),
            ..AuditRecord::default()
        }
    }

    #[test]
    fn nothing_is_lost_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nested/state.db");
        let log = AuditLog::open(&db).unwrap();
        for i in 0..10_000 {
            log.record(record(i));
        }
        drop(log);
        let store = Store::open(&db).unwrap();
        assert_eq!(store.audit_count().unwrap(), 10_000);
        let tail = store.audit_tail(3).unwrap();
        let ids: Vec<&str> = tail.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["call-9997", "call-9998", "call-9999"], "oldest first");
    }

    #[test]
    fn flush_makes_records_visible_to_other_connections() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::open(&db).unwrap();
        let store = Store::open(&db).unwrap();
        log.record(record(1));
        log.flush();
        assert_eq!(store.audit_count().unwrap(), 1);
        assert_eq!(store.audit_tail(5).unwrap()[0], record(1));
    }

    #[test]
    fn a_completed_record_updates_its_started_row() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::open(&db).unwrap();
        let store = Store::open(&db).unwrap();
        let started = AuditRecord {
            outcome: STARTED.into(),
            subject: Some("sleep 1000".into()),
            decision: "policy: allow".into(),
            ..record(1)
        };
        log.record_started(started.clone());
        // Written before record_started returns: no flush needed.
        assert_eq!(store.audit_tail(5).unwrap(), [started]);
        log.record(AuditRecord { duration_us: 7, ..record(1) });
        log.flush();
        let rows = store.audit_tail(5).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].outcome, "ok");
        assert_eq!(rows[0].duration_us, 7);
        assert_eq!(rows[0].subject.as_deref(), Some("sleep 1000"), "the subject of the started row is kept");
    }

    #[test]
    fn started_rows_of_a_dead_writer_become_interrupted_and_a_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::open(&db).unwrap();
        log.record_started(AuditRecord { outcome: STARTED.into(), ..record(1) });
        log.record_started(AuditRecord { outcome: STARTED.into(), ..record(2) });
        log.record_started(AuditRecord { outcome: STARTED.into(), ..record(3) });
        drop(log);
        // Row 1: a process with this pid but another start time (pid reused); row 2: a pid
        // that no longer exists; row 3: this live process.
        let conn = Connection::open(&db).unwrap();
        conn.execute("UPDATE audit SET writer_token = '1.0' WHERE id = 'call-1'", []).unwrap();
        conn.execute("UPDATE audit SET writer_pid = 2147483000 WHERE id = 'call-2'", []).unwrap();
        drop(conn);
        let store = Store::open(&db).unwrap();
        assert_eq!(store.close_interrupted_calls().unwrap(), 2);
        let rows = store.audit_tail(5).unwrap();
        let outcomes: Vec<&str> = rows.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, [INTERRUPTED, INTERRUPTED, STARTED]);
        assert!(rows[1].error.as_deref().unwrap().contains("pid 2147483000"), "{:?}", rows[1].error);
        // Opening the log (a later start) does the same, in its writer.
        let conn = Connection::open(&db).unwrap();
        conn.execute("UPDATE audit SET writer_token = 'x' WHERE id = 'call-3'", []).unwrap();
        drop(conn);
        drop(AuditLog::open(&db).unwrap());
        assert_eq!(store.audit_tail(5).unwrap()[2].outcome, INTERRUPTED);
    }

    #[test]
    fn reopening_keeps_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        drop(Store::open(&db).unwrap());
        let store = Store::open(&db).unwrap();
        assert_eq!(store.audit_count().unwrap(), 0);
    }

    #[test]
    fn unwritable_path_is_a_clear_error() {
        let err = Store::open(Path::new("/proc/definitely/not/here.db")).unwrap_err();
        assert!(err.to_string().contains("cannot open the state database /proc/definitely/not/here.db"), "{err}");
    }
}
