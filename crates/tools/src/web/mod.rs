//! The web tools (group `web`): `web_fetch`, `html_to_markdown`, `http`, `web_search`.
//!
//! Every request goes through one [`toolgate_fetch::Fetcher`] built from [`WebConfig`]: the
//! SSRF defence (resolve once, vet every address, pin, re-vet every redirect hop) is there, not
//! in the tools. Page text is untrusted output: the gate's output stage wraps it.

mod config;
mod fetch_tool;
pub mod html;
mod http_tool;
mod search;

use std::sync::Arc;

use toolgate_core::{CallContext, Tool};
use toolgate_fetch::{Fetcher, ProgressFn, Response};
use toolgate_guard::leak::LeakDetector;

use crate::custom::SecretSource;

pub use config::{SearchConfig, WebConfig};
pub use fetch_tool::{HtmlToMarkdown, WebFetch};
pub use http_tool::Http;
pub use search::{Hit, Provider, WebSearch};

/// Why the web tools could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The `[web]` configuration is invalid.
    #[error("invalid [web] configuration: {0}")]
    Config(String),
}

/// The fetcher `config` describes. Build one per gate and share it (it is cheap to clone): the
/// web tools, `skill_install` and WASM tools' `http` all go through it, so they keep one
/// connection pool and load the system's root certificates once.
pub fn fetcher(config: &WebConfig) -> Result<Fetcher, WebError> {
    Fetcher::new(config.policy()?).map_err(|e| WebError::Config(e.to_string()))
}

/// The web tools for `config`, on `fetcher` (see [`fetcher`]). `leaks` is the detector that
/// refuses outgoing credentials in `http` requests (the gate passes its own). `secrets` answers
/// for search API keys that are not in the environment (the gate passes the state database's
/// encrypted secrets, the ones `toolgate tools secret NAME` stores).
pub fn tools(
    config: &WebConfig,
    fetcher: &Fetcher,
    leaks: Arc<LeakDetector>,
    secrets: Arc<dyn SecretSource>,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(WebFetch::new(fetcher.clone(), config)),
        Arc::new(HtmlToMarkdown::new()),
        Arc::new(Http::new(fetcher.clone(), leaks)),
        Arc::new(WebSearch::new(fetcher.clone(), config.search.clone(), secrets)),
    ]
}

/// `touches.hosts` for a URL parameter: the lowercase host, no port (policy rules such as
/// `web_fetch(domain:docs.rs)` match it).
pub(crate) fn host_of(url: &str) -> Vec<String> {
    match toolgate_guard::net::parse_http_url(url) {
        Ok((u, _)) => u.host_str().map(|h| vec![h.trim_end_matches('.').to_ascii_lowercase()]).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// What a web call's audit row keeps: the status and the URL that answered, and where the
/// request started when redirects moved it.
pub(crate) fn audit_line(resp: &Response) -> String {
    let mut line = format!("HTTP {} {}", resp.status, resp.url);
    if let Some(first) = resp.redirects.first() {
        let hops = resp.redirects.len();
        line.push_str(&format!(" (from {first} after {hops} redirect{})", if hops == 1 { "" } else { "s" }));
    }
    line
}

/// Progress for a download (bytes received so far, out of `Content-Length` when sent), or
/// `None` when nobody listens.
pub(crate) fn download_progress(ctx: &CallContext) -> Option<ProgressFn> {
    let progress = ctx.progress.clone();
    progress.is_active().then(|| -> ProgressFn {
        Arc::new(move |done, total| {
            let message = match total {
                Some(t) => format!("{done} of {t} bytes received"),
                None => format!("{done} bytes received"),
            };
            progress.report(done as f64, total.map(|t| t as f64), Some(message));
        })
    })
}
