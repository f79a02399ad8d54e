//! One prepared [`Sandbox`] per workspace root, built on first use.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use toolgate_core::ToolError;
use toolgate_sandbox::{Sandbox, SandboxError};

use super::config::SandboxConfig;

/// The sandboxes of every workspace the tools have run in.
///
/// A [`Sandbox`] holds the prepared Landlock ruleset, the seccomp program and a private
/// temporary folder; building one costs a few system calls, so each workspace gets one, kept
/// for the life of the tools. A failed build is not cached: the next call tries again.
#[derive(Debug)]
pub(crate) struct Sandboxes {
    config: SandboxConfig,
    built: Mutex<HashMap<PathBuf, Arc<Sandbox>>>,
}

impl Sandboxes {
    pub(crate) fn new(config: SandboxConfig) -> Self {
        Sandboxes { config, built: Mutex::new(HashMap::new()) }
    }

    /// Whether no sandbox was built yet (none holds a folder to remove on drop).
    pub(crate) fn is_empty(&self) -> bool {
        self.built.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// The sandbox for `workspace`, built on first use.
    pub(crate) fn get(&self, workspace: &Path) -> Result<Arc<Sandbox>, ToolError> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = built.get(workspace) {
            return Ok(Arc::clone(s));
        }
        let sandbox = Arc::new(Sandbox::new(self.config.policy(workspace)).map_err(sandbox_error)?);
        built.insert(workspace.to_path_buf(), Arc::clone(&sandbox));
        Ok(sandbox)
    }
}

/// A sandbox error in words for the model.
pub(crate) fn sandbox_error(e: SandboxError) -> ToolError {
    match e {
        SandboxError::Unenforceable { .. } => ToolError::failed(format!(
            "{e}. Ask the user to check `toolgate sandbox status`; commands cannot run until the sandbox \
             can be enforced or the configuration allows the fallback"
        )),
        SandboxError::Spawn { .. } => {
            ToolError::failed(format!("{e}; check that the program is installed and on PATH"))
        }
        other => ToolError::failed(other.to_string()),
    }
}
