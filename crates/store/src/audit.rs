//! The audit log: the [`AuditStore`] trait and its SQLite implementation, [`AuditLog`] (a writer
//! thread that batches records into transactions, a maintenance thread that checkpoints the WAL
//! and applies retention, and the reads of [`Store`]; table `audit` and `audit_chain`, the
//! migrations that name them in `db.rs`). Completed rows form a hash chain ([`chain`]).

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::db::open_connection;
use crate::error::Context;
use crate::process_token::start_token;
use crate::{Store, StoreError};

pub mod chain;

pub use chain::{Broken, ChainEnds, ChainReport, GENESIS, PRUNE_EVENT, Pruned};

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
    /// keeping its subject when the record has none. A completed row is final (it is in the
    /// hash chain): a second record with its id is logged and dropped.
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

    /// Checks the hash chain of the completed rows (see [`chain`]) and names the first row that
    /// does not check out. Sees every record queued before it.
    fn verify_chain(&self) -> Result<ChainReport, StoreError>;

    /// Retention: deletes the completed rows from the start of the chain up to the first row that
    /// started at or after `older_than_ms`, and appends a [`PRUNE_EVENT`] row saying what was
    /// deleted and the hash the chain now starts from. `None` when nothing was due.
    fn prune_audit(&self, older_than_ms: i64) -> Result<Option<Pruned>, StoreError>;

    /// Records queued and not yet written, when the log counts them (`/metrics`): a number that
    /// grows while the database is away.
    fn queued(&self) -> Option<u64> {
        None
    }
}

/// The tool name of an audit event for redacted model text or an agent-to-agent message: not a
/// call.
pub const TEXT_EVENT: &str = "agent_text";

/// The tool name of the row that marks where a toolgate ended without closing its audit log
/// (killed, crashed, out of memory): not a call. Its outcome is [`GAP`], its time that of the
/// last row the dead process wrote, its error says what may be missing after it.
pub const GAP_EVENT: &str = "audit_gap";
/// The outcome of a [`GAP_EVENT`] row.
pub const GAP: &str = "gap";

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

/// How an [`AuditLog`] keeps its rows (the default keeps everything; the gate passes
/// `[audit] retention_days`, 90 unless configured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// Rows that started more than this many days ago are pruned from the start of the chain
    /// (at open, then hourly); `None` keeps everything.
    pub retention_days: Option<u32>,
}

/// The audit log in SQLite. [`record`](AuditStore::record) only queues; a background thread,
/// on a connection of its own, writes batches in single transactions, so the call path never
/// waits on `fsync`. Reads go through a [`Store`] opened on the first read.
///
/// The writer's connection never checkpoints the WAL itself (SQLite's automatic checkpoint
/// syncs the database inside the commit that crosses 1000 pages, and a "started" row's caller
/// waited for it: a 5-10 ms p99): a maintenance thread, on its own connection, runs a passive
/// checkpoint after the writer's commits, beside them, and applies retention.
///
/// Dropping the log writes everything queued before returning: nothing is lost on a clean
/// shutdown. The queue holds 65,536 records; when the disk falls that far behind, `record`
/// waits (back-pressure) rather than dropping records or growing without bound.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    tx: Option<SyncSender<Message>>,
    writer: Option<JoinHandle<()>>,
    maintenance: Option<(Arc<Maintenance>, JoinHandle<()>)>,
    /// Reads go through it; a [direct](AuditLog::direct) log also writes through it.
    reader: OnceLock<Arc<Store>>,
    /// Rows are written on the caller's thread, each before `record` returns.
    direct: bool,
}

impl AuditLog {
    /// Opens the database at `path`, keeping every row (see [`AuditLog::open_with`]).
    pub fn open(path: &Path) -> Result<AuditLog, StoreError> {
        AuditLog::open_with(path, AuditOptions::default())
    }

