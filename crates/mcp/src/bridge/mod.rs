//! The client bridge: connect to external MCP servers (`[mcp.servers.NAME]`) and register each
//! of their tools in a [`Registry`](toolgate_core::Registry) as `mcp__NAME__tool`, so every call
//! to them goes through the gate's whole pipeline (policy, approval, limits, output safety).
//!
//! [`Bridge::start`] spawns one supervisor per enabled server. A supervisor connects (a child
//! process over stdio with only the configured environment, Streamable HTTP, or legacy
//! HTTP+SSE), lists the server's tools, registers those `tools.allow`/`tools.deny` admit, checks
//! the server with `ping` every 30 s, re-lists on `notifications/tools/list_changed`, and
//! reconnects with backoff (2 s doubling to 60 s, at most 10 attempts) when the connection goes.
//! A bridged tool asks for approval unless its server says it is read-only or not destructive;
//! its output, and any error text from the server, is untrusted.
//!
//! - `config.rs`: the `[mcp]` configuration.
//! - `connect.rs`: opening a connection (stdio child in its own process group, HTTP client).
//! - `profile.rs`: the sandbox a stdio server runs in (its profile, turned into a policy).
//! - `client.rs`: the MCP client handler (handshake info, progress, list changes, logs).
//! - `link.rs`: one server's live state, shared by its supervisor and its tools.
//! - `mapping.rs`: MCP tools and results in toolgate's shapes, hostile text capped.
//! - `tool.rs`: a bridged tool (`Tool` for the gate).
//! - `supervisor.rs`: one server's life (connect, sync tools, health, reconnect).
//! - `manager.rs`: [`Bridge`], the public face.
//! - `sse.rs`: a legacy HTTP+SSE client transport on rmcp's `Transport` trait.
//! - `overrides.rs`: a gateway grant's `config_overrides` of a server, checked and merged.
//! - `variants.rs`: the connections of callers whose grants override a server's settings.
//! - `remote.rs`: [`RemoteServer`], one request to another server outside the registry (`nodes`).
//! - `oauth.rs`: OAuth 2.1 + PKCE for HTTP servers, tokens kept in a [`SecretVault`](oauth::SecretVault).

mod client;
mod config;
mod connect;
mod link;
mod manager;
mod mapping;
pub mod oauth;
mod overrides;
mod profile;
mod remote;
pub mod sse;
mod supervisor;
mod tool;
mod variants;

pub use config::{
    DEFAULT_PREFIX, HttpTransport, McpConfig, OAuthConfig, ServerConfig, ServerNetwork, ServerSandbox, ToolFilter,
    expand_env, valid_server_name,
};
pub use manager::{Bridge, BridgeOptions, GatewayUser, ServerState, ServerStatus};
pub use overrides::{OVERRIDABLE, ServerOverrides};
pub use remote::{RemoteServer, RemoteStatus};
pub use supervisor::BridgeTimings;
