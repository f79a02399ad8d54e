//! Signing in to the page: OIDC (authorization code + PKCE, [`Oidc`]) or, on one machine, a
//! local password (argon2id, `toolgate admin password set`, failures rate-limited per user
//! name and per address); sessions in opaque cookies (256 random bits; the store keeps only
//! their SHA-256 digests, with their user and expiry, so a restart keeps people signed in),
//! each with its own CSRF token (derived from the cookie, never stored), which every POST must
//! carry.

mod oidc;

pub use oidc::{Oidc, OidcConfig};

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha2::{Digest, Sha256};
use toolgate_store::{IdentityStore, PrincipalKind};

use crate::GatewayError;
use oidc::Pending;

/// How long a session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a sign-in at the provider may take.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// Bounds on what unauthenticated requests can make the server keep.
const MAX_SESSIONS: usize = 10_000;
const MAX_PENDING: usize = 1_000;
/// Failed password sign-ins allowed per user name, and per client address, in a window.
const MAX_FAILURES_PER_USER: u32 = 5;
const MAX_FAILURES_PER_ADDRESS: u32 = 20;
const FAILURE_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Bounds the failure table (keys chosen by unauthenticated clients).
const MAX_FAILURE_KEYS: usize = 10_000;
/// The shortest local password accepted.
pub const MIN_PASSWORD: usize = 12;

/// A signed-in person.
#[derive(Debug, Clone)]
pub struct Session {
    /// The toolgate user.
    pub user: String,
    /// An admin of the gateway (sees and decides everyone's things); read again on every
    /// request, so a revoked admin loses the admin views at once.
    pub admin: bool,
    /// The token every form of this session carries.
    pub csrf: String,
    /// When it ends, Unix milliseconds.
    pub expires_ms: i64,
}

