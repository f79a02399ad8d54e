//! Stages 6 and 9: code that runs before and after every matching call.
//!
//! A [`Hook`] can block a call before it runs (its message becomes the error the model sees) and
//! observe the result after. Library users register hooks with [`crate::GateBuilder::hook`].

use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};

/// What a pre-call hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Let the call go on.
    Continue,
    /// Stop the call; the message is what the model reads.
    Block(String),
}

/// Code run around calls.
#[async_trait::async_trait]
pub trait Hook: Send + Sync + fmt::Debug {
    /// Whether this hook applies to `tool` (default: every tool).
    fn matches(&self, _tool: &str) -> bool {
        true
    }

    /// Runs before the tool, after approval.
    async fn before(&self, _ctx: &CallContext, _tool: &str, _params: &Value) -> HookVerdict {
        HookVerdict::Continue
    }

    /// Runs after the tool, with what the model will receive.
    async fn after(&self, _ctx: &CallContext, _tool: &str, _result: &Result<ToolOutput, ToolError>) {}
}

pub(crate) async fn before(
    hooks: &[Arc<dyn Hook>],
    ctx: &CallContext,
    tool: &str,
    params: &Value,
) -> Result<(), ToolError> {
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        if let HookVerdict::Block(message) = hook.before(ctx, tool, params).await {
            return Err(ToolError::Denied { tool: tool.to_owned(), reason: format!("blocked by a hook: {message}") });
        }
    }
    Ok(())
}

pub(crate) async fn after(
    hooks: &[Arc<dyn Hook>],
    ctx: &CallContext,
    tool: &str,
    result: &Result<ToolOutput, ToolError>,
) {
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        hook.after(ctx, tool, result).await;
    }
}
