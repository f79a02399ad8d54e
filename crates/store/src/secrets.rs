//! Secrets at rest (MCP OAuth tokens, custom tools' environment values, WASM tools' manifests):
//! the [`SecretStore`] trait and its SQLite implementation on [`Store`]. AES-256-GCM, one fresh
//! random 96-bit nonce per write, the secret's name as associated data (a ciphertext copied under
//! another name does not decrypt), stored as `nonce || ciphertext` in the `secrets` table
//! (migration 3 in `db.rs`).
//!
//! The 256-bit key comes from `TOOLGATE_SECRET_KEY` (64 hex characters) when it is set, else from
//! `secret.key` next to the database, created on first use (mode 0600).

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

use crate::error::Context;
use crate::{Store, StoreError};

/// The environment variable that, when set, holds the secret key as 64 hex characters.
pub const SECRET_KEY_ENV: &str = "TOOLGATE_SECRET_KEY";

/// The key file's name, in the database's folder (`.toolgate/secret.key`).
pub const SECRET_KEY_FILE: &str = "secret.key";

const NONCE_LEN: usize = 12;
const KEY_LEN: usize = 32;

/// Why a secret could not be stored or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `TOOLGATE_SECRET_KEY` is set but is not a 256-bit hex key.
    #[error(
        "{SECRET_KEY_ENV} must be 64 hex characters (a 256-bit key; make one with `openssl rand -hex 32`), or unset it to use the key file"
    )]
    BadEnvKey,
    /// The key file could not be created, read or trusted.
    #[error("cannot use the secret key file {}: {problem}", path.display())]
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The stored value does not decrypt with the current key: the key changed, or the value
    /// was altered or moved from another name.
    #[error(
        "cannot decrypt the stored secret `{name}`: the key changed ({SECRET_KEY_ENV} or {} differs from when it was stored?) or the value was altered; store it again (for MCP tokens: `toolgate mcp login NAME`)",
        key_file.display()
    )]
    Decrypt {
        /// The secret's name.
        name: String,
        /// The key file in use (whether or not the environment variable overrides it).
        key_file: PathBuf,
    },
    /// The operating system gave no random numbers for a nonce or key.
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
    /// A database that several nodes share holds secrets only under a key they all have.
    #[error(
        "secrets in a database that several nodes share need {SECRET_KEY_ENV}: the same 64 hex characters on every node (make one with `openssl rand -hex 32`)"
    )]
    NoSharedKey,
}

/// A 256-bit key. Its `Debug` never shows the bytes.
struct SecretKey([u8; KEY_LEN]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey([REDACTED])")
    }
}

impl SecretKey {
    fn from_hex(text: &str) -> Option<SecretKey> {
        let text = text.trim().as_bytes();
        if text.len() != KEY_LEN * 2 {
            return None;
        }
        let mut key = [0u8; KEY_LEN];
        for (byte, pair) in key.iter_mut().zip(text.chunks_exact(2)) {
            *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        Some(SecretKey(key))
    }

    fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&self.0.into())
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn random(buf: &mut [u8]) -> Result<(), SecretError> {
    getrandom::fill(buf).map_err(|e| SecretError::Random(e.to_string()))
}

/// How a secret is sealed at rest, by every backend: AES-256-GCM under one key, a fresh nonce
/// per value, the secret's name as associated data; the value kept is `nonce || ciphertext`.
#[derive(Debug)]
pub struct SecretCipher {
    key: SecretKey,
    /// Where the key came from, for the error that says it changed (`None`: the environment).
    key_file: Option<PathBuf>,
}

impl SecretCipher {
    /// A cipher with the key given as 64 hex characters (`TOOLGATE_SECRET_KEY`'s form).
    pub fn from_hex(hex: &str) -> Result<SecretCipher, SecretError> {
        let key = SecretKey::from_hex(hex).ok_or(SecretError::BadEnvKey)?;
        Ok(SecretCipher { key, key_file: None })
    }

    /// `TOOLGATE_SECRET_KEY`'s cipher when the variable is set (an error when it is not a key).
    pub fn from_env() -> Result<Option<SecretCipher>, SecretError> {
        std::env::var(SECRET_KEY_ENV).ok().map(|hex| Self::from_hex(&hex)).transpose()
    }

