//! The [`Gate`]: every tool call goes through [`Gate::call`], which runs the pipeline stages in
//! [`crate::pipeline`] in order and records the call in the audit log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_core::{
    ApprovalRequirement, AuditNote, CallContext, Identity, Registry, RegistryError, Tool, ToolError, ToolOutput,
    ToolSpec,
};
use toolgate_guard::leak::LeakDetector;
use toolgate_mcp::bridge::GatewayUser;
use toolgate_mcp::bridge::oauth::SecretVault;
use toolgate_policy::ToolRef;
use toolgate_store::{AuditLog, AuditStore, Store, StoreError};
use tracing::Instrument as _;

use crate::bridge::{BridgeTimings, McpBridge};
use crate::config::Config;
use crate::family::{self, Family};
use crate::pipeline::approval::{self, ApprovalRequest, ApprovalStage, Approver};
use crate::pipeline::audit::{CallRecord, StartedRecord, audit_params, redact_params};
use crate::pipeline::cache::ResultCache;
use crate::pipeline::dialect::DialectStage;
use crate::pipeline::hooks::{self, CommandHook, Hook, HookVerdict};
use crate::pipeline::limits::ConcurrencyLimits;
use crate::pipeline::loop_breaker::LoopBreaker;
use crate::pipeline::policy::{PolicyStage, apply_verdict};
use crate::pipeline::rate::RateLimiter;
use crate::pipeline::{execute, output, resolve, validate};
use crate::services::Services;
use crate::telemetry::{CallSpan, verdict_name};

