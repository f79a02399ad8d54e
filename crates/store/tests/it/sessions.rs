//! [`SessionStore`]: agent sessions, their messages, handoff routes (team boards and messages:
//! `teams.rs`).
//! (Closing the sessions of a process that died is tested beside the SQLite backend, which
//! knows how to fake a dead process.)

use toolgate_store::{HandoffRoute, MessageRecord, SessionFilter, SessionRecord};

use crate::{Area, on_every_backend_of};

fn session(id: &str, created_ms: i64) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        agent: "main".into(),
        user: "local".into(),
        kind: "run".into(),
        status: "running".into(),
        task: "do it".into(),
        created_ms,
        ..SessionRecord::default()
    }
}

fn message(role: &str, ts_ms: i64) -> MessageRecord {
    MessageRecord { role: role.into(), content: role.into(), ts_ms, ..MessageRecord::default() }
}

#[test]
fn a_session_keeps_its_messages_usage_and_outcome() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let s = SessionRecord { label: Some("first".into()), depth: 1, ..session("s1", 10) };
        store.session_create(&s).unwrap();
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!(got, SessionRecord { updated_ms: 10, ..s }, "as created, with zero usage and messages");
        let seqs: Vec<i64> = ["user", "assistant", "tool"]
            .iter()
            .map(|r| store.session_append("s1", &message(r, 12)).unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        let tool = MessageRecord {
            tool_call_id: Some("c1".into()),
            tool_name: Some("read".into()),
            tool_calls: None,
            is_error: true,
            ..message("tool", 13)
        };
        assert_eq!(store.session_append("s1", &tool).unwrap(), 4);
        assert_eq!(store.session_append("s2", &message("user", 13)).unwrap(), 1, "numbered per session");
        store.session_add_usage("s1", 100, 20, 0.5, 13).unwrap();
        store.session_add_usage("s1", 1, 2, 0.25, 14).unwrap();
        store.session_finish("s1", "done", Some("ok"), None, 15).unwrap();
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!((got.input_tokens, got.output_tokens, got.message_count), (101, 22, 4));
        assert!((got.cost_usd - 0.75).abs() < 1e-9, "{}", got.cost_usd);
        assert_eq!((got.status.as_str(), got.result.as_deref(), got.updated_ms), ("done", Some("ok"), 15));
        let all = store.session_messages("s1", 0).unwrap();
        assert_eq!(all.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(), ["user", "assistant", "tool", "tool"]);
        assert_eq!(all[3], MessageRecord { seq: 4, ..tool });
        let last = store.session_messages("s1", 2).unwrap();
        assert_eq!(last.iter().map(|m| m.seq).collect::<Vec<_>>(), [3, 4], "the last ones, in order");
        // A later finish without a result keeps the result; the error is replaced.
        store.session_finish("s1", "failed", None, Some("boom"), 16).unwrap();
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!(
            (got.status.as_str(), got.result.as_deref(), got.error.as_deref()),
            ("failed", Some("ok"), Some("boom"))
        );
        assert!(store.session("nope").unwrap().is_none());
        assert!(store.session_messages("nope", 0).unwrap().is_empty());
    });
}

