//! `tool_install` and `tool_remove` of WASM components. A component is a `.wasm` file in the
//! workspace; its capabilities come from the sidecar file beside it (`NAME.capabilities.json`,
//! as `toolgate wasm install` reads them). The approval subject names the file's full BLAKE3
//! hash and every capability (the JSON that will be stored); `execute` reads the file once,
//! rebuilds the subject from those bytes and installs them only if it is the subject that was
//! approved ([`CallContext::approval_subject`]). When no person is asked
//! (`[approval] mode = "never"`) it is refused: capabilities are granted by a person, never by
//! an agent alone.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolgate_core::{ApprovalRequirement, CallContext, CallSafety, ToolError, ToolOutput, Touches};
use toolgate_wasm::{Capabilities, TOOL_PREFIX, component_hash};

use super::{PlanError, changed_since_approval, invalid};
use crate::Setup;

/// Where installed components go, relative to the workspace.
const TOOLS_DIR: &str = ".toolgate/tools/";

/// Largest component read for an install (the runtime's own limit may be lower).
const MAX_COMPONENT_BYTES: u64 = 32 * 1024 * 1024;

/// A component to install, as read when the plan was made.
#[derive(Debug)]
pub(super) struct WasmPlan {
    name: String,
    /// As given (for messages).
    path: String,
    bytes: Vec<u8>,
    hash: String,
    caps: Capabilities,
    /// With `replace`: the installed tool of that name it replaces (its hash and grants).
    replacing: Option<String>,
}

/// Reads the component at `path` (in the workspace, opened once, at most
/// [`MAX_COMPONENT_BYTES`]) and its capabilities. Refused at once when no person would be asked
/// (`approval_never`), before anything is read.
pub(super) fn plan(
    workspace: &Path,
    name: String,
    path: String,
    replace: bool,
    approval_never: bool,
) -> Result<WasmPlan, PlanError> {
    if approval_never {
        return Err(PlanError::Refused(format!(
            "WASM components get their capabilities from a person, and the approval mode is `never` (no one is \
             asked): ask them to run `toolgate wasm install {} --name {name}`",
            path.escape_debug()
        )));
    }
    if !path.ends_with(".wasm") {
        return Err(invalid("/path", format!("{path:?} is not a `.wasm` file")));
    }
    let file = workspace
        .join(&path)
        .canonicalize()
        .map_err(|e| invalid("/path", format!("cannot find {path:?} in the workspace: {e}")))?;
    if !file.starts_with(workspace) || file.starts_with(workspace.join(".toolgate")) {
        return Err(PlanError::Refused(format!("{path:?} is outside the workspace")));
    }
    let bytes = toolgate_wasm::read_regular_file(&file, MAX_COMPONENT_BYTES)
        .map_err(|e| invalid("/path", format!("{path:?}: {e}")))?;
    // The sidecar too must be a file of the workspace (a link out of it is not followed).
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
    for sidecar in [format!("{name}.capabilities.json"), format!("{stem}.capabilities.json")] {
        if let Ok(real) = file.with_file_name(&sidecar).canonicalize()
            && (!real.starts_with(workspace) || real.starts_with(workspace.join(".toolgate")))
        {
            return Err(PlanError::Refused(format!("{sidecar:?} beside {path:?} leads outside the workspace")));
        }
    }
    let caps = toolgate_wasm::read_capabilities(&file, Some(&name), None).map_err(|e| invalid("/path", e))?;
    caps.validate().map_err(|e| invalid("/path", format!("the capabilities beside {path:?}: {e}")))?;
    let replacing = if replace { replaced(workspace, &name) } else { None };
    Ok(WasmPlan { name, path, hash: component_hash(&bytes), bytes, caps, replacing })
}

/// The installed tool `name` would replace, in words (`None`: none installed).
fn replaced(workspace: &Path, name: &str) -> Option<String> {
    if !workspace.join(TOOLS_DIR).join(format!("{name}.wasm")).is_file() {
        return None;
    }
    let installed = toolgate_wasm::installer(workspace).ok()?.get(name).ok()?;
    let caps = serde_json::to_string(&installed.capabilities).unwrap_or_default();
    Some(format!("`{TOOL_PREFIX}{name}` (BLAKE3 {}, capabilities {caps})", installed.hash))
}

/// What a person approves: the file, its size and full hash, the tool's name and every
/// capability as it will be stored (JSON: escaped, complete).
pub(super) fn subject(plan: &WasmPlan) -> String {
    let caps = serde_json::to_string(&plan.caps).unwrap_or_else(|e| format!("(unprintable: {e})"));
    let replacing = plan.replacing.as_deref().map(|r| format!(", replacing {r}")).unwrap_or_default();
    format!(
        "install {:?} ({} bytes, BLAKE3 {}) as the tool `{TOOL_PREFIX}{}` with the capabilities {caps}{replacing}",
        plan.path,
        plan.bytes.len(),
        plan.hash,
        plan.name
    )
}

/// The grants, in words.
fn grants(caps: &Capabilities) -> String {
    let grants = caps.summary();
    if grants.is_empty() { "no capabilities".to_owned() } else { grants.join("; ") }
}

