//! The audit log in PostgreSQL (`PgAuditLog`), on a throwaway cluster: nodes appending to one
//! chain per workspace, a database restarted under a load of records, retention, and the reads
//! `toolgate audit` and the agent runtime make.

use std::sync::Arc;

use toolgate_postgres::{PgAuditLog, PgStore};
use toolgate_store::{AuditOptions, AuditRecord, AuditStore, PRUNE_EVENT, STARTED, SessionQuery};
use toolgate_testkit::postgres::Cluster;

fn cluster() -> Cluster {
    Cluster::start().unwrap_or_else(|e| panic!("{e}"))
}

fn record(id: &str, ts_ms: i64, outcome: &str) -> AuditRecord {
    AuditRecord {
        id: id.to_owned(),
        ts_ms,
        user: "ann".into(),
        agent: "claude".into(),
        session: "mcp-1".into(),
        tool: "write".into(),
        params: format!(r#"{{"path":"{id}.txt"}}"#),
        decision: "allow (policy)".into(),
        outcome: outcome.to_owned(),
        ..AuditRecord::default()
    }
}

/// Two nodes (a store each, as two processes have) append to one workspace's chain at once:
/// every call is one row, a completed call keeps the subject its "started" row had, and the
/// chain checks out; another workspace has a chain of its own.
#[test]
fn nodes_append_to_one_chain_per_workspace() {
    let pg = cluster();
    let url = pg.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    let on_a = Arc::new(PgAuditLog::open(&a, "/srv/team", AuditOptions::default()).unwrap());
    let on_b = Arc::new(PgAuditLog::open(&b, "/srv/team", AuditOptions::default()).unwrap());
    let other = PgAuditLog::open(&a, "/srv/other", AuditOptions::default()).unwrap();
    let writers: Vec<_> = [("a", Arc::clone(&on_a)), ("b", Arc::clone(&on_b))]
        .into_iter()
        .map(|(node, log)| {
            std::thread::spawn(move || {
                for i in 0..150 {
                    let id = format!("{node}-{i}");
                    if i % 3 == 0 {
                        // Not read-only: the "started" row first, with the subject.
                        log.record_started(AuditRecord {
                            subject: Some(format!("rm {id}")),
                            ..record(&id, 1_000 + i, STARTED)
                        });
                    }
                    log.record(AuditRecord { duration_us: 7, ..record(&id, 1_000 + i, "ok") });
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    other.record(record("elsewhere", 5, "ok"));
    on_a.flush();
    on_b.flush();
    other.flush();

    assert_eq!(on_a.audit_count().unwrap(), 300, "one row per call, seen from either node");
    assert_eq!(on_b.audit_count().unwrap(), 300);
    let report = on_b.verify_chain().unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!((report.rows, report.ends.head_seq), (300, 300));
    let rows = on_a.audit_tail(1000).unwrap();
    let started_then_done = rows.iter().find(|r| r.id == "b-3").unwrap();
    assert_eq!(started_then_done.outcome, "ok");
    assert_eq!(started_then_done.subject.as_deref(), Some("rm b-3"), "the started row's subject is kept");
    assert!(rows.iter().all(|r| r.outcome != STARTED));
    assert!(rows.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms), "oldest first");

    let report = other.verify_chain().unwrap();
    assert!(report.ok() && report.rows == 1, "{report:?}");
    assert_eq!(other.audit_tail(10).unwrap().len(), 1, "a workspace sees its own rows only");

    // A second record for a completed call is dropped, never rewriting the chain.
    on_a.record(AuditRecord { outcome: "error".into(), ..record("a-1", 9_999, "error") });
    on_a.flush();
    assert_eq!(on_a.audit_tail(1000).unwrap().iter().find(|r| r.id == "a-1").unwrap().outcome, "ok");
    assert!(on_a.verify_chain().unwrap().ok());
}

/// The database stops and starts while a node keeps recording: the records wait in the
/// node's queue and are written once it is back; none is lost and the chain checks out.
#[test]
fn a_database_restarted_under_load_loses_no_row() {
    let pg = cluster();
    let url = pg.database().unwrap();
    let store = PgStore::connect(&url).unwrap();
    let log = Arc::new(PgAuditLog::open(&store, "/srv/team", AuditOptions::default()).unwrap());
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let load = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for i in 0..2000 {
                let id = format!("call-{i}");
                if i % 10 == 0 {
                    log.record_started(record(&id, i, STARTED));
                }
                log.record(record(&id, i, "ok"));
                if i == 500 {
                    sent_tx.send(()).unwrap();
                }
            }
        })
    };
    sent_rx.recv().unwrap();
    pg.stop_server().unwrap();
    // Down long enough for the writer to fail and retry several times.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    pg.start_server().unwrap();
    load.join().unwrap();
    log.flush();

    let reader = PgAuditLog::reader(&PgStore::connect(&url).unwrap(), "/srv/team").unwrap();
    assert_eq!(reader.audit_count().unwrap(), 2000, "every record is there after the restart");
    let rows = reader.audit_tail(5000).unwrap();
    let mut ids: Vec<i64> = rows.iter().map(|r| r.id.trim_start_matches("call-").parse().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..2000).collect::<Vec<_>>(), "no call missing or twice");
    assert!(rows.iter().all(|r| r.outcome == "ok"), "every started row was completed");
    let report = reader.verify_chain().unwrap();
    assert!(report.ok() && report.rows == 2000, "{report:?}");
}

/// Retention prunes the oldest rows of one workspace and records where its chain now starts;
/// the chain still checks out, and another workspace's rows are untouched.
#[test]
fn retention_prunes_one_workspace_and_the_chain_still_checks_out() {
    let pg = cluster();
    let store = PgStore::connect(&pg.database().unwrap()).unwrap();
    let team = PgAuditLog::open(&store, "/srv/team", AuditOptions::default()).unwrap();
    let other = PgAuditLog::open(&store, "/srv/other", AuditOptions::default()).unwrap();
    for i in 0..10 {
        team.record(record(&format!("t-{i}"), i * 100, "ok"));
        other.record(record(&format!("o-{i}"), i * 100, "ok"));
    }
    let pruned = team.prune_audit(500).unwrap().expect("rows before 500 were due");
    assert_eq!((pruned.rows, pruned.through_seq, pruned.start_seq), (5, 5, 6));
    assert!(team.prune_audit(500).unwrap().is_none(), "nothing more is due");
    let rows = team.audit_tail(100).unwrap();
    assert_eq!(rows.len(), 6, "5 kept and the retention row");
    assert_eq!(rows.last().unwrap().tool, PRUNE_EVENT);
    let report = team.verify_chain().unwrap();
    assert!(report.ok(), "{report:?}");
    other.flush();
    assert_eq!(other.audit_count().unwrap(), 10);
    assert!(other.verify_chain().unwrap().ok());
}

/// The agent runtime's session summary (`sessions` tool) reads the shared log like SQLite's.
#[test]
fn sessions_are_summarised_from_every_node() {
    let pg = cluster();
    let url = pg.database().unwrap();
    let a = PgAuditLog::open(&PgStore::connect(&url).unwrap(), "/srv/team", AuditOptions::default()).unwrap();
    let b = PgAuditLog::open(&PgStore::connect(&url).unwrap(), "/srv/team", AuditOptions::default()).unwrap();
    a.record(AuditRecord { session: "mcp-1".into(), ..record("1", 10, "ok") });
    b.record(AuditRecord { session: "mcp-1".into(), agent: "codex".into(), ..record("2", 20, "ok") });
    b.record(AuditRecord { session: "mcp_2".into(), ..record("3", 30, "ok") });
    b.record(AuditRecord { session: "mcp-3".into(), user: "lee".into(), ..record("4", 40, "ok") });
    a.flush();
    let all =
        b.audit_sessions(&SessionQuery { user: "ann", prefix: "mcp-", limit: 10, ..SessionQuery::default() }).unwrap();
    assert_eq!(all.len(), 1, "`_` in the prefix is a literal, lee's session is not ann's: {all:?}");
    assert_eq!((all[0].session.as_str(), all[0].agent.as_str(), all[0].calls), ("mcp-1", "codex", 2));
    assert_eq!((all[0].first_ms, all[0].last_ms), (10, 20));
}
