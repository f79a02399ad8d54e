//! The Landlock ruleset: which paths are readable, writable and executable.
//!
//! The rules' paths are opened once per [`crate::Sandbox`] ([`PreparedRules`]). Where a
//! command's PID namespace gets a `/proc` of its own, each command gets a ruleset of its own,
//! made from those descriptors, to which the child adds its new `/proc` (a rule holds an inode,
//! and each mount of procfs is a new one); otherwise the ruleset is made once and shared. Every
//! child calls `landlock_restrict_self` on its ruleset right before `execve`.
//!
//! **Readable** (read-only and workspace-write): the system directories (`/usr`, `/bin`, `/sbin`,
//! `/lib*`, `/opt`, `/snap`, `/nix`), `/etc` except its secrets (`shadow`, `gshadow`, `sudoers`,
//! SSH host keys, `ssl/private`, network credentials ...), `/proc` (the command's own, or the
//! host's), `/sys`, the directories in the
//! child's `PATH`, `~/.rustup` and `~/.cargo` (without its credentials), the workspace, the
//! private temporary folder and [`crate::SandboxPolicy::extra_readable`]. Everything else, in
//! particular `/home`, `/root`, `/tmp`, `/var` and `/run`, is not readable.
//!
//! **Writable**: in workspace-write the workspace; in both confined modes the private temporary
//! folder and [`crate::SandboxPolicy::extra_writable`]; plus, in every confined mode, the harmless devices
//! (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`, `/dev/tty`; not
//! `/dev/pts`, where every terminal of the host lives). Creating device nodes is never allowed.

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use crate::error::SandboxError;

/// The Landlock ABI version of the running kernel, `None` when Landlock is unavailable.
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the syscall only
    // returns the ABI version; it reads and writes no memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret > 0 { u32::try_from(ret).ok() } else { None }
}

/// Access classes for a path rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Read files, list directories, execute.
    ReadExec,
    /// Read files and list directories only.
    Read,
    /// List this directory (and those below it); read no file.
    ListDir,
    /// Everything except creating device nodes.
    Write,
    /// Read, write and ioctl on device files (`/dev/null` ...).
    Device,
}

/// Inputs for the ruleset.
#[derive(Debug)]
pub(crate) struct RuleInputs<'a> {
    pub(crate) abi: u32,
    pub(crate) writable: bool,
    pub(crate) network_off: bool,
    pub(crate) workspace: &'a Path,
    pub(crate) private_tmp: &'a Path,
    pub(crate) extra_writable: &'a [PathBuf],
    pub(crate) extra_readable: &'a [PathBuf],
    pub(crate) path_dirs: &'a [PathBuf],
    pub(crate) home: Option<&'a Path>,
    /// With a proxy: the one TCP port the command may connect to (Landlock ABI 4+).
    pub(crate) proxy_port: Option<u16>,
}

/// The paths a policy can read (for the denial heuristic and the docs), as `(path, grant)`.
pub(crate) fn path_rules(inputs: &RuleInputs<'_>) -> Vec<(PathBuf, Grant)> {
    let mut rules: Vec<(PathBuf, Grant)> = Vec::new();
    for dir in ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/snap", "/nix"] {
        rules.push((PathBuf::from(dir), Grant::ReadExec));
    }
    rules.push((PathBuf::from("/etc"), Grant::ListDir));
    allow_except(Path::new("/etc"), Path::new(""), &etc_verdict, Grant::Read, &mut rules);
    rules.push((PathBuf::from("/dev"), Grant::ListDir));
    rules.push((PathBuf::from("/proc"), Grant::Read));
    rules.push((PathBuf::from("/sys"), Grant::Read));
    // Not /dev/pts or /dev/ptmx: write access there reaches every terminal of the host.
    for dev in ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"] {
        rules.push((PathBuf::from(dev), Grant::Device));
    }
    for dir in inputs.path_dirs {
        if dir.is_absolute() {
            rules.push((dir.clone(), Grant::ReadExec));
        }
    }
    if let Some(home) = inputs.home {
        rules.push((home.join(".rustup"), Grant::ReadExec));
        rules.push((home.join(".cargo"), Grant::ListDir));
        allow_except(&home.join(".cargo"), Path::new(""), &cargo_verdict, Grant::ReadExec, &mut rules);
    }
    for dir in inputs.extra_readable {
        rules.push((dir.clone(), Grant::ReadExec));
    }
    let write = if inputs.writable { Grant::Write } else { Grant::ReadExec };
    rules.push((inputs.workspace.to_path_buf(), write));
    rules.push((inputs.private_tmp.to_path_buf(), Grant::Write));
    for dir in inputs.extra_writable {
        rules.push((dir.clone(), Grant::Write));
    }
    rules
}

