//! [`GrantStore`]: "allow always" grants.

use toolgate_store::Grant;

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
