//! [`OutboxStore`] on PostgreSQL: messages the `message` tool could not deliver, kept with the
//! last error, as SQLite's (`toolgate-store`'s `outbox.rs`), so a user sees theirs whichever
//! node sent them. Only text that passed the leak scan is ever stored here.

use tokio_postgres::Row;
use toolgate_store::{OutboxEntry, OutboxStore, StoreError};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "id, for_user, channel, address, subject, content, attempts, last_error, created_ms";

fn entry(r: &Row) -> Result<OutboxEntry, PgError> {
    let attempts: i64 = r.try_get(6)?;
    Ok(OutboxEntry {
        id: r.try_get(0)?,
        user: r.try_get(1)?,
        channel: r.try_get(2)?,
        address: r.try_get(3)?,
        subject: r.try_get(4)?,
        content: r.try_get(5)?,
        attempts: u32::try_from(attempts)
            .map_err(|_| PgError::Data(format!("an outbox entry's attempts ({attempts}) are out of range")))?,
        last_error: r.try_get(7)?,
        created_ms: r.try_get(8)?,
    })
}

impl OutboxStore for PgStore {
    fn outbox_put(&self, e: &OutboxEntry) -> Result<(), StoreError> {
        let e = e.clone();
        self.run("keeping a message in the outbox", move |c| async move {
            let sql = format!(
                "INSERT INTO message_outbox ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (id) DO UPDATE SET for_user = excluded.for_user, channel = excluded.channel,
                     address = excluded.address, subject = excluded.subject, content = excluded.content,
                     attempts = excluded.attempts, last_error = excluded.last_error, created_ms = excluded.created_ms"
            );
            c.execute(
                sql.as_str(),
                &[
                    &e.id,
                    &e.user,
                    &e.channel,
                    &e.address,
                    &e.subject,
                    &e.content,
                    &i64::from(e.attempts),
                    &e.last_error,
                    &e.created_ms,
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn outbox_list(&self, user: Option<&str>, limit: usize) -> Result<Vec<OutboxEntry>, StoreError> {
        let user = user.map(str::to_owned);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run("listing the outbox", move |c| async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM message_outbox WHERE $1::text IS NULL OR for_user = $1
                 ORDER BY created_ms DESC, id COLLATE \"C\" DESC LIMIT $2"
            );
            c.query(sql.as_str(), &[&user, &limit]).await?.iter().map(entry).collect()
        })
    }

    fn outbox_len(&self) -> Result<u64, StoreError> {
        self.run("counting the outbox", move |c| async move {
            let n: i64 = c.query_one("SELECT COUNT(*) FROM message_outbox", &[]).await?.try_get(0)?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn outbox_delete(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run("removing a message from the outbox", move |c| async move {
            Ok(c.execute("DELETE FROM message_outbox WHERE id = $1", &[&id]).await? > 0)
        })
    }
}
