//! The rmcp `ServerHandler`: `tools/list` and `tools/call` over a [`CallHandler`], plus the
//! conformance suite's fixtures when the handler asks for them (`conformance.rs`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
#[allow(deprecated, reason = "logging/setLevel is legacy, served for the conformance suite")]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams, CompleteResult,
    GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceRequestMethod, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use serde_json::Value;
use toolgate_core::{Progress, ProgressSink, ToolError};

use crate::approval::{self, Channel, InlineRound};
use crate::conformance::{self, Fixtures};
use crate::convert;
use crate::handler::CallHandler;

/// How long tool-list changes are gathered into one `notifications/tools/list_changed`.
const LIST_CHANGED_DEBOUNCE: Duration = Duration::from_millis(100);

/// How often a session's list-change watcher checks that its client is still there.
const SESSION_CHECK: Duration = Duration::from_secs(15);

/// How long a finished call waits for its last progress notifications to go out.
const PROGRESS_DRAIN: Duration = Duration::from_secs(1);

/// An MCP server over a [`CallHandler`]. Cheap to clone: one per HTTP session shares the handler.
#[derive(Debug)]
pub struct McpServer<H> {
    handler: Arc<H>,
    /// The conformance suite's fixtures, only when the handler asks for them.
    fixtures: Option<Arc<Fixtures>>,
}

impl<H> Clone for McpServer<H> {
    fn clone(&self) -> Self {
        McpServer { handler: Arc::clone(&self.handler), fixtures: self.fixtures.clone() }
    }
}

impl<H: CallHandler> McpServer<H> {
    /// A server for `handler` (with the conformance fixtures when
    /// [`CallHandler::conformance_fixtures`] says so).
    pub fn new(handler: Arc<H>) -> Self {
        let fixtures = handler.conformance_fixtures().then(|| Arc::new(Fixtures::default()));
        McpServer { handler, fixtures }
    }

    /// The handler served.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }
}

/// Without fixtures, methods of capabilities not declared are not found (rmcp's defaults would
/// answer them with empty results).
macro_rules! fixtures_or_not_found {
    ($self:ident, $method:ty) => {
        match &$self.fixtures {
            Some(fixtures) => fixtures,
            None => return Err(McpError::method_not_found::<$method>()),
        }
    };
}

impl<H: CallHandler> rmcp::ServerHandler for McpServer<H> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = match self.fixtures {
            Some(_) => Fixtures::capabilities(),
            None if self.handler.tool_changes().is_some() => {
                ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build()
            }
            None => ServerCapabilities::builder().enable_tools().build(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolgate: policy-checked, audited tools confined to one workspace. Tool errors say what \
                 to do next; calls that need approval ask the user when this client supports elicitation.",
            )
    }

    /// A session began (protocol eras with `initialize`): from now on, tell this client when the
    /// tool list changes, until its transport closes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(mut changes) = self.handler.tool_changes() else { return };
        changes.mark_unchanged();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        // A reconnecting server swaps many tools at once: one notification.
                        tokio::time::sleep(LIST_CHANGED_DEBOUNCE).await;
                        changes.mark_unchanged();
                        if peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(SESSION_CHECK) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let ctx = self.handler.context();
        let mut tools: Vec<Tool> = self.handler.list(&ctx).iter().map(convert::tool).collect();
        if self.fixtures.is_some() {
            tools.extend_from_slice(Fixtures::tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // Only the fixtures declare `x-mcp-header` parameters, whose headers rmcp checks.
        self.fixtures.as_ref().and_then(|_| Fixtures::tool(name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(fixtures) = &self.fixtures
            && let Some(result) = fixtures.call(&request, &context).await
        {
            return result;
        }
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

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        fixtures_or_not_found!(self, ListResourcesRequestMethod);
        Fixtures::resources()
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        fixtures_or_not_found!(self, ListResourceTemplatesRequestMethod);
        Fixtures::templates()
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        fixtures_or_not_found!(self, ReadResourceRequestMethod);
        Fixtures::read(&request.uri).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        fixtures_or_not_found!(self, ListPromptsRequestMethod);
        Fixtures::prompts()
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        fixtures_or_not_found!(self, GetPromptRequestMethod).get_prompt(&request, &context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        fixtures_or_not_found!(self, CompleteRequestMethod);
        Fixtures::complete(&request)
    }

    #[allow(deprecated, reason = "logging/setLevel is legacy, served for the conformance suite")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let fixtures = fixtures_or_not_found!(self, SetLevelRequestMethod);
        // 2026-07-28 removed `logging/setLevel` (each request carries its level).
        if conformance::modern(&context) {
            return Err(McpError::method_not_found::<SetLevelRequestMethod>());
        }
        fixtures.set_level(&request.level)
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // Without fixtures nothing changes, so there is nothing to listen to.
        self.fixtures.as_ref().map(|_| requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        match &self.fixtures {
            Some(fixtures) => fixtures.listen(subscription).await,
            None => subscription.cancelled().await,
        }
        Ok(())
    }

    #[allow(deprecated, reason = "legacy resources/subscribe, served for the conformance suite")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        fixtures_or_not_found!(self, SubscribeRequestMethod).subscribe(&request.uri);
        Ok(())
    }

    #[allow(deprecated, reason = "legacy resources/unsubscribe, served for the conformance suite")]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        fixtures_or_not_found!(self, UnsubscribeRequestMethod).unsubscribe(&request.uri);
        Ok(())
    }
}