    /// Opens the database at `path` and starts the writer thread, which first closes the rows
    /// of dead processes (as [`AuditStore::close_interrupted_calls`] does), and the maintenance
    /// thread (checkpoints, retention).
    pub fn open_with(path: &Path, options: AuditOptions) -> Result<AuditLog, StoreError> {
        let spawn_err = |e: std::io::Error| StoreError::Open { path: path.to_owned(), source: Box::new(e) };
        let conn = open_connection(path)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| StoreError::Open { path: path.to_owned(), source: Box::new(e) })?;
        let maint_conn = open_connection(path)?;
        let state = Arc::new(Maintenance::default());
        let maintenance = {
            let state = state.clone();
            std::thread::Builder::new()
                .name("toolgate-audit-maint".into())
                .spawn(move || maintain(maint_conn, &state, options))
                .map_err(spawn_err)?
        };
        let (tx, rx) = sync_channel(65_536);
        let writer = {
            let state = state.clone();
            let maint = maintenance.thread().clone();
            std::thread::Builder::new()
                .name("toolgate-audit".into())
                .spawn(move || write_loop(conn, rx, &state, &maint))
                .map_err(spawn_err)?
        };
        Ok(AuditLog {
            path: path.to_owned(),
            tx: Some(tx),
            writer: Some(writer),
            maintenance: Some((state, maintenance)),
            reader: OnceLock::new(),
            direct: false,
        })
    }

    /// A log for a process that makes one call and ends (`toolgate call`): every record is
    /// written on the caller's thread, in a transaction of its own, before
    /// [`record`](AuditStore::record) returns, through `store`'s connection (shared with the
    /// other state the call uses). No connection or thread of its own: for one or two rows,
    /// starting a writer and a maintenance thread (two more connections) cost more than the
    /// writes. What [`AuditLog::open_with`]'s threads do first is done here, before it returns:
    /// the rows of dead processes are closed and retention applied. Each record is as durable
    /// as a flushed one of the background writer (committed in WAL mode, `synchronous =
    /// NORMAL`); the WAL is checkpointed when the last connection to the database closes.
    pub fn direct(store: Arc<Store>, options: AuditOptions) -> Result<AuditLog, StoreError> {
        store.with(|conn| {
            match close_interrupted(conn) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::warn!(rows = n, "audit: closed calls left running by a toolgate that died as interrupted")
                }
                Err(e) => tracing::error!(error = %e, "could not close interrupted audit rows"),
            }
            if let Some(days) = options.retention_days {
                match prune(conn, now_ms() - i64::from(days) * 86_400_000) {
                    Ok(Some(p)) => tracing::info!(rows = p.rows, days, "audit: retention pruned the oldest rows"),
                    Ok(None) => {}
                    Err(e) => tracing::error!(error = %e, "audit: retention could not prune old rows"),
                }
            }
            Ok(())
        })?;
        Ok(AuditLog {
            path: store.path().to_owned(),
            tx: None,
            writer: None,
            maintenance: None,
            reader: OnceLock::from(store),
            direct: true,
        })
    }

    /// The connection reads go through (the call path never reads: opened on the first read).
    fn reader(&self) -> Result<&Store, StoreError> {
        if let Some(store) = self.reader.get() {
            return Ok(store.as_ref());
        }
        let store = Arc::new(Store::open(&self.path)?);
        Ok(self.reader.get_or_init(|| store).as_ref())
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
        if self.direct {
            if let Some(store) = self.reader.get() {
                let batch = [Box::new(record)];
                let written = store.with_mut(|conn| {
                    write_batch(conn, &batch, Writer::this_process()).doing("writing an audit record")
                });
                if let Err(e) = written {
                    tracing::error!(error = %e, records = 1, "could not write audit records");
                }
            }
            return;
        }
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
                if let Some((state, _)) = &self.maintenance {
                    state.flush_queued.store(true, Ordering::Release);
                }
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

    fn verify_chain(&self) -> Result<ChainReport, StoreError> {
        self.flush();
        self.reader()?.verify_audit_chain()
    }

    fn prune_audit(&self, older_than_ms: i64) -> Result<Option<Pruned>, StoreError> {
        self.flush();
        self.reader()?.prune_audit(older_than_ms)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some((state, _)) = &self.maintenance {
            state.flush_queued.store(true, Ordering::Release);
        }
        self.wake_writer();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        if let Some((state, thread)) = self.maintenance.take() {
            state.stop.store(true, Ordering::Release);
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// What the writer tells the maintenance thread.
#[derive(Debug, Default)]
struct Maintenance {
    /// Commits the writer made (the maintenance thread checkpoints when this moved).
    commits: AtomicU64,
    stop: AtomicBool,
    /// A flush is queued: the writer does not linger. (An unpark alone can be lost: the
    /// channel's blocking `recv` parks the same thread and consumes the wake-up, and the writer
    /// then lingered the whole 5 ms with the flush waiting, the p99 of a "started" row.)
    flush_queued: AtomicBool,
}

/// The checkpoint waits for a quiet moment: no commit for this long. (It runs on its own
/// connection, but its `fsync` of the WAL stalls the writer's appends to that file for its
/// duration, some ms: a call that waits on a commit then waits for it too.)
const QUIET: Duration = Duration::from_millis(50);
/// How often the maintenance thread looks.
const TICK: Duration = Duration::from_millis(25);
/// Under a load with no quiet moment, a checkpoint runs anyway after this many commits (the
/// writer wakes the thread then); SQLite's own automatic one came every 1000 pages, a few
/// hundred commits.
const CHECKPOINT_EVERY_COMMITS: u64 = 4096;
/// A WAL file above this size is checkpointed in `RESTART` mode (which waits for the writer
/// a moment) so it cannot grow without bound under a load that never lets a passive one finish.
const WAL_LIMIT: u64 = 64 << 20;
/// How often retention runs after the first time (at open).
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

fn maintain(conn: Connection, state: &Maintenance, options: AuditOptions) {
    let wal = conn.path().map(|p| PathBuf::from(format!("{p}-wal")));
    let mut checkpointed = 0;
    let (mut seen, mut last_commit) = (0, Instant::now());
    let mut retention_due = Instant::now();
    loop {
        // First at open, even when the log is dropped at once (a one-shot `toolgate call`).
        if let Some(days) = options.retention_days
            && Instant::now() >= retention_due
        {
            retention_due = Instant::now() + RETENTION_EVERY;
            let cutoff = now_ms() - i64::from(days) * 86_400_000;
            match prune(&conn, cutoff) {
                Ok(Some(p)) => tracing::info!(rows = p.rows, days, "audit: retention pruned the oldest rows"),
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "audit: retention could not prune old rows"),
            }
        }
        let stop = state.stop.load(Ordering::Acquire);
        let commits = state.commits.load(Ordering::Acquire);
        if commits != seen {
            (seen, last_commit) = (commits, Instant::now());
        }
        let quiet = last_commit.elapsed() >= QUIET;
        if commits != checkpointed && (quiet || stop || commits - checkpointed >= CHECKPOINT_EVERY_COMMITS) {
            checkpointed = commits;
            let big = wal.as_ref().and_then(|w| std::fs::metadata(w).ok()).is_some_and(|m| m.len() > WAL_LIMIT);
            let mode = if big { "RESTART" } else { "PASSIVE" };
            if let Err(e) = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(())) {
                tracing::warn!(error = %e, "audit: WAL checkpoint failed (retried after the next commits)");
            }
        }
        if stop {
            return;
        }
        // Idle (everything checkpointed): look again in a second, or when the writer wakes it.
        std::thread::park_timeout(if commits == checkpointed { Duration::from_secs(1) } else { TICK });
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
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

    /// See [`AuditStore::verify_chain`].
    pub fn verify_audit_chain(&self) -> Result<ChainReport, StoreError> {
        self.with(|conn| {
            // One read transaction: the rows and the ends from the same moment.
            let tx = conn.unchecked_transaction().doing("reading the audit chain")?;
            let ends = chain_ends(&tx).doing("reading the audit chain")?;
            let mut chained = tx
                .prepare(&format!(
                    "SELECT seq, prev_hash, hash, {RECORD_COLUMNS} FROM audit WHERE seq IS NOT NULL ORDER BY seq"
                ))
                .doing("reading the audit chain")?;
            let mut unchained = tx
                .prepare(&format!(
                    "SELECT seq, prev_hash, hash, {RECORD_COLUMNS} FROM audit
                     WHERE seq IS NULL AND (outcome != ?1 OR hash IS NOT NULL) ORDER BY ts_ms, rowid"
                ))
                .doing("reading the audit chain")?;
            let to_row = |r: &rusqlite::Row<'_>| {
                Ok(chain::ChainRow {
                    seq: r.get(0)?,
                    prev_hash: r.get(1)?,
                    hash: r.get(2)?,
                    record: record_from_row(r, 3)?,
                })
            };
            // Streamed: a long log is checked without holding it in memory.
            let mut failed = None;
            let rows = chained
                .query_map([], to_row)
                .doing("reading the audit chain")?
                .chain(unchained.query_map([STARTED], to_row).doing("reading the audit chain")?)
                .map_while(|r| r.map_err(|e| failed = Some(e)).ok());
            let report = chain::verify(&ends, rows);
            match failed {
                Some(e) => Err(e).doing("reading the audit chain"),
                None => Ok(report),
            }
        })
    }

    /// Every row of the log as stored, to move it to another store (`toolgate admin migrate`):
    /// the chain's ends, then the chained rows in chain order, then the completed rows outside
    /// the chain (added by hand) and the calls still running, each with its chain columns as
    /// they are (so the copy verifies, and ends at the same head hash, as the original).
    pub fn audit_export(&self) -> Result<(ChainEnds, Vec<chain::ChainRow>), StoreError> {
        self.with(|conn| {
            let tx = conn.unchecked_transaction().doing("reading the audit log")?;
            let ends = chain_ends(&tx).doing("reading the audit log")?;
            let rows = tx
                .prepare(&format!(
                    "SELECT seq, prev_hash, hash, {RECORD_COLUMNS} FROM audit
                     ORDER BY seq IS NULL, seq, ts_ms, rowid"
                ))
                .doing("reading the audit log")?
                .query_map([], |r| {
                    Ok(chain::ChainRow {
                        seq: r.get(0)?,
                        prev_hash: r.get(1)?,
                        hash: r.get(2)?,
                        record: record_from_row(r, 3)?,
                    })
                })
                .doing("reading the audit log")?
                .collect::<Result<Vec<_>, _>>()
                .doing("reading the audit log")?;
            Ok((ends, rows))
        })
    }

    /// See [`AuditStore::prune_audit`].
    pub fn prune_audit(&self, older_than_ms: i64) -> Result<Option<Pruned>, StoreError> {
        self.with(|conn| prune(conn, older_than_ms).doing("pruning the audit log"))
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

fn write_loop(mut conn: Connection, rx: Receiver<Message>, state: &Maintenance, maint: &std::thread::Thread) {
    // Off the opener's path: rows a dead toolgate left "started" become "interrupted".
    match close_interrupted(&conn) {
        Ok(0) => {}
        Ok(n) => tracing::warn!(rows = n, "audit: closed calls left running by a toolgate that died as interrupted"),
        Err(e) => tracing::error!(error = %e, "could not close interrupted audit rows"),
    }
    let writer = Writer::this_process();
    // This log's row in `audit_writers`, written with its first batch and deleted when it
    // closes: a row left behind names a process that ended without closing it.
    let mut registered: Option<i64> = None;
    let mut batch: Vec<Box<AuditRecord>> = Vec::with_capacity(256);
    let mut acks: Vec<SyncSender<()>> = Vec::new();
    // Block for the first message, then drain whatever else is queued into the same batch.
    while let Ok(first) = rx.recv() {
        if matches!(first, Message::Record(_)) {
            // Let a burst of calls gather into this transaction. While this thread is parked (not
            // blocked in `recv`) a send wakes nobody: sequential calls cost one wake-up and one
            // commit per LINGER instead of one each. `flush` and drop unpark it at once.
            let until = Instant::now() + LINGER;
            loop {
                let now = Instant::now();
                if state.flush_queued.swap(false, Ordering::AcqRel)
                    || now >= until
                    || state.stop.load(Ordering::Acquire)
                {
                    break;
                }
                std::thread::park_timeout(until - now);
            }
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
            if registered.is_none() {
                registered = register(&conn, writer);
            }
            if let Err(e) = write_batch(&mut conn, &batch, writer) {
                tracing::error!(error = %e, records = batch.len(), "could not write audit records");
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        // After the acknowledgements: the checkpoint runs beside the next calls, not before them.
        if state.commits.fetch_add(1, Ordering::AcqRel) % CHECKPOINT_EVERY_COMMITS == CHECKPOINT_EVERY_COMMITS - 1 {
            maint.unpark();
        }
    }
    // Closed cleanly: everything queued is written, so there is no gap to mark.
    if let Some(rowid) = registered
        && let Err(e) = conn.execute("DELETE FROM audit_writers WHERE rowid = ?1", [rowid])
    {
        tracing::warn!(error = %e, "audit: could not note that the log was closed");
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

/// Notes in `audit_writers` that this process has a log open with records queued (done once,
/// before its first batch; the row is deleted when the log closes). `None` if that fails: the
/// records are still written, only a gap after them would not be marked.
fn register(conn: &Connection, writer: &Writer) -> Option<i64> {
    let inserted = conn.execute(
        "INSERT INTO audit_writers (pid, token, opened_ms) VALUES (?1, ?2, ?3)",
        rusqlite::params![writer.pid, writer.token, now_ms()],
    );
    match inserted {
        Ok(_) => Some(conn.last_insert_rowid()),
        Err(e) => {
            tracing::warn!(error = %e, "audit: could not note the open log (a gap after a crash would not be marked)");
            None
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &[Box<AuditRecord>], writer: &Writer) -> rusqlite::Result<()> {
    // Immediate: the chain's head is read and moved in the same transaction as the rows, and
    // another process may be appending to the same chain.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut head = chain_ends(&tx)?;
        // A completed record updates its "started" row (same id) and keeps its subject; a row
        // already in the chain is never rewritten.
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
               detail = excluded.detail, called_as = excluded.called_as
             WHERE audit.hash IS NULL
             RETURNING subject",
        )?;
        let mut chained = false;
        for r in batch {
            // The row's subject as stored (the started row's when the record has none); no row
            // when the call's row is already complete.
            let stored = stmt
                .query_row(
                    rusqlite::params![
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
                    ],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()?;
            match stored {
                None => tracing::warn!(id = %r.id, "audit: a second record for a completed call was not written"),
                Some(subject) if r.outcome != STARTED => {
                    // The row as stored is this record with that subject: no read back needed.
                    let record = AuditRecord { subject, ..AuditRecord::clone(r) };
                    link_record(&tx, &mut head, &record)?;
                    chained = true;
                }
                Some(_) => {}
            }
        }
        if chained {
            set_head(&tx, &head)?;
        }
    }
    tx.commit()
}

/// The columns of an [`AuditRecord`], in [`record_from_row`]'s order.
const RECORD_COLUMNS: &str = "id, ts_ms, user, agent, session, provider, tool, params, decision, outcome, error, \
                              duration_us, output_bytes, subject, detail, called_as";

/// An [`AuditRecord`] from the [`RECORD_COLUMNS`] starting at column `at`.
fn record_from_row(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<AuditRecord> {
    Ok(AuditRecord {
        id: row.get(at)?,
        ts_ms: row.get(at + 1)?,
        user: row.get(at + 2)?,
        agent: row.get(at + 3)?,
        session: row.get(at + 4)?,
        provider: row.get(at + 5)?,
        tool: row.get(at + 6)?,
        params: row.get(at + 7)?,
        decision: row.get(at + 8)?,
        outcome: row.get(at + 9)?,
        error: row.get(at + 10)?,
        duration_us: row.get(at + 11)?,
        output_bytes: row.get(at + 12)?,
        subject: row.get(at + 13)?,
        detail: row.get(at + 14)?,
        called_as: row.get(at + 15)?,
    })
}

/// The chain's ends (table `audit_chain`, one row).
fn chain_ends(conn: &Connection) -> rusqlite::Result<ChainEnds> {
    conn.prepare_cached("SELECT start_seq, start_hash, head_seq, head_hash FROM audit_chain WHERE id = 1")?
        .query_row([], |r| {
            Ok(ChainEnds { start_seq: r.get(0)?, start_hash: r.get(1)?, head_seq: r.get(2)?, head_hash: r.get(3)? })
        })
}

fn set_head(conn: &Connection, ends: &ChainEnds) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE audit_chain SET head_seq = ?1, head_hash = ?2 WHERE id = 1")?
        .execute(rusqlite::params![ends.head_seq, ends.head_hash])?;
    Ok(())
}

/// Puts the (completed, unchained) row `id` at the end of the chain `head`, as stored (so the
/// hash covers exactly what a reader sees). The caller stores the new head with [`set_head`].
fn append_link(conn: &Connection, head: &mut ChainEnds, id: &str) -> rusqlite::Result<()> {
    let record = conn
        .prepare_cached(&format!("SELECT {RECORD_COLUMNS} FROM audit WHERE id = ?1"))?
        .query_row([id], |r| record_from_row(r, 0))?;
    link_record(conn, head, &record)
}

/// Puts the stored row `record` at the end of the chain `head` (see [`append_link`]).
fn link_record(conn: &Connection, head: &mut ChainEnds, record: &AuditRecord) -> rusqlite::Result<()> {
    let id = &record.id;
    let seq = head.head_seq + 1;
    let hash = chain::link_hash(&head.head_hash, seq, record);
    conn.prepare_cached("UPDATE audit SET seq = ?1, prev_hash = ?2, hash = ?3 WHERE id = ?4")?
        .execute(rusqlite::params![seq, head.head_hash, hash, id])?;
    head.head_seq = seq;
    head.head_hash = hash;
    Ok(())
}

/// Runs `f` in a `BEGIN IMMEDIATE` transaction on a shared connection.
fn immediate<T>(conn: &Connection, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f(conn) {
        Ok(v) => {
            conn.execute_batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Chains the completed rows written before the chain existed, oldest first (run once, by the
/// migration that adds the chain).
pub(crate) fn adopt_unchained(conn: &Connection) -> rusqlite::Result<()> {
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM audit WHERE hash IS NULL AND outcome != ?1 ORDER BY ts_ms, rowid")?
        .query_map([STARTED], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut head = chain_ends(conn)?;
    for id in &ids {
        append_link(conn, &mut head, id)?;
    }
    set_head(conn, &head)
}

/// Retention on `conn`: see [`AuditStore::prune_audit`].
fn prune(conn: &Connection, older_than_ms: i64) -> rusqlite::Result<Option<Pruned>> {
    immediate(conn, |conn| {
        let mut ends = chain_ends(conn)?;
        let first_kept: Option<i64> =
            conn.query_row("SELECT MIN(seq) FROM audit WHERE seq IS NOT NULL AND ts_ms >= ?1", [older_than_ms], |r| {
                r.get(0)
            })?;
        let through = first_kept.map_or(ends.head_seq, |s| s - 1);
        if through < ends.start_seq {
            return Ok(None);
        }
        let start_hash: String = conn
            .query_row("SELECT hash FROM audit WHERE seq = ?1", [through], |r| r.get(0))
            .optional()?
            .unwrap_or_else(
                // The row is gone (deleted by hand): keep what the chain says, verify will tell.
                || ends.head_hash.clone(),
            );
        let rows = conn.execute("DELETE FROM audit WHERE seq IS NOT NULL AND seq <= ?1", [through])? as u64;
        ends.start_seq = through + 1;
        ends.start_hash = start_hash;
        conn.execute(
            "UPDATE audit_chain SET start_seq = ?1, start_hash = ?2 WHERE id = 1",
            rusqlite::params![ends.start_seq, ends.start_hash],
        )?;
        let pruned = Pruned {
            rows,
            through_seq: through,
            older_than_ms,
            start_seq: ends.start_seq,
            start_hash: ends.start_hash.clone(),
        };
        let record = pruned.record(now_ms());
        let writer = Writer::this_process();
        conn.execute(
            &format!("INSERT INTO audit ({RECORD_COLUMNS}, writer_pid, writer_token) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"),
            rusqlite::params![
                record.id, record.ts_ms, record.user, record.agent, record.session, record.provider, record.tool,
                record.params, record.decision, record.outcome, record.error, record.duration_us,
                record.output_bytes, record.subject, record.detail, record.called_as, writer.pid, writer.token
            ],
        )?;
        append_link(conn, &mut ends, &record.id)?;
        set_head(conn, &ends)?;
        Ok(Some(pruned))
    })
}

/// Whether the process that wrote a row (its pid and start token, as [`Writer`] records them)
/// still runs. Rows from before writers were recorded count as dead.
pub(crate) fn writer_alive(pid: Option<i64>, token: Option<&str>) -> bool {
    match (pid.and_then(|p| u32::try_from(p).ok()), token) {
        (Some(pid), Some(token)) => start_token(pid).as_deref() == Some(token),
        _ => false,
    }
}

/// Marks the "started" rows of writers that are no longer running as "interrupted", and where
/// a dead writer's rows end with a [`GAP_EVENT`] row (see [`mark_gaps`]).
pub(crate) fn close_interrupted(conn: &Connection) -> rusqlite::Result<usize> {
    let closed = close_started(conn)?;
    mark_gaps(conn)?;
    Ok(closed)
}

/// Appends a [`GAP_EVENT`] row for each audit log whose process ended without closing it: its
/// last batch window of records (queued, not yet written: [`LINGER`]) may be lost. The row
/// takes the time of the dead process's last row, so `toolgate audit` lists it right there.
fn mark_gaps(conn: &Connection) -> rusqlite::Result<()> {
    let open: Vec<(i64, i64, Option<String>, i64)> = conn
        .prepare_cached("SELECT rowid, pid, token, opened_ms FROM audit_writers")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    for (rowid, pid, token, opened_ms) in open {
        if writer_alive(Some(pid), token.as_deref()) {
            continue;
        }
        immediate(conn, |conn| {
            // Another process may have marked it meanwhile.
            if conn.execute("DELETE FROM audit_writers WHERE rowid = ?1", [rowid])? == 0 {
                return Ok(());
            }
            let last: Option<i64> = conn
                .prepare_cached("SELECT MAX(ts_ms) FROM audit WHERE writer_pid IS ?1 AND writer_token IS ?2")?
                .query_row(rusqlite::params![pid, token], |r| r.get(0))?;
            let id = format!("audit-gap-{pid}-{opened_ms}-{rowid}");
            let error = format!(
                "toolgate (pid {pid}) ended here without closing its audit log (killed, crashed or out of memory): \
                 calls it answered in the last {} ms before it ended (the audit writer's batch window) may have no \
                 row; calls that were not read-only and ran have their \"started\" row at least",
                LINGER.as_millis()
            );
            conn.execute(
                "INSERT INTO audit (id, ts_ms, user, agent, session, tool, params, decision, outcome, error,
                                    duration_us, output_bytes, writer_pid, writer_token)
                 VALUES (?1, ?2, '', 'toolgate', '', ?3, '{}', 'audit: the log was not closed', ?4, ?5, 0, 0, ?6, ?7)",
                rusqlite::params![id, last.unwrap_or(opened_ms), GAP_EVENT, GAP, error, pid, token],
            )?;
            let mut head = chain_ends(conn)?;
            append_link(conn, &mut head, &id)?;
            set_head(conn, &head)
        })?;
    }
    Ok(())
}

fn close_started(conn: &Connection) -> rusqlite::Result<usize> {
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
        // The rows become completed: they join the chain in the same transaction.
        closed += immediate(conn, |conn| {
            let ids: Vec<String> = conn
                .prepare_cached(
                    "SELECT id FROM audit WHERE outcome = ?1 AND writer_pid IS ?2 AND writer_token IS ?3
                     ORDER BY ts_ms, rowid",
                )?
                .query_map(rusqlite::params![STARTED, pid, token], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut head = chain_ends(conn)?;
            for id in &ids {
                conn.execute(
                    "UPDATE audit SET outcome = ?1, error = ?2 WHERE id = ?3 AND outcome = ?4",
                    rusqlite::params![INTERRUPTED, error, id, STARTED],
                )?;
                append_link(conn, &mut head, id)?;
            }
            set_head(conn, &head)?;
            Ok(ids.len())
        })?;
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
    fn a_log_its_process_never_closed_leaves_a_gap_row_after_its_last_row() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::open(&db).unwrap();
        log.record(record(1));
        log.record(record(2));
        drop(log);
        let store = Store::open(&db).unwrap();
        store.close_interrupted_calls().unwrap();
        assert!(store.audit_tail(10).unwrap().iter().all(|r| r.tool != GAP_EVENT), "closed cleanly: no gap");
        // What a kill -9 leaves: the dead process's row in `audit_writers` (a pid that no longer
        // exists), and its rows.
        let conn = Connection::open(&db).unwrap();
        conn.execute("UPDATE audit SET writer_pid = 2147483000, writer_token = 'x'", []).unwrap();
        conn.execute("INSERT INTO audit_writers (pid, token, opened_ms) VALUES (2147483000, 'x', 0)", []).unwrap();
        drop(conn);
        // Another log open meanwhile: a live process, whose gap it is not.
        let live = AuditLog::open(&db).unwrap();
        live.record(record(3));
        live.flush();
        let rows = store.audit_tail(10).unwrap();
        let tools: Vec<&str> = rows.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(tools, ["echo", "echo", GAP_EVENT, "echo"], "{rows:#?}");
        let gap = &rows[2];
        assert_eq!((gap.outcome.as_str(), gap.ts_ms), (GAP, 2), "at the dead process's last row: {gap:#?}");
        assert!(gap.error.as_deref().unwrap().contains("pid 2147483000"), "{gap:#?}");
        assert!(gap.error.as_deref().unwrap().contains("last 5 ms"), "{gap:#?}");
        // Marked once, in the chain, and not again by the next look.
        assert_eq!(store.close_interrupted_calls().unwrap(), 0);
        drop(live);
        let rows = store.audit_tail(10).unwrap();
        assert_eq!(rows.iter().filter(|r| r.tool == GAP_EVENT).count(), 1, "{rows:#?}");
        assert!(store.verify_audit_chain().unwrap().ok());
    }

    /// `toolgate call`'s log: each row is in the database when `record` returns, through the
    /// store's own connection, and the chain verifies.
    #[test]
    fn a_direct_log_writes_each_row_before_record_returns() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::direct(Arc::new(Store::open(&db).unwrap()), AuditOptions::default()).unwrap();
        let other = Store::open(&db).unwrap();
        log.record_started(AuditRecord { outcome: STARTED.into(), subject: Some("echo".into()), ..record(1) });
        assert_eq!(other.audit_tail(5).unwrap()[0].outcome, STARTED);
        log.record(AuditRecord { duration_us: 7, ..record(1) });
        log.record(record(2));
        // No flush: nothing is queued.
        let rows = other.audit_tail(5).unwrap();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!((rows[0].outcome.as_str(), rows[0].subject.as_deref()), ("ok", Some("echo")), "completed in place");
        // A completed row is final here too.
        log.record(AuditRecord { outcome: "error".into(), ..record(2) });
        assert_eq!(other.audit_tail(5).unwrap()[1].outcome, "ok");
        let report = log.verify_chain().unwrap();
        assert!(report.ok() && report.rows == 2, "{report:?}");
        drop(log);
        assert_eq!(other.audit_count().unwrap(), 2);
    }

    /// What the background log's threads do first, a direct log does when it opens: a dead
    /// process's "started" rows are closed and retention applies.
    #[test]
    fn a_direct_log_closes_dead_rows_and_prunes_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let log = AuditLog::open(&db).unwrap();
        let now = now_ms();
        log.record(record(1));
        log.record_started(AuditRecord { outcome: STARTED.into(), ts_ms: now, ..record(2) });
        drop(log);
        let conn = Connection::open(&db).unwrap();
        conn.execute("UPDATE audit SET writer_pid = 2147483000 WHERE id = 'call-2'", []).unwrap();
        drop(conn);
        let store = Arc::new(Store::open(&db).unwrap());
        let log = AuditLog::direct(store, AuditOptions { retention_days: Some(1) }).unwrap();
        let rows = log.audit_tail(10).unwrap();
        let row = |id: &str| rows.iter().find(|r| r.id == id);
        assert!(row("call-1").is_none(), "pruned (ts 1 ms): {rows:?}");
        assert_eq!(row("call-2").map(|r| r.outcome.as_str()), Some(INTERRUPTED), "{rows:?}");
        assert!(rows.iter().any(|r| r.tool == PRUNE_EVENT && r.ts_ms >= now), "{rows:?}");
        assert!(log.verify_chain().unwrap().ok());
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
