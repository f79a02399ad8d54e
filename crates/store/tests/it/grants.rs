//! [`GrantStore`]: "allow always" grants.

use toolgate_store::{AccessDecision, AccessRequest, AccessStatus, Grant, GrantMode, ToolGrant};

use crate::on_every_backend;

fn grant(agent: &str, subject: &str, created_ms: i64) -> Grant {
    Grant {
        id: 0,
        user: "ann".into(),
        agent: agent.into(),
        tool: "exec".into(),
        subject: subject.into(),
        shown: subject.into(),
        created_ms,
    }
}

#[test]
fn a_grant_covers_exactly_its_user_agent_tool_and_subject() {
    on_every_backend(|db| {
        let grants = db.connect().grants;
        grants.grant_add(&grant("main", "cargo test", 1)).unwrap();
        assert!(grants.grant_exists("ann", "main", "exec", "cargo test").unwrap());
        assert!(!grants.grant_exists("ann", "other", "exec", "cargo test").unwrap(), "scoped to the agent");
        assert!(!grants.grant_exists("bob", "main", "exec", "cargo test").unwrap(), "scoped to the user");
        assert!(!grants.grant_exists("ann", "main", "write", "cargo test").unwrap(), "scoped to the tool");
        assert!(!grants.grant_exists("ann", "main", "exec", "cargo test --all").unwrap(), "the exact subject");
    });
}

#[test]
fn grants_are_listed_oldest_first_without_duplicates_and_revoked_by_id() {
    on_every_backend(|db| {
        let grants = db.connect().grants;
        grants.grant_add(&grant("main", "cargo test", 1)).unwrap();
        grants.grant_add(&grant("main", "cargo test", 1)).unwrap();
        grants.grant_add(&grant("main", "make", 2)).unwrap();
        let all = grants.grants().unwrap();
        assert_eq!(all.iter().map(|g| g.subject.as_str()).collect::<Vec<_>>(), ["cargo test", "make"], "{all:?}");
        assert_eq!((all[0].user.as_str(), all[0].shown.as_str(), all[0].created_ms), ("ann", "cargo test", 1));
        assert_ne!(all[0].id, all[1].id);
        assert!(grants.grant_revoke(all[0].id).unwrap());
        assert!(!grants.grant_revoke(all[0].id).unwrap(), "already revoked");
        assert!(!grants.grant_exists("ann", "main", "exec", "cargo test").unwrap());
        assert!(grants.grant_exists("ann", "main", "exec", "make").unwrap(), "the other grant stays");
    });
}

#[test]
fn grants_outlive_the_connection_that_made_them() {
    on_every_backend(|db| {
        db.connect().grants.grant_add(&grant("main", "cargo test", 1)).unwrap();
        let later = db.connect().grants;
        assert!(later.grant_exists("ann", "main", "exec", "cargo test").unwrap());
        assert_eq!(later.grants().unwrap().len(), 1);
    });
}

