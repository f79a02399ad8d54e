//! The one thread that clones every sandboxed child.
//!
//! Each child asks for `PR_SET_PDEATHSIG` (SIGKILL), and the kernel sends it when the *thread*
//! that created the child ends, not the process. A Tokio blocking-pool thread retires after
//! 10 s idle, a runtime's workers end when a library user drops the runtime: a child cloned on
//! such a thread would be killed while toolgate lives on. So every clone is made here, on a
//! thread started on first use that never ends: the signal then means that toolgate died.
//!
//! The caller blocks until the clone returns, as it did when it made the clone itself; the
//! hand-over costs two thread wake-ups.

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};

use libc::c_int;

use crate::child::{self, ChildPlan, ExecArgs};

struct Job {
    plan: *const ChildPlan,
    exec: *const ExecArgs,
    flags: u64,
    reply: SyncSender<io::Result<(c_int, RawFd)>>,
}

// SAFETY: the pointers are dereferenced only by the spawner thread while the sender is blocked
// in `spawn` waiting for the reply, so they stay valid and unchanged; both are only read.
unsafe impl Send for Job {}

/// `None` when the thread could not be started (reported by every spawn).
static SPAWNER: OnceLock<Option<Sender<Job>>> = OnceLock::new();

fn start() -> Option<Sender<Job>> {
    let (tx, rx) = channel::<Job>();
    std::thread::Builder::new()
        .name("toolgate-spawner".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            // The sender lives in a static: this loop, and so the thread, never ends.
            for job in rx {
                // SAFETY: see `Job`; the caller of `spawn` upholds spawn_child's contract.
                let result = unsafe { child::spawn_child(&*job.plan, &*job.exec, job.flags) };
                let _ = job.reply.send(result);
            }
        })
        .ok()?;
    Some(tx)
}

/// [`child::spawn_child`] on the spawner thread.
///
/// # Safety
///
/// As [`child::spawn_child`]: `plan` and `exec` stay alive and unchanged until this returns,
/// and every descriptor in `plan` is open.
pub(crate) unsafe fn spawn(plan: &ChildPlan, exec: &ExecArgs, flags: u64) -> io::Result<(c_int, RawFd)> {
    let gone = || io::Error::other("the sandbox's spawner thread is not running");
    let tx = SPAWNER.get_or_init(start).as_ref().ok_or_else(gone)?;
    let (reply, rx) = sync_channel(1);
    tx.send(Job { plan, exec, flags, reply }).map_err(|_| gone())?;
    rx.recv().map_err(|_| gone())?
}
