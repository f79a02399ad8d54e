//! Custom tool definitions added with `toolgate tools add --file def.json` (or the HTTP API):
//! one row per tool, the definition as JSON text. The `toolgate` crate validates definitions
//! before it stores them and again when it loads them; this module only keeps them: the
//! [`CustomToolStore`] trait and its SQLite implementation on [`Store`] (table `custom_tools`,
//! migration 6 in `db.rs`).

use std::fmt::Debug;

use rusqlite::OptionalExtension;

use crate::error::Context;
use crate::{Store, StoreError};

/// A stored custom tool definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCustomTool {
    /// The tool's name.
    pub name: String,
    /// The definition, as JSON text.
    pub definition: String,
    /// When it was last written, in milliseconds since the Unix epoch.
    pub updated_ms: i64,
}

/// Stored custom tool definitions, by name.
pub trait CustomToolStore: Send + Sync + Debug {
    /// Adds or replaces the definition (JSON text) of the custom tool `name`.
    fn custom_tool_put(&self, name: &str, definition: &str) -> Result<(), StoreError>;

    /// The definition of the custom tool `name`, if stored.
    fn custom_tool_get(&self, name: &str) -> Result<Option<StoredCustomTool>, StoreError>;

    /// Every stored custom tool, by name.
    fn custom_tools(&self) -> Result<Vec<StoredCustomTool>, StoreError>;

    /// Removes the custom tool `name`; returns whether it was stored.
    fn custom_tool_delete(&self, name: &str) -> Result<bool, StoreError>;
}

impl CustomToolStore for Store {
    fn custom_tool_put(&self, name: &str, definition: &str) -> Result<(), StoreError> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        self.with(|conn| {
            conn.execute(
                "INSERT INTO custom_tools (name, definition, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, updated_ms = excluded.updated_ms",
                rusqlite::params![name, definition, now],
            )
            .map(drop)
            .doing("storing a custom tool")
        })
    }

    fn custom_tool_get(&self, name: &str) -> Result<Option<StoredCustomTool>, StoreError> {
        self.with(|conn| {
            conn.query_row("SELECT name, definition, updated_ms FROM custom_tools WHERE name = ?1", [name], |r| {
                Ok(StoredCustomTool { name: r.get(0)?, definition: r.get(1)?, updated_ms: r.get(2)? })
            })
            .optional()
            .doing("reading a custom tool")
        })
    }

    fn custom_tools(&self) -> Result<Vec<StoredCustomTool>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT name, definition, updated_ms FROM custom_tools ORDER BY name")
                .doing("listing custom tools")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(StoredCustomTool { name: r.get(0)?, definition: r.get(1)?, updated_ms: r.get(2)? })
                })
                .doing("listing custom tools")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing custom tools")
        })
    }

    fn custom_tool_delete(&self, name: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM custom_tools WHERE name = ?1", [name])
                .map(|n| n > 0)
                .doing("removing a custom tool")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_list_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        store.custom_tool_put("b", "{\"v\":1}").unwrap();
        store.custom_tool_put("a", "{}").unwrap();
        store.custom_tool_put("b", "{\"v\":2}").unwrap();
        let all = store.custom_tools().unwrap();
        assert_eq!(all.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(store.custom_tool_get("b").unwrap().unwrap().definition, "{\"v\":2}");
        assert!(store.custom_tool_delete("a").unwrap());
        assert!(!store.custom_tool_delete("a").unwrap());
        assert!(store.custom_tool_get("a").unwrap().is_none());
    }
}
