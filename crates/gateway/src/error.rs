//! [`GatewayError`]: what administration can refuse.

use toolgate_store::StoreError;

/// Why an administrative action failed; the message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A name that cannot be a principal's.
    #[error("`{name}` cannot be a name: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A name that is taken.
    #[error("`{0}` exists already (names are shared by users, groups and agents); choose another")]
    Taken(String),
    /// A principal that does not exist, or is not of the kind needed.
    #[error("there is no {kind} `{name}`; `toolgate admin {kind} list` shows them")]
    Missing {
        /// `user`, `group` or `agent`.
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// A key id that does not exist.
    #[error("there is no key `{0}`; `toolgate admin key list` shows them")]
    NoKey(String),
    /// A grant id that does not exist.
    #[error("there is no grant {0}; `toolgate admin grant list` shows them")]
    NoGrant(i64),
    /// An access request id that does not exist.
    #[error("there is no access request {0}; `toolgate admin access list` shows them")]
    NoRequest(i64),
    /// Someone who may not decide an access request tried.
    #[error("{0}")]
    NotApprover(String),
    /// An access request decided already.
    #[error("{0}")]
    Decided(String),
    /// A scope that cannot be used.
    #[error("bad key scope: {0}")]
    BadScope(String),
    /// A grant that cannot be made as written (its words, patterns, rule or expiry).
    #[error("bad grant: {0}")]
    BadGrant(String),
    /// The OS's random generator failed.
    #[error("cannot make a random key: {0}")]
    Random(String),
    /// An OIDC provider that cannot be used, or a sign-in that cannot proceed.
    #[error("OIDC: {0}")]
    Oidc(String),
    /// A password that cannot be set.
    #[error("bad password: {0}")]
    BadPassword(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
