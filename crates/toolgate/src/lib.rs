//! toolgate: the layer between an LLM's tool calls and the world.
//!
//! Build a [`Gate`] over a workspace, hand it every tool call the model makes, and it runs the
//! call through one pipeline, from resolving the name to the audit row (the stages and their
//! order: `pipeline/mod.rs`). Errors come back as [`ToolError`](core::ToolError)s written for
//! the model to act on. Tools come in families ([`Family`]), built from one set of shared
//! [`Services`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use serde_json::json;
//!
//! let gate = toolgate::Gate::builder(".").build()?;
//! let ctx = gate.context();
//! let out = gate.call(&ctx, "echo", json!({"message": "hi"})).await?;
//! assert_eq!(out.text_content(), "hi");
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - [`Gate`], [`GateBuilder`]: the entry point (`gate.rs`).
//! - `pipeline/`: one module per stage, in call order.
//! - [`config`]: `toolgate.toml` and its layers.
//! - The sibling crates are re-exported as modules: [`core`] (the vocabulary: `Tool`,
//!   `ToolSpec`, `ToolOutput`, ...), [`guard`], [`store`], [`tools`].
//! - [`mcp`]: serving the gate over MCP (`toolgate serve`), from `toolgate-mcp`.
//! - [`bridge`]: external MCP servers' tools in the gate (`[mcp.servers.NAME]`): [`Gate::start_mcp`],
//!   [`Gate::connect_mcp`].
//! - The extension tools (`tool_list|search|install|auth|activate|remove`, group
//!   `extensions`) and editing `toolgate.toml` in place come from `toolgate-extensions`
//!   (its port, `ExtensionHost`, is implemented in `family.rs`); [`mcp_vault`] is its OAuth
//!   token vault.
//! - [`reload`]: [`Gate::reload`], the `[tools]` policy and custom and skill tools swapped in
//!   a running gate.
//!
//! The `toolgate` binary is a thin CLI over this library, in its own crate (`crates/cli`,
//! package `toolgate-cli`).

#![deny(missing_docs)]

pub mod agent;
pub mod approvals;
pub mod bridge;
mod canvas;
pub mod config;
pub mod embeddings;
pub mod events;
pub mod extensions;
pub mod family;
mod gate;
pub mod gateway_family;
pub mod granted;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod node;
pub mod ops;
pub mod per_user;
mod pipeline;
pub mod reload;
mod services;
pub mod shared_config;
pub mod state;
mod tasks;
pub mod telemetry;
pub mod wasm;

pub use family::Family;
pub use gate::{Gate, GateBuilder, GateError};
pub use pipeline::approval::{ApprovalAnswer, ApprovalRequest, Approver};
pub use pipeline::hooks::{Hook, HookVerdict};
pub use services::Services;

pub use toolgate_core as core;
pub use toolgate_dialect as dialect;
/// The MCP bridge's OAuth tokens in the store's secrets ([`StoreVault`](mcp_vault::StoreVault)).
pub use toolgate_extensions::vault as mcp_vault;
pub use toolgate_gateway as gateway;
pub use toolgate_guard as guard;
pub use toolgate_nodes as nodes;
pub use toolgate_policy as policy;
pub use toolgate_store as store;
pub use toolgate_tools as tools;