/// The ruleset's rules with their paths opened (`O_PATH`), ready to make a ruleset from
/// without looking a path up again: once per [`crate::Sandbox`], or once per command when each
/// command's `/proc` is its own (its rule is added by the child, see `child::mount_own_proc`).
#[derive(Debug)]
pub(crate) struct PreparedRules {
    abi: ABI,
    handle_net: bool,
    scopes: bool,
    paths: Vec<(Arc<OwnedFd>, BitFlags<AccessFs>)>,
    proxy_port: Option<u16>,
}

impl PreparedRules {
    /// Opens every path of [`path_rules`] that exists; with `own_proc`, leaves the host's
    /// `/proc` out (the command's own is covered by the child's rule).
    pub(crate) fn prepare(inputs: &RuleInputs<'_>, own_proc: bool) -> Self {
        let abi = ABI::from(inputs.abi as i32);
        let mut paths = Vec::new();
        for (path, grant) in path_rules(inputs) {
            if own_proc && path == Path::new("/proc") {
                continue;
            }
            let Some((fd, is_dir)) = opened(&path) else { continue }; // absent on this machine
            let mut access = access_for(grant, abi);
            if !is_dir {
                access &= AccessFs::from_file(abi);
            }
            paths.push((fd, access));
        }
        PreparedRules {
            abi,
            handle_net: (inputs.network_off || inputs.proxy_port.is_some()) && inputs.abi >= 4,
            scopes: inputs.abi >= 6,
            paths,
            proxy_port: inputs.proxy_port.filter(|_| inputs.abi >= 4),
        }
    }

    /// A new ruleset with these rules; returns its file descriptor.
    pub(crate) fn build(&self) -> Result<OwnedFd, SandboxError> {
        let err = |e: landlock::RulesetError| SandboxError::Unenforceable { what: format!("Landlock ruleset: {e}") };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(self.abi))
            .map_err(err)?;
        if self.handle_net {
            ruleset = ruleset.handle_access(AccessNet::from_all(self.abi)).map_err(err)?;
        }
        if self.scopes {
            ruleset = ruleset.scope(Scope::from_all(self.abi)).map_err(err)?;
        }
        let mut created = ruleset.create().map_err(err)?;
        for (fd, access) in &self.paths {
            created = created.add_rule(PathBeneath::new(fd.as_fd(), *access)).map_err(err)?;
        }
        if let Some(port) = self.proxy_port {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(err)?;
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or_else(|| SandboxError::Unenforceable { what: "Landlock is not supported by this kernel".into() })
    }
}

/// Whether `fd` is the file `meta` describes (a path replaced since it was opened is not).
fn same_file(fd: &OwnedFd, meta: &fs::Metadata) -> bool {
    // SAFETY: stat is plain data; fstat fills it from a descriptor we hold.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    let ok = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0;
    ok && st.st_dev == meta.dev() && st.st_ino == meta.ino()
}

/// What the child allows beneath its own `/proc`: reading (as the host's in [`path_rules`]).
pub(crate) fn proc_access(abi: u32) -> u64 {
    access_for(Grant::Read, ABI::from(abi as i32)).bits()
}

