//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions`, as served by OpenAI,
//! llama.cpp's server, vLLM, Ollama, LM Studio and OpenRouter.
//!
//! Native mode sends `tools` with `tool_choice: "auto"` and reads `message.tool_calls`.
//! `json_schema` mode (for small local models) sends no tools: the system prompt lists them and
//! `response_format` constrains the reply to `{"tool": NAME, "arguments": {...}}` or
//! `{"tool": "final_answer", "answer": "..."}`, so the model cannot write a malformed call.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::http::{self, SseLines};
use super::{Message, ModelClient, ModelReply, ModelRequest, ToolCall, ToolDef, Usage, call_id};
use crate::AgentError;
use crate::config::{ProviderConfig, ToolCallMode};

/// The `tool` value that ends a run in `json_schema` mode.
pub const FINAL_ANSWER: &str = "final_answer";

/// A Chat Completions client.
#[derive(Debug)]
pub struct OpenAiClient {
    provider: String,
    cfg: ProviderConfig,
    url: String,
    headers: HeaderMap,
    http: reqwest::Client,
}

impl OpenAiClient {
    /// A client for `cfg` (`key`: the bearer token, if any).
    pub fn new(provider: &str, cfg: ProviderConfig, key: Option<String>) -> Result<Self, AgentError> {
        let bad = |message: String| AgentError::Provider { provider: provider.to_owned(), message };
        let url = format!("{}/chat/completions", cfg.base_url.trim_end_matches('/'));
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(bad(format!("base_url `{}` must start with http:// or https://", cfg.base_url)));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = key {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| bad("the API key contains characters a header cannot carry".to_owned()))?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        let http = http::client(provider, Duration::from_secs_f64(cfg.timeout_secs.clamp(0.1, 3600.0)))?;
        Ok(OpenAiClient { provider: provider.to_owned(), cfg, url, headers, http })
    }

    /// The request body for `req`.
    pub fn body(&self, req: &ModelRequest) -> Value {
        let json_mode = self.cfg.tool_calls == ToolCallMode::JsonSchema && !req.tools.is_empty();
        let messages: Vec<Value> = if json_mode { json_messages(req) } else { native_messages(&req.messages) };
        let mut body = json!({ "model": req.model, "messages": messages });
        if json_mode {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": { "name": "next_step", "strict": true, "schema": step_schema(&req.tools) },
            });
        } else if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
            body["tool_choice"] = json!("auto");
        }
        if let Some(n) = self.cfg.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(t) = self.cfg.temperature {
            body["temperature"] = json!(t);
        }
        if self.cfg.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }
}

#[async_trait]
impl ModelClient for OpenAiClient {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let body = self.body(req);
        let resp = http::post(&self.http, &self.url, &self.headers, &body, self.cfg.max_retries).await?;
        let bad = |message: String| AgentError::Model { endpoint: self.url.clone(), message, status: None };
        let mut reply = if self.cfg.stream {
            read_stream(resp, &self.url).await?
        } else {
            let bytes = http::read_body(resp, &self.url).await?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("the reply is not JSON: {e}")))?;
            parse_reply(&v).map_err(bad)?
        };
        if self.cfg.tool_calls == ToolCallMode::JsonSchema && !req.tools.is_empty() && reply.tool_calls.is_empty() {
            reply = from_json_step(reply);
        }
        tracing::debug!(provider = self.provider, calls = reply.tool_calls.len(), "model replied");
        Ok(reply)
    }
}

/// Messages in the Chat Completions shape.
fn native_messages(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m {
            Message::System { content } => json!({"role": "system", "content": content}),
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls } => {
                let mut v = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                v
            }
            Message::Tool { call_id, content, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        })
        .collect()
}

