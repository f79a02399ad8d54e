//! The audit log's hash chain and retention: the contract on every backend, then what only
//! SQLite shows (rows edited, deleted and reordered with SQL behind the store's back, file modes).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use toolgate_store::{AuditLog, AuditOptions, AuditRecord, AuditStore, GENESIS, PRUNE_EVENT, STARTED, Store};

use crate::on_every_backend;

fn record(i: usize) -> AuditRecord {
    AuditRecord {
        id: format!("call-{i}"),
        ts_ms: 1_000 * i as i64,
        user: "ann".into(),
        agent: "main".into(),
        session: "s".into(),
        tool: "write".into(),
        params: format!("{{\"path\": \"f{i}\"}}"),
        decision: "policy: allow".into(),
        outcome: "ok".into(),
        ..AuditRecord::default()
    }
}

#[test]
fn completed_rows_form_a_chain_that_verifies() {
    on_every_backend(|db| {
        let log = db.audit();
        let empty = log.verify_chain().unwrap();
        assert!(empty.ok(), "{empty:?}");
        assert_eq!((empty.rows, empty.ends.head_hash.as_str()), (0, GENESIS));
        for i in 1..=5 {
            log.record(record(i));
        }
        // A running call is not in the chain until it completes.
        log.record_started(AuditRecord { outcome: STARTED.into(), subject: Some("f6".into()), ..record(6) });
        let report = log.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.rows, 5);
        log.record(record(6));
        let report = log.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!((report.rows, report.ends.head_seq), (6, 6));
        // A second record for a completed call does not rewrite it.
        log.record(AuditRecord { outcome: "denied".into(), ..record(3) });
        let report = log.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(log.audit_tail(10).unwrap()[2].outcome, "ok");
    });
}

#[test]
fn two_writers_on_one_database_keep_one_chain() {
    on_every_backend(|db| {
        let (a, b) = (db.audit(), db.audit());
        std::thread::scope(|s| {
            s.spawn(|| (0..300).for_each(|i| a.record(record(i))));
            s.spawn(|| (300..600).for_each(|i| b.record_started(AuditRecord { outcome: STARTED.into(), ..record(i) })));
        });
        (300..600).for_each(|i| b.record(record(i)));
        a.flush();
        let report = b.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.rows, 600);
    });
}

#[test]
fn retention_prunes_from_the_start_and_records_it() {
    on_every_backend(|db| {
        let log = db.audit();
        for i in 1..=10 {
            log.record(record(i));
        }
        assert_eq!(log.prune_audit(0).unwrap(), None, "nothing is older than the epoch");
        let head_before = log.verify_chain().unwrap().ends;
        // Rows 1..=4 started before 5 s.
        let pruned = log.prune_audit(5_000).unwrap().expect("rows were due");
        assert_eq!((pruned.rows, pruned.through_seq, pruned.start_seq), (4, 4, 5));
        let report = log.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.rows, 7, "rows 5..=10 and the retention row");
        assert_eq!(report.ends.start_seq, 5);
        assert_ne!(report.ends.start_hash, GENESIS);
        assert_eq!(report.ends.head_seq, head_before.head_seq + 1);
        let tail = log.audit_tail(1).unwrap();
        assert_eq!(tail[0].tool, PRUNE_EVENT);
        assert!(tail[0].params.contains(&pruned.start_hash), "{:?}", tail[0]);
        assert_eq!(log.audit_count().unwrap(), 7);
        // New rows keep chaining after the retention row, and a later prune can take it too.
        log.record(record(11));
        assert!(log.verify_chain().unwrap().ok());
        let again = log.prune_audit(i64::MAX).unwrap().expect("everything is older than the end of time");
        assert_eq!(again.start_seq, 13);
        let report = log.verify_chain().unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.rows, 1, "only the newest retention row");
    });
}

// SQLite only: tampering with the rows directly, and what is on disk.

fn chained_log(path: &Path, rows: usize) {
    let log = AuditLog::open_with(path, AuditOptions { retention_days: None }).unwrap();
    for i in 1..=rows {
        log.record(record(i));
    }
    log.flush();
}

fn broken(path: &Path) -> (i64, String, String) {
    let report = Store::open(path).unwrap().verify_audit_chain().unwrap();
    let b = report.broken.clone().unwrap_or_else(|| panic!("tampering was not found: {report:?}"));
    (b.seq, b.id, b.reason)
}

fn sql(path: &Path, statement: &str) {
    rusqlite::Connection::open(path).unwrap().execute_batch(statement).unwrap();
}

fn tampered(statement: &str) -> (i64, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".toolgate/state.db");
    chained_log(&db, 6);
    sql(&db, statement);
    broken(&db)
}

#[test]
fn an_edited_row_is_named() {
    let (seq, id, reason) = tampered("UPDATE audit SET params = '{\"path\": \"innocent\"}' WHERE id = 'call-3'");
    assert_eq!((seq, id.as_str()), (3, "call-3"));
    assert!(reason.contains("changed"), "{reason}");
}

#[test]
fn an_edited_row_with_its_hash_recomputed_breaks_the_next_link() {
    let (seq, id, reason) = tampered("UPDATE audit SET hash = 'ff' WHERE id = 'call-3'");
    // Its own hash no longer matches its content either; the first break is row 3.
    assert_eq!((seq, id.as_str()), (3, "call-3"), "{reason}");
    let (seq, id, reason) =
        tampered("UPDATE audit SET ts_ms = 1 WHERE id = 'call-6'; UPDATE audit_chain SET head_hash = 'x'");
    assert_eq!((seq, id.as_str()), (6, "call-6"), "{reason}");
}

