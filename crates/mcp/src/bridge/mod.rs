//! The client bridge: connect to external MCP servers (`[mcp.servers.NAME]`) and register each
//! of their tools in a [`Registry`](toolgate_core::Registry) as `mcp__NAME__tool`, so every call
//! to them goes through the gate's whole pipeline (policy, approval, limits, output safety).
//!
//! - `config.rs`: the `[mcp]` configuration.
//! - `sse.rs`: a legacy HTTP+SSE client transport on rmcp's `Transport` trait.
//! - `oauth.rs`: OAuth 2.1 + PKCE for HTTP servers, tokens kept in a [`SecretVault`](oauth::SecretVault).

mod config;
pub mod oauth;
pub mod sse;

pub use config::{
    DEFAULT_PREFIX, HttpTransport, McpConfig, OAuthConfig, ServerConfig, ToolFilter, expand_env, valid_server_name,
};