fn tool_grant(subject: &str, allow: &[&str]) -> ToolGrant {
    ToolGrant {
        id: 0,
        subject: subject.into(),
        server: None,
        tool_allow: allow.iter().map(|s| (*s).to_owned()).collect(),
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

fn request(requester: &str, tool: &str) -> AccessRequest {
    AccessRequest {
        id: 0,
        requester: requester.into(),
        user: requester.into(),
        server: None,
        tool: Some(tool.into()),
        reason: "to test".into(),
        status: AccessStatus::Pending,
        created_ms: 5,
        decided_by: None,
        decided_ms: None,
        message: None,
        grant_id: None,
        notify_error: None,
        notify_failed_ms: None,
    }
}

#[test]
fn gateway_grants_are_found_by_subject_and_kept_apart_from_allow_always() {
    on_every_backend(|db| {
        let grants = db.connect().grants;
        let mut server = tool_grant("ops", &["search_*"]);
        server.server = Some("github".into());
        server.tool_deny = vec!["delete_repo".into()];
        server.config_overrides = serde_json::json!({"org": "acme"});
        let a = grants.tool_grant_add(&tool_grant("ann", &["echo"])).unwrap();
        let b = grants.tool_grant_add(&server).unwrap();
        grants.tool_grant_add(&tool_grant("bob", &["*"])).unwrap();
        grants.grant_add(&grant("main", "cargo test", 1)).unwrap();

        let mine = grants.tool_grants(Some(&["ann".to_owned(), "ops".to_owned()])).unwrap();
        assert_eq!(mine.iter().map(|g| g.id).collect::<Vec<_>>(), [a, b], "oldest first, only these subjects");
        assert_eq!(mine[1], ToolGrant { id: b, ..server }, "every field kept");
        assert_eq!(grants.tool_grants(None).unwrap().len(), 3, "allow-always rows are not listed as grants");
        assert_eq!(grants.grants().unwrap().len(), 1, "nor grants as allow-always rows");
        assert!(grants.tool_grants(Some(&[])).unwrap().is_empty());

        assert!(grants.tool_grant_enable(a, false).unwrap());
        assert!(!grants.tool_grant_get(a).unwrap().unwrap().enabled);
        assert!(!grants.tool_grant_enable(999, true).unwrap());
        assert!(grants.grant_revoke(a).unwrap());
        assert_eq!(grants.tool_grant_get(a).unwrap(), None);
        // A name that looks like SQL or JSON is a name.
        let odd = grants.tool_grant_add(&tool_grant("x'); DROP TABLE grants;--", &["\"]"])).unwrap();
        assert_eq!(grants.tool_grants(Some(&["x'); DROP TABLE grants;--".to_owned()])).unwrap()[0].id, odd);
    });
}

#[test]
fn a_pending_request_is_filed_once_and_decided_once() {
    on_every_backend(|db| {
        let grants = db.connect().grants;
        let (id, new) = grants.access_request(&request("bob", "exec")).unwrap();
        assert!(new);
        assert_eq!(grants.access_request(&request("bob", "exec")).unwrap(), (id, false), "a duplicate is the same one");
        let (other, new) = grants.access_request(&request("bob", "write")).unwrap();
        assert!(new && other != id);
        let pending = grants.access_requests(Some(AccessStatus::Pending), None).unwrap();
        assert_eq!(pending.iter().map(|r| r.id).collect::<Vec<_>>(), [other, id], "newest first");
        assert!(grants.access_requests(None, Some(&["ann".to_owned()])).unwrap().is_empty());

        let approve = AccessDecision {
            id,
            grant: Some(tool_grant("bob", &["exec"])),
            by: "lee".into(),
            at_ms: 9,
            message: Some("ok".into()),
        };
        let decided = grants.access_decide(&approve).unwrap().unwrap();
        assert_eq!((decided.status, decided.decided_by.as_deref()), (AccessStatus::Approved, Some("lee")));
        let made = grants.tool_grant_get(decided.grant_id.unwrap()).unwrap().unwrap();
        assert_eq!((made.subject.as_str(), made.request), ("bob", Some(id)), "the grant names its request");

        // A second decision (a rejection, or another approval) changes nothing and adds no grant.
        let again = grants.access_decide(&AccessDecision { grant: None, by: "kim".into(), ..approve.clone() }).unwrap();
        assert_eq!(again.unwrap(), decided);
        assert_eq!(grants.access_decide(&approve).unwrap().unwrap(), decided);
        assert_eq!(grants.tool_grants(Some(&["bob".to_owned()])).unwrap().len(), 1);

        let rejected = grants.access_decide(&AccessDecision { id: other, grant: None, ..approve }).unwrap().unwrap();
        assert_eq!((rejected.status, rejected.grant_id), (AccessStatus::Rejected, None));
        assert_eq!(grants.tool_grants(Some(&["bob".to_owned()])).unwrap().len(), 1, "a rejection grants nothing");
        assert!(grants.access_decide(&AccessDecision { id: 12345, ..rejected_decision() }).unwrap().is_none());
        // Once decided, asking again is a new request.
        assert!(grants.access_request(&request("bob", "exec")).unwrap().1);
    });
}

fn rejected_decision() -> AccessDecision {
    AccessDecision { id: 0, grant: None, by: "lee".into(), at_ms: 1, message: None }
}

#[test]
fn two_approvers_at_once_make_one_decision_and_one_grant() {
    on_every_backend(|db| {
        let (id, _) = db.connect().grants.access_request(&request("bob", "exec")).unwrap();
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let grants = db.connect().grants;
                    s.spawn(move || {
                        let d = AccessDecision {
                            id,
                            grant: Some(tool_grant("bob", &["exec"])),
                            by: format!("admin{i}"),
                            at_ms: i,
                            message: None,
                        };
                        grants.access_decide(&d).unwrap().unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(results.windows(2).all(|w| w[0] == w[1]), "everyone sees the one decision: {results:?}");
        assert_eq!(db.connect().grants.tool_grants(None).unwrap().len(), 1, "one grant");
    });
}