/// Messages for `json_schema` mode: the tools described in the system prompt, earlier calls
/// as the JSON the model wrote, results as user turns.
fn json_messages(req: &ModelRequest) -> Vec<Value> {
    let mut tools = String::from(
        "You act by replying with one JSON object. To call a tool: {\"tool\": NAME, \"arguments\": {...}}. \
         When you have the answer: {\"tool\": \"final_answer\", \"answer\": \"...\"}. Tools:\n",
    );
    for t in req.tools.iter() {
        tools.push_str(&format!("- {}: {} Parameters: {}\n", t.name, t.description, t.parameters));
    }
    let mut out = Vec::with_capacity(req.messages.len() + 1);
    let mut system_done = false;
    for m in &req.messages {
        match m {
            Message::System { content } if !system_done => {
                out.push(json!({"role": "system", "content": format!("{content}\n\n{tools}")}));
                system_done = true;
            }
            Message::System { content } => out.push(json!({"role": "system", "content": content})),
            Message::User { content } => out.push(json!({"role": "user", "content": content})),
            Message::Assistant { content, tool_calls } => {
                let text = match tool_calls.first() {
                    Some(c) => {
                        let args: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                        json!({"tool": c.name, "arguments": args}).to_string()
                    }
                    None => json!({"tool": FINAL_ANSWER, "answer": content.clone().unwrap_or_default()}).to_string(),
                };
                out.push(json!({"role": "assistant", "content": text}));
            }
            Message::Tool { name, content, is_error, .. } => {
                let what = if *is_error { "failed" } else { "returned" };
                out.push(json!({"role": "user", "content": format!("Tool `{name}` {what}:\n{content}")}));
            }
        }
    }
    if !system_done {
        out.insert(0, json!({"role": "system", "content": tools}));
    }
    out
}

/// The schema of one step: one of the tools with its own parameters, or the final answer.
pub fn step_schema(tools: &[ToolDef]) -> Value {
    let mut any: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": { "tool": {"const": t.name}, "arguments": t.parameters },
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    any.push(json!({
        "type": "object",
        "properties": { "tool": {"const": FINAL_ANSWER}, "answer": {"type": "string"} },
        "required": ["tool", "answer"],
        "additionalProperties": false,
    }));
    json!({ "anyOf": any })
}

/// Reads a `json_schema`-mode reply's content as a step.
fn from_json_step(mut reply: ModelReply) -> ModelReply {
    let Some(text) = reply.content.as_deref() else { return reply };
    let Ok(Value::Object(step)) = serde_json::from_str::<Value>(text.trim()) else { return reply };
    match step.get("tool").and_then(Value::as_str) {
        Some(FINAL_ANSWER) | None => {
            if let Some(answer) = step.get("answer").and_then(Value::as_str) {
                reply.content = Some(answer.to_owned());
            }
        }
        Some(name) => {
            let arguments = step.get("arguments").cloned().unwrap_or(json!({})).to_string();
            reply.tool_calls.push(ToolCall { id: call_id(0), name: name.to_owned(), arguments });
            reply.content = None;
        }
    }
    reply
}

/// A Chat Completions response body as a [`ModelReply`].
pub fn parse_reply(v: &Value) -> Result<ModelReply, String> {
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or("the reply has no `choices[0]`")?;
    let message = choice.get("message").ok_or("the reply has no `choices[0].message`")?;
    let content = message.get("content").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let f = c.get("function").unwrap_or(&Value::Null);
            tool_calls.push(ToolCall {
                id: c.get("id").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| call_id(i)),
                name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                arguments: arguments_text(f.get("arguments")),
            });
        }
    }
    Ok(ModelReply {
        content,
        tool_calls,
        usage: usage(v.get("usage")),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned),
    })
}

/// Arguments as text: a string as sent, an object (some servers send one) as JSON.
fn arguments_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn usage(v: Option<&Value>) -> Usage {
    let n = |k: &str| v.and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
    Usage { input_tokens: n("prompt_tokens"), output_tokens: n("completion_tokens") }
}

/// Accumulates a streamed reply (`data: {chunk}` ... `data: [DONE]`).
async fn read_stream(mut resp: reqwest::Response, url: &str) -> Result<ModelReply, AgentError> {
    let mut sse = SseLines::default();
    let mut acc = StreamAcc::default();
    let mut total = 0usize;
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => return Err(AgentError::Model { endpoint: url.to_owned(), message: e.to_string(), status: None }),
        };
        total += chunk.len();
        if total > http::MAX_BODY {
            return Err(AgentError::Model {
                endpoint: url.to_owned(),
                message: format!("the streamed reply is larger than {} bytes", http::MAX_BODY),
                status: None,
            });
        }
        for data in sse.feed(&chunk) {
            if data == "[DONE]" {
                return Ok(acc.finish());
            }
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                acc.add(&v);
            }
        }
    }
    Ok(acc.finish())
}

