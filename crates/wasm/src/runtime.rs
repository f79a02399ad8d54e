//! The engine: compile once (cached on disk), instantiate fresh per call, under fuel, an epoch
//! deadline and a memory limiter.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use toolgate_core::CallContext;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Store, Trap};

use crate::host::{Description, HostState, LogEntry, Tool as ToolWorld, ToolPre};
use crate::{Capabilities, Services, WasmError};

/// The most core instances any tool may ask for (the pooling allocator's per-component
/// bound); the default per call is [`RuntimeConfig::instances`].
pub(crate) const MAX_INSTANCES: usize = 64;
/// The most tables any tool may ask for.
pub(crate) const MAX_TABLES: usize = 64;
/// Linear memories one store may create.
pub(crate) const MAX_MEMORIES: usize = 10;
/// How often the guest yields to the executor, in fuel units (so a timeout preempts it).
const FUEL_YIELD_INTERVAL: u64 = 100_000;

/// How the runtime is set up. [`RuntimeConfig::default`] fits production;
/// tests shorten the deadline and the tick.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are cached (`.toolgate/wasm-cache`); `None` disables it.
    pub cache_dir: Option<PathBuf>,
    /// Fuel per call unless the tool sets its own: about one second of work.
    pub fuel: u64,
    /// Linear memory per call unless the tool sets its own.
    pub memory_bytes: usize,
    /// The most memory any tool may ask for (the pooling allocator's slot size).
    pub max_memory_bytes: usize,
    /// The most fuel any tool may ask for.
    pub max_fuel: u64,
    /// Wall-clock deadline per call unless the tool sets its own (epoch based).
    pub timeout: Duration,
    /// The longest deadline any tool may ask for.
    pub max_timeout: Duration,
    /// The epoch tick (deadlines are rounded up to it).
    pub epoch_tick: Duration,
    /// Core instances per call unless the tool sets its own (`limits.instances`).
    pub instances: usize,
    /// Tables per call unless the tool sets its own (`limits.tables`).
    pub tables: usize,
    /// A component file may be at most this large unless the tool sets its own
    /// (`limits.component_mb`).
    pub component_bytes: u64,
    /// The largest component any tool may ask for.
    pub max_component_bytes: u64,
    /// A result may be at most this many bytes.
    pub max_output_bytes: usize,
    /// Use the pooling allocator (fast instantiation; reserves address space up front).
    pub pooling: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            fuel: 1_000_000_000,
            memory_bytes: 10 << 20,
            max_memory_bytes: 512 << 20,
            max_fuel: 100_000_000_000,
            timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            epoch_tick: Duration::from_millis(500),
            instances: 10,
            tables: 10,
            component_bytes: 10 << 20,
            // Python and JavaScript components carry their interpreter (12-20 MB): their
            // capability file raises `component_mb`, up to this.
            max_component_bytes: 64 << 20,
            max_output_bytes: 4 << 20,
            pooling: true,
        }
    }
}

/// The limits one call runs under, after the tool's overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Fuel.
    pub fuel: u64,
    /// Linear memory in bytes.
    pub memory_bytes: usize,
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Core instances.
    pub instances: usize,
    /// Tables.
    pub tables: usize,
    /// The largest component file.
    pub component_bytes: u64,
}

/// What a call produced besides its result.
#[derive(Debug, Clone, Default)]
pub struct CallReport {
    /// Messages the guest logged.
    pub logs: Vec<LogEntry>,
    /// Messages dropped past the limit.
    pub logs_dropped: usize,
    /// Fuel used.
    pub fuel_used: u64,
    /// Time to instantiate.
    pub instantiate: Duration,
    /// Time in `execute`.
    pub execute: Duration,
}

/// The runtime: one engine, one linker, and the epoch ticker thread. Cheap to clone; the
/// ticker stops when the last clone is dropped.
#[derive(Clone)]
pub struct WasmRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<HostState>,
    config: RuntimeConfig,
    /// Dropping it disconnects the ticker's channel, which ends the thread.
    _ticker: mpsc::Sender<()>,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// A compiled component ready to instantiate, with what it said about itself.
