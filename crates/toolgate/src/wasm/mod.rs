//! The gate's side of WASM tools (`toolgate_wasm`): this workspace's installed tools
//! (`.toolgate/tools/`, manifests sealed in `.toolgate/state.db`; [`installer`], from
//! `toolgate_wasm`) and the user's ([`user_dir`]), loading both into the registry (the
//! workspace's win), and the services their imports borrow from the gate: tool calls through
//! [`Gate::call`] (the whole pipeline again), secret existence from the store, workspace
//! reads confined like the `read` tool, and HTTP through [`GuestHttp`] (the allowlist, host-side
//! credentials, leak scanning, and the web tools' SSRF-safe fetcher under the `[web]` config).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! let gate = Arc::new(toolgate::Gate::builder(".").build()?);
//! let report = toolgate::wasm::load_tools(&gate).await;
//! for (name, error) in report.failed {
//!     eprintln!("WASM tool {name} not loaded: {error}");
//! }
//! let ctx = gate.context();
//! let out = gate.call(&ctx, "wasm__echo", serde_json::json!({"text": "hi"})).await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use serde_json::Value;
use toolgate_core::{CallContext, Tool, ToolError, ToolOutput};
use toolgate_tools::custom::SecretSource;
use toolgate_tools::fs::FsState;
pub use toolgate_wasm::{
    Capabilities, InstalledTool, Installer, RuntimeConfig, Services, WasmError, WasmRuntime, WasmTool, installer,
    read_capabilities, user_installer,
};
use toolgate_wasm::{HttpClient, SecretLookup, ToolInvoker, WorkspaceReader};
use toolgate_wasm::{installer_in, runtime_in};

use toolgate_agent::ToolCaller;

use crate::Gate;
use crate::extensions::StoreSecrets;
mod http;

pub use http::{Allowed, AuditSink, GuestHttp, MAX_RESPONSE_BYTES, check_request};

/// The user's data folder for WASM tools: `$TOOLGATE_DATA_DIR`, else `$XDG_DATA_HOME/toolgate`,
/// else `~/.local/share/toolgate`. Its tools are loaded in every workspace; a workspace tool
/// of the same name wins.
pub fn user_dir() -> Option<PathBuf> {
    std::env::var_os("TOOLGATE_DATA_DIR").filter(|d| !d.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("XDG_DATA_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .map(|d| d.join("toolgate"))
    })
}

/// What [`load_tools`] did besides registering tools.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Tools that could not be loaded, with why (`*` when a whole folder could not be read).
    pub failed: Vec<(String, WasmError)>,
    /// Things to tell the operator: a workspace tool that replaces a user tool of its name.
    pub warnings: Vec<String>,
}

/// Loads every installed WASM tool, the user's ([`user_dir`]) and then the workspace's, into
/// the gate's registry (a workspace tool replaces a user tool of the same name, with a
/// warning). No installed tool: nothing to do, no engine.
pub async fn load_tools(gate: &Arc<Gate>) -> LoadReport {
    load_tools_from(gate, user_dir().as_deref()).await
}

/// [`load_tools`] with the user's folder given (`None`: the workspace's tools only).
pub async fn load_tools_from(gate: &Arc<Gate>, user: Option<&Path>) -> LoadReport {
    // `tool_install` loads the components it installs with the same host services.
    let _ = gate.services().wasm_host.set(services(gate));
    let report = load(gate, user).await;
    // Kept for `tool_list`.
    *gate.services().wasm_failed.lock().unwrap_or_else(|e| e.into_inner()) =
        report.failed.iter().map(|(name, e)| (name.clone(), e.to_string())).collect();
    report
}

