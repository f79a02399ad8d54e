//! The revisions of identities and grants kept in memory on each node (`revisions.rs`): other
//! nodes' changes arrive by notification, this node's own show at once, and a lost `LISTEN`
//! connection sends reads to the database until it is back and has read them again.
//!
//! Whether a read was answered from memory is told by `PgStore::revision_queries` (the reads
//! the database answered), not by the server's statistics, which it reports late.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use toolgate_postgres::{GrantStore, IdentityStore, LISTEN_APPLICATION_NAME, PgStore};
use toolgate_store::{ApiKeyRecord, GrantMode, Principal, PrincipalKind, ToolGrant};
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

fn key(id: &str, principal: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        principal: principal.into(),
        digest: [7; 32],
        scope: serde_json::json!({}),
        created_ms: 1,
        created_by: "root".into(),
        expires_ms: None,
        revoked_ms: None,
        last_used_ms: None,
        note: String::new(),
    }
}

fn grant(subject: &str) -> ToolGrant {
    ToolGrant {
        id: 0,
        subject: subject.into(),
        server: None,
        tool_allow: vec!["read".into()],
        tool_deny: vec![],
        enabled: true,
        config_overrides: serde_json::json!({}),
        mode: GrantMode::Allow,
        arg_rule: None,
        expires_ms: None,
        granted_by: "root".into(),
        request: None,
        note: String::new(),
        created_ms: 1,
    }
}

/// Waits for `done`: a bound on liveness (what never happens fails after it), not on speed.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `store` answers from memory: its `LISTEN` connection is up, and a read (made here,
/// as a call would) primed it after the last notification.
fn in_step(store: &PgStore) {
    wait_until("the store's LISTEN connection is up and primed", || {
        store.identity_revision().unwrap();
        store.revisions_in_step()
    });
}

/// SQL on a connection of the test's own (as an operator with psql would).
struct Sql {
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Sql {
    fn connect(url: &str) -> Sql {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(connection);
            client
        });
        Sql { runtime, client }
    }

    fn number(&self, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> i64 {
        self.runtime.block_on(async { self.client.query_one(sql, params).await.unwrap().get(0) })
    }

    fn run(&self, sql: &str) {
        self.runtime.block_on(async { self.client.batch_execute(sql).await.unwrap() });
    }
}

/// A change made on node B reaches node A's memory by notification: A's reads follow without
/// asking the database, before and after.
#[test]
fn another_nodes_changes_arrive_by_notification() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    in_step(&a);
    let asked = a.revision_queries();
    let (identity, grants) = (a.identity_revision().unwrap(), a.grants_revision().unwrap());
    for _ in 0..100 {
        assert_eq!(a.identity_revision().unwrap(), identity);
    }
    assert_eq!(a.revision_queries(), asked, "in step, reads are answered from memory");

    assert!(b.principal_add(&user("ann")).unwrap());
    assert!(b.key_add(&key("k1", "ann")).unwrap());
    b.tool_grant_add(&grant("ann")).unwrap();
    let (b_identity, b_grants) = (b.identity_revision().unwrap(), b.grants_revision().unwrap());
    assert!(b_identity >= identity + 2 && b_grants > grants, "B's own reads see its writes");
    wait_until("A hears B's changes", || {
        a.identity_revision().unwrap() == b_identity && a.grants_revision().unwrap() == b_grants
    });
    assert!(b.key_revoke("k1", 5).unwrap());
    let revoked = b.identity_revision().unwrap();
    wait_until("A hears B's revocation", || a.identity_revision().unwrap() == revoked);
    assert!(a.revision_queries() > asked, "a notification is a hint: A read the table after it");
    in_step(&a);
    let asked = a.revision_queries();
    for _ in 0..100 {
        assert_eq!(a.identity_revision().unwrap(), revoked);
    }
    assert_eq!(a.revision_queries(), asked, "back in step, reads are answered from memory");
}

