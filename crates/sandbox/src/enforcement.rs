//! How a command actually ran: what was enforced, or that it ran unconfined and why.

use std::fmt;

use serde::Serialize;

use crate::policy::{Network, SandboxMode};
use crate::status::Namespaces;

/// What was enforced for a command (or for every command of a [`crate::Sandbox`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    /// The configured mode.
    pub mode: SandboxMode,
    /// The configured network switch.
    pub network: Network,
    /// `false` when the command ran without file confinement: in full-access mode, or because
    /// the policy allowed falling back (see [`Enforcement::fallback_reason`]).
    pub confined: bool,
    /// Why the sandbox fell back to running unconfined, if it did.
    pub fallback_reason: Option<String>,
    /// The Landlock ABI used, `None` when Landlock was not applied.
    pub landlock_abi: Option<u32>,
    /// Whether the seccomp filter was loaded.
    pub seccomp: bool,
    /// Whether the network was actually cut (seccomp socket filter, plus Landlock TCP rules when
    /// the ABI has them).
    pub network_blocked: bool,
    /// The namespaces the command ran in.
    pub namespaces: Namespaces,
    /// Whether `/proc` was the PID namespace's own (the command saw only its own processes);
    /// `false`: the host's, where every process of the machine is listed.
    pub own_proc: bool,
    /// Whether the read-only subpaths (`.git/hooks`, ...) were mounted read-only.
    pub read_only_subpaths: bool,
    /// Whether `no_new_privs` was set.
    pub no_new_privs: bool,
    /// The effective process cap, `None` when none is enforced (root without `pid_max` per PID
    /// namespace).
    pub process_limit: Option<u64>,
}

impl Enforcement {
    /// Whether the command ran with no sandbox at all beyond rlimits and the environment
    /// allowlist.
    pub fn is_unsandboxed(&self) -> bool {
        !self.confined && !self.network_blocked
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(reason) = &self.fallback_reason {
            write!(f, "NOT sandboxed (fallback allowed by config: {reason})")?;
        } else if !self.confined {
            write!(f, "not confined ({} mode, network {})", self.mode, self.network)?;
        } else {
            write!(f, "sandboxed ({}, network {})", self.mode, self.network)?;
        }
        let mut parts: Vec<String> = Vec::new();
        if let Some(v) = self.landlock_abi {
            parts.push(format!("Landlock ABI {v}"));
        }
        if self.seccomp {
            parts.push("seccomp".into());
        }
        if !self.namespaces.is_empty() {
            parts.push(format!("namespaces {}", self.namespaces));
        }
        if self.own_proc {
            parts.push("own /proc".into());
        } else if self.confined {
            parts.push("host's /proc (every process listed)".into());
        }
        if self.read_only_subpaths {
            parts.push("read-only and hidden subpaths".into());
        }
        if self.no_new_privs {
            parts.push("no_new_privs".into());
        }
        parts.push("rlimits".into());
        match self.process_limit {
            Some(n) => parts.push(format!("at most {n} processes")),
            None => parts.push("process count NOT limited".into()),
        }
        parts.push("environment allowlist".into());
        write!(f, ": {}", parts.join(", "))
    }
}
