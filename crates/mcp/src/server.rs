//! The rmcp `ServerHandler`: `tools/list` and `tools/call` over a [`CallHandler`].

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use toolgate_core::{Progress, ProgressSink, ToolError};

use crate::approval::{self, Channel, InlineRound};
use crate::convert;
use crate::handler::CallHandler;

/// How long a finished call waits for its last progress notifications to go out.
const PROGRESS_DRAIN: Duration = Duration::from_secs(1);

/// An MCP server over a [`CallHandler`]. Cheap to clone: one per HTTP session shares the handler.
#[derive(Debug)]
pub struct McpServer<H> {
    handler: Arc<H>,
}

impl<H> Clone for McpServer<H> {
    fn clone(&self) -> Self {
        McpServer { handler: Arc::clone(&self.handler) }
    }
}

impl<H: CallHandler> McpServer<H> {
    /// A server for `handler`.
    pub fn new(handler: Arc<H>) -> Self {
        McpServer { handler }
    }

    /// The handler served.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }
}

impl<H: CallHandler> rmcp::ServerHandler for McpServer<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolgate: policy-checked, audited tools confined to one workspace. Tool errors say what \
                 to do next; calls that need approval ask the user when this client supports elicitation.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let ctx = self.handler.context();
        let tools = self.handler.list(&ctx).iter().map(convert::tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let params = request.arguments.map_or_else(|| Value::Object(Default::default()), Value::Object);
        let mut ctx = self.handler.context();
        // A cancelled request (or, on 2026-07-28 over HTTP, a closed stream) cancels the call.
        ctx.cancel = context.ct.clone();
        let forwarder = match context.meta.get_progress_token() {
            Some(token) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
                ctx.progress = ProgressSink::new(move |p| {
                    let _ = tx.send(p);
                });
                let peer = context.peer.clone();
                Some(tokio::spawn(async move {
                    while let Some(p) = rx.recv().await {
                        let mut note = ProgressNotificationParam::new(token.clone(), p.progress);
                        note.total = p.total;
                        note.message = p.message;
                        if peer.notify_progress(note).await.is_err() {
                            break;
                        }
                    }
                }))
            }
            None => None,
        };
        // Server-to-client requests (elicitation) exist only before 2026-07-28; from then on an
        // approval question goes back in an `InputRequiredResult` and comes back on the retry.
        let legacy = context.protocol_version().is_none_or(|v| v.as_str() < ProtocolVersion::V_2026_07_28.as_str());
        let mut round = None;
        let channel = if legacy {
            approval::can_elicit(&context.peer).then(|| Channel::Request(context.peer.clone()))
        } else if context.client_capabilities().is_some_and(|c| c.elicitation.is_some()) {
            let inline = Arc::new(InlineRound::from_responses(request.input_responses.as_ref()));
            round = Some(Arc::clone(&inline));
            Some(Channel::Inline(inline))
        } else {
            None
        };
        let result = approval::with_channel(channel, self.handler.call(&ctx, &request.name, params)).await;
        drop(ctx);
        if let Some(forwarder) = forwarder {
            let _ = tokio::time::timeout(PROGRESS_DRAIN, forwarder).await;
        }
        if let (Err(ToolError::NeedsApproval { .. }), Some(round)) = (&result, round)
            && let Some(input_required) = round.input_required()
        {
            return Ok(CallToolResponse::InputRequired(input_required));
        }
        match result {
            Ok(output) => Ok(convert::success(output).into()),
            // The specification makes an unknown tool a protocol error; every other failure is
            // a result the model reads.
            Err(e @ ToolError::UnknownTool { .. }) => Err(McpError::invalid_params(e.to_string(), None)),
            Err(e) => Ok(convert::failure(&e).into()),
        }
    }
}
