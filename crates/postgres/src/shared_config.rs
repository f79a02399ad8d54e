//! The configuration every node shares (`toolgate::shared_config`): one row holding the TOML
//! text of the shared sections, who stored it and when (the database's clock, so nodes with
//! skewed clocks agree). Its trigger raises the `config` revision and notifies
//! `toolgate_revisions`, so nodes hear of a change as they hear of a grant (`revisions.rs`), and
//! one that missed the notification finds the revision moved when it reads again.

use toolgate_store::StoreError;

use crate::PgStore;

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

    /// Stores `text` as the shared configuration (the caller has checked it), raising the
    /// `config` revision; the new revision.
    pub fn shared_config_put(&self, text: &str, changed_by: &str) -> Result<i64, StoreError> {
        let (text, changed_by) = (text.to_owned(), changed_by.to_owned());
        self.run_changing("storing the shared configuration", |mut c| async move {
            let tx = c.transaction().await?;
            tx.execute(
                "INSERT INTO shared_config (id, text, changed_by, changed_ms)
                 VALUES (1, $1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)
                 ON CONFLICT (id) DO UPDATE SET text = $1, changed_by = $2, changed_ms = EXCLUDED.changed_ms",
                &[&text, &changed_by],
            )
            .await?;
            let revision: i64 =
                tx.query_one("SELECT value FROM revisions WHERE name = 'config'", &[]).await?.try_get(0)?;
            tx.commit().await?;
            Ok(revision)
        })
    }

    /// The `config` revision: from memory while the `LISTEN` connection hears every change,
    /// else from the database (cheap enough to ask often).
    pub fn config_revision(&self) -> Result<i64, StoreError> {
        self.revision("config")
    }
}
