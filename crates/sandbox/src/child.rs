//! The code between `clone3` and `execve`.
//!
//! Everything the child needs is prepared in the parent ([`ChildPlan`]): C strings, pointer
//! arrays, the Landlock ruleset descriptor, the seccomp program, the mount list and the rlimits.
//! After `clone3` the child (a copy of a possibly multi-threaded parent) makes raw system calls
//! only: no allocation, no locks, no Rust I/O. Failures are reported to the parent as a fixed
//! 12-byte record on the report pipe, then the child exits with status 127.
//!
//! With a PID namespace the child is the namespace's init: after the setup it forks the command
//! (pid 2, which reports a failed `execve` itself), closes its standard descriptors, reaps
//! orphans and, when the command exits, reports its wait status and exits. The kernel then kills everything
//! left in the namespace: no orphans, even from processes that called `setsid` or ignore
//! `SIGTERM`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use libc::{c_char, c_int, c_ulong, sock_filter};

/// Report record kinds (first word of a 12-byte record).
pub(crate) const REPORT_SETUP_FAILED: u32 = 1;
/// `execve` failed; the second word is the errno.
pub(crate) const REPORT_EXEC_FAILED: u32 = 3;
/// The command exited; the second word is its wait status (init mode only).
pub(crate) const REPORT_EXITED: u32 = 4;

/// Steps of the child setup, for error messages.
pub(crate) const STEPS: &[&str] = &[
    "writing the user namespace maps",
    "creating a new session",
    "making the mount tree private",
    "bind-mounting a read-only path",
    "remounting a path read-only",
    "setting pid_max in the PID namespace",
    "setting resource limits",
    "redirecting standard input and output",
    "changing to the working directory",
    "setting securebits",
    "setting no_new_privs",
    "applying the Landlock ruleset",
    "loading the seccomp filter",
    "forking the command inside the PID namespace",
    "hiding a directory behind an empty tmpfs",
    "asking to be killed when toolgate dies (PR_SET_PDEATHSIG)",
    "making the listener of its proxied network",
    "mounting the PID namespace's own /proc",
    "allowing the new /proc in the Landlock ruleset",
];
const STEP_MAPS: u32 = 0;
const STEP_SETSID: u32 = 1;
const STEP_MOUNT_PRIVATE: u32 = 2;
const STEP_BIND: u32 = 3;
const STEP_REMOUNT: u32 = 4;
const STEP_PID_MAX: u32 = 5;
const STEP_RLIMIT: u32 = 6;
const STEP_DUP: u32 = 7;
const STEP_CHDIR: u32 = 8;
const STEP_SECUREBITS: u32 = 9;
const STEP_NNP: u32 = 10;
const STEP_LANDLOCK: u32 = 11;
const STEP_SECCOMP: u32 = 12;
const STEP_FORK: u32 = 13;
const STEP_HIDE: u32 = 14;
const STEP_PDEATHSIG: u32 = 15;
const STEP_PROXY: u32 = 16;
const STEP_PROC: u32 = 17;
const STEP_PROC_RULE: u32 = 18;

/// A mount to make in the child's mount namespace.
#[derive(Debug)]
pub(crate) struct MountOp {
    /// The path (bind-mounted onto itself).
    pub(crate) path: CString,
    /// `Some(flags)`: remount read-only with these locked flags kept; `None`: only pin the path
    /// (a mount point cannot be renamed or removed).
    pub(crate) read_only_flags: Option<c_ulong>,
    /// Cover the directory with an empty read-only tmpfs instead (its content is hidden).
    pub(crate) hide: bool,
}

/// A directory (`/tmp`, `/run`, `/home`, ...) covered by an empty tmpfs, with the paths the
/// sandbox needs inside it bound back in (so that no UNIX socket, lock or file under it is
/// reachable: Landlock does not mediate `connect` to a socket path).
#[derive(Debug, Clone)]
pub(crate) struct HideRoot {
    pub(crate) root: CString,
    pub(crate) keeps: Vec<KeepPath>,
}

/// A path bound back into a hidden root.
#[derive(Debug, Clone)]
pub(crate) struct KeepPath {
    pub(crate) path: CString,
    /// Directories to create in the tmpfs first, outermost first (the last is `path` itself
    /// unless it is a file).
    pub(crate) dirs: Vec<CString>,
    /// `path` is a file: create an empty file as the mount point.
    pub(crate) is_file: bool,
}

