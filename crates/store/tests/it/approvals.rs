//! [`ApprovalStore`]: the approvals inbox — bound entries, the first decision wins, expiry, one
//! use per approval, and the history of every change.

use std::sync::{Arc, Barrier};

use toolgate_store::{ApprovalDecision, ApprovalFilter, ApprovalRecord, ApprovalStatus, DecideOutcome};

use crate::{Area, on_every_backend_of};

fn entry(user: &str, tool: &str, digest: &str, created_ms: i64) -> ApprovalRecord {
    ApprovalRecord {
        id: 0,
        call_id: format!("call-{created_ms}"),
        user: user.into(),
        agent: "main".into(),
        session: "s1".into(),
        tool: tool.into(),
        server: None,
        subject: "subject:rm -rf build".into(),
        args_digest: digest.into(),
        shown: serde_json::json!({"params": {"command": "rm -rf build <script>"}}),
        reason: "exec asks".into(),
        policy_revision: "rev1".into(),
        batch: Some("turn-1".into()),
        created_ms,
        expires_ms: created_ms + 1_000,
        status: ApprovalStatus::Pending,
        decided_by: None,
        decided_ms: None,
        message: None,
        notify_error: None,
        used_ms: None,
        fallback_ms: None,
    }
}

fn decision(status: ApprovalStatus, by: &str, at_ms: i64) -> ApprovalDecision {
    ApprovalDecision { status, by: by.into(), message: Some(format!("{by} says")), at_ms }
}

#[test]
fn an_entry_reads_back_whole_and_lists_by_filter() {
    on_every_backend_of(Area::Approvals, |db| {
        let inbox = db.connect().approvals;
        let a = inbox.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        let b = inbox.approval_add(&entry("bob", "write", "d2", 200)).unwrap();
        assert!(b > a, "ids grow");
        let mut expected = entry("ann", "exec", "d1", 100);
        expected.id = a;
        assert_eq!(inbox.approval_get(a).unwrap(), Some(expected));
        assert_eq!(inbox.approval_get(9_999).unwrap(), None);

        let ids = |f: ApprovalFilter| inbox.approvals(&f).unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(ApprovalFilter::default()), [b, a], "newest first");
        assert_eq!(ids(ApprovalFilter { user: Some("bob".into()), ..Default::default() }), [b]);
        assert_eq!(ids(ApprovalFilter { tool: Some("exec".into()), ..Default::default() }), [a]);
        assert_eq!(ids(ApprovalFilter { since_ms: Some(150), ..Default::default() }), [b]);
        assert_eq!(ids(ApprovalFilter { limit: Some(1), ..Default::default() }), [b]);
        assert_eq!(ids(ApprovalFilter { batch: Some("turn-1".into()), ..Default::default() }), [b, a]);
        // A filter value is data, never SQL.
        assert!(ids(ApprovalFilter { user: Some("x' OR '1'='1".into()), ..Default::default() }).is_empty());

        inbox.approval_decide(a, &decision(ApprovalStatus::Denied, "lee", 150)).unwrap();
        let pending = ApprovalFilter { status: vec![ApprovalStatus::Pending], ..Default::default() };
        assert_eq!(ids(pending), [b]);
    });
}

#[test]
fn the_first_decision_wins_and_later_ones_are_refused_in_the_history() {
    on_every_backend_of(Area::Approvals, |db| {
        let inbox = db.connect().approvals;
        let id = inbox.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        let DecideOutcome::Decided(first) =
            inbox.approval_decide(id, &decision(ApprovalStatus::Allowed, "lee", 500)).unwrap()
        else {
            panic!("the first decision is recorded");
        };
        assert_eq!(first.status, ApprovalStatus::Allowed);
        assert_eq!(first.decided_by.as_deref(), Some("lee"));
        assert_eq!(first.decided_ms, Some(500));
        match inbox.approval_decide(id, &decision(ApprovalStatus::Denied, "kim", 600)).unwrap() {
            DecideOutcome::AlreadyDecided(r) => assert_eq!(r.decided_by.as_deref(), Some("lee")),
            other => panic!("a second decision must not change the first: {other:?}"),
        }
        assert_eq!(
            inbox.approval_decide(777, &decision(ApprovalStatus::Denied, "kim", 600)).unwrap(),
            DecideOutcome::NotFound
        );
        let kinds: Vec<(String, String)> =
            inbox.approval_events(id).unwrap().into_iter().map(|e| (e.kind, e.by)).collect();
        assert_eq!(
            kinds,
            [("created".into(), "ann".into()), ("allowed".into(), "lee".into()), ("refused".into(), "kim".into())]
        );
    });
}