/// Why a gate could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The workspace folder does not exist or cannot be resolved. (Every variant's message is
    /// whole, cause included, and names no source: a chain printer would say it twice.)
    #[error("workspace {}: {cause}", path.display())]
    Workspace {
        /// The folder given.
        path: PathBuf,
        /// Why it cannot be used.
        cause: std::io::Error,
    },
    /// A tool could not be registered.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The state database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The `[tools]` policy is invalid.
    #[error("invalid [tools] policy: {0}")]
    Policy(toolgate_policy::PolicyError),
    /// The `[rate_limits]` configuration is invalid.
    #[error("invalid [rate_limits] configuration: {0}")]
    RateLimits(String),
    /// A `[hooks]` entry is invalid.
    #[error("invalid [hooks] configuration: {0}")]
    Hooks(String),
    /// The `[fs]` configuration is invalid.
    #[error("invalid [fs] configuration: {0}")]
    Fs(String),
    /// The `[web]` configuration is invalid.
    #[error("{0}")]
    Web(String),
    /// The memory index could not be opened.
    #[error("memory: {0}")]
    Memory(String),
    /// The `[runtime]` configuration is invalid.
    #[error(transparent)]
    Runtime(#[from] toolgate_tools::runtime::RuntimeError),
    /// A custom tool (`[[tools.custom]]` or the store) is invalid.
    #[error(transparent)]
    Extension(#[from] crate::extensions::ExtensionError),
    /// `[gate] dialect` or an agent's `dialect` names no dialect.
    #[error(transparent)]
    Dialect(#[from] toolgate_dialect::UnknownDialect),
    /// The agents' configuration names something that does not exist (a research tool).
    #[error("invalid agent configuration: {0}")]
    Agents(String),
}

impl From<toolgate_policy::PolicyError> for GateError {
    fn from(e: toolgate_policy::PolicyError) -> Self {
        GateError::Policy(e)
    }
}

/// Where audit records go.
#[derive(Debug, Clone)]
enum AuditTarget {
    /// `<workspace>/.toolgate/state.db`.
    Workspace,
    /// Another database file.
    File(PathBuf),
    /// Nowhere.
    Off,
}

impl AuditTarget {
    /// The state database this target uses.
    fn db(&self, workspace: &Path) -> Option<PathBuf> {
        match self {
            AuditTarget::Off => None,
            AuditTarget::Workspace => Some(workspace.join(".toolgate/state.db")),
            AuditTarget::File(path) => Some(path.clone()),
        }
    }
}

/// Builds a [`Gate`].
#[derive(Debug)]
pub struct GateBuilder {
    workspace: PathBuf,
    config: Config,
    builtins: bool,
    tools: Vec<Arc<dyn Tool>>,
    approver: Option<Arc<dyn Approver>>,
    hooks: Vec<Arc<dyn Hook>>,
    families: Vec<Arc<dyn Family>>,
    audit: AuditTarget,
    mcp_timings: Option<BridgeTimings>,
    /// In a team gateway's per-user gate: the user and the gateway's vault of upstream sign-ins.
    mcp_user: Option<(String, Arc<dyn SecretVault>)>,
    /// In a team gateway's per-user gate: the gateway's grant store, where the approval
    /// stage keeps this user's "allow always" decisions (one grant store, out of the user's
    /// reach) instead of the workspace's own database.
    approval_grants: Option<Arc<dyn toolgate_store::GrantStore>>,
    one_shot: bool,
}

impl GateBuilder {
    /// Callers speak `dialect` (`[gate] dialect`; `docs/dialects.md`): `toolgate`, `goclaw`,
    /// `linggen`, `gomini`, `openclaw` or `ironclaw`. An unknown name fails [`GateBuilder::build`].
    pub fn dialect(mut self, dialect: impl Into<String>) -> Self {
        self.config.gate.dialect = dialect.into();
        self
    }

    /// Uses `config` (default: [`Config::default`]).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Whether to register toolgate's built-in tools (default true).
    pub fn builtins(mut self, on: bool) -> Self {
        self.builtins = on;
        self
    }

    /// Adds a tool of your own. It cannot take a built-in tool's name.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the channel that asks a person for approvals.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Adds a tool family of your own (its tools, and for `toolgate serve`-like programs its
    /// routes and background tasks: [`Gate::routes`], [`Gate::start_tasks`]). Its tools cannot
    /// take a built-in tool's name.
    pub fn family(mut self, family: Arc<dyn Family>) -> Self {
        self.families.push(family);
        self
    }

    /// Adds a hook that runs around matching calls.
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Keeps state (audit log, approval grants) in `path` instead of `<workspace>/.toolgate/state.db`.
    pub fn audit_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit = AuditTarget::File(path.into());
        self
    }

    /// Keeps no state on disk: no audit log, approval grants only in memory. (`[audit] enabled =
    /// false` turns off only the audit log.)
    pub fn no_audit(mut self) -> Self {
        self.audit = AuditTarget::Off;
        self
    }

    /// The gate serves one call and is dropped with its process (`toolgate call`): the audit
    /// log writes each row on the calling thread through the state database's one connection
    /// ([`AuditLog::direct`]) instead of starting a writer and a maintenance thread on two
    /// connections of their own. Rows are as durable either way; only their cost moves.
    pub fn one_shot(mut self, on: bool) -> Self {
        self.one_shot = on;
        self
    }

    /// Sets the MCP bridge's health-check and reconnection timings (default: 30 s health
    /// checks, backoff 2 s to 60 s, 10 attempts); tests shorten them.
    pub fn mcp_timings(mut self, timings: BridgeTimings) -> Self {
        self.mcp_timings = Some(timings);
        self
    }

    /// Makes this the gate of `user` in a team gateway: its bridged servers that are not
    /// `shared` connect with `user`'s own sign-in, kept in `vault` (the gateway's), and a server
    /// `user` has not signed in to says so ([`toolgate_mcp::bridge::GatewayUser`]).
    pub fn gateway_user(mut self, user: impl Into<String>, vault: Arc<dyn SecretVault>) -> Self {
        self.mcp_user = Some((user.into(), vault));
        self
    }

    /// Keeps the approval stage's "allow always" decisions in `grants` (a team gateway's grant
    /// store) rather than in the workspace's state database.
    pub fn approval_grants(mut self, grants: Arc<dyn toolgate_store::GrantStore>) -> Self {
        self.approval_grants = Some(grants);
        self
    }

    /// Builds the gate in an `Arc` with the agent runtime bound to it ([`Gate::bind_agents`]):
    /// what every program that serves or calls tools wants. [`GateBuilder::build`] leaves the
    /// binding to the caller, and the agent tools answer "not connected" until it is made.
    pub fn build_shared(self) -> Result<Arc<Gate>, GateError> {
        let gate = Arc::new(self.build()?);
        gate.bind_agents();
        Ok(gate)
    }

    /// Builds the gate: resolves the workspace, registers tools, opens the audit log. MCP
    /// servers are connected later, by [`Gate::start_mcp`]. The agent tools need
    /// [`Gate::bind_agents`] once the gate is in an `Arc` ([`GateBuilder::build_shared`] does both).
    pub fn build(self) -> Result<Gate, GateError> {
        let mut timings = BuildTimings::start();
        let workspace = std::fs::canonicalize(&self.workspace)
            .map_err(|cause| GateError::Workspace { path: self.workspace.clone(), cause })?;
        if !workspace.is_dir() {
            let cause = std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory");
            return Err(GateError::Workspace { path: workspace, cause });
        }
        timings.lap("workspace");
        let dialects = DialectStage::new(&self.config)?;
        timings.lap("dialects");
        let state_db = self.audit.db(&workspace);
        // Every area of the state database, one trait object each (SQLite, embedded).
        let store = state_db.as_deref().map(Store::open).transpose()?.map(Arc::new);
        // The areas several nodes share are in PostgreSQL with `[store] url`.
        let stores = store.clone().map(|s| crate::state::with_shared(&self.config.store, s)).transpose()?;
        timings.lap("store open (+ migrations check)");
        // One embedder (a local model is loaded once, on first use) for memory and skill search.
        // A single `toolgate call` waits for its query's vector: the budget (answer by words when
        // the vector is late) is for a server's callers, who ask again.
        let embedder = if self.one_shot {
            crate::memory::embedder(&toolgate_tools::memory::MemoryConfig {
                query_budget_ms: 0,
                ..self.config.memory.clone()
            })
        } else {
            crate::memory::embedder(&self.config.memory)
        };
        let memory = crate::memory::open(&self.config, &workspace, state_db.as_deref(), embedder.clone())?;
        timings.lap("memory index + embedder");
        let vault = stores
            .as_ref()
            .map(|s| Arc::new(crate::mcp_vault::StoreVault::new(Arc::clone(&s.secrets))) as Arc<dyn SecretVault>);
        // In a team gateway, a server that is not `shared` uses each user's own sign-in.
        let gateway = match self.mcp_user {
            Some((user, vault)) => Some(GatewayUser::User { user, vault }),
            None if self.config.gateway.enabled => Some(GatewayUser::Gateway),
            None => None,
        };
        let mcp = McpBridge::new(vault, self.mcp_timings, gateway);
        timings.lap("mcp bridge");
        // One fetcher for everything that touches the network (its HTTP client is built on the
        // first request).
        let fetcher = toolgate_tools::web::fetcher(&self.config.web).map_err(|e| GateError::Web(e.to_string()))?;
        timings.lap("fetcher");
        // One process runner (sandboxes, background process table) for `exec` and friends and
        // for the custom and skill tools.
        let runner = toolgate_tools::runtime::ProcessRunner::new(self.config.runtime.clone())?;
        timings.lap("process runner");
        let detector = Arc::new(LeakDetector::new().from_env());
        timings.lap("leak detector");
        let agents =
            crate::agent::build_runtime(&self.config, stores.as_ref().map(|s| Arc::clone(&s.sessions)), &workspace);
        timings.lap("agent runtime");
        let config = Arc::new(self.config.clone());
        let services = Services {
            fetcher,
            runner,
            detector,
            agents,
            // Shared from the start: the extension tools list what it holds.
            registry: Arc::new(Registry::new()),
            events: crate::events::Events::default(),
            workspace: workspace.clone(),
            config: Arc::clone(&config),
            config_control: Arc::new(crate::reload::ConfigControl::new(config)),
            stores,
            embedder,
            memory,
            bridge: Arc::downgrade(&mcp.handle()),
            wasm_failed: Arc::default(),
            wasm_host: Arc::default(),
            audit: Arc::default(),
            routine_grants: Arc::default(),
            one_shot: self.one_shot,
        };
        let registry = Arc::clone(&services.registry);
        // Every name any dialect gives a tool, and the next families', stays a built-in's.
        registry.reserve(toolgate_dialect::protected_names());
        // The family table (`family::builtin`), then the embedder's families and tools.
        let mut families: Vec<Arc<dyn Family>> = if self.builtins { family::builtin() } else { Vec::new() };
        timings.lap("services");
        for family in &families {
            for tool in family.tools(&services)? {
                registry.register_builtin(tool)?;
            }
            timings.lap_family(family.name());
        }
        for family in &self.families {
            for tool in family.tools(&services)? {
                registry.register_dynamic(tool)?;
            }
            timings.lap_family(family.name());
        }
        families.extend(self.families);
        for tool in self.tools {
            registry.register_dynamic(tool)?;
        }
        let audit = match (&state_db, self.config.audit.enabled) {
            (Some(db), true) => {
                let retention_days = Some(self.config.audit.retention_days).filter(|d| *d > 0);
                let options = toolgate_store::AuditOptions { retention_days };
                // With `[store] url`, every node appends to the workspace's chain in PostgreSQL.
                let log: Arc<dyn AuditStore> =
                    match crate::state::shared_audit_log(&self.config.store, &workspace, options)? {
                        Some(shared) => Arc::new(shared),
                        None => match store {
                            Some(store) if self.one_shot => Arc::new(AuditLog::direct(store, options)?),
                            _ => Arc::new(AuditLog::open_with(db, options)?),
                        },
                    };
                Some(log)
            }
            _ => None,
        };
        if let Some(log) = &audit {
            let _ = services.audit.set(Arc::clone(log));
        }
        timings.lap("audit writer");
        let config = self.config;
        let mut custom_names = Vec::new();
        for tool in crate::extensions::custom_tools(&workspace, &config, services.stores.as_ref(), &services.runner)? {
            custom_names.push(tool.spec().name.clone());
            registry.register_dynamic(tool)?;
        }
        timings.lap("custom + skill tools");
        let policy = PolicyStage::new(config.tools.policy.clone())?;
        // Borrowed, not cloned: every spec's schema is a tree of maps (0.1 ms for all of them).
        let registered = registry.all();
        let specs: Vec<&ToolSpec> = registered.iter().map(|t| t.tool.spec()).collect();
        crate::agent::check_research_tools(&config, &specs)?;
        let refs: Vec<ToolRef<'_>> = specs.iter().map(|s| ToolRef::from(*s)).collect();
        for warning in policy.policy().warnings().iter().cloned().chain(policy.policy().known_tools(&refs)) {
            tracing::warn!("policy: {warning}");
        }
        timings.lap("policy");
        let mut gate = Gate {
            workspace: Arc::from(workspace.into_boxed_path()),
            policy,
            dialects,
            rate: RateLimiter::new(config.rate_limits.clone()).map_err(GateError::RateLimits)?,
            limits: ConcurrencyLimits::new(config.gate.max_in_flight, config.gate.max_queued),
            approval: ApprovalStage::new(
                config.approval.mode,
                std::time::Duration::from_secs(config.approval.timeout_secs),
                self.approver,
                self.approval_grants.or_else(|| services.stores.as_ref().map(|s| Arc::clone(&s.grants))),
            ),
            hooks: {
                let mut hooks = CommandHook::compile(&config.hooks).map_err(GateError::Hooks)?;
                hooks.extend(self.hooks);
                hooks
            },
            audit,
            shutdown: CancellationToken::new(),
            id_prefix: toolgate_guard::random::hex_id(6),
            next_id: AtomicU64::new(1),
            mcp,
            cache: ResultCache::new(config.cache.clone()),
            loops: LoopBreaker::new(config.loop_breaker.clone()),
            skills: crate::pipeline::skill_scope::SkillScope::default(),
            config,
            custom_names: std::sync::Mutex::new(custom_names),
            services,
            families,
            build_timings: Vec::new(),
        };
        timings.lap("pipeline stages");
        gate.build_timings = timings.phases;
        Ok(gate)
    }
}

/// How long each phase of [`GateBuilder::build`] took, in order (`toolgate --timings` prints
/// them): a few `Instant::now` reads per build, so it is always on.
#[derive(Debug)]
struct BuildTimings {
    last: Instant,
    phases: Vec<(String, std::time::Duration)>,
}

impl BuildTimings {
    fn start() -> BuildTimings {
        BuildTimings { last: Instant::now(), phases: Vec::with_capacity(32) }
    }

    /// Ends the phase `name`, started where the last one ended.
    fn lap(&mut self, name: &str) {
        let now = Instant::now();
        self.phases.push((name.to_owned(), now - self.last));
        self.last = now;
    }

    fn lap_family(&mut self, family: &str) {
        self.lap(&format!("tools: {family}"));
    }
}

/// The tool runtime: a registry of tools and the pipeline every call goes through.
///
/// Cheap to share: wrap it in an `Arc` and call it from many tasks.
#[derive(Debug)]
pub struct Gate {
    workspace: Arc<Path>,
    config: Config,
    policy: PolicyStage,
    /// The language each caller speaks (`[gate] dialect`, `[agents.NAME] dialect`).
    dialects: DialectStage,
    rate: RateLimiter,
    limits: ConcurrencyLimits,
    approval: ApprovalStage,
    hooks: Vec<Arc<dyn Hook>>,
    audit: Option<Arc<dyn AuditStore>>,
    /// Cancelled by [`Gate::shutdown`]; every running call's token is a child of it.
    shutdown: CancellationToken,
    id_prefix: String,
    next_id: AtomicU64,
    /// The MCP client bridge (`[mcp.servers]`), started by [`Gate::start_mcp`].
    mcp: McpBridge,
    /// Results of read-only tools (`[cache]`).
    cache: ResultCache,
    /// Refuses a call repeated too many times in a row (`[loop_breaker]`).
    loops: LoopBreaker,
    /// Limits a caller that follows a skill to its `allowed-tools`.
    skills: crate::pipeline::skill_scope::SkillScope,
    /// The custom and skill tools in the registry, replaced by [`Gate::reload`].
    custom_names: std::sync::Mutex<Vec<String>>,
    /// What the families were built from (registry, store areas, fetcher, runner, ...).
    services: Services,
    /// The families whose tools are registered (routes and tasks: [`Gate::routes`],
    /// [`Gate::start_tasks`]).
    families: Vec<Arc<dyn Family>>,
    /// How long each phase of the build took ([`Gate::build_timings`]).
    build_timings: Vec<(String, std::time::Duration)>,
}

impl Gate {
    /// A builder for a gate over `workspace`.
    pub fn builder(workspace: impl Into<PathBuf>) -> GateBuilder {
        GateBuilder {
            workspace: workspace.into(),
            config: Config::default(),
            builtins: true,
            tools: Vec::new(),
            approver: None,
            hooks: Vec::new(),
            families: Vec::new(),
            audit: AuditTarget::Workspace,
            mcp_timings: None,
            mcp_user: None,
            approval_grants: None,
            one_shot: false,
        }
    }

    /// The workspace root (absolute, canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// How long each phase of [`GateBuilder::build`] took, in order (`toolgate --timings`).
    pub fn build_timings(&self) -> &[(String, std::time::Duration)] {
        &self.build_timings
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The audit log, when the gate keeps one (WASM tools' HTTP requests add rows to it, and
    /// the gateway's page the access decisions whose requester could not be told).
    pub fn audit_log(&self) -> Option<&Arc<dyn AuditStore>> {
        self.audit.as_ref()
    }

    /// The memory tools' store, when `[memory]` is enabled (`serve` re-indexes notes edited on
    /// disk through it).
    pub fn memory(&self) -> Option<&Arc<dyn toolgate_store::memory::MemoryStore>> {
        self.services.memory_store()
    }

    /// The shared pieces the tool families were built from.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The families whose tools this gate registered, built-in ones first.
    pub fn families(&self) -> &[Arc<dyn Family>] {
        &self.families
    }

    /// Every family's JSON endpoints, by family name: `toolgate serve --http` mounts each under
    /// `/api/NAME/`.
    pub fn routes(&self) -> Vec<(&'static str, Arc<dyn family::ApiHandler>)> {
        self.families.iter().filter_map(|f| f.routes(&self.services).map(|r| (f.name(), r))).collect()
    }

    /// Every family's whole-request endpoints ([`Family::mounts`]), for `toolgate serve --http`.
    pub fn mounts(&self) -> Vec<family::Mount> {
        self.families.iter().flat_map(|f| f.mounts(&self.services)).collect()
    }

    /// Spawns every family's background tasks on the current Tokio runtime; each ends when
    /// `shutdown` is cancelled (a long-lived `toolgate serve` calls this once).
    pub fn start_tasks(&self, shutdown: &CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
        self.families.iter().flat_map(|f| f.tasks(&self.services, shutdown)).map(tokio::spawn).collect()
    }

    /// Holds this gate's routines to a team gateway's grants: a routine made by a caller under
    /// grants fires only under its principal's grants as they are at that fire (none while
    /// this is unset: such a routine's fires fail, saying why). Set once, before the gate's
    /// tasks start.
    pub fn hold_routines_to(&self, grants: Arc<dyn toolgate_core::PrincipalGrants>) {
        let _ = self.services.routine_grants.set(grants);
    }

    /// The vault of bridged servers' OAuth sign-ins (the state database's encrypted secrets),
    /// `None` without a state database. A team gateway's users sign in into the gateway's.
    pub fn mcp_vault(&self) -> Option<Arc<dyn SecretVault>> {
        self.mcp.vault()
    }

    /// The MCP client bridge (`bridge.rs`).
    pub(crate) fn mcp_bridge(&self) -> &McpBridge {
        &self.mcp
    }

    /// The revision of the `[tools]` policy in force (a digest of its configuration): the
    /// approvals inbox binds each entry to it.
    pub fn policy_revision(&self) -> String {
        self.policy.revision()
    }

    /// The policy stage, replaced by [`Gate::reload`].
    pub(crate) fn dialect_stage(&self) -> &DialectStage {
        &self.dialects
    }

    pub(crate) fn policy_stage(&self) -> &PolicyStage {
        &self.policy
    }

    /// The custom and skill tools registered now, replaced by [`Gate::reload`].
    pub(crate) fn custom_names(&self) -> &std::sync::Mutex<Vec<String>> {
        &self.custom_names
    }

    /// The registry, for adding or removing dynamic tools at run time.
    pub fn registry(&self) -> &Registry {
        &self.services.registry
    }

    /// A call context for this workspace with the configured identity and provider.
    pub fn context(&self) -> CallContext {
        let identity = Identity {
            user: self.config.identity.user.clone(),
            agent: self.config.identity.agent.clone(),
            ..Identity::default()
        };
        CallContext::new(self.workspace.to_path_buf())
            .with_identity(identity)
            .with_provider(self.config.identity.provider.clone())
    }

    /// The tools `ctx`'s caller may see, sorted by name, in its dialect.
    pub fn visible_tools(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        let visible = self
            .services
            .registry
            .all()
            .into_iter()
            .map(|t| t.tool.spec().clone())
            .filter(|spec| self.policy.visible(spec, ctx).visible)
            .collect();
        // A sub-agent of a gateway's caller is offered only what the caller's grants give.
        let visible = match &ctx.grants {
            Some(grants) => grants.listed(ctx, visible),
            None => visible,
        };
        self.dialects.present(ctx, &self.services.registry, visible)
    }

    /// The tool [`Gate::visible_tools`] has under `name` exactly, without building the list: in
    /// the default dialect the registry's tool of that name, if `ctx`'s caller may see it.
    pub fn visible_tool(&self, ctx: &CallContext, name: &str) -> Option<ToolSpec> {
        if !self.dialects.of(ctx).is_default() {
            return self.visible_tools(ctx).into_iter().find(|s| s.name == name);
        }
        // `resolve` also finds aliases and other cases: only the exact name is the listed one.
        let tool = self.services.registry.resolve(name).filter(|t| t.tool.spec().name == name)?;
        let spec = tool.tool.spec();
        self.policy.visible(spec, ctx).visible.then(|| spec.clone())
    }

    /// The dialect `ctx`'s caller speaks (`[agents.NAME] dialect`, else `[gate] dialect`).
    pub fn dialect(&self, ctx: &CallContext) -> &'static toolgate_dialect::Dialect {
        self.dialects.of(ctx)
    }

    /// Why a tool is or is not visible to `ctx`'s caller and, given parameters, what policy
    /// decides about that call — each with the trace of every step.
    pub fn explain(&self, ctx: &CallContext, tool: &str, params: Option<Value>) -> Result<String, ToolError> {
        let translated =
            self.dialects.of(ctx).translate(tool, params.as_ref().unwrap_or(&Value::Null), &self.services.registry)?;
        let (tool, params) = match translated {
            Some(t) => (t.tool, params.map(|_| t.params)),
            None => (tool.to_owned(), params),
        };
        let found = resolve::resolve(&self.services.registry, &tool)?;
        let spec = found.tool.spec();
        let mut out = String::new();
        if self.policy.policy().profile().is_none() {
            out.push_str(
                "no profile is configured, so the profile is `full`: every tool is visible, and approvals \
                          and the sandbox protect this setup\n",
            );
        }
        out.push_str(&format!("tool `{}` (group {}): {}", spec.name, spec.group, self.policy.visible(spec, ctx)));
        if let Some(params) = params {
            let mut params = params;
            validate::validate(&found, &mut params, &self.config.limits)?;
            let safety = found.tool.safety(&params);
            let decision = self.policy.decision(spec, &safety.touches, ctx);
            out.push_str(&format!("\ncall: {decision}"));
            out.push_str(&format!("tool's own approval requirement: {:?}\n", safety.approval));
        }
        Ok(out)
    }

    /// Policy warnings found when the gate was built (unknown tool names in allow lists, ...).
    pub fn policy_warnings(&self) -> Vec<String> {
        let specs: Vec<ToolSpec> = self.services.registry.all().iter().map(|t| t.tool.spec().clone()).collect();
        let refs: Vec<ToolRef<'_>> = specs.iter().map(ToolRef::from).collect();
        let policy = self.policy.policy();
        policy.warnings().iter().cloned().chain(policy.known_tools(&refs)).map(|w| w.to_string()).collect()
    }

    /// Runs one tool call through the whole pipeline, its sixteen stages in the order
    /// `pipeline/mod.rs` lists (resolve first, audit last).
    ///
    /// Every outcome, success or error, is recorded in the audit log. Errors are written for
    /// the model to act on.
    pub async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let started = SystemTime::now();
        let clock = Instant::now();
        let mut ctx = ctx.clone();
        if ctx.call_id.is_empty() {
            ctx.call_id = self.next_call_id();
        }
        let caller_cancel = std::mem::replace(&mut ctx.cancel, self.shutdown.child_token());
        // Each call notes its own audit detail, even when the caller reuses one context.
        ctx.audit = AuditNote::default();
        // Set by this call's own approval and execute stages, never brought along.
        ctx.approved = None;
        ctx.deadline = None;
        let mut trace: Vec<String> = Vec::with_capacity(6);
        // The policy revision the call is decided under, named last in its audit row.
        let revision = format!("policy revision {}", self.policy.revision());
        let mut audited = Audited {
            tool: name.to_owned(),
            resolved: false,
            params: String::new(),
            called_as: None,
            // The remote parent is this call's alone: the calls its tool makes are children of
            // its `execute` span.
            span: CallSpan::start(&ctx.identity.user, &ctx.identity.agent, ctx.trace_parent.take().as_deref()),
        };
        let result = self.run(&mut ctx, &caller_cancel, name, params, &mut trace, &mut audited).await;
        audited.span.end_stages(&result);
        audited.span.stage("post_hooks");
        hooks::after(&self.hooks, &ctx, &audited.tool, &result).await;
        self.services.events.after_call(&ctx, &audited.tool, &trace, &result);
        self.skills.after(&ctx, &audited.tool, &result);
        audited.span.stage("audit");
        if let Some(audit) = &self.audit {
            let trace: Vec<&str> = trace.iter().map(String::as_str).chain([revision.as_str()]).collect();
            audit.record(crate::pipeline::audit::record(
                &self.services.detector,
                CallRecord {
                    ctx: &ctx,
                    started,
                    tool: &audited.tool,
                    called_as: audited.called_as.as_deref(),
                    params: &audited.params,
                    trace: &trace,
                    result: &result,
                    duration: clock.elapsed(),
                },
            ));
        }
        // A name that resolved to no tool is the caller's text: one label for all of them.
        let tool = if audited.resolved { audited.tool.as_str() } else { crate::metrics::UNKNOWN_TOOL };
        let outcome = result.as_ref().map_or_else(ToolError::kind, |_| "ok");
        let took = clock.elapsed();
        crate::metrics::process().observe(tool, outcome, took);
        audited.span.finish(&result, took);
        result
    }

    async fn run(
        &self,
        ctx: &mut CallContext,
        caller_cancel: &CancellationToken,
        name: &str,
        params: Value,
        trace: &mut Vec<String>,
        audited: &mut Audited,
    ) -> Result<ToolOutput, ToolError> {
        audited.span.stage("resolve");
        let dialect = self.dialects.of(ctx);
        let translated = match dialect.translate(name, &params, &self.services.registry) {
            Ok(translated) => translated,
            Err(e) => {
                audited.params = self.audit_text(&params, &[]);
                return Err(e);
            }
        };
        let (name, params, translated) = match translated {
            Some(t) => {
                trace.push(format!("dialect {}: `{name}` is `{}`", dialect.name(), t.tool));
                // A copy stays with the translation: its notices are said from what was asked.
                (t.tool.clone(), t.params.clone(), Some(t))
            }
            None => (name.to_owned(), params, None),
        };
        let name = name.as_str();
        let tool = match resolve::resolve(&self.services.registry, name) {
            Ok(tool) => tool,
            // A bridged server's tool: its server may still be connecting, or be down.
            Err(e) => match self.mcp.resolve_missing(&self.services.registry, name).await {
                Some(Ok(tool)) => tool,
                found => {
                    audited.params = self.audit_text(&params, &[]);
                    let e = found.and_then(Result::err).unwrap_or(e);
                    return Err(in_callers_words(translated.as_ref(), e));
                }
            },
        };
        let spec = tool.tool.spec();
        if spec.name != name {
            trace.push(format!("resolved `{name}` to `{}`", spec.name));
        }
        if spec.name != audited.tool {
            audited.called_as = Some(std::mem::take(&mut audited.tool));
        }
        audited.tool.clone_from(&spec.name);
        audited.resolved = true;
        audited.span.tool(&spec.name);
        audited.span.stage("visibility");
        // A refusal names its rule in the trace too (the audit row, a job's decision event).
        self.policy.check_visible(spec, ctx).inspect_err(|e| {
            trace.push(format!("policy: refused: {e}"));
            audited.span.decision("deny");
        })?;
        audited.span.stage("validate");
        let mut params = params;
        if let Err(e) = validate::validate(&tool, &mut params, &self.config.limits) {
            audited.params = self.audit_text(&params, &tool.tool.safety(&params).sensitive_params);
            return Err(in_callers_words(translated.as_ref(), e));
        }
        let mut safety = tool.tool.safety(&params);
        audited.params = self.audit_text(&params, &safety.sensitive_params);
        audited.span.stage("loop_breaker");
        self.loops.stage(ctx, &spec.name, &params, trace)?;
        audited.span.stage("skill_scope");
        self.skills.check(ctx, spec, &safety.touches)?;
        audited.span.stage("policy");
        let redacted = redact_params(&params, &safety.sensitive_params);
        let decision = self.policy.decide(spec, &safety.touches, ctx).inspect_err(|e| {
            trace.push(format!("policy: refused: {e}"));
            audited.span.decision("deny");
        })?;
        audited.span.decision(verdict_name(decision.verdict));
        trace.push(format!("policy: {}: {}", decision.verdict, decision.reason));
        apply_verdict(decision.verdict, &mut safety, &decision);
        // A team gateway's grants, with the call's touches (argument rules, mode ask): the
        // caller's own calls and its sub-agents' alike.
        if let Some(grants) = &ctx.grants {
            let granted = grants.check(ctx, spec, &safety.touches).inspect_err(|e| {
                trace.push(format!("gateway grants: refused: {e}"));
                audited.span.decision("deny");
            })?;
            trace.push(granted.trace);
            if let Some(reason) = granted.ask {
                safety.approval = ApprovalRequirement::Always;
                safety.approval_reason = Some(reason.into());
            }
        }
        if let Some(reason) = safety.refusal.take() {
            audited.span.decision("deny");
            return Err(ToolError::Denied { tool: spec.name.clone(), reason: reason.into_owned() });
        }
        audited.span.stage("rate_limits");
        self.rate.check(&ctx.identity.user, &ctx.identity.agent, &spec.name, safety.rate_class)?;
        // A call of a model turn takes its running slot once its turn comes (below): taken
        // here, a later call waiting for its turn would hold the slot an earlier one needs.
        audited.span.stage("concurrency");
        let mut permit = if ctx.turn.is_none() { Some(self.limits.acquire(&ctx.identity.agent).await?) } else { None };
        audited.span.stage("pre_hooks");
        match hooks::before(&self.hooks, ctx, &spec.name, &redacted).await {
            HookVerdict::Continue => {}
            HookVerdict::Block(message) => {
                audited.span.decision("deny");
                return Err(ToolError::Denied {
                    tool: spec.name.clone(),
                    reason: format!("blocked by a hook: {message}"),
                });
            }
            HookVerdict::Allow => {
                trace.push("hooks: allow".to_owned());
                if safety.approval != ApprovalRequirement::Always {
                    safety.approval = ApprovalRequirement::Never;
                }
            }
            HookVerdict::Ask(reason) => {
                trace.push(format!("hooks: ask: {reason}"));
                safety.approval = ApprovalRequirement::Always;
                safety.approval_reason = Some(reason.into());
            }
        }
        if safety.inspect {
            audited.span.stage("inspect");
            let notes = tool.tool.inspect(ctx, &params).await?;
            trace.push(format!("inspected before approval: {} note(s)", notes.len()));
            if !notes.is_empty() {
                let reason = safety.approval_reason.take().unwrap_or_default();
                safety.approval_reason = Some(format!("{reason}\n{}", notes.join("\n")).trim_start().to_owned().into());
            }
        }
        audited.span.stage("approval");
        // A forwarded call's approval by its node answers for exactly the parameters the tool
        // will run with here (after this node's dialect and validation), which must be the ones
        // that node sent and digested (its one-call key carries it; a request cannot).
        let approved_elsewhere = match (&ctx.forwarded_by, &ctx.forwarded_approval) {
            (Some(node), Some(approved)) if approved.digest == approval::params_digest(&params) => {
                Some(format!("approval: approved on node {node}: {}", approved.decided))
            }
            _ => None,
        };
        // The inbox entry that decides, when one does (named in the trace).
        let entry = Arc::new(std::sync::OnceLock::new());
        let decided_by = Arc::new(std::sync::OnceLock::new());
        let approval = self
            .approval
            .check(spec, &safety, &params, approved_elsewhere.is_some(), |reason| ApprovalRequest {
                id: ctx.call_id.clone(),
                tool: spec.name.clone(),
                params: scrub_json(&redacted, &self.services.detector),
                subject: safety.approval_subject.as_deref().map(|s| output::scrub(s, &self.services.detector)),
                reason,
                identity: ctx.identity.clone(),
                digest: String::new(),
                policy_revision: self.policy.revision(),
                batch: ctx.batch.clone(),
                wait: std::time::Duration::ZERO,
                entry: Arc::clone(&entry),
                decided_by: Arc::clone(&decided_by),
            })
            .await
            .inspect_err(|_| trace.extend(entry.get().map(|id| format!("approval {id}"))))?;
        audited.span.approval(approval);
        match approved_elsewhere {
            Some(how) if approval == approval::APPROVED_ELSEWHERE => trace.push(how),
            _ => trace.push(approval.to_owned()),
        }
        trace.extend(entry.get().map(|id| format!("approval {id}")));
        // What a person approved here travels with the call if it is forwarded to another node,
        // when it was decided in the approvals inbox (an entry of the store every node shares,
        // decided by whoever may decide it there). An answer from the caller's own MCP client or
        // terminal, or an earlier "allow always" of this node, does not: the owner's approver
        // may be stricter than this node's, and the owner asks as for any call of its own.
        if let Some(how) = approval.strip_prefix("approval: allowed ")
            && let Some(id) = entry.get()
        {
            let by = decided_by.get().map(|by| format!(", by {by}")).unwrap_or_default();
            ctx.approved = Some(format!("allowed {how} (approval {id}{by})"));
        }
        // The turn's approvals were asked together; the calls run in the model's order.
        if let Some(turn) = ctx.turn.take() {
            tokio::select! {
                waited = turn.wait(caller_cancel) => waited?,
                () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            }
            permit = Some(self.limits.acquire(&ctx.identity.agent).await?);
        }
        let _permit = permit;
        if let Some(log) = &self.audit {
            let read_only = spec.annotations.read_only || safety.read_only;
            let subject = safety.approval_subject.as_deref();
            let called_as = audited.called_as.as_deref();
            let rec = StartedRecord { ctx, tool: &spec.name, called_as, params: &audited.params, trace, subject };
            crate::pipeline::audit::started(log.as_ref(), &self.services.detector, read_only, rec);
        }
        // The tool sees the subject that was approved (or decided on without asking), never one
        // the caller's context brought along (a parent call's, a library caller's).
        ctx.approval_subject = safety.approval_subject.take();
        let mut timeout = safety.timeout.unwrap_or_else(|| self.config.gate.timeout());
        // A call sent to the node that holds what it is about may wait there for a person, as
        // long as it would wait here: the bound is the call's own one on that node.
        if safety.forwards {
            timeout += self.approval.timeout();
        }
        ctx.deadline = std::time::Instant::now().checked_add(timeout);
        let ctx = &*ctx;
        audited.span.stage("execute");
        let cached = self.cache.before(ctx, spec, &params, trace);
        // A call the tool makes through a gate (an agent's) is a child of this stage.
        let running =
            execute::execute(&tool, ctx, caller_cancel, params, timeout).instrument(audited.span.current().clone());
        let returned = self.cache.around(cached, running).await;
        self.loops.observe(ctx, &spec.name, returned.as_ref());
        let mut out = returned.map_err(|e| {
            let e = output::shape_error(spec, e, self.config.gate.max_output_bytes, &self.services.detector);
            // A parameter problem the tool found as it ran, in the caller's dialect.
            in_callers_words(translated.as_ref(), e)
        })?;
        audited.span.stage("output");
        // The tool's own notice, before the output stage cuts and wraps the text.
        if let Some(translated) = &translated {
            localize_output(translated, &mut out);
        }
        let (out, report) = output::shape(spec, out, self.config.gate.max_output_bytes, &self.services.detector)?;
        if report.truncated {
            trace.push("output: cut to its head and tail".to_owned());
        }
        if !report.redacted.is_empty() {
            trace.push(format!("output: redacted {}", report.redacted.join(", ")));
        }
        if report.suspicious {
            trace.push("output: instruction-like text neutralized".to_owned());
        }
        Ok(out)
    }

    /// Cancels every running call, disconnects the MCP servers and writes the audit log out.
    /// Calls made afterwards still run (bridged tools fail); use this when the process is about
    /// to exit.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
        self.mcp.shutdown();
        if let Some(agents) = &self.services.agents {
            agents.shutdown();
        }
        if let Some(audit) = &self.audit {
            audit.flush();
        }
    }

    /// A fresh call id: one of toolgate's own ids (never redacted), since approvals are answered
    /// by it.
    fn next_call_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        toolgate_guard::ids::mark("call", &format!("{}{n}", self.id_prefix))
    }

    /// Records in the audit log a call refused before it reached [`Gate::call`] (the agent
    /// runtime's checks of a model's raw tool call); `arguments` is kept as text, capped and
    /// redacted like any parameters.
    pub(crate) fn record_refused(&self, ctx: &CallContext, name: &str, arguments: &str, error: &ToolError) {
        self.record_refused_by(ctx, name, arguments, error, "agent runtime: refused before the gate");
    }

    /// The same, with `why` as the row's trace (a gateway's grants refuse calls before the
    /// gate too: `granted.rs`).
    pub(crate) fn record_refused_by(
        &self,
        ctx: &CallContext,
        name: &str,
        arguments: &str,
        error: &ToolError,
        why: &str,
    ) {
        let Some(audit) = &self.audit else { return };
        let mut ctx = ctx.clone();
        if ctx.call_id.is_empty() {
            ctx.call_id = self.next_call_id();
        }
        let head: String = arguments.chars().take(4096).collect();
        let params = self.audit_text(&Value::String(head), &[]);
        let tool: String = name.chars().take(100).collect();
        let result = Err(error.clone());
        audit.record(crate::pipeline::audit::record(
            &self.services.detector,
            CallRecord {
                ctx: &ctx,
                started: SystemTime::now(),
                tool: &tool,
                called_as: None,
                params: &params,
                trace: &[why],
                result: &result,
                duration: std::time::Duration::ZERO,
            },
        ));
    }

    /// Model text or an agent-to-agent message with its secrets redacted (withheld whole when a
    /// `block` rule matched), and an audit event (tool `agent_text`) naming the rules, so a
    /// secret a model writes never reaches the session store, another agent or a caller.
    pub(crate) fn scrub_agent_text(&self, ctx: &CallContext, text: &str) -> String {
        let redacted = self.services.detector.redact(text);
        let mut rules: Vec<&str> = redacted
            .findings
            .iter()
            .filter(|f| f.action != toolgate_guard::leak::LeakAction::Warn)
            .map(|f| f.rule_id)
            .collect();
        if rules.is_empty() {
            return text.to_owned();
        }
        rules.dedup();
        let out = if redacted.blocked {
            format!("[withheld: this text contained a credential ({})]", rules.join(", "))
        } else {
            redacted.text
        };
        if let Some(audit) = &self.audit {
            let mut ctx = ctx.clone();
            ctx.call_id = self.next_call_id();
            let note = format!("leak detector: redacted {} in model text or an agent message", rules.join(", "));
            let result = Ok(ToolOutput::text(String::new()));
            audit.record(crate::pipeline::audit::record(
                &self.services.detector,
                CallRecord {
                    ctx: &ctx,
                    started: SystemTime::now(),
                    tool: "agent_text",
                    called_as: None,
                    params: "",
                    trace: &[note.as_str()],
                    result: &result,
                    duration: std::time::Duration::ZERO,
                },
            ));
        }
        out
    }

    /// The audit log's text of `params`, or nothing when there is no audit log.
    fn audit_text(&self, params: &Value, sensitive: &[&str]) -> String {
        if self.audit.is_none() {
            return String::new();
        }
        audit_params(params, sensitive, &self.services.detector)
    }

    /// Waits until every call made so far is in the audit log.
    pub fn flush_audit(&self) {
        if let Some(audit) = &self.audit {
            audit.flush();
        }
    }
}