/// The pieces of a streamed reply so far.
#[derive(Debug, Default)]
pub struct StreamAcc {
    content: String,
    calls: Vec<ToolCall>,
    usage: Usage,
    finish: Option<String>,
}

impl StreamAcc {
    /// Adds one chunk.
    pub fn add(&mut self, v: &Value) {
        if v.get("usage").is_some_and(|u| !u.is_null()) {
            self.usage = usage(v.get("usage"));
        }
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else { return };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_owned());
        }
        let Some(delta) = choice.get("delta") else { return };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        for c in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(self.calls.len() as u64) as usize;
            if index > 1024 {
                continue;
            }
            while self.calls.len() <= index {
                let n = self.calls.len();
                self.calls.push(ToolCall { id: call_id(n), name: String::new(), arguments: String::new() });
            }
            let call = &mut self.calls[index];
            if let Some(id) = c.get("id").and_then(Value::as_str) {
                call.id = id.to_owned();
            }
            let f = c.get("function").unwrap_or(&Value::Null);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            match f.get("arguments") {
                Some(Value::String(s)) => call.arguments.push_str(s),
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
    }

    /// The reply.
    pub fn finish(self) -> ModelReply {
        ModelReply {
            content: (!self.content.is_empty()).then_some(self.content),
            tool_calls: self.calls,
            usage: self.usage,
            finish_reason: self.finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_calls_with_string_or_object_arguments() {
        let v = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"x\"}"}},
            {"type": "function", "function": {"name": "grep", "arguments": {"pattern": "y"}}}
        ]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}});
        let r = parse_reply(&v).unwrap();
        assert_eq!(r.tool_calls[0].arguments, "{\"path\":\"x\"}");
        assert_eq!(r.tool_calls[1].arguments, "{\"pattern\":\"y\"}");
        assert!(r.tool_calls[1].id.starts_with("call_"));
        assert_eq!(r.usage, Usage { input_tokens: 7, output_tokens: 3 });
        assert!(parse_reply(&json!({"oops": 1})).is_err());
    }

    #[test]
    fn stream_accumulates_deltas() {
        let mut acc = StreamAcc::default();
        acc.add(&json!({"choices": [{"delta": {"content": "Hel"}}]}));
        acc.add(&json!({"choices": [{"delta": {"content": "lo", "tool_calls": [{"index": 0, "id": "c1", "function": {"name": "re", "arguments": "{\"a\""}}]}}]}));
        acc.add(&json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "ad", "arguments": ":1}"}}]}, "finish_reason": "tool_calls"}]}));
        acc.add(&json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}));
        let r = acc.finish();
        assert_eq!(r.content.as_deref(), Some("Hello"));
        assert_eq!((r.tool_calls[0].name.as_str(), r.tool_calls[0].arguments.as_str()), ("read", "{\"a\":1}"));
        assert_eq!(r.usage.output_tokens, 2);
    }

    #[test]
    fn json_steps_become_calls_or_answers() {
        let call = from_json_step(ModelReply {
            content: Some(r#"{"tool":"read","arguments":{"path":"a"}}"#.into()),
            ..Default::default()
        });
        assert_eq!(call.tool_calls[0].name, "read");
        assert_eq!(call.content, None);
        let answer = from_json_step(ModelReply {
            content: Some(r#"{"tool":"final_answer","answer":"42"}"#.into()),
            ..Default::default()
        });
        assert_eq!((answer.content.as_deref(), answer.tool_calls.len()), (Some("42"), 0));
        let schema = step_schema(&[ToolDef {
            name: "read".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }]);
        assert_eq!(schema["anyOf"].as_array().map(Vec::len), Some(2));
    }
}
