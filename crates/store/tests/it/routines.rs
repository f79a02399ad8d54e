//! [`RoutineStore`]: routines, their fires (one per scheduled instant, across connections), the
//! scheduler lease and seen webhook signatures.

use std::sync::{Arc, Barrier};

use toolgate_store::{RoutineFire, StoredRoutine};

use crate::{Area, on_every_backend_of};

fn routine(name: &str, next: Option<i64>) -> StoredRoutine {
    StoredRoutine {
        name: name.into(),
        owner: "ann".into(),
        spec: serde_json::json!({"trigger": "cron", "schedule": "* * * * *"}),
        enabled: true,
        next_fire_ms: next,
        last_fire_ms: None,
        created_ms: 1,
        updated_ms: 1,
        grants_agent: None,
    }
}

#[test]
fn the_gateway_principal_a_routine_acts_for_is_kept_and_changed_with_it() {
    on_every_backend_of(Area::Routines, |db| {
        let s = db.connect().routines;
        let mut r = routine("g", Some(1_000));
        r.grants_agent = Some("ann-ci".into());
        assert!(s.routine_insert(&r).unwrap());
        let read = s.routine_get("g").unwrap().unwrap();
        assert_eq!(read.grants_agent.as_deref(), Some("ann-ci"));
        assert_eq!(s.routines_due(5_000, 10).unwrap()[0].grants_agent.as_deref(), Some("ann-ci"));
        r.grants_agent = Some("main".into());
        assert!(s.routine_update(&r).unwrap());
        assert_eq!(s.routine_list(Some("ann")).unwrap()[0].grants_agent.as_deref(), Some("main"));
        assert!(s.routine_insert(&routine("local", None)).unwrap());
        assert_eq!(s.routine_get("local").unwrap().unwrap().grants_agent, None, "made outside a gateway");
    });
}

fn fire(name: &str, at: i64) -> RoutineFire {
    RoutineFire {
        routine: name.into(),
        scheduled_ms: at,
        fired_ms: at + 5,
        trigger: "cron".into(),
        status: "claimed".into(),
        job_id: None,
        detail: None,
    }
}

#[test]
fn routines_are_created_once_listed_without_advancing_and_deleted() {
    on_every_backend_of(Area::Routines, |db| {
        let s = db.connect().routines;
        assert!(s.routine_insert(&routine("a", Some(1_000))).unwrap());
        assert!(!s.routine_insert(&routine("a", Some(5))).unwrap(), "a second insert of one name is refused");
        assert_eq!(s.routine_get("a").unwrap().unwrap().next_fire_ms, Some(1_000));
        let mut other = routine("b", None);
        other.owner = "bob".into();
        s.routine_insert(&other).unwrap();
        assert_eq!(s.routine_list(None).unwrap().len(), 2);
        assert_eq!(s.routine_list(Some("bob")).unwrap()[0].name, "b");
        // Listing twice leaves next_fire where it was.
        s.routine_list(None).unwrap();
        assert_eq!(s.routine_get("a").unwrap().unwrap().next_fire_ms, Some(1_000));
        let mut changed = routine("a", Some(2_000));
        changed.enabled = false;
        assert!(s.routine_update(&changed).unwrap());
        assert!(!s.routine_update(&routine("zz", None)).unwrap());
        assert!(s.routines_due(10_000, 10).unwrap().is_empty(), "a disabled routine is never due");
        assert!(s.routine_delete("a").unwrap());
        assert!(!s.routine_delete("a").unwrap());
    });
}

#[test]
fn a_fire_is_claimed_once_and_advances_next_fire() {
    on_every_backend_of(Area::Routines, |db| {
        let s = db.connect().routines;
        s.routine_insert(&routine("r", Some(60_000))).unwrap();
        assert_eq!(s.routines_due(59_999, 10).unwrap().len(), 0);
        assert_eq!(s.routines_due(60_000, 10).unwrap().len(), 1);
        assert!(s.routine_fire_claim(&fire("r", 60_000), Some((60_000, Some(120_000)))).unwrap());
        // The same instant again, and a stale expectation: both refused, nothing written.
        assert!(!s.routine_fire_claim(&fire("r", 60_000), Some((60_000, Some(120_000)))).unwrap());
        assert!(!s.routine_fire_claim(&fire("r", 60_000), None).unwrap());
        let r = s.routine_get("r").unwrap().unwrap();
        assert_eq!((r.next_fire_ms, r.last_fire_ms), (Some(120_000), Some(60_000)));
        s.routine_fire_set("r", 60_000, "started", Some("job-1"), None).unwrap();
        let fires = s.routine_fires("r", 10).unwrap();
        assert_eq!(fires.len(), 1);
        assert_eq!((fires[0].status.as_str(), fires[0].job_id.as_deref()), ("started", Some("job-1")));
        assert_eq!(s.routine_fires_since(0).unwrap(), 1);
        assert!(s.routine_fires_in("claimed", 10).unwrap().is_empty());
        // A skipped missed fire only moves next_fire, and only from the expected value.
        assert!(s.routine_advance("r", Some(120_000), Some(180_000)).unwrap());
        assert!(!s.routine_advance("r", Some(120_000), Some(240_000)).unwrap());
    });
}

