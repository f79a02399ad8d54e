//! [`SessionStore`]'s team parts: task boards (atomic claims with leases, unblocking, filters,
//! orders, full-text search) and the mailbox (unread-only reads, broadcasts, history).

use toolgate_store::{SessionStore, TaskFilter, TaskOrder, TeamMessage, TeamTask};

use crate::{Area, on_every_backend_of};

fn task(subject: &str, priority: i64, blocked_by: Vec<i64>) -> TeamTask {
    TeamTask {
        team: "t".into(),
        subject: subject.into(),
        description: format!("details of {subject}"),
        priority,
        blocked_by,
        created_ms: 1,
        ..TeamTask::default()
    }
}

/// A claim at time 1 whose lease runs to 1000.
fn claim(store: &dyn SessionStore, id: i64, owner: &str) -> Option<TeamTask> {
    store.team_task_claim("t", Some(id), owner, owner, 1, 1000).unwrap()
}

fn subjects(tasks: Vec<TeamTask>) -> Vec<String> {
    tasks.into_iter().map(|t| t.subject).collect()
}

fn status(store: &dyn SessionStore, id: i64) -> String {
    let all = store.team_tasks("t", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
    all.into_iter().find(|t| t.id == id).unwrap().status
}

#[test]
fn team_tasks_are_claimed_once_and_completing_one_unblocks_others() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let a = store.team_task_create(&task("a", 0, vec![])).unwrap();
        let b = store.team_task_create(&task("b", 0, vec![a.id])).unwrap();
        assert_eq!((a.status.as_str(), b.status.as_str()), ("pending", "blocked"));
        assert_eq!((b.team.as_str(), b.subject.as_str(), b.blocked_by.as_slice()), ("t", "b", &[a.id][..]));
        assert!(claim(&*store, b.id, "x").is_none(), "a blocked task cannot be claimed");
        assert!(
            store.team_task_claim("other team", Some(a.id), "x", "session of x", 1, 2).unwrap().is_none(),
            "another team's id"
        );
        // Many claimers, each on its own connection: exactly one wins.
        let connections: Vec<_> = (0..16).map(|_| db.connect().sessions).collect();
        let winners: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = connections
                .into_iter()
                .enumerate()
                .map(|(i, sessions)| {
                    scope.spawn(move || {
                        let me = format!("agent{i}");
                        sessions.team_task_claim("t", Some(a.id), &me, &me, 5, 500).unwrap().map(|t| (t, me))
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .map(|(t, me)| {
                    assert_eq!((t.status.as_str(), t.owner.as_deref()), ("claimed", Some(me.as_str())));
                    assert_eq!((t.claimed_ms, t.lease_until_ms), (Some(5), Some(500)), "the claim and its lease");
                    me
                })
                .collect()
        });
        assert_eq!(winners.len(), 1, "{winners:?}");
        let owner = &winners[0];
        assert!(claim(&*store, a.id, "late").is_none(), "claimed already");
        assert!(store.team_task_complete("t", a.id, "someone-else", "x").unwrap().is_none());
        let done = store.team_task_complete("t", a.id, owner, "all done").unwrap().unwrap();
        assert_eq!((done.status.as_str(), done.result.as_deref()), ("done", Some("all done")));
        assert_eq!(done.lease_until_ms, None, "a done task has no lease");
        assert!(store.team_task_complete("t", a.id, owner, "again").unwrap().is_none(), "done already");
        assert_eq!(status(&*store, b.id), "pending", "b unblocked");
    });
}

#[test]
fn claiming_without_an_id_takes_the_next_pending_task() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        assert!(store.team_task_claim("t", None, "x", "session of x", 1, 2).unwrap().is_none(), "nothing to claim");
        let low = store.team_task_create(&task("low", 0, vec![])).unwrap();
        let high = store.team_task_create(&task("high", 5, vec![])).unwrap();
        store.team_task_create(&task("blocked", 9, vec![low.id])).unwrap();
        let got = store.team_task_claim("t", None, "x", "session of x", 1, 2).unwrap().unwrap();
        assert_eq!(got.id, high.id, "highest priority first; a blocked task is never taken");
        assert_eq!(store.team_task_claim("t", None, "y", "session of y", 1, 2).unwrap().unwrap().id, low.id);
        assert!(store.team_task_claim("t", None, "z", "session of z", 1, 2).unwrap().is_none());
    });
}

