//! What each request to `/mcp` needs in gateway mode, kept between requests: a key's
//! verification ([`KeyCache`], for [`KeyAuthenticator`](crate::KeyAuthenticator)) and each
//! caller's compiled grants ([`CachedGrants`], around [`Grants::access`]).
//!
//! Without them every request read the key, its principal (and an agent's owner), recorded the
//! key's use, then read the caller's principal, groups and grants again: 1.2-1.4 ms per call.
//! Staleness is ruled out by the store's revisions (`toolgate_store`'s `revisions` table, bumped
//! in the transaction of every change of identities or grants, by whichever process makes it):
//! each request reads the current revisions (one indexed read each: the key's check the
//! identity one, the grants check both, once per request, since `toolgate::granted` hands the
//! caller's compiled grants down to the gate's check of the same call) and uses an entry only
//! if it was made under them. So a revoked key, a disabled user or a revoked grant is refused from
//! the next request, as without a cache. Time is checked on each request too: a key's expiry
//! against the cached verification, and a grant's by dropping every compiled `Access` when the
//! first grant expires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use toolgate_mcp::Caller;

use crate::admin::now_ms;
use crate::{Access, GatewayError, Grants, KeyScope};

/// How many entries a cache keeps; past it, it starts again (a team has far fewer keys and
/// callers, so this bounds only a flood of distinct ones).
const MAX_ENTRIES: usize = 4096;

/// How often a key's use is written (`last_used_ms`): a busy key does not write on every call.
const USE_RECORDED_EVERY_MS: i64 = 60_000;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A key that was found, matched its digest, was not revoked and had an enabled principal,
/// under one identity revision.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    /// The store's identity revision it was checked under.
    pub(crate) revision: i64,
    /// SHA-256 of the key's text: a request's key must have the same.
    pub(crate) digest: [u8; 32],
    /// Who the key acts as (without its id and tools, added per request).
    pub(crate) caller: Caller,
    /// What it may reach.
    pub(crate) scope: KeyScope,
    /// When it stops working.
    pub(crate) expires_ms: Option<i64>,
    /// When this process last wrote its use.
    pub(crate) recorded_ms: i64,
}

/// Verified keys by id.
#[derive(Debug, Default)]
pub(crate) struct KeyCache {
    keys: Mutex<HashMap<String, Verified>>,
}

impl KeyCache {
    /// Key `id`'s verification if it was made under `revision` for a key with `digest`.
    pub(crate) fn get(&self, id: &str, revision: i64, digest: &[u8; 32]) -> Option<Verified> {
        let keys = lock(&self.keys);
        keys.get(id).filter(|v| v.revision == revision && crate::keys::same(&v.digest, digest)).cloned()
    }

    /// Keeps a verification.
    pub(crate) fn put(&self, id: &str, verified: Verified) {
        let mut keys = lock(&self.keys);
        if keys.len() >= MAX_ENTRIES && !keys.contains_key(id) {
            keys.clear();
        }
        keys.insert(id.to_owned(), verified);
    }

    /// Whether key `id`'s use at `now_ms` should be written (once a minute), and notes that it
    /// is.
    pub(crate) fn record_use(&self, id: &str, now_ms: i64) -> bool {
        let mut keys = lock(&self.keys);
        match keys.get_mut(id) {
            Some(v) if now_ms - v.recorded_ms < USE_RECORDED_EVERY_MS => false,
            Some(v) => {
                v.recorded_ms = now_ms;
                true
            }
            None => true,
        }
    }
}

/// The compiled grants of the callers seen under one pair of revisions.
#[derive(Debug, Default)]
struct Epoch {
    /// (identity, grants) revisions the entries were compiled under.
    revisions: Option<(i64, i64)>,
    /// When the first grant that applies now expires: the entries are dropped then.
    next_expiry: Option<i64>,
    /// By (user, agent).
    entries: HashMap<(String, Option<String>), Arc<Access>>,
}

impl Epoch {
    fn current(&self, revisions: (i64, i64), now: i64) -> bool {
        self.revisions == Some(revisions) && self.next_expiry.is_none_or(|at| now < at)
    }
}

