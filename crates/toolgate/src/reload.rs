//! Reloading a running gate's extensions: `[gate] dialect`, the `[tools]` policy and the custom and skill tools
//! are rebuilt from a new configuration and swapped in without a restart (`toolgate serve`
//! watches the files through `toolgate-watch`), and `[mcp.servers]` is applied to a started MCP
//! bridge (servers added, changed, switched or removed; [`Gate::reload_mcp`]). Everything else
//! in the configuration (sandbox, approvals, limits, hooks, agents, memory, web) is read once,
//! at start.
//!
//! A reload is all or nothing: the new policy and every new tool are built and checked first,
//! and only then put in force; on an error the gate keeps what it had. Calls already running
//! finish on the definitions they started with (they hold their tool), and the registry's
//! change makes MCP clients get `notifications/tools/list_changed`.
//!
//! [`ConfigControl`] is the port a running gate's configuration is reached through: the
//! configuration in force (what `gateway config_get` shows), the file `gateway config_apply`
//! writes, and — once a server gives the gate its sources ([`Gate::follow_config`]) — a reload
//! on demand (`gateway reload`) and the gates that follow this one's reloads (a team gateway's
//! per-user gates). With `[store] url`, the sections a reload applies are shared by every node
//! through the database (`crate::shared_config`, [`Gate::share_config`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use toolgate_core::Tool;

use crate::config::Config;
use crate::{Gate, GateError};

/// What a reload put in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The custom and skill tools now registered.
    pub tools: Vec<String>,
    /// Those that were registered before and are gone now.
    pub removed: Vec<String>,
    /// MCP servers stopped (removed, switched off or changed; their tools unregistered).
    pub mcp_stopped: Vec<String>,
    /// MCP servers started (added, switched on or changed; they connect in the background).
    pub mcp_started: Vec<String>,
}

impl Gate {
    /// Puts `config`'s `[tools]` policy and custom and skill tools in force (see the module's
    /// documentation). On an error nothing changes.
    pub fn reload(&self, config: &Config) -> Result<Reloaded, GateError> {
        let (policy, tools) = self.prepare(config)?;
        let services = self.services();
        let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
        let mut current = self.custom_names().lock().unwrap_or_else(PoisonError::into_inner);
        services.registry.swap_dynamic(tools, &current)?;
        self.policy_stage().replace(policy, &config.tools.policy);
        if self.dialect_stage().replace(config)? {
            // MCP clients list the tools again, under the new names.
            services.registry.touch();
        }
        let removed = current.iter().filter(|n| !names.contains(n)).cloned().collect();
        current.clone_from(&names);
        drop(current);
        let (mcp_stopped, mcp_started) = self.reload_mcp(&config.mcp);
        self.services().config_control.put_in_force(config);
        Ok(Reloaded { tools: names, removed, mcp_stopped, mcp_started })
    }

    /// Whether [`Gate::reload`] would accept `config` (the policy compiles, the dialect exists,
    /// every custom and skill tool builds); nothing changes.
    pub fn check_config(&self, config: &Config) -> Result<(), GateError> {
        self.prepare(config).map(drop)
    }

    /// What a reload puts in force, built and checked before anything changes.
    fn prepare(&self, config: &Config) -> Result<(toolgate_policy::Policy, Vec<Arc<dyn Tool>>), GateError> {
        let policy = toolgate_policy::Policy::new(config.tools.policy.clone())?;
        // Checked before anything changes; put in force with the policy.
        toolgate_dialect::dialect(&config.gate.dialect)?;
        let services = self.services();
        let tools =
            crate::extensions::custom_tools(self.workspace(), config, services.stores.as_ref(), &services.runner)?;
        Ok((policy, tools))
    }

    /// With `[store] url`: the configuration several nodes share is `shared`'s (this gate
    /// follows its sources already, [`Gate::follow_config`]); `gateway config_apply` stores its
    /// patch there, and the gate reloads whenever another node changes it, until `shutdown`
    /// (`crate::shared_config`). The first call wins.
    pub fn share_config(
        self: &Arc<Self>,
        shared: Arc<crate::shared_config::SharedConfig>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        if self.services().config_control.shared.set(Arc::clone(&shared)).is_ok() {
            crate::shared_config::follow(self, shared, shutdown);
        }
    }