#[test]
fn two_connections_deciding_at_once_make_exactly_one_decision() {
    on_every_backend_of(Area::Approvals, |db| {
        let id = db.connect().approvals.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        for round in 0..5 {
            let id = if round == 0 {
                id
            } else {
                db.connect().approvals.approval_add(&entry("ann", "exec", "d1", 100)).unwrap()
            };
            let barrier = Arc::new(Barrier::new(4));
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let inbox = db.connect().approvals;
                    let barrier = Arc::clone(&barrier);
                    let status = if i % 2 == 0 { ApprovalStatus::Allowed } else { ApprovalStatus::Denied };
                    std::thread::spawn(move || {
                        barrier.wait();
                        inbox.approval_decide(id, &decision(status, &format!("approver{i}"), 500)).unwrap()
                    })
                })
                .collect();
            let outcomes: Vec<DecideOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let won: Vec<&ApprovalRecord> = outcomes
                .iter()
                .filter_map(|o| if let DecideOutcome::Decided(r) = o { Some(r) } else { None })
                .collect();
            assert_eq!(won.len(), 1, "exactly one decision: {outcomes:?}");
            let stored = db.connect().approvals.approval_get(id).unwrap().unwrap();
            assert_eq!(stored.decided_by, won[0].decided_by, "the stored decision is the winner's");
        }
    });
}

#[test]
fn a_decision_after_the_expiry_is_refused_and_expires_the_entry() {
    on_every_backend_of(Area::Approvals, |db| {
        let inbox = db.connect().approvals;
        let id = inbox.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        // expires_ms = 1_100: a decision at that instant is too late.
        match inbox.approval_decide(id, &decision(ApprovalStatus::Allowed, "lee", 1_100)).unwrap() {
            DecideOutcome::Expired(r) => assert_eq!(r.status, ApprovalStatus::Expired),
            other => panic!("an expired entry must not be decided: {other:?}"),
        }
        let other = inbox.approval_add(&entry("ann", "exec", "d2", 100)).unwrap();
        let third = inbox.approval_add(&entry("ann", "exec", "d3", 5_000)).unwrap();
        let expired: Vec<i64> = inbox.approval_expire(2_000).unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(expired, [other], "only pending entries past their expiry");
        assert!(inbox.approval_expire(2_000).unwrap().is_empty(), "once");
        assert_eq!(inbox.approval_get(third).unwrap().unwrap().status, ApprovalStatus::Pending);
        assert!(matches!(
            inbox.approval_decide(other, &decision(ApprovalStatus::Allowed, "lee", 1_050)).unwrap(),
            DecideOutcome::AlreadyDecided(r) if r.status == ApprovalStatus::Expired
        ));
    });
}

#[test]
fn an_approval_runs_its_call_once_and_a_retry_finds_only_its_own_entry() {
    on_every_backend_of(Area::Approvals, |db| {
        let inbox = db.connect().approvals;
        let id = inbox.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        let find = |user: &str, digest: &str, rev: &str, now| {
            inbox.approval_find(user, "main", "exec", digest, rev, now).unwrap().map(|r| r.id)
        };
        assert_eq!(find("ann", "d1", "rev1", 200), Some(id), "pending: a retry waits on it");
        assert_eq!(find("bob", "d1", "rev1", 200), None, "another user's");
        assert_eq!(find("ann", "d2", "rev1", 200), None, "other arguments");
        assert_eq!(find("ann", "d1", "rev2", 200), None, "another policy revision");
        assert_eq!(find("ann", "d1", "rev1", 1_100), None, "past its expiry");
        assert!(!inbox.approval_use(id, 300).unwrap(), "a pending entry is not usable");
        inbox.approval_decide(id, &decision(ApprovalStatus::Allowed, "lee", 300)).unwrap();
        assert_eq!(find("ann", "d1", "rev1", 400), Some(id), "decided, not used yet");
        assert!(inbox.approval_use(id, 400).unwrap());
        assert!(!inbox.approval_use(id, 401).unwrap(), "once");
        assert_eq!(find("ann", "d1", "rev1", 500), None, "used");

        let denied = inbox.approval_add(&entry("ann", "exec", "d9", 100)).unwrap();
        inbox.approval_decide(denied, &decision(ApprovalStatus::Denied, "lee", 300)).unwrap();
        assert!(inbox.approval_use(denied, 400).unwrap(), "a denial answers one run too");
        assert!(!inbox.approval_use(denied, 401).unwrap());
        let expired = inbox.approval_add(&entry("ann", "exec", "d8", 100)).unwrap();
        inbox.approval_expire(5_000).unwrap();
        assert!(!inbox.approval_use(expired, 5_001).unwrap(), "nothing decided, nothing to use");
    });
}

