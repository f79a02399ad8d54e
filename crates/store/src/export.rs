//! Rows read as they are stored, for `toolgate admin migrate` (the `toolgate` crate), which
//! copies a node's tables into PostgreSQL row for row: ids, sequence numbers and times kept,
//! where the store traits would give new ones. Each value comes back as SQLite holds it (SQLite
//! does not enforce a column's type), so the caller checks what it copies.

use rusqlite::types::ValueRef;

use crate::error::Context;
use crate::{Store, StoreError};

/// One stored value, as SQLite holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text, its bytes as stored (SQLite does not check that they are UTF-8).
    Text(Vec<u8>),
    /// A blob.
    Bytes(Vec<u8>),
}

impl Store {
    /// Every row `select` returns (a `SELECT` over this database's tables), each value as
    /// stored. Reads only.
    pub fn export_rows(&self, select: &str) -> Result<Vec<Vec<Cell>>, StoreError> {
        const DOING: &str = "reading rows to move";
        self.with(|conn| {
            let mut stmt = conn.prepare(select).doing(DOING)?;
            let width = stmt.column_count();
            let rows = stmt
                .query_map([], |r| {
                    (0..width)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                ValueRef::Null => Cell::Null,
                                ValueRef::Integer(n) => Cell::Int(n),
                                ValueRef::Real(x) => Cell::Real(x),
                                ValueRef::Text(t) => Cell::Text(t.to_vec()),
                                ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<Cell>>>()
                })
                .doing(DOING)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().doing(DOING)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_as_stored_even_where_the_column_says_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        store
            .with(|c| {
                c.execute_batch(
                    "INSERT INTO team_messages (id, team, sender, recipient, content, ts_ms)
                     VALUES (7, 't', 'a', NULL, CAST(x'ff00' AS TEXT), 'soon')",
                )
                .doing("seeding")
            })
            .unwrap();
        let rows = store.export_rows("SELECT id, recipient, content, ts_ms FROM team_messages").unwrap();
        assert_eq!(
            rows,
            vec![vec![Cell::Int(7), Cell::Null, Cell::Text(vec![0xff, 0x00]), Cell::Text(b"soon".to_vec())]]
        );
        assert!(store.export_rows("SELECT nothing FROM nowhere").is_err());
    }
}
