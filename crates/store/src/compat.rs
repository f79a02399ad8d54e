//! Inherent copies of area-trait methods, for code that names the concrete [`Store`] and calls
//! them without importing the traits: the command line (`crates/toolgate/src/cli`, moving to
//! its own crate), `toolgate-wasm`'s `Installer` (it holds a `Store` for its sealed manifests)
//! and the `toolgate` crate's integration tests. Each forwards to its trait; a method goes once
//! its callers import the trait (`use toolgate_store::GrantStore`) or hold the area's trait
//! object.

use crate::{
    CustomToolStore, Grant, GrantStore, MessageRecord, SecretError, SecretStore, SessionFilter, SessionRecord,
    SessionStore, Store, StoreError, StoredCustomTool,
};

impl Store {
    /// See [`GrantStore::grants`].
    pub fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        GrantStore::grants(self)
    }

    /// See [`GrantStore::grant_revoke`].
    pub fn grant_revoke(&self, id: i64) -> Result<bool, StoreError> {
        GrantStore::grant_revoke(self, id)
    }

    /// See [`SessionStore::session`].
    pub fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        SessionStore::session(self, id)
    }

    /// See [`SessionStore::sessions`].
    pub fn sessions(&self, filter: &SessionFilter<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        SessionStore::sessions(self, filter)
    }

    /// See [`SessionStore::session_messages`].
    pub fn session_messages(&self, session: &str, last: usize) -> Result<Vec<MessageRecord>, StoreError> {
        SessionStore::session_messages(self, session, last)
    }

    /// See [`SecretStore::secret_put`].
    pub fn secret_put(&self, name: &str, plaintext: &[u8]) -> Result<(), SecretError> {
        SecretStore::secret_put(self, name, plaintext)
    }

    /// See [`SecretStore::secret_get`].
    pub fn secret_get(&self, name: &str) -> Result<Option<Vec<u8>>, SecretError> {
        SecretStore::secret_get(self, name)
    }

    /// See [`SecretStore::secret_delete`].
    pub fn secret_delete(&self, name: &str) -> Result<bool, SecretError> {
        SecretStore::secret_delete(self, name)
    }

    /// See [`SecretStore::secret_keys`].
    pub fn secret_keys(&self, prefix: &str) -> Result<Vec<String>, SecretError> {
        SecretStore::secret_keys(self, prefix)
    }

    /// See [`CustomToolStore::custom_tools`].
    pub fn custom_tools(&self) -> Result<Vec<StoredCustomTool>, StoreError> {
        CustomToolStore::custom_tools(self)
    }

    /// See [`CustomToolStore::custom_tool_delete`].
    pub fn custom_tool_delete(&self, name: &str) -> Result<bool, StoreError> {
        CustomToolStore::custom_tool_delete(self, name)
    }
}
