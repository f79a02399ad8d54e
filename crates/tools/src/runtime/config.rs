//! Configuration of the runtime tools (the `[runtime]` table of `toolgate.toml`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toolgate_sandbox::{Network, ResourceLimits, SandboxMode, SandboxPolicy, default_read_only_subpaths};

use super::RuntimeError;

/// Configuration of the `runtime` tool group: `exec`, `process` and `execute_code`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// How commands are sandboxed (`[runtime.sandbox]`).
    pub sandbox: SandboxConfig,
    /// Deadline of a foreground command when the call gives no `timeout`, in seconds (120).
    pub default_timeout_secs: u64,
    /// Longest `timeout` a call may ask for, in seconds (600).
    pub max_timeout_secs: u64,
    /// Most characters of output a call returns; the middle of longer output is cut and the
    /// whole output stays in `.toolgate/outputs/<id>.log` (30,000).
    pub output_max_chars: usize,
    /// Background processes that may run at once in one workspace (64).
    pub max_processes: usize,
    /// Largest log a command writes to `.toolgate/outputs/`, in bytes (64 MiB); output beyond it
    /// is counted but not kept.
    pub log_max_bytes: u64,
    /// The programs `execute_code` runs, looked up in the sandbox's `PATH` unless absolute.
    pub interpreters: Interpreters,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            sandbox: SandboxConfig::default(),
            default_timeout_secs: 120,
            max_timeout_secs: 600,
            output_max_chars: 30_000,
            max_processes: 64,
            log_max_bytes: 64 << 20,
            interpreters: Interpreters::default(),
        }
    }
}

impl RuntimeConfig {
    /// Checks the values that serde cannot: timeouts, caps and paths.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |field: &str, message: String| Err(RuntimeError::Invalid { field: field.to_owned(), message });
        if self.max_timeout_secs == 0 || self.max_timeout_secs > 24 * 3600 {
            return bad("max_timeout_secs", format!("{} is not between 1 and 86400", self.max_timeout_secs));
        }
        if self.default_timeout_secs == 0 || self.default_timeout_secs > self.max_timeout_secs {
            return bad(
                "default_timeout_secs",
                format!(
                    "{} is not between 1 and max_timeout_secs ({})",
                    self.default_timeout_secs, self.max_timeout_secs
                ),
            );
        }
        if !(1_000..=10_000_000).contains(&self.output_max_chars) {
            return bad("output_max_chars", format!("{} is not between 1000 and 10000000", self.output_max_chars));
        }
        if self.max_processes == 0 || self.max_processes > 4096 {
            return bad("max_processes", format!("{} is not between 1 and 4096", self.max_processes));
        }
        if self.log_max_bytes < 64 * 1024 {
            return bad("log_max_bytes", format!("{} is less than 65536", self.log_max_bytes));
        }
        for (field, paths) in [
            ("sandbox.extra_writable", &self.sandbox.extra_writable),
            ("sandbox.extra_readable", &self.sandbox.extra_readable),
        ] {
            if let Some(p) = paths.iter().find(|p| !p.is_absolute()) {
                return bad(field, format!("`{}` must be an absolute path", p.display()));
            }
        }
        for (lang, program) in [
            ("python", &self.interpreters.python),
            ("node", &self.interpreters.node),
            ("bash", &self.interpreters.bash),
        ] {
            if program.trim().is_empty() {
                return bad(&format!("interpreters.{lang}"), "is empty".to_owned());
            }
        }
        Ok(())
    }
}

/// `[runtime.sandbox]`: what a command may touch. See `docs/sandbox.md` for each mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `read-only`, `workspace-write` (default) or `full-access`.
    pub mode: SandboxMode,
    /// `off` (default) or `on`.
    pub network: Network,
    /// Run commands unconfined, and say so in every result, when this machine cannot enforce
    /// the mode. Off by default: such commands are refused.
    pub allow_unsandboxed_fallback: bool,
    /// More writable directories (absolute), e.g. a shared build cache.
    pub extra_writable: Vec<PathBuf>,
    /// More readable directories (absolute), e.g. `~/.cargo` or `~/.rustup`.
    pub extra_readable: Vec<PathBuf>,
    /// Workspace-relative paths that stay read-only in `workspace-write`
    /// (default `.git/hooks`, `.git/config`, `.toolgate`).
    pub read_only_subpaths: Vec<PathBuf>,
    /// Per-command resource limits (CPU seconds, address space, processes, file size, files).
    pub limits: ResourceLimits,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            mode: SandboxMode::default(),
            network: Network::default(),
            allow_unsandboxed_fallback: false,
            extra_writable: Vec::new(),
            extra_readable: Vec::new(),
            read_only_subpaths: default_read_only_subpaths(),
            limits: ResourceLimits::default(),
        }
    }
}

impl SandboxConfig {
    /// The sandbox policy for one workspace.
    pub fn policy(&self, workspace: impl Into<PathBuf>) -> SandboxPolicy {
        SandboxPolicy {
            mode: self.mode,
            network: self.network,
            workspace: workspace.into(),
            extra_writable: self.extra_writable.clone(),
            extra_readable: self.extra_readable.clone(),
            read_only_subpaths: self.read_only_subpaths.clone(),
            allow_unsandboxed_fallback: self.allow_unsandboxed_fallback,
            limits: self.limits.clone(),
            ..SandboxPolicy::default()
        }
    }
}

/// `[runtime.interpreters]`: the program `execute_code` runs for each language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Interpreters {
    /// Python (default `python3`; runs `python3 -c CODE`).
    pub python: String,
    /// Node.js (default `node`; runs `node -e CODE`).
    pub node: String,
    /// Bash (default `bash`; runs `bash -c CODE`).
    pub bash: String,
}

impl Default for Interpreters {
    fn default() -> Self {
        Interpreters { python: "python3".to_owned(), node: "node".to_owned(), bash: "bash".to_owned() }
    }
}
