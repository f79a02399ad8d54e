//! [`IdentityStore`]: the principals, memberships and API key records of a team gateway.

use toolgate_store::{ApiKeyRecord, Membership, Principal, PrincipalKind};

use crate::on_every_backend;

fn principal(name: &str, kind: PrincipalKind) -> Principal {
    Principal { name: name.into(), kind, owner: None, admin: false, disabled: false, password: None, created_ms: 1_000 }
}

fn key(id: &str, principal: &str, created_ms: i64) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        principal: principal.into(),
        digest: [7; 32],
        scope: serde_json::json!({"tools": ["read", "grep"], "sources": ["127.0.0.1/32"]}),
        created_ms,
        created_by: "admin".into(),
        expires_ms: Some(99_000),
        revoked_ms: None,
        last_used_ms: None,
        note: "ci".into(),
    }
}

#[test]
fn names_are_unique_across_kinds_and_read_back_whole() {
    on_every_backend(|db| {
        let ids = db.connect().identity;
        assert!(ids.principal_add(&principal("ann", PrincipalKind::User)).unwrap());
        assert!(!ids.principal_add(&principal("ann", PrincipalKind::Group)).unwrap(), "a taken name");
        let mut bot = principal("ann-bot", PrincipalKind::Agent);
        bot.owner = Some("ann".into());
        assert!(ids.principal_add(&bot).unwrap());
        assert_eq!(ids.principal_get("ann-bot").unwrap(), Some(bot.clone()));
        assert_eq!(ids.principal_get("nobody").unwrap(), None);
        let agents = ids.principals(Some(PrincipalKind::Agent)).unwrap();
        assert_eq!(agents, [bot]);
        assert_eq!(ids.principals(None).unwrap().len(), 2);

        let mut ann = ids.principal_get("ann").unwrap().unwrap();
        ann.admin = true;
        ann.password = Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into());
        assert!(ids.principal_update(&ann).unwrap());
        assert_eq!(ids.principal_get("ann").unwrap(), Some(ann));
        assert!(!ids.principal_update(&principal("ghost", PrincipalKind::User)).unwrap());
    });
}

#[test]
fn a_membership_needs_a_user_and_a_group() {
    on_every_backend(|db| {
        let ids = db.connect().identity;
        ids.principal_add(&principal("ann", PrincipalKind::User)).unwrap();
        ids.principal_add(&principal("ops", PrincipalKind::Group)).unwrap();
        let member =
            |user: &str, group: &str, admin| Membership { user: user.into(), group: group.into(), group_admin: admin };
        assert!(ids.membership_set(&member("ann", "ops", false)).unwrap());
        assert!(!ids.membership_set(&member("ops", "ann", false)).unwrap(), "the kinds are checked");
        assert!(!ids.membership_set(&member("ann", "nope", false)).unwrap(), "a missing group");
        assert!(ids.membership_set(&member("ann", "ops", true)).unwrap(), "setting again changes the admin flag");
        assert_eq!(ids.memberships("ann").unwrap(), [member("ann", "ops", true)]);
        assert!(ids.membership_remove("ann", "ops").unwrap());
        assert!(!ids.membership_remove("ann", "ops").unwrap());
        assert!(ids.memberships("ann").unwrap().is_empty());
    });
}

#[test]
fn keys_are_records_whose_revocation_is_kept_once() {
    on_every_backend(|db| {
        let ids = db.connect().identity;
        ids.principal_add(&principal("ann", PrincipalKind::User)).unwrap();
        assert!(ids.key_add(&key("k1", "ann", 10)).unwrap());
        assert!(!ids.key_add(&key("k1", "ann", 11)).unwrap(), "a taken id");
        assert!(ids.key_add(&key("k2", "ann", 20)).unwrap());
        assert_eq!(ids.key_get("k1").unwrap(), Some(key("k1", "ann", 10)));
        let listed: Vec<String> = ids.keys(Some("ann")).unwrap().into_iter().map(|k| k.id).collect();
        assert_eq!(listed, ["k2", "k1"], "newest first");
        assert!(ids.keys(Some("bob")).unwrap().is_empty());

        assert!(ids.key_revoke("k1", 500).unwrap());
        assert!(!ids.key_revoke("k1", 900).unwrap(), "revoked already");
        assert_eq!(ids.key_get("k1").unwrap().unwrap().revoked_ms, Some(500), "the first revocation's time");
        assert!(!ids.key_revoke("nope", 900).unwrap());

        ids.key_used("k2", 100_000).unwrap();
        ids.key_used("k2", 130_000).unwrap();
        assert_eq!(ids.key_get("k2").unwrap().unwrap().last_used_ms, Some(100_000), "at most once a minute");
        ids.key_used("k2", 170_000).unwrap();
        assert_eq!(ids.key_get("k2").unwrap().unwrap().last_used_ms, Some(170_000));
    });
}

#[test]
fn another_connection_sees_a_revocation_at_once() {
    on_every_backend(|db| {
        let (a, b) = (db.connect().identity, db.connect().identity);
        a.principal_add(&principal("ann", PrincipalKind::User)).unwrap();
        a.key_add(&key("k1", "ann", 10)).unwrap();
        assert_eq!(b.key_get("k1").unwrap().unwrap().revoked_ms, None);
        a.key_revoke("k1", 42).unwrap();
        assert_eq!(b.key_get("k1").unwrap().unwrap().revoked_ms, Some(42));
    });
}
