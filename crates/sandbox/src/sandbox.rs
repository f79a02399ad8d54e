//! [`Sandbox`]: a policy turned into prepared kernel objects, and the spawn path.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use libc::{c_int, c_ulong, sock_filter};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use crate::child::{ChildPlan, ExecArgs, HideRoot, KeepPath, MAX_KEEPS, MountOp};
use crate::command::{CommandSpec, ExitStatusKind, RunResult};
use crate::denial::DenialContext;
use crate::enforcement::Enforcement;
use crate::error::SandboxError;
use crate::output::OutputBuffer;
use crate::policy::{Network, SandboxMode, SandboxPolicy};
use crate::process::{Outcome, RunningProcess};
use crate::rules::{self, RuleInputs};
use crate::seccomp::{self, FilterOptions};
use crate::status::{self, Namespaces};
use crate::{spawner, tmpdirs};

/// Runs commands under one [`SandboxPolicy`].
///
/// [`Sandbox::new`] checks what the machine can enforce and prepares the expensive parts once:
/// the Landlock rules (their paths opened; one ruleset for every child, or, where each command
/// gets a `/proc` of its own, one made per command from them), the seccomp program and the
/// private temporary folder (removed when the sandbox is dropped). Each command then costs one
/// `clone3` with the namespaces, a few system calls in the child and `execve`.
#[derive(Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    /// Directories covered by an empty tmpfs in the child, with the needed paths bound back.
    hidden_roots: Vec<HideRoot>,
    /// The hidden subpaths among them (they hold an extra path): no other mount touches them.
    revealing: Vec<PathBuf>,
    workspace: PathBuf,
    private_tmp: tempfile::TempDir,
    landlock: Option<Landlock>,
    /// Each command mounts a `/proc` of its own: the access its Landlock rule gives.
    own_proc: Option<u64>,
    seccomp: Option<Vec<sock_filter>>,
    namespaces: Namespaces,
    id_maps: Option<(Vec<u8>, Vec<u8>)>,
    pid_max: Option<Vec<u8>>,
    securebits: bool,
    no_new_privs: bool,
    enforcement: Enforcement,
    denials: Arc<DenialContext>,
}