async fn load(gate: &Arc<Gate>, user: Option<&Path>) -> LoadReport {
    let mut report = LoadReport::default();
    let state = gate.workspace().join(".toolgate");
    // One directory read per folder decides: without an installed component there is no engine
    // to build and no connection to open (every `toolgate call` comes through here).
    let has_tools = |dir: &Path| dir.join("state.db").is_file() && any_component(&dir.join("tools"));
    let user = user.filter(|u| has_tools(u) && *u != state.as_path());
    let in_workspace = has_tools(&state);
    if user.is_none() && !in_workspace {
        return report;
    }
    // One engine for both folders, caching compiled code in the workspace.
    let runtime = match runtime_in(&state) {
        Ok(r) => r,
        Err(e) => {
            report.failed.push(("*".to_owned(), e));
            return report;
        }
    };
    let services = services(gate);
    // By name: a workspace tool replaces the user's before anything is registered.
    let mut tools: std::collections::BTreeMap<String, WasmTool> = std::collections::BTreeMap::new();
    let folders =
        user.map(|u| (u.to_path_buf(), "user")).into_iter().chain(in_workspace.then(|| (state.clone(), "workspace")));
    for (dir, origin) in folders {
        let loaded = match installer_in(&dir, runtime.clone()) {
            Ok(i) => i.load_all(&services).await,
            Err(e) => Err(e),
        };
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                report.failed.push((format!("* ({origin} tools in {})", dir.display()), e));
                continue;
            }
        };
        for result in loaded {
            match result {
                Ok(tool) => {
                    let name = tool.spec().name.clone();
                    if tools.insert(name.clone(), tool).is_some() {
                        let warning = format!(
                            "the workspace's WASM tool `{name}` replaces the user's tool of the same name (in {})",
                            user.map(|u| u.display().to_string()).unwrap_or_default()
                        );
                        tracing::warn!("{warning}");
                        report.warnings.push(warning);
                    }
                }
                Err(f) => report.failed.push(f),
            }
        }
    }
    for (name, tool) in tools {
        if let Err(e) = gate.registry().register_dynamic(Arc::new(tool)) {
            report.failed.push((name, WasmError::BadDescription { detail: e.to_string() }));
        }
    }
    report
}

/// What the imports of the gate's WASM tools borrow from it. Secrets (existence, and the
/// values `http` credentials inject) are the ones `toolgate tools secret NAME` stores in
/// `.toolgate/state.db`.
pub fn services(gate: &Arc<Gate>) -> Services {
    let secrets: Option<Arc<dyn SecretSource>> = gate
        .services()
        .stores
        .as_ref()
        .map(|s| Arc::new(StoreSecrets(Arc::clone(&s.secrets))) as Arc<dyn SecretSource>);
    let workspace =
        FsState::new_shared(gate.config().fs.clone()).ok().map(|fs| Arc::new(FsReader(fs)) as Arc<dyn WorkspaceReader>);
    // The gate's fetcher: the web tools' policy (`[web] allow_private`, domain lists, proxy),
    // connection pool and root certificates.
    let secrets_for_http = secrets.clone().unwrap_or_else(|| Arc::new(toolgate_tools::custom::NoSecrets));
    // One audit row per guest request, in the gate's audit log.
    let log = gate.audit_log().cloned();
    let sink: AuditSink = Arc::new(move |record| {
        if let Some(log) = &log {
            log.record(record);
        }
    });
    let http = Some(Arc::new(
        GuestHttp::new(gate.services().fetcher.clone(), secrets_for_http, Arc::clone(&gate.services().detector))
            .with_audit(sink),
    ) as Arc<dyn HttpClient>);
    Services {
        invoker: Some(Arc::new(GateInvoker(Arc::downgrade(gate) as Weak<dyn ToolCaller>))),
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

/// `tools.invoke`: a new call through the gate (its `ToolCaller` port, held weakly: the gate's
/// registry holds the WASM tools that hold this), as the same caller, cancelled with the outer
/// call.
struct GateInvoker(Weak<dyn ToolCaller>);

#[async_trait::async_trait]
impl ToolInvoker for GateInvoker {
    async fn invoke(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let gate = self.0.upgrade().ok_or_else(|| ToolError::failed("toolgate is shutting down"))?;
        let mut inner = ToolCaller::context(&*gate);
        inner.identity = ctx.identity.clone();
        inner.provider = ctx.provider.clone();
        inner.subagent_depth = ctx.subagent_depth;
        inner.ancestors = ctx.ancestors.clone();
        inner.cancel = ctx.cancel.child_token();
        inner.progress = ctx.progress.clone();
        ToolCaller::call(&*gate, &inner, tool, params).await
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
