//! `web_search {query, max_results?, provider?}`: one trait, one adapter per documented API:
//! Brave Search API v1 (`/res/v1/web/search`), Tavily (`POST /search`), SearXNG
//! (`/search?format=json`), DuckDuckGo's HTML endpoint (`html.duckduckgo.com/html/`, no key).
//! Every request goes through the SSRF-safe fetcher; keys come from the environment
//! (`api_key_env`) or, when that variable is not set, from the encrypted secrets store under
//! the same name; never from config text.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches, async_trait,
};
use toolgate_fetch::{Fetcher, Request};
use url::Url;

use super::SearchConfig;
use super::html::{decode_entities, strip_invisible};
use crate::custom::SecretSource;

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Title.
    pub title: String,
    /// URL.
    pub url: String,
    /// Snippet.
    pub snippet: String,
}

/// The providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Brave Search API v1.
    Brave,
    /// Tavily.
    Tavily,
    /// A SearXNG instance's JSON API.
    Searxng,
    /// DuckDuckGo's HTML endpoint.
    DuckDuckGo,
}

impl Provider {
    fn parse(name: &str) -> Option<Provider> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "brave" => Provider::Brave,
            "tavily" => Provider::Tavily,
            "searxng" => Provider::Searxng,
            "duckduckgo" | "ddg" => Provider::DuckDuckGo,
            _ => return None,
        })
    }

    fn default_url(self) -> Option<&'static str> {
        match self {
            Provider::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            Provider::Tavily => Some("https://api.tavily.com/search"),
            Provider::Searxng => None,
            Provider::DuckDuckGo => Some("https://html.duckduckgo.com/html/"),
        }
    }

    fn default_key_env(self) -> Option<&'static str> {
        match self {
            Provider::Brave => Some("BRAVE_API_KEY"),
            Provider::Tavily => Some("TAVILY_API_KEY"),
            _ => None,
        }
    }
}

/// `web_search`.
#[derive(Debug)]
pub struct WebSearch {
    spec: ToolSpec,
    fetcher: Fetcher,
    config: SearchConfig,
    /// Where a key not found in the environment is looked up, under the same name.
    secrets: Arc<dyn SecretSource>,
}

