//! API keys: `tg_<id>_<secret>`, where `id` (16 hex digits) is public — lists, audit rows and
//! revocation name it — and `secret` is 256 random bits (64 hex digits). The store keeps the
//! SHA-256 digest of the whole text; the text is shown once, when the key is made.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_mcp::{Authenticator, Caller, Refusal};
use toolgate_store::{ApiKeyRecord, IdentityStore, PrincipalKind};

use crate::GatewayError;
use crate::cache::{KeyCache, Verified};

const PREFIX: &str = "tg_";
const ID_HEX: usize = 16;
const SECRET_HEX: usize = 64;

/// A key's whole text, as shown once to whoever made it. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyText(String);

impl KeyText {
    /// The text, to show once.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyText(tg_{}_…)", key_id(&self.0).unwrap_or("?"))
    }
}

/// A new key: its public id and its text.
pub(crate) fn generate() -> Result<(String, KeyText), GatewayError> {
    let mut bytes = [0u8; ID_HEX / 2 + SECRET_HEX / 2];
    getrandom::fill(&mut bytes).map_err(|e| GatewayError::Random(e.to_string()))?;
    let (id, secret) = bytes.split_at(ID_HEX / 2);
    let id = hex(id);
    let text = format!("{PREFIX}{id}_{}", hex(secret));
    Ok((id, KeyText(text)))
}