#[test]
fn a_task_waits_for_every_task_it_is_blocked_by() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let a = store.team_task_create(&task("a", 0, vec![])).unwrap();
        let b = store.team_task_create(&task("b", 0, vec![])).unwrap();
        let c = store.team_task_create(&task("c", 0, vec![a.id, b.id])).unwrap();
        assert_eq!(c.status, "blocked");
        claim(&*store, a.id, "x").unwrap();
        store.team_task_complete("t", a.id, "x", "").unwrap().unwrap();
        assert_eq!(status(&*store, c.id), "blocked", "b is not done");
        claim(&*store, b.id, "y").unwrap();
        store.team_task_complete("t", b.id, "y", "").unwrap().unwrap();
        assert_eq!(status(&*store, c.id), "pending");
        // Blocked only by done tasks: pending from the start.
        assert_eq!(store.team_task_create(&task("d", 0, vec![a.id])).unwrap().status, "pending");
    });
}

#[test]
fn team_tasks_are_filtered_and_ordered() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        for (i, (subject, priority)) in [("low", 0), ("high", 5), ("low too", 0), ("mid", 2)].into_iter().enumerate() {
            store.team_task_create(&TeamTask { created_ms: 10 + i as i64, ..task(subject, priority, vec![]) }).unwrap();
        }
        store.team_task_create(&TeamTask { team: "other".into(), ..task("elsewhere", 9, vec![]) }).unwrap();
        let list = |f, o, limit| subjects(store.team_tasks("t", f, o, limit).unwrap());
        assert_eq!(list(TaskFilter::All, TaskOrder::Priority, 0), ["high", "mid", "low", "low too"]);
        assert_eq!(list(TaskFilter::All, TaskOrder::Newest, 0), ["mid", "low too", "high", "low"]);
        assert_eq!(list(TaskFilter::All, TaskOrder::Priority, 2), ["high", "mid"], "limit");
        let high = store.team_task_claim("t", None, "x", "session of x", 1, 2).unwrap().unwrap();
        store.team_task_complete("t", high.id, "x", "shipped").unwrap().unwrap();
        claim(&*store, store.team_tasks("t", TaskFilter::Active, TaskOrder::Priority, 1).unwrap()[0].id, "y").unwrap();
        assert_eq!(list(TaskFilter::Active, TaskOrder::Priority, 0), ["mid", "low", "low too"], "pending and claimed");
        assert_eq!(list(TaskFilter::Completed, TaskOrder::Priority, 0), ["high"]);
        assert!(store.team_tasks("nobody", TaskFilter::All, TaskOrder::Priority, 0).unwrap().is_empty());
    });
}

#[test]
fn search_is_full_text_over_subject_description_and_result_and_takes_words_literally() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let mk = |subject: &str, description: &str| {
            store.team_task_create(&TeamTask { description: description.into(), ..task(subject, 0, vec![]) }).unwrap()
        };
        let parser = mk("Write the parser", "tokens and grammar for the config format");
        mk("Ship the release", "tag, build and upload the binaries");
        mk("Parser benchmarks", "measure the parser on large config files");
        store.team_task_create(&TeamTask { team: "other".into(), ..task("parser elsewhere", 0, vec![]) }).unwrap();
        let search = |q: &str| subjects(store.team_tasks_search("t", q, 10).unwrap());
        let found = search("PARSER config");
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.contains(&"Write the parser".to_owned()) && !found.contains(&"parser elsewhere".to_owned()));
        assert_eq!(search("uploading binaries"), ["Ship the release"], "stemmed (porter)");
        assert_eq!(search("benchmarks measure large parser"), ["Parser benchmarks", "Write the parser"], "bm25");
        // The result is searched once the task is done (the index follows updates).
        assert!(search("flamegraph").is_empty());
        store.team_task_claim("t", Some(parser.id), "x", "session of x", 1, 2).unwrap().unwrap();
        store.team_task_complete("t", parser.id, "x", "done; see the flamegraph").unwrap().unwrap();
        assert_eq!(search("flamegraph"), ["Write the parser"]);
        // Hostile queries: FTS5 syntax is taken as words, never as syntax or an error.
        for q in [
            "\"",
            "\"unterminated",
            "pars*",
            "NEAR(parser config)",
            "-parser",
            "parser OR",
            "AND",
            "col:parser",
            "subject:ship",
            "^ship",
            "(((",
            "parser\" OR \"ship",
            "",
            "   ",
            "*",
            "'",
            ";DROP TABLE team_tasks;--",
        ] {
            let got = store.team_tasks_search("t", q, 10);
            assert!(got.is_ok(), "{q:?}: {got:?}");
        }
        assert!(search("pars*").is_empty(), "`*` is not a prefix operator");
        assert_eq!(search("subject:ship"), ["Ship the release"], "`subject:` is a word, not a column filter");
        assert_eq!(search("\"").len(), 0);
        assert_eq!(search("-parser").len(), 2, "`-` is not NOT");
        assert_eq!(store.team_tasks_search("t", "parser", 1).unwrap().len(), 1, "limit");
    });
}

