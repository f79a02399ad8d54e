//! [`JobStore`]: background jobs, their events and leases, across connections (processes).

use std::sync::{Arc, Barrier};

use toolgate_store::{JOB_INTERRUPTED, JobFilter, JobRecord};

use crate::{Area, on_every_backend_of};

fn job(id: &str, user: &str, owner: &str, created_ms: i64) -> JobRecord {
    JobRecord {
        id: id.into(),
        user: user.into(),
        session: "s1".into(),
        title: "t".into(),
        description: "d".into(),
        mode: "command".into(),
        credentials: vec!["GH_TOKEN".into()],
        state: "queued".into(),
        created_ms,
        lease_owner: Some(owner.into()),
        lease_until_ms: Some(created_ms + 1_000),
        ..JobRecord::default()
    }
}

#[test]
fn a_job_moves_forward_only_and_keeps_its_fields() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&job("a1", "ann", "p1", 100)).unwrap();
        let got = s.job("a1").unwrap().unwrap();
        assert_eq!(got.credentials, ["GH_TOKEN"]);
        assert_eq!(got.state, "queued");
        // Another process (lease owner) cannot start it.
        assert!(!s.job_start("a1", "p2", 200).unwrap());
        assert!(s.job_start("a1", "p1", 200).unwrap());
        assert!(!s.job_start("a1", "p1", 201).unwrap(), "started twice");
        assert!(s.job_finish("a1", "completed", Some("ok"), None, 300).unwrap());
        // An ended job keeps how it ended.
        assert!(!s.job_finish("a1", "cancelled", None, Some("late"), 400).unwrap());
        let got = s.job("a1").unwrap().unwrap();
        assert_eq!((got.state.as_str(), got.result.as_deref(), got.error), ("completed", Some("ok"), None));
        assert_eq!((got.started_ms, got.finished_ms, got.lease_owner), (Some(200), Some(300), None));
        let states: Vec<String> = s.job_events("a1", 0, 100).unwrap().into_iter().map(|e| e.text).collect();
        assert_eq!(states, ["queued", "running", "completed"]);
        assert!(s.job("nope").unwrap().is_none());
    });
}

#[test]
fn a_cancelled_queued_job_never_starts() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&job("c1", "ann", "p1", 100)).unwrap();
        assert!(s.job_finish("c1", "cancelled", None, Some("cancelled by ann"), 150).unwrap());
        assert!(!s.job_start("c1", "p1", 160).unwrap());
        assert_eq!(s.job("c1").unwrap().unwrap().state, "cancelled");
    });
}

#[test]
fn prefixes_lists_and_filters() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&job("abcd-1", "ann", "p", 1)).unwrap();
        s.job_create(&job("abcd-2", "ann", "p", 2)).unwrap();
        s.job_create(&job("abce-3", "bob", "p", 3)).unwrap();
        let ids = |v: Vec<JobRecord>| v.into_iter().map(|j| j.id).collect::<Vec<_>>();
        assert_eq!(ids(s.jobs_by_prefix("abcd", 10).unwrap()), ["abcd-1", "abcd-2"]);
        assert_eq!(ids(s.jobs_by_prefix("abce", 10).unwrap()), ["abce-3"]);
        // LIKE wildcards in a prefix are plain characters.
        assert!(s.jobs_by_prefix("ab%", 10).unwrap().is_empty());
        assert!(s.jobs_by_prefix("ab_d", 10).unwrap().is_empty());
        s.job_start("abcd-2", "p", 5).unwrap();
        let ann = JobFilter { user: Some("ann"), ..JobFilter::default() };
        assert_eq!(ids(s.jobs_list(&ann).unwrap()), ["abcd-2", "abcd-1"]);
        let running = JobFilter { user: Some("ann"), states: &["running"], ..JobFilter::default() };
        assert_eq!(ids(s.jobs_list(&running).unwrap()), ["abcd-2"]);
        let all = JobFilter { limit: 2, ..JobFilter::default() };
        assert_eq!(ids(s.jobs_list(&all).unwrap()), ["abce-3", "abcd-2"]);
        assert_eq!(s.jobs_by_state().unwrap(), [("queued".to_owned(), 2), ("running".to_owned(), 1)]);
    });
}

