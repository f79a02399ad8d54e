//! What the MCP server serves.

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};

/// A tool runtime the MCP server can serve: the `toolgate` crate implements it for `Gate`.
///
/// The server takes a fresh [`CallContext`] from [`CallHandler::context`] for every request,
/// replaces its cancellation token and progress sink with ones wired to the client, and hands
/// it to [`CallHandler::list`] or [`CallHandler::call`].
#[async_trait::async_trait]
pub trait CallHandler: Send + Sync + 'static {
    /// A context for a call from this server's client (identity, workspace, provider).
    fn context(&self) -> CallContext;

    /// The tools `ctx`'s caller may see, in the order to list them.
    fn list(&self, ctx: &CallContext) -> Vec<ToolSpec>;

    /// The tool `list` has under `name` exactly, if any. The default looks through `list`; a
    /// handler that can find one without building (and cloning) the whole list overrides it:
    /// a team gateway asks on every call.
    fn find(&self, ctx: &CallContext, name: &str) -> Option<ToolSpec> {
        self.list(ctx).into_iter().find(|s| s.name == name)
    }

    /// Runs one call. Errors become `isError` results (or, for an unknown tool, a protocol error).
    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError>;

    /// A receiver that changes whenever the tool list may have changed (bridged servers come
    /// and go); the server then sends `notifications/tools/list_changed` to its clients.
    /// `None` (the default): the list never changes.
    fn tool_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// A receiver that changes whenever what `caller` may list changed (a team gateway's grant
    /// of theirs was written); the server then sends `notifications/tools/list_changed` to
    /// that caller's sessions only. `None` (the default): no such changes.
    fn caller_changes(&self, caller: &crate::Caller) -> Option<tokio::sync::watch::Receiver<u64>> {
        let _ = caller;
        None
    }

    /// The port that runs long calls as MCP tasks and keeps them ([`TaskHost`](crate::TaskHost)),
    /// if this handler has one; the server then declares the tasks extension
    /// (`io.modelcontextprotocol/tasks`). `None` (the default): every call is answered in place.
    fn tasks(&self) -> Option<std::sync::Arc<dyn crate::TaskHost>> {
        None
    }

    /// Called once when the server stops (flush audit logs, cancel running calls).
    fn shutdown(&self) {}
}
