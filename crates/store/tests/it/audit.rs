//! [`AuditStore`]: the audit log. (Closing the rows of a process that died is tested beside the
//! SQLite backend, which knows how to fake a dead process.)

use toolgate_store::{AuditRecord, INTERRUPTED, STARTED};

use crate::on_every_backend;

fn record(i: usize) -> AuditRecord {
    AuditRecord {
        id: format!("call-{i}"),
        ts_ms: i as i64,
        user: "ann".into(),
        agent: "main".into(),
        session: "s".into(),
        tool: "echo".into(),
        params: "{}".into(),
        decision: "policy: allow".into(),
        outcome: "ok".into(),
        ..AuditRecord::default()
    }
}

#[test]
fn flushed_records_are_read_back_oldest_first() {
    on_every_backend(|db| {
        let log = db.audit();
        assert_eq!(log.audit_count().unwrap(), 0);
        assert!(log.audit_tail(10).unwrap().is_empty());
        let full = AuditRecord {
            provider: Some("openai".into()),
            error: Some("no".into()),
            duration_us: 7,
            output_bytes: 12,
            subject: Some("echo hi".into()),
            detail: Some("status 200".into()),
            called_as: Some("Echo".into()),
            ..record(1)
        };
        log.record(full.clone());
        log.record(record(2));
        log.record(record(3));
        log.flush();
        assert_eq!(log.audit_count().unwrap(), 3);
        let tail = log.audit_tail(2).unwrap();
        assert_eq!(tail.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["call-2", "call-3"], "the last 2");
        assert_eq!(log.audit_tail(10).unwrap()[0], full, "every field kept");
        // Another log over the same database reads them too.
        assert_eq!(db.audit().audit_count().unwrap(), 3);
    });
}

#[test]
fn nothing_queued_is_lost_when_the_log_is_dropped() {
    on_every_backend(|db| {
        let log = db.audit();
        for i in 0..5_000 {
            log.record(record(i));
        }
        drop(log);
        let later = db.audit();
        assert_eq!(later.audit_count().unwrap(), 5_000);
        let ids: Vec<String> = later.audit_tail(2).unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["call-4998", "call-4999"]);
    });
}

#[test]
fn a_started_row_is_written_at_once_and_completed_in_place() {
    on_every_backend(|db| {
        let log = db.audit();
        let reader = db.audit();
        let started = AuditRecord { outcome: STARTED.into(), subject: Some("sleep 1000".into()), ..record(1) };
        log.record_started(started.clone());
        assert_eq!(reader.audit_tail(5).unwrap(), [started], "written before record_started returns");
        log.record(AuditRecord { duration_us: 7, ..record(1) });
        log.flush();
        let rows = reader.audit_tail(5).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!((rows[0].outcome.as_str(), rows[0].duration_us), ("ok", 7));
        assert_eq!(rows[0].subject.as_deref(), Some("sleep 1000"), "the subject of the started row is kept");
        // A completed row is final (it is in the hash chain): a second record does not rewrite it.
        log.record(AuditRecord { subject: Some("sleep 1".into()), ..record(1) });
        log.flush();
        assert_eq!(reader.audit_tail(5).unwrap()[0].subject.as_deref(), Some("sleep 1000"), "the completed row stays");
    });
}

#[test]
fn the_started_rows_of_a_live_process_are_not_interrupted() {
    on_every_backend(|db| {
        let log = db.audit();
        log.record_started(AuditRecord { outcome: STARTED.into(), ..record(1) });
        log.record(AuditRecord { outcome: INTERRUPTED.into(), ..record(2) });
        log.flush();
        assert_eq!(db.audit().close_interrupted_calls().unwrap(), 0, "this process still runs");
        let outcomes: Vec<String> = log.audit_tail(5).unwrap().into_iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [STARTED, INTERRUPTED]);
    });
}

#[test]
fn sessions_are_summarised_per_user_by_id_or_prefix_newest_first() {
    on_every_backend(|db| {
        let log = db.audit();
        let at = |i: usize, user: &str, session: &str, tool: &str| AuditRecord {
            user: user.into(),
            session: session.into(),
            tool: tool.into(),
            agent: format!("agent-{i}"),
            ..record(i)
        };
        log.record(at(10, "ann", "mcp-a", "read"));
        log.record(at(11, "ann", "mcp-a", "edit"));
        log.record(at(12, "ann", "mcp-a", toolgate_store::TEXT_EVENT));
        log.record(at(20, "ann", "mcp-b", "read"));
        log.record(at(5, "ann", "default", "read"));
        log.record(at(30, "bob", "mcp-c", "read"));
        // A prefix is literal: `_` and `%` are not wildcards.
        log.record(at(40, "ann", "mcpxa", "read"));
        // No flush: the reads see what was recorded before them.
        let query = |session, since_ms| toolgate_store::SessionQuery {
            user: "ann",
            session,
            prefix: "mcp-",
            since_ms,
            limit: 10,
        };
        let all = log.audit_sessions(&query(None, 0)).unwrap();
        let ids: Vec<&str> = all.iter().map(|c| c.session.as_str()).collect();
        assert_eq!(ids, ["mcp-b", "mcp-a"], "ann's MCP sessions, most recently active first");
        let a = &all[1];
        assert_eq!((a.calls, a.first_ms, a.last_ms), (2, 10, 11), "events are not calls: {a:?}");
        assert_eq!(a.agent, "agent-12", "the agent of its latest row");
        assert_eq!(log.audit_sessions(&query(None, 15)).unwrap().len(), 1, "since");
        let one = log.audit_sessions(&query(Some("default"), 0)).unwrap();
        assert_eq!((one.len(), one[0].calls), (1, 1), "one session by id, whatever its prefix");
        assert!(log.audit_sessions(&query(Some("mcp-c"), 0)).unwrap().is_empty(), "another user's");
        let limited = toolgate_store::SessionQuery { limit: 1, ..query(None, 0) };
        assert_eq!(log.audit_sessions(&limited).unwrap().len(), 1);
    });
}