/// SHA-256 of a key's text: what the store keeps.
pub(crate) fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The id of a well-formed key text, or `None` (never a partial parse: the exact shape only).
fn key_id(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let lower_hex =
        |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (lower_hex(id, ID_HEX) && lower_hex(secret, SECRET_HEX)).then_some(id)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal digests, compared in constant time.
pub(crate) fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a key may reach, stored with it as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyScope {
    /// Tools it may list and call (names or `*` patterns); empty: every tool its user's policy
    /// allows. A bridged server's tools are `SERVER__*`.
    pub tools: Vec<String>,
    /// Addresses it may be used from (`10.0.0.0/8`, `2001:db8::/32`, `127.0.0.1`); empty:
    /// anywhere.
    pub sources: Vec<String>,
    /// Set only on a key a node's link makes to forward one call (`process` or `browser`) to
    /// the node that holds what it is about: that node's name. Its call is then read
    /// canonically (it was read in its caller's dialect where it arrived) and never forwarded
    /// again. No command or page sets it; a scope that has it names exactly one tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_by: Option<String>,
    /// Only with `forwarded_by`: the forwarding node's gate had a person approve the call
    /// (after that node's policy), for exactly the parameters it sends; the owner does not ask
    /// again, and says so in its audit row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<toolgate_core::ForwardedApproval>,
}

impl KeyScope {
    /// Checks every pattern and address range, so a stored scope always parses.
    pub fn check(&self) -> Result<(), GatewayError> {
        for tool in &self.tools {
            if tool.is_empty() || !tool.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'))
            {
                return Err(GatewayError::BadScope(format!(
                    "`{tool}` is not a tool name or pattern (letters, digits, _ - . and *)"
                )));
            }
        }
        for source in &self.sources {
            Cidr::parse(source).ok_or_else(|| {
                GatewayError::BadScope(format!("`{source}` is not an address or range (`10.0.0.0/8`, `::1`)"))
            })?;
        }
        if let Some(node) = &self.forwarded_by {
            if node.is_empty() || node.len() > 200 || node.chars().any(char::is_control) {
                return Err(GatewayError::BadScope(format!("`{node}` is not a node name")));
            }
            if self.tools.len() != 1 || self.tools[0].contains('*') {
                return Err(GatewayError::BadScope("a forwarded call's key names exactly one tool".to_owned()));
            }
        }
        if let Some(approved) = &self.approved {
            if self.forwarded_by.is_none() {
                return Err(GatewayError::BadScope("only a forwarded call's key carries an approval".to_owned()));
            }
            let decided = &approved.decided;
            if decided.is_empty() || decided.len() > 1000 || decided.chars().any(char::is_control) {
                return Err(GatewayError::BadScope(
                    "a forwarded approval says how it was decided, in one line".to_owned(),
                ));
            }
            let digest = &approved.digest;
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err(GatewayError::BadScope(
                    "a forwarded approval's digest is 64 lowercase hex digits".to_owned(),
                ));
            }
        }
        Ok(())
    }

    fn admits(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        self.sources.is_empty() || self.sources.iter().filter_map(|s| Cidr::parse(s)).any(|c| c.contains(peer))
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An address range.
#[derive(Debug, Clone, Copy)]
struct Cidr {
    net: IpAddr,
    bits: u32,
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (addr, bits) = match text.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits.parse::<u32>().ok()?)),
            None => (text, None),
        };
        let net = canonical(addr.parse::<IpAddr>().ok()?);
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        (bits <= max).then_some(Cidr { net, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let mask = |bits: u32, width: u32| if bits == 0 { 0 } else { u128::MAX << (width - bits) };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let m = mask(self.bits, 32) as u32;
                u32::from(n) & m == u32::from(a) & m
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let m = mask(self.bits, 128);
                u128::from(n) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

/// Admits a request to `/mcp` by its API key (`Authorization: Bearer tg_...`). A key's
/// verification is kept (`cache.rs`) under the store's identity revision, read on every
/// request, so a revocation (or a disabled user) applies to the next request; its expiry and
/// source addresses are checked on every request.
#[derive(Debug, Clone)]
pub struct KeyAuthenticator {
    identity: Arc<dyn IdentityStore>,
    now_ms: fn() -> i64,
    cache: Arc<KeyCache>,
}

impl KeyAuthenticator {
    /// Checks keys against `identity`, with the system clock.
    pub fn new(identity: Arc<dyn IdentityStore>) -> Self {
        Self::with_clock(identity, crate::admin::now_ms)
    }

    /// The same, with another clock (tests of expiry).
    pub fn with_clock(identity: Arc<dyn IdentityStore>, now_ms: fn() -> i64) -> Self {
        KeyAuthenticator { identity, now_ms, cache: Arc::default() }
    }

    fn check(&self, text: &str, peer: IpAddr) -> Result<Caller, Refusal> {
        let unauthorized = |message: String| Refusal { status: 401, message };
        let forbidden = |message: String| Refusal { status: 403, message };
        let Some(id) = key_id(text) else {
            return Err(unauthorized(
                "this is not a toolgate API key (they look like `tg_<16 hex>_<64 hex>`); an admin makes one \
                 with `toolgate admin key create --user NAME`"
                    .to_owned(),
            ));
        };
        let digest = digest(text);
        let unavailable = |e: toolgate_store::StoreError| {
            tracing::error!("cannot check an API key: {e}");
            Refusal { status: 503, message: "cannot check API keys now; retry".to_owned() }
        };
        let revision = self.identity.identity_revision().map_err(unavailable)?;
        let now = (self.now_ms)();
        let verified = match self.cache.get(id, revision, &digest) {
            Some(verified) => verified,
            None => {
                let verified = self.verify(id, &digest, revision)?;
                // A node's one-call key is made and revoked without moving the identity
                // revision (every node's caches would be flushed for each forwarded call): it
                // is never kept, so each of its few requests reads it, and a revocation holds
                // from the next one.
                if verified.scope.forwarded_by.is_none() {
                    self.cache.put(id, verified.clone());
                }
                verified
            }
        };
        if verified.expires_ms.is_some_and(|at| now >= at) {
            return Err(unauthorized(format!("API key {id} has expired; ask an admin for a new one")));
        }
        if !verified.scope.admits(peer) {
            return Err(forbidden(format!("API key {id} may not be used from {peer}")));
        }
        // A one-call key's use is its making (and it is not kept to say when it was written).
        if verified.scope.forwarded_by.is_none()
            && self.cache.record_use(id, now)
            && let Err(e) = self.identity.key_used(id, now)
        {
            tracing::debug!("cannot record the use of key {id}: {e}");
        }
        let scope = verified.scope;
        Ok(verified
            .caller
            .key(id)
            .tools(scope.tools)
            .forwarded_by(scope.forwarded_by)
            .forwarded_approval(scope.approved))
    }

    /// Reads key `id` and its principal: what stays true until the identity revision moves.
    fn verify(&self, id: &str, digest: &[u8; 32], revision: i64) -> Result<Verified, Refusal> {
        let unauthorized = |message: String| Refusal { status: 401, message };
        let unknown = || {
            unauthorized(
                "unknown API key: check that it was copied whole (`tg_<id>_<secret>`); \
                 `toolgate admin key list` shows the ids of the keys that exist"
                    .to_owned(),
            )
        };
        let record = match self.identity.key_get(id) {
            Ok(Some(record)) => record,
            Ok(None) => return Err(unknown()),
            Err(e) => {
                tracing::error!("cannot check an API key: {e}");
                return Err(Refusal { status: 503, message: "cannot check API keys now; retry".to_owned() });
            }
        };
        if !same(&record.digest, digest) {
            return Err(unknown());
        }
        if record.revoked_ms.is_some() {
            return Err(unauthorized(format!("API key {id} was revoked; ask an admin for a new one")));
        }
        let scope: KeyScope = serde_json::from_value(record.scope.clone()).unwrap_or_else(|_| KeyScope {
            // A scope this version cannot read admits nothing rather than everything.
            tools: vec![String::new()],
            sources: vec!["0.0.0.0/32".to_owned()],
            ..KeyScope::default()
        });
        let caller = self.caller_of(&record)?;
        // A use is written when the last one recorded is a minute old (never: at once).
        let recorded_ms = record.last_used_ms.unwrap_or(0);
        Ok(Verified { revision, digest: *digest, caller, scope, expires_ms: record.expires_ms, recorded_ms })
    }

    /// The user (and agent) the key's principal acts as; a disabled one is refused.
    fn caller_of(&self, record: &ApiKeyRecord) -> Result<Caller, Refusal> {
        let refused = || Refusal { status: 403, message: format!("the owner of API key {} is disabled", record.id) };
        let principal = match self.identity.principal_get(&record.principal) {
            Ok(Some(p)) if !p.disabled => p,
            Ok(_) => return Err(refused()),
            Err(e) => {
                tracing::error!("cannot read the principal of a key: {e}");
                return Err(Refusal { status: 503, message: "cannot check API keys now; retry".to_owned() });
            }
        };
        match (principal.kind, &principal.owner) {
            // An agent acts for its owning user, under its own agent name; one owned by a group
            // is its own user (what its grants are given to).
            (PrincipalKind::Agent, Some(owner)) => match self.identity.principal_get(owner) {
                Ok(Some(o)) if o.disabled => Err(refused()),
                // An agent never inherits its owner's administration.
                Ok(Some(o)) if o.kind == PrincipalKind::User => Ok(Caller::new(o.name).agent(principal.name)),
                _ => Ok(Caller::new(principal.name.clone()).agent(principal.name)),
            },
            _ => Ok(Caller::new(principal.name).admin(principal.admin)),
        }
    }
}

impl Authenticator for KeyAuthenticator {
    fn authenticate(&self, authorization: Option<&[u8]>, peer: IpAddr) -> Result<Caller, Refusal> {
        let text = authorization
            .and_then(|v| v.strip_prefix(b"Bearer ").or_else(|| v.strip_prefix(b"bearer ")))
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim);
        match text {
            Some(text) => self.check(text, peer),
            None => Err(Refusal {
                status: 401,
                message: "this toolgate is a team gateway: send an API key as `Authorization: Bearer tg_...`; \
                          an admin makes one with `toolgate admin key create --user NAME`"
                    .to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's one-call key moves no identity revision on PostgreSQL (its trigger skips it), so
    /// an authenticator must never keep it: its revocation would go unseen. A person's key is
    /// kept (its revocation moves the revision). The approval it carries reaches the caller.
    #[test]
    fn a_forwarded_calls_key_is_never_kept_and_hands_on_its_approval() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn IdentityStore> = Arc::new(toolgate_store::Store::open(&dir.path().join("s.db")).unwrap());
        let admin = crate::Admin::new(Arc::clone(&store));
        admin.user_add("ann", false, &[]).unwrap();
        let approved = toolgate_core::ForwardedApproval {
            decided: "allowed once (approval 3, by bob)".into(),
            digest: "a".repeat(64),
        };
        let forward = KeyScope {
            tools: vec!["process".into()],
            forwarded_by: Some("b".into()),
            approved: Some(approved.clone()),
            ..KeyScope::default()
        };
        let one_call = admin.key_create("ann", &forward, None, "", "node:b").unwrap();
        let person = admin.key_create("ann", &KeyScope::default(), None, "", "root").unwrap();
        let auth = KeyAuthenticator::new(Arc::clone(&store));
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let caller = auth.check(one_call.text.reveal(), local).unwrap();
        assert_eq!((caller.forwarded_by.as_deref(), caller.forwarded_approval), (Some("b"), Some(approved.clone())));
        assert_eq!(auth.check(person.text.reveal(), local).unwrap().forwarded_approval, None);
        let revision = store.identity_revision().unwrap();
        let kept =
            |key: &crate::admin::NewKey| auth.cache.get(&key.record.id, revision, &digest(key.text.reveal())).is_some();
        assert!(!kept(&one_call), "a one-call key is read for each request");
        assert!(kept(&person));
        // Only a forwarded call's key carries an approval, of a well-formed digest.
        let bad = |approved: toolgate_core::ForwardedApproval, by: Option<&str>| KeyScope {
            tools: vec!["process".into()],
            forwarded_by: by.map(str::to_owned),
            approved: Some(approved),
            ..KeyScope::default()
        };
        let short = toolgate_core::ForwardedApproval { digest: "ab".into(), ..approved.clone() };
        let two_lines = toolgate_core::ForwardedApproval { decided: "a\nb".into(), ..approved.clone() };
        for scope in [bad(approved, None), bad(short, Some("b")), bad(two_lines, Some("b"))] {
            assert!(matches!(scope.check(), Err(GatewayError::BadScope(_))), "{scope:?}");
        }
    }

    #[test]
    fn keys_have_one_exact_shape() {
        let (id, text) = generate().unwrap();
        assert_eq!(key_id(text.reveal()), Some(id.as_str()));
        assert_eq!(text.reveal().len(), 3 + 16 + 1 + 64);
        assert!(!format!("{text:?}").contains(&text.reveal()[20..]), "Debug hides the secret");
        let (_, other) = generate().unwrap();
        assert_ne!(text, other);
        let good = text.reveal();
        let upper = good.to_uppercase().replacen("TG_", "tg_", 1);
        for bad in [&good[..good.len() - 1], &format!("{good}0"), &upper, &good.replacen('_', "-", 1), "tg__", ""] {
            assert_eq!(key_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn address_ranges() {
        let scope = |s: &[&str]| KeyScope {
            tools: vec![],
            sources: s.iter().map(|x| (*x).to_owned()).collect(),
            ..KeyScope::default()
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(scope(&[]).admits(ip("203.0.113.9")));
        let lan = scope(&["10.0.0.0/8", "2001:db8::/32", "127.0.0.1"]);
        assert!(lan.check().is_ok());
        for yes in ["10.1.2.3", "2001:db8::1", "127.0.0.1", "::ffff:10.9.9.9"] {
            assert!(lan.admits(ip(yes)), "{yes}");
        }
        for no in ["11.0.0.1", "127.0.0.2", "2001:db9::1", "::1"] {
            assert!(!lan.admits(ip(no)), "{no}");
        }
        assert!(scope(&["0.0.0.0/0"]).admits(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "x", "10.0.0.0/", "::/129"] {
            assert!(scope(&[bad]).check().is_err(), "{bad}");
        }
    }
}
