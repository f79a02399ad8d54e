use std::path::PathBuf;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database file could not be opened or created.
    #[error("cannot open the state database {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite or the file system said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A query failed.
    #[error("state database error while {doing}: {source}")]
    Query {
        /// What was being done.
        doing: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A query failed in another backend (PostgreSQL, `toolgate-postgres`), or the database
    /// could not be reached.
    #[error("state database error while {doing}: {source}")]
    Backend {
        /// What was being done.
        doing: &'static str,
        /// What the database or its client said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub(crate) trait Context<T> {
    fn doing(self, what: &'static str) -> Result<T, StoreError>;
}

impl<T> Context<T> for rusqlite::Result<T> {
    fn doing(self, doing: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Query { doing, source })
    }
}
