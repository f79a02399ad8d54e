//! The rmcp `ServerHandler`: `tools/list` and `tools/call` over a [`CallHandler`], plus the
//! [`ExtraFeatures`] the server was given, if any (none in toolgate's own use).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
#[allow(deprecated, reason = "logging/setLevel is legacy, served to extra features before 2026-07-28")]
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
use crate::convert;
use crate::extra::ExtraFeatures;
use crate::handler::CallHandler;
use crate::session;

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
    /// Features served beside the handler's tools, if any.
    extra: Option<Arc<dyn ExtraFeatures>>,
}

impl<H> Clone for McpServer<H> {
    fn clone(&self) -> Self {
        McpServer { handler: Arc::clone(&self.handler), extra: self.extra.clone() }
    }
}

impl<H: CallHandler> McpServer<H> {
    /// A server for `handler`: its tools, nothing else.
    pub fn new(handler: Arc<H>) -> Self {
        McpServer { handler, extra: None }
    }

    /// A server for `handler` that also serves `extra` (answered by `extra` itself, not through
    /// the handler).
    pub fn with_extra(handler: Arc<H>, extra: Arc<dyn ExtraFeatures>) -> Self {
        McpServer { handler, extra: Some(extra) }
    }

    /// The handler served.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }
}

/// Sends a call's [`ClientNote`](toolgate_core::ClientNote)s to its client, related to the
/// call's request (over HTTP, on that call's own stream), as a logging notification
/// (`notifications/message`, level `notice`, logger `toolgate.message`): before 2026-07-28
/// always; from 2026-07-28 (logging deprecated by SEP-2577) when the request opts in with
/// `_meta["io.modelcontextprotocol/logLevel"]` at `notice` or below, else as a progress
/// notification's message when it carries a progress token, else a clear refusal.
struct PeerLog {
    peer: rmcp::Peer<RoleServer>,
    legacy: bool,
    /// The 2026-07-28 request's log level opt-in, if any.
    log_level: Option<String>,
    progress: Option<rmcp::model::ProgressToken>,
}

#[async_trait::async_trait]
impl toolgate_core::ClientNotifier for PeerLog {
    #[allow(deprecated, reason = "logging notifications are how MCP clients show a server's notes")]
    async fn notify(&self, note: toolgate_core::ClientNote) -> Result<(), String> {
        let failed = |e: rmcp::service::ServiceError| format!("the MCP client could not be notified: {e}");
        let opted_in = self.log_level.as_deref().is_some_and(|l| matches!(l, "debug" | "info" | "notice"));
        if self.legacy || opted_in {
            let mut param =
                rmcp::model::LoggingMessageNotificationParam::new(rmcp::model::LoggingLevel::Notice, note.data);
            param.logger = Some(note.logger);
            return self.peer.notify_logging_message(param).await.map_err(failed);
        }
        if let Some(token) = &self.progress {
            let mut param = ProgressNotificationParam::new(token.clone(), 0.0);
            param.message = Some(format!("{}: {}", note.logger, note.data["content"].as_str().unwrap_or_default()));
            return self.peer.notify_progress(param).await.map_err(failed);
        }
        Err(match &self.log_level {
            Some(level) => {
                format!("the MCP client asked for log messages at `{level}` and above, and a message is a notice")
            }
            None => "the MCP client did not opt in to log messages (`_meta` `io.modelcontextprotocol/logLevel` on the \
                     call) and sent no progress token, so it would not see the message; use another channel"
                .to_owned(),
        })
    }
}

/// Without extra features, methods of capabilities not declared are not found (rmcp's defaults
/// would answer them with empty results).
macro_rules! extra_or_not_found {
    ($self:ident, $method:ty) => {
        match &$self.extra {
            Some(extra) => extra,
            None => return Err(McpError::method_not_found::<$method>()),
        }
    };
}

