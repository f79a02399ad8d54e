//! The crate's one error type.

/// What went wrong driving the browser. The text says what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BrowserError {
    /// Chromium could not be started.
    #[error("cannot start the browser: {0}")]
    Launch(String),
    /// The browser refused or failed a protocol command.
    #[error("the browser failed {method}: {message}")]
    Protocol {
        /// The DevTools method.
        method: String,
        /// The browser's message.
        message: String,
    },
    /// Something took longer than allowed.
    #[error("{what} took longer than {secs} s")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The limit.
        secs: u64,
    },
    /// The browser process ended (crashed, killed, or stopped).
    #[error("the browser is not running any more (it crashed or was stopped); start a new session with action `start`")]
    Closed,
    /// A URL or action toolgate refuses (a scheme, a download, a blocked address).
    #[error("{0}")]
    Refused(String),
    /// A ref from an earlier snapshot whose element is gone.
    #[error(
        "ref `{0}` is stale: the page changed (navigated or removed that element) since the snapshot that showed it; take a new snapshot and use its refs"
    )]
    StaleRef(String),
    /// A ref no snapshot of this tab gave.
    #[error("ref `{0}` is not from a snapshot of this tab; take a snapshot and use one of its `[ref=eN]` values")]
    UnknownRef(String),
    /// A JavaScript dialog is open and must be answered first.
    #[error("a {kind} dialog is open (\"{message}\"); answer it with action `dialog` (`accept`: true or false) first")]
    DialogOpen {
        /// `alert`, `confirm`, `prompt` or `beforeunload`.
        kind: String,
        /// Its text.
        message: String,
    },
    /// Bad input that the schema could not catch.
    #[error("{0}")]
    Invalid(String),
}

impl BrowserError {
    pub(crate) fn protocol(method: &str, message: impl Into<String>) -> Self {
        BrowserError::Protocol { method: method.to_owned(), message: message.into() }
    }
}