#[test]
fn a_lapsed_lease_puts_the_task_back_and_renewing_keeps_it() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let a = store.team_task_create(&task("a", 0, vec![])).unwrap();
        let b = store.team_task_create(&task("b", 0, vec![])).unwrap();
        store.team_task_claim("t", Some(a.id), "crashed", "session of crashed", 100, 200).unwrap().unwrap();
        store.team_task_claim("t", Some(b.id), "alive", "session of alive", 100, 200).unwrap().unwrap();
        assert!(store.team_tasks_expire("t", 150).unwrap().is_empty(), "not yet");
        assert_eq!(store.team_tasks_renew("t", "session of alive", 400).unwrap(), 1);
        assert_eq!(store.team_tasks_renew("t", "alive", 400).unwrap(), 0, "by session, not by name");
        // Sweepers on several connections at once: the lapsed task is returned to one of them.
        let connections: Vec<_> = (0..4).map(|_| db.connect().sessions).collect();
        let swept: Vec<TeamTask> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                connections.into_iter().map(|s| scope.spawn(move || s.team_tasks_expire("t", 300).unwrap())).collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(swept.len(), 1, "{swept:?}");
        assert_eq!((swept[0].id, swept[0].owner.as_deref()), (a.id, Some("crashed")), "as it was, with its owner");
        let back = store.team_tasks("t", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
        let a_now = back.iter().find(|t| t.id == a.id).unwrap();
        assert_eq!((a_now.status.as_str(), a_now.owner.as_deref(), a_now.lease_until_ms), ("pending", None, None));
        assert_eq!(status(&*store, b.id), "claimed", "renewed");
        assert!(store.team_task_complete("t", a.id, "crashed", "late").unwrap().is_none(), "its claim is gone");
        assert_eq!(
            store.team_task_claim("t", None, "next", "session of next", 301, 900).unwrap().unwrap().id,
            a.id,
            "claimable again"
        );
        assert!(store.team_tasks_expire("other", 10_000).unwrap().is_empty(), "per team");
    });
}

/// Leases are held by the claiming session: a member whose run crashed holding a task and was
/// started again for another renews only the new run's claim, so the crashed one lapses. A
/// lapsed claim can be taken at once by a claim, without a sweeper.
#[test]
fn leases_are_renewed_by_the_claiming_session_and_a_lapsed_claim_can_be_taken() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let one = store.team_task_create(&task("one", 5, vec![])).unwrap();
        let two = store.team_task_create(&task("two", 0, vec![])).unwrap();
        let held = store.team_task_claim("t", Some(one.id), "w1", "run-1", 100, 200).unwrap().unwrap();
        assert_eq!(held.claim_session.as_deref(), Some("run-1"));
        // run-1 crashed; w1 runs again as run-2 and claims task two.
        store.team_task_claim("t", Some(two.id), "w1", "run-2", 150, 250).unwrap().unwrap();
        assert_eq!(store.team_tasks_renew("t", "run-2", 1_000).unwrap(), 1, "only run-2's own claim");
        let lease = |id: i64| {
            let all = store.team_tasks("t", TaskFilter::All, TaskOrder::Priority, 0).unwrap();
            all.into_iter().find(|t| t.id == id).unwrap().lease_until_ms
        };
        assert_eq!((lease(one.id), lease(two.id)), (Some(200), Some(1_000)), "run-1's claim not renewed");
        // Before its lease ends, nobody takes task one; after, a claim takes it over directly.
        assert!(store.team_task_claim("t", Some(one.id), "w2", "run-3", 199, 900).unwrap().is_none());
        assert!(store.team_task_claim("t", None, "w2", "run-3", 199, 900).unwrap().is_none(), "nothing claimable");
        let taken = store.team_task_claim("t", None, "w2", "run-3", 201, 900).unwrap().unwrap();
        assert_eq!(
            (taken.id, taken.owner.as_deref(), taken.claim_session.as_deref()),
            (one.id, Some("w2"), Some("run-3"))
        );
        assert_eq!(taken.lease_until_ms, Some(900));
        assert!(store.team_tasks_expire("t", 500).unwrap().is_empty(), "taken over, not lapsed");
        assert!(store.team_task_complete("t", one.id, "w2", "done").unwrap().is_some());
        // A task that is claimed and still leased, done or blocked is never taken.
        assert!(store.team_task_claim("t", Some(two.id), "w2", "run-3", 999, 2_000).unwrap().is_none());
        assert!(store.team_task_claim("t", Some(one.id), "w2", "run-3", 5_000, 9_000).unwrap().is_none(), "done");
        // The posting session and user are kept with the task.
        let posted = store
            .team_task_create(&TeamTask {
                posted_session: Some("lead-session".into()),
                posted_user: Some("alice".into()),
                ..task("three", 0, vec![])
            })
            .unwrap();
        assert_eq!(
            (posted.posted_session.as_deref(), posted.posted_user.as_deref()),
            (Some("lead-session"), Some("alice"))
        );
    });
}