#[derive(Clone)]
pub struct Prepared {
    pre: ToolPre<HostState>,
    /// What `describe` returned.
    pub description: ToolDescription,
    /// BLAKE3 of the component bytes (hex).
    pub hash: String,
    /// Whether the compiled code came from the disk cache.
    pub from_cache: bool,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("description", &self.description).field("hash", &self.hash).finish()
    }
}

/// What a component's `describe` returned, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescription {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its parameters' JSON Schema (an object schema).
    pub input_schema: serde_json::Value,
    /// Its side-effect hints.
    pub annotations: toolgate_core::Annotations,
}

impl WasmRuntime {
    /// Builds the engine (Cranelift, speed), the linker with the `toolgate:tool` imports and
    /// an empty WASI, and starts the epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, WasmError> {
        let mut wc = Config::new();
        wc.cranelift_opt_level(OptLevel::Speed);
        wc.consume_fuel(true);
        wc.epoch_interruption(true);
        wc.wasm_component_model(true);
        wc.max_wasm_stack(1 << 20);
        if config.pooling {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(100)
                .total_core_instances(1000)
                .total_memories(200)
                .total_tables(400)
                .total_stacks(100)
                .max_memory_size(config.max_memory_bytes)
                .max_core_instances_per_component(MAX_INSTANCES as u32)
                .max_memories_per_component(MAX_MEMORIES as u32)
                .max_tables_per_component(MAX_TABLES as u32)
                .max_component_instance_size(1 << 20)
                .max_core_instance_size(1 << 20)
                .table_elements(100_000);
            wc.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wc).map_err(WasmError::engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(WasmError::engine)?;
        ToolWorld::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s).map_err(WasmError::engine)?;

