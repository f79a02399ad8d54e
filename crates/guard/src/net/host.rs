//! Which URLs and host names a fetch may even try: one URL parser (WHATWG, the `url` crate) for
//! every caller, so the host that is checked is the host that is contacted.

use std::net::IpAddr;

use url::{Host, Url};

use super::ip::{self, Blocked};

/// Why a URL is refused before any resolution.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlProblem {
    /// Not a URL at all.
    #[error("`{input}` is not a valid URL ({why}); give a full URL such as `https://example.com/page`")]
    Malformed {
        /// What was given (shortened).
        input: String,
        /// The parser's reason.
        why: String,
    },
    /// A scheme other than http or https.
    #[error("the `{scheme}:` scheme is not supported; only http and https URLs can be fetched")]
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// `user:password@` in the URL.
    #[error("URLs with credentials (`user:password@host`) are refused; send credentials in a header instead")]
    Userinfo,
    /// No host.
    #[error("the URL has no host")]
    NoHost,
    /// A host name that names this machine or the local network.
    #[error("`{host}` is {why}; only public hosts can be fetched")]
    LocalName {
        /// The host.
        host: String,
        /// Which rule.
        why: &'static str,
    },
    /// An IP literal in a blocked range.
    #[error("`{host}` is {}; only public addresses can be fetched", .blocked.describe())]
    BlockedAddress {
        /// The host as written in the parsed URL.
        host: String,
        /// The range.
        blocked: Blocked,
    },
}

/// What a URL's host is, once parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An IP literal (any spelling the URL parser accepts: `0x7f.1`, `2130706433`, `[::1]`).
    Ip(IpAddr),
    /// A DNS name: lowercase ASCII (IDNA applied), without a trailing dot.
    Name(String),
}

/// Parses `input` as an http(s) URL and checks what can be checked without resolving: scheme,
/// userinfo, host-name rules, IP-literal ranges. A local name or a blocked literal is returned
/// as an error; callers that allow some private hosts use [`parse_http_url`] and
/// [`check_target`] apart.
pub fn parse_http_url(input: &str) -> Result<(Url, Target), UrlProblem> {
    let url = Url::parse(input.trim())
        .map_err(|e| UrlProblem::Malformed { input: input.chars().take(200).collect(), why: e.to_string() })?;
    let target = url_target(&url)?;
    Ok((url, target))
}

/// The scheme, userinfo and host of an already parsed URL (a redirect's `Location` joined to
/// the previous URL goes through this).
pub fn url_target(url: &Url) -> Result<Target, UrlProblem> {
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(UrlProblem::Scheme { scheme: other.to_owned() }),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlProblem::Userinfo);
    }
    match url.host() {
        None => Err(UrlProblem::NoHost),
        Some(Host::Ipv4(v4)) => Ok(Target::Ip(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => Ok(Target::Ip(IpAddr::V6(v6))),
        Some(Host::Domain(name)) => {
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            if name.is_empty() || name.ends_with('.') || name.starts_with('.') || name.contains("..") {
                return Err(UrlProblem::Malformed {
                    input: url.as_str().chars().take(200).collect(),
                    why: "empty label in host name".into(),
                });
            }
            Ok(Target::Name(name))
        }
    }
}

/// The host-name rules and the IP-literal ranges, for a parsed target.
pub fn check_target(target: &Target) -> Result<(), UrlProblem> {
    match target {
        Target::Ip(ip) => match ip::classify(*ip).blocked {
            Some(blocked) => Err(UrlProblem::BlockedAddress { host: ip.to_string(), blocked }),
            None => Ok(()),
        },
        Target::Name(name) => match local_name(name) {
            Some(why) => Err(UrlProblem::LocalName { host: name.clone(), why }),
            None => Ok(()),
        },
    }
}

/// Why a (lowercase, no trailing dot) host name names this machine or the local network:
/// `localhost` and `*.localhost` (RFC 6761), names without a dot (resolved through search
/// domains to intranet hosts), and the local-only suffixes `.local` (mDNS), `.internal`,
/// `.localdomain`, `.home.arpa`.
pub fn local_name(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name == "localhost" || name.ends_with(".localhost") {
        return Some("this machine (localhost)");
    }
    if !name.contains('.') {
        return Some("a single-label name, which resolves to local network hosts");
    }
    const LOCAL_SUFFIXES: [&str; 4] = [".local", ".internal", ".localdomain", ".home.arpa"];
    if LOCAL_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        return Some("a local-network name");
    }
    None
}

/// Whether `host` is `domain` or one of its subdomains (`docs.rs` matches `docs.rs` and
/// `www.docs.rs`, not `evildocs.rs`). Both lowercase; a leading `*.` or `.` on the pattern is
/// ignored.
pub fn domain_matches(host: &str, domain: &str) -> bool {
    let domain = domain.trim_start_matches("*.").trim_start_matches('.').trim_end_matches('.');
    let host = host.trim_end_matches('.');
    if domain.is_empty() {
        return false;
    }
    host.eq_ignore_ascii_case(domain)
        || (host.len() > domain.len()
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
            && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain))
}
