//! Hot reload for a running [`Gate`]: [`watch`] follows the files a gate was built from and
//! applies their changes while it serves, as `toolgate serve` does (`docs/extensions.md`, "Hot
//! reload"; `docs/memory.md`):
//!
//! - the configuration (the user file and the workspace's `toolgate.toml`, or the file given
//!   instead), the skills folders and the stored custom tools: the whole configuration is loaded
//!   again and swapped in with [`Gate::reload`] (`config.rs`);
//! - memory notes edited on disk (local memory mode): re-indexed as they change (`memory.rs`).
//!
//! It is its own crate so that the `toolgate` library does not link a file watcher (`notify`):
//! an embedder that wants hot reload adds this crate.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolgate::config::ConfigSources;
//! use tokio_util::sync::CancellationToken;
//!
//! let workspace = std::path::PathBuf::from(".");
//! let load = {
//!     let workspace = workspace.clone();
//!     move || ConfigSources::standard(&workspace, None).load(None).map_err(|e| e.to_string())
//! };
//! let gate = Arc::new(toolgate::Gate::builder(&workspace).config(load()?).build()?);
//! let shutdown = CancellationToken::new();
//! toolgate_watch::watch(&gate, None, Box::new(load), shutdown.clone())?;
//! // ... serve; `shutdown.cancel()` stops the watchers.
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod config;
mod memory;

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolgate::Gate;

/// Loads the whole configuration again (every layer, as the gate was built from it); an error
/// is logged and the gate keeps its configuration.
pub use toolgate::reload::LoadConfig;

/// Watches `gate`'s configuration sources (`config_file`: the file used instead of the
/// workspace's `toolgate.toml`, if any) and, in local memory mode, its notes, until `shutdown`.
/// Must run on a Tokio runtime. An error means the configuration cannot be watched (changes
/// need a restart); the notes are then still watched when they can be. The gate follows `load`
/// from then on ([`Gate::follow_config`]): `gateway reload` and `config_apply` use it too.
pub fn watch(
    gate: &Arc<Gate>,
    config_file: Option<&Path>,
    load: LoadConfig,
    shutdown: CancellationToken,
) -> Result<(), notify::Error> {
    memory::watch(gate, shutdown.clone());
    gate.follow_config(config_file, load);
    config::watch(Arc::clone(gate), config_file, shutdown)
}