/// [`Grants::access`], compiled once per caller and kept until a grant or an identity changes
/// (the store's revisions) or a grant expires.
#[derive(Debug)]
pub struct CachedGrants {
    grants: Grants,
    epoch: Mutex<Epoch>,
}

impl CachedGrants {
    /// Caches what `grants` gives each caller.
    pub fn new(grants: Grants) -> Self {
        CachedGrants { grants, epoch: Mutex::new(Epoch::default()) }
    }

    /// The grants underneath.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// What `user` (acting as `agent`) may use: [`Grants::access`] as of now, after reading the
    /// store's revisions.
    pub fn access(&self, user: &str, agent: Option<&str>) -> Result<Arc<Access>, GatewayError> {
        // Read before compiling: a change that lands meanwhile has a later revision, so what is
        // compiled now is never kept past it.
        let revisions = (self.grants.identity().identity_revision()?, self.grants.store().grants_revision()?);
        let now = now_ms();
        let key = (user.to_owned(), agent.map(str::to_owned));
        let fresh = {
            let epoch = lock(&self.epoch);
            let fresh = epoch.current(revisions, now);
            if fresh && let Some(access) = epoch.entries.get(&key) {
                return Ok(Arc::clone(access));
            }
            fresh
        };
        let next_expiry = if fresh { None } else { Some(self.next_expiry(now)?) };
        let access = Arc::new(self.grants.access(user, agent)?);
        let mut epoch = lock(&self.epoch);
        if let Some(next_expiry) = next_expiry
            && !epoch.current(revisions, now)
        {
            *epoch = Epoch { revisions: Some(revisions), next_expiry, entries: HashMap::new() };
        }
        if epoch.revisions == Some(revisions) {
            if epoch.entries.len() >= MAX_ENTRIES {
                epoch.entries.clear();
            }
            epoch.entries.insert(key, Arc::clone(&access));
        }
        Ok(access)
    }

