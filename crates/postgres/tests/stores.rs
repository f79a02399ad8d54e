//! The same test bodies against both backends: each `fn` below takes a [`Backend`] and runs
//! once on SQLite (`toolgate_store::Store`, a file in a temporary folder) and once on
//! PostgreSQL ([`PgStore`] on a throwaway cluster, `toolgate_testkit::postgres`), through the
//! traits only. `on_both!` makes the two `#[test]`s of each body. A PostgreSQL test without
//! the server binaries fails and says to run `cargo xtask deps`.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};

use toolgate_postgres::PgStore;
use toolgate_store::{
    AccessDecision, AccessRequest, AccessStatus, ApiKeyRecord, Grant, GrantMode, GrantStore, IdentityStore, Membership,
    Principal, PrincipalKind, Store, ToolGrant,
};
use toolgate_testkit::postgres::Cluster;

/// One handle on a database, as one node or process holds it.
struct Handles {
    identity: Arc<dyn IdentityStore>,
    grants: Arc<dyn GrantStore>,
}

/// A database under test and a way to open more handles on it (another process, another node).
struct Backend {
    open: Box<dyn Fn() -> Handles + Send + Sync>,
    /// The (identity, grants) revisions as the database has them now, read by no handle (a
    /// PostgreSQL handle keeps them in memory, where other nodes' changes arrive by `NOTIFY`).
    revisions: Box<dyn Fn() -> (i64, i64) + Send + Sync>,
    /// The temporary folder or the cluster: dropped last.
    _keep: Box<dyn Send + Sync>,
}

impl Backend {
    fn handles(&self) -> Handles {
        (self.open)()
    }
}

fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let own = Store::open(&path).unwrap();
    let revisions = move || (own.identity_revision().unwrap(), own.grants_revision().unwrap());
    let open = move || {
        let store = Arc::new(Store::open(&path).unwrap());
        Handles { identity: store.clone(), grants: store }
    };
    Backend { open: Box::new(open), revisions: Box::new(revisions), _keep: Box::new(dir) }
}

fn postgres() -> Backend {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    });
    let revisions = move || {
        runtime.block_on(async {
            let row = client
                .query_one(
                    "SELECT max(value) FILTER (WHERE name = 'identity'), max(value) FILTER (WHERE name = 'grants')
                     FROM revisions",
                    &[],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1))
        })
    };
    let open = move || {
        let store = Arc::new(PgStore::connect(&url).unwrap_or_else(|e| panic!("{e}")));
        Handles { identity: store.clone(), grants: store }
    };
    Backend { open: Box::new(open), revisions: Box::new(revisions), _keep: Box::new(cluster) }
}

macro_rules! on_both {
    ($($body:ident),* $(,)?) => {
        $(
            mod $body {
                #[test]
                fn sqlite() {
                    super::$body(&super::sqlite());
                }

                #[test]
                fn postgres() {
                    super::$body(&super::postgres());
                }
            }
        )*
    };
}

on_both!(
    every_change_raises_its_revision_and_a_keys_use_does_not,
    principals_and_memberships,
    api_keys,
    page_sessions,
    allow_always_grants,
    tool_grants,
    access_requests_are_filed_once_and_decided_once,
    two_deciders_at_once_make_one_decision_and_one_grant,
    a_failed_notification_is_kept_on_the_decided_request,
    hostile_text_is_kept_verbatim,
);

fn principal(name: &str, kind: PrincipalKind) -> Principal {
    Principal { name: name.into(), kind, owner: None, admin: false, disabled: false, password: None, created_ms: 1 }
}

fn key(id: &str, principal: &str, created_ms: i64) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        principal: principal.into(),
        digest: [7; 32],
        scope: serde_json::json!({"tools": ["read"], "nested": {"n": 1}}),
        created_ms,
        created_by: "root".into(),
        expires_ms: Some(9_000),
        revoked_ms: None,
        last_used_ms: None,
        note: "ci".into(),
    }
}

