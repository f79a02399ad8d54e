//! What this machine can enforce, probed once per process: `toolgate sandbox status`.

use std::fmt;
use std::sync::OnceLock;

use serde::Serialize;

use crate::child::{Probe, probe_namespaces};
use crate::rules::landlock_abi;
use crate::seccomp;

/// A set of Linux namespaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Namespaces {
    /// User namespace (the command has no capabilities outside it).
    pub user: bool,
    /// Mount namespace (read-only bind mounts for the protected subpaths).
    pub mount: bool,
    /// PID namespace (the command's tree dies with its init; `pid_max` caps the process count).
    pub pid: bool,
    /// IPC namespace (no System V IPC or POSIX message queues shared with the host).
    pub ipc: bool,
    /// Network namespace.
    pub net: bool,
}

impl Namespaces {
    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        !(self.user || self.mount || self.pid || self.ipc || self.net)
    }

    pub(crate) fn clone_flags(&self) -> u64 {
        let mut f = 0;
        if self.user {
            f |= libc::CLONE_NEWUSER;
        }
        if self.mount {
            f |= libc::CLONE_NEWNS;
        }
        if self.pid {
            f |= libc::CLONE_NEWPID;
        }
        if self.ipc {
            f |= libc::CLONE_NEWIPC;
        }
        if self.net {
            f |= libc::CLONE_NEWNET;
        }
        f as u64
    }
}

impl fmt::Display for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> =
            [(self.user, "user"), (self.mount, "mount"), (self.pid, "pid"), (self.ipc, "ipc"), (self.net, "net")]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect();
        if names.is_empty() { f.write_str("none") } else { f.write_str(&names.join(", ")) }
    }
}

/// What this machine can enforce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxStatus {
    /// The Landlock ABI version, `None` when Landlock is unavailable.
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters (with `SECCOMP_RET_KILL_PROCESS`) are available.
    pub seccomp: bool,
    /// The namespaces a sandboxed command gets (probed by creating them).
    pub namespaces: Namespaces,
    /// Whether a PID namespace can set its own `pid_max` (Linux 6.14+), which caps the process
    /// count even for root, whom `RLIMIT_NPROC` does not limit.
    pub pid_max_per_namespace: bool,
    /// Whether a command's PID namespace can have a `/proc` of its own (mounted fresh in its
    /// mount namespace), so that it sees only its own processes. Refused where the host's
    /// `/proc` is partly covered (some containers); then commands see the host's `/proc`.
    pub own_proc: bool,
    /// Whether the server runs as root.
    pub root: bool,
    /// `uname -r`.
    pub kernel: String,
}

impl SandboxStatus {
    /// Landlock confines TCP bind/connect (ABI 4+).
    pub fn landlock_network(&self) -> bool {
        self.landlock_abi.is_some_and(|v| v >= 4)
    }

    /// Landlock scopes abstract UNIX sockets and signals to the sandbox (ABI 6+).
    pub fn landlock_scopes(&self) -> bool {
        self.landlock_abi.is_some_and(|v| v >= 6)
    }

    /// Whether `RLIMIT_NPROC` or `pid_max` caps the number of processes.
    pub fn process_limit_enforced(&self) -> bool {
        !self.root || (self.namespaces.pid && self.pid_max_per_namespace)
    }
}

impl fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel:      Linux {}{}", self.kernel, if self.root { ", running as root" } else { "" })?;
        match self.landlock_abi {
            Some(v) => {
                let mut what = vec!["files"];
                if self.landlock_network() {
                    what.push("TCP bind/connect");
                }
                if self.landlock_scopes() {
                    what.push("abstract UNIX sockets and signals scoped");
                }
                writeln!(f, "landlock:    ABI {v} ({})", what.join(", "))?;
            }
            None => writeln!(f, "landlock:    not available (read-only and workspace-write cannot be enforced)")?,
        }
        writeln!(
            f,
            "seccomp:     {}",
            if self.seccomp { "available" } else { "not available (no syscall or socket filter)" }
        )?;
        writeln!(f, "namespaces:  {}", self.namespaces)?;
        writeln!(
            f,
            "/proc:       {}",
            if self.own_proc {
                "the PID namespace's own (a command sees only its own processes)"
            } else {
                "the host's (a command sees every process of the machine, not their environment or files)"
            }
        )?;
        let nproc = if !self.root {
            "RLIMIT_NPROC (per user namespace)"
        } else if self.process_limit_enforced() {
            "pid_max of the PID namespace (at least 300; RLIMIT_NPROC does not apply to root)"
        } else {
            "NOT enforced (root ignores RLIMIT_NPROC and pid_max per namespace is unavailable)"
        };
        writeln!(f, "processes:   {nproc}")?;
        writeln!(f, "always:      rlimits, no_new_privs, environment allowlist, own session, group kill")?;
        let confined = self.landlock_abi.is_some() && self.seccomp;
        let ro_paths = self.namespaces.mount;
        writeln!(
            f,
            "modes:       read-only {}, workspace-write {}, full-access yes",
            if confined { "yes" } else { "NO" },
            match (confined, ro_paths) {
                (true, true) => "yes",
                (true, false) => "partly (no mount namespace: .git/hooks etc. cannot be kept read-only)",
                _ => "NO",
            }
        )?;
        write!(f, "network off: {}", if self.seccomp { "enforced" } else { "NOT enforced" })
    }
}

pub(crate) fn id_maps() -> (Vec<u8>, Vec<u8>) {
    // SAFETY: geteuid/getegid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    (format!("{uid} {uid} 1\n").into_bytes(), format!("{gid} {gid} 1\n").into_bytes())
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// What this machine can enforce (probed once, then cached).
pub fn status() -> SandboxStatus {
    static STATUS: OnceLock<SandboxStatus> = OnceLock::new();
    STATUS.get_or_init(probe).clone()
}

fn probe() -> SandboxStatus {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let maps = id_maps();
    let with_user = Namespaces { user: true, mount: true, pid: true, ipc: true, net: false };
    let without_user = Namespaces { user: false, ..with_user };
    let namespaces = if probe_namespaces(with_user.clone_flags(), Some(&maps), Probe::Create) {
        with_user
    } else if root && probe_namespaces(without_user.clone_flags(), None, Probe::Create) {
        without_user
    } else {
        Namespaces::default()
    };
    let user_maps = namespaces.user.then_some(&maps);
    let pid_max_per_namespace = namespaces.pid && probe_namespaces(namespaces.clone_flags(), user_maps, Probe::PidMax);
    let own_proc =
        namespaces.pid && namespaces.mount && probe_namespaces(namespaces.clone_flags(), user_maps, Probe::OwnProc);
    SandboxStatus {
        landlock_abi: landlock_abi(),
        seccomp: seccomp::available(),
        namespaces,
        pid_max_per_namespace,
        own_proc,
        root,
        kernel: kernel_release(),
    }
}