        let (tx, rx) = mpsc::channel::<()>();
        let ticking = engine.clone();
        let tick = config.epoch_tick;
        std::thread::Builder::new()
            .name("wasm-epoch-ticker".into())
            .spawn(move || {
                // Ends when every runtime clone is gone (the sender is dropped).
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(tick) {
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| WasmError::Io { doing: "starting the epoch ticker", path: PathBuf::new(), source: e })?;
        Ok(WasmRuntime { inner: Arc::new(Inner { engine, linker, config, _ticker: tx }) })
    }

    /// The configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// The limits a tool with these capabilities runs under.
    pub fn limits_for(&self, caps: &Capabilities) -> CallLimits {
        let c = &self.inner.config;
        let o = caps.limits;
        CallLimits {
            fuel: o.fuel.unwrap_or(c.fuel).min(c.max_fuel),
            memory_bytes: o.memory_mb.map_or(c.memory_bytes, |m| (m as usize) << 20).min(c.max_memory_bytes),
            timeout: o.timeout_secs.map_or(c.timeout, |s| Duration::from_secs(s.into())).min(c.max_timeout),
            instances: o.instances.map_or(c.instances, |n| n as usize).min(MAX_INSTANCES),
            tables: o.tables.map_or(c.tables, |n| n as usize).min(MAX_TABLES),
            component_bytes: o
                .component_mb
                .map_or(c.component_bytes, |m| u64::from(m) << 20)
                .min(c.max_component_bytes),
        }
    }

    /// Checks that `bytes` are a component (not a core module, within the size limit of a
    /// tool with `caps`).
    pub fn validate(&self, bytes: &[u8], caps: &Capabilities) -> Result<(), WasmError> {
        let limit = self.limits_for(caps).component_bytes;
        if bytes.len() as u64 > limit {
            return Err(WasmError::TooLarge { size: bytes.len() as u64, limit });
        }
        if !wasmparser::Parser::is_component(bytes) {
            let detail = if wasmparser::Parser::is_core_wasm(bytes) {
                "it is a core module".to_owned()
            } else {
                "no WebAssembly header".to_owned()
            };
            return Err(WasmError::NotAComponent { detail });
        }
        let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
        validator.validate_all(bytes).map_err(|e| WasmError::NotAComponent { detail: e.to_string() })?;
        Ok(())
    }

    /// Compiles `bytes` (or loads them from the disk cache), links them against the
    /// `toolgate:tool` world and asks the component to describe itself.
    pub async fn prepare(&self, bytes: &[u8], caps: &Capabilities) -> Result<Prepared, WasmError> {
        self.validate(bytes, caps)?;
        let hash = crate::install::component_hash(bytes);
        let (component, from_cache) = self.compile(bytes, &hash)?;
        let instance_pre = self.inner.linker.instantiate_pre(&component).map_err(|e| wrong_world(&e))?;
        let pre = ToolPre::new(instance_pre).map_err(|e| wrong_world(&e))?;
        let description = self.describe(&pre, caps).await?;
        Ok(Prepared { pre, description, hash, from_cache })
    }

    fn cache_path(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.inner.config.cache_dir.as_ref()?;
        // Keyed by wasmtime's version and this engine's settings as well as the content.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner.engine.precompile_compatibility_hash().hash(&mut h);
        Some(dir.join(format!("wasmtime-{}-{:016x}", wasmtime_version(), h.finish())).join(format!("{hash}.cwasm")))
    }

    fn compile(&self, bytes: &[u8], hash: &str) -> Result<(Component, bool), WasmError> {
        let cache = self.cache_path(hash);
        if let Some(c) = cache.as_deref().and_then(|p| self.load_cached(p)) {
            return Ok((c, true));
        }
        // Two processes preparing the same component (two nodes, or `toolgate call` runs
        // side by side) compile it once: the second waits on the lock, then loads the cache.
        let _compiling = cache.as_deref().and_then(compile_lock);
        if let Some(c) = cache.as_deref().and_then(|p| self.load_cached(p)) {
            return Ok((c, true));
        }
        let component = Component::new(&self.inner.engine, bytes)
            .map_err(|e| WasmError::NotAComponent { detail: format!("{e:#}") })?;
        if let Some(path) = cache
            && let Err(e) = write_cache(&path, &component)
        {
            tracing::warn!(path = %path.display(), "could not cache the compiled component: {e}");
        }
        Ok((component, false))
    }

    /// The compiled component cached at `path`, if there is a usable one.
    fn load_cached(&self, path: &Path) -> Option<Component> {
        if !path.is_file() {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` of this runtime into
        // `.toolgate/wasm-cache`, which tools can never write (the file tools refuse
        // `.toolgate/`, WASM guests have no filesystem), and it is named by the BLAKE3 of
        // the component it came from; wasmtime checks its version and engine settings.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(&self.inner.engine, path) };
        match loaded {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring unusable compiled cache entry: {e:#}");
                None
            }
        }
    }

    fn store(
        &self,
        tool: Arc<str>,
        caps: Arc<Capabilities>,
        services: Services,
        ctx: Option<CallContext>,
        limits: CallLimits,
    ) -> Result<Store<HostState>, WasmError> {
        let mut store = Store::new(&self.inner.engine, HostState::new(tool, caps, services, ctx, limits));
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel).map_err(WasmError::engine)?;
        store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL)).map_err(WasmError::engine)?;
        let tick = self.inner.config.epoch_tick.as_nanos().max(1);
        // One extra tick: the next tick may come at once.
        let ticks = limits.timeout.as_nanos().div_ceil(tick) as u64 + 1;
        store.set_epoch_deadline(ticks);
        store.epoch_deadline_trap();
        Ok(store)
    }

    async fn describe(&self, pre: &ToolPre<HostState>, caps: &Capabilities) -> Result<ToolDescription, WasmError> {
        let limits = self.limits_for(caps);
        let mut store =
            self.store(Arc::from("describe"), Arc::new(Capabilities::none()), Services::default(), None, limits)?;
        let instance = pre.instantiate_async(&mut store).await.map_err(|e| classify(&store, e, limits))?;
        let d = instance.call_describe(&mut store).await.map_err(|e| classify(&store, e, limits))?;
        check_description(d)
    }

    /// Runs `execute(params)` in a fresh instance. The instance is dropped afterwards, whether
    /// it returned, failed or trapped.
    pub async fn execute(
        &self,
        prepared: &Prepared,
        tool: Arc<str>,
        caps: Arc<Capabilities>,
        services: Services,
        ctx: Option<CallContext>,
        params: &str,
    ) -> (Result<Result<String, String>, WasmError>, CallReport) {
        let limits = self.limits_for(&caps);
        let mut report = CallReport::default();
        let mut store = match self.store(tool, caps, services, ctx, limits) {
            Ok(s) => s,
            Err(e) => return (Err(e), report),
        };
        let started = Instant::now();
        let result = async {
            let instance = prepared.pre.instantiate_async(&mut store).await.map_err(|e| classify(&store, e, limits))?;
            report.instantiate = started.elapsed();
            let out = instance.call_execute(&mut store, params).await.map_err(|e| classify(&store, e, limits))?;
            report.execute = started.elapsed() - report.instantiate;
            let size = match &out {
                Ok(s) | Err(s) => s.len(),
            };
            if size > self.inner.config.max_output_bytes {
                return Err(WasmError::OutputTooLarge { size, limit: self.inner.config.max_output_bytes });
            }
            Ok(out)
        }
        .await;
        report.fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let state = store.data_mut();
        report.logs = std::mem::take(&mut state.logs);
        report.logs_dropped = state.logs_dropped;
        (result, report)
    }
}

/// The wasmtime version compiled in (part of the cache key).
pub fn wasmtime_version() -> &'static str {
    "48.0.8"
}

/// An exclusive lock beside the cache entry at `path`, held while its component compiles;
/// `None` (compile without it) when the lock file cannot be made.
fn compile_lock(path: &Path) -> Option<std::fs::File> {
    std::fs::create_dir_all(path.parent()?).ok()?;
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path.with_extension("lock")).ok()?;
    file.lock().ok()?;
    Some(file)
}

fn write_cache(path: &Path, component: &Component) -> Result<(), String> {
    let bytes = component.serialize().map_err(|e| format!("{e:#}"))?;
    let dir = path.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    crate::install::write_file_atomic(path, &bytes).map_err(|e| e.to_string())
}

fn wrong_world(e: &wasmtime::Error) -> WasmError {
    WasmError::WrongWorld { detail: format!("{e:#}") }
}

/// Turns a wasmtime error into what happened: fuel, deadline, memory, stack, or a trap.
fn classify(store: &Store<HostState>, e: wasmtime::Error, limits: CallLimits) -> WasmError {
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => WasmError::FuelExhausted { fuel: limits.fuel },
        Some(Trap::Interrupt) => WasmError::Deadline { after: limits.timeout },
        Some(Trap::StackOverflow) => WasmError::StackOverflow,
        _ if store.data().limiter.memory_refused => WasmError::MemoryLimit { limit: limits.memory_bytes },
        // wasmtime's words when a store creates more instances, tables or memories than
        // the limiter allows.
        _ if format!("{e:#}").contains("resource limit exceeded") => {
            WasmError::CountLimit { detail: format!("{e:#}"), instances: limits.instances, tables: limits.tables }
        }
        _ => WasmError::Trap { detail: format!("{e:#}") },
    }
}

fn check_description(d: Description) -> Result<ToolDescription, WasmError> {
    let bad = |detail: String| Err(WasmError::BadDescription { detail });
    if d.name.is_empty()
        || d.name.len() > 48
        || !d.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return bad(format!("name `{}` must be 1-48 of a-z, 0-9, `_`, `-`", d.name.escape_debug()));
    }
    if d.description.len() > 4096 {
        return bad("the description is longer than 4096 bytes".into());
    }
    let schema: serde_json::Value = match serde_json::from_str(&d.input_schema) {
        Ok(v) => v,
        Err(e) => return bad(format!("input-schema is not JSON: {e}")),
    };
    if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return bad("input-schema must be an object schema (`{\"type\": \"object\", ...}`)".into());
    }
    if d.input_schema.len() > 64 * 1024 {
        return bad("input-schema is larger than 64 KB".into());
    }
    let a = d.annotations;
    Ok(ToolDescription {
        name: d.name,
        description: d.description,
        input_schema: schema,
        annotations: toolgate_core::Annotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        },
    })
}
