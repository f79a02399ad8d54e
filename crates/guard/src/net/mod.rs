//! SSRF defence, the pure part: which addresses and host names a network tool may reach.
//!
//! - [`ip::classify`]: public, or the special-purpose range an address falls in (IPv4-mapped,
//!   IPv4-compatible, NAT64, 6to4 and Teredo addresses are judged by the IPv4 address inside).
//! - [`host::parse_http_url`]: the one URL parser (WHATWG), scheme and userinfo checks, and
//!   [`host::check_target`]: host-name rules (`localhost`, single-label names, local suffixes)
//!   and IP-literal ranges.
//! - [`allow::AllowPrivate`]: the `allow_private` entries a user lets through, matched against
//!   the vetted address and port.
//!
//! The fetcher (`toolgate-fetch`) does the I/O: it resolves once, vets every address with
//! these functions, and connects only to the vetted addresses.

pub mod allow;
pub mod host;
pub mod ip;

pub use allow::{AllowEntry, AllowEntryError, AllowPrivate};
pub use host::{Target, UrlProblem, check_target, domain_matches, local_name, parse_http_url, url_target};
pub use ip::{Blocked, Embedding, Verdict, classify, is_public};
