//! What a [`crate::Fetcher`] may reach: private exceptions, domain lists, proxy, caps.

use std::time::Duration;

use toolgate_guard::net::{AllowPrivate, domain_matches};

/// A forward proxy. With a proxy the proxy resolves names: the fetcher still checks the
/// scheme, userinfo, name rules, IP literals and domain lists, but cannot vet the address the
/// proxy connects to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// `http://host:port` (an `https_proxy`).
    pub url: String,
    /// Hosts (with subdomains) that bypass the proxy: resolved and vetted by the fetcher.
    pub no_proxy: Vec<String>,
}

/// The fetcher's policy.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    /// Private addresses (with ports or CIDRs) that may be reached anyway.
    pub allow_private: AllowPrivate,
    /// When not empty, only these domains (and subdomains) may be fetched.
    pub allow_domains: Vec<String>,
    /// These domains (and subdomains) are never fetched; wins over `allow_domains`.
    pub deny_domains: Vec<String>,
    /// A forward proxy, if any. Without one the environment's proxy variables are ignored
    /// (they would bypass address pinning).
    pub proxy: Option<ProxyConfig>,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// Default cap on a decoded body, in bytes.
    pub max_response_bytes: u64,
    /// Default deadline of a request (connect, headers and body).
    pub timeout: Duration,
    /// Most redirects followed.
    pub max_redirects: usize,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            allow_private: AllowPrivate::default(),
            allow_domains: Vec::new(),
            deny_domains: Vec::new(),
            proxy: None,
            user_agent: concat!("toolgate/", env!("CARGO_PKG_VERSION")).to_owned(),
            max_response_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 10,
        }
    }
}

impl FetchPolicy {
    /// Why `host` is refused by the domain lists, if it is.
    pub fn domain_refusal(&self, host: &str) -> Option<&'static str> {
        if self.deny_domains.iter().any(|d| domain_matches(host, d)) {
            return Some("it is in deny_domains");
        }
        if !self.allow_domains.is_empty() && !self.allow_domains.iter().any(|d| domain_matches(host, d)) {
            return Some("it is not in allow_domains");
        }
        None
    }

    /// Whether requests to `host` go through the proxy.
    pub fn proxied(&self, host: &str) -> bool {
        match &self.proxy {
            Some(p) => !p.no_proxy.iter().any(|d| d == "*" || domain_matches(host, d)),
            None => false,
        }
    }
}