/// A notification's value is not taken: one forged with a huge value (anyone who may `NOTIFY`
/// can send it) would otherwise stay in memory, and a key revoked later would keep working.
#[test]
fn a_forged_notification_does_not_stick() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    assert!(b.principal_add(&user("ann")).unwrap());
    assert!(b.key_add(&key("k1", "ann")).unwrap());
    in_step(&a);
    let sql = Sql::connect(&url);
    sql.run("NOTIFY toolgate_revisions, 'identity:9223372036854775000'");
    sql.run("NOTIFY toolgate_revisions, 'not a revision'");
    assert!(b.key_revoke("k1", 5).unwrap());
    let revoked = b.identity_revision().unwrap();
    wait_until("A reads B's revocation, not the forged value", || a.identity_revision().unwrap() == revoked);
    in_step(&a);
    assert_eq!(a.identity_revision().unwrap(), revoked);
}

/// This node's own write shows in its next read at once, before the notification could be
/// relied on: the read goes to the database, and the one after is from memory again.
#[test]
fn own_writes_show_at_once() {
    let cluster = cluster();
    let a = PgStore::connect(&cluster.database().unwrap()).unwrap();
    in_step(&a);
    assert!(a.principal_add(&user("ann")).unwrap());
    assert!(a.key_add(&key("k1", "ann")).unwrap());
    in_step(&a);
    let (identity, grants) = (a.identity_revision().unwrap(), a.grants_revision().unwrap());

    assert!(a.key_revoke("k1", 5).unwrap());
    let asked = a.revision_queries();
    assert!(a.identity_revision().unwrap() > identity, "a revoked key changes the identity revision at once");
    assert!(a.revision_queries() > asked, "the read after a write asks the database");
    // The write's own notification may arrive after that read and take memory out of step once
    // more; the next read puts it back.
    in_step(&a);
    let asked = a.revision_queries();
    let revoked = a.identity_revision().unwrap();
    assert_eq!(a.revision_queries(), asked, "and memory is back in step");

    let id = a.tool_grant_add(&grant("ann")).unwrap();
    let added = a.grants_revision().unwrap();
    assert!(added > grants);
    assert!(a.grant_revoke(id).unwrap());
    assert!(a.grants_revision().unwrap() > added, "a removed grant changes the grants revision at once");
    assert_eq!(a.identity_revision().unwrap(), revoked);

    // A node's key for one forwarded call (its scope names the node) is made and revoked without
    // raising it: else every node reloads its identities for each forwarded call.
    let scope = serde_json::json!({"tools": ["process"], "sources": [], "forwarded_by": "b"});
    assert!(a.key_add(&ApiKeyRecord { scope, ..key("k2", "ann") }).unwrap());
    assert!(a.key_revoke("k2", 6).unwrap());
    assert!(a.key_get("k2").unwrap().unwrap().revoked_ms.is_some());
    assert_eq!(a.identity_revision().unwrap(), revoked, "a one-call key moves no revision");
    // Any other key still does, one whose scope merely lists tools included.
    assert!(a.key_add(&ApiKeyRecord { scope: serde_json::json!({"tools": ["process"]}), ..key("k3", "ann") }).unwrap());
    assert!(a.identity_revision().unwrap() > revoked);
    // A person's key whose tools name `forwarded_by` (a valid tool name) is no one-call key: its
    // revocation must reach every node's key cache.
    let named = a.identity_revision().unwrap();
    let scope = serde_json::json!({"tools": ["forwarded_by", "*"], "sources": []});
    assert!(a.key_add(&ApiKeyRecord { scope, ..key("k4", "ann") }).unwrap());
    let added = a.identity_revision().unwrap();
    assert!(added > named, "a key whose tool is named `forwarded_by` moves the revision");
    assert!(a.key_revoke("k4", 7).unwrap());
    assert!(a.identity_revision().unwrap() > added, "and so does its revocation");
}

/// A database closed to new connections, whose stores' `LISTEN` connections were cut.
struct Closed {
    sql: Sql,
    database: String,
}

impl Closed {
    /// Lets connections in again.
    fn reopen(&self) {
        self.sql.run(&format!("ALTER DATABASE \"{}\" ALLOW_CONNECTIONS true", self.database));
    }
}