#[test]
fn a_turn_is_appended_with_its_usage_at_once() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        store.session_create(&session("s1", 10)).unwrap();
        assert_eq!(store.session_append("s1", &message("user", 11)).unwrap(), 1);
        let assistant = MessageRecord {
            tool_calls: Some(r#"[{"id":"c1","name":"read","arguments":"{}"}]"#.into()),
            ..message("assistant", 12)
        };
        let tool = MessageRecord {
            tool_call_id: Some("c1".into()),
            tool_name: Some("read".into()),
            is_error: true,
            ..message("tool", 13)
        };
        let turn = [assistant.clone(), tool.clone()];
        assert_eq!(store.session_append_turn("s1", &turn, Some((100, 20, 0.5)), 14).unwrap(), [2, 3]);
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!((got.input_tokens, got.output_tokens, got.message_count, got.updated_ms), (100, 20, 3, 14));
        assert!((got.cost_usd - 0.5).abs() < 1e-9, "{}", got.cost_usd);
        let all = store.session_messages("s1", 0).unwrap();
        assert_eq!(all[1..], [MessageRecord { seq: 2, ..assistant }, MessageRecord { seq: 3, ..tool }]);
        // Messages without usage, usage without messages, and nothing at all.
        assert_eq!(store.session_append_turn("s1", &[message("assistant", 15)], None, 15).unwrap(), [4]);
        assert!(store.session_append_turn("s1", &[], Some((1, 2, 0.25)), 16).unwrap().is_empty());
        assert!(store.session_append_turn("s1", &[], None, 99).unwrap().is_empty());
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!((got.input_tokens, got.output_tokens, got.message_count, got.updated_ms), (101, 22, 4, 16));
        assert!((got.cost_usd - 0.75).abs() < 1e-9, "{}", got.cost_usd);
        // Turns written at once on separate connections never interleave or share a number.
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let sessions = db.connect().sessions;
                scope.spawn(move || {
                    for turn in 0..10 {
                        let ms: Vec<MessageRecord> = (0..3)
                            .map(|i| MessageRecord { content: format!("{writer}/{turn}/{i}"), ..message("tool", 20) })
                            .collect();
                        sessions.session_append_turn("s1", &ms, Some((1, 1, 0.0)), 20).unwrap();
                    }
                });
            }
        });
        let all = store.session_messages("s1", 0).unwrap();
        assert_eq!(all.iter().map(|m| m.seq).collect::<Vec<_>>(), (1..=124).collect::<Vec<_>>());
        for turn in all[4..].chunks(3) {
            let prefix = |m: &MessageRecord| m.content.rsplit_once('/').map(|(p, _)| p.to_owned());
            assert!(turn.iter().all(|m| prefix(m) == prefix(&turn[0])), "a turn's messages are together: {turn:?}");
        }
        assert_eq!(store.session("s1").unwrap().unwrap().input_tokens, 141);
    });
}

#[test]
fn a_session_keeps_the_tools_its_run_was_limited_to() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let limited = SessionRecord { only_tools: Some(vec!["read".into(), "write".into()]), ..session("s1", 10) };
        store.session_create(&limited).unwrap();
        store.session_create(&session("s2", 11)).unwrap();
        let none = SessionRecord { only_tools: Some(Vec::new()), ..session("s3", 12) };
        store.session_create(&none).unwrap();
        let got = |id: &str| store.session(id).unwrap().unwrap().only_tools;
        assert_eq!(got("s1"), Some(vec!["read".to_owned(), "write".to_owned()]));
        assert_eq!(got("s2"), None, "not limited");
        assert_eq!(got("s3"), Some(Vec::new()), "limited to no tool is not \"every tool\"");
        // A duplicate id fails whole: neither the session nor its tools are written twice.
        assert!(store.session_create(&SessionRecord { only_tools: None, ..limited }).is_err());
        assert_eq!(got("s1"), Some(vec!["read".to_owned(), "write".to_owned()]));
    });
}

#[test]
fn sessions_are_filtered_and_listed_newest_first() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        store.session_create(&session("s1", 10)).unwrap();
        store
            .session_create(&SessionRecord {
                parent: Some("s1".into()),
                kind: "subagent".into(),
                agent: "helper".into(),
                ..session("s2", 11)
            })
            .unwrap();
        store.session_create(&SessionRecord { user: "bob".into(), ..session("s3", 12) }).unwrap();
        store.session_finish("s3", "done", Some("ok"), None, 13).unwrap();
        let ids =
            |f: SessionFilter<'_>| -> Vec<String> { store.sessions(&f).unwrap().into_iter().map(|s| s.id).collect() };
        assert_eq!(ids(SessionFilter::default()), ["s3", "s2", "s1"], "limit 0: all, newest first");
        assert_eq!(ids(SessionFilter { limit: 2, ..Default::default() }), ["s3", "s2"]);
        assert_eq!(ids(SessionFilter { parent: Some("s1"), ..Default::default() }), ["s2"]);
        assert_eq!(ids(SessionFilter { agent: Some("helper"), ..Default::default() }), ["s2"]);
        assert_eq!(ids(SessionFilter { kind: Some("run"), ..Default::default() }), ["s3", "s1"]);
        assert_eq!(ids(SessionFilter { user: Some("bob"), ..Default::default() }), ["s3"]);
        assert_eq!(ids(SessionFilter { status: Some("running"), ..Default::default() }), ["s2", "s1"]);
        assert_eq!(ids(SessionFilter { status: Some("running"), agent: Some("main"), ..Default::default() }), ["s1"]);
    });
}

