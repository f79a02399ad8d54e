//! [`SecretStore`] on PostgreSQL: secrets every node can read (upstream sign-ins, the key ring
//! that seals `requestState`s), sealed as SQLite's are ([`SecretCipher`]) under the key every
//! node is given (`TOOLGATE_SECRET_KEY`), never a key kept in the database beside them. A store
//! without a key refuses secrets and says what to set.

use toolgate_store::{SecretError, SecretStore};

use crate::PgStore;
use crate::error::PgError;

impl SecretStore for PgStore {
    fn secret_put(&self, name: &str, plaintext: &[u8]) -> Result<(), SecretError> {
        let blob = self.cipher()?.seal(name, plaintext)?;
        let (name, now_ms) = (name.to_owned(), now_ms());
        self.run("storing a secret", move |c| async move {
            c.execute(
                "INSERT INTO secrets (name, value, updated_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
                &[&name, &blob, &now_ms],
            )
            .await?;
            Ok(())
        })
        .map_err(SecretError::Store)
    }

    fn secret_get(&self, name: &str) -> Result<Option<Vec<u8>>, SecretError> {
        let cipher = self.cipher()?;
        let key = name.to_owned();
        let blob = self
            .run("reading a secret", move |c| async move {
                let row = c.query_opt("SELECT value FROM secrets WHERE name = $1", &[&key]).await?;
                row.map(|r| r.try_get::<_, Vec<u8>>(0)).transpose().map_err(PgError::from)
            })
            .map_err(SecretError::Store)?;
        blob.map(|blob| cipher.open(name, &blob)).transpose()
    }

    fn secret_delete(&self, name: &str) -> Result<bool, SecretError> {
        let name = name.to_owned();
        self.run("deleting a secret", move |c| async move {
            Ok(c.execute("DELETE FROM secrets WHERE name = $1", &[&name]).await? > 0)
        })
        .map_err(SecretError::Store)
    }

    fn secret_keys(&self, prefix: &str) -> Result<Vec<String>, SecretError> {
        let prefix = prefix.to_owned();
        self.run("listing secrets", move |c| async move {
            // starts_with, not LIKE: names may contain `%` or `_`.
            let rows = c
                .query("SELECT name FROM secrets WHERE starts_with(name, $1) ORDER BY name COLLATE \"C\"", &[&prefix])
                .await?;
            rows.iter().map(|r| r.try_get(0).map_err(PgError::from)).collect()
        })
        .map_err(SecretError::Store)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