/// Closes the database of `url` to new connections and cuts the `LISTEN` connection of each of
/// the two stores on it (from another database: PostgreSQL refuses to close the one a session
/// is in); the pools keep the connections they have.
fn cut_listening_connections(cluster: &Cluster, url: &str) -> Closed {
    let sql = Sql::connect(&cluster.url());
    let config: tokio_postgres::Config = url.parse().unwrap();
    let database = config.get_dbname().unwrap().to_owned();
    sql.run(&format!("ALTER DATABASE \"{database}\" ALLOW_CONNECTIONS false"));
    let cut = sql.number(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND datname = $2",
        &[&LISTEN_APPLICATION_NAME, &database],
    );
    assert_eq!(cut, 2, "one listening connection per store");
    Closed { sql, database }
}

/// The `LISTEN` connection is cut, and cannot come back while the database refuses new
/// connections: reads go to the database and see a change made meanwhile; a change made while
/// nobody reads is found when the connection is back (it reads every revision again), and
/// notifications flow again after it.
#[test]
fn a_lost_listen_connection_falls_back_to_the_database_and_resyncs() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    in_step(&a);
    in_step(&b);
    let closed = cut_listening_connections(&cluster, &url);
    wait_until("A notices its connection is gone", || !a.revisions_in_step());

    // The pools keep the connections they have, so both stores still reach the database.
    let before = a.identity_revision().unwrap();
    let asked = a.revision_queries();
    assert!(b.principal_add(&user("ann")).unwrap());
    let changed = b.identity_revision().unwrap();
    assert!(changed > before);
    assert_eq!(a.identity_revision().unwrap(), changed, "out of step, A reads the database");
    assert_eq!(a.identity_revision().unwrap(), changed);
    assert_eq!(a.revision_queries(), asked + 2, "every read asks the database while the connection is down");
    assert!(!a.revisions_in_step(), "a read of the database does not prime without a subscription");

    // Made while A is not listening and reads nothing: only the resync can find it.
    assert!(b.principal_add(&user("bob")).unwrap());
    let unheard = b.identity_revision().unwrap();
    closed.reopen();
    in_step(&a);
    let asked = a.revision_queries();
    assert_eq!(a.identity_revision().unwrap(), unheard, "primed on reconnecting, with the change made meanwhile");
    assert_eq!(a.revision_queries(), asked, "from memory");

    b.tool_grant_add(&grant("bob")).unwrap();
    let granted = b.grants_revision().unwrap();
    wait_until("A hears B's grant after reconnecting", || a.grants_revision().unwrap() == granted);
    in_step(&a);
    let asked = a.revision_queries();
    assert_eq!(a.grants_revision().unwrap(), granted);
    assert_eq!(a.revision_queries(), asked, "notifications arrive again, and memory is back in step");
}

/// How late notifications arrive (`/metrics`' NOTIFY lag): each store's own probe comes back
/// and is timed, beside the other node's probes and payloads forged on the channel; a lost
/// `LISTEN` connection has no figure until a probe comes back on the next.
#[test]
fn each_store_times_its_own_probe_notifications() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    let strangers = Sql::connect(&url);
    for forged in ["garbage", "1-2-3:0", ":", "x:18446744073709551615", "\u{1b}[2J"] {
        strangers.run(&format!("NOTIFY toolgate_lag, '{forged}'"));
    }
    wait_until("A's first probe comes back", || a.notify_lag().is_some());
    wait_until("B's first probe comes back", || b.notify_lag().is_some());
    assert!(a.notify_lag().unwrap() > Duration::ZERO, "{:?}", a.notify_lag());
    in_step(&a);

    let closed = cut_listening_connections(&cluster, &url);
    wait_until("A notices its connection is gone", || !a.revisions_in_step());
    assert_eq!(a.notify_lag(), None, "no figure without a LISTEN connection");
    closed.reopen();
    wait_until("A's probe comes back on the new connection", || a.notify_lag().is_some());
}

