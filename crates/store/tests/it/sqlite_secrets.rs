//! Encrypted secrets in the state database: what reaches the disk, and every way a stored value
//! must refuse to decrypt.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use toolgate_store::SecretStore;
use toolgate_store::{SECRET_KEY_ENV, SECRET_KEY_FILE, SecretError, Store};

const PLAINTEXT: &[u8] = br#"{"access_token":"tok-4f1d9c0e-PLAINTEXT-MARKER","refresh_token":"ref-77aa"}"#;

fn store() -> (tempfile::TempDir, Store) {
    assert!(
        std::env::var_os(SECRET_KEY_ENV).is_none(),
        "unset {SECRET_KEY_ENV} to run these tests: they check the key file"
    );
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    (dir, store)
}

fn raw_value(db: &Path, name: &str) -> Vec<u8> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT value FROM secrets WHERE name = ?1", [name], |r| r.get(0)).unwrap()
}

fn set_raw_value(db: &Path, name: &str, value: &[u8]) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let n = conn.execute("UPDATE secrets SET value = ?2 WHERE name = ?1", rusqlite::params![name, value]).unwrap();
    assert_eq!(n, 1);
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn round_trip_list_and_delete() {
    let (_dir, store) = store();
    assert_eq!(store.secret_get("mcp.oauth.github").unwrap(), None);
    store.secret_put("mcp.oauth.github", PLAINTEXT).unwrap();
    store.secret_put("mcp.oauth.linear", b"").unwrap();
    store.secret_put("other", b"x").unwrap();
    assert_eq!(store.secret_get("mcp.oauth.github").unwrap().as_deref(), Some(PLAINTEXT));
    assert_eq!(store.secret_get("mcp.oauth.linear").unwrap().as_deref(), Some(&b""[..]), "empty values round-trip");
    assert_eq!(store.secret_keys("mcp.oauth.").unwrap(), ["mcp.oauth.github", "mcp.oauth.linear"]);
    assert_eq!(store.secret_keys("mcp.oauth%").unwrap(), Vec::<String>::new(), "the prefix is literal");

    store.secret_put("mcp.oauth.github", b"replaced").unwrap();
    assert_eq!(store.secret_get("mcp.oauth.github").unwrap().as_deref(), Some(&b"replaced"[..]));
    assert!(store.secret_delete("mcp.oauth.github").unwrap());
    assert!(!store.secret_delete("mcp.oauth.github").unwrap());
    assert_eq!(store.secret_get("mcp.oauth.github").unwrap(), None);

    // A second connection (another process, later) reads the same key file.
    let again = Store::open(store.path()).unwrap();
    assert_eq!(again.secret_get("other").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn each_write_uses_a_fresh_nonce() {
    let (_dir, store) = store();
    store.secret_put("a", PLAINTEXT).unwrap();
    let first = raw_value(store.path(), "a");
    store.secret_put("a", PLAINTEXT).unwrap();
    let second = raw_value(store.path(), "a");
    assert_eq!(first.len(), 12 + PLAINTEXT.len() + 16, "nonce || ciphertext || tag");
    assert_ne!(first[..12], second[..12], "same value, new nonce");
    assert_ne!(first, second);
}

#[test]
fn the_database_never_holds_the_plaintext() {
    let (_dir, store) = store();
    store.secret_put("mcp.oauth.github", PLAINTEXT).unwrap();
    drop(store);
    let dir = _dir.path().join(".toolgate");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("state.db") {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!contains(&bytes, b"PLAINTEXT-MARKER"), "{name} holds the plaintext");
            assert!(!contains(&bytes, b"ref-77aa"), "{name} holds the plaintext");
            checked += bytes.len();
        }
    }
    assert!(checked > 0, "found the database files");
    // The name is stored in clear (it is the associated data, not a secret).
    let db = dir.join("state.db");
    let wal = dir.join("state.db-wal");
    let all = [std::fs::read(&db).unwrap(), std::fs::read(&wal).unwrap_or_default()].concat();
    assert!(contains(&all, b"mcp.oauth.github"), "the grep would have found text in these files");
}

