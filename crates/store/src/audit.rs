use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::StoreError;
use crate::db::open_connection;

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
}

enum Message {
    Record(Box<AuditRecord>),
    Flush(SyncSender<()>),
}

/// The audit log's writer. [`record`](AuditLog::record) only queues; a background thread writes
/// batches in single transactions, so the call path never waits on `fsync`.
///
/// Dropping the log writes everything queued before returning: nothing is lost on a clean
/// shutdown. The queue holds 65,536 records; when the disk falls that far behind, `record`
/// waits (back-pressure) rather than dropping records or growing without bound.
#[derive(Debug)]
pub struct AuditLog {
    tx: Option<SyncSender<Message>>,
    writer: Option<JoinHandle<()>>,
}

impl AuditLog {
    /// Opens the database at `path` and starts the writer thread.
    pub fn open(path: &Path) -> Result<AuditLog, StoreError> {
        let conn = open_connection(path)?;
        let (tx, rx) = sync_channel(65_536);
        let writer = std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_loop(conn, rx))
            .map_err(|e| StoreError::Open { path: path.to_owned(), source: Box::new(e) })?;
        Ok(AuditLog { tx: Some(tx), writer: Some(writer) })
    }

    /// Queues a record.
    pub fn record(&self, record: AuditRecord) {
        if let Some(tx) = &self.tx {
            // The writer only stops when this log is dropped, so a send cannot fail while `self`
            // exists; if the thread died anyway, the records were already being lost.
            let _ = tx.send(Message::Record(Box::new(record)));
        }
    }

    /// Waits until every record queued before this call is written.
    pub fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (ack_tx, ack_rx) = sync_channel(1);
            if tx.send(Message::Flush(ack_tx)).is_ok() {
                self.wake_writer();
                let _ = ack_rx.recv();
            }
        }
    }

    /// Ends the writer's wait for more records (see `LINGER`).
    fn wake_writer(&self) {
        if let Some(writer) = &self.writer {
            writer.thread().unpark();
        }
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

/// How long the writer waits after a record for more to commit in the same transaction. Records
/// reach the database up to this much later; [`AuditLog::flush`] and drop do not wait for it.
const LINGER: std::time::Duration = std::time::Duration::from_millis(5);

fn write_loop(mut conn: Connection, rx: Receiver<Message>) {
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
            if let Err(e) = write_batch(&mut conn, &batch) {
                tracing::error!(error = %e, records = batch.len(), "could not write audit records");
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &[Box<AuditRecord>]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR REPLACE INTO audit
             (id, ts_ms, user, agent, session, provider, tool, params, decision, outcome, error, duration_us, output_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
                r.output_bytes
            ])?;
        }
    }
    tx.commit()
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