#[test]
fn a_lapsed_lease_ends_the_job_as_interrupted_once_and_a_renewed_one_lives() {
    on_every_backend_of(Area::Jobs, |db| {
        let (a, b) = (db.connect().jobs, db.connect().jobs);
        a.job_create(&job("dead", "ann", "p-dead", 100)).unwrap();
        a.job_create(&job("live", "ann", "p-live", 100)).unwrap();
        a.job_create(&job("queued", "ann", "p-dead", 100)).unwrap();
        a.job_start("dead", "p-dead", 150).unwrap();
        a.job_start("live", "p-live", 150).unwrap();
        assert_eq!(a.jobs_renew("p-live", 5_000).unwrap(), ["live"]);
        // Another process sweeps at 2 000: both of p-dead's jobs (running and queued) end.
        let mut gone = b.jobs_interrupt_expired(2_000).unwrap();
        gone.sort();
        assert_eq!(gone, ["dead", "queued"]);
        assert!(b.jobs_interrupt_expired(2_000).unwrap().is_empty(), "interrupted twice");
        let dead = a.job("dead").unwrap().unwrap();
        assert_eq!((dead.state.as_str(), dead.error.as_deref()), ("failed", Some(JOB_INTERRUPTED)));
        let last = a.job_events("dead", -1, 1).unwrap();
        assert!(last[0].text.starts_with("failed: interrupted"), "{last:?}");
        // The dead process, if it were only slow, can neither start nor end it now, nor renew it.
        assert!(!a.job_start("queued", "p-dead", 2_001).unwrap());
        assert!(!a.job_finish("dead", "completed", Some("late"), None, 2_001).unwrap());
        assert!(a.jobs_renew("p-dead", 9_000).unwrap().is_empty());
        assert_eq!(a.job("live").unwrap().unwrap().state, "running");
    });
}

#[test]
fn events_page_forward_and_from_the_end() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&job("e", "ann", "p", 1)).unwrap();
        for i in 0..10 {
            s.job_event("e", "output", &format!("line {i}"), 10 + i).unwrap();
        }
        let texts = |v: Vec<toolgate_store::JobEvent>| v.into_iter().map(|e| e.text).collect::<Vec<_>>();
        assert_eq!(texts(s.job_events("e", -1, 2).unwrap()), ["line 8", "line 9"]);
        let first = s.job_events("e", 0, 3).unwrap();
        assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(texts(s.job_events("e", 10, 5).unwrap()), ["line 9"]);
    });
}

#[test]
fn two_processes_racing_to_end_a_job_end_it_once() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&job("r", "ann", "p", 1)).unwrap();
        s.job_start("r", "p", 2).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let ends: Vec<bool> = ["completed", "cancelled"]
            .into_iter()
            .map(|state| {
                let (conn, barrier) = (db.connect().jobs, barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    conn.job_finish("r", state, None, None, 3).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(ends.iter().filter(|e| **e).count(), 1);
        let state_events = s.job_events("r", 0, 100).unwrap().into_iter().filter(|e| e.kind == "state").count();
        assert_eq!(state_events, 3, "queued, running, one end");
    });
}

/// A job stored without a lease (by a short-lived process).
fn unclaimed(id: &str, created_ms: i64) -> JobRecord {
    JobRecord {
        lease_owner: None,
        lease_until_ms: None,
        spec: r#"{"owner_agent":"cli"}"#.into(),
        ..job(id, "ann", "", created_ms)
    }
}