impl Sandbox {
    /// Prepares a sandbox for `policy`.
    ///
    /// Fails with [`SandboxError::Unenforceable`] when the machine cannot enforce the policy
    /// and the policy does not allow falling back; with [`SandboxError::InvalidPolicy`] when the
    /// workspace does not exist or a subpath is not relative.
    pub fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        Sandbox::with_status(policy, status::status())
    }

    /// [`Sandbox::new`] against a given machine status (tests simulate missing features).
    pub(crate) fn with_status(policy: SandboxPolicy, st: status::SandboxStatus) -> Result<Self, SandboxError> {
        let workspace = policy.workspace.canonicalize().map_err(|e| SandboxError::InvalidPolicy {
            what: format!("workspace {}: {e}", policy.workspace.display()),
        })?;
        if !workspace.is_dir() {
            return Err(SandboxError::InvalidPolicy {
                what: format!("workspace {} is not a directory", workspace.display()),
            });
        }
        for sub in policy.read_only_subpaths.iter().chain(&policy.hidden_subpaths) {
            if sub.is_absolute() || sub.components().any(|c| !matches!(c, Component::Normal(_))) {
                return Err(SandboxError::InvalidPolicy {
                    what: format!(
                        "read-only subpath {} must be relative to the workspace, without `..`",
                        sub.display()
                    ),
                });
            }
        }
        // Relative extra paths are taken from the workspace.
        let mut policy = policy;
        for p in policy.extra_readable.iter_mut().chain(policy.extra_writable.iter_mut()) {
            if p.is_relative() {
                *p = workspace.join(&*p);
            }
        }
        tmpdirs::sweep_once();
        let private_tmp = tempfile::Builder::new()
            .prefix(&tmpdirs::own_prefix())
            .tempdir()
            .map_err(|e| SandboxError::io("creating the sandbox's private temporary folder", e))?;

        let confine = policy.mode != SandboxMode::FullAccess;
        let network_off = policy.network == Network::Off && policy.proxy_port.is_none();
        let needs_mounts = confine && (!policy.read_only_subpaths.is_empty() || !policy.hidden_subpaths.is_empty());
        let mut missing = Vec::new();
        if confine && st.landlock_abi.is_none() {
            missing.push("Landlock (file-system confinement)");
        }
        if (confine || network_off) && !st.seccomp {
            missing.push("seccomp (system call and network filter)");
        }
        if policy.proxy_port.is_some() && !(confine && (st.namespaces.user || st.root)) {
            missing.push("a network namespace (for the proxied network)");
        }
        if needs_mounts && !st.namespaces.mount {
            missing.push("a mount namespace (to keep .git/hooks, .git/config and .toolgate read-only)");
        }
        let fallback_reason = if missing.is_empty() {
            None
        } else if policy.allow_unsandboxed_fallback {
            Some(format!("{} not available on this machine", missing.join(", ")))
        } else {
            return Err(SandboxError::Unenforceable { what: format!("{} not available", missing.join(", ")) });
        };
        let confined = confine && fallback_reason.is_none();
        let filter_network = network_off && fallback_reason.is_none();

        let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h != Path::new("/"));
        let path_dirs: Vec<PathBuf> =
            std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
        let abi = st.landlock_abi.unwrap_or(0);
        let inputs = RuleInputs {
            abi,
            writable: policy.mode == SandboxMode::WorkspaceWrite,
            network_off: filter_network,
            workspace: &workspace,
            private_tmp: private_tmp.path(),
            extra_writable: &policy.extra_writable,
            extra_readable: &policy.extra_readable,
            path_dirs: &path_dirs,
            home: home.as_deref(),
            proxy_port: policy.proxy_port,
        };
        let seccomp = (confined || filter_network)
            .then(|| seccomp::build_filter(FilterOptions { confine: confined, network_off: filter_network }));

        let mut namespaces = if confined { st.namespaces } else { Namespaces::default() };
        namespaces.net = confined && policy.proxy_port.is_some();
        // A PID namespace's own /proc lists its processes alone (not another command's, not
        // another user's); each command then needs a ruleset of its own (see `rules`).
        let own_proc = confined && namespaces.pid && namespaces.mount && st.own_proc;
        let landlock = if confined {
            let prepared = rules::PreparedRules::prepare(&inputs, own_proc);
            // Built once either way: a ruleset the kernel refuses is refused here, not per command.
            let shared = prepared.build()?;
            Some(if own_proc { Landlock::PerCommand(prepared) } else { Landlock::Shared(shared) })
        } else {
            None
        };
        let id_maps = namespaces.user.then(status::id_maps);
        let limits = &policy.limits;
        let pid_max = (namespaces.pid && st.pid_max_per_namespace)
            .then(|| limits.max_processes.saturating_add(2).max(301).to_string().into_bytes());
        let process_limit = if namespaces.user && !st.root {
            Some(limits.max_processes)
        } else if pid_max.is_some() {
            Some(limits.max_processes.saturating_add(1).max(300))
        } else {
            None
        };
        let securebits = confined && (namespaces.user || st.root);
        let no_new_privs = confined || filter_network;

        let mut read_only: Vec<PathBuf> = Vec::new();
        if confined {
            read_only
                .extend(policy.read_only_subpaths.iter().chain(&policy.hidden_subpaths).map(|s| workspace.join(s)));
        }
        let hidden_roots = if namespaces.mount {
            let mut needed: Vec<PathBuf> = vec![workspace.clone(), private_tmp.path().to_path_buf()];
            needed.extend(policy.extra_readable.iter().cloned());
            needed.extend(policy.extra_writable.iter().cloned());
            needed.extend(path_dirs.iter().filter(|d| d.is_absolute()).cloned());
            if let Some(home) = &home {
                needed.push(home.join(".cargo"));
                needed.push(home.join(".rustup"));
            }
            let mut roots = hidden_roots(&needed);
            // Hidden subpaths that hold a needed path: hidden the same way, after the system
            // roots (the workspace may be bound back into one of those first).
            for sub in &policy.hidden_subpaths {
                let dir = workspace.join(sub);
                let keeps: Vec<(PathBuf, bool)> = needed
                    .iter()
                    .filter_map(|p| p.canonicalize().ok())
                    .filter(|p| p.starts_with(&dir) && p != &dir)
                    .map(|p| {
                        let is_file = !p.is_dir();
                        (p, is_file)
                    })
                    .collect();
                if !keeps.is_empty() && dir.is_dir() && keeps.len() <= MAX_KEEPS {
                    roots.push((dir, keeps));
                }
            }
            roots
        } else {
            Vec::new()
        };
        let denials = Arc::new(DenialContext {
            mode: if confined { policy.mode } else { SandboxMode::FullAccess },
            network_off: filter_network,
            rules: if confined { rules::path_rules(&inputs) } else { Vec::new() },
            read_only,
            hidden: hidden_roots
                .iter()
                .map(|(root, keeps)| (root.clone(), keeps.iter().map(|k| k.0.clone()).collect()))
                .collect(),
        });
        let revealing: Vec<PathBuf> =
            hidden_roots.iter().map(|(root, _)| root.clone()).filter(|root| root.starts_with(&workspace)).collect();
        let hidden_roots = hidden_roots.into_iter().map(|(root, keeps)| hide_op(&root, &keeps)).collect();
        let enforcement = Enforcement {
            mode: policy.mode,
            network: policy.network,
            confined,
            fallback_reason,
            landlock_abi: confined.then_some(abi),
            seccomp: seccomp.is_some(),
            network_blocked: filter_network,
            namespaces,
            own_proc,
            read_only_subpaths: confined && needs_mounts && namespaces.mount,
            no_new_privs,
            process_limit,
        };
        Ok(Sandbox {
            policy,
            hidden_roots,
            revealing,
            workspace,
            private_tmp,
            landlock,
            own_proc: own_proc.then(|| rules::proc_access(abi)),
            seccomp,
            namespaces,
            id_maps,
            pid_max,
            securebits,
            no_new_privs,
            enforcement,
            denials,
        })
    }

    /// Removes the private temporary folders (in the system temporary directory) whose owner
    /// process is dead (a toolgate killed with `SIGKILL` never removes its own), and returns
    /// how many it removed. Only folders of the current user, named by a toolgate that recorded
    /// its owner's pid and start time, are touched; a live owner's folders are kept.
    ///
    /// toolgate calls it when it starts; [`Sandbox::new`] calls it once per process too.
    pub fn sweep_stale_temp_dirs() -> usize {
        tmpdirs::sweep_stale_temp_dirs()
    }

    /// The policy.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The canonical workspace path.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The private temporary folder (the child's `TMPDIR`), writable in every confined mode.
    /// It is deleted when the sandbox is dropped: keep the sandbox alive as long as the
    /// processes it spawned.
    pub fn private_tmp(&self) -> &Path {
        self.private_tmp.path()
    }

    /// What every command of this sandbox runs under.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Runs a command to completion: kills its process group on timeout or cancellation
    /// (`SIGTERM`, then `SIGKILL` after 3 s) and returns its output, how it ended, how it was
    /// sandboxed and what was blocked.
    pub async fn run(&self, spec: CommandSpec, cancel: CancellationToken) -> Result<RunResult, SandboxError> {
        let timeout = spec.timeout;
        let mut process = self.spawn(spec)?;
        process.close_stdin();
        let outcome = tokio::select! {
            r = process.wait_exit() => { r?; Outcome::Exited }
            _ = tokio::time::sleep(timeout) => Outcome::TimedOut,
            _ = cancel.cancelled() => Outcome::Cancelled,
        };
        if outcome != Outcome::Exited {
            process.kill_tree().await?;
        }
        process.finish(outcome).await
    }

    /// Starts a command and returns at once, for background processes. Must be called inside a
    /// Tokio runtime (the output is pumped by a task). `spec.timeout` is not applied here: the
    /// caller decides when to [`RunningProcess::kill_tree`].
    ///
    /// A program that is not found in `PATH` fails here; a failure inside the child (a setup
    /// step, or `execve` itself, e.g. Landlock refusing to execute a file outside the allowed
    /// paths) is reported by [`RunningProcess::wait`] (and [`Sandbox::run`]) as an error, so
    /// that spawning never waits for the child.
    pub fn spawn(&self, spec: CommandSpec) -> Result<RunningProcess, SandboxError> {
        Ok(self.start(spec, Streams::Captured)?.0)
    }

    /// Starts a long-lived server that speaks over its standard streams (a bridged MCP server):
    /// like [`Sandbox::spawn`], but stdin, stdout and stderr are three pipes handed to the
    /// caller instead of one captured output. `spec.stdin` and the output settings are ignored.
    pub fn spawn_server(&self, spec: CommandSpec) -> Result<ServerProcess, SandboxError> {
        let (mut process, pipes) = self.start(spec, Streams::Piped)?;
        let Some(ServerPipes { stdin, stdout, stderr, proxy_listener }) = pipes else {
            return Err(SandboxError::io("starting a server", io::Error::other("its pipes were not made")));
        };
        let proxy_listener = match proxy_listener {
            None => None,
            Some(Ok(fd)) => Some(std::net::TcpListener::from(fd)),
            // The child ended before handing it over: its own report says why.
            Some(Err(e)) => {
                return Err(process.start_error().unwrap_or(SandboxError::io("making the server's network", e)));
            }
        };
        let wrap = |e| SandboxError::io("registering a server's pipe", e);
        Ok(ServerProcess {
            process,
            proxy_listener,
            stdin: pipe::Sender::from_owned_fd(stdin).map_err(wrap)?,
            stdout: pipe::Receiver::from_owned_fd(stdout).map_err(wrap)?,
            stderr: pipe::Receiver::from_owned_fd(stderr).map_err(wrap)?,
        })
    }

    /// What the denial heuristic finds in `text` (a server's error message or stderr), with
    /// relative paths taken from `cwd`: the same explanations [`RunResult::denials`] gives for a
    /// command.
    pub fn explain(&self, text: &str, cwd: &Path) -> Vec<crate::Denial> {
        self.denials.find(text, cwd, None)
    }

    fn start(
        &self,
        mut spec: CommandSpec,
        streams: Streams,
    ) -> Result<(RunningProcess, Option<ServerPipes>), SandboxError> {
        let started = Instant::now();
        if streams == Streams::Piped {
            spec.stdin = true;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(SandboxError::io(
                "starting a sandboxed command",
                io::Error::other("Sandbox::spawn and Sandbox::run must be called inside a Tokio runtime"),
            ));
        }
        let cwd = if spec.cwd.is_absolute() { spec.cwd.clone() } else { self.workspace.join(&spec.cwd) };
        let env = self.child_env(&spec, &cwd);
        let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str());
        let program = resolve_program(&spec.program, &cwd, path_var)?;

        let cstr = |what: &str, bytes: &[u8]| {
            CString::new(bytes).map_err(|_| SandboxError::InvalidPolicy { what: format!("{what} contains a NUL byte") })
        };
        let mut argv = Vec::with_capacity(spec.args.len() + 1);
        argv.push(cstr("the program", spec.program.as_os_str().as_bytes())?);
        for a in &spec.args {
            argv.push(cstr("an argument", a.as_bytes())?);
        }
        let mut envp = Vec::with_capacity(env.len());
        for (k, v) in &env {
            envp.push(cstr("an environment variable", format!("{k}={v}").as_bytes())?);
        }

        let (out_read, out_write) = pipe().map_err(|e| SandboxError::io("creating the output pipe", e))?;
        // With a proxied network: the child makes the listener inside its namespace and sends
        // it back over this pair.
        let proxy_channel = match self.policy.proxy_port.filter(|_| self.namespaces.net) {
            Some(port) => {
                Some((port, socket_pair().map_err(|e| SandboxError::io("creating the listener channel", e))?))
            }
            None => None,
        };
        let err_pipe = match streams {
            Streams::Captured => None,
            Streams::Piped => Some(pipe().map_err(|e| SandboxError::io("creating the stderr pipe", e))?),
        };
        let (report_read, report_write) = pipe().map_err(|e| SandboxError::io("creating the report pipe", e))?;
        let (stdin_child, stdin_parent) = if spec.stdin {
            let (r, w) = pipe().map_err(|e| SandboxError::io("creating the stdin pipe", e))?;
            (r, Some(w))
        } else {
            let null = File::open("/dev/null").map_err(|e| SandboxError::io("opening /dev/null", e))?;
            (high_fd(OwnedFd::from(null)).map_err(|e| SandboxError::io("opening /dev/null", e))?, None)
        };
        let log = match &spec.log_path {
            // The log is toolgate's state (`.toolgate/outputs/`): its owner's alone, whatever the umask.
            Some(p) => Some((
                std::os::unix::fs::OpenOptionsExt::mode(
                    std::fs::OpenOptions::new().write(true).create(true).truncate(true),
                    0o600,
                )
                .open(p)
                .map_err(|e| SandboxError::io(format!("creating the log file {}", p.display()), e))?,
                p.clone(),
            )),
            None => None,
        };

        // Kept open until the clone returns (the child holds its own copy).
        let own_ruleset = match &self.landlock {
            Some(Landlock::PerCommand(rules)) => Some(rules.build()?),
            _ => None,
        };
        let landlock_fd = match (&self.landlock, &own_ruleset) {
            (_, Some(fd)) | (Some(Landlock::Shared(fd)), None) => Some(fd.as_raw_fd()),
            _ => None,
        };
        let plan = ChildPlan {
            parent_pid: std::process::id() as libc::pid_t,
            report_read_fd: report_read.as_raw_fd(),
            program: cstr("the program path", program.as_os_str().as_bytes())?,
            argv,
            envp,
            cwd: cstr("the working directory", cwd.as_os_str().as_bytes())?,
            stdin_fd: stdin_child.as_raw_fd(),
            output_fd: out_write.as_raw_fd(),
            error_fd: err_pipe.as_ref().map_or(out_write.as_raw_fd(), |(_, w)| w.as_raw_fd()),
            report_fd: report_write.as_raw_fd(),
            id_maps: self.id_maps.clone(),
            mount_ns: self.namespaces.mount,
            hidden_roots: self.hidden_roots.clone(),
            mounts: if self.namespaces.mount { self.mounts()? } else { Vec::new() },
            pid_ns_init: self.namespaces.pid,
            pid_max: self.pid_max.clone(),
            rlimits: self.rlimits(),
            securebits: self.securebits,
            no_new_privs: self.no_new_privs,
            landlock_fd,
            own_proc: self.own_proc,
            seccomp: self.seccomp.clone(),
            init_stack: if self.namespaces.pid { vec![0u8; 64 * 1024] } else { Vec::new() },
            proxy: proxy_channel.as_ref().map(|(port, (_, child_end))| (*port, child_end.as_raw_fd())),
        };
        let exec = ExecArgs::new(&plan);
        // SAFETY: plan and exec live until spawn returns and every descriptor in plan is open
        // (owned by locals of this function).
        let (pid, pidfd) = unsafe { spawner::spawn(&plan, &exec, self.namespaces.clone_flags()) }
            .map_err(|e| SandboxError::Setup { step: "creating the sandboxed process (clone3)", source: e })?;
        // SAFETY: clone3 returned a fresh pidfd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        drop(own_ruleset);
        drop(out_write);
        drop(report_write);
        drop(stdin_child);
        let proxy_listener = match proxy_channel {
            Some((_, (parent_end, child_end))) => {
                drop(child_end);
                Some(receive_fd(&parent_end))
            }
            None => None,
        };
        let (output_read, stdin_parent, pipes) = match err_pipe {
            None => (Some(out_read), stdin_parent, None),
            Some((err_read, err_write)) => {
                drop(err_write);
                let stdin = stdin_parent
                    .ok_or_else(|| SandboxError::io("starting a server", io::Error::other("no stdin pipe")))?;
                (None, None, Some(ServerPipes { stdin, stdout: out_read, stderr: err_read, proxy_listener }))
            }
        };

        let output = Arc::new(Mutex::new(OutputBuffer::new(spec.output_cap_bytes, log, spec.log_max_bytes)));
        let process = RunningProcess::start(crate::process::Parts {
            pid,
            pidfd,
            report: report_read,
            init_mode: self.namespaces.pid,
            program: spec.program.clone(),
            stdin: stdin_parent,
            output_read,
            output,
            started,
            enforcement: self.enforcement.clone(),
            denials: Arc::clone(&self.denials),
            cwd,
        })?;
        Ok((process, pipes))
    }

    fn child_env(&self, spec: &CommandSpec, cwd: &Path) -> Vec<(String, String)> {
        let inherited = if spec.clear_env { Vec::new() } else { toolgate_guard::env::filter_safe(std::env::vars()) };
        let mut env: Vec<(String, String)> =
            inherited.into_iter().filter(|(k, _)| k != "TMPDIR" && k != "PWD").collect();
        env.push(("TMPDIR".into(), self.private_tmp.path().to_string_lossy().into_owned()));
        env.push(("PWD".into(), cwd.to_string_lossy().into_owned()));
        for (k, v) in &spec.env {
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), v.clone()));
        }
        env
    }

    fn rlimits(&self) -> Vec<(c_int, libc::rlimit)> {
        let l = &self.policy.limits;
        let lim = |v: u64| libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
        let mut limits = vec![
            (libc::RLIMIT_CPU as c_int, lim(l.cpu_seconds)),
            (libc::RLIMIT_AS as c_int, lim(l.address_space_bytes)),
            (libc::RLIMIT_FSIZE as c_int, lim(l.max_file_size_bytes)),
            (libc::RLIMIT_NOFILE as c_int, lim(l.max_open_files)),
            (libc::RLIMIT_CORE as c_int, lim(0)),
        ];
        // RLIMIT_NPROC counts every process of the user in its user namespace: only in a fresh
        // namespace does it count the command's processes alone (on the host it would count
        // the user's whole session and make commands fail to fork).
        if self.namespaces.user {
            limits.push((libc::RLIMIT_NPROC as c_int, lim(l.max_processes)));
        }
        limits
    }

    /// The mounts for this spawn: pin the directories between the workspace and each protected
    /// path (a mount point cannot be renamed away), bind the read-only paths read-only, and
    /// cover the hidden paths with an empty read-only tmpfs... (see [`MountOp`]).
    fn mounts(&self) -> Result<Vec<MountOp>, SandboxError> {
        let mut pins: BTreeSet<PathBuf> = BTreeSet::new();
        let mut ops = Vec::new();
        let writable = self.policy.mode == SandboxMode::WorkspaceWrite;
        let mut protected: BTreeSet<PathBuf> = if writable {
            self.policy.read_only_subpaths.iter().chain(&self.policy.hidden_subpaths).cloned().collect()
        } else {
            self.policy.hidden_subpaths.iter().cloned().collect()
        };
        if writable && protected.contains(Path::new(".git/hooks")) {
            let git = self.workspace.join(".git");
            // A repository without a hooks directory: create the (empty) directory, which git
            // itself would create, so that the command cannot plant hooks in it.
            if git.is_dir() && std::fs::symlink_metadata(git.join("hooks")).is_err() {
                let _ = std::fs::create_dir(git.join("hooks"));
            }
            // Hooks moved elsewhere in the workspace (`core.hooksPath = .husky`) stay read-only
            // too: the host's git would run them.
            if let Some(hooks) = hooks_path(&git.join("config"))
                && hooks.is_relative()
                && hooks.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            {
                protected.insert(hooks);
            }
        }
        for rel in &protected {
            let path = self.workspace.join(rel);
            if std::fs::symlink_metadata(&path).is_err() || self.revealing.contains(&path) {
                continue;
            }
            let mut ancestor = self.workspace.clone();
            if let Some(parent) = rel.parent() {
                for c in parent.components() {
                    ancestor.push(c);
                    if ancestor.is_dir() {
                        pins.insert(ancestor.clone());
                    }
                }
            }
            let flags = locked_mount_flags(&path);
            let hide = self.policy.hidden_subpaths.contains(rel) && path.is_dir();
            let c = CString::new(path.as_os_str().as_bytes())
                .map_err(|_| SandboxError::InvalidPolicy { what: format!("{} contains a NUL byte", path.display()) })?;
            ops.push(MountOp { path: c, read_only_flags: Some(flags), hide });
        }
        let mut all: Vec<MountOp> = Vec::with_capacity(pins.len() + ops.len());
        for p in pins {
            if let Ok(c) = CString::new(p.as_os_str().as_bytes()) {
                all.push(MountOp { path: c, read_only_flags: None, hide: false });
            }
        }
        all.extend(ops);
        Ok(all)
    }
}

