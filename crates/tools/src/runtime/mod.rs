//! The runtime tools (group `runtime`): run commands and code in `toolgate-sandbox`.
//!
//! | tool | does |
//! |---|---|
//! | `exec` | `bash -c COMMAND` in the sandbox, in the foreground (with a deadline) or in the background |
//! | `process` | list, poll, page through the log of, write to, signal and kill background processes |
//! | `execute_code` | Python, Node.js or Bash code, through the same sandbox and limits |
//!
//! Build them with [`tools`], which returns the three tools sharing one process table and one
//! prepared [`toolgate_sandbox::Sandbox`] per workspace (built on first use, from
//! [`RuntimeConfig::sandbox`]). The workspace comes from each call's
//! [`toolgate_core::CallContext::workspace`].
//!
//! **Approvals come from command analysis.** `exec`'s [`toolgate_core::Tool::safety`] parses the
//! command with [`toolgate_guard::shell::analyze`]: policy rules (`exec(cargo test:*)`) see the
//! unwrapped argv of every simple command, approval prompts and "allow always" see one line per
//! command, and the class decides the requirement (safe: none; needs approval: unless
//! auto-approved; dangerous: every time). Blocked commands (`curl … | sh`, fork bombs, …) are
//! refused by the tool itself in every approval mode.
//!
//! **Every result says how the command ran** (the sandbox line) and what the sandbox blocked,
//! from real signals. Output longer than [`RuntimeConfig::output_max_chars`] keeps its head and
//! tail; the whole output stays in `.toolgate/outputs/<id>.log`, which `process` pages through.
//!
//! **No orphans.** Commands run in their own process group (and PID namespace where available);
//! on timeout, cancellation, the gate's deadline, `process kill` or when the tools are dropped,
//! the whole group gets `SIGTERM`, then `SIGKILL` after 3 s.
//!
//! # Layout
//!
//! - `config`: [`RuntimeConfig`]; `sandboxes`: the per-workspace sandbox cache.
//! - `classify`: command analysis to [`toolgate_core::CallSafety`]; `render`: the result text.
//! - `run`: one foreground run, the logs; `table`: the background process table.
//! - `owners`: which node holds each background process (and, for `toolgate-browser`, each
//!   browser session), with several nodes on one store.
//! - `exec`, `process`, `execute_code`: one module per tool.
//!
//! # Example
//!
//! ```
//! use toolgate_tools::runtime::{tools, ProcessRunner, RuntimeConfig};
//!
//! let runner = ProcessRunner::new(RuntimeConfig::default()).expect("the default configuration is valid");
//! let runtime = tools(&runner);
//! let names: Vec<&str> = runtime.iter().map(|t| t.spec().name.as_str()).collect();
//! assert_eq!(names, ["exec", "process", "execute_code"]);
//! ```

mod classify;
mod config;
mod exec;
mod execute_code;
mod owners;
mod process;
mod render;
mod run;
mod sandboxes;
mod table;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_core::{Tool, ToolError};

pub use config::{Interpreters, RuntimeConfig, SandboxConfig};
pub use exec::ExecTool;
pub use execute_code::ExecuteCodeTool;
pub use owners::{NodeForwarder, Owners, PROBE_WITHIN, ThisNode, VIA, serve_as_node, this_node, tool_of};
pub use process::ProcessTool;
// Custom tools (`crate::custom`) analyze and launch their commands exactly like `exec`.
pub(crate) use classify::ShellCheck;
pub use classify::changes_what_runs;
pub(crate) use exec::{DEADLINE_GRACE, Launch};
pub use toolgate_sandbox::{
    Enforcement, Network, ResourceLimits, Sandbox, SandboxError, SandboxMode, SandboxPolicy, SandboxStatus,
    status as sandbox_status,
};

/// Why a [`RuntimeConfig`] was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A value is out of range or malformed.
    #[error("invalid [runtime] configuration: `{field}` {message}")]
    Invalid {
        /// The key, relative to `[runtime]`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// What the three tools share.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) config: RuntimeConfig,
    pub(crate) sandboxes: sandboxes::Sandboxes,
    pub(crate) table: table::ProcessTable,
    /// The absolute path of `bash`, when found.
    pub(crate) bash: PathBuf,
}

impl Runtime {
    pub(crate) fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        config.validate()?;
        Ok(Runtime {
            sandboxes: sandboxes::Sandboxes::new(config.sandbox.clone()),
            table: table::ProcessTable::new(config.max_processes),
            bash: find_program("bash"),
            config,
        })
    }

    /// Bytes of output kept in memory per command: enough for `output_max_chars` characters of
    /// any width at both ends.
    pub(crate) fn capture_bytes(&self) -> usize {
        self.config.output_max_chars.saturating_mul(4).max(64 * 1024)
    }

    /// The deadline a call asks for, checked against the maximum.
    pub(crate) fn timeout(&self, tool: &str, requested: Option<u64>) -> Result<std::time::Duration, ToolError> {
        let secs = requested.unwrap_or(self.config.default_timeout_secs);
        if secs == 0 || secs > self.config.max_timeout_secs {
            return Err(ToolError::invalid(
                tool,
                "/timeout",
                format!("`timeout` is in seconds, between 1 and {}; got {secs}", self.config.max_timeout_secs),
            ));
        }
        Ok(std::time::Duration::from_secs(secs))
    }
}

