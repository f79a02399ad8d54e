//! The message outbox: messages the `message` tool could not deliver after its retries, kept
//! with the last error so nothing a caller sent is silently lost. The [`OutboxStore`] trait and
//! its SQLite implementation on [`Store`] (table `message_outbox`, its migration in `db.rs`).
//! Only text that passed the leak scan is ever stored here.

use std::fmt::Debug;

use crate::error::Context;
use crate::{Store, StoreError};

/// One undelivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// Its id (a UUID).
    pub id: String,
    /// Who sent it (the caller's user).
    pub user: String,
    /// The configured channel's name (`[automation.channels.NAME]`).
    pub channel: String,
    /// The address within the channel (a chat id, an email address, ...).
    pub address: String,
    /// The subject line, for channels that have one (email).
    pub subject: Option<String>,
    /// The text.
    pub content: String,
    /// How many sends were tried.
    pub attempts: u32,
    /// Why the last try failed.
    pub last_error: String,
    /// When it was put in the outbox, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// Undelivered messages, newest first.
pub trait OutboxStore: Send + Sync + Debug {
    /// Keeps `entry` (replacing one with the same id).
    fn outbox_put(&self, entry: &OutboxEntry) -> Result<(), StoreError>;

    /// The newest `limit` entries of `user` (every user's when `None`), newest first.
    fn outbox_list(&self, user: Option<&str>, limit: usize) -> Result<Vec<OutboxEntry>, StoreError>;

    /// How many messages wait for a retry, for every user (`/metrics`).
    fn outbox_len(&self) -> Result<u64, StoreError>;

    /// Removes the entry `id`; returns whether it was there.
    fn outbox_delete(&self, id: &str) -> Result<bool, StoreError>;
}

const COLUMNS: &str = "id, user, channel, address, subject, content, attempts, last_error, created_ms";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxEntry> {
    Ok(OutboxEntry {
        id: r.get(0)?,
        user: r.get(1)?,
        channel: r.get(2)?,
        address: r.get(3)?,
        subject: r.get(4)?,
        content: r.get(5)?,
        attempts: r.get(6)?,
        last_error: r.get(7)?,
        created_ms: r.get(8)?,
    })
}

impl OutboxStore for Store {
    fn outbox_put(&self, e: &OutboxEntry) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                &format!(
                    "INSERT OR REPLACE INTO message_outbox ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ),
                rusqlite::params![
                    e.id,
                    e.user,
                    e.channel,
                    e.address,
                    e.subject,
                    e.content,
                    e.attempts,
                    e.last_error,
                    e.created_ms
                ],
            )
            .map(drop)
            .doing("keeping a message in the outbox")
        })
    }

    fn outbox_list(&self, user: Option<&str>, limit: usize) -> Result<Vec<OutboxEntry>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM message_outbox WHERE ?1 IS NULL OR user = ?1
                     ORDER BY created_ms DESC, id DESC LIMIT ?2"
                ))
                .doing("listing the outbox")?;
            let rows = stmt.query_map(rusqlite::params![user, limit], row).doing("listing the outbox")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing the outbox")
        })
    }

    fn outbox_len(&self) -> Result<u64, StoreError> {
        self.with(|conn| {
            conn.query_row("SELECT COUNT(*) FROM message_outbox", [], |r| r.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
                .doing("counting the outbox")
        })
    }

    fn outbox_delete(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM message_outbox WHERE id = ?1", [id])
                .map(|n| n > 0)
                .doing("removing a message from the outbox")
        })
    }
}
