//! [`ExtraFeatures`]: more MCP server features than the handler's tools, answered directly.

// `logging/setLevel` and `resources/(un)subscribe` are deprecated (2026-07-28), but still part of
// the protocol versions before it, which this server speaks.
#![allow(deprecated)]

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams, CompleteResult,
    GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod, ListResourcesResult,
    ReadResourceRequestMethod, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    SetLevelRequestMethod, SetLevelRequestParams, SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter,
    Tool, UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};

/// Server features an [`McpServer`](crate::McpServer) serves beside its
/// [`CallHandler`](crate::CallHandler)'s tools: more tools, resources, prompts, completions,
/// logging and `subscriptions/listen` streams, in rmcp's types.
///
/// They are answered here, directly: they do **not** go through the handler (for toolgate, the
/// gate's pipeline: no policy, approval or audit), so an implementation must touch nothing but
/// the client. toolgate itself serves none (`toolgate serve` passes no extra features); the
/// test-only `toolgate-conformance` crate serves the official MCP conformance suite's fixtures
/// through this. Give one to [`McpServer::with_extra`](crate::McpServer::with_extra), or over
/// HTTP to [`HttpConfig::extra`](crate::HttpConfig::extra).
///
/// Every method has a default that serves nothing: no tools, and "method not found" for the
/// other methods (the answer a server gives for a capability it did not declare).
#[async_trait::async_trait]
pub trait ExtraFeatures: Send + Sync + std::fmt::Debug + 'static {
    /// The capabilities the server declares instead of its default (tools only): declare
    /// `tools` too, and whatever else this implementation answers.
    fn capabilities(&self) -> ServerCapabilities;

    /// Tools listed after the handler's.
    fn tools(&self) -> Vec<Tool> {
        Vec::new()
    }

    /// The tool called `name`, for rmcp's checks of a request against its tool's schema
    /// (`Mcp-Param-*` headers). Default: the one [`ExtraFeatures::tools`] lists.
    fn tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    /// `tools/call`: the result for a tool of [`ExtraFeatures::tools`], or `None` when `request`
    /// names none of them (the handler then runs it).
    async fn call_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let _ = (request, context);
        None
    }

    /// `resources/list`.
    async fn list_resources(&self) -> Result<ListResourcesResult, McpError> {
        Err(McpError::method_not_found::<ListResourcesRequestMethod>())
    }

    /// `resources/templates/list`.
    async fn list_resource_templates(&self) -> Result<ListResourceTemplatesResult, McpError> {
        Err(McpError::method_not_found::<ListResourceTemplatesRequestMethod>())
    }

    /// `resources/read`.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let _ = (request, context);
        Err(McpError::method_not_found::<ReadResourceRequestMethod>())
    }

    /// `resources/subscribe` (before 2026-07-28).
    async fn subscribe(&self, request: SubscribeRequestParams) -> Result<(), McpError> {
        let _ = request;
        Err(McpError::method_not_found::<SubscribeRequestMethod>())
    }

    /// `resources/unsubscribe` (before 2026-07-28).
    async fn unsubscribe(&self, request: UnsubscribeRequestParams) -> Result<(), McpError> {
        let _ = request;
        Err(McpError::method_not_found::<UnsubscribeRequestMethod>())
    }

    /// `prompts/list`.
    async fn list_prompts(&self) -> Result<ListPromptsResult, McpError> {
        Err(McpError::method_not_found::<ListPromptsRequestMethod>())
    }

    /// `prompts/get`.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let _ = (request, context);
        Err(McpError::method_not_found::<GetPromptRequestMethod>())
    }

    /// `completion/complete`.
    async fn complete(&self, request: CompleteRequestParams) -> Result<CompleteResult, McpError> {
        let _ = request;
        Err(McpError::method_not_found::<CompleteRequestMethod>())
    }

    /// `logging/setLevel` (before 2026-07-28; the server answers "method not found" on
    /// 2026-07-28 requests itself, without asking).
    async fn set_level(&self, request: SetLevelRequestParams) -> Result<(), McpError> {
        let _ = request;
        Err(McpError::method_not_found::<SetLevelRequestMethod>())
    }

    /// The part of a 2026-07-28 `subscriptions/listen` filter accepted; `None` (the default):
    /// nothing to listen to.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let _ = requested;
        None
    }

    /// Serves one accepted `subscriptions/listen` stream until the client closes it.
    async fn listen(&self, subscription: SubscriptionContext) {
        subscription.cancelled().await;
    }
}
