//! `web_fetch` and `html_to_markdown`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches, async_trait,
};
use toolgate_fetch::{FetchError, Fetcher, Overflow, Request};
use url::Url;

use super::WebConfig;
use super::html::{self, Converted};

const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
const CACHE_ENTRIES: usize = 128;
/// Longest HTML conversion before falling back to flat text.
const CONVERT_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
struct Page {
    final_url: String,
    status: u16,
    content_type: String,
    title: Option<String>,
    text: String,
    truncated_body: bool,
    flat: bool,
}

/// `web_fetch {url, max_chars?, raw?, timeout?}`: a page as Markdown.
#[derive(Debug)]
pub struct WebFetch {
    spec: ToolSpec,
    fetcher: Fetcher,
    max_bytes: u64,
    cache: Mutex<HashMap<String, (Instant, Arc<Page>)>>,
}

impl WebFetch {
    /// The tool, fetching through `fetcher`.
    pub fn new(fetcher: Fetcher, config: &WebConfig) -> Self {
        let spec = ToolSpec::new(
            "web_fetch",
            "Fetch a web page and return its main content as Markdown (headings, lists, tables, code, absolute \
             links; navigation and hidden text removed). Plain text, JSON and Markdown are returned as they are; \
             binary files are refused. `raw: true` returns the body without extraction. Public http(s) URLs only \
             (http is upgraded to https). Results are cached for 15 minutes.",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http(s) URL to fetch"},
                    "max_chars": {"type": "integer", "minimum": 100, "maximum": 1000000, "description": "Most characters returned (default 50000)"},
                    "raw": {"type": "boolean", "description": "Return the body as is, without extraction"},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": 120, "description": "Seconds (default 30)"}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        )
        .group("web")
        .annotations(Annotations { read_only: true, destructive: false, idempotent: true, open_world: true });
        WebFetch { spec, fetcher, max_bytes: config.max_response_bytes, cache: Mutex::new(HashMap::new()) }
    }

    fn cached(&self, key: &str) -> Option<Arc<Page>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.get(key).filter(|(at, _)| at.elapsed() < CACHE_TTL).map(|(_, p)| p.clone())
    }

    fn remember(&self, keys: &[&str], page: Arc<Page>) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        if cache.len() + keys.len() > CACHE_ENTRIES {
            cache.clear();
        }
        for k in keys {
            cache.insert((*k).to_owned(), (Instant::now(), page.clone()));
        }
    }
}

/// A fetch error as a tool error the model can act on.
pub(crate) fn tool_error(e: FetchError) -> ToolError {
    match e {
        FetchError::Cancelled => ToolError::Cancelled,
        FetchError::Url(_)
        | FetchError::BlockedAddress { .. }
        | FetchError::Domain { .. }
        | FetchError::HttpsRequired { .. } => ToolError::failed(e.to_string()),
        other => ToolError::failed(other.to_string()),
    }
}

fn is_binary(media: &str) -> bool {
    let textual = media.starts_with("text/")
        || media.contains("json")
        || media.contains("xml")
        || media.contains("javascript")
        || media.contains("markdown")
        || media.contains("yaml")
        || media.contains("toml")
        || media.contains("csv")
        || media.is_empty();
    !textual
}

