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
