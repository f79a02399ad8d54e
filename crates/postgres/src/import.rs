//! Rows written as they are given (`from_sqlite.rs`: a node's SQLite tables, ids and times
//! kept). All the tables of one `import_rows` go in one transaction: all or nothing. Each table
//! is sent with one binary `COPY ... FROM STDIN` (as the audit log's writer does), its values
//! borrowed from the rows, not copied again.

use std::error::Error;

use bytes::{BufMut, BytesMut};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use toolgate_store::StoreError;

use crate::PgStore;
use crate::error::PgError;

/// What a column holds in PostgreSQL, so a value is sent with the right type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    /// `TEXT`.
    Text,
    /// `BIGINT`.
    Int,
    /// `DOUBLE PRECISION`.
    Real,
    /// `BOOLEAN`.
    Bool,
    /// `BYTEA`.
    Bytes,
    /// `JSONB`, given as JSON text.
    Json,
    /// A `TSVECTOR` of the given words (English stems, as the memory index makes them).
    Words,
}

impl ColumnKind {
    /// The type the `COPY` sends: a [`ColumnKind::Words`] column goes as text into a staging
    /// table, whose `INSERT ... SELECT` makes the `tsvector` (its binary form is the server's).
    fn copied_as(self) -> Type {
        match self {
            ColumnKind::Text | ColumnKind::Words => Type::TEXT,
            ColumnKind::Int => Type::INT8,
            ColumnKind::Real => Type::FLOAT8,
            ColumnKind::Bool => Type::BOOL,
            ColumnKind::Bytes => Type::BYTEA,
            ColumnKind::Json => Type::JSONB,
        }
    }
}

/// A value to write (`Null` for any kind).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// `NULL`.
    Null,
    /// For [`ColumnKind::Int`].
    Int(i64),
    /// For [`ColumnKind::Real`].
    Real(f64),
    /// For [`ColumnKind::Bool`].
    Bool(bool),
    /// For [`ColumnKind::Text`], [`ColumnKind::Json`] and [`ColumnKind::Words`].
    Text(String),
    /// For [`ColumnKind::Bytes`].
    Bytes(Vec<u8>),
}

impl ToSql for Value {
    /// The value in PostgreSQL's binary form for `ty`; a value of another kind than its column
    /// is an error (never bytes the column would misread).
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) if *ty == Type::INT8 => n.to_sql(ty, out),
            Value::Real(x) if *ty == Type::FLOAT8 => x.to_sql(ty, out),
            Value::Bool(b) if *ty == Type::BOOL => b.to_sql(ty, out),
            Value::Text(s) if *ty == Type::TEXT => s.as_str().to_sql(ty, out),
            Value::Text(s) if *ty == Type::JSONB => {
                // `jsonb`'s binary form: a version byte, then the JSON text (checked when read).
                out.put_u8(1);
                out.put_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            Value::Bytes(b) if *ty == Type::BYTEA => b.as_slice().to_sql(ty, out),
            _ => {
                let kind = match self {
                    Value::Int(_) => "an integer",
                    Value::Real(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    Value::Text(_) => "text",
                    Value::Bytes(_) | Value::Null => "bytes",
                };
                Err(format!("{kind} cannot go into a {ty} column").into())
            }
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::TEXT, Type::INT8, Type::FLOAT8, Type::BOOL, Type::BYTEA, Type::JSONB].contains(ty)
    }

    to_sql_checked!();
}

/// The rows to write into one table.
#[derive(Debug, Clone)]
pub(crate) struct TableRows {
    /// The table.
    pub(crate) table: &'static str,
    /// Its columns written, in the rows' order.
    pub(crate) columns: Vec<(&'static str, ColumnKind)>,
    /// The identity column given explicitly (its sequence then continues after the largest).
    pub(crate) identity: Option<&'static str>,
    /// The rows.
    pub(crate) rows: Vec<Vec<Value>>,
}

impl PgStore {
    /// Writes every table's rows in one transaction, in the order given (a row that refers to
    /// another comes after it); returns how many rows each table got.
    pub(crate) fn import_rows(&self, tables: Vec<TableRows>) -> Result<Vec<u64>, StoreError> {
        self.run_changing("moving rows into PostgreSQL", move |mut client| async move {
            let tx = client.transaction().await?;
            let mut counts = Vec::with_capacity(tables.len());
            for t in &tables {
                counts.push(copy_in(&tx, t).await?);
            }
            tx.commit().await?;
            Ok(counts)
        })
    }

