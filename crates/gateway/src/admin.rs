//! Administration of a gateway's principals and keys: what `toolgate admin` (and later the
//! page) does, with its checks, over the store.

use std::sync::Arc;

use toolgate_store::{ApiKeyRecord, IdentityStore, Membership, Principal, PrincipalKind};

use crate::keys::{self, KeyScope, KeyText};
use crate::{GatewayError, check_name};

/// The current time, Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A key just made: its record and its text, which is shown once and kept nowhere.
#[derive(Debug)]
pub struct NewKey {
    /// What the store keeps.
    pub record: ApiKeyRecord,
    /// The key itself.
    pub text: KeyText,
}

/// Principals and keys, managed with their rules.
#[derive(Debug, Clone)]
pub struct Admin {
    identity: Arc<dyn IdentityStore>,
}

impl Admin {
    /// Administration over `identity`.
    pub fn new(identity: Arc<dyn IdentityStore>) -> Self {
        Admin { identity }
    }

    fn add(
        &self,
        name: &str,
        kind: PrincipalKind,
        owner: Option<String>,
        admin: bool,
    ) -> Result<Principal, GatewayError> {
        check_name(name)?;
        let principal = Principal {
            name: name.to_owned(),
            kind,
            owner,
            admin,
            disabled: false,
            password: None,
            created_ms: now_ms(),
        };
        if !self.identity.principal_add(&principal)? {
            return Err(GatewayError::Taken(name.to_owned()));
        }
        Ok(principal)
    }

    /// Adds user `name` (an admin of the gateway when `admin`), in `groups`, each made when it
    /// does not exist yet.
    pub fn user_add(&self, name: &str, admin: bool, groups: &[String]) -> Result<Principal, GatewayError> {
        for group in groups {
            check_name(group)?;
            if let Some(p) = self.identity.principal_get(group)?
                && p.kind != PrincipalKind::Group
            {
                return Err(GatewayError::Missing { kind: "group", name: group.clone() });
            }
        }
        let user = self.add(name, PrincipalKind::User, None, admin)?;
        for group in groups {
            if self.identity.principal_get(group)?.is_none() {
                self.add(group, PrincipalKind::Group, None, false)?;
            }
            self.identity.membership_set(&Membership {
                user: name.to_owned(),
                group: group.clone(),
                group_admin: false,
            })?;
        }
        Ok(user)
    }

    /// Adds group `name`.
    pub fn group_add(&self, name: &str) -> Result<Principal, GatewayError> {
        self.add(name, PrincipalKind::Group, None, false)
    }

    /// Adds agent `name`, owned by the user or group `owner`.
    pub fn agent_add(&self, name: &str, owner: &str) -> Result<Principal, GatewayError> {
        match self.identity.principal_get(owner)? {
            Some(p) if p.kind != PrincipalKind::Agent => {}
            _ => return Err(GatewayError::Missing { kind: "user", name: owner.to_owned() }),
        }
        self.add(name, PrincipalKind::Agent, Some(owner.to_owned()), false)
    }

    /// Every principal, or those of `kind`.
    pub fn list(&self, kind: Option<PrincipalKind>) -> Result<Vec<Principal>, GatewayError> {
        Ok(self.identity.principals(kind)?)
    }

    /// The groups `user` is in.
    pub fn groups_of(&self, user: &str) -> Result<Vec<Membership>, GatewayError> {
        Ok(self.identity.memberships(user)?)
    }

    /// Disables (or enables again) a principal: its keys stop working at once.
    pub fn set_disabled(&self, name: &str, disabled: bool) -> Result<(), GatewayError> {
        let mut principal = self
            .identity
            .principal_get(name)?
            .ok_or_else(|| GatewayError::Missing { kind: "user", name: name.to_owned() })?;
        principal.disabled = disabled;
        self.identity.principal_update(&principal)?;
        Ok(())
    }