/// An absolute path for `name`: the usual system folders first, then the absolute folders of
/// this process's `PATH`; the bare name (looked up in the sandbox's `PATH`) if none has it.
fn find_program(name: &str) -> PathBuf {
    let system = ["/bin", "/usr/bin", "/usr/local/bin"].map(PathBuf::from);
    system.iter().chain(&path_dirs()).map(|d| d.join(name)).find(|p| p.is_file()).unwrap_or_else(|| PathBuf::from(name))
}

/// The absolute folders of this process's `PATH`.
fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).filter(|d| d.is_absolute()).collect())
        .unwrap_or_default()
}

/// The interpreter `execute_code` runs for a configured `program`: an absolute path as given; a
/// bare name looked up in `PATH`, skipping version-manager shims (`~/.pyenv/shims`,
/// `~/.asdf/shims`, ...: scripts that run the manager from the home folder, which the sandbox
/// does not let commands read), then in the system folders.
pub(crate) fn find_interpreter(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let system = ["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from);
    path_dirs()
        .iter()
        .filter(|d| !d.components().any(|c| c.as_os_str() == "shims"))
        .chain(&system)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

/// The working directory a call asks for: inside the workspace (and not in `.toolgate/`).
pub(crate) fn resolve_workdir(tool: &str, workspace: &Path, workdir: Option<&str>) -> Result<PathBuf, ToolError> {
    let Some(w) = workdir.filter(|w| !w.is_empty() && *w != ".") else {
        return Ok(workspace.to_path_buf());
    };
    let real = workspace.join(w).canonicalize().map_err(|e| ToolError::NotFound {
        what: format!("working directory `{w}`"),
        hint: Some(format!("{e}; give a folder inside the workspace, relative to its root")),
    })?;
    if !real.starts_with(workspace) {
        return Err(ToolError::invalid(
            tool,
            "/workdir",
            format!("`{w}` is outside the workspace; commands run inside it (give a path relative to its root)"),
        ));
    }
    if real.starts_with(workspace.join(".toolgate")) {
        return Err(ToolError::invalid(tool, "/workdir", "`.toolgate/` is toolgate's own state; use another folder"));
    }
    if !real.is_dir() {
        return Err(ToolError::invalid(tool, "/workdir", format!("`{w}` is not a folder")));
    }
    Ok(real)
}

/// The process runner of a gate: one sandbox cache and one table of background processes,
/// shared by `exec`, `process`, `execute_code` and the custom and skill tools (each of which
/// would otherwise prune the others' logs of processes still running). Cheap to clone.
///
/// Dropping the last clone (and the tools holding it) stops every background process started.
#[derive(Debug, Clone)]
pub struct ProcessRunner(pub(crate) Arc<Runtime>);

impl ProcessRunner {
    /// A runner for `config`, checked first.
    pub fn new(config: RuntimeConfig) -> Result<ProcessRunner, RuntimeError> {
        Ok(ProcessRunner(Arc::new(Runtime::new(config)?)))
    }

    /// The `[runtime]` configuration it runs with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.0.config
    }

    /// Whether it never started a process nor built a sandbox: its drop would then stop and
    /// remove nothing (a one-shot `toolgate call` skips the gate's drop only then).
    pub fn is_unused(&self) -> bool {
        self.0.table.is_empty() && self.0.sandboxes.is_empty()
    }

    /// Records every background process it starts in `store`, with this node
    /// ([`serve_as_node`]), so a `process` call about it that reaches another node of the same
    /// store names the node that holds it (once; later calls are ignored).
    pub fn share_across_nodes(&self, store: std::sync::Arc<dyn toolgate_store::LocalStore>) {
        self.0.table.owners.set_store(store);
    }

    /// Sends a `process` call about a process another node holds to that node with
    /// `forwarder` (once; without one, the call is answered with where the process runs).
    pub fn forward_with(&self, forwarder: std::sync::Arc<dyn NodeForwarder>) {
        self.0.table.owners.set_forwarder(forwarder);
    }
}

/// `exec`, `process` and `execute_code` on `runner`.
pub fn tools(runner: &ProcessRunner) -> Vec<Arc<dyn Tool>> {
    let runtime = &runner.0;
    vec![
        Arc::new(ExecTool::new(Arc::clone(runtime))),
        Arc::new(ProcessTool::new(Arc::clone(runtime))),
        Arc::new(ExecuteCodeTool::new(Arc::clone(runtime))),
    ]
}
