//! What can fail between a trait method and PostgreSQL, turned into a `StoreError`.

use toolgate_store::StoreError;

/// Why a PostgreSQL call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgError {
    /// No connection could be had from the pool (the database is down or unreachable, or every
    /// connection stayed busy past the wait timeout).
    #[error("cannot get a connection to PostgreSQL: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// PostgreSQL refused or failed the statement.
    #[error("{0}")]
    Db(#[from] tokio_postgres::Error),
    /// A stored value this build cannot read (written by a newer build, or damaged).
    #[error("{0}")]
    Data(String),
    /// The store's thread is gone (it panicked, or its runtime could not run).
    #[error("the PostgreSQL store's thread has stopped; restart toolgate")]
    Stopped,
}

impl PgError {
    /// The `StoreError` a trait method returns.
    pub(crate) fn doing(self, doing: &'static str) -> StoreError {
        StoreError::Backend { doing, source: Box::new(self) }
    }

    /// Whether the failure is the connection's, not the statement's (the database is down,
    /// restarting, out of connections, or the connection broke; a serialization failure): the
    /// same work may succeed when tried again.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            PgError::Pool(_) => true,
            PgError::Data(_) | PgError::Stopped => false,
            PgError::Db(e) if e.is_closed() => true,
            PgError::Db(e) => match e.code() {
                // No SQLSTATE: an I/O error or a closed connection, not a refusal.
                None => true,
                Some(code) => {
                    let code = code.code();
                    // 08: connection exception; 57P01-57P03: the server is shutting down or
                    // starting; 53300: too many connections; 40001/40P01: serialization
                    // failure, deadlock.
                    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
                }
            },
        }
    }

    /// Whether PostgreSQL refused a row for a unique key it would duplicate.
    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, PgError::Db(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION))
    }
}

/// An `INSERT`'s outcome as "added": `false` when the row's key exists already (the traits'
/// "adds unless it exists"), any other failure as it is.
pub(crate) fn added(inserted: Result<u64, tokio_postgres::Error>) -> Result<bool, PgError> {
    match inserted.map_err(PgError::from) {
        Ok(_) => Ok(true),
        Err(e) if e.is_unique_violation() => Ok(false),
        Err(e) => Err(e),
    }
}