/// What a person is asked.
pub(super) fn safety(plan: &WasmPlan, base: CallSafety) -> CallSafety {
    CallSafety {
        approval: ApprovalRequirement::Always,
        approval_reason: Some(
            format!(
                "a WASM tool runs with the capabilities granted here ({}): the hosts it may reach, the secrets it \
                 may use, the files it may read",
                grants(&plan.caps)
            )
            .into(),
        ),
        approval_subject: Some(subject(plan)),
        touches: Touches { reads: vec![plan.path.clone()], writes: vec![TOOLS_DIR.to_owned()], ..Touches::default() },
        ..base
    }
}

/// Installs the planned bytes (the caller checked they are the approved ones), then loads the
/// tool into the gate (when the gate loaded its WASM tools, as every `toolgate` command does).
pub(super) async fn install(
    shared: &Setup,
    workspace: &Path,
    plan: WasmPlan,
    replace: bool,
) -> Result<ToolOutput, ToolError> {
    let WasmPlan { name, path, bytes, caps, .. } = plan;
    let failed = |e: toolgate_wasm::WasmError| ToolError::failed(format!("cannot install {path:?}: {e}"));
    let installer = toolgate_wasm::installer(workspace).map_err(failed)?;
    if !replace && installer.get(&name).is_ok() {
        return Err(ToolError::failed(format!(
            "a WASM tool `{TOOL_PREFIX}{name}` is installed already; pass `replace: true` to replace it"
        )));
    }
    let installed = installer.install_bytes(&bytes, Some(&name), caps).await.map_err(failed)?;
    let tool_name = format!("{TOOL_PREFIX}{name}");
    let loaded = match (shared.wasm_host.get(), shared.registry.upgrade()) {
        (Some(host), Some(registry)) => match installer.load(&name, host.clone()).await {
            // Replaces a loaded tool of the name in one step; calls already running finish on it.
            Ok(tool) => match registry.swap_dynamic(vec![Arc::new(tool)], &[]) {
                Ok(()) => "callable now".to_owned(),
                Err(e) => format!("installed, but not loaded: {e}"),
            },
            Err(e) => format!("installed, but not loaded: {e}"),
        },
        _ => "loaded when toolgate next starts".to_owned(),
    };
    let text = format!(
        "installed `{tool_name}` from {path:?} ({} bytes, BLAKE3 {}) with {}; {loaded}",
        installed.size,
        installed.hash,
        grants(&installed.capabilities)
    );
    Ok(ToolOutput::text(text).with_meta(json!({"tool": tool_name, "hash": installed.hash})))
}

/// The bare name of `wasm__NAME`, if it is one a tool can have (letters, digits, `_`, `-`).
fn bare_name(name: &str) -> Option<&str> {
    let bare = name.strip_prefix(TOOL_PREFIX)?;
    let valid = !bare.is_empty()
        && bare.len() <= 64
        && bare.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then_some(bare)
}

fn remove_subject(bare: &str) -> String {
    format!("remove the WASM tool `{TOOL_PREFIX}{bare}` (its file in {TOOLS_DIR} and its manifest)")
}

/// `tool_remove` of `wasm__NAME`: asked every time when it is installed.
pub(super) fn remove_safety(workspace: &Path, name: &str) -> CallSafety {
    let installed = bare_name(name).filter(|bare| workspace.join(TOOLS_DIR).join(format!("{bare}.wasm")).is_file());
    match installed {
        Some(bare) => CallSafety {
            approval: ApprovalRequirement::Always,
            approval_reason: Some("removing a WASM tool deletes its component and its grants".into()),
            approval_subject: Some(remove_subject(bare)),
            touches: Touches { writes: vec![TOOLS_DIR.to_owned()], ..Touches::default() },
            ..CallSafety::default()
        },
        // `execute` says it is not installed; no one is asked.
        None => CallSafety::default(),
    }
}

/// Removes the installed component `wasm__NAME` and unregisters its tool.
pub(super) fn remove(shared: &Setup, ctx: &CallContext, workspace: &Path, name: &str) -> Result<ToolOutput, ToolError> {
    let not_installed = || ToolError::NotFound {
        what: format!("installed WASM tool `{name}`"),
        hint: Some("`tool_list` shows the WASM tools".into()),
    };
    let bare = bare_name(name).ok_or_else(not_installed)?;
    let failed = |e: toolgate_wasm::WasmError| ToolError::failed(format!("cannot remove `{name}`: {e}"));
    let installer = toolgate_wasm::installer(workspace).map_err(failed)?;
    if installer.get(bare).is_err() {
        return Err(not_installed());
    }
    if ctx.approval_subject.as_deref() != Some(remove_subject(bare).as_str()) {
        return Err(changed_since_approval());
    }
    let removed = installer.remove(bare).map_err(failed)?;
    let tool_name = format!("{TOOL_PREFIX}{}", removed.name);
    if let Some(registry) = shared.registry.upgrade() {
        registry.unregister_dynamic(&tool_name);
    }
    Ok(ToolOutput::text(format!("removed the WASM tool `{tool_name}` (its file and manifest)")))
}