/// At most this many paths are bound back into one hidden root.
pub(crate) const MAX_KEEPS: usize = 32;

/// Everything the child needs, prepared before `clone3`.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    /// `getpid()` of toolgate, read before the clone: the child checks that its parent is
    /// still this process after asking for `PR_SET_PDEATHSIG` (without a PID namespace; inside
    /// one `getppid()` is 0 and the report pipe tells instead).
    pub(crate) parent_pid: libc::pid_t,
    /// The parent's end of the report pipe; the child closes its copy at once.
    pub(crate) report_read_fd: RawFd,
    pub(crate) program: CString,
    pub(crate) argv: Vec<CString>,
    pub(crate) envp: Vec<CString>,
    pub(crate) cwd: CString,
    pub(crate) stdin_fd: RawFd,
    /// Standard output.
    pub(crate) output_fd: RawFd,
    /// Standard error: `output_fd` for a command (interleaved), its own pipe for a server.
    pub(crate) error_fd: RawFd,
    pub(crate) report_fd: RawFd,
    /// `Some((uid_map, gid_map))` when a user namespace is created.
    pub(crate) id_maps: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) mount_ns: bool,
    pub(crate) hidden_roots: Vec<HideRoot>,
    pub(crate) mounts: Vec<MountOp>,
    /// Init mode: the child forks the command inside a new PID namespace.
    pub(crate) pid_ns_init: bool,
    /// Decimal `pid_max` for the PID namespace (caps the process count, also for root).
    pub(crate) pid_max: Option<Vec<u8>>,
    pub(crate) rlimits: Vec<(c_int, libc::rlimit)>,
    pub(crate) securebits: bool,
    pub(crate) no_new_privs: bool,
    pub(crate) landlock_fd: Option<RawFd>,
    /// `Some(access)`: mount a fresh procfs on `/proc` (the child is the init of a new PID
    /// namespace, so it lists this namespace's processes only) and allow `access` beneath it
    /// in the ruleset behind `landlock_fd`, which was made for this child alone: a Landlock
    /// rule holds an inode, and the new `/proc` is a new one.
    pub(crate) own_proc: Option<u64>,
    pub(crate) seccomp: Option<Vec<sock_filter>>,
    /// The stack on which the init's command child runs until `execve` (init mode only).
    pub(crate) init_stack: Vec<u8>,
    /// A proxied network: `(port, channel)`: in the new network namespace, bring up loopback,
    /// listen on `127.0.0.1:port` and send the listener over `channel`.
    pub(crate) proxy: Option<(u16, RawFd)>,
}

