//! toolgate's MCP server: serve a tool runtime to any MCP client over stdio or Streamable HTTP.
//!
//! This is the only toolgate crate that knows the MCP wire format (it speaks it through
//! [`rmcp`]). It does not know the `Gate` itself: it serves anything that implements
//! [`CallHandler`] (list the tools a caller may see, run one call), which the `toolgate` facade
//! crate implements for its `Gate`. That keeps the dependency direction one way
//! (core ← … ← mcp ← toolgate).
//!
//! What a client gets:
//!
//! - both protocol eras: the `initialize` handshake (2024-11-05 … 2025-11-25) and the
//!   session-less `server/discover` + per-request `_meta` of 2026-07-28;
//! - `tools/list` with the caller's visible tools, MCP annotations from each
//!   [`ToolSpec`](toolgate_core::ToolSpec), `outputSchema` where declared;
//! - `tools/call` results with `structuredContent`; tool failures are results with `isError`,
//!   an unknown tool is a protocol error (`-32602`), as the specification says;
//! - progress notifications when the request carries a `progressToken`, and cancellation
//!   (`notifications/cancelled`, or a closed HTTP stream) that cancels the call's token;
//! - approvals through the client's form elicitation ([`ask_client`]), when it has one;
//! - the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) when the handler offers a
//!   [`TaskHost`]: a long call answered with a task handle, then `tasks/get` and `tasks/cancel`.
//!
//! Over HTTP ([`serve_http`]) every request must carry the bearer token from
//! [`HttpToken::load_or_create`]; `Host` and `Origin` are checked against allowlists and request
//! bodies are size-limited.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use serde_json::Value;
//! use toolgate_core::{async_trait, CallContext, ToolError, ToolOutput, ToolSpec};
//!
//! #[derive(Debug)]
//! struct Tools;
//!
//! #[async_trait]
//! impl toolgate_mcp::CallHandler for Tools {
//!     fn context(&self) -> CallContext { CallContext::new("/tmp") }
//!     fn list(&self, _ctx: &CallContext) -> Vec<ToolSpec> { Vec::new() }
//!     async fn call(&self, _ctx: &CallContext, name: &str, _p: Value) -> Result<ToolOutput, ToolError> {
//!         Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None })
//!     }
//! }
//!
//! # async fn demo() -> Result<(), toolgate_mcp::Error> {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! toolgate_mcp::serve_stdio(Arc::new(Tools), shutdown).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - `handler.rs`: [`CallHandler`], what this crate serves.
//! - `server.rs`: the rmcp `ServerHandler` (tools/list, tools/call, progress, cancellation).
//! - `convert.rs`: toolgate types ↔ MCP types.
//! - `approval.rs`: asking the client's user through elicitation.
//! - `extra.rs`: [`ExtraFeatures`], more server features (tools, resources, prompts,
//!   completions, logging) answered beside the handler's tools, not through it; toolgate serves
//!   none, the test-only `toolgate-conformance` crate serves the MCP conformance suite's
//!   fixtures through it.
//! - `tasks.rs`: [`TaskHost`], the port MCP tasks are kept behind, and their wire shapes.
//! - `stdio.rs`, `http.rs`: the two transports; `http_sessions.rs`: the bound on HTTP sessions
//!   (an idle timeout and a cap) and the cancellation of a session's call whose client left;
//!   `token.rs`: the HTTP bearer token.

#![deny(missing_docs)]

mod approval;
pub mod bridge;
mod caller;
mod convert;
mod error;
mod extra;
mod handler;
mod http;
mod http_sessions;
mod server;
mod session;
mod stdio;
mod stdio_guard;
mod tasks;
mod token;
mod trace;

pub use approval::{ClientAnswer, ask_client, defer_to_url, echoed_request_state};
pub use caller::{Authenticator, Caller, Refusal};
pub use convert::RESULT_META;
pub use error::Error;
pub use extra::ExtraFeatures;
pub use handler::CallHandler;
pub use http::{
    ApiHandler, CONNECTION_IDLE, HttpBody, HttpConfig, HttpRoute, MAX_SESSIONS, Mount, RouteAuth, RouteRequest,
    SESSION_IDLE, reply, serve_http,
};
pub use server::McpServer;
pub use stdio::serve_stdio;
pub use tasks::{TaskError, TaskHost, TaskState, TaskStatus};
pub use token::HttpToken;

/// The version of the MCP SDK this crate speaks through, for `--version` style reports.
pub const RMCP_VERSION: &str = "3.9.0";