/// The Landlock ruleset of a sandbox's commands.
#[derive(Debug)]
enum Landlock {
    /// One ruleset for every command (their `/proc` is the host's).
    Shared(OwnedFd),
    /// A ruleset per command, made from these rules, to which the child adds its own `/proc`.
    PerCommand(rules::PreparedRules),
}

/// Where a child's standard streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streams {
    /// stdout and stderr interleaved into one captured output (commands).
    Captured,
    /// Three pipes for the caller (servers).
    Piped,
}

/// The parent's ends of a server's three pipes, and its proxy listener when it has one.
struct ServerPipes {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    proxy_listener: Option<io::Result<OwnedFd>>,
}

/// A server started by [`Sandbox::spawn_server`]: the process (signals, the group kill, the
/// wait; dropping it kills the tree) and its three pipes.
#[derive(Debug)]
pub struct ServerProcess {
    /// The process.
    pub process: RunningProcess,
    /// Its standard input.
    pub stdin: pipe::Sender,
    /// Its standard output.
    pub stdout: pipe::Receiver,
    /// Its standard error.
    pub stderr: pipe::Receiver,
    /// With [`SandboxPolicy::proxy_port`]: the listener on `127.0.0.1:PORT` inside the server's
    /// network namespace, its only way out. Serve a proxy on it (connections accepted here come
    /// from inside the namespace; what the proxy connects to is outside).
    pub proxy_listener: Option<std::net::TcpListener>,
}

