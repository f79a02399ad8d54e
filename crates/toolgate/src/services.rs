//! [`Services`]: the pieces every tool family is built from, made once per gate by
//! [`GateBuilder::build`](crate::GateBuilder::build) and shared: one state database (one trait
//! object per area), one SSRF-safe fetcher, one process runner (one sandbox cache and one table
//! of background processes), one embedder (a local model is loaded once), the memory store, the
//! leak detector, the agent runtime, and the registry the tools join.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use toolgate_core::Registry;
use toolgate_guard::leak::LeakDetector;
use toolgate_store::Stores;
use toolgate_store::memory::{Embedder, MemoryStore};

use crate::config::Config;

/// What a [`Family`](crate::family::Family) builds its tools from. Handles, cheap to clone:
/// a family keeps what its tools need.
#[derive(Debug)]
#[non_exhaustive]
pub struct Services {
    /// The workspace root (absolute, canonical).
    pub workspace: PathBuf,
    /// The configuration the gate is built with; a family reads its own section.
    pub config: Arc<Config>,
    /// The state database's areas, when the gate keeps one (`Stores`: grants, secrets,
    /// sessions, custom tools, embedding cache, path locks).
    pub stores: Option<Stores>,
    /// The one network client every tool uses (`[web]`'s SSRF rules).
    pub fetcher: toolgate_fetch::Fetcher,
    /// The one process runner (sandbox, background processes) of every command-running tool.
    pub runner: toolgate_tools::runtime::ProcessRunner,
    /// The embedding model of memory and skill search (`[memory.embeddings]`), if any.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Finds credentials in output, audit records and approval requests.
    pub detector: Arc<LeakDetector>,
    /// The agent runtime (`[agents]`), if any agent is configured.
    pub agents: Option<Arc<toolgate_agent::Runtime>>,
    /// The registry every tool joins.
    pub registry: Arc<Registry>,
    /// The gate's own events (calls, approvals, file writes), for `event` routines.
    pub events: crate::events::Events,
    /// Memory (`[memory]`): its store and the file tools' write observer.
    pub(crate) memory: Option<crate::memory::Memory>,
    /// The MCP client bridge, once started (`tool_list` reports its servers).
    pub(crate) bridge: Weak<OnceLock<toolgate_mcp::bridge::Bridge>>,
    /// Installed WASM tools the last load could not load, with why.
    pub(crate) wasm_failed: Arc<Mutex<Vec<(String, String)>>>,
    /// The host services of the gate's WASM tools, once they were loaded (`tool_install` loads
    /// the components it installs with them).
    pub(crate) wasm_host: Arc<OnceLock<toolgate_wasm::Services>>,
    /// The gate's audit log, once it is open (it opens after the families' tools are built):
    /// what a family's HTTP routes record that is not a call (an inbound message).
    pub(crate) audit: Arc<OnceLock<Arc<dyn toolgate_store::AuditStore>>>,
    /// The team gateway's grants for runs made later on a caller's behalf (routines), once a
    /// gateway serves this gate ([`crate::Gate::hold_routines_to`]).
    pub(crate) routine_grants: Arc<OnceLock<Arc<dyn toolgate_core::PrincipalGrants>>>,
    /// The configuration in force and how to reload it (`gateway config_get`, `reload`).
    pub config_control: Arc<crate::reload::ConfigControl>,
    /// The gate makes one call and ends with its process (`GateBuilder::one_shot`): start-up
    /// housekeeping that a server does for its whole life is left to the first use that needs it.
    pub(crate) one_shot: bool,
}

impl Services {
    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The memory store, when `[memory]` is on.
    pub fn memory_store(&self) -> Option<&Arc<dyn MemoryStore>> {
        self.memory.as_ref().map(|m| &m.store)
    }
}
