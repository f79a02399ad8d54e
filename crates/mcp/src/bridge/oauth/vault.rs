//! Where OAuth credentials live: a [`SecretVault`] (the `toolgate` crate backs it with the
//! encrypted store), and rmcp's [`CredentialStore`] over it, one record per server.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use crate::bridge::valid_server_name;

/// The vault key prefix of OAuth credentials: `mcp.oauth.NAME`.
pub const VAULT_PREFIX: &str = "mcp.oauth.";

/// The vault key of server `name`'s OAuth credentials.
pub fn vault_key(name: &str) -> String {
    format!("{VAULT_PREFIX}{name}")
}

/// The vault key prefix of per-user credentials in a team gateway: `mcp.user.USER.oauth.NAME`.
pub const USER_VAULT_PREFIX: &str = "mcp.user.";

/// The vault key of `user`'s OAuth credentials for server `name` in a team gateway. Server
/// names have no `.`, so the last `.oauth.` separates the two even when the user's name has dots.
pub fn user_vault_key(user: &str, name: &str) -> String {
    format!("{USER_VAULT_PREFIX}{user}.oauth.{name}")
}

/// The (user, server) of a per-user key, `None` for any other key.
pub fn parse_user_vault_key(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix(USER_VAULT_PREFIX)?.rsplit_once(".oauth.").filter(|(_, server)| valid_server_name(server))
}

/// The vault key prefix of a server's key as a connection reads it (`mcp.key.NAME`): a
/// [`UserVault`] keeps it as the user's own, `mcp.user.USER.key.NAME`.
pub const KEY_VAULT_PREFIX: &str = "mcp.key.";

/// The vault key of server `name`'s key (`mcp.key.NAME`, mapped to the user's own record by a
/// [`UserVault`]).
pub fn key_vault_key(name: &str) -> String {
    format!("{KEY_VAULT_PREFIX}{name}")
}

/// The vault key of `user`'s own key for server `name` in a team gateway (`user_key_header`).
pub fn user_key_vault_key(user: &str, name: &str) -> String {
    format!("{USER_VAULT_PREFIX}{user}.key.{name}")
}

/// The (user, server) of a per-user key record, `None` for any other key.
pub fn parse_user_key_vault_key(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix(USER_VAULT_PREFIX)?.rsplit_once(".key.").filter(|(_, server)| valid_server_name(server))
}

/// One user's view of a vault in a team gateway: server `NAME`'s credentials (`mcp.oauth.NAME`)
/// are kept under `mcp.user.USER.oauth.NAME`, so every function of [`super`] signs in, uses and
/// forgets that user's own sign-in, and can reach no one else's. Any other key is refused.
#[derive(Debug, Clone)]
pub struct UserVault {
    inner: Arc<dyn SecretVault>,
    user: Arc<str>,
}

impl UserVault {
    /// `user`'s credentials in `inner`.
    pub fn new(inner: Arc<dyn SecretVault>, user: &str) -> Self {
        UserVault { inner, user: user.into() }
    }

    /// The user.
    pub fn user(&self) -> &str {
        &self.user
    }

    fn map(&self, key: &str) -> Result<String, VaultError> {
        if let Some(server) = key.strip_prefix(VAULT_PREFIX).filter(|s| !s.is_empty()) {
            return Ok(user_vault_key(&self.user, server));
        }
        match key.strip_prefix(KEY_VAULT_PREFIX) {
            Some(server) if !server.is_empty() => Ok(user_key_vault_key(&self.user, server)),
            _ => Err(VaultError(format!("a user's vault keeps OAuth credentials and keys only, not `{key}`"))),
        }
    }
}

impl SecretVault for UserVault {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        self.inner.get(&self.map(key)?)
    }
    fn put(&self, key: &str, value: &[u8]) -> Result<(), VaultError> {
        self.inner.put(&self.map(key)?, value)
    }
    fn delete(&self, key: &str) -> Result<bool, VaultError> {
        self.inner.delete(&self.map(key)?)
    }
}

/// Why the vault failed, in words for the user (never containing a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VaultError(pub String);

/// Byte values kept secret by name (encrypted at rest by the implementation). toolgate-mcp does
/// not know how: the `toolgate` crate implements this over its SQLite store.
pub trait SecretVault: Send + Sync + std::fmt::Debug {
    /// The value stored under `key`, or `None`.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, VaultError>;
    /// Stores `value` under `key`, replacing any previous one.
    fn put(&self, key: &str, value: &[u8]) -> Result<(), VaultError>;
    /// Deletes `key`; returns whether it existed.
    fn delete(&self, key: &str) -> Result<bool, VaultError>;
}

/// rmcp's credential store over a vault: one server's [`StoredCredentials`], as JSON, under
/// `mcp.oauth.NAME`. Vault calls are blocking (SQLite), so they run on the blocking pool.
#[derive(Debug, Clone)]
pub(crate) struct VaultCredentialStore {
    vault: Arc<dyn SecretVault>,
    key: Arc<str>,
}

