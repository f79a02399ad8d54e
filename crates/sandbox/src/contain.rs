//! Keeps a process that toolgate starts outside the sandbox (a hook, a bridged MCP server)
//! and everything it starts from outliving toolgate.
//!
//! `PR_SET_PDEATHSIG` alone covers only the direct child: `sh -c 'a & b'` leaves `a` behind.
//! So, where the machine allows it, the child (between fork and exec, in a `pre_exec` hook)
//! creates a PID namespace (inside a user namespace that maps only the caller's own ids, unless
//! it runs as root) and forks once more:
//!
//! ```text
//! toolgate ── relay (pid the caller sees; dies with toolgate) ── command (pid 1 of a new namespace)
//! ```
//!
//! The relay only waits and passes on the command's exit status. The command asks to be killed
//! when the relay dies, and when the first process of a PID namespace dies, the kernel kills every
//! other one in it: `kill -9` of toolgate, or of the relay (`kill_on_drop`, a process-group kill),
//! takes the whole tree. Without user or PID namespaces, only the direct child is covered.
//!
//! The cost of being contained: inside the user namespace, set-user-ID programs (`sudo`) gain
//! nothing, and processes of the host are not visible to `kill` by pid.

use std::io;
use std::os::unix::process::CommandExt;

use libc::{c_int, c_ulong};

use crate::child::write_file;
use crate::status;

/// How a contained child is set up, decided before the fork (nothing is computed after it).
struct Plan {
    parent: libc::pid_t,
    /// `CLONE_NEWPID`, with `CLONE_NEWUSER` unless root; `None`: death signal only.
    unshare: Option<c_int>,
    /// The user namespace's maps (own ids only), when one is created.
    id_maps: Option<(Vec<u8>, Vec<u8>)>,
}

/// Makes the process `cmd` starts, and every process it starts in turn, die when toolgate dies
/// (see the module's documentation). Spawn from a thread that lives as long as toolgate (a
/// runtime worker or the main thread): the kernel's death signal follows the spawning *thread*.
///
/// Returns whether the whole tree is covered (a PID namespace) rather than the child alone.
pub fn contain(cmd: &mut std::process::Command) -> bool {
    let st = status::status();
    let unshare = if !st.namespaces.pid {
        None
    } else if st.root && !st.namespaces.user {
        Some(libc::CLONE_NEWPID)
    } else if st.namespaces.user {
        Some(libc::CLONE_NEWUSER | libc::CLONE_NEWPID)
    } else {
        None
    };
    let plan = Plan {
        parent: std::process::id() as libc::pid_t,
        unshare,
        id_maps: unshare.filter(|f| f & libc::CLONE_NEWUSER != 0).map(|_| status::id_maps()),
    };
    let whole_tree = plan.unshare.is_some();
    // SAFETY: the hook runs in the child between fork and exec. It makes only async-signal-safe
    // system calls (prctl, getppid, unshare, open/write/close, pipe2, fork, poll, waitpid, kill,
    // sigaction, close_range, _exit) on data prepared before the fork; it allocates nothing and
    // takes no lock.
    unsafe {
        cmd.pre_exec(move || contain_in_child(&plan));
    }
    whole_tree
}

/// The child's side. Returns in the process that goes on to exec the command.
///
/// # Safety
///
/// Only in a freshly forked child, before exec.
unsafe fn contain_in_child(plan: &Plan) -> io::Result<()> {
    // SAFETY (whole body): raw system calls on plain data; see `contain`.
    unsafe {
        die_with_parent(plan.parent)?;
        let Some(flags) = plan.unshare else { return Ok(()) };
        if libc::unshare(flags) < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some((uid_map, gid_map)) = &plan.id_maps {
            // setgroups must be denied before an unprivileged gid_map can be written.
            write_file(c"/proc/self/setgroups", b"deny");
            if !write_file(c"/proc/self/uid_map", uid_map) || !write_file(c"/proc/self/gid_map", gid_map) {
                return Err(io::Error::other("cannot map the user namespace's ids"));
            }
        }
        // The relay holds the write end until it ends: a read end that polls as hung up means the
        // relay died before the command asked to die with it.
        let mut alive = [0 as c_int; 2];
        if libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
        let [alive_read, alive_write] = alive;
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                libc::close(alive_write);
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0, 0, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                let mut pfd = libc::pollfd { fd: alive_read, events: libc::POLLIN, revents: 0 };
                if libc::poll(&mut pfd, 1, 0) == 1 && pfd.revents & libc::POLLHUP != 0 {
                    libc::_exit(137);
                }
                libc::close(alive_read);
                Ok(())
            }
            command => relay(command, alive_write),
        }
    }
}

/// Asks for `SIGKILL` when the parent dies, then checks that it did not die before.
///
/// # Safety
///
/// Child-only, async-signal-safe.
unsafe fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: plain system calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0, 0, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// The relay: closes every descriptor but `keep` (so that the pipes to toolgate, and the one
/// that reports a failed exec, are held by the command alone), waits for the command and ends
/// the way it ended. Never returns.
///
/// # Safety
///
/// Child-only, async-signal-safe.
unsafe fn relay(command: libc::pid_t, keep: c_int) -> ! {
    // SAFETY: plain system calls; `status` is a stack integer.
    unsafe {
        close_all_but(keep);
        let mut status: c_int = 0;
        loop {
            if libc::waitpid(command, &mut status, 0) == command {
                break;
            }
            if *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

/// Closes every descriptor except `keep`.
///
/// # Safety
///
/// Child-only, async-signal-safe.
unsafe fn close_all_but(keep: c_int) {
    // SAFETY: close_range and close on integers.
    unsafe {
        let below = keep > 0 && libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32) == 0;
        let above = libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32) == 0;
        if !(below || keep == 0) || !above {
            // Kernels before 5.9: close the usual range one by one.
            for fd in 0..4096 {
                if fd != keep {
                    libc::close(fd);
                }
            }
        }
    }
}
