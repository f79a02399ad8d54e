//! [`CustomToolStore`] on PostgreSQL: the custom tools added with `toolgate tools add`, one
//! row per tool, the definition as JSON text, as SQLite's (`toolgate-store`'s
//! `custom_tools.rs`); the `toolgate` crate validates them. A node loads them when it builds
//! its gate, and again when the workspace's stamp file is touched (`docs/gateway.md`).

use tokio_postgres::Row;
use toolgate_store::{CustomToolStore, StoreError, StoredCustomTool};

use crate::PgStore;
use crate::error::PgError;

fn tool(r: &Row) -> Result<StoredCustomTool, PgError> {
    Ok(StoredCustomTool { name: r.try_get(0)?, definition: r.try_get(1)?, updated_ms: r.try_get(2)? })
}

impl CustomToolStore for PgStore {
    fn custom_tool_put(&self, name: &str, definition: &str) -> Result<(), StoreError> {
        let (name, definition) = (name.to_owned(), definition.to_owned());
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        self.run("storing a custom tool", move |c| async move {
            c.execute(
                "INSERT INTO custom_tools (name, definition, updated_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, updated_ms = excluded.updated_ms",
                &[&name, &definition, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    fn custom_tool_get(&self, name: &str) -> Result<Option<StoredCustomTool>, StoreError> {
        let name = name.to_owned();
        self.run("reading a custom tool", move |c| async move {
            let row =
                c.query_opt("SELECT name, definition, updated_ms FROM custom_tools WHERE name = $1", &[&name]).await?;
            row.as_ref().map(tool).transpose()
        })
    }

    fn custom_tools(&self) -> Result<Vec<StoredCustomTool>, StoreError> {
        self.run("listing custom tools", move |c| async move {
            // Bytewise, as SQLite's, whatever the database's locale.
            let rows = c
                .query("SELECT name, definition, updated_ms FROM custom_tools ORDER BY name COLLATE \"C\"", &[])
                .await?;
            rows.iter().map(tool).collect()
        })
    }

    fn custom_tool_delete(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run("removing a custom tool", move |c| async move {
            Ok(c.execute("DELETE FROM custom_tools WHERE name = $1", &[&name]).await? > 0)
        })
    }
}