/// The pointer arrays for `execve`, built in the parent (they borrow the plan's strings).
pub(crate) struct ExecArgs {
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl ExecArgs {
    pub(crate) fn new(plan: &ChildPlan) -> Self {
        let mut argv: Vec<*const c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const c_char> = plan.envp.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        ExecArgs { argv, envp }
    }
}

#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_PIDFD: u64 = 0x1000;

/// Clones a child that runs [`child_main`]; returns `(pid, pidfd)` in the parent.
///
/// # Safety
///
/// `plan` and `exec` must stay alive and unchanged until the call returns (the child works on a
/// copy of the parent's memory, the parent does not touch them meanwhile). All file descriptors
/// in `plan` must be open.
pub(crate) unsafe fn spawn_child(plan: &ChildPlan, exec: &ExecArgs, ns_flags: u64) -> io::Result<(c_int, RawFd)> {
    let mut pidfd: c_int = -1;
    let args = CloneArgs {
        flags: ns_flags | CLONE_PIDFD,
        pidfd: &mut pidfd as *mut c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // Block every signal around the clone so that no handler of the parent runs in the child
    // before the child resets the dispositions.
    // SAFETY: sigset_t is plain data; sigfillset/pthread_sigmask only write the given sets.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: clone3 with stack = 0 behaves like fork: the child continues on a copy of this
    // stack. `args` and `pidfd` outlive the call.
    let ret = unsafe { libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>()) };
    if ret == 0 {
        // SAFETY: we are the child; child_main only makes async-signal-safe system calls on
        // data prepared before the clone and never returns.
        unsafe { child_main(plan, exec) }
    }
    let err = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if ret < 0 {
        return Err(err);
    }
    Ok((ret as c_int, pidfd))
}

/// Writes a 12-byte record to the report pipe.
///
/// # Safety
///
/// Async-signal-safe: one `write` on a stack buffer.
unsafe fn report(fd: RawFd, kind: u32, a: i32, b: i32) {
    let mut buf = [0u8; 12];
    buf[0..4].copy_from_slice(&kind.to_ne_bytes());
    buf[4..8].copy_from_slice(&a.to_ne_bytes());
    buf[8..12].copy_from_slice(&b.to_ne_bytes());
    // SAFETY: buf is a valid 12-byte buffer; a short or failed write only loses the report.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Reports the failed step and exits.
///
/// # Safety
///
/// Async-signal-safe.
unsafe fn fail(fd: RawFd, step: u32) -> ! {
    let e = errno();
    // SAFETY: report and _exit are async-signal-safe.
    unsafe {
        report(fd, REPORT_SETUP_FAILED, step as i32, e);
        libc::_exit(127)
    }
}

/// Writes `data` to the file at `path`.
///
/// # Safety
///
/// Async-signal-safe: open, write, close.
pub(crate) unsafe fn write_file(path: &CStr, data: &[u8]) -> bool {
    // SAFETY: path is NUL-terminated, data is a valid slice.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        n == data.len() as isize
    }
}

/// Whether toolgate died between the clone and `PR_SET_PDEATHSIG`.
///
/// Without a PID namespace the parent is visible: an orphan is re-parented, so `getppid()`
/// changes. Inside one, `getppid()` is 0 either way; but the parent holds the only read end of
/// the report pipe (close-on-exec everywhere else), so a write end that polls `POLLERR` means
/// it is gone.
///
/// # Safety
///
/// Child-only, async-signal-safe (getppid, poll).
unsafe fn parent_gone(plan: &ChildPlan) -> bool {
    // SAFETY: plain system calls on a stack struct.
    unsafe {
        if !plan.pid_ns_init && libc::getppid() != plan.parent_pid {
            return true;
        }
        let mut pfd = libc::pollfd { fd: plan.report_fd, events: 0, revents: 0 };
        libc::poll(&mut pfd, 1, 0) == 1 && pfd.revents & libc::POLLERR != 0
    }
}

/// The child after `clone3`. Never returns.
///
/// # Safety
///
/// Must only run in a freshly cloned child. Only async-signal-safe system calls are made.
unsafe fn child_main(plan: &ChildPlan, exec: &ExecArgs) -> ! {
    let rfd = plan.report_fd;
    // SAFETY (whole body): raw system calls on data prepared by the parent; pointers come from
    // live CStrings / vectors owned by `plan` and `exec`; every failure ends in `fail`.
    unsafe {
        // Signal dispositions back to default, mask empty.
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);

        // Die with toolgate, however it dies (kill -9 included). The signal comes when the
        // thread that cloned us ends: that is the spawner thread, which lives as long as the
        // process (see `spawner`). With a PID namespace this is its init, whose death kills
        // everything inside. Then check that toolgate did not die before the prctl: the
        // signal would never come.
        libc::close(plan.report_read_fd);
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0, 0, 0) < 0 {
            fail(rfd, STEP_PDEATHSIG);
        }
        if parent_gone(plan) {
            libc::_exit(127);
        }