#[test]
fn a_failed_notification_is_kept_with_the_pending_entry() {
    on_every_backend_of(Area::Approvals, |db| {
        let inbox = db.connect().approvals;
        let id = inbox.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        assert!(inbox.approval_notify_failed(id, "webhook: connection refused", 150, None).unwrap());
        assert!(!inbox.approval_notify_failed(4_242, "x", 150, None).unwrap());
        let r = inbox.approval_get(id).unwrap().unwrap();
        assert_eq!(r.status, ApprovalStatus::Pending, "still in the inbox");
        assert_eq!(r.notify_error.as_deref(), Some("webhook: connection refused"));
        inbox.approval_refused(id, "ann", "no self-approval", 160).unwrap();
        let events = inbox.approval_events(id).unwrap();
        assert_eq!(events[1].kind, "notify_failed");
        assert_eq!(events[1].detail.as_deref(), Some("webhook: connection refused"));
        assert_eq!((events[2].kind.as_str(), events[2].by.as_str()), ("refused", "ann"));
    });
}

/// Seed 003's fallback: an entry nobody could be told of is denied at its stored instant, by
/// whichever connection (a restarted server) sweeps or decides after it.
#[test]
fn an_entry_nobody_was_told_of_is_denied_when_its_fallback_falls_due() {
    on_every_backend_of(Area::Approvals, |db| {
        let id = db.connect().approvals.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        let inbox = db.connect().approvals;
        assert!(inbox.approval_notify_failed(id, "webhook: HTTP 500", 150, Some(600)).unwrap());
        assert!(inbox.approval_notify_failed(id, "webhook: HTTP 502", 160, Some(900)).unwrap());
        assert_eq!(inbox.approval_get(id).unwrap().unwrap().fallback_ms, Some(600), "the earlier instant stands");
        assert!(inbox.approval_expire(599).unwrap().is_empty(), "not due yet");
        let other = db.connect().approvals.approval_add(&entry("ann", "exec", "d2", 100)).unwrap();
        let swept = db.connect().approvals.approval_expire(600).unwrap();
        assert_eq!(swept.iter().map(|r| r.id).collect::<Vec<_>>(), [id], "only the entry whose fallback is due");
        let denied = &swept[0];
        assert_eq!((denied.status, denied.decided_by.as_deref()), (ApprovalStatus::Denied, Some("toolgate")));
        let message = denied.message.as_deref().unwrap_or_default();
        assert!(message.contains("nobody could be notified (webhook: HTTP 502)"), "{message}");
        assert_eq!(inbox.approval_get(other).unwrap().unwrap().status, ApprovalStatus::Pending);
        assert!(inbox.approval_use(id, 700).unwrap(), "the denial answers the retried call");

        // A person deciding after the fallback fell due, before any sweep: too late.
        let late = inbox.approval_add(&entry("bob", "exec", "d3", 100)).unwrap();
        inbox.approval_notify_failed(late, "webhook: timed out", 150, Some(500)).unwrap();
        match inbox.approval_decide(late, &decision(ApprovalStatus::Allowed, "lee", 550)).unwrap() {
            DecideOutcome::AlreadyDecided(r) => assert_eq!(r.status, ApprovalStatus::Denied),
            other => panic!("a decision after the fallback must not win: {other:?}"),
        }
        // Before it falls due, a person's decision wins and the fallback does nothing.
        let early = inbox.approval_add(&entry("bob", "exec", "d4", 100)).unwrap();
        inbox.approval_notify_failed(early, "webhook: timed out", 150, Some(500)).unwrap();
        assert!(matches!(
            inbox.approval_decide(early, &decision(ApprovalStatus::Allowed, "lee", 400)).unwrap(),
            DecideOutcome::Decided(_)
        ));
        assert!(inbox.approval_expire(800).unwrap().iter().all(|r| r.id != early));
        assert_eq!(inbox.approval_get(early).unwrap().unwrap().status, ApprovalStatus::Allowed);
    });
}