#[cfg(unix)]
#[test]
fn the_key_file_is_created_private_and_a_loose_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, store) = store();
    let key_file = dir.path().join(".toolgate").join(SECRET_KEY_FILE);
    assert_eq!(store.secret_key_path(), key_file);
    assert!(!key_file.exists(), "created on first use, not on open");
    store.secret_put("a", b"1").unwrap();
    let meta = std::fs::metadata(&key_file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&key_file).unwrap();
    assert_eq!(text.trim().len(), 64, "64 hex characters");

    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = store.secret_get("a").unwrap_err();
    assert!(matches!(err, SecretError::KeyFile { .. }), "{err:?}");
    assert!(err.to_string().contains("chmod 600"), "{err}");
}

#[test]
fn a_different_key_does_not_decrypt() {
    let (dir, store) = store();
    store.secret_put("mcp.oauth.github", PLAINTEXT).unwrap();
    let key_file = dir.path().join(".toolgate").join(SECRET_KEY_FILE);
    std::fs::remove_file(&key_file).unwrap();
    // The next use creates a new key file: the stored value no longer decrypts.
    let err = store.secret_get("mcp.oauth.github").unwrap_err();
    assert!(matches!(err, SecretError::Decrypt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("cannot decrypt") && msg.contains("`mcp.oauth.github`"), "{msg}");
    assert!(msg.contains("the key changed") && msg.contains("toolgate mcp login"), "{msg}");
    assert!(!msg.contains("PLAINTEXT"), "{msg}");
}

#[test]
fn a_tampered_value_does_not_decrypt() {
    let (_dir, store) = store();
    store.secret_put("s", PLAINTEXT).unwrap();
    let raw = raw_value(store.path(), "s");
    for i in [0, 12, raw.len() / 2, raw.len() - 1] {
        let mut bad = raw.clone();
        bad[i] ^= 0x01;
        set_raw_value(store.path(), "s", &bad);
        assert!(matches!(store.secret_get("s"), Err(SecretError::Decrypt { .. })), "flipped byte {i}");
    }
    for bad in [&raw[..raw.len() - 1], &raw[..12], &raw[..3], &[][..]] {
        set_raw_value(store.path(), "s", bad);
        assert!(matches!(store.secret_get("s"), Err(SecretError::Decrypt { .. })), "truncated to {}", bad.len());
    }
    set_raw_value(store.path(), "s", &raw);
    assert_eq!(store.secret_get("s").unwrap().as_deref(), Some(PLAINTEXT), "the original still decrypts");
}

#[test]
fn a_value_moved_to_another_name_does_not_decrypt() {
    let (_dir, store) = store();
    store.secret_put("mcp.oauth.github", PLAINTEXT).unwrap();
    store.secret_put("mcp.oauth.evil", b"mine").unwrap();
    let github = raw_value(store.path(), "mcp.oauth.github");
    set_raw_value(store.path(), "mcp.oauth.evil", &github);
    let err = store.secret_get("mcp.oauth.evil").unwrap_err();
    assert!(matches!(err, SecretError::Decrypt { ref name, .. } if name == "mcp.oauth.evil"), "{err:?}");
}

#[test]
fn migrations_reach_the_latest_version() {
    let (_dir, store) = store();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version as usize, toolgate_store::SCHEMA_VERSION, "every migration ran");
    // Reopening applies nothing twice (a migration that ran again would fail: CREATE TABLE).
    drop(conn);
    let again = toolgate_store::Store::open(store.path()).unwrap();
    let conn = rusqlite::Connection::open(again.path()).unwrap();
    let reopened: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(reopened, version);
    // Every area's table is there.
    for table in [
        "audit",
        "approval_grants",
        "secrets",
        "agent_sessions",
        "path_locks",
        "jobs",
        "routines",
        "message_outbox",
        "principals",
        "api_keys",
        "audit_chain",
        "approvals",
        "approval_events",
    ] {
        let n: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "table {table}");
    }
}