impl WebSearch {
    /// The tool, searching through `fetcher` with `config`; API keys come from the environment
    /// variable named by `api_key_env`, else from `secrets` under that name.
    pub fn new(fetcher: Fetcher, config: SearchConfig, secrets: Arc<dyn SecretSource>) -> Self {
        let spec = ToolSpec::new(
            "web_search",
            "Search the web. Returns title, URL and snippet of each result. Use web_fetch to read a result.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 400, "description": "The search query"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Results (default 5)"},
                    "provider": {"type": "string", "enum": ["brave", "tavily", "searxng", "duckduckgo"], "description": "Override the configured provider"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .group("web")
        .annotations(Annotations { read_only: true, destructive: false, idempotent: true, open_world: true });
        WebSearch { spec, fetcher, config, secrets }
    }

    fn provider(&self, params: &Value) -> Result<Provider, ToolError> {
        let name = params["provider"].as_str().or(self.config.provider.as_deref()).unwrap_or("duckduckgo");
        Provider::parse(name).ok_or_else(|| {
            ToolError::failed(format!(
                "unknown search provider `{name}`; use brave, tavily, searxng or duckduckgo ([web.search] provider)"
            ))
        })
    }

    fn endpoint(&self, provider: Provider) -> Result<String, ToolError> {
        match (&self.config.url, provider.default_url()) {
            (Some(u), _) => Ok(u.clone()),
            (None, Some(u)) => Ok(u.to_owned()),
            (None, None) => {
                Err(ToolError::failed("the searxng provider needs `[web.search] url` (your instance's base URL)"))
            }
        }
    }

    /// The provider's key: the environment variable `api_key_env` (or the provider's usual one)
    /// when set, else the stored secret of that name. Never config text.
    fn key(&self, provider: Provider) -> Result<String, ToolError> {
        let name = self.config.api_key_env.as_deref().or(provider.default_key_env()).unwrap_or_default();
        let usable = |k: &String| !k.trim().is_empty();
        if let Some(key) = std::env::var(name).ok().filter(usable) {
            return Ok(key);
        }
        let stored = self.secrets.secret(name).map_err(|e| {
            ToolError::failed(format!("cannot read the search API key `{name}` from the secrets store: {e}"))
        })?;
        stored.filter(usable).map(|k| k.trim().to_owned()).ok_or_else(|| {
            ToolError::failed(format!(
                "no API key for the {provider:?} search provider: set the environment variable `{name}` or store \
                 it with `toolgate tools secret {name}` ([web.search] api_key_env names it)"
            ))
        })
    }
}

#[async_trait]
impl Tool for WebSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let hosts = self
            .provider(params)
            .ok()
            .and_then(|p| self.endpoint(p).ok())
            .map(|u| super::host_of(&u))
            .unwrap_or_default();
        CallSafety {
            rate_class: RateClass::Http,
            read_only: true,
            touches: Touches { hosts, ..Touches::default() },
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let query = params["query"].as_str().unwrap_or_default().trim().to_owned();
        if query.is_empty() {
            return Err(ToolError::invalid("web_search", "/query", "the query is empty"));
        }
        let max = params["max_results"].as_u64().unwrap_or(5).clamp(1, 20) as usize;
        let provider = self.provider(&params)?;
        let endpoint = self.endpoint(provider)?;
        let mut url =
            Url::parse(&endpoint).map_err(|e| ToolError::failed(format!("[web.search] url `{endpoint}`: {e}")))?;
        let mut req = Request::get("");
        req.timeout = Some(Duration::from_secs(20));
        req.max_bytes = Some(4 * 1024 * 1024);
        match provider {
            Provider::Brave => {
                url.query_pairs_mut().append_pair("q", &query).append_pair("count", &max.to_string());
                req = req.header("Accept", "application/json").header("X-Subscription-Token", self.key(provider)?);
            }
            Provider::Tavily => {
                req.method = "POST".into();
                req = req
                    .header("Content-Type", "application/json")
                    .header("Authorization", format!("Bearer {}", self.key(provider)?));
                req.body = Some(json!({"query": query, "max_results": max}).to_string().into_bytes());
            }
            Provider::Searxng => {
                let path = format!("{}/search", url.path().trim_end_matches('/'));
                url.set_path(&path);
                url.query_pairs_mut().append_pair("q", &query).append_pair("format", "json");
                req = req.header("Accept", "application/json");
            }
            Provider::DuckDuckGo => {
                req.method = "POST".into();
                req = req.header("Content-Type", "application/x-www-form-urlencoded");
                let form: String =
                    url::form_urlencoded::Serializer::new(String::new()).append_pair("q", &query).finish();
                req.body = Some(form.into_bytes());
            }
        }
        req.url = url.to_string();
        let resp = self.fetcher.fetch(req, &ctx.cancel).await.map_err(super::fetch_tool::tool_error)?;
        ctx.audit.set(super::audit_line(&resp));
        let service = format!("{provider:?} search");
        if resp.status >= 400 {
            return Err(ToolError::ExternalService {
                service,
                message: format!("HTTP {}; try again later or another provider", resp.status),
            });
        }
        let (body, _) = resp.text();
        let hits = match provider {
            Provider::DuckDuckGo => parse_ddg(&body),
            _ => {
                let v: Value = serde_json::from_str(&body).map_err(|_| ToolError::ExternalService {
                    service: service.clone(),
                    message: "the answer is not JSON".into(),
                })?;
                let (list, snippet) = match provider {
                    Provider::Brave => (&v["web"]["results"], "description"),
                    _ => (&v["results"], "content"),
                };
                let Some(list) = list.as_array() else {
                    return Err(ToolError::ExternalService {
                        service,
                        message: "the answer has no results list".into(),
                    });
                };
                list.iter()
                    .map(|r| Hit {
                        title: clean(r["title"].as_str().unwrap_or_default()),
                        url: r["url"].as_str().unwrap_or_default().to_owned(),
                        snippet: clean(r[snippet].as_str().unwrap_or_default()),
                    })
                    .filter(|h| h.url.starts_with("http"))
                    .collect()
            }
        };
        let hits: Vec<Hit> = hits.into_iter().take(max).collect();
        let mut text = String::new();
        for (i, h) in hits.iter().enumerate() {
            text.push_str(&format!("{}. {}\n   {}\n   {}\n", i + 1, h.title, h.url, h.snippet));
        }
        if hits.is_empty() {
            text.push_str("No results.");
        }
        let results: Vec<Value> =
            hits.iter().map(|h| json!({"title": h.title, "url": h.url, "snippet": h.snippet})).collect();
        Ok(ToolOutput::text(text).with_meta(json!({"results": results})))
    }
}

/// Tags removed (Brave marks matches with `<strong>`), entities decoded, invisible characters
/// dropped.
fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    strip_invisible(&decode_entities(&out)).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// DuckDuckGo's HTML results: `<a class="result__a" href="...">title</a>` and
/// `<a class="result__snippet" ...>snippet</a>`; links go through `/l/?uddg=<url>`.
fn parse_ddg(html: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("class=\"result__a\"") {
        let block_start = rest[..at].rfind('<').unwrap_or(at);
        let tag = &rest[block_start..];
        let tag_end = tag.find('>').unwrap_or(tag.len());
        let href = tag[..tag_end].split("href=\"").nth(1).and_then(|h| h.split('"').next()).unwrap_or_default();
        let after = &tag[(tag_end + 1).min(tag.len())..];
        let title = after.split("</a>").next().unwrap_or_default();
        let next = after.find("class=\"result__a\"").unwrap_or(after.len());
        let snippet = after[..next]
            .split("class=\"result__snippet\"")
            .nth(1)
            .and_then(|s| s.split_once('>'))
            .map(|(_, s)| s.split("</a>").next().unwrap_or_default())
            .unwrap_or_default();
        let href = decode_entities(href);
        let url = Url::parse(&format!("https://duckduckgo.com{}", href.trim_start_matches("https://duckduckgo.com")))
            .ok()
            .and_then(|u| u.query_pairs().find(|(k, _)| k == "uddg").map(|(_, v)| v.into_owned()))
            .unwrap_or(href);
        if url.starts_with("http") {
            hits.push(Hit { title: clean(title), url, snippet: clean(snippet) });
        }
        rest = after;
    }
    hits
}