impl<H: CallHandler> rmcp::ServerHandler for McpServer<H> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = match &self.extra {
            Some(extra) => extra.capabilities(),
            None if self.handler.tool_changes().is_some() => {
                #[allow(deprecated, reason = "logging before 2026-07-28: `message` to an `mcp` channel")]
                {
                    ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_logging().build()
                }
            }
            // Logging: `message` to an `mcp` channel sends its text as a log notification.
            #[allow(deprecated, reason = "logging before 2026-07-28")]
            None => ServerCapabilities::builder().enable_tools().enable_logging().build(),
        };
        // Long calls may come back as tasks kept by the handler's port.
        let capabilities =
            if self.handler.tasks().is_some() { crate::tasks::declare(capabilities) } else { capabilities };
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
        // The whole list's changes (a bridged server reconnected), when the handler has one
        // list: a per-user gateway has none of its own, only its callers' grants.
        let mut changes = self.handler.tool_changes();
        // The caller's own changes (a grant of theirs), when the server knows its callers.
        let caller = context.extensions.get::<http::request::Parts>().and_then(|p| p.extensions.get::<crate::Caller>());
        let mut mine = caller.and_then(|c| self.handler.caller_changes(c));
        if changes.is_none() && mine.is_none() {
            return;
        }
        for receiver in changes.iter_mut().chain(mine.iter_mut()) {
            receiver.mark_unchanged();
        }
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                let theirs = async {
                    match &mut mine {
                        Some(mine) => mine.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                let all = async {
                    match &mut changes {
                        Some(changes) => changes.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    open = all => {
                        if !open {
                            return;
                        }
                        // A reconnecting server swaps many tools at once: one notification.
                        tokio::time::sleep(LIST_CHANGED_DEBOUNCE).await;
                        if let Some(changes) = &mut changes {
                            changes.mark_unchanged();
                        }
                        if peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    open = theirs => {
                        if !open {
                            mine = None;
                            continue;
                        }
                        tokio::time::sleep(LIST_CHANGED_DEBOUNCE).await;
                        if let Some(mine) = &mut mine {
                            mine.mark_unchanged();
                        }
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut ctx = self.handler.context();
        session::apply(&mut ctx, &context);
        let caller = session::caller(&context);
        let mut tools: Vec<Tool> = self
            .handler
            .list(&ctx)
            .iter()
            .filter(|spec| caller.is_none_or(|c| c.may_use(&spec.name)))
            .map(convert::tool)
            .collect();
        if let Some(extra) = &self.extra {
            tools.extend(extra.tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // Only extra features declare `x-mcp-header` parameters, whose headers rmcp checks (the
        // handler's tools have none).
        self.extra.as_ref().and_then(|extra| extra.tool(name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(extra) = &self.extra
            && let Some(result) = extra.call_tool(&request, &context).await
        {
            return result;
        }
        if let Some(caller) = session::caller(&context).filter(|c| !c.may_use(&request.name)) {
            // Said as the gate says an unknown tool, so a key's scope reveals nothing beyond it.
            let refused = ToolError::UnknownTool { name: request.name.to_string(), suggestion: None };
            tracing::debug!("key {:?} of {} may not call {}", caller.key, caller.user, request.name);
            return Ok(convert::failure(&refused).into());
        }
        let params = request.arguments.map_or_else(|| Value::Object(Default::default()), Value::Object);
        let mut ctx = self.handler.context();
        session::apply(&mut ctx, &context);
        ctx.trace_parent = crate::trace::parent(&context);
        // A client that accepts tasks gets a long call back as one at once (SEP-2663: the server
        // decides); it runs in the background as the caller, through the same pipeline.
        if let Some(host) = self.handler.tasks().filter(|h| h.runs_as_task(&ctx, &request.name))
            && context.client_capabilities().is_some_and(|c| c.supports_tasks())
        {
            return match host.start(&ctx, &request.name, params).await {
                Ok(state) => Ok(CallToolResponse::Task(crate::tasks::created(&state))),
                Err(e @ ToolError::UnknownTool { .. }) => Err(McpError::invalid_params(e.to_string(), None)),
                Err(e) => Ok(convert::failure(&e).into()),
            };
        }
        // A cancelled request (or, on 2026-07-28 over HTTP, a closed stream) cancels the call;
        // so does, in a session, a client that closed the call's stream and did not come back.
        ctx.cancel = context.ct.clone();
        let departed = crate::http_sessions::client_gone(&context).map(|gone| {
            let cancel = ctx.cancel.clone();
            tokio::spawn(async move {
                gone.cancelled().await;
                cancel.cancel();
            })
        });
        // `message` to an `mcp` channel reaches this client through the call's own request.
        ctx.client = toolgate_core::ClientChannel::new(Arc::new(PeerLog {
            peer: context.peer.clone(),
            legacy: context.protocol_version().is_none_or(|v| v.as_str() < ProtocolVersion::V_2026_07_28.as_str()),
            log_level: context.meta.get("io.modelcontextprotocol/logLevel").and_then(|v| v.as_str()).map(str::to_owned),
            progress: context.meta.get_progress_token(),
        }));
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
        } else if let Some(elicitation) = context.client_capabilities().and_then(|c| c.elicitation) {
            let inline = InlineRound::from_responses(request.input_responses.as_ref())
                .with_url(elicitation.url.is_some(), request.request_state.clone());
            let inline = Arc::new(inline);
            round = Some(Arc::clone(&inline));
            Some(Channel::Inline(inline))
        } else {
            None
        };
        let result = approval::with_channel(channel, self.handler.call(&ctx, &request.name, params)).await;
        drop(ctx);
        if let Some(departed) = departed {
            departed.abort();
        }
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
        extra_or_not_found!(self, ListResourcesRequestMethod).list_resources().await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        extra_or_not_found!(self, ListResourceTemplatesRequestMethod).list_resource_templates().await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        extra_or_not_found!(self, ReadResourceRequestMethod).read_resource(request, context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        extra_or_not_found!(self, ListPromptsRequestMethod).list_prompts().await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        extra_or_not_found!(self, GetPromptRequestMethod).get_prompt(request, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        extra_or_not_found!(self, CompleteRequestMethod).complete(request).await
    }

    #[allow(deprecated, reason = "logging/setLevel is legacy, served to extra features before 2026-07-28")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // 2026-07-28 removed `logging/setLevel` (each request carries its level).
        let modern = context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if modern {
            return Err(McpError::method_not_found::<SetLevelRequestMethod>());
        }
        match &self.extra {
            Some(extra) => extra.set_level(request).await,
            // Accepted: toolgate's only log notifications are the notes a `message` call sends
            // to an `mcp` channel, which the user asked for, so they go at any level.
            None => Ok(()),
        }
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // Without extra features there is nothing to listen to.
        self.extra.as_ref().and_then(|extra| extra.accepted_subscription_filter(requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        match &self.extra {
            Some(extra) => extra.listen(subscription).await,
            None => subscription.cancelled().await,
        }
        Ok(())
    }

    #[allow(deprecated, reason = "legacy resources/subscribe, served to extra features")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        extra_or_not_found!(self, SubscribeRequestMethod).subscribe(request).await
    }

    #[allow(deprecated, reason = "legacy resources/unsubscribe, served to extra features")]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        extra_or_not_found!(self, UnsubscribeRequestMethod).unsubscribe(request).await
    }

    /// `tasks/get`: the caller's own task, with its result once it ended.
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let (host, ctx) = crate::tasks::host_for(&*self.handler, &context)?;
        host.get(&ctx, &request.task_id).await.map(crate::tasks::detailed).map_err(|e| crate::tasks::refused(&e))
    }

    /// `tasks/cancel`: stops the caller's running task (its processes killed).
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (host, ctx) = crate::tasks::host_for(&*self.handler, &context)?;
        host.cancel(&ctx, &request.task_id).await.map(drop).map_err(|e| crate::tasks::refused(&e))
    }

    /// `tasks/update`: toolgate's tasks ask for no input.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (host, ctx) = crate::tasks::host_for(&*self.handler, &context)?;
        crate::tasks::update(&*host, &ctx, request).await
    }
}