        if let Some((uid_map, gid_map)) = &plan.id_maps {
            // setgroups must be denied before an unprivileged gid_map can be written.
            write_file(c"/proc/self/setgroups", b"deny");
            if !write_file(c"/proc/self/uid_map", uid_map) || !write_file(c"/proc/self/gid_map", gid_map) {
                fail(rfd, STEP_MAPS);
            }
        }
        if libc::setsid() < 0 {
            fail(rfd, STEP_SETSID);
        }
        if plan.mount_ns {
            // In a new user namespace the copied mounts are already slaves (nothing propagates
            // back to the host); without one (root), make them so.
            if plan.id_maps.is_none()
                && libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ) < 0
            {
                fail(rfd, STEP_MOUNT_PRIVATE);
            }
            for h in &plan.hidden_roots {
                hide_root(rfd, h);
            }
            for m in &plan.mounts {
                let p = m.path.as_ptr();
                if m.hide {
                    let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                    let data = c"mode=0555,size=4k";
                    if libc::mount(c"tmpfs".as_ptr(), p, c"tmpfs".as_ptr(), flags, data.as_ptr().cast()) < 0 {
                        fail(rfd, STEP_BIND);
                    }
                    continue;
                }
                if libc::mount(p, p, std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()) < 0 {
                    fail(rfd, STEP_BIND);
                }
                if let Some(flags) = m.read_only_flags {
                    let f = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags;
                    if libc::mount(std::ptr::null(), p, std::ptr::null(), f, std::ptr::null()) < 0 {
                        fail(rfd, STEP_REMOUNT);
                    }
                }
            }
        }
        if let Some((port, channel)) = plan.proxy {
            hand_over_listener(rfd, port, channel);
        }
        if let Some(pid_max) = &plan.pid_max
            && !write_file(c"/proc/sys/kernel/pid_max", pid_max)
        {
            fail(rfd, STEP_PID_MAX);
        }
        if let Some(access) = plan.own_proc {
            mount_own_proc(rfd, plan.landlock_fd, access);
        }
        for (resource, limit) in &plan.rlimits {
            if libc::setrlimit(*resource as _, limit) < 0 {
                fail(rfd, STEP_RLIMIT);
            }
        }
        if libc::dup2(plan.stdin_fd, 0) < 0 || libc::dup2(plan.output_fd, 1) < 0 || libc::dup2(plan.error_fd, 2) < 0 {
            fail(rfd, STEP_DUP);
        }
        // Nothing else leaks into the command: every other descriptor closes on exec.
        const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
        if libc::chdir(plan.cwd.as_ptr()) < 0 {
            fail(rfd, STEP_CHDIR);
        }
        if plan.securebits {
            // Root (in the namespace or on the host) gains no capabilities at execve.
            const SECBIT_NOROOT: c_ulong = 1 << 0;
            const SECBIT_NOROOT_LOCKED: c_ulong = 1 << 1;
            if libc::prctl(libc::PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) < 0 {
                fail(rfd, STEP_SECUREBITS);
            }
        }
        if plan.no_new_privs && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
            fail(rfd, STEP_NNP);
        }
        if let Some(fd) = plan.landlock_fd
            && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) < 0
        {
            fail(rfd, STEP_LANDLOCK);
        }
        if let Some(filter) = &plan.seccomp {
            let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut sock_filter };
            const SECCOMP_SET_MODE_FILTER: c_ulong = 1;
            if libc::syscall(libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0 as c_ulong, &prog as *const libc::sock_fprog)
                < 0
            {
                fail(rfd, STEP_SECCOMP);
            }
        }
        if !plan.pid_ns_init {
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execve(plan.program.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
            report(rfd, REPORT_EXEC_FAILED, errno(), 0);
            libc::_exit(127);
        }
        // The init keeps every signal blocked (as it was since the clone) until it forwards
        // them: a signal sent during the setup stays pending instead of being dropped.
        init_main(plan, exec)
    }
}

/// In a fresh network namespace: brings loopback up, listens on `127.0.0.1:port` and sends the
/// listener over `channel` (`SCM_RIGHTS`), then closes both.
///
/// # Safety
///
/// Child-only, async-signal-safe (socket calls on stack data).
unsafe fn hand_over_listener(rfd: RawFd, port: u16, channel: RawFd) {
    // SAFETY (whole body): raw system calls on stack structures.
    unsafe {
        let udp = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if udp < 0 {
            fail(rfd, STEP_PROXY);
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as c_char;
        }
        ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(udp, libc::SIOCSIFFLAGS as _, &ifr) < 0 {
            fail(rfd, STEP_PROXY);
        }
        libc::close(udp);
        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if listener < 0 {
            fail(rfd, STEP_PROXY);
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(listener, (&addr as *const libc::sockaddr_in).cast(), len) < 0 || libc::listen(listener, 128) < 0
        {
            fail(rfd, STEP_PROXY);
        }
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut c_int, listener);
        if libc::sendmsg(channel, &msg, 0) < 0 {
            fail(rfd, STEP_PROXY);
        }
        libc::close(listener);
        libc::close(channel);
    }
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Mounts a fresh procfs on `/proc` and allows `access` beneath it in the ruleset `ruleset`.
///
/// # Safety
///
/// Child-only, async-signal-safe (mount, open, one Landlock call, close). The child must be
/// in its own mount namespace and the init of its own PID namespace.
pub(crate) unsafe fn mount_own_proc(rfd: RawFd, ruleset: Option<RawFd>, access: u64) {
    // SAFETY (whole body): raw system calls on static strings and a stack structure.
    unsafe {
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null()) < 0 {
            fail(rfd, STEP_PROC);
        }
        let Some(ruleset) = ruleset else { return };
        let fd = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY);
        if fd < 0 {
            fail(rfd, STEP_PROC_RULE);
        }
        const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;
        let attr = PathBeneathAttr { allowed_access: access, parent_fd: fd };
        if libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        ) < 0
        {
            fail(rfd, STEP_PROC_RULE);
        }
        libc::close(fd);
    }
}

