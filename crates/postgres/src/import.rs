//! Rows written as they are given (`from_sqlite.rs`: a node's SQLite tables, ids and times
//! kept). All the tables of one `import_rows` go in one transaction: all or nothing.

use tokio_postgres::types::ToSql;
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
                counts.push(insert(&tx, t).await?);
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

async fn insert(tx: &deadpool_postgres::Transaction<'_>, t: &TableRows) -> Result<u64, PgError> {
    if t.rows.is_empty() {
        return Ok(0);
    }
    let names: Vec<&str> = t.columns.iter().map(|(name, _)| *name).collect();
    let slots: Vec<String> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| {
            let n = i + 1;
            match kind {
                ColumnKind::Text => format!("${n}::text"),
                ColumnKind::Int => format!("${n}::bigint"),
                ColumnKind::Real => format!("${n}::float8"),
                ColumnKind::Bool => format!("${n}::boolean"),
                ColumnKind::Bytes => format!("${n}::bytea"),
                ColumnKind::Json => format!("${n}::text::jsonb"),
                ColumnKind::Words => format!("to_tsvector('english', ${n}::text)"),
            }
        })
        .collect();
    let overriding = if t.identity.is_some() { " OVERRIDING SYSTEM VALUE" } else { "" };
    let sql = format!("INSERT INTO {} ({}){overriding} VALUES ({})", t.table, names.join(", "), slots.join(", "));
    let stmt = tx.prepare(&sql).await?;
    let mut written = 0;
    for (i, row) in t.rows.iter().enumerate() {
        if row.len() != t.columns.len() {
            return Err(PgError::Data(format!(
                "{}: row {} has {} values for {} columns",
                t.table,
                i + 1,
                row.len(),
                names.len()
            )));
        }
        let params: Vec<Box<dyn ToSql + Sync + Send>> =
            row.iter().zip(&t.columns).map(|(v, (_, kind))| param(v, *kind)).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
        written += tx.execute(&stmt, &refs).await?;
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

/// `value` with the Rust type PostgreSQL's `kind` takes (a `NULL` of that type too).
fn param(value: &Value, kind: ColumnKind) -> Box<dyn ToSql + Sync + Send> {
    match (value, kind) {
        (Value::Int(n), _) => Box::new(*n),
        (Value::Real(x), _) => Box::new(*x),
        (Value::Bool(b), _) => Box::new(*b),
        (Value::Text(s), _) => Box::new(s.clone()),
        (Value::Bytes(b), _) => Box::new(b.clone()),
        (Value::Null, ColumnKind::Int) => Box::new(None::<i64>),
        (Value::Null, ColumnKind::Real) => Box::new(None::<f64>),
        (Value::Null, ColumnKind::Bool) => Box::new(None::<bool>),
        (Value::Null, ColumnKind::Bytes) => Box::new(None::<Vec<u8>>),
        (Value::Null, ColumnKind::Text | ColumnKind::Json | ColumnKind::Words) => Box::new(None::<String>),
    }
}
