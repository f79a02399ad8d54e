//! The bridge's [`SecretVault`] over the store's secrets: OAuth tokens of bridged MCP servers,
//! encrypted at rest by a [`SecretStore`] (in SQLite, AES-256-GCM:
//! [`SecretStore::secret_put`]).

use std::path::Path;
use std::sync::Arc;

use toolgate_mcp::bridge::oauth::{SecretVault, VAULT_PREFIX, VaultError};
use toolgate_store::{SECRET_KEY_ENV, SecretError, SecretStore, Store, StoreError};

/// Secrets kept in a [`SecretStore`]: the gate's (any backend, `StoreVault<dyn SecretStore>`),
/// or the workspace's SQLite database opened by [`StoreVault::open`] (`.toolgate/state.db`, key
/// in `.toolgate/secret.key` or `TOOLGATE_SECRET_KEY`).
#[derive(Debug)]
pub struct StoreVault<S: SecretStore + ?Sized = Store> {
    store: Arc<S>,
}

impl<S: SecretStore + ?Sized> Clone for StoreVault<S> {
    fn clone(&self) -> Self {
        StoreVault { store: Arc::clone(&self.store) }
    }
}

impl<S: SecretStore + ?Sized> StoreVault<S> {
    /// A vault over `store`'s secrets.
    pub fn new(store: Arc<S>) -> StoreVault<S> {
        StoreVault { store }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }
}

impl StoreVault {
    /// Opens (or creates) the SQLite store at `db` and makes a vault over it.
    pub fn open(db: &Path) -> Result<StoreVault, StoreError> {
        Ok(StoreVault::new(Arc::new(Store::open(db)?)))
    }
}

fn vault_err(e: SecretError) -> VaultError {
    VaultError(e.to_string())
}

/// A value that no longer decrypts, said for the server it belongs to.
fn read_err(key: &str, e: SecretError) -> VaultError {
    match (&e, key.strip_prefix(VAULT_PREFIX)) {
        (SecretError::Decrypt { key_file, .. }, Some(server)) => VaultError(format!(
            "cannot decrypt the stored OAuth tokens: the secret key changed ({SECRET_KEY_ENV} or {} differs from when they were stored?) or they were altered; run `toolgate mcp login {server}` again",
            key_file.display()
        )),
        _ => vault_err(e),
    }
}

impl<S: SecretStore + ?Sized> SecretVault for StoreVault<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        self.store.secret_get(key).map_err(|e| read_err(key, e))
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), VaultError> {
        self.store.secret_put(key, value).map_err(vault_err)
    }

    fn delete(&self, key: &str) -> Result<bool, VaultError> {
        self.store.secret_delete(key).map_err(vault_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_that_no_longer_decrypt_name_the_login_command() {
        let dir = tempfile::tempdir().unwrap();
        let vault = StoreVault::open(&dir.path().join(".toolgate/state.db")).unwrap();
        vault.put("mcp.oauth.github", b"{}").unwrap();
        vault.put("other", b"x").unwrap();
        std::fs::remove_file(vault.store().secret_key_path()).unwrap();
        let err = vault.get("mcp.oauth.github").unwrap_err().0;
        assert!(err.contains("run `toolgate mcp login github` again"), "{err}");
        let err = vault.get("other").unwrap_err().0;
        assert!(err.contains("cannot decrypt the stored secret `other`"), "{err}");
    }
}
