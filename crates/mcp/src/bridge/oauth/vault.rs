//! Where OAuth credentials live: a [`SecretVault`] (the `toolgate` crate backs it with the
//! encrypted store), and rmcp's [`CredentialStore`] over it, one record per server.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

/// The vault key prefix of OAuth credentials: `mcp.oauth.NAME`.
pub const VAULT_PREFIX: &str = "mcp.oauth.";

/// The vault key of server `name`'s OAuth credentials.
pub fn vault_key(name: &str) -> String {
    format!("{VAULT_PREFIX}{name}")
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