/// Directories whose content a confined command never sees (with a mount namespace): they may
/// hold UNIX sockets (tmux, ssh-agent, docker, D-Bus, X11) that Landlock cannot keep a command
/// from connecting to.
pub(crate) const HIDDEN_ROOTS: &[&str] =
    &["/tmp", "/var/tmp", "/run", "/var/run", "/home", "/root", "/mnt", "/media", "/srv"];

/// For each hidden root: its canonical path and the needed paths under it, as
/// `(path, is_file)`, without paths nested in another kept path.
fn hidden_roots(needed: &[PathBuf]) -> Vec<(PathBuf, Vec<(PathBuf, bool)>)> {
    let needed: Vec<(PathBuf, bool)> = needed
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .map(|p| {
            let is_file = !p.is_dir();
            (p, is_file)
        })
        .collect();
    let mut out: Vec<(PathBuf, Vec<(PathBuf, bool)>)> = Vec::new();
    for root in HIDDEN_ROOTS {
        let Ok(root) = Path::new(root).canonicalize() else { continue };
        if !root.is_dir() || root == Path::new("/") || out.iter().any(|(r, _)| r == &root) {
            continue;
        }
        // An empty directory holds no socket yet: not worth a mount per command.
        if std::fs::read_dir(&root).map(|mut d| d.next().is_none()).unwrap_or(true) {
            continue;
        }
        // A needed path at or above the root: the root stays visible.
        if needed.iter().any(|(p, _)| root.starts_with(p)) {
            continue;
        }
        let mut keeps: Vec<(PathBuf, bool)> = needed.iter().filter(|(p, _)| p.starts_with(&root)).cloned().collect();
        keeps.sort();
        keeps.dedup();
        let outer: Vec<(PathBuf, bool)> =
            keeps.iter().filter(|(p, _)| !keeps.iter().any(|(q, _)| q != p && p.starts_with(q))).cloned().collect();
        if outer.len() > MAX_KEEPS {
            continue; // too many to bind back: leave this root visible
        }
        out.push((root, outer));
    }
    out
}

