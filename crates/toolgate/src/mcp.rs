//! Serving a [`Gate`] over MCP (`toolgate serve`), and asking for approvals through the MCP
//! client.
//!
//! The protocol lives in the `toolgate-mcp` crate, re-exported here; this module only plugs the
//! gate into it: [`Gate`] implements [`CallHandler`], and [`McpApprover`] is the
//! [`Approver`] that asks the user of the calling MCP client through form elicitation.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolgate::{Gate, mcp};
//!
//! let gate = Gate::builder(".").approver(Arc::new(mcp::McpApprover::default())).build()?;
//! mcp::serve_stdio(Arc::new(gate), tokio_util::sync::CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
pub use toolgate_mcp::{
    ApiHandler, Authenticator, CallHandler, Caller, ClientAnswer, Error, HttpConfig, HttpToken, McpServer, RESULT_META,
    Refusal, ask_client, serve_http, serve_stdio,
};

use crate::{ApprovalAnswer, ApprovalRequest, Approver, Gate};

#[async_trait::async_trait]
impl CallHandler for Gate {
    fn context(&self) -> CallContext {
        Gate::context(self)
    }

    fn list(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        self.visible_tools(ctx)
    }

    fn find(&self, ctx: &CallContext, name: &str) -> Option<ToolSpec> {
        self.visible_tool(ctx, name)
    }

    /// The gate's result, with the structured copy only for tools whose results carry it
    /// ([`ToolSpec::returns_structured`]): clients that find `structuredContent` hand the model
    /// that alone, so other tools send their text (where the output stage folded any JSON the
    /// text lacked), and their facts in `_meta`.
    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let mut output = Gate::call(self, ctx, name, params).await?;
        if output.structured.is_some()
            && !self.registry().resolve(name).is_some_and(|t| t.tool.spec().returns_structured())
        {
            output.structured = None;
        }
        Ok(output)
    }

    fn tool_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.registry().changes())
    }

    /// Long calls as MCP tasks, kept as job records by the automation family (`crate::tasks`).
    fn tasks(&self) -> Option<std::sync::Arc<dyn toolgate_mcp::TaskHost>> {
        self.families().iter().find_map(|f| f.mcp_tasks(self.services()))
    }

    fn shutdown(&self) {
        Gate::shutdown(self);
    }
}

/// Asks the user of the MCP client that made the call, through form elicitation.
///
/// Before protocol 2026-07-28 the question is an `elicitation/create` request; on 2026-07-28 it
/// goes back to the client in an `InputRequiredResult` and the answer arrives with the retried
/// call. When the client cannot be asked (it declared no elicitation), the call is refused with
/// a message saying what needs approval and how to grant it.
#[derive(Debug, Clone)]
pub struct McpApprover {
    /// How long the client's request may stay open; the gate's `[approval] timeout_secs`
    /// also applies.
    pub timeout: Duration,
}

impl Default for McpApprover {
    fn default() -> Self {
        McpApprover { timeout: Duration::from_secs(600) }
    }
}

#[async_trait::async_trait]
impl Approver for McpApprover {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        let answer = ask_client(&request.to_string(), self.timeout).await?;
        Some(match answer {
            ClientAnswer::AllowOnce => ApprovalAnswer::AllowOnce,
            ClientAnswer::AllowAlways => ApprovalAnswer::AllowAlways,
            ClientAnswer::Deny { message } => ApprovalAnswer::Deny { message },
        })
    }
}

/// The approvals API (`GET /api/approvals`, `POST /api/approvals/{id}`) served beside `/mcp`;
/// a decision is recorded as the key's user (`local` for the single-user token).
impl ApiHandler for crate::approvals::PendingApprovals {
    fn handle(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        self.handle_api(method, path, body)
    }

    fn handle_as(&self, caller: Option<&Caller>, method: &str, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        self.handle_api_as(caller.map_or("local", |c| c.user.as_str()), method, path, body)
    }
}