/// `path` opened with `O_PATH`, and whether it is a directory. Descriptors are shared by every
/// sandbox of the process while the file they name is the same (device and inode): a gateway
/// with a sandbox per user keeps one descriptor per system path, not one per user.
fn opened(path: &Path) -> Option<(Arc<OwnedFd>, bool)> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<OwnedFd>>>> = OnceLock::new();
    let meta = fs::metadata(path).ok()?;
    let mut open = OPEN.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    let cached = open.get(path).and_then(Weak::upgrade).filter(|fd| same_file(fd, &meta));
    if let Some(fd) = cached {
        return Some((fd, meta.is_dir()));
    }
    let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(path).ok()?;
    let is_dir = file.metadata().ok()?.is_dir();
    let fd = Arc::new(OwnedFd::from(file));
    open.retain(|_, fd| fd.strong_count() > 0);
    open.insert(path.to_path_buf(), Arc::downgrade(&fd));
    Some((fd, is_dir))
}

fn access_for(grant: Grant, abi: ABI) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    match grant {
        Grant::Read => read,
        Grant::ListDir => AccessFs::ReadDir.into(),
        Grant::ReadExec => read | AccessFs::Execute,
        Grant::Write => AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock),
        Grant::Device => {
            (read | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate) & AccessFs::from_all(abi)
        }
    }
}

/// What to do with an entry below a directory that is readable except for some secrets.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Allow,
    Deny,
    Descend,
}

fn etc_verdict(rel: &Path) -> Verdict {
    let rel = rel.to_string_lossy();
    let name = rel.rsplit('/').next().unwrap_or("");
    match rel.as_ref() {
        "ssh" | "ssl" | "security" => Verdict::Descend,
        "ssl/private" | "security/opasswd" => Verdict::Deny,
        _ if rel.starts_with("ssh/") && name.starts_with("ssh_host_") && !name.ends_with(".pub") => Verdict::Deny,
        _ if name.starts_with("shadow") || name.starts_with("gshadow") => Verdict::Deny,
        "sudoers"
        | "sudoers.d"
        | "krb5.keytab"
        | "ipsec.secrets"
        | "credstore"
        | "credstore.encrypted"
        | "NetworkManager"
        | "wireguard"
        | "letsencrypt"
        | "ppp"
        | "openvpn"
        | "docker"
        | "containerd" => Verdict::Deny,
        _ => Verdict::Allow,
    }
}

fn cargo_verdict(rel: &Path) -> Verdict {
    let name = rel.to_string_lossy();
    if name.starts_with("credentials") { Verdict::Deny } else { Verdict::Allow }
}

fn allow_except(
    root: &Path,
    rel: &Path,
    verdict: &dyn Fn(&Path) -> Verdict,
    grant: Grant,
    rules: &mut Vec<(PathBuf, Grant)>,
) {
    let Ok(entries) = fs::read_dir(root.join(rel)) else { return };
    for entry in entries.flatten() {
        let child = rel.join(entry.file_name());
        match verdict(&child) {
            Verdict::Allow => rules.push((root.join(&child), grant)),
            Verdict::Deny => {}
            Verdict::Descend => allow_except(root, &child, verdict, grant, rules),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etc_secrets_are_excluded() {
        assert_eq!(etc_verdict(Path::new("shadow")), Verdict::Deny);
        assert_eq!(etc_verdict(Path::new("gshadow-")), Verdict::Deny);
        assert_eq!(etc_verdict(Path::new("ssh/ssh_host_ed25519_key")), Verdict::Deny);
        assert_eq!(etc_verdict(Path::new("ssh/ssh_host_ed25519_key.pub")), Verdict::Allow);
        assert_eq!(etc_verdict(Path::new("ssl")), Verdict::Descend);
        assert_eq!(etc_verdict(Path::new("passwd")), Verdict::Allow);
    }
}