#[test]
fn finished_idle_sessions_are_archived_and_live_ones_are_not_orphans() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        store.session_create(&session("s1", 10)).unwrap();
        store.session_create(&session("s2", 11)).unwrap();
        store.session_create(&session("s3", 12)).unwrap();
        store.session_finish("s1", "done", Some("ok"), None, 15).unwrap();
        store.session_finish("s3", "stopped", None, None, 500).unwrap();
        assert_eq!(store.sessions_archive_idle(100).unwrap(), 1, "only the finished one idle since before 100");
        assert_eq!(store.session("s1").unwrap().unwrap().status, "archived");
        assert_eq!(store.session("s3").unwrap().unwrap().status, "stopped");
        // s2 is run by this live process: not an orphan, even seen from another connection.
        assert_eq!(db.connect().sessions.sessions_fail_orphans(200).unwrap(), 0);
        assert_eq!(store.session("s2").unwrap().unwrap().status, "running");
    });
}

#[test]
fn a_handoff_route_is_set_replaced_found_both_ways_and_cleared() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let route = HandoffRoute {
            conversation: "s1".into(),
            user: "u".into(),
            from_agent: "a".into(),
            to_agent: "b".into(),
            to_session: "s2".into(),
            reason: "billing".into(),
            created_ms: 1,
        };
        store.handoff_set(&route).unwrap();
        assert_eq!(store.handoff_route("s1").unwrap().as_ref(), Some(&route));
        assert_eq!(store.handoff_to("s2").unwrap().map(|r| r.conversation), Some("s1".into()));
        store.handoff_set(&HandoffRoute { to_agent: "c".into(), to_session: "s3".into(), ..route.clone() }).unwrap();
        assert_eq!(store.handoff_route("s1").unwrap().map(|r| r.to_session), Some("s3".into()), "replaced");
        assert!(store.handoff_to("s2").unwrap().is_none());
        assert_eq!(db.connect().sessions.handoff_to("s3").unwrap().map(|r| r.to_agent), Some("c".into()));
        assert!(store.handoff_clear("s1").unwrap());
        assert!(store.handoff_route("s1").unwrap().is_none());
        assert!(!store.handoff_clear("s1").unwrap());
    });
}

/// Nodes (connections of their own) appending to one session at once: every message gets its
/// own number, 1 to N, none lost or doubled.
#[test]
fn appenders_on_several_connections_never_share_a_number() {
    on_every_backend_of(Area::Sessions, |db| {
        db.connect().sessions.session_create(&session("shared", 1)).unwrap();
        let appenders: Vec<_> = (0..4)
            .map(|node| {
                let store = db.connect().sessions;
                std::thread::spawn(move || {
                    let seqs: Vec<i64> = (0..20)
                        .map(|i| store.session_append("shared", &message("user", node * 100 + i)).unwrap())
                        .collect();
                    seqs.len()
                })
            })
            .collect();
        let appended: usize = appenders.into_iter().map(|t| t.join().unwrap()).sum();
        let store = db.connect().sessions;
        let seqs: Vec<i64> = store.session_messages("shared", 0).unwrap().iter().map(|m| m.seq).collect();
        assert_eq!(appended, 80);
        assert_eq!(seqs, (1..=80).collect::<Vec<_>>());
        assert_eq!(store.session("shared").unwrap().unwrap().message_count, 80);
    });
}