    /// Gives the gate its configuration's sources: `load` reads every layer again, and `file`
    /// is the one `gateway config_apply` writes (default: the workspace's `toolgate.toml`).
    /// From then on [`Gate::reload_config`] works; the first call wins.
    pub fn follow_config(self: &Arc<Self>, file: Option<&Path>, load: LoadConfig) {
        let control = &self.services().config_control;
        let gate = Arc::downgrade(self);
        let file = file.map_or_else(|| self.workspace().join("toolgate.toml"), Path::to_owned);
        let _ = control.source.set(Source { file, load, gate });
    }

    /// Loads the configuration again from the sources [`Gate::follow_config`] gave and puts it
    /// in force; an error (a file that does not parse, a policy that does not compile) leaves
    /// the gate as it was and says why.
    pub fn reload_config(&self) -> Result<Reloaded, String> {
        self.services().config_control.reload()
    }
}

/// Loads the whole configuration again (every layer, as the gate was built from it).
pub type LoadConfig = Box<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// A gate's configuration while it runs (see the module's documentation).
pub struct ConfigControl {
    current: RwLock<Arc<Config>>,
    source: OnceLock<Source>,
    /// With `[store] url`: the configuration the nodes share (`crate::shared_config`).
    shared: OnceLock<Arc<crate::shared_config::SharedConfig>>,
    followers: Mutex<Vec<Follower>>,
}

type Follower = Box<dyn Fn(&Config) + Send + Sync>;

struct Source {
    file: PathBuf,
    load: LoadConfig,
    /// Weak: the gate owns this control.
    gate: Weak<Gate>,
}

impl std::fmt::Debug for ConfigControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigControl").field("file", &self.source.get().map(|s| &s.file)).finish_non_exhaustive()
    }
}

impl ConfigControl {
    pub(crate) fn new(config: Arc<Config>) -> ConfigControl {
        ConfigControl {
            current: RwLock::new(config),
            source: OnceLock::new(),
            shared: OnceLock::new(),
            followers: Mutex::default(),
        }
    }

    /// The configuration in force: the one the gate was built with, or the last reloaded.
    pub fn current(&self) -> Arc<Config> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The file a configuration patch is written to, once the gate follows its sources.
    pub fn file(&self) -> Option<&Path> {
        self.source.get().map(|s| s.file.as_path())
    }

    /// The configuration several nodes share, when the gate was given one ([`Gate::share_config`]).
    pub fn shared(&self) -> Option<&Arc<crate::shared_config::SharedConfig>> {
        self.shared.get()
    }

    /// Whether the gate would accept `config` in a reload ([`Gate::check_config`]).
    pub fn check(&self, config: &Config) -> Result<(), String> {
        let gate = self.source.get().and_then(|s| s.gate.upgrade()).ok_or("the gate is shutting down")?;
        gate.check_config(config).map_err(|e| e.to_string())
    }

    /// Loads the sources again and puts the result in force (see [`Gate::reload_config`]).
    pub fn reload(&self) -> Result<Reloaded, String> {
        let source = self.source.get().ok_or(
            "this gate was not given its configuration's files (`toolgate serve` gives them): \
             restart it to apply a change",
        )?;
        let gate = source.gate.upgrade().ok_or("the gate is shutting down")?;
        let config = (source.load)()?;
        gate.reload(&config).map_err(|e| e.to_string())
    }

    /// Runs `follow` with every configuration put in force from now on (a team gateway's
    /// per-user gates reload with the gateway's).
    pub fn on_reload(&self, follow: impl Fn(&Config) + Send + Sync + 'static) {
        self.followers.lock().unwrap_or_else(PoisonError::into_inner).push(Box::new(follow));
    }

    fn put_in_force(&self, config: &Config) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config.clone());
        for follow in self.followers.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            follow(config);
        }
    }
}