#[test]
fn two_connections_racing_for_one_fire_claim_it_once() {
    on_every_backend_of(Area::Routines, |db| {
        db.connect().routines.routine_insert(&routine("race", Some(1_000))).unwrap();
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let s = db.connect().routines;
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    s.routine_fire_claim(&fire("race", 1_000), Some((1_000, Some(2_000)))).unwrap()
                })
            })
            .collect();
        let won = handles.into_iter().map(|h| h.join().unwrap()).filter(|w| *w).count();
        assert_eq!(won, 1);
        assert_eq!(db.connect().routines.routine_fires("race", 10).unwrap().len(), 1);
    });
}

#[test]
fn the_scheduler_lease_has_one_holder_until_it_expires() {
    on_every_backend_of(Area::Routines, |db| {
        let (a, b) = (db.connect().routines, db.connect().routines);
        assert!(a.scheduler_lease("ws", "A", 0, 1_000).unwrap());
        assert!(!b.scheduler_lease("ws", "B", 500, 1_000).unwrap());
        assert!(a.scheduler_lease("ws", "A", 900, 1_000).unwrap(), "the holder renews");
        assert!(!b.scheduler_lease("ws", "B", 1_500, 1_000).unwrap(), "renewed until 1,900");
        assert!(b.scheduler_lease("ws", "B", 1_900, 1_000).unwrap(), "expired: taken over");
        assert!(!a.scheduler_lease("ws", "A", 2_000, 1_000).unwrap());
        b.scheduler_release("ws", "B").unwrap();
        assert!(a.scheduler_lease("ws", "A", 2_000, 1_000).unwrap());
    });
}

#[test]
fn a_webhook_signature_is_accepted_once_until_it_expires() {
    on_every_backend_of(Area::Routines, |db| {
        let s = db.connect().routines;
        assert!(s.webhook_seen("hook", "sig1", 0, 300_000).unwrap());
        assert!(!s.webhook_seen("hook", "sig1", 1_000, 301_000).unwrap(), "a replay");
        assert!(s.webhook_seen("other", "sig1", 1_000, 301_000).unwrap(), "per routine");
        assert!(s.webhook_seen("hook", "sig1", 300_000, 600_000).unwrap(), "swept once expired");
    });
}