/// The shared configuration (`shared_config.rs`): one node's change is heard by the other, who
/// reads the text it was stored with; a change made while the other's `LISTEN` connection is
/// down and it reads nothing is found once the connection is back (the revisions read again).
#[test]
fn a_shared_configuration_change_is_heard_or_found_on_reconnecting() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    in_step(&a);
    let (first, stored) = a.shared_config().unwrap();
    assert_eq!((a.config_revision().unwrap(), stored), (first, None), "nothing stored yet");

    let heard = b.shared_config_put("[tools]\ndeny = [\"exec\"]\n", "lee").unwrap();
    assert!(heard > first);
    assert_eq!(b.config_revision().unwrap(), heard, "the writer's own change shows at once");
    wait_until("A hears B's change", || a.config_revision().unwrap() == heard);
    let (revision, stored) = a.shared_config().unwrap();
    let stored = stored.unwrap();
    assert_eq!(
        (revision, stored.text.as_str(), stored.changed_by.as_str()),
        (heard, "[tools]\ndeny = [\"exec\"]\n", "lee")
    );
    assert!(stored.changed_ms > 0);
    in_step(&a);

    let closed = cut_listening_connections(&cluster, &url);
    wait_until("A notices its connection is gone", || !a.revisions_in_step());
    let unheard = b.shared_config_put("[tools]\ndeny = []\n", "ann").unwrap();
    assert!(unheard > heard);
    closed.reopen();
    in_step(&a);
    let asked = a.revision_queries();
    assert_eq!(a.config_revision().unwrap(), unheard, "primed on reconnecting, with the change made meanwhile");
    assert_eq!(a.revision_queries(), asked, "from memory");
}

/// Two changes made over the same stored configuration (`shared_config_put_at`): the later
/// one is refused, not stored over the first; made again over what is stored now, both are.
#[test]
fn a_change_over_a_configuration_that_moved_is_refused_and_made_again_keeps_both() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    let (a, b) = (PgStore::connect(&url).unwrap(), PgStore::connect(&url).unwrap());
    let (start, _) = a.shared_config().unwrap();
    let (seen_by_b, _) = b.shared_config().unwrap();
    assert_eq!(seen_by_b, start);
    let first = b.shared_config_put_at("deny b\n", "b", seen_by_b).unwrap().expect("nothing came first");
    assert_eq!(a.shared_config_put_at("deny a\n", "a", start).unwrap(), None, "B's change came first");
    let (now, stored) = a.shared_config().unwrap();
    assert_eq!((now, stored.unwrap().text.as_str()), (first, "deny b\n"), "A's refused change stored nothing");
    let merged = a.shared_config_put_at("deny b\ndeny a\n", "a", now).unwrap().expect("over the new text");
    assert!(merged > first);

    // Clearing removes the text and says what it was; a second clear finds nothing.
    let (cleared, removed) = b.shared_config_clear().unwrap();
    assert!(cleared > merged);
    assert_eq!(removed.map(|r| r.text), Some("deny b\ndeny a\n".to_owned()));
    assert_eq!(a.shared_config().unwrap(), (cleared, None));
    assert_eq!(b.shared_config_clear().unwrap(), (cleared, None), "nothing stored: nothing moves");
    // A change read before the clear is refused too; one read after it is stored on an empty row.
    assert_eq!(a.shared_config_put_at("deny c\n", "a", merged).unwrap(), None);
    assert!(a.shared_config_put_at("deny c\n", "a", cleared).unwrap().is_some());
}

/// Writers racing on one configuration, each adding its own line by reading, adding and storing
/// at the revision read (again when refused): every line ends up stored, none lost.
#[test]
fn writers_racing_on_the_shared_configuration_lose_no_change() {
    let cluster = cluster();
    let url = cluster.database().unwrap();
    const WRITERS: usize = 4;
    const EACH: usize = 5;
    let start = std::sync::Arc::new(std::sync::Barrier::new(WRITERS));
    let refused: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (url, start) = (url.clone(), std::sync::Arc::clone(&start));
                s.spawn(move || {
                    let store = PgStore::connect(&url).unwrap();
                    start.wait();
                    let mut refused = 0;
                    for i in 0..EACH {
                        loop {
                            let (revision, stored) = store.shared_config().unwrap();
                            let text = format!("{}w{w}.{i}\n", stored.map(|s| s.text).unwrap_or_default());
                            if store.shared_config_put_at(&text, "w", revision).unwrap().is_some() {
                                break;
                            }
                            refused += 1;
                        }
                    }
                    refused
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let text = PgStore::connect(&url).unwrap().shared_config().unwrap().1.unwrap().text;
    for w in 0..WRITERS {
        for i in 0..EACH {
            assert!(text.lines().any(|l| l == format!("w{w}.{i}")), "w{w}.{i} lost ({refused} refused): {text}");
        }
    }
    assert_eq!(text.lines().count(), WRITERS * EACH, "{text}");
}
