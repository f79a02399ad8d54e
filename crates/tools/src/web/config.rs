//! `[web]`: what the web tools may reach and how.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_fetch::{AllowPrivate, FetchPolicy, ProxyConfig};

use super::WebError;

/// Configuration of the `web` tool group (the `[web]` table of `toolgate.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// Private addresses reachable anyway: `IP:port`, `[IPv6]:port`, `IP`, or a CIDR
    /// (`10.0.0.0/8`, and `198.18.0.0/15` behind fake-IP DNS such as Clash or Surge). Matched
    /// against the vetted address and port, never a name.
    pub allow_private: Vec<String>,
    /// When not empty, only these domains (and their subdomains) are fetched.
    pub allow_domains: Vec<String>,
    /// Never fetched (with subdomains); wins over `allow_domains`.
    pub deny_domains: Vec<String>,
    /// The `User-Agent` header (default `toolgate/VERSION`).
    pub user_agent: Option<String>,
    /// Cap on a decoded response body for `web_fetch`, in bytes (default 10 MiB).
    pub max_response_bytes: u64,
    /// Default deadline of a request, in seconds (default 30).
    pub timeout_secs: u64,
    /// A forward proxy (`http://host:port`). With a proxy the proxy resolves names; see
    /// `docs/web.md` for what is still checked.
    pub https_proxy: Option<String>,
    /// Domains that bypass the proxy (resolved and vetted here).
    pub no_proxy: Vec<String>,
    /// `[web.search]`: the `web_search` provider.
    pub search: SearchConfig,
}

/// `[web.search]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// `brave`, `tavily`, `searxng` or `duckduckgo`.
    pub provider: Option<String>,
    /// The provider's base URL (required for `searxng`; overrides the others' for testing).
    pub url: Option<String>,
    /// The name of the API key: the environment variable holding it, or, when that is not set,
    /// the stored secret of that name (`toolgate tools secret NAME`). Keys never go in config
    /// text.
    pub api_key_env: Option<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            allow_private: Vec::new(),
            allow_domains: Vec::new(),
            deny_domains: Vec::new(),
            user_agent: None,
            max_response_bytes: 10 * 1024 * 1024,
            timeout_secs: 30,
            https_proxy: None,
            no_proxy: Vec::new(),
            search: SearchConfig::default(),
        }
    }
}

impl WebConfig {
    /// The fetcher policy this configuration describes.
    pub fn policy(&self) -> Result<FetchPolicy, WebError> {
        let allow_private = AllowPrivate::parse(&self.allow_private).map_err(|e| WebError::Config(e.to_string()))?;
        let lower = |v: &[String]| v.iter().map(|d| d.trim().to_ascii_lowercase()).filter(|d| !d.is_empty()).collect();
        let mut policy = FetchPolicy {
            allow_private,
            allow_domains: lower(&self.allow_domains),
            deny_domains: lower(&self.deny_domains),
            proxy: self.https_proxy.clone().map(|url| ProxyConfig { url, no_proxy: lower(&self.no_proxy) }),
            max_response_bytes: self.max_response_bytes.max(1024),
            timeout: Duration::from_secs(self.timeout_secs.clamp(1, 600)),
            ..FetchPolicy::default()
        };
        if let Some(ua) = &self.user_agent {
            policy.user_agent = ua.clone();
        }
        Ok(policy)
    }
}
