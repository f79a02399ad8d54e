//! The Anthropic Messages API: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`; the system prompt is a top-level field, tool calls are
//! `tool_use` content blocks, and results go back as `tool_result` blocks in a user turn.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::{Message, ModelClient, ModelReply, ModelRequest, ToolCall, Usage, call_id, http};
use crate::AgentError;
use crate::config::ProviderConfig;

/// The API version this client speaks.
const VERSION: &str = "2023-06-01";

/// A Messages API client.
#[derive(Debug)]
pub struct AnthropicClient {
    cfg: ProviderConfig,
    url: String,
    headers: HeaderMap,
    http: reqwest::Client,
}

impl AnthropicClient {
    /// A client for `cfg` (`key`: the `x-api-key`, if any).
    pub fn new(provider: &str, cfg: ProviderConfig, key: Option<String>) -> Result<Self, AgentError> {
        let bad = |message: String| AgentError::Provider { provider: provider.to_owned(), message };
        let base = cfg.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(bad(format!("base_url `{}` must start with http:// or https://", cfg.base_url)));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert("anthropic-version", HeaderValue::from_static(VERSION));
        if let Some(key) = key {
            let mut v = HeaderValue::from_str(&key)
                .map_err(|_| bad("the API key contains characters a header cannot carry".to_owned()))?;
            v.set_sensitive(true);
            headers.insert("x-api-key", v);
        }
        let http = http::client(provider, Duration::from_secs_f64(cfg.timeout_secs.clamp(0.1, 3600.0)))?;
        Ok(AnthropicClient { cfg, url, headers, http })
    }

    /// The request body for `req`.
    pub fn body(&self, req: &ModelRequest) -> Value {
        let mut system = Vec::new();
        let mut messages: Vec<Value> = Vec::new();
        // Consecutive tool results share one user turn, as the API requires.
        let mut push = |role: &str, block: Value| match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(blocks) = last["content"].as_array_mut() {
                    blocks.push(block);
                }
            }
            _ => messages.push(json!({"role": role, "content": [block]})),
        };
        for m in &req.messages {
            match m {
                Message::System { content } => system.push(content.clone()),
                Message::User { content } => push("user", json!({"type": "text", "text": content})),
                Message::Assistant { content, tool_calls } => {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        push("assistant", json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        let input: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                        let input = if input.is_object() { input } else { json!({}) };
                        push("assistant", json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
                    }
                }
                Message::Tool { call_id, content, is_error, .. } => push(
                    "user",
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
                ),
            }
        }
        let mut body = json!({
            "model": req.model,
            "max_tokens": self.cfg.max_tokens.unwrap_or(4096),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            body["tool_choice"] = json!({"type": "auto"});
        }
        if let Some(t) = self.cfg.temperature {
            body["temperature"] = json!(t);
        }
        body
    }
}

#[async_trait]
impl ModelClient for AnthropicClient {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let body = self.body(req);
        let resp = http::post(&self.http, &self.url, &self.headers, &body, self.cfg.max_retries).await?;
        let bytes = http::read_body(resp, &self.url).await?;
        let bad = |message: String| AgentError::Model { endpoint: self.url.clone(), message, status: None };
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("the reply is not JSON: {e}")))?;
        parse_reply(&v).map_err(bad)
    }
}

/// A Messages API response body as a [`ModelReply`].
pub fn parse_reply(v: &Value) -> Result<ModelReply, String> {
    let blocks = v.get("content").and_then(Value::as_array).ok_or("the reply has no `content` array")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: b.get("id").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| call_id(i)),
                name: b.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                arguments: b.get("input").map(Value::to_string).unwrap_or_default(),
            }),
            _ => {}
        }
    }
    let n = |k: &str| v.get("usage").and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
    Ok(ModelReply {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage { input_tokens: n("input_tokens"), output_tokens: n("output_tokens") },
        finish_reason: v.get("stop_reason").and_then(Value::as_str).map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_share_a_user_turn_and_replies_parse() {
        let cfg = ProviderConfig { base_url: "http://127.0.0.1:1".into(), ..ProviderConfig::default() };
        let client = AnthropicClient::new("a", cfg, Some("k".into())).unwrap();
        let req = ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::System { content: "sys".into() },
                Message::User { content: "hi".into() },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![
                        ToolCall { id: "1".into(), name: "a".into(), arguments: "{}".into() },
                        ToolCall { id: "2".into(), name: "b".into(), arguments: "not json".into() },
                    ],
                },
                Message::Tool { call_id: "1".into(), name: "a".into(), content: "x".into(), is_error: false },
                Message::Tool { call_id: "2".into(), name: "b".into(), content: "y".into(), is_error: true },
            ],
            tools: Vec::new().into(),
        };
        let body = client.body(&req);
        assert_eq!(body["system"], "sys");
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(msgs[1]["content"][1]["input"], json!({}));
        let reply = parse_reply(&json!({"content": [{"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t", "name": "read", "input": {"path": "a"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}}))
        .unwrap();
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(reply.usage.input_tokens, 3);
    }
}
