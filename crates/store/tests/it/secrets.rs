//! [`SecretStore`]: encrypted named secrets. (The SQLite backend's key file and what reaches its
//! disk are tested in `tests/secrets.rs`.)

use toolgate_store::SECRET_KEY_ENV;

use crate::{Area, on_every_backend_of};

#[test]
fn secrets_round_trip_are_replaced_listed_and_deleted() {
    assert!(std::env::var_os(SECRET_KEY_ENV).is_none(), "unset {SECRET_KEY_ENV} to run these tests");
    on_every_backend_of(Area::Secrets, |db| {
        let secrets = db.connect().secrets;
        assert_eq!(secrets.secret_get("mcp.oauth.github").unwrap(), None);
        secrets.secret_put("mcp.oauth.github", b"tok-1").unwrap();
        secrets.secret_put("mcp.oauth.linear", b"").unwrap();
        secrets.secret_put("other", &[0, 159, 255]).unwrap();
        assert_eq!(secrets.secret_get("mcp.oauth.github").unwrap().as_deref(), Some(&b"tok-1"[..]));
        assert_eq!(secrets.secret_get("mcp.oauth.linear").unwrap().as_deref(), Some(&b""[..]), "empty values");
        assert_eq!(secrets.secret_get("other").unwrap().as_deref(), Some(&[0, 159, 255][..]), "any bytes");
        assert_eq!(secrets.secret_keys("mcp.oauth.").unwrap(), ["mcp.oauth.github", "mcp.oauth.linear"]);
        assert_eq!(secrets.secret_keys("").unwrap().len(), 3);
        secrets.secret_put("mcp.oauth.github", b"tok-2").unwrap();
        assert_eq!(secrets.secret_get("mcp.oauth.github").unwrap().as_deref(), Some(&b"tok-2"[..]));
        assert!(secrets.secret_delete("mcp.oauth.github").unwrap());
        assert!(!secrets.secret_delete("mcp.oauth.github").unwrap());
        assert_eq!(secrets.secret_get("mcp.oauth.github").unwrap(), None);
    });
}

#[test]
fn a_prefix_is_literal() {
    on_every_backend_of(Area::Secrets, |db| {
        let secrets = db.connect().secrets;
        for name in ["a%b", "a_b", "axb", "A%b"] {
            secrets.secret_put(name, b"x").unwrap();
        }
        assert_eq!(secrets.secret_keys("a%").unwrap(), ["a%b"]);
        assert_eq!(secrets.secret_keys("a_").unwrap(), ["a_b"]);
        assert!(secrets.secret_keys("mcp.oauth%").unwrap().is_empty());
    });
}

#[test]
fn another_connection_reads_the_same_secrets() {
    on_every_backend_of(Area::Secrets, |db| {
        db.connect().secrets.secret_put("custom/token", b"s3cr3t").unwrap();
        let later = db.connect().secrets;
        assert_eq!(later.secret_get("custom/token").unwrap().as_deref(), Some(&b"s3cr3t"[..]));
        assert_eq!(later.secret_keys("custom/").unwrap(), ["custom/token"]);
    });
}
