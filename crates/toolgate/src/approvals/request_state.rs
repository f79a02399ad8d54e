//! The `requestState` a 2026-07-28 MCP client echoes when it retries a call that waits in the
//! inbox: which approval the call waits on, sealed with AES-256-GCM so the client can neither
//! read nor change it, and bound to the principal (user and agent), the digest of the exact
//! arguments and an expiry. A state opened for another principal, other arguments, after its
//! expiry or with one bit changed is refused; the call then asks again from the start.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_store::SecretStore;

/// Bound into every seal as associated data, so a sealed value of another kind (or version)
/// never opens as a request state.
const AAD: &[u8] = b"toolgate requestState v1";

/// What a state carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestState {
    /// The inbox entry the call waits on.
    pub approval: i64,
    /// The user the call is made for.
    pub user: String,
    /// The agent making it.
    pub agent: String,
    /// The SHA-256 of the exact arguments.
    pub digest: String,
    /// After this instant (Unix ms) it is refused.
    pub expires_ms: i64,
}

/// Why a state was refused; said to the client (it learns nothing it did not send).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Not a sealed state of this server (forged, changed, or sealed under another key).
    #[error("the requestState is not one this server issued (or it was changed); call again without it")]
    Forged,
    /// Sealed for someone else.
    #[error("the requestState belongs to another caller; call again without it")]
    OtherPrincipal,
    /// Sealed for other arguments.
    #[error("the requestState was issued for other arguments; call again without it")]
    OtherArguments,
    /// Too old.
    #[error("the requestState expired; call again without it")]
    Expired,
}

/// The prefix of the sealing keys' names in the secrets store: `approvals/state-key/` and the
/// key's creation time (Unix ms), so the newest seals and the others still open.
pub const KEY_PREFIX: &str = "approvals/state-key/";

/// Seals request states with the newest key of a ring and opens them with any key of it.
///
/// The keys live in the secrets store (encrypted at rest under the store's secret key), so a
/// state sealed before a restart opens after it and every process on the same database opens
/// the others' states. A key older than the rotation period is replaced by a new one at the next
/// start; old keys stay until no state sealed under them can still be open (their entries
/// expired), then are deleted.
pub struct Sealer {
    /// Newest first.
    keys: RwLock<Vec<Aes256Gcm>>,
    source: Option<KeySource>,
}

/// Where a ring's keys are kept, and for how long.
struct KeySource {
    secrets: Arc<dyn SecretStore>,
    rotate: Duration,
    keep: Duration,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer with the one key `key` (tests; an embedder with its own key).
    pub fn new(key: &[u8; 32]) -> Self {
        Sealer { keys: RwLock::new(vec![cipher(key)]), source: None }
    }

    /// A sealer with a fresh random key that ends with the process (a gate without a state
    /// database: its inbox ends with the process too).
    pub fn random() -> Option<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).ok()?;
        Some(Sealer::new(&key))
    }

    /// The ring in `secrets` at `now_ms`: its keys, after adding a new one when the newest is
    /// older than `rotate` (or there is none) and deleting those older than `rotate + keep`
    /// (`keep`: the longest a state can stay open, the inbox's expiry).
    pub fn from_secrets(
        secrets: Arc<dyn SecretStore>,
        rotate: Duration,
        keep: Duration,
        now_ms: i64,
    ) -> Result<Self, String> {
        let source = KeySource { secrets, rotate, keep };
        let keys = source.load(now_ms)?;
        Ok(Sealer { keys: RwLock::new(keys), source: Some(source) })
    }

    /// `state`, sealed with the newest key: hex of a random 96-bit nonce (a new one for every
    /// seal) and the ciphertext with its tag.
    pub fn seal(&self, state: &RequestState) -> Option<String> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).ok()?;
        let plain = serde_json::to_vec(state).ok()?;
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        let sealed = keys.first()?.encrypt(Nonce::from_slice(&nonce), Payload { msg: &plain, aad: AAD }).ok()?;
        Some(hex(&nonce) + &hex(&sealed))
    }

    /// The plaintext of `nonce` + `sealed` under any key of the ring; once more after reading
    /// the ring again when none opens it (another process may have rotated since).
    fn decrypt(&self, nonce: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        let try_all = |keys: &[Aes256Gcm]| {
            keys.iter().find_map(|k| k.decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: AAD }).ok())
        };
        if let Some(plain) = try_all(&self.keys.read().unwrap_or_else(PoisonError::into_inner)) {
            return Some(plain);
        }
        let source = self.source.as_ref()?;
        let keys = source.read().ok()?;
        let plain = try_all(&keys);
        if !keys.is_empty() {
            *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys;
        }
        plain
    }

    /// Opens `text` for a call by `user` and `agent` with arguments `digest` at `now_ms`.
    pub fn open(
        &self,
        text: &str,
        user: &str,
        agent: &str,
        digest: &str,
        now_ms: i64,
    ) -> Result<RequestState, StateError> {
        // A state is small; anything long is not ours (and is not worth decoding).
        if text.len() > 4096 {
            return Err(StateError::Forged);
        }
        let bytes = unhex(text).ok_or(StateError::Forged)?;
        if bytes.len() < 12 + 16 {
            return Err(StateError::Forged);
        }
        let (nonce, sealed) = bytes.split_at(12);
        let plain = self.decrypt(nonce, sealed).ok_or(StateError::Forged)?;
        let state: RequestState = serde_json::from_slice(&plain).map_err(|_| StateError::Forged)?;
        if state.user != user || state.agent != agent {
            return Err(StateError::OtherPrincipal);
        }
        if state.digest != digest {
            return Err(StateError::OtherArguments);
        }
        if now_ms >= state.expires_ms {
            return Err(StateError::Expired);
        }
        Ok(state)
    }
}