    /// Makes a key for the user or agent `principal`, valid until `expires_ms` (or for good),
    /// limited to `scope`. The text is in the result only.
    pub fn key_create(
        &self,
        principal: &str,
        scope: &KeyScope,
        expires_ms: Option<i64>,
        note: &str,
        by: &str,
    ) -> Result<NewKey, GatewayError> {
        scope.check()?;
        match self.identity.principal_get(principal)? {
            Some(p) if p.kind != PrincipalKind::Group => {}
            _ => return Err(GatewayError::Missing { kind: "user", name: principal.to_owned() }),
        }
        let created_ms = now_ms();
        if expires_ms.is_some_and(|at| at <= created_ms) {
            return Err(GatewayError::BadScope("the expiry is in the past".to_owned()));
        }
        // An id collision (64 random bits) is all but impossible; retried anyway rather than
        // trusted.
        for _ in 0..3 {
            let (id, text) = keys::generate()?;
            let record = ApiKeyRecord {
                id,
                principal: principal.to_owned(),
                digest: keys::digest(text.reveal()),
                scope: serde_json::to_value(scope).map_err(|e| GatewayError::BadScope(e.to_string()))?,
                created_ms,
                created_by: by.to_owned(),
                expires_ms,
                revoked_ms: None,
                last_used_ms: None,
                note: note.chars().take(200).collect(),
            };
            if self.identity.key_add(&record)? {
                return Ok(NewKey { record, text });
            }
        }
        Err(GatewayError::Random("three key ids in a row were taken".to_owned()))
    }

    /// Every key, or those of `principal`, newest first.
    pub fn keys(&self, principal: Option<&str>) -> Result<Vec<ApiKeyRecord>, GatewayError> {
        Ok(self.identity.keys(principal)?)
    }

