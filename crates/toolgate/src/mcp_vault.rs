//! The bridge's [`SecretVault`] over the state database: OAuth tokens of bridged MCP servers,
//! encrypted with AES-256-GCM by [`Store::secret_put`](toolgate_store::Store::secret_put).

use std::path::Path;
use std::sync::Arc;

use toolgate_mcp::bridge::oauth::{SecretVault, VaultError};
use toolgate_store::{SecretError, Store, StoreError};

/// Secrets kept in the workspace's store (`.toolgate/state.db`, key in `.toolgate/secret.key`
/// or `TOOLGATE_SECRET_KEY`).
#[derive(Debug, Clone)]
pub struct StoreVault {
    store: Arc<Store>,
}

impl StoreVault {
    /// A vault over an open store.
    pub fn new(store: Arc<Store>) -> StoreVault {
        StoreVault { store }
    }

    /// Opens (or creates) the store at `db` and makes a vault over it.
    pub fn open(db: &Path) -> Result<StoreVault, StoreError> {
        Ok(StoreVault::new(Arc::new(Store::open(db)?)))
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

fn vault_err(e: SecretError) -> VaultError {
    VaultError(e.to_string())
}

impl SecretVault for StoreVault {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        self.store.secret_get(key).map_err(vault_err)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), VaultError> {
        self.store.secret_put(key, value).map_err(vault_err)
    }

    fn delete(&self, key: &str) -> Result<bool, VaultError> {
        self.store.secret_delete(key).map_err(vault_err)
    }
}