/// The page's sign-in: sessions, pending OIDC sign-ins, passwords.
#[derive(Debug)]
pub struct SignIn {
    identity: Arc<dyn IdentityStore>,
    oidc: Option<Arc<Oidc>>,
    pending: Mutex<HashMap<String, (Pending, Instant)>>,
    /// Failed password sign-ins: by `user:NAME` and `addr:IP`, (count, window start).
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A session's CSRF token: a digest of its cookie under another label, so it is bound to the
/// session, unguessable without the cookie, and not derivable from what the store keeps.
fn csrf_of(token: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"toolgate page csrf\0");
    hash.update(token.as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn now_ms() -> i64 {
    crate::admin::now_ms()
}

/// 256 random bits as hex.
pub(crate) fn random_token() -> Result<String, GatewayError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| GatewayError::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal strings, compared in constant time for equal lengths.
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An argon2id PHC string for `password` (what the store keeps).
pub fn hash_password(password: &str) -> Result<String, GatewayError> {
    if password.chars().count() < MIN_PASSWORD {
        return Err(GatewayError::BadPassword(format!("a password needs at least {MIN_PASSWORD} characters")));
    }
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| GatewayError::Random(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| GatewayError::BadPassword(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| GatewayError::BadPassword(format!("cannot hash the password: {e}")))
}

/// Sets the local sign-in password of user `name` (`toolgate admin password set NAME`).
pub fn set_password(identity: &dyn IdentityStore, name: &str, password: &str) -> Result<(), GatewayError> {
    let mut user = match identity.principal_get(name)? {
        Some(p) if p.kind == PrincipalKind::User => p,
        _ => return Err(GatewayError::Missing { kind: "user", name: name.to_owned() }),
    };
    user.password = Some(hash_password(password)?);
    identity.principal_update(&user)?;
    Ok(())
}

impl SignIn {
    /// Sign-in over `identity`, with OIDC when `oidc` is set.
    pub fn new(identity: Arc<dyn IdentityStore>, oidc: Option<Arc<Oidc>>) -> Self {
        SignIn { identity, oidc, pending: Mutex::default(), failures: Mutex::default() }
    }

    /// The OIDC provider, when one is configured.
    pub fn oidc(&self) -> Option<&Arc<Oidc>> {
        self.oidc.as_ref()
    }

    /// Checks a local password; the same answer for an unknown user, a user without a password
    /// and a wrong password (and about the same time: a hash is always checked).
    /// Refused without checking once `user` or `peer` has failed too often lately (the
    /// answer says when to retry); a success clears the user's count.
    pub fn check_password(&self, user: &str, password: &str, peer: IpAddr) -> Result<String, String> {
        const WRONG: &str = "wrong user name or password";
        let keys = [format!("user:{}", user.to_lowercase()), format!("addr:{peer}")];
        self.throttled(&keys)?;
        let checked = self.check_hash(user, password);
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match checked {
            Ok(name) => {
                failures.remove(&keys[0]);
                Ok(name)
            }
            Err(()) => {
                let now = Instant::now();
                if failures.len() >= MAX_FAILURE_KEYS {
                    failures.retain(|_, (_, since)| now.duration_since(*since) < FAILURE_WINDOW);
                }
                // A full table (an address flood) still counts: the per-address key of the
                // flooding client already exists, and new names are refused below.
                for key in &keys {
                    if failures.len() < MAX_FAILURE_KEYS || failures.contains_key(key) {
                        let entry = failures.entry(key.clone()).or_insert((0, now));
                        if now.duration_since(entry.1) >= FAILURE_WINDOW {
                            *entry = (0, now);
                        }
                        entry.0 += 1;
                    }
                }
                Err(WRONG.to_owned())
            }
        }
    }

    fn throttled(&self, keys: &[String; 2]) -> Result<(), String> {
        let now = Instant::now();
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_FAILURE_KEYS && !keys.iter().all(|k| failures.contains_key(k)) {
            return Err("too many failed sign-ins on this gateway lately; try again in 15 minutes".to_owned());
        }
        for (key, limit) in keys.iter().zip([MAX_FAILURES_PER_USER, MAX_FAILURES_PER_ADDRESS]) {
            if let Some((count, since)) = failures.get(key)
                && *count >= limit
                && now.duration_since(*since) < FAILURE_WINDOW
            {
                let wait = (FAILURE_WINDOW - now.duration_since(*since)).as_secs() / 60 + 1;
                return Err(format!("too many failed sign-ins; try again in {wait} minutes"));
            }
        }
        Ok(())
    }

    fn check_hash(&self, user: &str, password: &str) -> Result<String, ()> {
        // A fixed hash to verify against when the user has none, so timing tells nothing.
        const DUMMY: &str =
            "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$2aYpGK4I1hbaf5x+Sbw0qhwr1c7mL3o0Md5L8B1uQ4k";
        let principal = self.identity.principal_get(user).ok().flatten();
        let stored = principal.as_ref().and_then(|p| p.password.clone());
        let phc = stored.as_deref().unwrap_or(DUMMY);
        let ok = PasswordHash::new(phc)
            .is_ok_and(|hash| Argon2::default().verify_password(password.as_bytes(), &hash).is_ok());
        match principal {
            Some(p) if ok && stored.is_some() && p.kind == PrincipalKind::User && !p.disabled => Ok(p.name),
            _ => Err(()),
        }
    }

    /// Whether `user` may use the page (an enabled user; agents and groups sign in nowhere),
    /// and whether as an admin.
    pub fn may_sign_in(&self, user: &str) -> Result<bool, String> {
        match self.identity.principal_get(user) {
            Ok(Some(p)) if p.kind == PrincipalKind::User && !p.disabled => Ok(p.admin),
            Ok(_) => Err(format!(
                "there is no enabled user `{user}` on this gateway; an admin adds one with `toolgate admin user add {user}`"
            )),
            Err(e) => Err(format!("cannot read the users now: {e}")),
        }
    }

    /// A new session for `user`: its cookie value. The store keeps its digest.
    pub fn open_session(&self, user: &str) -> Result<String, GatewayError> {
        let token = random_token()?;
        self.may_sign_in(user).map_err(GatewayError::Oidc)?;
        let now = now_ms();
        let ttl = i64::try_from(SESSION_TTL.as_millis()).unwrap_or(i64::MAX);
        if !self.identity.page_session_open(&digest(&token), user, now, now.saturating_add(ttl), MAX_SESSIONS)? {
            return Err(GatewayError::Oidc("too many open sessions; try again later".to_owned()));
        }
        Ok(token)
    }

    /// The live session a cookie value names, if any; a disabled user loses it at once, and
    /// the admin flag is the store's now.
    pub fn session(&self, token: &str) -> Option<Session> {
        // Only a cookie of our own shape reaches the store.
        if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let key = digest(token);
        let (user, expires_ms) = match self.identity.page_session_get(&key, now_ms()) {
            Ok(found) => found?,
            Err(e) => {
                tracing::error!("cannot read a page session: {e}");
                return None;
            }
        };
        match self.may_sign_in(&user) {
            Ok(admin) => Some(Session { user, admin, csrf: csrf_of(token), expires_ms }),
            Err(_) => {
                let _ = self.identity.page_session_close(&key);
                None
            }
        }
    }

    /// Ends a session.
    pub fn close_session(&self, token: &str) {
        if let Err(e) = self.identity.page_session_close(&digest(token)) {
            tracing::error!("cannot end a page session: {e}");
        }
    }

    /// Starts an OIDC sign-in: the provider URL to send the browser to, and the `state` that
    /// the browser's cookie binds to this sign-in.
    pub fn begin_oidc(&self) -> Result<(String, String), String> {
        let oidc = self.oidc.as_ref().ok_or("OIDC is not configured ([gateway.oidc])")?;
        let (url, pending) = oidc.begin();
        let state = pending.state.clone();
        let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        all.retain(|_, (_, at)| now.duration_since(*at) < PENDING_TTL);
        if all.len() >= MAX_PENDING {
            return Err("too many sign-ins under way; try again in a few minutes".to_owned());
        }
        all.insert(state.clone(), (pending, now));
        Ok((url, state))
    }

    /// Finishes an OIDC sign-in: `state` must be one this server started, and the one the
    /// browser's cookie names (so nobody can sign a browser in to their own account).
    pub async fn finish_oidc(&self, state: &str, cookie_state: Option<&str>, code: &str) -> Result<String, String> {
        let oidc = self.oidc.as_ref().ok_or("OIDC is not configured ([gateway.oidc])")?;
        if !cookie_state.is_some_and(|c| same_text(c, state)) {
            return Err("this sign-in was not started in this browser; start again from the sign-in page".to_owned());
        }
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
        let Some((pending, at)) = pending else {
            return Err("unknown or used sign-in; start again from the sign-in page".to_owned());
        };
        if at.elapsed() >= PENDING_TTL {
            return Err("the sign-in took too long; start again from the sign-in page".to_owned());
        }
        let who = oidc.finish(pending, code).await?;
        match self.identity.principal_get(&who.user) {
            Ok(Some(_)) => return Ok(who.user),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot read the users now: {e}")),
        }
        // Nobody by that name: made now when `provision` and its checks allow.
        oidc.may_provision(&who)?;
        crate::names::check_name(&who.user).map_err(|e| {
            format!(
                "the provider's name `{}` cannot be a user name here ({e}); set [gateway.oidc] user_claim",
                who.user
            )
        })?;
        match crate::Admin::new(Arc::clone(&self.identity)).user_add(&who.user, false, &[]) {
            Ok(_) => tracing::info!(user = who.user, "user made on first OIDC sign-in ([gateway.oidc] provision)"),
            // Made meanwhile by a second sign-in: the same user.
            Err(e) if self.identity.principal_get(&who.user).ok().flatten().is_some() => {
                tracing::debug!("user {} exists already: {e}", who.user);
            }
            Err(e) => return Err(format!("cannot make user `{}`: {e}", who.user)),
        }
        Ok(who.user)
    }
}

#[cfg(test)]
mod tests {
    use toolgate_store::Store;

    use super::*;
    use crate::Admin;

    fn fixture() -> (tempfile::TempDir, SignIn) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn IdentityStore> = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        let admin = Admin::new(Arc::clone(&store));
        admin.user_add("lee", true, &[]).unwrap();
        admin.user_add("ann", false, &[]).unwrap();
        set_password(store.as_ref(), "lee", "correct horse battery").unwrap();
        (dir, SignIn::new(store, None))
    }

    const HOME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn failures_are_counted_per_name_and_per_address() {
        let (_dir, signin) = fixture();
        for _ in 0..MAX_FAILURES_PER_USER {
            assert_eq!(
                signin.check_password("lee", "wrong password!", HOME).unwrap_err(),
                "wrong user name or password"
            );
        }
        // The right password no longer helps from anywhere: the name is locked for the window.
        let elsewhere: IpAddr = "192.0.2.7".parse().unwrap();
        let refused = signin.check_password("LEE", "correct horse battery", elsewhere).unwrap_err();
        assert!(refused.contains("too many failed sign-ins"), "{refused}");
        // One address trying many names is stopped too.
        let (_dir, signin) = fixture();
        for i in 0..MAX_FAILURES_PER_ADDRESS {
            let _ = signin.check_password(&format!("user{i}"), "wrong password!", HOME);
        }
        let refused = signin.check_password("lee", "correct horse battery", HOME).unwrap_err();
        assert!(refused.contains("too many failed sign-ins"), "{refused}");
        assert_eq!(signin.check_password("lee", "correct horse battery", elsewhere).unwrap(), "lee");
    }

    #[test]
    fn sessions_are_kept_as_digests_and_end_with_the_user() {
        let (dir, signin) = fixture();
        let token = signin.open_session("ann").unwrap();
        assert_eq!(token.len(), 64, "256 bits in hex");
        let session = signin.session(&token).unwrap();
        assert!(!session.admin && session.user == "ann");
        assert_eq!(session.csrf, csrf_of(&token));
        assert_ne!(session.csrf.as_bytes(), token.as_bytes());
        // The store keeps the digest: the cookie itself finds nothing there.
        let raw: [u8; 32] = token.as_bytes()[..32].try_into().unwrap();
        assert!(signin.identity.page_session_get(&raw, now_ms()).unwrap().is_none());
        assert!(signin.identity.page_session_get(&digest(&token), now_ms()).unwrap().is_some());
        // Another SignIn over the same store (a restarted server) knows the session.
        let reopened: Arc<dyn IdentityStore> = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        let restarted = SignIn::new(reopened, None);
        assert_eq!(restarted.session(&token).unwrap().csrf, session.csrf);
        assert!(signin.session(&token[..63]).is_none() && signin.session("").is_none());
        // Disabled: the session is gone at once.
        let store: Arc<dyn IdentityStore> = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        Admin::new(store).set_disabled("ann", true).unwrap();
        assert!(signin.session(&token).is_none());
        // Groups and agents never sign in; a short password is refused with the rule.
        assert!(signin.open_session("nobody").is_err());
        assert!(hash_password("short").unwrap_err().to_string().contains("at least 12"));
        let closed = signin.open_session("lee").unwrap();
        signin.close_session(&closed);
        assert!(signin.session(&closed).is_none());
    }
}
