//! `tool_install` and `tool_remove` of WASM components. A component is a `.wasm` file in the
//! workspace; its capabilities come from the sidecar file beside it (`NAME.capabilities.json`,
//! as `toolgate wasm install` reads them). The approval request shows the file's BLAKE3 hash
//! and every grant, and the install writes exactly the bytes that were hashed. When no person
//! is asked (`[approval] mode = "never"`) it is refused: capabilities are granted by a person,
//! never by an agent alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use toolgate_core::{ApprovalRequirement, CallSafety, ToolError, ToolOutput, Touches};
use toolgate_wasm::{Capabilities, TOOL_PREFIX, component_hash};

use super::{PlanError, Shared, invalid};

/// Where installed components go, relative to the workspace.
const TOOLS_DIR: &str = ".toolgate/tools/";

/// Largest component read for an install (the runtime's own limit may be lower).
const MAX_COMPONENT_BYTES: u64 = 64 * 1024 * 1024;

/// A component to install, as read when the plan was made.
#[derive(Debug)]
pub(super) struct WasmPlan {
    pub(super) name: String,
    /// As given (for messages).
    path: String,
    file: PathBuf,
    pub(super) hash: String,
    size: u64,
    pub(super) caps: Capabilities,
}

/// Reads the component at `path` (in the workspace) and its capabilities.
pub(super) fn plan(workspace: &Path, name: String, path: String) -> Result<WasmPlan, PlanError> {
    if !path.ends_with(".wasm") {
        return Err(invalid("/path", format!("`{path}` is not a `.wasm` file")));
    }
    let file = workspace
        .join(&path)
        .canonicalize()
        .map_err(|e| invalid("/path", format!("cannot find `{path}` in the workspace: {e}")))?;
    if !file.starts_with(workspace) || file.starts_with(workspace.join(".toolgate")) {
        return Err(PlanError::Refused(format!("`{path}` is outside the workspace")));
    }
    let size = std::fs::metadata(&file)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .ok_or_else(|| invalid("/path", format!("`{path}` is not a file")))?;
    if size > MAX_COMPONENT_BYTES {
        return Err(invalid(
            "/path",
            format!("`{path}` is {size} bytes; components are at most {MAX_COMPONENT_BYTES}"),
        ));
    }
    let bytes = std::fs::read(&file).map_err(|e| invalid("/path", format!("cannot read `{path}`: {e}")))?;
    let caps = crate::wasm::read_capabilities(&file, Some(&name), None).map_err(|e| invalid("/path", e))?;
    caps.validate().map_err(|e| invalid("/path", format!("the capabilities beside `{path}`: {e}")))?;
    Ok(WasmPlan { name, path, file, hash: component_hash(&bytes), size: bytes.len() as u64, caps })
}

/// The grants, in words.
fn grants(caps: &Capabilities) -> String {
    let grants = caps.summary();
    if grants.is_empty() { "no capabilities".to_owned() } else { grants.join("; ") }
}

/// What a person is asked (or why no one is).
pub(super) fn safety(plan: &WasmPlan, approval_never: bool, base: CallSafety) -> CallSafety {
    if approval_never {
        let why = format!(
            "WASM components get their capabilities from a person, and the approval mode is `never` (no one is \
             asked): ask them to run `toolgate wasm install {} --name {}`",
            plan.path, plan.name
        );
        return CallSafety { refusal: Some(why.into()), ..base };
    }
    CallSafety {
        approval: ApprovalRequirement::Always,
        approval_reason: Some(
            "a WASM tool runs with the capabilities granted here: the hosts it may reach, the secrets it may use, \
             the files it may read"
                .into(),
        ),
        approval_subject: Some(format!(
            "install `{}` ({} bytes, BLAKE3 {}) as the tool `{TOOL_PREFIX}{}` with: {}",
            plan.path,
            plan.size,
            &plan.hash[..16.min(plan.hash.len())],
            plan.name,
            grants(&plan.caps)
        )),
        touches: Touches { reads: vec![plan.path.clone()], writes: vec![TOOLS_DIR.to_owned()], ..Touches::default() },
        ..base
    }
}

/// Installs the component if its bytes are still the ones approved (`approved`: their hash),
/// then loads it into the gate (when the gate loaded its WASM tools, as `toolgate` does).
pub(super) async fn install(
    shared: &Shared,
    workspace: &Path,
    plan: WasmPlan,
    approved: Option<(String, Capabilities)>,
    replace: bool,
) -> Result<ToolOutput, ToolError> {
    let WasmPlan { name, path, file, caps, .. } = plan;
    let bytes = std::fs::read(&file).map_err(|e| ToolError::failed(format!("cannot read `{path}`: {e}")))?;
    match approved {
        Some((hash, approved_caps)) if hash == component_hash(&bytes) && approved_caps == caps => {}
        Some(_) => {
            return Err(ToolError::failed(format!(
                "`{path}` or its capabilities changed after the approval request, so nothing was installed; call \
                 `tool_install` again to be asked about what is there now"
            )));
        }
        None => return Err(ToolError::failed("no approval of this component was recorded; nothing was installed")),
    }
    let failed = |e: toolgate_wasm::WasmError| ToolError::failed(format!("cannot install `{path}`: {e}"));
    let installer = crate::wasm::installer(workspace).map_err(failed)?;
    if !replace && installer.get(&name).is_ok() {
        return Err(ToolError::failed(format!(
            "a WASM tool `{TOOL_PREFIX}{name}` is installed already; pass `replace: true` to replace it"
        )));
    }
    let installed = installer.install_bytes(&bytes, Some(&name), caps).await.map_err(failed)?;
    let tool_name = format!("{TOOL_PREFIX}{name}");
    let gate = shared.gate.get().and_then(std::sync::Weak::upgrade);
    let loaded = match (gate, shared.registry.upgrade()) {
        (Some(gate), Some(registry)) => match installer.load(&name, crate::wasm::services(&gate)).await {
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
        "installed `{tool_name}` from `{path}` ({} bytes, BLAKE3 {}) with {}; {loaded}",
        installed.size,
        installed.hash,
        grants(&installed.capabilities)
    );
    Ok(ToolOutput::text(text).with_structured(json!({"tool": tool_name, "hash": installed.hash})))
}

/// The installed component `name` (`NAME` or `wasm__NAME`), if there is one.
pub(super) fn installed(workspace: &Path, name: &str) -> Option<toolgate_wasm::InstalledTool> {
    let bare = name.strip_prefix(TOOL_PREFIX).unwrap_or(name);
    if !workspace.join(TOOLS_DIR).join(format!("{bare}.wasm")).is_file() {
        return None;
    }
    crate::wasm::installer(workspace).ok()?.get(bare).ok()
}

/// Removes the installed component `name` and unregisters its tool.
pub(super) fn remove(shared: &Shared, workspace: &Path, name: &str) -> Result<ToolOutput, ToolError> {
    let bare = name.strip_prefix(TOOL_PREFIX).unwrap_or(name);
    let failed = |e: toolgate_wasm::WasmError| ToolError::failed(format!("cannot remove `{TOOL_PREFIX}{bare}`: {e}"));
    let removed = crate::wasm::installer(workspace).map_err(failed)?.remove(bare).map_err(failed)?;
    let tool_name = format!("{TOOL_PREFIX}{}", removed.name);
    if let Some(registry) = shared.registry.upgrade() {
        registry.unregister_dynamic(&tool_name);
    }
    Ok(ToolOutput::text(format!("removed the WASM tool `{tool_name}` (its file and manifest)")))
}