/// What the command's clone needs (passed through `clone`'s argument pointer).
struct ExecCtx<'a> {
    plan: &'a ChildPlan,
    exec: &'a ExecArgs,
}

/// The signals the init forwards to the command's processes. `SIGKILL` and `SIGSTOP` cannot be
/// handled and reach the whole group directly ([`crate::RunningProcess::signal`]); the others
/// are the init's own business (`SIGCHLD`) or faults.
pub(crate) const FORWARDED: [c_int; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGCONT,
    libc::SIGWINCH,
];

/// The init's handler: the signal goes to every other process of the namespace (`kill(-1)`
/// spares the init itself), so each receives it once, even one that left the process group.
extern "C" fn forward(sig: c_int) {
    // SAFETY: kill is async-signal-safe; errno is saved and restored around it.
    unsafe {
        let saved = *libc::__errno_location();
        libc::kill(-1, sig);
        *libc::__errno_location() = saved;
    }
}

/// Runs on the init's spare stack in the command process: `execve`, or report and exit.
extern "C" fn exec_command(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` points to the init's `ExecCtx`, alive while the init is suspended by
    // CLONE_VFORK; only execve, write and _exit are called.
    unsafe {
        let ctx = &*(arg as *const ExecCtx<'_>);
        // The init's forwarding handlers are not the command's: back to the defaults, then
        // unblock (a signal already pending for the command takes its default action here).
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in FORWARDED {
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(ctx.plan.program.as_ptr(), ctx.exec.argv.as_ptr(), ctx.exec.envp.as_ptr());
        report(ctx.plan.report_fd, REPORT_EXEC_FAILED, errno(), 0);
        libc::_exit(127)
    }
}

/// Covers `h.root` with an empty tmpfs and binds `h.keeps` back in.
///
/// # Safety
///
/// Child-only, async-signal-safe (mount syscalls on prepared strings, a stack array of fds).
unsafe fn hide_root(rfd: RawFd, h: &HideRoot) {
    const SYS_OPEN_TREE: libc::c_long = 428;
    const SYS_MOVE_MOUNT: libc::c_long = 429;
    const OPEN_TREE_CLONE: u32 = 1;
    const AT_RECURSIVE: u32 = 0x8000;
    const MOVE_MOUNT_F_EMPTY_PATH: u32 = 4;
    let mut fds = [-1 as c_int; MAX_KEEPS];
    // SAFETY (whole body): raw system calls on NUL-terminated strings owned by `h`.
    unsafe {
        for (i, keep) in h.keeps.iter().take(MAX_KEEPS).enumerate() {
            let fd = libc::syscall(
                SYS_OPEN_TREE,
                libc::AT_FDCWD,
                keep.path.as_ptr(),
                OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as u32,
            );
            if fd < 0 {
                fail(rfd, STEP_HIDE);
            }
            fds[i] = fd as c_int;
        }
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(c"tmpfs".as_ptr(), h.root.as_ptr(), c"tmpfs".as_ptr(), flags, c"mode=0755".as_ptr().cast()) < 0 {
            fail(rfd, STEP_HIDE);
        }
        for (i, keep) in h.keeps.iter().take(MAX_KEEPS).enumerate() {
            for dir in &keep.dirs {
                if libc::mkdir(dir.as_ptr(), 0o755) < 0 && errno() != libc::EEXIST {
                    fail(rfd, STEP_HIDE);
                }
            }
            if keep.is_file {
                let fd = libc::open(keep.path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
                if fd < 0 {
                    fail(rfd, STEP_HIDE);
                }
                libc::close(fd);
            }
            let empty = c"";
            if libc::syscall(
                SYS_MOVE_MOUNT,
                fds[i],
                empty.as_ptr(),
                libc::AT_FDCWD,
                keep.path.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            ) < 0
            {
                fail(rfd, STEP_HIDE);
            }
            libc::close(fds[i]);
        }
        // The tmpfs stays writable for the mount points above, but no Landlock rule covers it:
        // the command can neither write nor read it.
    }
}

/// Init of the PID namespace: fork the command, reap, report its status, exit.
///
/// # Safety
///
/// Child-only, async-signal-safe.
unsafe fn init_main(plan: &ChildPlan, exec: &ExecArgs) -> ! {
    let rfd = plan.report_fd;
    // SAFETY (whole body): raw system calls; see child_main.
    unsafe {
        // The init never calls execve, so close-on-exec does not help here: close every
        // descriptor but the report pipe, or the init would hold pipes open (the command's own
        // stdin, other commands' pipes inherited through the clone) for as long as it runs.
        if rfd > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (rfd - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (rfd + 1) as u32, u32::MAX, 0u32);
        // posix_spawn-style: the command shares the init's memory on its own stack until it
        // calls execve (CLONE_VFORK suspends the init meanwhile), so no page tables are copied.
        // No CLONE_NEW* flag: allowed by our own seccomp filter.
        // A namespace's init only receives the signals it handles; these it forwards to the
        // command (see `forward`). Blocked until the command runs, so none is lost.
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = forward as *const () as libc::sighandler_t;
        libc::sigfillset(&mut act.sa_mask);
        for sig in FORWARDED {
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
        let stack = plan.init_stack.as_ptr() as usize + plan.init_stack.len();
        let stack_top = (stack & !15) as *mut libc::c_void;
        let ctx = ExecCtx { plan, exec };
        let pid = libc::clone(
            exec_command,
            stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&ctx as *const ExecCtx<'_>).cast_mut().cast(),
        );
        if pid < 0 {
            fail(rfd, STEP_FORK);
        }
        let pid = pid as libc::pid_t;
        // Only the command holds the standard descriptors (and the output pipe) from now on.
        libc::close(0);
        libc::close(1);
        libc::close(2);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        loop {
            let mut status: c_int = 0;
            let r = libc::waitpid(-1, &mut status, 0);
            if r == pid {
                report(rfd, REPORT_EXITED, status, 0);
                libc::_exit(0);
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(0);
            }
        }
    }
}

/// What [`probe_namespaces`] tries beyond creating the namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing more.
    Create,
    /// Setting `pid_max` in the PID namespace.
    PidMax,
    /// Mounting the PID namespace's own `/proc` (needs a mount and a PID namespace).
    OwnProc,
}

/// Probes which namespaces can be created: clones a child with `flags` that writes its id maps
/// (when a user namespace is requested), tries `probe` and exits 0. Returns whether it worked.
pub(crate) fn probe_namespaces(flags: u64, id_maps: Option<&(Vec<u8>, Vec<u8>)>, probe: Probe) -> bool {
    let mut pidfd: c_int = -1;
    let args = CloneArgs {
        flags: flags | CLONE_PIDFD,
        pidfd: &mut pidfd as *mut c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // SAFETY: as in spawn_child; signals are blocked around the clone, the child only makes
    // raw system calls and exits.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let ret = libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>());
        if ret == 0 {
            if let Some((uid_map, gid_map)) = id_maps {
                write_file(c"/proc/self/setgroups", b"deny");
                if !write_file(c"/proc/self/uid_map", uid_map) || !write_file(c"/proc/self/gid_map", gid_map) {
                    libc::_exit(1);
                }
            }
            if probe == Probe::PidMax && !write_file(c"/proc/sys/kernel/pid_max", b"301") {
                libc::_exit(2);
            }
            // A fresh procfs is refused where the host's /proc is partly covered (a container
            // masking /proc/kcore and the like): the kernel will not reveal what is hidden.
            if probe == Probe::OwnProc {
                if id_maps.is_none()
                    && libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_SLAVE,
                        std::ptr::null(),
                    ) < 0
                {
                    libc::_exit(3);
                }
                let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                if libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null()) < 0 {
                    libc::_exit(4);
                }
            }
            libc::_exit(0);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if ret < 0 {
            return false;
        }
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(libc::P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED);
        libc::close(pidfd);
        r == 0 && info.si_code == libc::CLD_EXITED && info.si_status() == 0
    }
}