    /// How many rows each of `tables` holds (for refusing a database already in use).
    pub fn count_rows(&self, tables: &[&'static str]) -> Result<Vec<i64>, StoreError> {
        let tables = tables.to_vec();
        self.run("counting rows", move |client| async move {
            let mut counts = Vec::with_capacity(tables.len());
            for t in tables {
                // Names come from the caller's code, never from input.
                counts.push(client.query_one(&format!("SELECT count(*) FROM {t}"), &[]).await?.try_get(0)?);
            }
            Ok(counts)
        })
    }
}

/// Writes `t`'s rows with one binary `COPY` (a `COPY` into an identity column keeps the values
/// given, as `OVERRIDING SYSTEM VALUE` does). A table with a [`ColumnKind::Words`] column is
/// copied into a temporary table dropped at commit, then inserted from it with its
/// `tsvector`s made by the server.
async fn copy_in(tx: &deadpool_postgres::Transaction<'_>, t: &TableRows) -> Result<u64, PgError> {
    if t.rows.is_empty() {
        return Ok(0);
    }
    if let Some((i, row)) = t.rows.iter().enumerate().find(|(_, row)| row.len() != t.columns.len()) {
        return Err(PgError::Data(format!(
            "{}: row {} has {} values for {} columns",
            t.table,
            i + 1,
            row.len(),
            t.columns.len()
        )));
    }
    // Names come from the caller's code, never from input.
    let names = t.columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ");
    let staged = t.columns.iter().any(|(_, kind)| *kind == ColumnKind::Words);
    let into = if staged {
        let stage = format!("moving_{}", t.table);
        let columns: Vec<String> =
            t.columns.iter().map(|(name, kind)| format!("{name} {}", kind.copied_as().name())).collect();
        tx.batch_execute(&format!("CREATE TEMPORARY TABLE {stage} ({}) ON COMMIT DROP", columns.join(", "))).await?;
        stage
    } else {
        t.table.to_owned()
    };
    let types: Vec<Type> = t.columns.iter().map(|(_, kind)| kind.copied_as()).collect();
    let sink = tx.copy_in(&format!("COPY {into} ({names}) FROM STDIN BINARY")).await?;
    let copy = BinaryCopyInWriter::new(sink, &types);
    tokio::pin!(copy);
    let mut values: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(t.columns.len());
    for row in &t.rows {
        values.clear();
        values.extend(row.iter().map(|v| v as &(dyn ToSql + Sync)));
        copy.as_mut().write(&values).await?;
    }
    let mut written = copy.finish().await?;
    if staged {
        let select: Vec<String> = t
            .columns
            .iter()
            .map(|(name, kind)| match kind {
                ColumnKind::Words => format!("to_tsvector('english', {name})"),
                _ => (*name).to_owned(),
            })
            .collect();
        let overriding = if t.identity.is_some() { " OVERRIDING SYSTEM VALUE" } else { "" };
        written = tx
            .execute(
                &format!("INSERT INTO {} ({names}){overriding} SELECT {} FROM {into}", t.table, select.join(", ")),
                &[],
            )
            .await?;
    }
    if let Some(id) = t.identity {
        tx.execute(
            &format!(
                "SELECT setval(pg_get_serial_sequence('{table}', '{id}'), (SELECT max({id}) FROM {table}))",
                table = t.table
            ),
            &[],
        )
        .await?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_goes_only_into_a_column_of_its_kind() {
        let mut out = BytesMut::new();
        assert!(matches!(Value::Int(7).to_sql(&Type::INT8, &mut out), Ok(IsNull::No)));
        assert_eq!(&out[..], &7i64.to_be_bytes());
        out.clear();
        assert!(matches!(Value::Text("[1]".into()).to_sql(&Type::JSONB, &mut out), Ok(IsNull::No)));
        assert_eq!(&out[..], b"\x01[1]", "jsonb's version byte, then the text");
        assert!(matches!(Value::Null.to_sql(&Type::BYTEA, &mut out), Ok(IsNull::Yes)));
        let wrong = Value::Int(7).to_sql(&Type::TEXT, &mut BytesMut::new()).err().unwrap();
        assert_eq!(wrong.to_string(), "an integer cannot go into a text column");
        assert!(Value::Text("x".into()).to_sql_checked(&Type::TS_VECTOR, &mut BytesMut::new()).is_err());
    }
}
