//! What a sandbox allows: the mode, the network switch, the paths and the resource limits.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How much of the file system a sandboxed command may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read the system directories and the workspace; write only the private temporary folder,
    /// [`SandboxPolicy::extra_writable`] and `/dev/null` and friends.
    ReadOnly,
    /// Read like [`SandboxMode::ReadOnly`]; write the workspace, the private temporary folder and
    /// [`SandboxPolicy::extra_writable`], except [`SandboxPolicy::read_only_subpaths`].
    #[default]
    WorkspaceWrite,
    /// No file-system confinement. Resource limits, the environment allowlist, the process
    /// group and (when [`Network::Off`]) the network filter still apply.
    FullAccess,
}

impl SandboxMode {
    /// The configuration spelling: `read-only`, `workspace-write`, `full-access`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a sandboxed command may open network sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Only `AF_UNIX` sockets; TCP bind/connect denied by Landlock, other families by seccomp.
    #[default]
    Off,
    /// Unrestricted network.
    On,
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Network::Off => "off",
            Network::On => "on",
        })
    }
}

/// Per-command resource limits, applied with `setrlimit` in the child (and, for the process
/// count when running as root, with the PID namespace's `pid_max`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceLimits {
    /// `RLIMIT_CPU`: CPU seconds before `SIGXCPU`/`SIGKILL`.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`: address space per process, 2 GiB by default.
    pub address_space_bytes: u64,
    /// `RLIMIT_NPROC`: processes (and threads) of the command, counted in its own user
    /// namespace (not applied without one); for root, the PID namespace's `pid_max`.
    pub max_processes: u64,
    /// `RLIMIT_FSIZE`: the largest file a command may write.
    pub max_file_size_bytes: u64,
    /// `RLIMIT_NOFILE`: open file descriptors per process.
    pub max_open_files: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            cpu_seconds: 600,
            address_space_bytes: 2 << 30,
            max_processes: 256,
            max_file_size_bytes: 1 << 30,
            max_open_files: 1024,
        }
    }
}

/// Everything a [`crate::Sandbox`] enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxPolicy {
    /// File-system mode.
    pub mode: SandboxMode,
    /// Network switch.
    pub network: Network,
    /// The workspace: readable in every mode, writable in [`SandboxMode::WorkspaceWrite`].
    pub workspace: PathBuf,
    /// More writable directories, e.g. a build cache or a server's state folder; relative paths
    /// are taken from the workspace. One inside a hidden subpath (`.toolgate/mcp/NAME`) is shown
    /// there alone, the rest of the hidden directory stays hidden.
    pub extra_writable: Vec<PathBuf>,
    /// More readable directories, e.g. `~/.npm` or `~/.pyenv/versions` (the home directory is
    /// not readable by default); relative paths are taken from the workspace.
    pub extra_readable: Vec<PathBuf>,
    /// Paths relative to the workspace that stay read-only in workspace-write.
    pub read_only_subpaths: Vec<PathBuf>,
    /// Directories relative to the workspace whose content is hidden (covered by an empty
    /// read-only tmpfs) in read-only and workspace-write; `.toolgate` by default: tools never
    /// read or write toolgate's own state.
    pub hidden_subpaths: Vec<PathBuf>,
    /// Run unconfined (and say so in [`crate::Enforcement`]) when this machine cannot enforce
    /// the policy. Off by default: such commands are refused.
    pub allow_unsandboxed_fallback: bool,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// A network of its own whose only way out is toolgate: the command runs in a new network
    /// namespace (loopback only) where a listener on `127.0.0.1:PORT` is made for it and handed
    /// to the caller ([`crate::ServerProcess::proxy_listener`]), who serves a vetting proxy on
    /// it. Takes the place of [`SandboxPolicy::network`]; servers only.
    #[serde(skip)]
    pub proxy_port: Option<u16>,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        SandboxPolicy {
            mode: SandboxMode::default(),
            network: Network::default(),
            workspace: PathBuf::from("."),
            extra_writable: Vec::new(),
            extra_readable: Vec::new(),
            read_only_subpaths: default_read_only_subpaths(),
            hidden_subpaths: vec![PathBuf::from(".toolgate")],
            allow_unsandboxed_fallback: false,
            limits: ResourceLimits::default(),
            proxy_port: None,
        }
    }
}

impl SandboxPolicy {
    /// The default policy (workspace-write, network off) for `workspace`.
    pub fn workspace_write(workspace: impl Into<PathBuf>) -> Self {
        SandboxPolicy { workspace: workspace.into(), ..SandboxPolicy::default() }
    }

    /// A read-only policy for `workspace`.
    pub fn read_only(workspace: impl Into<PathBuf>) -> Self {
        SandboxPolicy { mode: SandboxMode::ReadOnly, workspace: workspace.into(), ..SandboxPolicy::default() }
    }
}

/// `.git/hooks`, `.git/config` and `.toolgate`.
pub fn default_read_only_subpaths() -> Vec<PathBuf> {
    vec![PathBuf::from(".git/hooks"), PathBuf::from(".git/config"), PathBuf::from(".toolgate")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_use_kebab_case() {
        let json = serde_json::to_string(&SandboxMode::WorkspaceWrite).unwrap_or_default();
        assert_eq!(json, "\"workspace-write\"");
        let mode: SandboxMode = serde_json::from_str("\"full-access\"").unwrap_or_default();
        assert_eq!(mode, SandboxMode::FullAccess);
        assert_eq!(ResourceLimits::default().address_space_bytes, 2 * 1024 * 1024 * 1024);
    }
}