#[test]
fn a_deleted_row_is_named() {
    let (seq, id, reason) = tampered("DELETE FROM audit WHERE id = 'call-4'");
    assert_eq!((seq, id.as_str()), (4, "call-5"));
    assert!(reason.contains("missing"), "{reason}");
    let (seq, _, reason) = tampered("DELETE FROM audit WHERE id = 'call-6'");
    assert_eq!(seq, 6);
    assert!(reason.contains("last rows were deleted"), "{reason}");
    let (seq, _, reason) = tampered("DELETE FROM audit WHERE id IN ('call-1', 'call-2')");
    assert_eq!(seq, 1, "{reason}");
    // Deleting the start and moving the recorded start, without a retention row.
    let (seq, _, reason) = tampered(
        "DELETE FROM audit WHERE id = 'call-1';
         UPDATE audit_chain SET start_seq = 2, start_hash = (SELECT prev_hash FROM audit WHERE seq = 2)",
    );
    assert_eq!(seq, 2);
    assert!(reason.contains("no retention row"), "{reason}");
}

#[test]
fn reordered_rows_are_named() {
    let (seq, id, reason) = tampered(
        "UPDATE audit SET seq = -1 WHERE id = 'call-2';
         UPDATE audit SET seq = 2 WHERE id = 'call-3';
         UPDATE audit SET seq = 3 WHERE id = 'call-2';",
    );
    assert_eq!((seq, id.as_str()), (2, "call-3"));
    assert!(reason.contains("does not follow"), "{reason}");
}

#[test]
fn a_row_inserted_by_hand_is_named() {
    let (_, id, reason) = tampered(
        "INSERT INTO audit (id, ts_ms, user, agent, session, tool, params, decision, outcome, duration_us, output_bytes)
         VALUES ('forged', 0, 'ann', 'main', 's', 'write', '{}', 'policy: allow', 'ok', 0, 0)",
    );
    assert_eq!(id, "forged");
    assert!(reason.contains("not in the chain"), "{reason}");
}

#[test]
fn rows_from_before_the_chain_are_chained_by_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // A database as a build before the chain left it: no chain columns, no chain table; later
    // migrations then run as they would on a user's upgrade.
    toolgate_store::create_at_version(&db, toolgate_store::audit_chain_version() - 1).unwrap();
    for i in 1..=3 {
        sql(
            &db,
            &format!(
                "INSERT INTO audit (id, ts_ms, user, agent, session, tool, params, decision, outcome, duration_us,
                                    output_bytes)
                 VALUES ('call-{i}', {i}, 'ann', 'main', 's', 'write', '{{}}', 'policy: allow', 'ok', 0, 0)"
            ),
        );
    }
    let report = Store::open(&db).unwrap().verify_audit_chain().unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.rows, 3);
}

#[test]
fn the_audit_log_prunes_by_its_retention_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    chained_log(&db, 3);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let log = AuditLog::open_with(&db, AuditOptions { retention_days: Some(1) }).unwrap();
    log.record(AuditRecord { id: "recent".into(), ts_ms: now, ..record(0) });
    // The maintenance thread prunes beside the writer: wait for its row, with a deadline.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !log.audit_tail(10).unwrap().iter().any(|r| r.tool == PRUNE_EVENT) {
        assert!(std::time::Instant::now() < deadline, "no retention row: {:?}", log.audit_tail(10).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let report = log.verify_chain().unwrap();
    assert!(report.ok(), "{report:?}");
    let ids: Vec<String> = log.audit_tail(10).unwrap().into_iter().map(|r| r.id).collect();
    assert!(ids.contains(&"recent".to_owned()) && !ids.contains(&"call-1".to_owned()), "{ids:?}");
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_state_folder_and_database_belong_to_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".toolgate");
    let db = state.join("state.db");
    let log = AuditLog::open(&db).unwrap();
    log.record(record(1));
    log.flush();
    assert_eq!(mode(&state), 0o700);
    for f in ["state.db", "state.db-wal", "state.db-shm"] {
        assert_eq!(mode(&state.join(f)), 0o600, "{f}");
    }
    drop(log);
    // An older workspace: everything readable by all; fixed when the database is opened.
    let old = tempfile::tempdir().unwrap();
    let state = old.path().join(".toolgate");
    std::fs::create_dir(&state).unwrap();
    std::fs::copy(&db, state.join("state.db")).unwrap();
    std::fs::write(state.join("state.db-wal"), "").unwrap();
    std::fs::write(state.join("http-token"), "t").unwrap();
    for (f, m) in [("", 0o755), ("state.db", 0o644), ("state.db-wal", 0o666), ("http-token", 0o644)] {
        std::fs::set_permissions(state.join(f), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let store = Store::open(&state.join("state.db")).unwrap();
    assert_eq!(store.audit_count().unwrap(), 1);
    assert_eq!(mode(&state), 0o700);
    for f in ["state.db", "state.db-wal", "http-token"] {
        assert_eq!(mode(&state.join(f)), 0o600, "{f}");
    }
}