    /// Revokes key `id`: the next request with it is refused. Revoking a revoked key is an
    /// error that says so.
    pub fn key_revoke(&self, id: &str) -> Result<(), GatewayError> {
        if self.identity.key_revoke(id, now_ms())? {
            return Ok(());
        }
        match self.identity.key_get(id)? {
            Some(_) => Ok(()),
            None => Err(GatewayError::NoKey(id.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use toolgate_mcp::Authenticator;
    use toolgate_store::Store;

    use super::*;
    use crate::KeyAuthenticator;

    fn admin() -> (tempfile::TempDir, Admin, Arc<dyn IdentityStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn IdentityStore> = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        (dir, Admin::new(Arc::clone(&store)), store)
    }

    fn bearer(text: &str) -> Vec<u8> {
        format!("Bearer {text}").into_bytes()
    }

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn a_key_admits_its_user_until_revoked() {
        let (_dir, admin, store) = admin();
        admin.user_add("ann", false, &["ops".to_owned()]).unwrap();
        assert_eq!(admin.groups_of("ann").unwrap()[0].group, "ops", "the group was made");
        let key = admin.key_create("ann", &KeyScope::default(), None, "laptop", "root").unwrap();
        let auth = KeyAuthenticator::new(store);
        let caller = auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).unwrap();
        assert_eq!((caller.user.as_str(), caller.key.as_deref()), ("ann", Some(key.record.id.as_str())));

        admin.key_revoke(&key.record.id).unwrap();
        let refused = auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).unwrap_err();
        assert_eq!(refused.status, 401);
        assert!(refused.message.contains("revoked"), "{}", refused.message);
        assert!(matches!(admin.key_revoke("0000000000000000"), Err(GatewayError::NoKey(_))));
    }

    #[test]
    fn forged_expired_and_misplaced_keys_are_refused() {
        let (_dir, admin, store) = admin();
        admin.user_add("ann", false, &[]).unwrap();
        let scope = KeyScope { tools: vec!["read".into()], sources: vec!["10.0.0.0/8".into()], ..KeyScope::default() };
        let key = admin.key_create("ann", &scope, Some(now_ms() + 60_000), "", "root").unwrap();
        let auth = KeyAuthenticator::new(Arc::clone(&store));
        let text = key.text.reveal();

        let from_lan = auth.authenticate(Some(&bearer(text)), "10.1.1.1".parse().unwrap()).unwrap();
        assert!(from_lan.may_use("read") && !from_lan.may_use("exec"), "the key's tools");
        assert_eq!(from_lan.forwarded_by, None, "a key made by a person carries no forwarded call");
        let elsewhere = auth.authenticate(Some(&bearer(text)), LOCAL).unwrap_err();
        assert_eq!(elsewhere.status, 403);

        // The right id with another secret: the digest decides, and the answer is the same as
        // for an id that does not exist.
        let forged = format!("{}{}", &text[..text.len() - 1], if text.ends_with('0') { '1' } else { '0' });
        let forged = auth.authenticate(Some(&bearer(&forged)), "10.1.1.1".parse().unwrap()).unwrap_err();
        let unknown = auth.authenticate(Some(&bearer(&format!("tg_{}_{}", "0".repeat(16), "0".repeat(64)))), LOCAL);
        assert_eq!(forged, unknown.unwrap_err());
        assert!(!forged.message.contains(&text[20..]), "never echoes a key");

        let later = KeyAuthenticator::with_clock(Arc::clone(&store), || now_ms() + 120_000);
        let expired = later.authenticate(Some(&bearer(text)), "10.1.1.1".parse().unwrap()).unwrap_err();
        assert!(expired.status == 401 && expired.message.contains("expired"), "{expired:?}");

        let none = auth.authenticate(None, LOCAL).unwrap_err();
        assert!(none.status == 401 && none.message.contains("toolgate admin key create"), "{none:?}");
        let other_scheme = auth.authenticate(Some(b"Basic YW5uOnB3"), LOCAL).unwrap_err();
        assert_eq!(other_scheme.status, 401);
    }

    #[test]
    fn a_disabled_user_or_owner_locks_its_keys() {
        let (_dir, admin, store) = admin();
        admin.user_add("ann", false, &[]).unwrap();
        admin.agent_add("ann-ci", "ann").unwrap();
        let key = admin.key_create("ann-ci", &KeyScope::default(), None, "", "root").unwrap();
        let auth = KeyAuthenticator::new(store);
        let caller = auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).unwrap();
        assert_eq!(
            (caller.user.as_str(), caller.agent.as_deref()),
            ("ann", Some("ann-ci")),
            "an agent acts for its owner"
        );
        admin.set_disabled("ann", true).unwrap();
        assert_eq!(auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).unwrap_err().status, 403);
        admin.set_disabled("ann", false).unwrap();
        assert!(auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).is_ok());
    }

    #[test]
    fn bad_administration_is_refused_with_what_to_do() {
        let (_dir, admin, _) = admin();
        admin.user_add("ann", false, &[]).unwrap();
        assert!(matches!(admin.user_add("ann", false, &[]), Err(GatewayError::Taken(_))));
        assert!(matches!(admin.user_add("../x", false, &[]), Err(GatewayError::BadName { .. })));
        assert!(
            matches!(admin.user_add("bob", false, &["ann".into()]), Err(GatewayError::Missing { .. })),
            "ann is no group"
        );
        assert!(admin.list(Some(PrincipalKind::User)).unwrap().iter().all(|p| p.name != "bob"), "nothing half made");
        assert!(admin.agent_add("x", "nobody").is_err());
        assert!(admin.key_create("nobody", &KeyScope::default(), None, "", "root").is_err());
        let bad = KeyScope { tools: vec!["re ad".into()], sources: vec![], ..KeyScope::default() };
        assert!(matches!(admin.key_create("ann", &bad, None, "", "root"), Err(GatewayError::BadScope(_))));
        assert!(admin.key_create("ann", &KeyScope::default(), Some(1), "", "root").is_err(), "expired at birth");
    }

    #[test]
    fn only_a_node_links_key_carries_a_forwarded_call() {
        let (_dir, admin, store) = admin();
        admin.user_add("ann", false, &[]).unwrap();
        let forward = |tools: &[&str], node: &str| KeyScope {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            forwarded_by: Some(node.to_owned()),
            ..KeyScope::default()
        };
        let key = admin.key_create("ann", &forward(&["process"], "b"), Some(now_ms() + 60_000), "", "node:b").unwrap();
        let auth = KeyAuthenticator::new(Arc::clone(&store));
        let caller = auth.authenticate(Some(&bearer(key.text.reveal())), LOCAL).unwrap();
        assert_eq!(caller.forwarded_by.as_deref(), Some("b"));
        assert!(caller.may_use("process") && !caller.may_use("browser"));
        // One tool, named exactly; a real node name.
        for bad in
            [forward(&[], "b"), forward(&["process", "browser"], "b"), forward(&["*"], "b"), forward(&["process"], "")]
        {
            assert!(
                matches!(admin.key_create("ann", &bad, None, "", "root"), Err(GatewayError::BadScope(_))),
                "{bad:?}"
            );
        }
        // A stored scope without the field (every key a person made) reads as none.
        let plain: KeyScope = serde_json::from_value(serde_json::json!({"tools": ["process"]})).unwrap();
        assert_eq!(plain.forwarded_by, None);
        assert!(
            !serde_json::to_string(&KeyScope::default()).unwrap().contains("forwarded_by"),
            "not written when unset"
        );
    }
}
