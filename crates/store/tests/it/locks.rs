//! [`LockStore`]: path locks shared by every process on a workspace.

use std::sync::{Arc, Barrier};

use toolgate_store::{LockOwner, LockStore, PathLock};

use crate::{Area, on_every_backend_of};

fn owner(session: &str) -> LockOwner {
    LockOwner { user: "ann".into(), agent: "main".into(), session: session.into() }
}

fn lock(token: &str, workspace: &str, session: &str, globs: &[&str], expires_ms: i64) -> PathLock {
    PathLock {
        token: token.into(),
        workspace: workspace.into(),
        owner: owner(session),
        globs: globs.iter().map(|g| (*g).to_owned()).collect(),
        created_ms: 100,
        expires_ms,
    }
}

/// The rule the tests give the store: locks clash when they share a glob.
fn same_glob(new: &PathLock) -> impl Fn(&PathLock) -> bool + '_ {
    move |other| other.globs.iter().any(|g| new.globs.contains(g))
}

fn take(store: &dyn LockStore, lock: &PathLock, now_ms: i64) -> Option<PathLock> {
    store.lock_take(lock, now_ms, &same_glob(lock)).unwrap()
}

#[test]
fn a_clashing_lock_of_another_owner_is_refused_with_the_holder_and_nothing_is_written() {
    on_every_backend_of(Area::Locks, |db| {
        let locks = db.connect().locks;
        let a = lock("a", "/w", "s1", &["src/**", "Cargo.toml"], 10_000);
        assert_eq!(take(&*locks, &a, 1_000), None, "taken");
        let b = lock("b", "/w", "s2", &["src/**"], 10_000);
        assert_eq!(take(&*locks, &b, 1_000), Some(a.clone()), "the clashing lock comes back whole");
        assert_eq!(
            locks.locks_live("/w", 1_000).unwrap(),
            std::slice::from_ref(&a),
            "the refused lock was not written"
        );
        // The predicate decides what clashes: a lock the rule lets through is taken beside it.
        let c = lock("c", "/w", "s2", &["docs/**"], 10_000);
        assert_eq!(take(&*locks, &c, 1_000), None);
        assert_eq!(locks.locks_live("/w", 1_000).unwrap().len(), 2);
    });
}

#[test]
fn the_predicate_sees_only_live_locks_of_other_owners_in_the_same_workspace() {
    on_every_backend_of(Area::Locks, |db| {
        let locks = db.connect().locks;
        assert_eq!(take(&*locks, &lock("mine", "/w", "s1", &["x"], 10_000), 1_000), None);
        assert_eq!(take(&*locks, &lock("elsewhere", "/other", "s2", &["x"], 10_000), 1_000), None);
        assert_eq!(take(&*locks, &lock("old", "/w", "s3", &["z"], 2_000), 1_000), None);
        let seen = std::sync::Mutex::new(Vec::new());
        let record = |l: &PathLock| {
            seen.lock().unwrap().push(l.token.clone());
            false
        };
        // s1 again, at 3_000 (`old` has lapsed): its own lock, the other workspace's and the
        // expired one are not candidates.
        assert_eq!(locks.lock_take(&lock("again", "/w", "s1", &["x"], 10_000), 3_000, &record).unwrap(), None);
        assert_eq!(*seen.lock().unwrap(), Vec::<String>::new(), "no candidate at all");
        // The same owner may hold overlapping locks of its own.
        let live: Vec<String> = locks.locks_live("/w", 3_000).unwrap().into_iter().map(|l| l.token).collect();
        assert_eq!(live, ["mine", "again"], "oldest first, the expired one gone");
        // Another owner's take sees both of s1's locks.
        let n = std::sync::Mutex::new(0);
        let count = |_: &PathLock| {
            *n.lock().unwrap() += 1;
            false
        };
        assert_eq!(locks.lock_take(&lock("s4", "/w", "s4", &["y"], 10_000), 3_000, &count).unwrap(), None);
        assert_eq!(*n.lock().unwrap(), 2);
    });
}

#[test]
fn only_the_owner_releases_a_live_lock_by_its_token() {
    on_every_backend_of(Area::Locks, |db| {
        let locks = db.connect().locks;
        assert_eq!(take(&*locks, &lock("a", "/w", "s1", &["src/**"], 10_000), 1_000), None);
        assert!(!locks.lock_release("a", &owner("s2"), 1_000).unwrap(), "another session");
        let other_agent = LockOwner { agent: "helper".into(), ..owner("s1") };
        assert!(!locks.lock_release("a", &other_agent, 1_000).unwrap(), "another agent of the session");
        assert!(!locks.lock_release("nope", &owner("s1"), 1_000).unwrap(), "an unknown token");
        assert_eq!(locks.locks_live("/w", 1_000).unwrap().len(), 1, "still held");
        assert!(locks.lock_release("a", &owner("s1"), 1_000).unwrap());
        assert!(!locks.lock_release("a", &owner("s1"), 1_000).unwrap(), "already released");
        assert!(locks.locks_live("/w", 1_000).unwrap().is_empty());
        assert_eq!(take(&*locks, &lock("b", "/w", "s2", &["src/**"], 10_000), 1_000), None, "free again");
        // An expired lock is not released (it no longer exists).
        assert!(!locks.lock_release("b", &owner("s2"), 10_000).unwrap());
    });
}

