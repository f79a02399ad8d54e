//! The one SSRF-safe HTTP fetcher of toolgate. Every tool that touches the network goes
//! through it: the web tools (`toolgate-tools`' `web` group) now, the WASM runtime's http
//! capability and skill installation later.
//!
//! What it guarantees, per request and per redirect hop:
//!
//! - one URL parser (WHATWG, via `toolgate_guard::net`): http(s) only, no userinfo, local host
//!   names (`localhost`, single labels, `.local`, ...) refused, IP literals in every spelling
//!   classified;
//! - the name is resolved ONCE (system resolver, `/etc/hosts` honoured), EVERY address is
//!   vetted (a name answering one public and one private address is refused), and the
//!   connection goes only to the vetted addresses (a pinning resolver that never resolves);
//! - the environment's proxy variables are ignored unless a proxy is configured;
//! - redirects are followed by hand (at most `max_redirects`), each hop re-parsed,
//!   re-resolved and re-vetted; https to http refused; credentials dropped on a cross-origin
//!   hop; loops detected;
//! - one deadline covers connect, headers and a slow body; a [`CancellationToken`] drops the
//!   connection;
//! - gzip, deflate and brotli are inflated while streaming, with the cap applied to the
//!   DECODED bytes;
//! - [`Response::text`] decodes any charset to UTF-8 (header, `<meta>`, detection).
//!
//! `allow_private` entries (`IP:port`, CIDR) are the only way to a non-public address; they
//! match the vetted address and port, never a name.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolgate_fetch::FetchError> {
//! use toolgate_fetch::{FetchPolicy, Fetcher, Request};
//! use tokio_util::sync::CancellationToken;
//!
//! let fetcher = Fetcher::new(FetchPolicy::default())?;
//! let response = fetcher.fetch(Request::get("https://docs.rs/"), &CancellationToken::new()).await?;
//! let (text, charset) = response.text();
//! println!("{} {} {charset}: {} chars", response.status, response.url, text.len());
//! # Ok(()) }
//! ```
//!
//! The pure address and host rules live in `toolgate_guard::net`; the tools that use this
//! crate live in `toolgate_tools::web`.
//!
//! [`CancellationToken`]: tokio_util::sync::CancellationToken

#![deny(missing_docs)]

pub mod charset;
mod decode;
mod error;
mod fetcher;
mod pin;
mod policy;
pub mod proxy;

pub use error::FetchError;
pub use fetcher::{Fetcher, Overflow, ProgressFn, Redirects, Request, Response, is_credential_header};
pub use policy::{FetchPolicy, ProxyConfig};
pub use toolgate_guard::net::{AllowPrivate, Target};