fn send(store: &dyn SessionStore, from: &str, to: Option<&str>, content: &str) -> i64 {
    store
        .team_message_send(&TeamMessage {
            team: "t".into(),
            from: from.into(),
            to: to.map(Into::into),
            content: content.into(),
            ts_ms: 1,
            ..TeamMessage::default()
        })
        .unwrap()
}

#[test]
fn reading_the_mailbox_returns_unread_messages_once() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        let unread = |reader: &str| -> Vec<String> {
            store.team_messages_unread("t", reader, 0).unwrap().into_iter().map(|m| m.content).collect()
        };
        send(&*store, "lead", None, "hi all");
        let private = send(&*store, "lead", Some("y"), "for y");
        send(&*store, "z", Some("x"), "for x");
        assert_eq!(unread("y"), ["hi all", "for y"]);
        assert!(unread("y").is_empty(), "read once");
        assert_eq!(unread("x"), ["hi all", "for x"]);
        assert!(unread("lead").is_empty(), "a broadcast does not come back to its sender");
        send(&*store, "y", None, "from y to all");
        assert!(unread("y").is_empty(), "nor does its own broadcast");
        assert_eq!(unread("lead"), ["from y to all"]);
        assert_eq!(unread("x"), ["from y to all"], "only the new one");
        let got = store.team_messages("t", "y", None).unwrap();
        assert_eq!(got.len(), 3, "the history is still there: {got:?}");
        assert_eq!((got[1].id, got[1].from.as_str(), got[1].to.as_deref()), (private, "lead", Some("y")));
        // A limit leaves the rest unread.
        for i in 0..5 {
            send(&*store, "lead", None, &format!("m{i}"));
        }
        let first: Vec<String> =
            store.team_messages_unread("t", "w", 3).unwrap().into_iter().map(|m| m.content).collect();
        assert_eq!(first, ["hi all", "from y to all", "m0"]);
        assert_eq!(unread("w"), ["m1", "m2", "m3", "m4"]);
        assert!(store.team_messages_unread("other", "w", 0).unwrap().is_empty(), "per team");
    });
}

#[test]
fn concurrent_readers_of_one_member_never_get_a_message_twice() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        for i in 0..200 {
            send(&*store, "lead", if i % 2 == 0 { None } else { Some("w") }, &format!("m{i}"));
        }
        let connections: Vec<_> = (0..4).map(|_| db.connect().sessions).collect();
        let mut got: Vec<i64> = std::thread::scope(|scope| {
            let handles: Vec<_> = connections
                .into_iter()
                .map(|s| {
                    scope.spawn(move || {
                        let mut ids = Vec::new();
                        loop {
                            let page = s.team_messages_unread("t", "w", 7).unwrap();
                            if page.is_empty() {
                                return ids;
                            }
                            ids.extend(page.iter().map(|m| m.id));
                        }
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        got.sort_unstable();
        let n = got.len();
        got.dedup();
        assert_eq!((n, got.len()), (200, 200), "each message exactly once");
    });
}

#[test]
fn history_pages_forward_and_keeps_the_newest() {
    on_every_backend_of(Area::Sessions, |db| {
        let store = db.connect().sessions;
        send(&*store, "x", None, "hi all");
        for i in 0..250 {
            send(&*store, "x", None, &format!("m{i}"));
        }
        let newest = store.team_messages("t", "y", None).unwrap();
        assert_eq!(newest.len(), 200);
        assert_eq!(newest.last().unwrap().content, "m249", "the newest message is never cut off");
        assert!(newest.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
        let page = store.team_messages("t", "y", Some(0)).unwrap();
        assert_eq!((page[0].content.as_str(), page.len()), ("hi all", 200));
        let next = store.team_messages("t", "y", Some(page.last().unwrap().id)).unwrap();
        assert_eq!(next.len(), 51, "paging forward from the last id read");
        assert_eq!(store.team_messages_unread("t", "y", 0).unwrap().len(), 251, "history marks nothing read");
    });
}
