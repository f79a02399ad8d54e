//! Where installed tools live and how their files are read: the installer of a workspace's
//! tools (`.toolgate/tools/`, manifests sealed in `.toolgate/state.db`, compiled code cached in
//! `.toolgate/wasm-cache`) or of a folder of the user's, a component's capabilities file, and a
//! bounded read of a regular file that never blocks on a FIFO. The CLI (`toolgate wasm
//! install`), the gate's loading and `tool_install` share them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_store::Store;

use crate::{Capabilities, Installer, RuntimeConfig, WasmError, WasmRuntime};

/// The installer for the WASM tools of `workspace`, with the compiled-code cache in
/// `.toolgate/wasm-cache`.
pub fn installer(workspace: &Path) -> Result<Installer, WasmError> {
    let state = workspace.join(".toolgate");
    installer_in(&state, runtime_in(&state)?)
}

/// The installer for the user's WASM tools in `dir`: components in `dir/tools/`, manifests in
/// `dir/state.db` (sealed with `dir/secret.key`).
pub fn user_installer(dir: &Path) -> Result<Installer, WasmError> {
    installer_in(dir, runtime_in(dir)?)
}

/// A runtime whose compiled-code cache is `state/wasm-cache`.
pub fn runtime_in(state: &Path) -> Result<WasmRuntime, WasmError> {
    WasmRuntime::new(RuntimeConfig { cache_dir: Some(state.join("wasm-cache")), ..RuntimeConfig::default() })
}

/// The installer of the folder `state` (components in `state/tools/`, manifests in
/// `state/state.db`) on `runtime` (one engine may serve several folders).
pub fn installer_in(state: &Path, runtime: WasmRuntime) -> Result<Installer, WasmError> {
    let store = Arc::new(Store::open(&state.join("state.db"))?);
    Ok(Installer::new(runtime, state.join("tools"), store))
}

/// A component's capabilities: the `explicit` file, else `NAME.capabilities.json` or
/// `<stem>.capabilities.json` beside it, else none.
pub fn read_capabilities(file: &Path, name: Option<&str>, explicit: Option<&Path>) -> Result<Capabilities, String> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_owned()],
        None => {
            let dir = file.parent().unwrap_or(Path::new("."));
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("tool");
            name.into_iter().chain([stem]).map(|n| dir.join(format!("{n}.capabilities.json"))).collect()
        }
    };
    for path in candidates {
        if path.is_file() || explicit.is_some() {
            // Resolved first: a capabilities file may be a link (the read does not follow one).
            let real = path.canonicalize().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let bytes = read_regular_file(&real, MAX_CAPABILITIES_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))?;
            return Capabilities::from_json(&text).map_err(|e| format!("in {}: {e}", path.display()));
        }
    }
    Ok(Capabilities::none())
}

/// Largest capabilities file read.
const MAX_CAPABILITIES_BYTES: u64 = 1024 * 1024;

/// A regular file's content, at most `max` bytes, read through one handle opened without
/// blocking and without following a final symbolic link (a FIFO put in its place is refused,
/// not waited on).
pub fn read_regular_file(file: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(file)
        .map_err(|e| format!("cannot open it: {e}"))?;
    let meta = handle.metadata().map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a file".to_owned());
    }
    let mut bytes = Vec::new();
    handle.take(max + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("larger than {max} bytes"));
    }
    Ok(bytes)
}