#[test]
fn an_expired_lock_vanishes_for_everyone_and_is_swept() {
    on_every_backend_of(Area::Locks, |db| {
        let locks = db.connect().locks;
        let a = lock("a", "/w", "s1", &["src/**"], 2_000);
        assert_eq!(take(&*locks, &a, 1_000), None);
        assert_eq!(locks.locks_live("/w", 1_999).unwrap(), std::slice::from_ref(&a));
        assert!(locks.locks_live("/w", 2_000).unwrap().is_empty(), "gone at its expiry");
        let b = lock("b", "/w", "s2", &["src/**"], 9_000);
        assert_eq!(take(&*locks, &b, 1_999), Some(a), "held until then");
        assert_eq!(take(&*locks, &b, 2_000), None, "then another owner takes the paths");
        assert_eq!(take(&*locks, &lock("c", "/w", "s3", &["c"], 3_000), 2_000), None);
        assert_eq!(locks.locks_sweep(2_999).unwrap(), 0, "nothing lapsed yet");
        assert_eq!(locks.locks_sweep(3_000).unwrap(), 1, "c lapsed");
        assert_eq!(locks.locks_live("/w", 3_000).unwrap(), [b]);
        assert_eq!(locks.locks_sweep(100_000).unwrap(), 1);
        assert_eq!(locks.locks_sweep(100_000).unwrap(), 0);
    });
}

#[test]
fn locks_are_seen_by_another_connection_as_by_another_process() {
    on_every_backend_of(Area::Locks, |db| {
        let (first, second) = (db.connect().locks, db.connect().locks);
        let a = lock("a", "/w", "s1", &["src/**"], 10_000);
        assert_eq!(take(&*first, &a, 1_000), None);
        assert_eq!(second.locks_live("/w", 1_000).unwrap(), std::slice::from_ref(&a));
        assert_eq!(take(&*second, &lock("b", "/w", "s2", &["src/**"], 10_000), 1_000), Some(a));
        assert!(!second.lock_release("a", &owner("s2"), 1_000).unwrap());
        assert!(second.lock_release("a", &owner("s1"), 1_000).unwrap(), "the owner, through any connection");
        assert!(first.locks_live("/w", 1_000).unwrap().is_empty());
    });
}

#[test]
fn of_connections_racing_for_one_lock_exactly_one_wins() {
    on_every_backend_of(Area::Locks, |db| {
        const RACERS: usize = 8;
        for round in 0..5 {
            let barrier = Arc::new(Barrier::new(RACERS));
            let threads: Vec<_> = (0..RACERS)
                .map(|i| {
                    // Each racer its own connection, as each process has.
                    let locks = db.connect().locks;
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        let mine = lock(&format!("r{round}-{i}"), "/w", &format!("r{round}-{i}"), &["src/**"], 10_000);
                        barrier.wait();
                        locks.lock_take(&mine, 1_000 + round, &same_glob(&mine)).unwrap().is_none()
                    })
                })
                .collect();
            let won = threads.into_iter().map(|t| t.join().unwrap()).filter(|&w| w).count();
            assert_eq!(won, 1, "round {round}: {won} racers got the lock");
            let live = db.connect().locks.locks_live("/w", 1_000 + round).unwrap();
            assert_eq!(live.len(), 1, "round {round}: {live:?}");
            assert!(db.connect().locks.lock_release(&live[0].token, &live[0].owner, 1_000 + round).unwrap());
        }
    });
}

#[test]
fn racers_on_overlapping_paths_get_one_lock_while_disjoint_takes_all_succeed() {
    on_every_backend_of(Area::Locks, |db| {
        const RACERS: usize = 6;
        let barrier = Arc::new(Barrier::new(2 * RACERS));
        let threads: Vec<_> = (0..2 * RACERS)
            .map(|i| {
                // Each racer its own connection, as each node has.
                let locks = db.connect().locks;
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    // The first half clash pairwise on `shared` in /w (each also names a path of
                    // its own); the second half take disjoint paths in /v at the same moment.
                    let (workspace, globs) = if i < RACERS {
                        ("/w", vec!["shared".to_owned(), format!("own-{i}")])
                    } else {
                        ("/v", vec![format!("own-{i}")])
                    };
                    let mine = PathLock {
                        token: format!("t{i}"),
                        workspace: workspace.into(),
                        owner: owner(&format!("s{i}")),
                        globs,
                        created_ms: 100,
                        expires_ms: 10_000,
                    };
                    barrier.wait();
                    (i, locks.lock_take(&mine, 1_000, &same_glob(&mine)).unwrap())
                })
            })
            .collect();
        let outcomes: Vec<(usize, Option<PathLock>)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let held = db.connect().locks.locks_live("/w", 1_000).unwrap();
        assert_eq!(held.len(), 1, "exactly one of the clashing racers holds /w: {held:?}");
        for (i, refused) in outcomes.iter().filter(|(i, _)| *i < RACERS) {
            match refused {
                None => assert_eq!(held[0].token, format!("t{i}"), "a winner that is not the holder"),
                Some(by) => assert_eq!(*by, held[0], "racer {i} is refused by the holder"),
            }
        }
        assert!(outcomes.iter().filter(|(i, _)| *i >= RACERS).all(|(_, r)| r.is_none()), "{outcomes:?}");
        assert_eq!(db.connect().locks.locks_live("/v", 1_000).unwrap().len(), RACERS);
    });
}