#[test]
fn entries_outlive_the_connection_that_made_them() {
    on_every_backend_of(Area::Approvals, |db| {
        let id = db.connect().approvals.approval_add(&entry("ann", "exec", "d1", 100)).unwrap();
        let later = db.connect().approvals;
        assert_eq!(later.approval_get(id).unwrap().unwrap().status, ApprovalStatus::Pending);
        assert!(matches!(
            later.approval_decide(id, &decision(ApprovalStatus::AllowedAlways, "lee", 200)).unwrap(),
            DecideOutcome::Decided(_)
        ));
    });
}

/// "Allow always" writes its standing grant in the decision's own transaction: the grant holds
/// even when the call that asked is gone (its node killed) and never comes to write it; a
/// refused decision, "allow once" and "deny" grant nothing.
#[test]
fn allow_always_is_granted_with_the_decision_itself() {
    on_every_backend_of(Area::Approvals, |db| {
        let stores = db.connect();
        let (inbox, grants) = (&stores.approvals, &stores.grants);
        // The gate stores the normalized subject as it is (`exec`'s unwrapped commands).
        let subject = |mut e: ApprovalRecord, subject: &str| {
            e.subject = subject.into();
            e
        };
        let with_subject = inbox.approval_add(&subject(entry("ann", "exec", "d1", 100), "rm -rf build")).unwrap();
        let no_subject = inbox.approval_add(&subject(entry("ann", "write", "d2", 100), "")).unwrap();
        let once = inbox.approval_add(&subject(entry("bob", "exec", "d3", 100), "rm -rf build")).unwrap();
        let revision = grants.grants_revision().unwrap();

        for id in [with_subject, no_subject] {
            let decided = inbox.approval_decide(id, &decision(ApprovalStatus::AllowedAlways, "lee", 150)).unwrap();
            assert!(matches!(decided, DecideOutcome::Decided(_)), "{decided:?}");
        }
        inbox.approval_decide(once, &decision(ApprovalStatus::Allowed, "lee", 150)).unwrap();
        // Too late: the entry is decided already, and nothing more is granted.
        let again = inbox.approval_decide(once, &decision(ApprovalStatus::AllowedAlways, "lee", 160)).unwrap();
        assert!(matches!(again, DecideOutcome::AlreadyDecided(_)), "{again:?}");

        assert!(grants.grant_exists("ann", "main", "exec", "subject:rm -rf build").unwrap());
        assert!(grants.grant_exists("ann", "main", "write", "params-sha256:d2").unwrap(), "no subject: the arguments");
        assert!(
            !grants.grant_exists("bob", "main", "exec", "subject:rm -rf build").unwrap(),
            "allow once grants nothing"
        );
        assert_eq!(grants.grants().unwrap().len(), 2);
        assert!(grants.grants_revision().unwrap() > revision, "the grants revision moved with the decision");
        // The call that uses the decision writes the same grant again: still one.
        let of_call = toolgate_store::Grant::of_approval(&inbox.approval_get(with_subject).unwrap().unwrap(), 170);
        grants.grant_add(&of_call).unwrap();
        assert_eq!(grants.grants().unwrap().len(), 2);

        // Revoking the standing approval spends the entries it was decided in: an identical
        // call then asks a person again, rather than resuming from one and granting it back.
        let find = |tool: &str, digest: &str| inbox.approval_find("ann", "main", tool, digest, "rev1", 200).unwrap();
        assert!(find("exec", "d1").is_some(), "decided and not yet used: a retry would resume from it");
        let exec = grants.grants().unwrap().into_iter().find(|g| g.tool == "exec").unwrap();
        assert!(grants.grant_revoke(exec.id).unwrap());
        assert_eq!(find("exec", "d1"), None, "spent with its grant");
        let events = inbox.approval_events(with_subject).unwrap();
        assert_eq!(events.last().map(|e| e.kind.as_str()), Some("used"), "{events:?}");
        assert!(find("write", "d2").is_some(), "another standing approval's entry is left alone");
        assert!(grants.grant_exists("ann", "main", "write", "params-sha256:d2").unwrap());
        assert_eq!(
            toolgate_store::approval_grant_subject(None, "d2"),
            "params-sha256:d2",
            "the rule the gate checks with"
        );
    });
}