#[test]
fn an_unclaimed_job_waits_unswept_and_racing_servers_claim_it_once() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        s.job_create(&unclaimed("u1", 100)).unwrap();
        s.job_create(&unclaimed("u2", 200)).unwrap();
        // Nobody holds it, so nothing can interrupt it: it waits for a server.
        assert!(s.jobs_interrupt_expired(1_000_000).unwrap().is_empty());
        assert!(!s.job_start("u1", "p1", 300).unwrap(), "started without a claim");
        assert_eq!(s.job("u1").unwrap().unwrap().spec, r#"{"owner_agent":"cli"}"#);
        // Eight connections claim at once: each job goes to exactly one.
        let barrier = Arc::new(Barrier::new(8));
        let claims: Vec<Vec<String>> = (0..8)
            .map(|i| {
                let (conn, barrier) = (db.connect().jobs, barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    conn.jobs_claim(&format!("p{i}"), 400, 5_000, 10).unwrap().into_iter().map(|j| j.id).collect()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let mut all: Vec<String> = claims.iter().flatten().cloned().collect();
        all.sort();
        assert_eq!(all, ["u1", "u2"], "{claims:?}");
        let j = s.job("u1").unwrap().unwrap();
        let owner = j.lease_owner.clone().unwrap();
        assert_eq!((j.state.as_str(), j.lease_until_ms), ("queued", Some(5_000)));
        assert!(s.jobs_claim("late", 500, 6_000, 10).unwrap().is_empty(), "claimed twice");
        assert!(s.job_start("u1", &owner, 600).unwrap());
        let kinds: Vec<String> = s.job_events("u1", 0, 10).unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["state", "claim", "state"]);
        // Claimed, it has a lease like any job: lapsed, it is interrupted.
        assert_eq!(s.jobs_interrupt_expired(7_000).unwrap().len(), 2);
        // A claim takes at most `limit`, oldest first.
        for (i, t) in [(3, 30), (4, 10), (5, 20)] {
            s.job_create(&unclaimed(&format!("n{i}"), t)).unwrap();
        }
        let first: Vec<String> = s.jobs_claim("p", 8_000, 9_000, 2).unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(first, ["n4", "n5"]);
        assert!(s.jobs_claim("p", 8_000, 9_000, 0).unwrap().is_empty());
    });
}

#[test]
fn job_runners_announce_themselves_until_their_record_lapses() {
    on_every_backend_of(Area::Jobs, |db| {
        let (a, b) = (db.connect().jobs, db.connect().jobs);
        assert!(a.jobs_runners(0).unwrap().is_empty());
        a.jobs_runner_beat("srv-a", 1_000, 0).unwrap();
        b.jobs_runner_beat("srv-b", 2_000, 0).unwrap();
        assert_eq!(a.jobs_runners(500).unwrap(), ["srv-a", "srv-b"]);
        assert_eq!(a.jobs_runners(1_500).unwrap(), ["srv-b"]);
        a.jobs_runner_beat("srv-a", 3_000, 1_500).unwrap();
        assert_eq!(b.jobs_runners(1_600).unwrap(), ["srv-a", "srv-b"]);
        b.jobs_runner_gone("srv-b").unwrap();
        assert_eq!(b.jobs_runners(1_600).unwrap(), ["srv-a"]);
    });
}

#[test]
fn nodes_sweeping_at_once_end_each_dead_job_once_with_one_event() {
    on_every_backend_of(Area::Jobs, |db| {
        let s = db.connect().jobs;
        for i in 0..6 {
            s.job_create(&job(&format!("d{i}"), "ann", "p-dead", 100)).unwrap();
        }
        s.job_start("d0", "p-dead", 150).unwrap();
        // Four processes (nodes) find the lapsed leases at the same moment.
        let barrier = Arc::new(Barrier::new(4));
        let swept: Vec<Vec<String>> = (0..4)
            .map(|_| {
                let (conn, barrier) = (db.connect().jobs, barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    conn.jobs_interrupt_expired(2_000).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let mut all: Vec<String> = swept.iter().flatten().cloned().collect();
        all.sort();
        assert_eq!(all, ["d0", "d1", "d2", "d3", "d4", "d5"], "each once: {swept:?}");
        for i in 0..6 {
            let events = s.job_events(&format!("d{i}"), 0, 100).unwrap();
            let ends = events.iter().filter(|e| e.text.starts_with("failed: interrupted")).count();
            assert_eq!(ends, 1, "{events:?}");
            let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, (1..=events.len() as i64).collect::<Vec<_>>());
        }
        // Never queued again: no process can claim or start it.
        assert!(s.jobs_claim("p-new", 2_100, 9_000, 10).unwrap().is_empty());
        assert!(!s.job_start("d1", "p-dead", 2_100).unwrap());
    });
}

#[test]
fn events_written_at_once_by_several_processes_get_distinct_numbers() {
    on_every_backend_of(Area::Jobs, |db| {
        db.connect().jobs.job_create(&job("busy", "ann", "p", 1)).unwrap();
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (conn, barrier) = (db.connect().jobs, barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..10).map(|i| conn.job_event("busy", "output", &format!("{t}-{i}"), 10).unwrap()).count()
                })
            })
            .collect();
        let written: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let events = db.connect().jobs.job_events("busy", 0, 1_000).unwrap();
        assert_eq!(events.len(), written + 1, "the creation's event and every one written");
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=41).collect::<Vec<i64>>());
    });
}