fn hide_op(root: &Path, keeps: &[(PathBuf, bool)]) -> HideRoot {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
    HideRoot {
        root: c(root),
        keeps: keeps
            .iter()
            .map(|(path, is_file)| {
                let mut dirs = Vec::new();
                let mut cur = root.to_path_buf();
                let rel = path.strip_prefix(root).unwrap_or(Path::new(""));
                let comps: Vec<_> = rel.components().collect();
                for (i, comp) in comps.iter().enumerate() {
                    cur.push(comp);
                    if i + 1 < comps.len() || !is_file {
                        dirs.push(c(&cur));
                    }
                }
                KeepPath { path: c(path), dirs, is_file: *is_file }
            })
            .collect(),
    }
}

/// `core.hooksPath` from a git config file, if set (a plain scan of `key = value` lines in the
/// `[core]` section; includes and conditional includes are not followed).
fn hooks_path(config: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config).ok()?;
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line.trim_start_matches('[').trim_end_matches(']').trim().eq_ignore_ascii_case("core");
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && in_core
            && key.trim().eq_ignore_ascii_case("hookspath")
        {
            let value = value.trim().trim_matches('"');
            if !value.is_empty() {
                found = Some(PathBuf::from(value));
            }
        }
    }
    found
}

/// The flags of the mount holding `path` that an unprivileged remount must keep.
fn locked_mount_flags(path: &Path) -> c_ulong {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return 0 };
    // SAFETY: statvfs writes into the zeroed struct; c is NUL-terminated.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } != 0 {
        return 0;
    }
    let mut flags = 0;
    for (st, ms) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if vfs.f_flag & st != 0 {
            flags |= ms;
        }
    }
    flags
}

