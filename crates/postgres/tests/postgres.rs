//! What only the PostgreSQL backend has: migrations under an advisory lock, synchronous calls
//! from inside tokio runtimes, `LISTEN` for other nodes' decisions, and clear errors for a bad
//! or unreachable database.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};

use std::sync::mpsc;
use std::time::Duration;

use toolgate_postgres::{ApprovalStore, IdentityStore, PgStore, SCHEMA_VERSION};
use toolgate_store::{ApprovalDecision, ApprovalRecord, ApprovalStatus, Principal, PrincipalKind};
use toolgate_testkit::postgres::Cluster;

fn cluster() -> Cluster {
    Cluster::start().unwrap_or_else(|e| panic!("{e}"))
}

fn user(name: &str) -> Principal {
    Principal {
        name: name.into(),
        kind: PrincipalKind::User,
        owner: None,
        admin: false,
        disabled: false,
        password: None,
        created_ms: 1,
    }
}

/// Four nodes start at once on an empty database: every one connects, the schema is made once
/// (without the lock, the losers' `CREATE TABLE` fails), and a later start migrates nothing.
#[test]
fn nodes_starting_at_once_migrate_once() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let stores: Vec<PgStore> = std::thread::scope(|s| {
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let (barrier, url) = (barrier.clone(), url.clone());
                s.spawn(move || {
                    barrier.wait();
                    PgStore::connect(&url).unwrap_or_else(|e| panic!("{e}"))
                })
            })
            .collect();
        starts.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for store in &stores {
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    }
    assert!(stores[0].principal_add(&user("ann")).unwrap());
    let later = PgStore::connect(&url).unwrap();
    assert_eq!(later.principal_get("ann").unwrap().unwrap().name, "ann", "a later start keeps the data");
    assert_eq!(later.identity_revision().unwrap(), 2, "the revision row was made once and raised once");
}

/// The traits are synchronous and toolgate calls them from async code: on a current-thread
/// runtime (where blocking on a future of the same runtime would never finish) and on a
/// multi-thread runtime's workers, many calls at once.
#[test]
fn calls_work_from_inside_tokio_runtimes() {
    let cluster = cluster();
    let store = PgStore::connect(&cluster.database().unwrap()).unwrap();
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    current.block_on(async {
        assert!(store.principal_add(&user("ann")).unwrap());
    });
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    multi.block_on(async {
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.principal_add(&user(&format!("u{i}"))).unwrap() })
            })
            .collect();
        for task in tasks {
            assert!(task.await.unwrap());
        }
    });
    assert_eq!(store.principals(None).unwrap().len(), 21);
}

#[test]
fn a_malformed_url_says_what_is_expected() {
    let err = PgStore::connect("postgres://ann@host/db?sslmode=sometimes").unwrap_err().to_string();
    assert!(err.contains("reading the PostgreSQL URL"), "{err}");
}

/// A database that is not there fails at once with what was being done, not a hang or a panic.
#[test]
fn an_unreachable_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://postgres@{}/nothing", dir.path().display().to_string().replace('/', "%2F"));
    let err = PgStore::connect(&url).unwrap_err().to_string();
    assert!(err.contains("migrating the PostgreSQL schema") && err.contains("cannot get a connection"), "{err}");
}

/// A schema newer than this build (another node was upgraded first) is refused, with what to do.
#[test]
fn a_newer_schema_is_refused() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    drop(PgStore::connect(&url).unwrap());
    let out = std::process::Command::new("psql")
        .args([&url, "-c", "UPDATE toolgate_schema SET version = version + 1"])
        .output();
    // psql may be off PATH (Debian keeps it in /usr/bin, so it is normally there).
    let out = out.unwrap_or_else(|e| panic!("cannot run psql: {e}; run `cargo xtask deps`"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = PgStore::connect(&url).unwrap_err().to_string();
    assert!(err.contains("newer than this build") && err.contains("upgrade toolgate"), "{err}");
}

/// A call waiting on node A learns at once that node B decided its entry: A's watcher is woken
/// by B's decision (a trigger's `NOTIFY`, A's `LISTEN`), not only by A's next look.
#[test]
fn a_decision_on_another_node_wakes_the_watchers() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    let (woken, wakes) = mpsc::channel();
    assert!(a.approval_watch(Box::new(move || {
        let _ = woken.send(());
    })));
    // Bounds on liveness, not speed: a wake that never comes fails after them.
    let bound = Duration::from_secs(20);
    wakes.recv_timeout(bound).expect("woken once subscribed, to look again");
    let entry = ApprovalRecord {
        id: 0,
        call_id: "c1".into(),
        user: "ann".into(),
        agent: "main".into(),
        session: "s1".into(),
        tool: "write".into(),
        server: None,
        subject: "AGENTS.md".into(),
        args_digest: "d1".into(),
        shown: serde_json::json!({}),
        reason: "asks".into(),
        policy_revision: "r1".into(),
        batch: None,
        created_ms: 1,
        expires_ms: i64::MAX,
        status: ApprovalStatus::Pending,
        decided_by: None,
        decided_ms: None,
        message: None,
        notify_error: None,
        used_ms: None,
        fallback_ms: None,
    };
    let id = b.approval_add(&entry).unwrap();
    let decision = ApprovalDecision { status: ApprovalStatus::Allowed, by: "lee".into(), message: None, at_ms: 2 };
    b.approval_decide(id, &decision).unwrap();
    wakes.recv_timeout(bound).expect("woken by the other node's decision");
    assert_eq!(a.approval_get(id).unwrap().unwrap().status, ApprovalStatus::Allowed);
}

/// Secrets are sealed under the key every node is given: another node with the same key reads
/// them, a node with another key is told the key differs, and a node given no key refuses to
/// keep any (never a key stored beside them in the database).
#[test]
fn secrets_need_the_key_every_node_shares() {
    use toolgate_store::{SecretCipher, SecretError, SecretStore};
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let keyed = |hex: &str| PgStore::connect(&url).unwrap().with_secret_cipher(SecretCipher::from_hex(hex).unwrap());
    let (a, b, other) = (keyed(&"11".repeat(32)), keyed(&"11".repeat(32)), keyed(&"22".repeat(32)));
    a.secret_put("mcp.oauth.github/ann", b"token").unwrap();
    assert_eq!(b.secret_get("mcp.oauth.github/ann").unwrap().as_deref(), Some(&b"token"[..]));
    assert!(matches!(other.secret_get("mcp.oauth.github/ann"), Err(SecretError::Decrypt { .. })));
    let keyless = PgStore::connect(&url).unwrap();
    let err = keyless.secret_put("x", b"y").unwrap_err();
    assert!(matches!(err, SecretError::NoSharedKey), "{err}");
    assert!(err.to_string().contains("TOOLGATE_SECRET_KEY"), "{err}");
    assert!(matches!(SecretCipher::from_hex("not hex"), Err(SecretError::BadEnvKey)));
}
