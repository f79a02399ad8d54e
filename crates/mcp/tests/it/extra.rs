//! [`ExtraFeatures`]: a server without them serves its handler's tools and nothing else (the
//! methods of capabilities it did not declare are "method not found", not rmcp's empty
//! defaults); a server with them declares their capabilities, lists their tools after the
//! handler's and answers their calls without asking the handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ListResourcesResult,
    ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService, ServiceError};
use serde_json::{Value, json};
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_mcp::{CallHandler, ExtraFeatures, McpServer};

/// One `echo` tool; counts the calls it runs.
#[derive(Debug, Default)]
struct Echo {
    calls: AtomicUsize,
}

#[toolgate_core::async_trait]
impl CallHandler for Echo {
    fn context(&self) -> CallContext {
        CallContext::new(std::env::temp_dir())
    }

    fn list(&self, _ctx: &CallContext) -> Vec<ToolSpec> {
        vec![ToolSpec::new("echo", "Echo.", json!({"type": "object", "properties": {"message": {"type": "string"}}}))]
    }

    async fn call(&self, _ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match name {
            "echo" => Ok(ToolOutput::text(params["message"].as_str().unwrap_or_default())),
            _ => Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None }),
        }
    }
}

/// A `greet` tool and one resource.
#[derive(Debug)]
struct Greeting;

#[async_trait::async_trait]
impl ExtraFeatures for Greeting {
    fn capabilities(&self) -> ServerCapabilities {
        ServerCapabilities::builder().enable_tools().enable_resources().build()
    }

    fn tools(&self) -> Vec<Tool> {
        let schema: rmcp::model::JsonObject = serde_json::from_value(json!({"type": "object"})).unwrap();
        vec![Tool::new("greet", "Greets.", Arc::new(schema))]
    }

    async fn call_tool(
        &self,
        request: &CallToolRequestParams,
        _context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, rmcp::ErrorData>> {
        (request.name == "greet")
            .then(|| Ok(CallToolResult::success(vec![ContentBlock::text("hello from the extra features")]).into()))
    }

    async fn list_resources(&self) -> Result<ListResourcesResult, rmcp::ErrorData> {
        let resources = serde_json::from_value(json!([{"uri": "test://one", "name": "one"}]))
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        Ok(ListResourcesResult::with_all_items(resources))
    }
}

/// A client connected to `server` in process.
async fn connect(server: McpServer<Echo>) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("MCP handshake")
}

fn method_not_found<T: std::fmt::Debug>(result: Result<T, ServiceError>) -> bool {
    matches!(result, Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND)
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect()
}

#[tokio::test]
async fn without_extra_features_only_the_handlers_tools_are_served() {
    let client = connect(McpServer::new(Arc::new(Echo::default()))).await;
    let capabilities = client.peer_info().expect("server info").capabilities.clone();
    assert!(capabilities.tools.is_some());
    assert!(capabilities.resources.is_none() && capabilities.prompts.is_none());
    // Logging: `message` to an `mcp` channel notifies the client that way.
    assert!(capabilities.logging.is_some());
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["echo"]);
    assert!(method_not_found(client.list_resources(None).await), "resources/list");
    assert!(method_not_found(client.list_prompts(None).await), "prompts/list");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn extra_features_are_served_beside_the_handlers_tools_and_not_through_it() {
    let handler = Arc::new(Echo::default());
    let client = connect(McpServer::with_extra(Arc::clone(&handler), Arc::new(Greeting))).await;
    let capabilities = client.peer_info().expect("server info").capabilities.clone();
    assert!(capabilities.tools.is_some() && capabilities.resources.is_some());
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["echo", "greet"], "the handler's first");

    let greeted = client.call_tool(CallToolRequestParams::new("greet")).await.unwrap();
    assert_eq!(text(&greeted), "hello from the extra features");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 0, "the handler never saw the extra tool's call");
    let mut echo = CallToolRequestParams::new("echo");
    if let Value::Object(args) = json!({"message": "hi"}) {
        echo = echo.with_arguments(args);
    }
    assert_eq!(text(&client.call_tool(echo).await.unwrap()), "hi");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);

    let resources = client.list_resources(None).await.unwrap();
    assert_eq!(resources.resources.len(), 1);
    // What the extra features leave to the trait's defaults is not found either.
    assert!(method_not_found(client.list_prompts(None).await), "prompts/list");
    let _ = client.cancel().await;
}