/// What the audit log records of a call: the canonical tool name and the parameters as text,
/// redacted, scrubbed and capped (empty when the audit log is off); and its trace spans.
struct Audited {
    tool: String,
    /// Whether `tool` is a registered tool's name (not the caller's text): a metrics label.
    resolved: bool,
    /// The name the caller used, when it is not the tool's (a dialect's or an alias).
    called_as: Option<String>,
    params: String,
    /// The call's span and its current stage's (exported only with `[telemetry]`).
    span: CallSpan,
}

/// `error` in the caller's dialect, when the call was translated from one.
fn in_callers_words(translated: Option<&toolgate_dialect::Translated>, error: ToolError) -> ToolError {
    match translated {
        Some(t) => t.localize(error),
        None => error,
    }
}

/// A dialect call's result as its caller reads it: hints to call again in its names.
fn localize_output(translated: &toolgate_dialect::Translated, out: &mut ToolOutput) {
    for block in &mut out.content {
        if let toolgate_core::Content::Text { text } = block
            && let Some(localized) = translated.localize_text(text)
        {
            *text = localized;
        }
    }
}

/// `value` with credentials in its strings redacted.
fn scrub_json(value: &Value, detector: &LeakDetector) -> Value {
    match value {
        Value::String(s) => Value::String(output::scrub(s, detector)),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrub_json(v, detector)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), scrub_json(v, detector))).collect()),
        other => other.clone(),
    }
}