impl VaultCredentialStore {
    pub(crate) fn new(vault: Arc<dyn SecretVault>, server: &str) -> Self {
        VaultCredentialStore { vault, key: vault_key(server).into() }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn SecretVault, &str) -> Result<T, VaultError> + Send + 'static,
    ) -> Result<T, AuthError> {
        let (vault, key) = (self.vault.clone(), self.key.clone());
        tokio::task::spawn_blocking(move || f(vault.as_ref(), &key))
            .await
            .map_err(|e| AuthError::CredentialStoreError(format!("the token store task failed: {e}")))?
            .map_err(|e| AuthError::CredentialStoreError(e.0))
    }

    /// The stored credentials, or `None`; a record that is not valid JSON is an error (it was
    /// decrypted, so it is not tampering, but a format from another version).
    pub(crate) async fn load_credentials(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(bytes) = self.blocking(|vault, key| vault.get(key)).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| AuthError::CredentialStoreError(format!("the stored OAuth credentials are unreadable ({e})")))
    }
}

#[async_trait]
impl CredentialStore for VaultCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.load_credentials().await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let bytes = serde_json::to_vec(&credentials)
            .map_err(|e| AuthError::CredentialStoreError(format!("cannot serialize the OAuth credentials: {e}")))?;
        self.blocking(move |vault, key| vault.put(key, &bytes)).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.blocking(|vault, key| vault.delete(key).map(drop)).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// A vault in memory, for unit tests.
    #[derive(Debug, Default)]
    pub(crate) struct MemoryVault(pub(crate) Mutex<HashMap<String, Vec<u8>>>);

    impl SecretVault for MemoryVault {
        fn get(&self, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
            Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned())
        }
        fn put(&self, key: &str, value: &[u8]) -> Result<(), VaultError> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_owned(), value.to_vec());
            Ok(())
        }
        fn delete(&self, key: &str) -> Result<bool, VaultError> {
            Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key).is_some())
        }
    }

    #[tokio::test]
    async fn a_user_vault_keeps_each_users_credentials_apart() {
        let vault = Arc::new(MemoryVault::default());
        let ann = UserVault::new(vault.clone(), "ann.x");
        let bob = UserVault::new(vault.clone(), "bob");
        VaultCredentialStore::new(Arc::new(ann.clone()), "gh")
            .save(StoredCredentials::new("c-ann".into(), None, vec![], None))
            .await
            .unwrap();
        assert!(vault.get("mcp.user.ann.x.oauth.gh").unwrap().is_some());
        assert!(vault.get("mcp.oauth.gh").unwrap().is_none(), "no server-wide record");
        assert!(bob.get("mcp.oauth.gh").unwrap().is_none(), "bob sees nothing of ann's");
        assert_eq!(parse_user_vault_key("mcp.user.ann.x.oauth.gh"), Some(("ann.x", "gh")));
        assert_eq!(parse_user_vault_key("mcp.oauth.gh"), None);
        assert!(ann.get("memory.key").is_err(), "only OAuth credentials and keys are mapped");
        ann.put("mcp.key.gh", b"k-ann").unwrap();
        assert_eq!(vault.get("mcp.user.ann.x.key.gh").unwrap().as_deref(), Some(&b"k-ann"[..]));
        assert!(bob.get("mcp.key.gh").unwrap().is_none(), "bob has no key of ann's");
        assert_eq!(parse_user_key_vault_key("mcp.user.ann.x.key.gh"), Some(("ann.x", "gh")));
        assert_eq!(parse_user_vault_key("mcp.user.ann.x.key.gh"), None);
        assert_eq!(parse_user_key_vault_key("mcp.user.a.key.b.oauth.gh"), None, "an OAuth record of `a.key.b`");
        assert!(bob.delete("mcp.oauth.gh").map(|had| !had).unwrap());
        assert!(ann.delete("mcp.oauth.gh").unwrap());
    }

    #[tokio::test]
    async fn credentials_round_trip_under_the_server_key() {
        let vault = Arc::new(MemoryVault::default());
        let store = VaultCredentialStore::new(vault.clone(), "github");
        assert!(store.load().await.unwrap().is_none());
        let creds = StoredCredentials::new("client-1".into(), None, vec!["mcp:tools".into()], Some(5));
        store.save(creds).await.unwrap();
        assert!(vault.get("mcp.oauth.github").unwrap().is_some());
        let back = store.load().await.unwrap().unwrap();
        assert_eq!(back.client_id, "client-1");
        assert_eq!(back.granted_scopes, ["mcp:tools"]);
        store.clear().await.unwrap();
        assert!(vault.get("mcp.oauth.github").unwrap().is_none());

        vault.put("mcp.oauth.github", b"not json").unwrap();
        let err = store.load().await.unwrap_err();
        assert!(err.to_string().contains("unreadable"), "{err}");
    }
}
