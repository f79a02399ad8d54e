//! The configuration every node shares (`toolgate::shared_config`): one row holding the TOML
//! text of the shared sections, who stored it and when (the database's clock, so nodes with
//! skewed clocks agree). Its trigger raises the `config` revision and notifies
//! `toolgate_revisions`, so nodes hear of a change as they hear of a grant (`revisions.rs`), and
//! one that missed the notification finds the revision moved when it reads again.

use toolgate_store::StoreError;

use crate::PgStore;
use crate::error::PgError;

/// The shared configuration as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConfig {
    /// TOML: the shared sections only.
    pub text: String,
    /// Who stored it (a gateway admin's name, or the operator's command).
    pub changed_by: String,
    /// When, in milliseconds since the epoch (the database's clock).
    pub changed_ms: i64,
}

impl PgStore {
    /// The `config` revision (from memory while in step) and the stored configuration, read
    /// together: the revision is the one that text was stored under. `None`: nothing stored.
    pub fn shared_config(&self) -> Result<(i64, Option<StoredConfig>), StoreError> {
        self.run("reading the shared configuration", |c| async move {
            let row = c
                .query_one(
                    "SELECT r.value, c.text, c.changed_by, c.changed_ms
                     FROM revisions r LEFT JOIN shared_config c ON c.id = 1 WHERE r.name = 'config'",
                    &[],
                )
                .await?;
            let text: Option<String> = row.try_get(1)?;
            let stored = match text {
                Some(text) => Some(StoredConfig { text, changed_by: row.try_get(2)?, changed_ms: row.try_get(3)? }),
                None => None,
            };
            Ok((row.try_get(0)?, stored))
        })
    }

    /// Stores `text` as the shared configuration whatever is stored now (the caller has checked
    /// it; `toolgate admin config push` replaces it whole by design), raising the `config`
    /// revision; the new revision. A change made on top of what is stored uses
    /// [`PgStore::shared_config_put_at`].
    pub fn shared_config_put(&self, text: &str, changed_by: &str) -> Result<i64, StoreError> {
        let (text, changed_by) = (text.to_owned(), changed_by.to_owned());
        self.run_changing("storing the shared configuration", |mut c| async move {
            let tx = c.transaction().await?;
            let revision = write(&tx, &text, &changed_by).await?;
            tx.commit().await?;
            Ok(revision)
        })
    }

    /// Stores `text` only if the shared configuration is still at `revision` (the one
    /// [`PgStore::shared_config`] read it at): the new revision, or `None` when another change
    /// came first (read it again and redo the change over it). The `config` revisions row is
    /// locked before comparing, so two writers from the same revision cannot both succeed: the
    /// second waits for the first to commit and then sees the revision moved.
    pub fn shared_config_put_at(&self, text: &str, changed_by: &str, revision: i64) -> Result<Option<i64>, StoreError> {
        let (text, changed_by) = (text.to_owned(), changed_by.to_owned());
        self.run_changing("storing the shared configuration", move |mut c| async move {
            let tx = c.transaction().await?;
            let now: i64 =
                tx.query_one("SELECT value FROM revisions WHERE name = 'config' FOR UPDATE", &[]).await?.try_get(0)?;
            if now != revision {
                return Ok(None);
            }
            let revision = write(&tx, &text, &changed_by).await?;
            tx.commit().await?;
            Ok(Some(revision))
        })
    }

    /// Removes the stored configuration (each node goes back to its own files' sections),
    /// raising the `config` revision when there was one: the revision after, and what was
    /// removed (`None`: nothing was stored, nothing changed).
    pub fn shared_config_clear(&self) -> Result<(i64, Option<StoredConfig>), StoreError> {
        self.run_changing("clearing the shared configuration", |mut c| async move {
            let tx = c.transaction().await?;
            let removed = tx
                .query_opt("DELETE FROM shared_config WHERE id = 1 RETURNING text, changed_by, changed_ms", &[])
                .await?
                .map(|row| -> Result<StoredConfig, PgError> {
                    Ok(StoredConfig { text: row.try_get(0)?, changed_by: row.try_get(1)?, changed_ms: row.try_get(2)? })
                })
                .transpose()?;
            let revision: i64 =
                tx.query_one("SELECT value FROM revisions WHERE name = 'config'", &[]).await?.try_get(0)?;
            tx.commit().await?;
            Ok((revision, removed))
        })
    }

    /// The `config` revision: from memory while the `LISTEN` connection hears every change,
    /// else from the database (cheap enough to ask often).
    pub fn config_revision(&self) -> Result<i64, StoreError> {
        self.revision("config")
    }
}

/// Writes `text` as the stored configuration in `tx`: the `config` revision its trigger raised.
async fn write(tx: &deadpool_postgres::Transaction<'_>, text: &str, changed_by: &str) -> Result<i64, PgError> {
    tx.execute(
        "INSERT INTO shared_config (id, text, changed_by, changed_ms)
         VALUES (1, $1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)
         ON CONFLICT (id) DO UPDATE SET text = $1, changed_by = $2, changed_ms = EXCLUDED.changed_ms",
        &[&text, &changed_by],
    )
    .await?;
    Ok(tx.query_one("SELECT value FROM revisions WHERE name = 'config'", &[]).await?.try_get(0)?)
}
