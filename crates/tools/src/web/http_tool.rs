//! `http`: one raw HTTP request (seed 004 §4.4). Approval on every call; the leak detector
//! scans the outgoing URL, headers and body and refuses the call (nothing is sent) when it
//! finds a credential.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    ApprovalRequirement, CallContext, CallSafety, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};
use toolgate_fetch::{Fetcher, Redirects, Request};
use toolgate_guard::leak::LeakDetector;

/// Cap on a response body.
const MAX_BYTES: u64 = 5 * 1024 * 1024;

/// `http {method, url, headers?, body?, timeout_secs?}`.
#[derive(Debug)]
pub struct Http {
    spec: ToolSpec,
    fetcher: Fetcher,
    leaks: Arc<LeakDetector>,
}

impl Http {
    /// The tool, sending through `fetcher`.
    /// `leaks` refuses outgoing credentials: pass the gate's detector, which also knows the
    /// values of the server's own secret environment variables.
    pub fn new(fetcher: Fetcher, leaks: Arc<LeakDetector>) -> Self {
        let spec = ToolSpec::new(
            "http",
            "Send one HTTP request and return the status, headers and body (5 MB cap). HTTPS only. Redirects are \
             not followed: a 3xx comes back with its Location. A request whose URL, headers or body contain a \
             credential is refused. Needs approval for every call.",
            json!({
                "type": "object",
                "properties": {
                    "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"], "description": "HTTP method"},
                    "url": {"type": "string", "description": "The https URL"},
                    "headers": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}, "required": ["name", "value"], "additionalProperties": false},
                        "description": "Request headers"
                    },
                    "body": {"description": "Request body: a string is sent as is, anything else as JSON"},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 300, "description": "Seconds (default 30)"}
                },
                "required": ["method", "url"],
                "additionalProperties": false
            }),
        )
        .group("web");
        Http { spec, fetcher, leaks }
    }

    /// The rules that match the outgoing request, if any.
    fn leak_rules(&self, params: &Value) -> Vec<&'static str> {
        let mut outgoing = String::new();
        outgoing.push_str(params["url"].as_str().unwrap_or_default());
        outgoing.push('\n');
        for h in params["headers"].as_array().into_iter().flatten() {
            outgoing.push_str(&format!(
                "{}: {}\n",
                h["name"].as_str().unwrap_or_default(),
                h["value"].as_str().unwrap_or_default()
            ));
        }
        match &params["body"] {
            Value::Null => {}
            Value::String(s) => outgoing.push_str(s),
            other => outgoing.push_str(&other.to_string()),
        }
        let mut rules: Vec<&'static str> = self.leaks.scan(&outgoing).into_iter().map(|f| f.rule_id).collect();
        rules.dedup();
        rules
    }
}

#[async_trait]
impl Tool for Http {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let url = params["url"].as_str().unwrap_or_default();
        let rules = self.leak_rules(params);
        let refusal = (!rules.is_empty()).then(|| {
            Cow::Owned(format!(
                "the request contains a credential (leak rule {}); nothing was sent. Do not put secrets in requests",
                rules.join(", ")
            ))
        });
        CallSafety {
            approval: ApprovalRequirement::Always,
            approval_reason: Some(Cow::Owned(format!(
                "{} {}",
                params["method"].as_str().unwrap_or("GET"),
                url.chars().take(300).collect::<String>()
            ))),
            rate_class: RateClass::Http,
            touches: Touches { hosts: super::host_of(url), ..Touches::default() },
            timeout: params["timeout_secs"].as_u64().map(|s| Duration::from_secs(s + 5)),
            refusal,
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        // Checked again here: the tool may be called without the gate's refusal stage.
        let rules = self.leak_rules(&params);
        if !rules.is_empty() {
            return Err(ToolError::failed(format!(
                "refused: the request contains a credential (leak rule {}); nothing was sent",
                rules.join(", ")
            )));
        }
        let url = params["url"].as_str().unwrap_or_default().trim().to_owned();
        self.fetcher.precheck(&url).map_err(|e| ToolError::invalid("http", "/url", e.to_string()))?;
        let mut req = Request::get(&url);
        req.method = params["method"].as_str().unwrap_or("GET").to_owned();
        req.redirects = Redirects::Return;
        req.require_https = true;
        req.max_bytes = Some(MAX_BYTES);
        req.timeout = params["timeout_secs"].as_u64().map(Duration::from_secs);
        let mut has_content_type = false;
        for h in params["headers"].as_array().into_iter().flatten() {
            let name = h["name"].as_str().unwrap_or_default();
            has_content_type |= name.eq_ignore_ascii_case("content-type");
            req.headers.push((name.to_owned(), h["value"].as_str().unwrap_or_default().to_owned()));
        }
        match &params["body"] {
            Value::Null => {}
            Value::String(s) => req.body = Some(s.clone().into_bytes()),
            other => {
                req.body = Some(other.to_string().into_bytes());
                if !has_content_type {
                    req.headers.push(("content-type".into(), "application/json".into()));
                }
            }
        }
        req.progress = super::download_progress(ctx);
        let resp = self.fetcher.fetch(req, &ctx.cancel).await.map_err(super::fetch_tool::tool_error)?;
        ctx.audit.set(super::audit_line(&resp));
        let mut headers = serde_json::Map::new();
        let mut header_text = String::new();
        for (k, v) in &resp.headers {
            // Never shown to the model: they carry credentials.
            if toolgate_fetch::is_credential_header(k) {
                continue;
            }
            header_text.push_str(&format!("{k}: {v}\n"));
            headers.insert(k.to_string(), Value::String(v.to_string()));
        }
        let (body_text, _) = resp.text();
        let text = format!("HTTP {} {}\n{header_text}\n{body_text}", resp.status, resp.url);
        Ok(ToolOutput::text(text).with_meta(json!({
            "status": resp.status, "url": resp.url.to_string(), "headers": headers, "truncated": resp.truncated
        })))
    }
}