impl KeySource {
    /// The ring, rotated and pruned as of `now_ms`, newest first.
    fn load(&self, now_ms: i64) -> Result<Vec<Aes256Gcm>, String> {
        let names = self.names()?;
        let rotate = self.rotate.as_millis() as i64;
        if names.first().is_none_or(|(created, _)| now_ms - created >= rotate) {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|e| format!("no random key: {e}"))?;
            self.secrets
                .secret_put(&format!("{KEY_PREFIX}{now_ms:015}"), &key)
                .map_err(|e| format!("cannot store a new requestState key: {e}"))?;
        }
        // Older than `rotate + keep`: replaced long enough ago that every state it sealed expired.
        let cutoff = now_ms.saturating_sub(rotate.saturating_add(self.keep.as_millis() as i64));
        for (created, name) in self.names()?.iter().skip(1) {
            if *created < cutoff {
                let _ = self.secrets.secret_delete(name);
            }
        }
        self.read()
    }

    /// The keys as stored, newest first; one that does not decrypt is skipped (said once).
    fn read(&self) -> Result<Vec<Aes256Gcm>, String> {
        let mut keys = Vec::new();
        for (_, name) in self.names()? {
            match self.secrets.secret_get(&name) {
                Ok(Some(bytes)) => match <[u8; 32]>::try_from(bytes.as_slice()) {
                    Ok(key) => keys.push(cipher(&key)),
                    Err(_) => tracing::warn!("the requestState key `{name}` is not 32 bytes; it is skipped"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!("cannot read the requestState key `{name}`: {e}; it is skipped"),
            }
        }
        if keys.is_empty() {
            return Err("no requestState key could be read from the secrets store".into());
        }
        Ok(keys)
    }

    /// The keys' creation times and names, newest first.
    fn names(&self) -> Result<Vec<(i64, String)>, String> {
        let names =
            self.secrets.secret_keys(KEY_PREFIX).map_err(|e| format!("cannot list the requestState keys: {e}"))?;
        let mut named: Vec<(i64, String)> =
            names.into_iter().filter_map(|n| Some((n.strip_prefix(KEY_PREFIX)?.parse().ok()?, n))).collect();
        named.sort_by(|a, b| b.cmp(a));
        Ok(named)
    }
}

fn cipher(key: &[u8; 32]) -> Aes256Gcm {
    Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> RequestState {
        RequestState { approval: 7, user: "ann".into(), agent: "main".into(), digest: "d1".into(), expires_ms: 1_000 }
    }

    #[test]
    fn a_state_opens_only_for_its_principal_arguments_and_time() {
        let sealer = Sealer::new(&[9; 32]);
        let sealed = sealer.seal(&state()).unwrap();
        // Values long enough that random ciphertext cannot hold them by chance ("d1" can).
        let marked = RequestState { user: "ann-the-requester".into(), digest: "the-argument-digest".into(), ..state() };
        let sealed_marked = sealer.seal(&marked).unwrap();
        assert!(
            !sealed_marked.contains("ann-the-requester") && !sealed_marked.contains("the-argument-digest"),
            "sealed, not merely encoded"
        );
        assert_eq!(sealer.open(&sealed, "ann", "main", "d1", 999), Ok(state()));
        assert_eq!(sealer.open(&sealed, "bob", "main", "d1", 999), Err(StateError::OtherPrincipal), "replayed by bob");
        assert_eq!(sealer.open(&sealed, "ann", "ci", "d1", 999), Err(StateError::OtherPrincipal), "another agent");
        assert_eq!(sealer.open(&sealed, "ann", "main", "d2", 999), Err(StateError::OtherArguments));
        assert_eq!(sealer.open(&sealed, "ann", "main", "d1", 1_000), Err(StateError::Expired));
        assert_ne!(sealer.seal(&state()).unwrap(), sealed, "a fresh nonce each time");
    }

    #[test]
    fn a_changed_or_foreign_state_is_forged() {
        let sealer = Sealer::new(&[9; 32]);
        let sealed = sealer.seal(&state()).unwrap();
        // Every position flipped once: the tag catches each.
        for i in 0..sealed.len() {
            let mut bytes = sealed.clone().into_bytes();
            bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(bytes).unwrap();
            assert_eq!(sealer.open(&changed, "ann", "main", "d1", 0), Err(StateError::Forged), "position {i}");
        }
        let other = Sealer::new(&[8; 32]);
        assert_eq!(other.open(&sealed, "ann", "main", "d1", 0), Err(StateError::Forged), "another server's key");
        for junk in ["", "zz", "00", &"ab".repeat(3000), "{\"approval\":7}"] {
            assert_eq!(sealer.open(junk, "ann", "main", "d1", 0), Err(StateError::Forged), "{junk:.20}");
        }
        // A state the attacker writes in clear, sealed under no key, never opens.
        let forged = hex(&[0; 12]) + &hex(&serde_json::to_vec(&state()).unwrap()) + &hex(&[0; 16]);
        assert_eq!(sealer.open(&forged, "ann", "main", "d1", 0), Err(StateError::Forged));
    }

    #[test]
    fn the_key_ring_lives_in_the_secrets_store_rotates_and_keeps_old_states_open() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SecretStore> = Arc::new(toolgate_store::Store::open(&dir.path().join("state.db")).unwrap());
        let (day, hour) = (Duration::from_secs(86_400), Duration::from_secs(3_600));
        let t0 = 1_000_000_000_000;
        let first = Sealer::from_secrets(Arc::clone(&store), day, hour, t0).unwrap();
        let state = RequestState { expires_ms: i64::MAX, ..state() };
        let sealed = first.seal(&state).unwrap();
        // A restart (a new sealer on the same store) opens it: the key is stored, not random.
        let again = Sealer::from_secrets(Arc::clone(&store), day, hour, t0 + 1).unwrap();
        assert_eq!(again.open(&sealed, "ann", "main", "d1", 0), Ok(state.clone()));
        assert_eq!(store.secret_keys(KEY_PREFIX).unwrap().len(), 1, "no rotation within the period");
        // A day later a new key seals; the old one still opens what it sealed.
        let rotated = Sealer::from_secrets(Arc::clone(&store), day, hour, t0 + 86_400_000).unwrap();
        assert_eq!(store.secret_keys(KEY_PREFIX).unwrap().len(), 2);
        assert_eq!(rotated.open(&sealed, "ann", "main", "d1", 0), Ok(state.clone()));
        let newer = rotated.seal(&state).unwrap();
        // A process started before the rotation reads the ring again and opens the new state.
        assert_eq!(first.open(&newer, "ann", "main", "d1", 0), Ok(state.clone()));
        // Once every state of the old key expired (rotation + expiry later), it is deleted.
        let pruned = Sealer::from_secrets(Arc::clone(&store), day, hour, t0 + 86_400_000 + 3_600_001).unwrap();
        assert_eq!(store.secret_keys(KEY_PREFIX).unwrap().len(), 1);
        assert_eq!(pruned.open(&sealed, "ann", "main", "d1", 0), Err(StateError::Forged));
        assert_eq!(pruned.open(&newer, "ann", "main", "d1", 0), Ok(state));
        // The keys are stored encrypted: the database file holds no key in clear.
        let raw = std::fs::read(dir.path().join("state.db")).unwrap();
        let key = store.secret_get(&store.secret_keys(KEY_PREFIX).unwrap()[0]).unwrap().unwrap();
        assert!(!raw.windows(32).any(|w| w == key.as_slice()), "a key in clear in the database");
    }
}