    /// Encrypts `plaintext` to be kept under `name`.
    pub fn seal(&self, name: &str, plaintext: &[u8]) -> Result<Vec<u8>, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        random(&mut nonce)?;
        let sealed = self
            .key
            .cipher()
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad: name.as_bytes() })
            // Only fails for inputs over 64 GiB; say so rather than panic.
            .map_err(|_| SecretError::Random("AES-GCM refused to encrypt the value (too large?)".into()))?;
        let mut blob = Vec::with_capacity(NONCE_LEN + sealed.len());
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&sealed);
        Ok(blob)
    }

    /// Decrypts `blob`, kept under `name`: [`SecretError::Decrypt`] when the key differs, the
    /// value was altered, or it was moved from another name.
    pub fn open(&self, name: &str, blob: &[u8]) -> Result<Vec<u8>, SecretError> {
        let decrypt_err = || SecretError::Decrypt {
            name: name.to_owned(),
            key_file: self.key_file.clone().unwrap_or_else(|| PathBuf::from(format!("(none: {SECRET_KEY_ENV})"))),
        };
        if blob.len() < NONCE_LEN {
            return Err(decrypt_err());
        }
        let (nonce, sealed) = blob.split_at(NONCE_LEN);
        self.key
            .cipher()
            .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: name.as_bytes() })
            .map_err(|_| decrypt_err())
    }
}

/// Named secrets, encrypted at rest. Values are bytes; names are plain text (listed without
/// decrypting anything).
pub trait SecretStore: Send + Sync + Debug {
    /// Encrypts `plaintext` and stores it under `name`, replacing any previous value.
    fn secret_put(&self, name: &str, plaintext: &[u8]) -> Result<(), SecretError>;

    /// The decrypted value stored under `name`, or `None` when there is none. A value that does
    /// not decrypt (another key, altered, moved from another name) is [`SecretError::Decrypt`].
    fn secret_get(&self, name: &str) -> Result<Option<Vec<u8>>, SecretError>;

    /// Deletes the secret `name`; returns whether it existed.
    fn secret_delete(&self, name: &str) -> Result<bool, SecretError>;

    /// The names of the stored secrets that start with `prefix` (taken literally: no wildcards),
    /// sorted. Reads no values.
    fn secret_keys(&self, prefix: &str) -> Result<Vec<String>, SecretError>;
}

impl Store {
    /// The key file secrets use when `TOOLGATE_SECRET_KEY` is not set: `secret.key` next to the
    /// database.
    pub fn secret_key_path(&self) -> PathBuf {
        match self.path().parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.join(SECRET_KEY_FILE),
            _ => PathBuf::from(SECRET_KEY_FILE),
        }
    }

    fn secret_cipher(&self) -> Result<SecretCipher, SecretError> {
        let key_file = self.secret_key_path();
        let key = resolve_key(std::env::var(SECRET_KEY_ENV).ok(), &key_file)?;
        Ok(SecretCipher { key, key_file: Some(key_file) })
    }
}

impl SecretStore for Store {
    fn secret_put(&self, name: &str, plaintext: &[u8]) -> Result<(), SecretError> {
        let blob = self.secret_cipher()?.seal(name, plaintext)?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.with(|conn| {
            conn.execute(
                "INSERT INTO secrets (name, value, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
                rusqlite::params![name, blob, now_ms],
            )
            .map(drop)
            .doing("storing a secret")
        })?;
        Ok(())
    }

    fn secret_get(&self, name: &str) -> Result<Option<Vec<u8>>, SecretError> {
        let blob: Option<Vec<u8>> = self.with(|conn| {
            conn.prepare_cached("SELECT value FROM secrets WHERE name = ?1")
                .and_then(|mut stmt| {
                    let mut rows = stmt.query([name])?;
                    rows.next()?.map(|row| row.get(0)).transpose()
                })
                .doing("reading a secret")
        })?;
        let Some(blob) = blob else { return Ok(None) };
        self.secret_cipher()?.open(name, &blob).map(Some)
    }

    fn secret_delete(&self, name: &str) -> Result<bool, SecretError> {
        Ok(self.with(|conn| {
            conn.execute("DELETE FROM secrets WHERE name = ?1", [name]).map(|n| n > 0).doing("deleting a secret")
        })?)
    }