#[test]
fn a_batch_of_fires_is_claimed_in_one_transaction_each_on_its_own_terms() {
    on_every_backend_of(Area::Routines, |db| {
        let s = db.connect().routines;
        for name in ["a", "b", "c", "d"] {
            s.routine_insert(&routine(name, Some(60_000))).unwrap();
        }
        // `b` was fired already (another scheduler), `c`'s next fire moved on since it was read.
        assert!(s.routine_fire_claim(&fire("b", 60_000), Some((60_000, Some(120_000)))).unwrap());
        assert!(s.routine_advance("c", Some(60_000), Some(90_000)).unwrap());
        let mut skipped = fire("d", 60_000);
        skipped.status = "skipped".into();
        let claims = vec![
            (fire("a", 60_000), Some((60_000, Some(120_000)))),
            (fire("b", 60_000), Some((60_000, Some(120_000)))),
            (fire("c", 60_000), Some((60_000, Some(120_000)))),
            (skipped, Some((60_000, Some(120_000)))),
        ];
        assert_eq!(s.routine_fires_claim(&claims).unwrap(), vec![true, false, false, true]);
        // The losers left nothing: `c` keeps its moved next fire and has no fire row.
        let next = |n: &str| s.routine_get(n).unwrap().unwrap().next_fire_ms;
        assert_eq!(
            (next("a"), next("b"), next("c"), next("d")),
            (Some(120_000), Some(120_000), Some(90_000), Some(120_000))
        );
        assert!(s.routine_fires("c", 10).unwrap().is_empty());
        assert_eq!(s.routine_fires("b", 10).unwrap().len(), 1);
        assert_eq!(s.routine_fires_since(0).unwrap(), 2, "a and b; d's skipped fire does not count");
        // Recent fires of several routines in one read, in the order asked, newest first.
        s.routine_fire_claim(&fire("a", 120_000), Some((120_000, Some(180_000)))).unwrap();
        let recent = s.routine_fires_recent(&["c", "a", "zz"], 8).unwrap();
        let at: Vec<Vec<i64>> = recent.iter().map(|v| v.iter().map(|f| f.scheduled_ms).collect()).collect();
        assert_eq!(at, vec![vec![], vec![120_000, 60_000], vec![]]);
        // Statuses of several fires in one transaction; a `None` job or detail keeps the old one.
        let mut a1 = fire("a", 60_000);
        a1.status = "started".into();
        a1.job_id = Some("job-a".into());
        let mut a2 = fire("a", 120_000);
        a2.status = "failed".into();
        a2.detail = Some("no agent".into());
        s.routine_fires_set(&[a1, a2]).unwrap();
        let mut b = fire("b", 60_000);
        b.status = "completed".into();
        b.job_id = None;
        b.detail = Some("the answer".into());
        s.routine_fire_set("b", 60_000, "started", Some("job-b"), None).unwrap();
        s.routine_fires_set(&[b]).unwrap();
        let got = |n: &str, at: i64| {
            let f = s.routine_fires(n, 10).unwrap().into_iter().find(|f| f.scheduled_ms == at).unwrap();
            (f.status, f.job_id, f.detail)
        };
        assert_eq!(got("a", 60_000), ("started".into(), Some("job-a".into()), None));
        assert_eq!(got("a", 120_000), ("failed".into(), None, Some("no agent".into())));
        assert_eq!(got("b", 60_000), ("completed".into(), Some("job-b".into()), Some("the answer".into())));
        assert!(s.routine_fires_claim(&[]).unwrap().is_empty());
    });
}

#[test]
fn two_connections_racing_with_batches_claim_each_fire_once() {
    on_every_backend_of(Area::Routines, |db| {
        let names: Vec<String> = (0..50).map(|i| format!("r{i}")).collect();
        for n in &names {
            db.connect().routines.routine_insert(&routine(n, Some(1_000))).unwrap();
        }
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = db.connect().routines;
                let barrier = Arc::clone(&barrier);
                let claims: Vec<_> = names.iter().map(|n| (fire(n, 1_000), Some((1_000, Some(2_000))))).collect();
                std::thread::spawn(move || {
                    barrier.wait();
                    s.routine_fires_claim(&claims).unwrap()
                })
            })
            .collect();
        let results: Vec<Vec<bool>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for i in 0..names.len() {
            assert_eq!(results.iter().filter(|r| r[i]).count(), 1, "{} claimed once", names[i]);
        }
        assert_eq!(db.connect().routines.routine_fires_since(0).unwrap(), 50);
    });
}

#[test]
fn schedulers_racing_for_a_free_or_expired_lease_get_one_holder() {
    on_every_backend_of(Area::Routines, |db| {
        for (round, now) in [(0, 0), (1, 5_000)] {
            // Round 0: nobody holds it; round 1: round 0's holder let it expire.
            let barrier = Arc::new(Barrier::new(8));
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (s, barrier) = (db.connect().routines, Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        barrier.wait();
                        s.scheduler_lease("ws", &format!("node-{round}-{i}"), now, 1_000).unwrap()
                    })
                })
                .collect();
            let won = handles.into_iter().map(|h| h.join().unwrap()).filter(|w| *w).count();
            assert_eq!(won, 1, "round {round}");
        }
    });
}

#[test]
fn one_webhook_request_reaching_several_nodes_at_once_is_accepted_once() {
    on_every_backend_of(Area::Routines, |db| {
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (s, barrier) = (db.connect().routines, Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    s.webhook_seen("hook", "sig", 1_000, 301_000).unwrap()
                })
            })
            .collect();
        let accepted = handles.into_iter().map(|h| h.join().unwrap()).filter(|a| *a).count();
        assert_eq!(accepted, 1);
    });
}
