//! Model clients: the conversation types, the [`ModelClient`] trait, and clients for
//! OpenAI-compatible Chat Completions and the Anthropic Messages API.

mod anthropic;
mod http;
mod openai;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use anthropic::AnthropicClient;
pub use openai::OpenAiClient;

use crate::AgentError;
use crate::config::{ProviderConfig, ProviderKind};

/// One tool call a model asked for. `arguments` is the raw text the model wrote: it is parsed
/// (and may be malformed) by the agent loop, not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id (the model's, or one made up when it sent none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them (JSON text, hopefully an object).
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions.
    System {
        /// The text.
        content: String,
    },
    /// The user's (or the delegating agent's) words.
    User {
        /// The text.
        content: String,
    },
    /// A model turn: text, tool calls, or both.
    Assistant {
        /// The text, if any.
        content: Option<String>,
        /// The tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result.
    Tool {
        /// The call it answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result or the error, as text.
        content: String,
        /// Whether it is an error.
        is_error: bool,
    },
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its parameters' JSON Schema.
    pub parameters: Value,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model name.
    pub model: String,
    /// The conversation so far (a leading [`Message::System`] is the system prompt).
    pub messages: Vec<Message>,
    /// The tools the model may call: shared by a run's requests, so a turn does not copy every
    /// tool's schema (with every tool offered, that copy was most of a turn's own cost).
    pub tools: Arc<[ToolDef]>,
}

/// Tokens used by one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Completion (output) tokens.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
    }
}

/// What a model answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelReply {
    /// Its text, if any.
    pub content: Option<String>,
    /// The tools it wants called; empty means this is its final answer.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    pub usage: Usage,
    /// Why it stopped (`stop`, `tool_calls`, `length`, `end_turn`, ...), as the API says.
    pub finish_reason: Option<String>,
}

/// Something that answers model requests. Implement it to run agents on another API (or on an
/// MCP client's model through sampling). Cancellation is by dropping the future: the runtime
/// races every request with its cancellation token.
#[async_trait]
pub trait ModelClient: Send + Sync + std::fmt::Debug {
    /// Sends one request and returns the model's reply.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, AgentError>;
}

/// A client for the provider `name` configured by `cfg`; the API key is read from the
/// environment variable `cfg.api_key_env` now.
pub fn client_for(name: &str, cfg: &ProviderConfig) -> Result<Arc<dyn ModelClient>, AgentError> {
    let key = match &cfg.api_key_env {
        None => None,
        Some(var) => Some(std::env::var(var).map_err(|_| AgentError::Provider {
            provider: name.to_owned(),
            message: format!("the environment variable `{var}` (api_key_env) is not set"),
        })?),
    };
    Ok(match cfg.kind {
        ProviderKind::Openai => Arc::new(OpenAiClient::new(name, cfg.clone(), key)?),
        ProviderKind::Anthropic => Arc::new(AnthropicClient::new(name, cfg.clone(), key)?),
    })
}

/// A made-up call id for models that send none.
pub(crate) fn call_id(n: usize) -> String {
    format!("call_{}_{n}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}
