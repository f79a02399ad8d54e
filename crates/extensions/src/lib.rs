//! Extension management for toolgate: the tools (group `extensions`) with which an agent finds,
//! adds, signs in to, switches and removes extensions, `tool_list`, `tool_search`,
//! `tool_install`, `tool_auth`, `tool_activate` and `tool_remove`, over the embedded catalog
//! (`catalog/extensions.toml`); [`config_edit`], the one way `toolgate.toml` is edited in place
//! (shared with `toolgate mcp add|remove`); and [`vault::StoreVault`], the MCP bridge's OAuth
//! tokens in the store's secrets. See `docs/extensions.md`.
//!
//! This crate sits below the `toolgate` facade and does not depend on it. What the tools need
//! from the gate comes in as narrow values in a [`Setup`] (the workspace, the approval mode, the
//! registry and the MCP bridge held weakly, the store's secrets, the WASM host services) and
//! through one small port, [`ExtensionHost`], which the facade implements: the configuration now
//! on disk and the check every edit of it passes.
//!
//! ```no_run
//! # fn demo(setup: toolgate_extensions::Setup, registry: &toolgate_core::Registry) {
//! for tool in toolgate_extensions::tools(&setup) {
//!     registry.register_builtin(tool).expect("unique names");
//! }
//! # }
//! ```

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use toolgate_core::Registry;
use toolgate_mcp::bridge::{Bridge, ServerConfig};
use toolgate_store::SecretStore;

pub mod config_edit;
mod tools;
pub mod vault;

pub use tools::tools;

/// What the extension tools ask of the gate that runs them (implemented by the `toolgate`
/// facade over its layered configuration). Both are read on each call: the file changes under
/// a running gate (these tools edit it).
pub trait ExtensionHost: Send + Sync + std::fmt::Debug {
    /// The configuration now on disk, loaded as the gate loads it (every layer, with the
    /// workspace's `toolgate.toml`): what `tool_install` and friends changed since the start.
    /// The error says why it could not be loaded (then the tools use [`Setup::started`]).
    fn config_on_disk(&self) -> Result<ConfigView, String>;

    /// Whether `text` loads as one configuration layer on its own (known keys, right types):
    /// every edit is checked with it before it is written (the error is the parser's message).
    fn check_layer(&self, text: &str) -> Result<(), String>;
}

/// The part of a configuration the extension tools read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigView {
    /// `[mcp.servers]`, by name.
    pub mcp_servers: BTreeMap<String, ServerConfig>,
    /// The names of the `[[tools.custom]]` entries switched off (`enabled = false`).
    pub disabled_custom_tools: Vec<String>,
}

/// What the extension tools are made from: narrow values of the gate, handles cheap to clone.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The gate's workspace (canonical): its `toolgate.toml` is edited, its `.toolgate/tools/`
    /// holds installed WASM components.
    pub workspace: PathBuf,
    /// The configuration on disk and the check of an edit.
    pub host: Arc<dyn ExtensionHost>,
    /// The configuration the gate started with (servers of a `--config` file the tools do not
    /// edit are listed from it).
    pub started: ConfigView,
    /// `[approval] mode = "never"`: no person is asked, so WASM components (whose grants only a
    /// person gives) are refused.
    pub approval_never: bool,
    /// The gate's registry (what is registered now). Weak: the registry holds these tools, and
    /// a strong reference would keep it (and every tool's processes) alive after the gate is
    /// dropped.
    pub registry: Weak<Registry>,
    /// The MCP bridge, once started (`tool_list` reports its servers). Weak for the same reason
    /// (the bridge holds the registry).
    pub bridge: Weak<OnceLock<Bridge>>,
    /// The store's secrets (OAuth tokens), when the gate keeps a state database.
    pub secrets: Option<Arc<dyn SecretStore>>,
    /// Installed WASM tools that failed to load, with why (the gate's, for `tool_list`).
    pub wasm_failed: Arc<Mutex<Vec<(String, String)>>>,
    /// The gate's WASM host services, once it loaded its WASM tools: what a component installed
    /// by `tool_install` is loaded with (until then, it is loaded at the next start).
    pub wasm_host: Arc<OnceLock<toolgate_wasm::Services>>,
}
