//! The audit log in PostgreSQL ([`PgAuditLog`]): every node of a workspace appends to one hash
//! chain, the same chain as SQLite's (`toolgate_store::chain`), kept per workspace.
//!
//! Writing is off the call path, as in SQLite: `record` queues, a thread of the log's own
//! gathers what is queued into one transaction and sends the rows with `COPY ... BINARY`. The
//! transaction locks the workspace's chain row (`FOR UPDATE`), so nodes appending at once take
//! turns and the chain has no fork.
//!
//! **Nothing is lost when the database goes away.** A batch that fails because of the
//! connection (the server restarting, a network cut) is kept and tried again until it is
//! written; records go on queueing meanwhile, up to a bound (65,536), past which `record`
//! waits. A call that is not read-only waits for its "started" row to be written before it runs
//! ([`AuditStore::record_started`]): while the database is down such calls wait rather than run
//! unaudited. Those waits leave the tokio worker they happen on (`block_in_place`), so a node
//! keeps answering `/healthz` and `/readyz` (which says the store is gone) meanwhile.
//!
//! **A node that dies** leaves its log's heartbeat row (`audit_writers`, beaten every 5 s with
//! the database's clock, so clocks that differ between nodes do not matter). Any node that
//! opens the log, and `toolgate audit`, closes the rows of a log not heard from for a minute:
//! its calls still "started" become "interrupted" and a gap row marks where it ended, as on
//! one node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use toolgate_store::chain::{self, ChainRow};
use toolgate_store::{
    AuditOptions, AuditRecord, AuditStore, ChainEnds, ChainReport, GAP, GAP_EVENT, GENESIS, INTERRUPTED, Pruned,
    STARTED, SessionCalls, SessionQuery, StoreError, TEXT_EVENT,
};

use crate::PgStore;
use crate::error::PgError;

/// Records queued at most; past it `record` waits for the writer (back-pressure).
const QUEUE: usize = 65_536;
/// How long the writer waits after a record for more to commit in the same transaction.
const LINGER: Duration = Duration::from_millis(5);
/// Records in one transaction at most.
const BATCH: usize = 4096;
/// How often an open log tells the database it is alive.
const BEAT: Duration = Duration::from_secs(5);
/// A log not heard from for this long belongs to a node that died (twelve missed beats: a
/// node cut off from the database for a moment is not taken for dead).
const DEAD_AFTER: Duration = Duration::from_secs(60);
/// The first wait before a failed batch is tried again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How often retention runs after the first time (at open).
const RETENTION_EVERY: Duration = Duration::from_secs(3600);
/// Rows `verify_chain` reads per query (it never holds the whole log).
const VERIFY_PAGE: i64 = 10_000;

/// The columns of an [`AuditRecord`], in [`record_from_row`]'s order.
const RECORD_COLUMNS: &str = "id, ts_ms, member, agent, session, provider, tool, params, decision, outcome, error, \
                              duration_us, output_bytes, subject, detail, called_as";

/// The database's clock in ms: heartbeats and their age are read on one clock.
const DB_NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// How an open log's timing is set (shortened by the tests).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) beat: Duration,
    pub(crate) dead_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing { beat: BEAT, dead_after: DEAD_AFTER }
    }
}

enum Message {
    Record(Box<AuditRecord>),
    Flush(SyncSender<()>),
}

/// The audit log of one workspace in PostgreSQL (see the module's docs). Reads see the rows of
/// every node; dropping the log writes everything queued before it returns.
#[derive(Debug)]
pub struct PgAuditLog {
    store: PgStore,
    /// The chain's key: the workspace, as every node names it.
    workspace: Arc<str>,
    writer: Option<Writer>,
    timing: Timing,
}

/// The writing half: the queue and the thread that empties it.
#[derive(Debug)]
struct Writer {
    tx: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<()>>,
    /// A flush is queued: the writer does not linger.
    flush_queued: Arc<AtomicBool>,
    /// Records sent and not yet written (or given up).
    queued: Arc<AtomicU64>,
}

impl PgAuditLog {
    /// Opens `workspace`'s log (the name every node gives the workspace: its path on the shared
    /// filesystem) and starts its writer, which first closes the rows of logs whose node died
    /// and applies `options`' retention.
    pub fn open(store: &PgStore, workspace: &str, options: AuditOptions) -> Result<PgAuditLog, StoreError> {
        PgAuditLog::open_timed(store, workspace, options, Timing::default())
    }

    pub(crate) fn open_timed(
        store: &PgStore,
        workspace: &str,
        options: AuditOptions,
        timing: Timing,
    ) -> Result<PgAuditLog, StoreError> {
        let mut log = PgAuditLog::reader_timed(store, workspace, timing)?;
        let ws = Arc::clone(&log.workspace);
        store.run("opening the audit log", move |client| async move { ensure_chain(&client, &ws).await })?;
        let (tx, rx) = sync_channel(QUEUE);
        let flush_queued = Arc::new(AtomicBool::new(false));
        let queued = Arc::new(AtomicU64::new(0));
        let task = WriteTask {
            queued: Arc::clone(&queued),
            store: store.clone(),
            workspace: Arc::clone(&log.workspace),
            id: writer_id(),
            timing,
            options,
            flush_queued: Arc::clone(&flush_queued),
        };
        let thread = std::thread::Builder::new()
            .name("toolgate-audit-pg".into())
            .spawn(move || task.run(rx))
            .map_err(|e| StoreError::Backend { doing: "starting the audit writer", source: Box::new(e) })?;
        log.writer = Some(Writer { tx: Some(tx), thread: Some(thread), flush_queued, queued });
        Ok(log)
    }