fn resolve_program(program: &Path, cwd: &Path, path_var: Option<&str>) -> Result<PathBuf, SandboxError> {
    let not_found = |what: &str| SandboxError::Spawn {
        program: program.to_path_buf(),
        source: io::Error::new(io::ErrorKind::NotFound, what.to_string()),
    };
    if program.as_os_str().is_empty() {
        return Err(not_found("empty program name"));
    }
    if program.components().count() > 1 || program.is_absolute() {
        return Ok(cwd.join(program));
    }
    for dir in path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin").split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
        {
            return Ok(if candidate.is_absolute() { candidate } else { cwd.join(candidate) });
        }
    }
    Err(not_found("not found in PATH"))
}

/// A connected pair of `AF_UNIX` sequential-packet sockets, close-on-exec, numbered 3 or above.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((high_fd(a)?, high_fd(b)?))
}

/// Receives the descriptor the child sends over `channel` (`SCM_RIGHTS`), waiting up to 10 s.
fn receive_fd(channel: &OwnedFd) -> io::Result<OwnedFd> {
    let mut pfd = libc::pollfd { fd: channel.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll on one valid pollfd.
    if unsafe { libc::poll(&mut pfd, 1, 10_000) } <= 0 {
        return Err(io::Error::other("the sandboxed process did not hand over its listener"));
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; the buffers outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg into the buffers above.
    let n = unsafe { libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n <= 0 {
        return Err(io::Error::other("the sandboxed process ended before its network was ready"));
    }
    // SAFETY: the control buffer was filled by recvmsg; CMSG_* walk it within its length.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("the sandboxed process sent no listener"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const c_int);
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// A pipe with both ends close-on-exec and numbered 3 or above (so `dup2` onto 0-2 in the child
/// never hits an end itself).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((high_fd(r)?, high_fd(w)?))
}

fn high_fd(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor (>= 3) that we own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Converts a wait status (from the init's report) to an [`ExitStatusKind`].
pub(crate) fn from_wait_status(status: c_int) -> ExitStatusKind {
    if libc::WIFEXITED(status) {
        ExitStatusKind::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ExitStatusKind::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatusKind::Code(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::SandboxStatus;

    fn bare_machine() -> SandboxStatus {
        SandboxStatus {
            landlock_abi: None,
            seccomp: false,
            namespaces: Namespaces::default(),
            pid_max_per_namespace: false,
            own_proc: false,
            root: false,
            kernel: "test".into(),
        }
    }

    #[test]
    fn refuses_when_the_machine_cannot_enforce() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let err = Sandbox::with_status(SandboxPolicy::workspace_write(ws.path()), bare_machine());
        let Err(SandboxError::Unenforceable { what }) = err else { panic!("expected Unenforceable") };
        assert!(what.contains("Landlock") && what.contains("seccomp") && what.contains("mount namespace"), "{what}");
    }

    #[tokio::test]
    async fn fallback_runs_unconfined_and_says_so() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let policy = SandboxPolicy { allow_unsandboxed_fallback: true, ..SandboxPolicy::workspace_write(ws.path()) };
        let sb = Sandbox::with_status(policy, bare_machine()).unwrap_or_else(|e| panic!("{e}"));
        let r = sb
            .run(CommandSpec::shell("echo ran", ws.path()), CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.output.text(), "ran\n");
        assert!(r.enforcement.is_unsandboxed());
        assert!(
            r.enforcement.to_string().starts_with("NOT sandboxed (fallback allowed by config: Landlock"),
            "{}",
            r.enforcement
        );
    }
}