    fn secret_keys(&self, prefix: &str) -> Result<Vec<String>, SecretError> {
        Ok(self.with(|conn| {
            // substr, not LIKE: names may contain `%` or `_`.
            let mut stmt = conn
                .prepare_cached("SELECT name FROM secrets WHERE substr(name, 1, length(?1)) = ?1 ORDER BY name")
                .doing("listing secrets")?;
            let rows = stmt.query_map([prefix], |r| r.get(0)).doing("listing secrets")?;
            rows.collect::<Result<Vec<String>, _>>().doing("listing secrets")
        })?)
    }
}

/// The environment's key when given, else the key file's (created when missing).
fn resolve_key(env: Option<String>, key_file: &Path) -> Result<SecretKey, SecretError> {
    match env {
        Some(hex) => SecretKey::from_hex(&hex).ok_or(SecretError::BadEnvKey),
        None => load_or_create_key_file(key_file),
    }
}

fn load_or_create_key_file(path: &Path) -> Result<SecretKey, SecretError> {
    match read_key_file(path) {
        Err(SecretError::KeyFile { problem, .. }) if problem == NOT_FOUND => create_key_file(path),
        other => other,
    }
}

const NOT_FOUND: &str = "not found";

fn key_file_err(path: &Path, problem: impl Into<String>) -> SecretError {
    SecretError::KeyFile { path: path.to_owned(), problem: problem.into() }
}

fn read_key_file(path: &Path) -> Result<SecretKey, SecretError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(key_file_err(path, NOT_FOUND)),
        Err(e) => return Err(key_file_err(path, e.to_string())),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata().map_err(|e| key_file_err(path, e.to_string()))?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(key_file_err(
                path,
                format!(
                    "other users may read it (mode {:04o}); run `chmod 600 {}` (and consider the stored tokens exposed)",
                    mode & 0o7777,
                    path.display()
                ),
            ));
        }
    }
    let mut text = String::new();
    // A key file is 65 bytes; refuse to read a huge file someone put there.
    (&mut file).take(1024).read_to_string(&mut text).map_err(|e| key_file_err(path, e.to_string()))?;
    SecretKey::from_hex(&text).ok_or_else(|| {
        key_file_err(
            path,
            "it does not hold a 256-bit key (64 hex characters); restore it, or delete it and run `toolgate mcp login NAME` again for every server",
        )
    })
}

/// Writes a new key to a private temporary file, then links it into place: the link fails when
/// another process got there first (so every process ends up with the same key), and a reader
/// never sees a half-written key file.
fn create_key_file(path: &Path) -> Result<SecretKey, SecretError> {
    let mut bytes = [0u8; KEY_LEN];
    random(&mut bytes)?;
    let key = SecretKey(bytes);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| key_file_err(path, e.to_string()))?;
    let mut suffix = [0u8; 8];
    random(&mut suffix)?;
    let tmp = dir.join(format!(".{SECRET_KEY_FILE}.{}.tmp", u64::from_le_bytes(suffix)));
    let written = write_private(&tmp, format!("{}\n", key.to_hex()).as_bytes());
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(key_file_err(
            path,
            format!("cannot create it ({e}); set {SECRET_KEY_ENV} to 64 hex characters instead"),
        )),
    }
}

/// Creates `path` exclusively (O_EXCL), readable by the owner only, with `contents`, on disk.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_keys_parse_strictly() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let key = SecretKey::from_hex(hex).unwrap();
        assert_eq!(key.to_hex(), hex.to_ascii_lowercase());
        assert!(SecretKey::from_hex(&hex[..62]).is_none());
        assert!(SecretKey::from_hex(&format!("{}zz", &hex[..62])).is_none());
        assert_eq!(format!("{key:?}"), "SecretKey([REDACTED])");
    }

    #[test]
    fn the_environment_key_wins_over_the_file_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SECRET_KEY_FILE);
        let hex = "ab".repeat(32);
        let key = resolve_key(Some(hex.clone()), &file).unwrap();
        assert_eq!(key.to_hex(), hex);
        assert!(!file.exists(), "no key file when the environment gives the key");
        let err = resolve_key(Some("short".into()), &file).unwrap_err();
        assert!(err.to_string().contains("64 hex characters"), "{err}");
        let from_file = resolve_key(None, &file).unwrap();
        assert_eq!(resolve_key(None, &file).unwrap().to_hex(), from_file.to_hex(), "created once, then reused");
    }

    #[test]
    fn concurrent_first_uses_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SECRET_KEY_FILE);
        let keys: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..8).map(|_| s.spawn(|| load_or_create_key_file(&file).unwrap().to_hex())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from(SECRET_KEY_FILE)], "no temporary files left");
    }
}
