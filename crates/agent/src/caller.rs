//! [`ToolCaller`]: how the runtime calls tools without knowing the gate.

use async_trait::async_trait;
use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_store::{SessionCalls, SessionQuery};

/// Calls tools on an agent's behalf. The `toolgate` crate implements it for `Gate`, so every
/// call an agent makes runs through the gate's whole pipeline (policy for the agent's narrowed
/// context, validation, limits, approvals, output shaping, audit).
#[async_trait]
pub trait ToolCaller: Send + Sync {
    /// The base context of a call (workspace, configured user and provider).
    fn context(&self) -> CallContext;

    /// The tools `ctx`'s caller may see, sorted by name.
    fn tools(&self, ctx: &CallContext) -> Vec<ToolSpec>;

    /// Runs one call. `ctx.cancel` cancels it.
    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError>;

    /// Whether [`ToolCaller::call`] waits for [`CallContext::turn`] before the tool runs (the
    /// gate does, after its approval stage): then the runtime starts a turn's calls together,
    /// so their approvals are asked together. Default: `false`, the calls are made one by one.
    fn orders_turns(&self) -> bool {
        false
    }

    /// Records a call the runtime refused before it reached [`ToolCaller::call`] (arguments
    /// that are not a JSON object or too large, a tool the agent was not offered), so the audit
    /// log shows every call a model made. `arguments` is the model's raw text. Default: nothing.
    fn refused(&self, ctx: &CallContext, name: &str, arguments: &str, error: &ToolError) {
        let _ = (ctx, name, arguments, error);
    }

    /// `text` with secrets redacted by the gate's leak detector, for model text and
    /// agent-to-agent messages (which are not tool output, so the output stage never sees them):
    /// the gate records an audit event for what it redacts. Default: `text` unchanged.
    fn scrub(&self, ctx: &CallContext, text: &str) -> String {
        let _ = ctx;
        text.to_owned()
    }

    /// What the gate's audit log knows of callers' sessions (an MCP client's, a CLI call's),
    /// for `session_status` and `sessions_list`. Default: nothing.
    fn session_calls(&self, query: &SessionQuery<'_>) -> Vec<SessionCalls> {
        let _ = query;
        Vec::new()
    }
}
