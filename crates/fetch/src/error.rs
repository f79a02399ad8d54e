//! Why a fetch failed, in words a model can act on.

use std::net::SocketAddr;
use std::time::Duration;

use toolgate_guard::net::{Blocked, UrlProblem};

/// Why a fetch failed. `Display` is the message a model reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL itself is refused (scheme, userinfo, local name, blocked IP literal).
    #[error("{0}")]
    Url(#[from] UrlProblem),
    /// A name resolved to an address that is not public (and not in `allow_private`).
    #[error(
        "`{host}` resolves to {addr}, which is {}; only public addresses can be fetched (an administrator can allow it with `[web] allow_private`)",
        .blocked.describe()
    )]
    BlockedAddress {
        /// The host name.
        host: String,
        /// The address it resolved to.
        addr: SocketAddr,
        /// The range.
        blocked: Blocked,
    },
    /// The host is in `deny_domains`, or not in a non-empty `allow_domains`.
    #[error("`{host}` is not allowed by the web domain policy ({why})")]
    Domain {
        /// The host.
        host: String,
        /// Which list.
        why: &'static str,
    },
    /// The name did not resolve.
    #[error("cannot resolve `{host}`: {why}; check the host name")]
    Resolve {
        /// The host.
        host: String,
        /// The resolver's words.
        why: String,
    },
    /// Plain http to a public host where https is required.
    #[error("`{url}` uses plain http; this tool only fetches https URLs (except hosts in `[web] allow_private`)")]
    HttpsRequired {
        /// The URL.
        url: String,
    },
    /// More redirects than allowed.
    #[error("too many redirects (more than {max}); last URL `{last}`")]
    TooManyRedirects {
        /// The limit.
        max: usize,
        /// Where it was going.
        last: String,
    },
    /// A redirect that points back to a URL already visited.
    #[error("redirect loop at `{url}`")]
    RedirectLoop {
        /// The repeated URL.
        url: String,
    },
    /// A redirect without a usable `Location`, or to a refused URL.
    #[error("redirect from `{from}` refused: {why}")]
    Redirect {
        /// The URL that redirected.
        from: String,
        /// What was wrong (the target's problem included).
        why: String,
    },
    /// The deadline passed (connect, headers or a slow body).
    #[error("the request timed out after {}s; try again or give a longer timeout", .after.as_secs_f64())]
    Timeout {
        /// The deadline.
        after: Duration,
    },
    /// The caller cancelled.
    #[error("the request was cancelled")]
    Cancelled,
    /// The decoded body is larger than the cap.
    #[error("the response is larger than {max} bytes (decoded); fetch something smaller")]
    TooLarge {
        /// The cap.
        max: u64,
    },
    /// A content encoding this fetcher does not decode.
    #[error("the server used content encoding `{encoding}`, which is not supported (gzip, deflate, br are)")]
    Encoding {
        /// The encoding.
        encoding: String,
    },
    /// The compressed body is corrupt.
    #[error("the `{encoding}` body is corrupt: {why}")]
    Decode {
        /// The encoding.
        encoding: String,
        /// The decoder's words.
        why: String,
    },
    /// Connecting or talking HTTP failed.
    #[error("request to `{url}` failed: {why}")]
    Http {
        /// The URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// The request itself is invalid (a bad header name or value, a bad method).
    #[error("invalid request: {0}")]
    Request(String),
    /// The fetcher's configuration is invalid.
    #[error("invalid web configuration: {0}")]
    Config(String),
}