    /// The earliest expiry after `now` of any enabled grant: until then no grant lapses.
    fn next_expiry(&self, now: i64) -> Result<Option<i64>, GatewayError> {
        Ok(self
            .grants
            .list(None)?
            .iter()
            .filter(|g| g.enabled)
            .filter_map(|g| g.expires_ms)
            .filter(|at| *at > now)
            .min())
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use toolgate_mcp::Authenticator;
    use toolgate_store::{GrantStore, IdentityStore, Store, ToolGrant};

    use super::*;
    use crate::{Admin, KeyAuthenticator, ToolRef};

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    /// Through serde, so the test does not name every field (the grant grows).
    fn grant(subject: &str, tool: &str, expires_ms: Option<i64>) -> ToolGrant {
        serde_json::from_value(serde_json::json!({
            "id": 0, "subject": subject, "server": null, "tool_allow": [tool], "tool_deny": [],
            "enabled": true, "config_overrides": {}, "mode": "allow", "expires_ms": expires_ms,
            "granted_by": "root", "request": null, "note": "", "created_ms": 1
        }))
        .unwrap()
    }

    fn bearer(text: &str) -> Vec<u8> {
        format!("Bearer {text}").into_bytes()
    }

    /// Two stores on one file: what a running server has, and what another process's `toolgate
    /// admin` writes with.
    fn two_stores() -> (tempfile::TempDir, Arc<Store>, Admin, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let server = Arc::new(Store::open(&path).unwrap());
        let other = Arc::new(Store::open(&path).unwrap());
        (dir, server, Admin::new(other.clone()), other)
    }

    #[test]
    fn a_cached_key_is_refused_from_the_next_request_after_a_change_elsewhere() {
        let (_dir, server, admin, _) = two_stores();
        admin.user_add("ann", false, &[]).unwrap();
        let key = admin.key_create("ann", &KeyScope::default(), None, "", "root").unwrap();
        let auth = KeyAuthenticator::new(server.clone());
        let text = bearer(key.text.reveal());
        for _ in 0..3 {
            assert_eq!(auth.authenticate(Some(&text), LOCAL).unwrap().user, "ann");
        }
        // Another key's secret for the same id is refused even while the id is cached.
        let forged = format!("{}0", &key.text.reveal()[..83]);
        let forged = if forged == key.text.reveal() { format!("{}1", &key.text.reveal()[..83]) } else { forged };
        assert_eq!(auth.authenticate(Some(&bearer(&forged)), LOCAL).unwrap_err().status, 401);
        admin.set_disabled("ann", true).unwrap();
        assert_eq!(auth.authenticate(Some(&text), LOCAL).unwrap_err().status, 403, "a disabled user");
        admin.set_disabled("ann", false).unwrap();
        assert!(auth.authenticate(Some(&text), LOCAL).is_ok());
        admin.key_revoke(&key.record.id).unwrap();
        let refused = auth.authenticate(Some(&text), LOCAL).unwrap_err();
        assert!(refused.status == 401 && refused.message.contains("revoked"), "{refused:?}");
    }

    #[test]
    fn a_cached_key_expires_on_time() {
        let (_dir, server, admin, _) = two_stores();
        admin.user_add("ann", false, &[]).unwrap();
        let at = now_ms() + 60_000;
        let key = admin.key_create("ann", &KeyScope::default(), Some(at), "", "root").unwrap();
        // The clock is a plain fn: the test moves it through a static.
        static NOW: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
        NOW.store(at - 1, std::sync::atomic::Ordering::SeqCst);
        let auth = KeyAuthenticator::with_clock(server, || NOW.load(std::sync::atomic::Ordering::SeqCst));
        let text = bearer(key.text.reveal());
        assert!(auth.authenticate(Some(&text), LOCAL).is_ok(), "cached now");
        NOW.store(at, std::sync::atomic::Ordering::SeqCst);
        let refused = auth.authenticate(Some(&text), LOCAL).unwrap_err();
        assert!(refused.status == 401 && refused.message.contains("expired"), "{refused:?}");
    }

    #[test]
    fn a_keys_use_is_written_once_a_minute_not_on_every_request() {
        let (_dir, server, admin, other) = two_stores();
        admin.user_add("ann", false, &[]).unwrap();
        let key = admin.key_create("ann", &KeyScope::default(), None, "", "root").unwrap();
        let auth = KeyAuthenticator::new(server);
        let text = bearer(key.text.reveal());
        auth.authenticate(Some(&text), LOCAL).unwrap();
        let first = other.key_get(&key.record.id).unwrap().unwrap().last_used_ms;
        assert!(first.is_some(), "the first use is recorded");
        let revision = other.identity_revision().unwrap();
        for _ in 0..5 {
            auth.authenticate(Some(&text), LOCAL).unwrap();
        }
        assert_eq!(other.identity_revision().unwrap(), revision, "recording a use invalidates nothing");
    }

    #[test]
    fn compiled_grants_follow_every_change_and_expiry() {
        let (_dir, server, admin, other) = two_stores();
        admin.user_add("ann", false, &["ops".to_owned()]).unwrap();
        admin.user_add("bob", false, &[]).unwrap();
        let cached = CachedGrants::new(Grants::new(server.clone(), server, Vec::new()));
        let read = ToolRef { server: None, name: "read" };
        let may = |user: &str| cached.access(user, None).unwrap().decide(read).allowed();
        assert!(!may("ann"));
        assert!(!may("ann"), "cached, still nothing");
        let id = other.tool_grant_add(&grant("ops", "read", None)).unwrap();
        assert!(may("ann"), "a group's new grant, from another connection");
        assert!(!may("bob"));
        other.tool_grant_enable(id, false).unwrap();
        assert!(!may("ann"), "turned off");
        other.tool_grant_enable(id, true).unwrap();
        assert!(may("ann"));
        admin.user_add("cy", false, &[]).unwrap();
        assert!(may("ann"), "an unrelated change recompiles to the same");
        other.grant_revoke(id).unwrap();
        assert!(!may("ann"), "revoked");
        // Membership is identity: leaving the group takes the group's grants away.
        other.tool_grant_add(&grant("ops", "read", None)).unwrap();
        assert!(may("ann"));
        other.membership_remove("ann", "ops").unwrap();
        assert!(!may("ann"), "no longer in ops");
        // A grant that expires soon: dropped when it does, without any change in the store.
        let soon = now_ms() + 300;
        other.tool_grant_add(&grant("bob", "read", Some(soon))).unwrap();
        assert!(may("bob"));
        while now_ms() <= soon {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!may("bob"), "expired");
    }
}