fn tool_grant(subject: &str) -> ToolGrant {
    ToolGrant {
        id: 0,
        subject: subject.into(),
        server: None,
        tool_allow: vec!["read".into(), "grep*".into()],
        tool_deny: vec!["exec".into()],
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

fn request(requester: &str, tool: &str) -> AccessRequest {
    AccessRequest {
        id: 0,
        requester: requester.into(),
        user: requester.into(),
        server: None,
        tool: Some(tool.into()),
        reason: "why".into(),
        status: AccessStatus::Pending,
        created_ms: 1,
        decided_by: None,
        decided_ms: None,
        message: None,
        grant_id: None,
        notify_error: None,
        notify_failed_ms: None,
    }
}

fn approve(id: i64, subject: &str, by: &str) -> AccessDecision {
    AccessDecision { id, grant: Some(tool_grant(subject)), by: by.into(), at_ms: 2, message: Some("ok".into()) }
}

/// Every kind of change raises its revision by one, as the database has it; the writer's own
/// handle sees it at once and another handle (another process or node) soon (on PostgreSQL,
/// when the notification arrives); a key's use and a no-op raise nothing.
fn every_change_raises_its_revision_and_a_keys_use_does_not(b: &Backend) {
    let writer = b.handles();
    let reader = b.handles();
    let of = |h: &Handles| (h.identity.identity_revision().unwrap(), h.grants.grants_revision().unwrap());
    let mut last = (b.revisions)();
    // `Some(true)`: the identity revision moved by one; `Some(false)`: the grants'; `None`:
    // neither.
    let mut step = |what: &str, identity: Option<bool>| {
        let seen = (b.revisions)();
        let expected = match identity {
            Some(true) => (last.0 + 1, last.1),
            Some(false) => (last.0, last.1 + 1),
            None => last,
        };
        assert_eq!(seen, expected, "{what}");
        assert_eq!(of(&writer), seen, "{what}: the writer's own handle");
        // A bound on liveness, not speed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while of(&reader) != seen {
            assert!(std::time::Instant::now() < deadline, "{what}: another handle never saw {seen:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        last = seen;
    };
    let (ids, grants) = (&writer.identity, &writer.grants);
    ids.principal_add(&principal("ann", PrincipalKind::User)).unwrap();
    step("a user added", Some(true));
    assert!(!ids.principal_add(&principal("ann", PrincipalKind::Group)).unwrap());
    step("a taken name adds nothing", None);
    ids.principal_add(&principal("ops", PrincipalKind::Group)).unwrap();
    step("a group added", Some(true));
    ids.membership_set(&Membership { user: "ann".into(), group: "ops".into(), group_admin: false }).unwrap();
    step("a member added", Some(true));
    ids.principal_update(&Principal { disabled: true, ..principal("ann", PrincipalKind::User) }).unwrap();
    step("a user disabled", Some(true));
    assert!(!ids.principal_update(&principal("nobody", PrincipalKind::User)).unwrap());
    step("updating nobody changes nothing", None);
    let k = key("0123456789abcdef", "ann", 1);
    ids.key_add(&k).unwrap();
    step("a key added", Some(true));
    ids.key_used(&k.id, 100_000).unwrap();
    step("a key's use changes no revision", None);
    ids.key_revoke(&k.id, 200_000).unwrap();
    step("a key revoked", Some(true));
    ids.membership_remove("ann", "ops").unwrap();
    step("a member removed", Some(true));
    let id = grants.tool_grant_add(&tool_grant("ann")).unwrap();
    step("a grant added", Some(false));
    grants.tool_grant_enable(id, false).unwrap();
    step("a grant disabled", Some(false));
    grants.grant_revoke(id).unwrap();
    step("a grant revoked", Some(false));
    let always = Grant {
        id: 0,
        user: "ann".into(),
        agent: "main".into(),
        tool: "exec".into(),
        subject: "ls".into(),
        shown: "ls".into(),
        created_ms: 1,
    };
    grants.grant_add(&always).unwrap();
    step("an \"allow always\" decision", Some(false));
    grants.grant_add(&always).unwrap();
    step("the same decision again adds nothing", None);
    let (request, _) = grants.access_request(&request("ann", "time")).unwrap();
    step("a request alone grants nothing", None);
    grants.access_decide(&approve(request, "ann", "root")).unwrap();
    step("an access request approved", Some(false));
    grants.access_decide(&approve(request, "ann", "root")).unwrap();
    step("deciding it again changes nothing", None);
}

fn principals_and_memberships(b: &Backend) {
    let ids = b.handles().identity;
    let agent = Principal { owner: Some("ann".into()), password: None, ..principal("ann-bot", PrincipalKind::Agent) };
    let ann =
        Principal { admin: true, password: Some("$argon2id$v=19$x".into()), ..principal("ann", PrincipalKind::User) };
    for p in [&ann, &principal("bob", PrincipalKind::User), &principal("ops", PrincipalKind::Group), &agent] {
        assert!(ids.principal_add(p).unwrap(), "{}", p.name);
    }
    assert!(!ids.principal_add(&principal("ops", PrincipalKind::User)).unwrap(), "names are unique across kinds");
    assert_eq!(ids.principal_get("ann").unwrap().as_ref(), Some(&ann));
    assert_eq!(ids.principal_get("ann-bot").unwrap().as_ref(), Some(&agent));
    assert_eq!(ids.principal_get("nobody").unwrap(), None);
    let names = |kind| ids.principals(kind).unwrap().into_iter().map(|p| p.name).collect::<Vec<_>>();
    assert_eq!(names(None), ["ann", "ann-bot", "bob", "ops"]);
    assert_eq!(names(Some(PrincipalKind::User)), ["ann", "bob"]);
    assert_eq!(names(Some(PrincipalKind::Agent)), ["ann-bot"]);

    let updated = Principal { admin: false, disabled: true, password: None, ..ann.clone() };
    assert!(ids.principal_update(&updated).unwrap());
    assert_eq!(ids.principal_get("ann").unwrap(), Some(updated));

    let member =
        |user: &str, group: &str, group_admin| Membership { user: user.into(), group: group.into(), group_admin };
    assert!(ids.membership_set(&member("ann", "ops", false)).unwrap());
    assert!(ids.membership_set(&member("ann", "ops", true)).unwrap(), "setting again changes the admin flag");
    assert!(!ids.membership_set(&member("ann", "bob", false)).unwrap(), "bob is no group");
    assert!(!ids.membership_set(&member("ops", "ops", false)).unwrap(), "a group is no user");
    assert!(!ids.membership_set(&member("ghost", "ops", false)).unwrap(), "no such user");
    assert_eq!(ids.memberships("ann").unwrap(), [member("ann", "ops", true)]);
    assert!(ids.memberships("bob").unwrap().is_empty());
    assert!(ids.membership_remove("ann", "ops").unwrap());
    assert!(!ids.membership_remove("ann", "ops").unwrap());
    assert!(ids.memberships("ann").unwrap().is_empty());
}

fn api_keys(b: &Backend) {
    let ids = b.handles().identity;
    let (old, new, bobs) =
        (key("aaaaaaaaaaaaaaaa", "ann", 10), key("bbbbbbbbbbbbbbbb", "ann", 20), key("cccc", "bob", 15));
    for k in [&old, &new, &bobs] {
        assert!(ids.key_add(k).unwrap());
    }
    assert!(!ids.key_add(&key("aaaaaaaaaaaaaaaa", "bob", 30)).unwrap(), "a taken id adds nothing");
    assert_eq!(ids.key_get(&old.id).unwrap().as_ref(), Some(&old), "every field back, the scope's JSON too");
    assert_eq!(ids.key_get("missing").unwrap(), None);
    let listed = |p: Option<&str>| ids.keys(p).unwrap().into_iter().map(|k| k.id).collect::<Vec<_>>();
    assert_eq!(listed(None), [new.id.as_str(), bobs.id.as_str(), old.id.as_str()], "newest first");
    assert_eq!(listed(Some("ann")), [new.id.as_str(), old.id.as_str()]);

    ids.key_used(&old.id, 100_000).unwrap();
    ids.key_used(&old.id, 130_000).unwrap();
    assert_eq!(ids.key_get(&old.id).unwrap().unwrap().last_used_ms, Some(100_000), "at most once a minute");
    ids.key_used(&old.id, 170_000).unwrap();
    assert_eq!(ids.key_get(&old.id).unwrap().unwrap().last_used_ms, Some(170_000));

    assert!(ids.key_revoke(&old.id, 500).unwrap());
    assert!(!ids.key_revoke(&old.id, 900).unwrap(), "revoked already");
    assert_eq!(ids.key_get(&old.id).unwrap().unwrap().revoked_ms, Some(500), "the first revocation's time is kept");
    assert!(!ids.key_revoke("missing", 900).unwrap());
}

fn page_sessions(b: &Backend) {
    let ids = b.handles().identity;
    let (one, two, three) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    assert!(ids.page_session_open(&one, "ann", 1_000, 5_000, 2).unwrap());
    assert!(ids.page_session_open(&two, "bob", 1_000, 2_000, 2).unwrap());
    assert!(!ids.page_session_open(&three, "eve", 1_500, 9_000, 2).unwrap(), "two live sessions: the cap");
    assert_eq!(ids.page_session_get(&one, 1_500).unwrap(), Some(("ann".into(), 5_000)));
    assert_eq!(ids.page_session_get(&three, 1_500).unwrap(), None);
    assert_eq!(ids.page_session_get(&two, 2_000).unwrap(), None, "expired at its end");
    assert!(ids.page_session_open(&three, "eve", 2_500, 9_000, 2).unwrap(), "the expired one was dropped first");
    assert!(ids.page_session_close(&one).unwrap());
    assert!(!ids.page_session_close(&one).unwrap());
    assert_eq!(ids.page_session_get(&one, 2_500).unwrap(), None);
}

fn allow_always_grants(b: &Backend) {
    let grants = b.handles().grants;
    let grant = Grant {
        id: 0,
        user: "ann".into(),
        agent: "main".into(),
        tool: "exec".into(),
        subject: "cargo test".into(),
        shown: "cargo test".into(),
        created_ms: 7,
    };
    grants.grant_add(&grant).unwrap();
    grants.grant_add(&grant).unwrap();
    assert!(grants.grant_exists("ann", "main", "exec", "cargo test").unwrap());
    assert!(!grants.grant_exists("ann", "other", "exec", "cargo test").unwrap(), "scoped to the agent");
    assert!(!grants.grant_exists("ann", "main", "exec", "cargo test; rm -rf /").unwrap(), "exact subject");
    let all = grants.grants().unwrap();
    assert_eq!(all, [Grant { id: all[0].id, ..grant }], "no duplicates");
    assert!(grants.tool_grants(None).unwrap().is_empty(), "an exact-subject grant is no tool grant");
    assert!(grants.grant_revoke(all[0].id).unwrap());
    assert!(!grants.grant_revoke(all[0].id).unwrap());
    assert!(!grants.grant_exists("ann", "main", "exec", "cargo test").unwrap());
}

fn tool_grants(b: &Backend) {
    let grants = b.handles().grants;
    let full = ToolGrant {
        server: Some("github".into()),
        config_overrides: serde_json::json!({"token": {"env": "GH"}}),
        mode: GrantMode::Ask,
        arg_rule: Some("exec(git *)".into()),
        expires_ms: Some(99),
        note: "for the release".into(),
        ..tool_grant("ops")
    };
    let a = grants.tool_grant_add(&tool_grant("ann")).unwrap();
    let o = grants.tool_grant_add(&full).unwrap();
    let c = grants.tool_grant_add(&tool_grant("carl")).unwrap();
    assert!(a < o && o < c, "ids rise");
    assert_eq!(grants.tool_grant_get(o).unwrap(), Some(ToolGrant { id: o, ..full }), "every field back");
    assert_eq!(grants.tool_grant_get(9_999).unwrap(), None);
    let ids = |subjects: Option<&[String]>| {
        grants.tool_grants(subjects).unwrap().into_iter().map(|g| g.id).collect::<Vec<_>>()
    };
    assert_eq!(ids(None), [a, o, c], "oldest first");
    assert_eq!(ids(Some(&["carl".into(), "ann".into()])), [a, c]);
    assert!(ids(Some(&[])).is_empty());
    assert!(grants.tool_grant_enable(a, false).unwrap());
    assert!(!grants.tool_grant_get(a).unwrap().unwrap().enabled);
    assert!(!grants.tool_grant_enable(9_999, true).unwrap());
}

fn access_requests_are_filed_once_and_decided_once(b: &Backend) {
    let grants = b.handles().grants;
    let (first, new) = grants.access_request(&request("ann", "time")).unwrap();
    assert!(new);
    assert_eq!(grants.access_request(&request("ann", "time")).unwrap(), (first, false), "the same pending request");
    let whole_server = AccessRequest { server: Some("github".into()), tool: None, ..request("ann", "x") };
    let (server, new) = grants.access_request(&whole_server).unwrap();
    assert!(new && server != first, "another server is another request");
    let (bobs, _) = grants.access_request(&request("bob", "time")).unwrap();

    let pending = grants.access_requests(Some(AccessStatus::Pending), None).unwrap();
    assert_eq!(pending.iter().map(|r| r.id).collect::<Vec<_>>(), [bobs, server, first], "newest first");
    let stored = grants.access_get(server).unwrap().unwrap();
    assert_eq!(
        (stored.server.as_deref(), stored.tool.as_deref(), stored.status),
        (Some("github"), None, AccessStatus::Pending)
    );

    let decided = grants.access_decide(&approve(first, "ann", "root")).unwrap().unwrap();
    assert_eq!(
        (decided.status, decided.decided_by.as_deref(), decided.decided_ms),
        (AccessStatus::Approved, Some("root"), Some(2))
    );
    let grant = grants.tool_grant_get(decided.grant_id.unwrap()).unwrap().unwrap();
    assert_eq!((grant.subject.as_str(), grant.request), ("ann", Some(first)), "the grant knows its request");

    let again = AccessDecision { grant: None, by: "eve".into(), ..approve(first, "ann", "eve") };
    assert_eq!(grants.access_decide(&again).unwrap(), Some(decided.clone()), "decided already: unchanged");
    let rejected =
        grants.access_decide(&AccessDecision { id: bobs, grant: None, by: "root".into(), at_ms: 3, message: None });
    let rejected = rejected.unwrap().unwrap();
    assert_eq!((rejected.status, rejected.grant_id), (AccessStatus::Rejected, None));
    assert_eq!(grants.access_decide(&approve(9_999, "ann", "root")).unwrap(), None, "no such request");
    assert_eq!(grants.tool_grants(None).unwrap().len(), 1, "only the approval granted");

    let (refiled, new) = grants.access_request(&request("ann", "time")).unwrap();
    assert!(new && refiled != first, "once decided, asking again is a new request");
    let of = |who: &[&str]| {
        let who: Vec<String> = who.iter().map(|s| s.to_string()).collect();
        grants.access_requests(None, Some(&who)).unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    assert_eq!(of(&["ann"]), [refiled, server, first]);
    assert_eq!(of(&["bob", "nobody"]), [bobs]);
    assert_eq!(grants.access_requests(Some(AccessStatus::Approved), None).unwrap(), [decided]);
}

/// Two deciders (two handles: two processes, or two nodes) decide the same request at the same
/// moment, many times over: each time exactly one decision lands and one grant is written, and
/// both deciders are told the same outcome.
fn two_deciders_at_once_make_one_decision_and_one_grant(b: &Backend) {
    const ROUNDS: usize = 12;
    let deciders = [b.handles().grants, b.handles().grants];
    let filer = b.handles().grants;
    for round in 0..ROUNDS {
        let (id, _) = filer.access_request(&request("ann", &format!("tool{round}"))).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let outcomes: Vec<AccessRequest> = std::thread::scope(|s| {
            let threads: Vec<_> = deciders
                .iter()
                .zip(["alice", "bob"])
                .map(|(store, by)| {
                    let barrier = barrier.clone();
                    s.spawn(move || {
                        barrier.wait();
                        store.access_decide(&approve(id, "ann", by)).unwrap().unwrap()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(outcomes[0], outcomes[1], "round {round}: both are told the one decision");
        let made: Vec<ToolGrant> =
            filer.tool_grants(None).unwrap().into_iter().filter(|g| g.request == Some(id)).collect();
        assert_eq!(made.len(), 1, "round {round}: one grant");
        assert_eq!(outcomes[0].grant_id, Some(made[0].id));
    }
    assert_eq!(filer.tool_grants(None).unwrap().len(), ROUNDS);
}

/// A decided request's requester who could not be told: the failure is kept on the request (the
/// latest one), read by every handle, and only on a decided request; a grant revision is not
/// raised by it (nothing about anyone's grants changed).
fn a_failed_notification_is_kept_on_the_decided_request(b: &Backend) {
    let grants = b.handles().grants;
    let (id, _) = grants.access_request(&request("ann", "time")).unwrap();
    assert!(!grants.access_notify_failed(id, "pending still", 3).unwrap(), "not decided yet: nothing to tell");
    assert!(!grants.access_notify_failed(9_999, "no such request", 3).unwrap());
    let decided = grants.access_decide(&approve(id, "ann", "root")).unwrap().unwrap();
    assert_eq!((decided.notify_error, decided.notify_failed_ms), (None, None), "nothing failed yet");
    let revision = grants.grants_revision().unwrap();
    let error = "webhook answered 500 Internal Server Error: <b>'; DROP TABLE x; --</b>";
    assert!(grants.access_notify_failed(id, "connection refused", 4).unwrap());
    assert!(grants.access_notify_failed(id, error, 5).unwrap());
    let seen = b.handles().grants.access_get(id).unwrap().unwrap();
    assert_eq!((seen.notify_error.as_deref(), seen.notify_failed_ms), (Some(error), Some(5)), "the latest, verbatim");
    assert_eq!(seen.status, AccessStatus::Approved, "the decision stands");
    let listed = grants.access_requests(None, Some(&["ann".to_owned()])).unwrap();
    assert_eq!(listed[0].notify_error.as_deref(), Some(error));
    assert_eq!(grants.grants_revision().unwrap(), revision, "no grant changed");
    let (other, _) = grants.access_request(&request("ann", "read")).unwrap();
    let rejected =
        grants.access_decide(&AccessDecision { id: other, grant: None, by: "root".into(), at_ms: 6, message: None });
    assert_eq!(rejected.unwrap().unwrap().notify_error, None, "another request keeps none");
}

/// Names and notes from people and models are data: quotes, SQL, NUL-free control text and
/// non-ASCII come back byte for byte and match only themselves.
fn hostile_text_is_kept_verbatim(b: &Backend) {
    let h = b.handles();
    let evil = "x'); DROP TABLE principals; --";
    assert!(h.identity.principal_add(&principal(evil, PrincipalKind::User)).unwrap());
    assert!(h.identity.principal_add(&principal("x", PrincipalKind::User)).unwrap());
    assert_eq!(h.identity.principal_get(evil).unwrap().unwrap().name, evil);
    assert_eq!(h.identity.principals(None).unwrap().len(), 2);
    let subject = "rm -rf / \"$(curl evil)\" % _ \\ ünï\u{202e}";
    let grant = Grant {
        id: 0,
        user: evil.into(),
        agent: "%".into(),
        tool: "exec".into(),
        subject: subject.into(),
        shown: subject.into(),
        created_ms: 1,
    };
    h.grants.grant_add(&grant).unwrap();
    assert!(h.grants.grant_exists(evil, "%", "exec", subject).unwrap());
    assert!(!h.grants.grant_exists(evil, "main", "exec", subject).unwrap(), "`%` is no wildcard");
    assert!(!h.grants.grant_exists(evil, "%", "exec", "rm -rf /%").unwrap());
    assert_eq!(h.grants.tool_grants(Some(&["%".into()])).unwrap(), []);
}