#[async_trait]
impl Tool for WebFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let url = params["url"].as_str().unwrap_or_default();
        CallSafety {
            rate_class: RateClass::Http,
            read_only: true,
            touches: Touches { hosts: super::host_of(url), ..Touches::default() },
            timeout: params["timeout"].as_u64().map(|s| Duration::from_secs(s + 5)),
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let url = params["url"].as_str().unwrap_or_default().trim().to_owned();
        let max_chars = params["max_chars"].as_u64().unwrap_or(50_000) as usize;
        let raw = params["raw"].as_bool().unwrap_or(false);
        self.fetcher.precheck(&url).map_err(|e| ToolError::invalid("web_fetch", "/url", e.to_string()))?;
        let key = format!("{}{url}", if raw { "raw:" } else { "" });
        let page = match self.cached(&key) {
            Some(p) => {
                ctx.audit.set(format!("HTTP {} {} (from web_fetch's cache)", p.status, p.final_url));
                p
            }
            None => {
                let mut req = Request::get(&url).header("Accept", "text/markdown, text/html;q=0.9, */*;q=0.8");
                req.upgrade_http = true;
                req.overflow = Overflow::Truncate;
                req.max_bytes = Some(self.max_bytes);
                req.timeout = params["timeout"].as_u64().map(Duration::from_secs);
                req.progress = super::download_progress(ctx);
                let resp = self.fetcher.fetch(req, &ctx.cancel).await.map_err(tool_error)?;
                ctx.audit.set(super::audit_line(&resp));
                let media = resp.media_type().unwrap_or_default();
                if is_binary(&media) {
                    return Err(ToolError::failed(format!(
                        "`{}` is a binary file ({media}); web_fetch returns text only",
                        resp.url
                    )));
                }
                let (text, _) = resp.text();
                let is_html = media.contains("html") || (media.is_empty() && text.trim_start().starts_with('<'));
                let (text, title, flat) = if is_html && !raw {
                    let base = resp.url.clone();
                    let converted: Converted =
                        tokio::task::spawn_blocking(move || html::convert_bounded(text, Some(base), CONVERT_DEADLINE))
                            .await
                            .map_err(|_| ToolError::failed("the HTML conversion failed"))?;
                    (converted.markdown, converted.title, converted.flat)
                } else {
                    (html::strip_invisible(&text), None, false)
                };
                let page = Arc::new(Page {
                    final_url: resp.url.to_string(),
                    status: resp.status,
                    content_type: media,
                    title,
                    text,
                    truncated_body: resp.truncated,
                    flat,
                });
                let final_key = format!("{}{}", if raw { "raw:" } else { "" }, page.final_url);
                self.remember(&[&key, &final_key], page.clone());
                page
            }
        };
        let (body, cut) = cut_chars(&page.text, max_chars);
        let mut text = format!("URL: {}\nStatus: {}\n", page.final_url, page.status);
        if let Some(t) = &page.title {
            text.push_str(&format!("Title: {t}\n"));
        }
        text.push('\n');
        text.push_str(body);
        if cut || page.truncated_body {
            text.push_str(&format!(
                "\n\n[truncated: {} of {} characters shown{}]",
                body.chars().count(),
                page.text.chars().count(),
                if page.truncated_body { "; the page itself was larger than the download cap" } else { "" }
            ));
        }
        if page.flat {
            text.push_str("\n\n[converted as flat text: the page's structure was too deep or too large]");
        }
        if page.status >= 400 {
            text = format!("HTTP {} from {}\n\n{text}", page.status, page.final_url);
        }
        let structured = json!({
            "url": url, "final_url": page.final_url, "status": page.status, "title": page.title,
            "content_type": page.content_type, "truncated": cut || page.truncated_body, "chars": body.chars().count()
        });
        Ok(ToolOutput::text(text).with_meta(structured))
    }
}

fn cut_chars(s: &str, max: usize) -> (&str, bool) {
    match s.char_indices().nth(max) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

/// `html_to_markdown {html, url?}`: the `web_fetch` converter, no network.
#[derive(Debug)]
pub struct HtmlToMarkdown {
    spec: ToolSpec,
}

impl Default for HtmlToMarkdown {
    fn default() -> Self {
        Self::new()
    }
}

impl HtmlToMarkdown {
    /// The tool.
    pub fn new() -> Self {
        let spec = ToolSpec::new(
            "html_to_markdown",
            "Convert HTML to Markdown (main content only; navigation and hidden text removed). `url` makes \
             relative links absolute. No network access.",
            json!({
                "type": "object",
                "properties": {
                    "html": {"type": "string", "description": "The HTML"},
                    "url": {"type": "string", "description": "The page's URL, for resolving relative links"}
                },
                "required": ["html"],
                "additionalProperties": false
            }),
        )
        .group("web")
        .annotations(Annotations::PURE);
        HtmlToMarkdown { spec }
    }
}

#[async_trait]
impl Tool for HtmlToMarkdown {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let html_text = params["html"].as_str().unwrap_or_default().to_owned();
        let base = match params.get("url").and_then(Value::as_str) {
            Some(u) => Some(Url::parse(u).map_err(|e| {
                ToolError::invalid(
                    "html_to_markdown",
                    "/url",
                    format!("`{u}` is not a valid URL ({e}); give an absolute URL"),
                )
            })?),
            None => None,
        };
        let converted = tokio::task::spawn_blocking(move || html::convert_bounded(html_text, base, CONVERT_DEADLINE))
            .await
            .map_err(|_| ToolError::failed("the HTML conversion failed"))?;
        let mut text = converted.markdown.clone();
        if converted.flat {
            text.push_str("\n\n[converted as flat text: the HTML was too deep or too large]");
        }
        Ok(ToolOutput::text(text).with_meta(json!({"title": converted.title, "flat": converted.flat})))
    }
}
