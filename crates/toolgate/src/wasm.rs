//! The gate's side of WASM tools (`toolgate_wasm`): the installer of this workspace's tools
//! (`.toolgate/tools/`, manifests sealed in `.toolgate/state.db`), loading them into the
//! registry, and the services their imports borrow from the gate: tool calls through
//! [`Gate::call`] (the whole pipeline again), secret existence from the store, workspace
//! reads confined like the `read` tool, and HTTP through [`GuestHttp`] (the allowlist, host-side
//! credentials, leak scanning, and the web tools' SSRF-safe fetcher under the `[web]` config).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! let gate = Arc::new(toolgate::Gate::builder(".").build()?);
//! for (name, error) in toolgate::wasm::load_tools(&gate).await {
//!     eprintln!("WASM tool {name} not loaded: {error}");
//! }
//! let ctx = gate.context();
//! let out = gate.call(&ctx, "wasm__echo", serde_json::json!({"text": "hi"})).await?;
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::{Arc, Weak};

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_store::Store;
use toolgate_tools::custom::SecretSource;
use toolgate_tools::fs::FsState;
pub use toolgate_wasm::{
    Capabilities, InstalledTool, Installer, RuntimeConfig, Services, WasmError, WasmRuntime, WasmTool,
};
use toolgate_wasm::{HttpClient, SecretLookup, ToolInvoker, WorkspaceReader};

use crate::Gate;
use crate::extensions::StoreSecrets;
pub use crate::wasm_http::{Allowed, AuditSink, GuestHttp, MAX_RESPONSE_BYTES, check_request};

/// The installer for the WASM tools of `workspace`, with the compiled-code cache in
/// `.toolgate/wasm-cache`.
pub fn installer(workspace: &Path) -> Result<Installer, WasmError> {
    let state = workspace.join(".toolgate");
    let runtime =
        WasmRuntime::new(RuntimeConfig { cache_dir: Some(state.join("wasm-cache")), ..RuntimeConfig::default() })?;
    let store = Arc::new(Store::open(&state.join("state.db"))?);
    Ok(Installer::new(runtime, state.join("tools"), store))
}

/// Loads every installed WASM tool of the gate's workspace into its registry (replacing
/// tools of the same name). Returns the tools that could not be loaded, with why: a changed
/// file, a component that no longer compiles. No installed tool: nothing to do, no engine.
pub async fn load_tools(gate: &Arc<Gate>) -> Vec<(String, WasmError)> {
    let db = gate.workspace().join(".toolgate/state.db");
    // One directory read decides: without an installed component there is no engine to build
    // and no second connection to open (every `toolgate call` comes through here).
    if !db.is_file() || !any_component(&gate.workspace().join(".toolgate/tools")) {
        return Vec::new();
    }
    let installer = match installer(gate.workspace()) {
        Ok(i) => i,
        Err(e) => return vec![("*".to_owned(), e)],
    };
    match installer.list() {
        Ok(list) if list.is_empty() => return Vec::new(),
        Ok(_) => {}
        Err(e) => return vec![("*".to_owned(), e)],
    }
    let services = services(gate);
    let loaded = match installer.load_all(&services).await {
        Ok(l) => l,
        Err(e) => return vec![("*".to_owned(), e)],
    };
    let mut failed = Vec::new();
    for result in loaded {
        match result {
            Ok(tool) => {
                let name = tool.prepared().description.name.clone();
                if let Err(e) = gate.registry().register_dynamic(Arc::new(tool)) {
                    failed.push((name, WasmError::BadDescription { detail: e.to_string() }));
                }
            }
            Err(f) => failed.push(f),
        }
    }
    failed
}

/// What the imports of the gate's WASM tools borrow from it. Secrets (existence, and the
/// values `http` credentials inject) are the ones `toolgate tools secret NAME` stores in
/// `.toolgate/state.db`.
pub fn services(gate: &Arc<Gate>) -> Services {
    let secrets: Option<Arc<dyn SecretSource>> =
        gate.store.clone().map(|s| Arc::new(StoreSecrets(s)) as Arc<dyn SecretSource>);
    let workspace =
        FsState::new_shared(gate.config().fs.clone()).ok().map(|fs| Arc::new(FsReader(fs)) as Arc<dyn WorkspaceReader>);
    // The gate's fetcher: the web tools' policy (`[web] allow_private`, domain lists, proxy),
    // connection pool and root certificates.
    let secrets_for_http = secrets.clone().unwrap_or_else(|| Arc::new(toolgate_tools::custom::NoSecrets));
    // One audit row per guest request, in the gate's audit log (weak: the gate owns its tools).
    let weak = Arc::downgrade(gate);
    let sink: AuditSink = Arc::new(move |record| {
        if let Some(gate) = weak.upgrade()
            && let Some(log) = gate.audit_log()
        {
            log.record(record);
        }
    });
    let http = Some(Arc::new(
        GuestHttp::new(gate.fetcher.clone(), secrets_for_http, Arc::clone(&gate.detector)).with_audit(sink),
    ) as Arc<dyn HttpClient>);
    Services {
        invoker: Some(Arc::new(GateInvoker(Arc::downgrade(gate)))),
        secrets: secrets.map(|s| Arc::new(SecretExists(s)) as Arc<dyn SecretLookup>),
        workspace,
        http,
    }
}

/// `secrets.exists` over the same secrets as `http` credentials.
struct SecretExists(Arc<dyn SecretSource>);

impl SecretLookup for SecretExists {
    fn exists(&self, name: &str) -> bool {
        matches!(self.0.secret(name), Ok(Some(_)))
    }
}

/// `tools.invoke`: a new call through the gate, as the same caller, cancelled with the outer
/// call.
struct GateInvoker(Weak<Gate>);

#[async_trait::async_trait]
impl ToolInvoker for GateInvoker {
    async fn invoke(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let gate = self.0.upgrade().ok_or_else(|| ToolError::failed("toolgate is shutting down"))?;
        let mut inner = gate.context();
        inner.identity = ctx.identity.clone();
        inner.provider = ctx.provider.clone();
        inner.subagent_depth = ctx.subagent_depth;
        inner.ancestors = ctx.ancestors.clone();
        inner.cancel = ctx.cancel.child_token();
        inner.progress = ctx.progress.clone();
        gate.call(&inner, tool, params).await
    }
}

/// `workspace.read` through the file tools' confinement.
struct FsReader(Arc<FsState>);

#[async_trait::async_trait]
impl WorkspaceReader for FsReader {
    async fn read(&self, workspace: &Path, rel: &str, max: usize) -> Result<Vec<u8>, String> {
        let fs = Arc::clone(&self.0);
        let ctx = CallContext::new(workspace.to_path_buf());
        let rel = rel.to_owned();
        tokio::task::spawn_blocking(move || fs.read_confined(&ctx, &rel, max))
            .await
            .map_err(|_| "the read failed".to_owned())?
            .map_err(|e| e.to_string())
    }
}

/// Whether `dir` holds an installed component (`NAME.wasm`).
fn any_component(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|entries| entries.flatten().any(|e| e.path().extension().is_some_and(|x| x == "wasm")))
}