    /// `workspace`'s log for reading (`toolgate audit`): no writer thread.
    pub fn reader(store: &PgStore, workspace: &str) -> Result<PgAuditLog, StoreError> {
        PgAuditLog::reader_timed(store, workspace, Timing::default())
    }

    fn reader_timed(store: &PgStore, workspace: &str, timing: Timing) -> Result<PgAuditLog, StoreError> {
        Ok(PgAuditLog { store: store.clone(), workspace: Arc::from(workspace), writer: None, timing })
    }

    /// Copies a whole log (another store's, [`toolgate_store::Store::audit_export`]) into this
    /// workspace's, which must be empty: the rows with their chain columns as they are and the
    /// chain's ends, in one transaction (all or nothing), so the copy verifies and ends at the
    /// same head hash. Returns how many rows were copied.
    pub fn import(&self, ends: &ChainEnds, rows: Vec<ChainRow>) -> Result<u64, StoreError> {
        let (ws, ends) = (Arc::clone(&self.workspace), ends.clone());
        self.store.run("copying the audit log", move |mut client| async move {
            let tx = client.transaction().await?;
            let here = chain_ends(&tx, &ws, true).await?;
            let held: i64 =
                tx.query_one("SELECT count(*) FROM audit WHERE workspace = $1", &[&&*ws]).await?.try_get(0)?;
            if held > 0 || here.head_seq != 0 {
                return Err(PgError::Data(format!(
                    "the shared audit log of {ws} already has {held} rows: the copy goes into an empty log only"
                )));
            }
            let sink = tx.copy_in(COPY_IN).await?;
            let copy = BinaryCopyInWriter::new(sink, &COPY_TYPES);
            tokio::pin!(copy);
            for ChainRow { seq, prev_hash, hash, record } in &rows {
                copy_row(copy.as_mut(), &ws, record, None, (*seq, prev_hash.as_deref(), hash.as_deref())).await?;
            }
            let copied = copy.finish().await?;
            tx.execute(
                "UPDATE audit_chains SET start_seq = $2, start_hash = $3, head_seq = $4, head_hash = $5
                 WHERE workspace = $1",
                &[&&*ws, &ends.start_seq, &ends.start_hash, &ends.head_seq, &ends.head_hash],
            )
            .await?;
            tx.commit().await?;
            Ok(copied)
        })
    }

    /// The workspace this log keeps.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }

    fn send(&self, message: Message) -> bool {
        let Some(tx) = self.writer.as_ref().and_then(|w| w.tx.as_ref()) else { return false };
        match tx.try_send(message) {
            Ok(()) => true,
            // The queue is full (the database is down or slow): wait for room.
            Err(TrySendError::Full(message)) => off_the_runtime(|| tx.send(message).is_ok()),
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// Runs `wait` (a blocking wait on the writer) so that it does not hold up a multi-thread tokio
/// runtime's other tasks; outside one, or on a current-thread runtime, it just runs.
fn off_the_runtime<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

impl AuditStore for PgAuditLog {
    fn record(&self, record: AuditRecord) {
        if let Some(writer) = &self.writer {
            writer.queued.fetch_add(1, Ordering::Relaxed);
        }
        if !self.send(Message::Record(Box::new(record))) {
            tracing::error!("audit: the log's writer has stopped; a record was not written");
        }
    }

    fn record_started(&self, record: AuditRecord) {
        self.record(record);
        self.flush();
    }

    fn flush(&self) {
        let Some(writer) = &self.writer else { return };
        let (ack_tx, ack_rx) = sync_channel(1);
        writer.flush_queued.store(true, Ordering::Release);
        if self.send(Message::Flush(ack_tx)) {
            if let Some(thread) = &writer.thread {
                thread.thread().unpark();
            }
            off_the_runtime(|| ack_rx.recv().ok());
        }
    }

    fn audit_tail(&self, n: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let ws = Arc::clone(&self.workspace);
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.store.run("reading the audit log", move |client| async move {
            let rows = client
                .query(
                    &format!(
                        "SELECT {RECORD_COLUMNS} FROM audit WHERE workspace = $1 ORDER BY ts_ms DESC, pos DESC LIMIT $2"
                    ),
                    &[&&*ws, &n],
                )
                .await?;
            let mut out = rows.iter().map(|r| record_from_row(r, 0)).collect::<Result<Vec<_>, _>>()?;
            out.reverse();
            Ok(out)
        })
    }

    fn audit_count(&self) -> Result<u64, StoreError> {
        let ws = Arc::clone(&self.workspace);
        self.store.run("counting audit records", move |client| async move {
            let n: i64 =
                client.query_one("SELECT count(*) FROM audit WHERE workspace = $1", &[&&*ws]).await?.try_get(0)?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn close_interrupted_calls(&self) -> Result<usize, StoreError> {
        let ws = Arc::clone(&self.workspace);
        let dead_after = self.timing.dead_after;
        self.store.run("closing interrupted audit rows", move |mut client| async move {
            close_interrupted(&mut client, &ws, dead_after).await
        })
    }

    fn audit_sessions(&self, q: &SessionQuery<'_>) -> Result<Vec<SessionCalls>, StoreError> {
        self.flush();
        let ws = Arc::clone(&self.workspace);
        // `prefix` is a literal: `%` and `_` in it match themselves.
        let like = format!("{}%", q.prefix.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        let (user, session, since, limit) =
            (q.user.to_owned(), q.session.map(str::to_owned), q.since_ms, i64::try_from(q.limit).unwrap_or(i64::MAX));
        self.store.run("reading the audit log", move |client| async move {
            let rows = client
                .query(
                    "SELECT session,
                            (SELECT agent FROM audit b WHERE b.workspace = a.workspace AND b.session = a.session
                             ORDER BY ts_ms DESC, pos DESC LIMIT 1),
                            count(*), min(ts_ms), max(ts_ms)
                     FROM audit a
                     WHERE workspace = $1 AND member = $2 AND ts_ms >= $3 AND tool <> $4
                       AND (CASE WHEN $5::text IS NULL THEN session LIKE $6 ELSE session = $5 END)
                     GROUP BY workspace, session ORDER BY max(ts_ms) DESC LIMIT $7",
                    &[&&*ws, &user, &since, &TEXT_EVENT, &session, &like, &limit],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(SessionCalls {
                        session: r.try_get(0)?,
                        agent: r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                        calls: u64::try_from(r.try_get::<_, i64>(2)?).unwrap_or(0),
                        first_ms: r.try_get(3)?,
                        last_ms: r.try_get(4)?,
                    })
                })
                .collect()
        })
    }

    fn verify_chain(&self) -> Result<ChainReport, StoreError> {
        self.flush();
        let ws = Arc::clone(&self.workspace);
        let ends = self
            .store
            .run("reading the audit chain", move |client| async move { chain_ends(&client, &ws, false).await })?;
        // Page by page, each a query of its own: rows at positions up to the head read above
        // do not change (appends go after it; only retention deletes, from the start).
        let failed: Arc<Mutex<Option<StoreError>>> = Arc::default();
        let pages = ChainPages {
            store: self.store.clone(),
            workspace: Arc::clone(&self.workspace),
            after: ends.start_seq - 1,
            through: ends.head_seq,
            page: Vec::new().into_iter(),
            unchained_read: false,
            failed: Arc::clone(&failed),
        };
        let report = chain::verify(&ends, pages);
        match failed.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    fn queued(&self) -> Option<u64> {
        self.writer.as_ref().map(|w| w.queued.load(Ordering::Relaxed))
    }

    fn prune_audit(&self, older_than_ms: i64) -> Result<Option<Pruned>, StoreError> {
        self.flush();
        let ws = Arc::clone(&self.workspace);
        self.store
            .run("pruning the audit log", move |mut client| async move { prune(&mut client, &ws, older_than_ms).await })
    }
}

impl Drop for PgAuditLog {
    fn drop(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            drop(writer.tx.take());
            writer.flush_queued.store(true, Ordering::Release);
            if let Some(thread) = writer.thread.take() {
                thread.thread().unpark();
                let _ = off_the_runtime(|| thread.join());
            }
        }
    }
}

/// The chained rows from `after + 1` to `through`, then the completed rows outside the chain
/// (added by hand), read a page at a time; a failed read ends the rows and is kept in `failed`.
struct ChainPages {
    store: PgStore,
    workspace: Arc<str>,
    after: i64,
    through: i64,
    page: std::vec::IntoIter<ChainRow>,
    unchained_read: bool,
    failed: Arc<Mutex<Option<StoreError>>>,
}

impl ChainPages {
    fn next_page(&mut self) -> Result<Vec<ChainRow>, StoreError> {
        let ws = Arc::clone(&self.workspace);
        let (after, through) = (self.after, self.through);
        if after < through {
            return self.store.run("reading the audit chain", move |client| async move {
                let rows = client
                    .query(
                        &format!(
                            "SELECT seq, prev_hash, hash, {RECORD_COLUMNS} FROM audit
                             WHERE workspace = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4"
                        ),
                        &[&&*ws, &after, &through, &VERIFY_PAGE],
                    )
                    .await?;
                rows.iter().map(chain_row).collect()
            });
        }
        if self.unchained_read {
            return Ok(Vec::new());
        }
        self.unchained_read = true;
        self.store.run("reading the audit chain", move |client| async move {
            let rows = client
                .query(
                    &format!(
                        "SELECT seq, prev_hash, hash, {RECORD_COLUMNS} FROM audit
                         WHERE workspace = $1 AND seq IS NULL AND (outcome <> $2 OR hash IS NOT NULL)
                         ORDER BY ts_ms, pos"
                    ),
                    &[&&*ws, &STARTED],
                )
                .await?;
            rows.iter().map(chain_row).collect()
        })
    }
}

impl Iterator for ChainPages {
    type Item = ChainRow;

    fn next(&mut self) -> Option<ChainRow> {
        loop {
            if let Some(row) = self.page.next() {
                return Some(row);
            }
            match self.next_page() {
                Ok(rows) if rows.is_empty() => {
                    // Positions up to the head that a page did not return are missing rows:
                    // `verify` names them; stop asking for them.
                    if self.after < self.through {
                        self.after = self.through;
                        continue;
                    }
                    return None;
                }
                Ok(rows) => {
                    if let Some(last) = rows.last().and_then(|r| r.seq) {
                        self.after = self.after.max(last);
                    }
                    self.page = rows.into_iter();
                }
                Err(e) => {
                    *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    return None;
                }
            }
        }
    }
}

fn chain_row(r: &tokio_postgres::Row) -> Result<ChainRow, PgError> {
    Ok(ChainRow { seq: r.try_get(0)?, prev_hash: r.try_get(1)?, hash: r.try_get(2)?, record: record_from_row(r, 3)? })
}

/// An [`AuditRecord`] from the [`RECORD_COLUMNS`] starting at column `at`.
fn record_from_row(r: &tokio_postgres::Row, at: usize) -> Result<AuditRecord, PgError> {
    Ok(AuditRecord {
        id: r.try_get(at)?,
        ts_ms: r.try_get(at + 1)?,
        user: r.try_get(at + 2)?,
        agent: r.try_get(at + 3)?,
        session: r.try_get(at + 4)?,
        provider: r.try_get(at + 5)?,
        tool: r.try_get(at + 6)?,
        params: r.try_get(at + 7)?,
        decision: r.try_get(at + 8)?,
        outcome: r.try_get(at + 9)?,
        error: r.try_get(at + 10)?,
        duration_us: r.try_get(at + 11)?,
        output_bytes: r.try_get(at + 12)?,
        subject: r.try_get(at + 13)?,
        detail: r.try_get(at + 14)?,
        called_as: r.try_get(at + 15)?,
    })
}

/// What the writer thread owns.
struct WriteTask {
    store: PgStore,
    workspace: Arc<str>,
    /// This log's name in `audit_writers` and on its rows.
    id: Arc<str>,
    timing: Timing,
    options: AuditOptions,
    flush_queued: Arc<AtomicBool>,
    queued: Arc<AtomicU64>,
}

impl WriteTask {
    fn run(self, rx: Receiver<Message>) {
        // Off the opener's path: rows of logs whose node died become "interrupted".
        match self.store.try_run({
            let ws = Arc::clone(&self.workspace);
            let dead_after = self.timing.dead_after;
            move |mut client| async move { close_interrupted(&mut client, &ws, dead_after).await }
        }) {
            Ok(0) => {}
            Ok(n) => tracing::warn!(rows = n, "audit: closed calls left running by a node that died as interrupted"),
            Err(e) => tracing::error!(error = %e, "audit: could not close interrupted rows"),
        }
        let mut retention_due = Instant::now();
        let mut registered = false;
        let mut last_beat = Instant::now();
        let mut batch: Vec<Box<AuditRecord>> = Vec::with_capacity(256);
        let mut acks: Vec<SyncSender<()>> = Vec::new();
        loop {
            self.retention(&mut retention_due);
            let first = match rx.recv_timeout(self.timing.beat) {
                Ok(first) => first,
                Err(RecvTimeoutError::Timeout) => {
                    if registered {
                        self.beat(&mut last_beat);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if matches!(first, Message::Record(_)) {
                self.linger();
            }
            let mut next = Some(first);
            while let Some(message) = next.take() {
                match message {
                    Message::Record(r) => batch.push(r),
                    Message::Flush(ack) => acks.push(ack),
                }
                if batch.len() >= BATCH {
                    break;
                }
                next = rx.try_recv().ok();
            }
            if !batch.is_empty() {
                self.write(&batch, &mut registered);
                self.queued.fetch_sub(batch.len() as u64, Ordering::Relaxed);
                batch.clear();
                last_beat = Instant::now();
            }
            for ack in acks.drain(..) {
                let _ = ack.send(());
            }
            if registered && last_beat.elapsed() >= self.timing.beat {
                self.beat(&mut last_beat);
            }
        }
        // Closed cleanly: everything queued is written, so there is no gap to mark.
        if registered {
            let (id, ws) = (Arc::clone(&self.id), Arc::clone(&self.workspace));
            let removed = self.store.try_run(move |client| async move {
                client
                    .execute("DELETE FROM audit_writers WHERE writer = $1 AND workspace = $2", &[&&*id, &&*ws])
                    .await?;
                Ok(())
            });
            if let Err(e) = removed {
                tracing::warn!(error = %e, "audit: could not note that the log was closed");
            }
        }
    }

    /// Lets a burst of calls gather into one transaction; a flush or the log's end cuts it short.
    fn linger(&self) {
        let until = Instant::now() + LINGER;
        loop {
            let now = Instant::now();
            if self.flush_queued.swap(false, Ordering::AcqRel) || now >= until {
                return;
            }
            std::thread::park_timeout(until - now);
        }
    }

    /// Writes `batch`, trying again for as long as the failure is the connection's: records
    /// are never dropped because the database is away. A statement the database refuses (a
    /// bug, a damaged table) is logged and the batch dropped, as SQLite's writer does.
    fn write(&self, batch: &[Box<AuditRecord>], registered: &mut bool) {
        let batch: Arc<Vec<AuditRecord>> = Arc::new(batch.iter().map(|r| AuditRecord::clone(r)).collect());
        let mut wait = RETRY_FIRST;
        let mut retry = false;
        let failing_since = Instant::now();
        loop {
            let (ws, id, rows, register) =
                (Arc::clone(&self.workspace), Arc::clone(&self.id), Arc::clone(&batch), !*registered);
            let written = self.store.try_run(move |mut client| async move {
                write_batch(&mut client, &ws, &id, &rows, register, retry).await
            });
            match written {
                Ok(()) => {
                    if retry {
                        tracing::info!(
                            records = batch.len(),
                            after_ms = failing_since.elapsed().as_millis() as u64,
                            "audit: the database is back; the records kept meanwhile are written"
                        );
                    }
                    *registered = true;
                    return;
                }
                Err(e) if e.is_transient() => {
                    if !retry {
                        tracing::warn!(
                            error = %e,
                            records = batch.len(),
                            "audit: cannot reach the database; the records are kept and tried again \
                             (calls that are not read-only wait meanwhile)"
                        );
                    }
                    retry = true;
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(RETRY_MAX);
                }
                Err(e) => {
                    tracing::error!(error = %e, records = batch.len(), "could not write audit records");
                    return;
                }
            }
        }
    }

    fn beat(&self, last_beat: &mut Instant) {
        *last_beat = Instant::now();
        let (ws, id) = (Arc::clone(&self.workspace), Arc::clone(&self.id));
        let beaten = self.store.try_run(move |client| async move { register(&client, &ws, &id).await });
        if let Err(e) = beaten {
            tracing::debug!(error = %e, "audit: heartbeat not written (tried again in a few seconds)");
        }
    }

    fn retention(&self, due: &mut Instant) {
        let Some(days) = self.options.retention_days else { return };
        if Instant::now() < *due {
            return;
        }
        *due = Instant::now() + RETENTION_EVERY;
        let cutoff = now_ms() - i64::from(days) * 86_400_000;
        let ws = Arc::clone(&self.workspace);
        match self.store.try_run(move |mut client| async move { prune(&mut client, &ws, cutoff).await }) {
            Ok(Some(p)) => tracing::info!(rows = p.rows, days, "audit: retention pruned the oldest rows"),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "audit: retention could not prune old rows"),
        }
    }
}

/// A name for one open log, unique across nodes: the host, the process and a counter.
fn writer_id() -> Arc<str> {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    Arc::from(format!("{}:{}:{nanos:x}:{n}", node_name(), std::process::id()))
}

/// This machine's name (read once), as the rows of a node that died name it and as a running
/// agent session records its host (`sessions.rs`).
pub(crate) fn node_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown-host".to_owned())
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Notes (or renews) the open log `writer` with the database's time.
async fn register(client: &impl deadpool_postgres::GenericClient, ws: &str, writer: &str) -> Result<(), PgError> {
    let pid = i64::from(std::process::id());
    client
        .execute(
            &format!(
                "INSERT INTO audit_writers (writer, workspace, node, pid, opened_ms, beat_ms)
                 VALUES ($1, $2, $3, $4, {DB_NOW_MS}, {DB_NOW_MS})
                 ON CONFLICT (writer) DO UPDATE SET beat_ms = excluded.beat_ms"
            ),
            &[&writer, &ws, &node_name(), &pid],
        )
        .await?;
    Ok(())
}

/// Makes `ws`'s chain row if it has none (an empty chain).
async fn ensure_chain(client: &impl deadpool_postgres::GenericClient, ws: &str) -> Result<(), PgError> {
    client
        .execute(
            "INSERT INTO audit_chains (workspace, start_seq, start_hash, head_seq, head_hash)
             VALUES ($1, 1, $2, 0, $2) ON CONFLICT (workspace) DO NOTHING",
            &[&ws, &GENESIS],
        )
        .await?;
    Ok(())
}

/// `ws`'s chain ends; `lock`: held for the transaction `client` is in (appenders take turns),
/// the row made first if the workspace has none.
async fn chain_ends(
    client: &impl deadpool_postgres::GenericClient,
    ws: &str,
    lock: bool,
) -> Result<ChainEnds, PgError> {
    let sql = if lock {
        "SELECT start_seq, start_hash, head_seq, head_hash FROM audit_chains WHERE workspace = $1 FOR UPDATE"
    } else {
        "SELECT start_seq, start_hash, head_seq, head_hash FROM audit_chains WHERE workspace = $1"
    };
    let row = match client.query_opt(sql, &[&ws]).await? {
        Some(row) => row,
        // A reader of a workspace nobody wrote to sees an empty chain, and writes nothing.
        None if !lock => {
            return Ok(ChainEnds { start_seq: 1, start_hash: GENESIS.into(), head_seq: 0, head_hash: GENESIS.into() });
        }
        None => {
            ensure_chain(client, ws).await?;
            client.query_one(sql, &[&ws]).await?
        }
    };
    Ok(ChainEnds {
        start_seq: row.try_get(0)?,
        start_hash: row.try_get(1)?,
        head_seq: row.try_get(2)?,
        head_hash: row.try_get(3)?,
    })
}

async fn set_head(client: &impl deadpool_postgres::GenericClient, ws: &str, ends: &ChainEnds) -> Result<(), PgError> {
    client
        .execute(
            "UPDATE audit_chains SET head_seq = $2, head_hash = $3 WHERE workspace = $1",
            &[&ws, &ends.head_seq, &ends.head_hash],
        )
        .await?;
    Ok(())
}

/// A row about to be copied in: the record as stored, and its place in the chain.
struct Row {
    record: AuditRecord,
    link: Option<(i64, String, String)>,
}

/// Column types of the `COPY`, in [`COPY_IN`]'s order.
const COPY_TYPES: [Type; 21] = [
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
];
/// Every column of a row as written, in [`row_values`]' order.
macro_rules! row_columns {
    () => {
        "workspace, id, ts_ms, member, agent, session, provider, tool, params, decision, outcome, error, \
         duration_us, output_bytes, subject, detail, called_as, writer, seq, prev_hash, hash"
    };
}
const COPY_IN: &str = concat!("COPY audit (", row_columns!(), ") FROM STDIN BINARY");

/// The values of one row of `ws`, in `row_columns!`' order: the record, the log that wrote it,
/// and its place in the chain (none while it is running).
fn row_values<'a>(
    ws: &'a &'a str,
    r: &'a AuditRecord,
    writer: &'a Option<&'a str>,
    (seq, prev, hash): &'a (Option<i64>, Option<&'a str>, Option<&'a str>),
) -> [&'a (dyn ToSql + Sync); 21] {
    [
        ws,
        &r.id,
        &r.ts_ms,
        &r.user,
        &r.agent,
        &r.session,
        &r.provider,
        &r.tool,
        &r.params,
        &r.decision,
        &r.outcome,
        &r.error,
        &r.duration_us,
        &r.output_bytes,
        &r.subject,
        &r.detail,
        &r.called_as,
        writer,
        seq,
        prev,
        hash,
    ]
}

/// Sends one row to a `COPY` ([`COPY_IN`]); see [`row_values`].
async fn copy_row(
    copy: std::pin::Pin<&mut BinaryCopyInWriter>,
    ws: &str,
    r: &AuditRecord,
    writer: Option<&str>,
    link: (Option<i64>, Option<&str>, Option<&str>),
) -> Result<(), PgError> {
    copy.write(&row_values(&ws, r, &writer, &link)).await?;
    Ok(())
}

/// Writes one batch in one transaction (see [`AuditStore::record`] for what a record with the
/// id of a "started" row does). `retry`: the batch may have been committed already by an
/// attempt whose answer was lost, so rows found written are the batch's own, not duplicates.
async fn write_batch(
    client: &mut Object,
    ws: &str,
    writer: &str,
    batch: &[AuditRecord],
    register_writer: bool,
    retry: bool,
) -> Result<(), PgError> {
    let tx = client.transaction().await?;
    if register_writer {
        register(&tx, ws, writer).await?;
    }
    let ids: Vec<&str> = batch.iter().map(|r| r.id.as_str()).collect();
    // The chain's head, locked, and what is stored of these calls already, in one round trip.
    let (mut head, stored) = tokio::try_join!(chain_ends(&tx, ws, true), async {
        tx.query("SELECT id, subject, hash IS NOT NULL FROM audit WHERE workspace = $1 AND id = ANY($2)", &[&ws, &ids])
            .await
            .map_err(PgError::from)
    })?;
    let mut stored: HashMap<String, (Option<String>, bool)> = stored
        .iter()
        .map(|r| Ok((r.try_get::<_, String>(0)?, (r.try_get(1)?, r.try_get(2)?))))
        .collect::<Result<_, PgError>>()?;
    let mut rows: Vec<Row> = Vec::with_capacity(batch.len());
    let mut in_batch: HashMap<&str, usize> = HashMap::new();
    let mut replaced: Vec<&str> = Vec::new();
    for r in batch {
        if let Some(&at) = in_batch.get(r.id.as_str()) {
            // Started and completed in the same batch: one row, the completed one.
            let earlier = &mut rows[at].record;
            if earlier.outcome == STARTED && r.outcome != STARTED {
                let subject = r.subject.clone().or_else(|| earlier.subject.take());
                *earlier = AuditRecord { subject, ..r.clone() };
            } else {
                tracing::warn!(id = %r.id, "audit: a second record for a completed call was not written");
            }
            continue;
        }
        let record = match stored.remove(&r.id) {
            Some((_, true)) => {
                if !retry {
                    tracing::warn!(id = %r.id, "audit: a second record for a completed call was not written");
                }
                continue;
            }
            // Its "started" row is there already (an earlier attempt of this batch wrote it).
            Some(_) if r.outcome == STARTED => continue,
            Some((subject, false)) => {
                replaced.push(&r.id);
                AuditRecord { subject: r.subject.clone().or(subject), ..r.clone() }
            }
            None => r.clone(),
        };
        in_batch.insert(&r.id, rows.len());
        rows.push(Row { record, link: None });
    }
    let mut chained = false;
    for row in &mut rows {
        if row.record.outcome != STARTED {
            let seq = head.head_seq + 1;
            let hash = chain::link_hash(&head.head_hash, seq, &row.record);
            row.link = Some((seq, std::mem::replace(&mut head.head_hash, hash.clone()), hash));
            head.head_seq = seq;
            chained = true;
        }
    }
    if !replaced.is_empty() {
        // A completed call's row replaces its "started" one (the chain covers the row as stored).
        tx.execute("DELETE FROM audit WHERE workspace = $1 AND id = ANY($2) AND hash IS NULL", &[&ws, &replaced])
            .await?;
    }
    if !rows.is_empty() {
        let sink = tx.copy_in(COPY_IN).await?;
        let copy = BinaryCopyInWriter::new(sink, &COPY_TYPES);
        tokio::pin!(copy);
        for Row { record: r, link } in &rows {
            let link = match link {
                Some((seq, prev, hash)) => (Some(*seq), Some(prev.as_str()), Some(hash.as_str())),
                None => (None, None, None),
            };
            copy_row(copy.as_mut(), ws, r, Some(writer), link).await?;
        }
        copy.finish().await?;
    }
    if chained {
        set_head(&tx, ws, &head).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Closes the rows of logs whose node died (not heard from for `dead_after`): each call still
/// "started" becomes "interrupted", and a gap row marks where the log ended. Rows "started" by
/// a log that closed cleanly (none should be) are closed too, without a gap row.
async fn close_interrupted(client: &mut Object, ws: &str, dead_after: Duration) -> Result<usize, PgError> {
    let dead_ms = i64::try_from(dead_after.as_millis()).unwrap_or(i64::MAX);
    let dead = client
        .query(
            &format!(
                "SELECT writer, node, pid, opened_ms, true FROM audit_writers
                 WHERE workspace = $1 AND beat_ms < {DB_NOW_MS} - $2
                 UNION ALL
                 SELECT DISTINCT writer, '', 0, 0, false FROM audit a
                 WHERE workspace = $1 AND outcome = $3 AND writer IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM audit_writers w WHERE w.writer = a.writer)"
            ),
            &[&ws, &dead_ms, &STARTED],
        )
        .await?;
    let mut closed = 0;
    for row in dead {
        let (writer, node, pid, opened_ms, gap): (String, String, i64, i64, bool) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?, row.try_get(4)?);
        let tx = client.transaction().await?;
        if gap && tx.execute("DELETE FROM audit_writers WHERE writer = $1", &[&writer]).await? == 0 {
            // Another node closed it meanwhile.
            continue;
        }
        let mut head = chain_ends(&tx, ws, true).await?;
        let running = tx
            .query(
                &format!(
                    "SELECT {RECORD_COLUMNS} FROM audit WHERE workspace = $1 AND writer = $2 AND outcome = $3
                     AND hash IS NULL ORDER BY ts_ms, pos"
                ),
                &[&ws, &writer, &STARTED],
            )
            .await?;
        let who = if gap { format!("toolgate on {node} (pid {pid})") } else { "toolgate".to_owned() };
        for row in &running {
            let mut record = record_from_row(row, 0)?;
            record.outcome = INTERRUPTED.to_owned();
            record.error = Some(format!(
                "{who} ended while this call ran (killed, crashed or cut off): its effects, if any, are unknown"
            ));
            link(&tx, ws, &mut head, &record, true).await?;
            closed += 1;
        }
        if gap {
            let last: Option<i64> = tx
                .query_one("SELECT max(ts_ms) FROM audit WHERE workspace = $1 AND writer = $2", &[&ws, &writer])
                .await?
                .try_get(0)?;
            let record = AuditRecord {
                id: format!("audit-gap-{writer}"),
                ts_ms: last.unwrap_or(opened_ms),
                agent: "toolgate".into(),
                tool: GAP_EVENT.into(),
                params: "{}".into(),
                decision: "audit: the log was not closed".into(),
                outcome: GAP.into(),
                error: Some(format!(
                    "{who} ended here without closing its audit log (killed, crashed or cut off from the database \
                     for over {} s): calls it answered in the last {} ms before it ended (the writer's batch \
                     window) may have no row; calls that were not read-only and ran have their \"started\" row at \
                     least",
                    dead_after.as_secs(),
                    LINGER.as_millis()
                )),
                ..AuditRecord::default()
            };
            link(&tx, ws, &mut head, &record, false).await?;
        }
        set_head(&tx, ws, &head).await?;
        tx.commit().await?;
    }
    Ok(closed)
}

/// Puts `record` at the end of the chain `head`: updates its row (`existing`) or adds it. The
/// caller stores the new head.
async fn link(
    tx: &impl deadpool_postgres::GenericClient,
    ws: &str,
    head: &mut ChainEnds,
    record: &AuditRecord,
    existing: bool,
) -> Result<(), PgError> {
    let seq = head.head_seq + 1;
    let hash = chain::link_hash(&head.head_hash, seq, record);
    let r = record;
    if existing {
        tx.execute(
            "UPDATE audit SET outcome = $3, error = $4, seq = $5, prev_hash = $6, hash = $7
             WHERE workspace = $1 AND id = $2",
            &[&ws, &r.id, &r.outcome, &r.error, &seq, &head.head_hash, &hash],
        )
        .await?;
    } else {
        let link = (Some(seq), Some(head.head_hash.as_str()), Some(hash.as_str()));
        tx.execute(
            concat!(
                "INSERT INTO audit (",
                row_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
            ),
            &row_values(&ws, r, &None, &link),
        )
        .await?;
    }
    head.head_seq = seq;
    head.head_hash = hash;
    Ok(())
}

/// Retention: see [`AuditStore::prune_audit`].
async fn prune(client: &mut Object, ws: &str, older_than_ms: i64) -> Result<Option<Pruned>, PgError> {
    let tx = client.transaction().await?;
    let mut ends = chain_ends(&tx, ws, true).await?;
    let first_kept: Option<i64> = tx
        .query_one(
            "SELECT min(seq) FROM audit WHERE workspace = $1 AND seq IS NOT NULL AND ts_ms >= $2",
            &[&ws, &older_than_ms],
        )
        .await?
        .try_get(0)?;
    let through = first_kept.map_or(ends.head_seq, |s| s - 1);
    if through < ends.start_seq {
        return Ok(None);
    }
    let start_hash: String = tx
        .query_opt("SELECT hash FROM audit WHERE workspace = $1 AND seq = $2", &[&ws, &through])
        .await?
        .map(|r| r.try_get(0))
        .transpose()?
        // The row is gone (deleted by hand): keep what the chain says, verify will tell.
        .unwrap_or_else(|| ends.head_hash.clone());
    let rows = tx
        .execute("DELETE FROM audit WHERE workspace = $1 AND seq IS NOT NULL AND seq <= $2", &[&ws, &through])
        .await?;
    ends.start_seq = through + 1;
    ends.start_hash = start_hash;
    tx.execute(
        "UPDATE audit_chains SET start_seq = $2, start_hash = $3 WHERE workspace = $1",
        &[&ws, &ends.start_seq, &ends.start_hash],
    )
    .await?;
    let pruned = Pruned {
        rows,
        through_seq: through,
        older_than_ms,
        start_seq: ends.start_seq,
        start_hash: ends.start_hash.clone(),
    };
    let record = pruned.record(now_ms());
    link(&tx, ws, &mut ends, &record, false).await?;
    set_head(&tx, ws, &ends).await?;
    tx.commit().await?;
    Ok(Some(pruned))
}

#[cfg(test)]
mod tests {
    use toolgate_testkit::postgres::Cluster;

    use super::*;

    fn running(id: &str) -> AuditRecord {
        AuditRecord {
            id: id.into(),
            ts_ms: 1_000,
            user: "ann".into(),
            tool: "exec".into(),
            params: "{}".into(),
            outcome: STARTED.into(),
            subject: Some("make deploy".into()),
            ..AuditRecord::default()
        }
    }

    /// A node dies with a call running: another node finds its log silent past the limit and
    /// closes the call as interrupted, with a gap row, in the chain; a live node's running
    /// call is left alone.
    #[test]
    fn a_dead_nodes_running_calls_are_closed_by_another_node() {
        let pg = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        let url = pg.database().unwrap();
        // Node A never beats after its first write: to the others it goes silent at once.
        let silent = Timing { beat: Duration::from_secs(3600), dead_after: Duration::from_secs(3600) };
        let a =
            PgAuditLog::open_timed(&PgStore::connect(&url).unwrap(), "/ws", AuditOptions::default(), silent).unwrap();
        a.record_started(running("on-a"));
        let live = Timing { beat: Duration::from_millis(50), dead_after: Duration::from_secs(3600) };
        let c = PgAuditLog::open_timed(&PgStore::connect(&url).unwrap(), "/ws", AuditOptions::default(), live).unwrap();
        c.record_started(running("on-c"));

        // B judges with a short limit: A is past it, C beats faster than it.
        let quick = Timing { beat: Duration::from_millis(50), dead_after: Duration::from_millis(400) };
        let b = PgAuditLog::reader_timed(&PgStore::connect(&url).unwrap(), "/ws", quick).unwrap();
        let closed = (0..100)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                b.close_interrupted_calls().unwrap()
            })
            .find(|n| *n > 0);
        assert_eq!(closed, Some(1), "A's call is closed once");
        let rows = b.audit_tail(10).unwrap();
        let by_id = |id: &str| rows.iter().find(|r| r.id == id).unwrap().clone();
        let interrupted = by_id("on-a");
        assert_eq!(interrupted.outcome, INTERRUPTED);
        assert!(interrupted.error.as_deref().unwrap().contains("ended while this call ran"), "{interrupted:?}");
        assert_eq!(interrupted.subject.as_deref(), Some("make deploy"));
        assert_eq!(by_id("on-c").outcome, STARTED, "a live node's call keeps running");
        let gap = rows.iter().find(|r| r.tool == GAP_EVENT).expect("a gap row marks where A's log ended");
        assert!(gap.error.as_deref().unwrap().contains("without closing its audit log"), "{gap:?}");
        assert_eq!(b.close_interrupted_calls().unwrap(), 0, "closed once only");
        let report = b.verify_chain().unwrap();
        assert!(report.ok() && report.rows == 2, "{report:?}");

        // A was only cut off: its late completion does not rewrite the chain.
        a.record(AuditRecord { outcome: "ok".into(), ..running("on-a") });
        a.flush();
        assert_eq!(b.audit_tail(10).unwrap().iter().find(|r| r.id == "on-a").unwrap().outcome, INTERRUPTED);
        assert!(b.verify_chain().unwrap().ok());
    }
}
