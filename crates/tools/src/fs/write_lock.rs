//! The write mutex across processes: an advisory `flock` on `.toolgate/fs-write.lock` in the
//! workspace, held by a writing call from its checks to its commit, so two toolgate processes
//! on one workspace cannot interleave a read-modify-write of one file.
//!
//! A file lock rather than a lock in the state database: the kernel drops it when its holder
//! dies (a `kill -9` leaves nothing to expire or sweep), it costs two system calls and no
//! `fsync`, and a write never waits on the database. It binds the processes of one machine,
//! which is what shares one workspace folder (several nodes share locks through the store,
//! not files).

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};
use toolgate_core::ToolError;

/// The lock file, relative to the workspace.
pub(crate) const WRITE_LOCK_FILE: &str = ".toolgate/fs-write.lock";

/// How long a writing call waits for another process's write to finish. Writes take
/// milliseconds; a holder past this is stuck, and the caller is told so.
const WAIT: Duration = Duration::from_secs(30);

/// The held lock; released when dropped (also when the call panics).
#[derive(Debug)]
pub(crate) struct Held<'a>(&'a File);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = flock(self.0, FlockOperation::Unlock);
    }
}

/// Takes the write lock of `workspace`, opening its file into `slot` the first time.
pub(crate) fn hold<'a>(workspace: &Path, slot: &'a mut Option<File>) -> Result<Held<'a>, ToolError> {
    let path = workspace.join(WRITE_LOCK_FILE);
    let file = match slot {
        Some(file) => file,
        None => slot.insert(open(&path).map_err(|e| {
            ToolError::failed(format!(
                "cannot open the workspace's write lock `{}` ({e}); nothing was written; check that `.toolgate/` \
                 in the workspace is a writable folder, then retry",
                path.display()
            ))
        })?),
    };
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(&*file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Held(file)),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {}
            Err(e) => {
                return Err(ToolError::failed(format!(
                    "cannot lock `{}` ({e}); nothing was written, retry the call",
                    path.display()
                )));
            }
        }
        if started.elapsed() >= WAIT {
            return Err(ToolError::failed(format!(
                "another toolgate process on this workspace has been writing for {} s (it holds `{}`); nothing \
                 was written, retry the call later",
                WAIT.as_secs(),
                path.display()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Never through a link planted in place of the file.
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_lets_go() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut first = None;
        let held = hold(ws.path(), &mut first).unwrap_or_else(|e| panic!("{e}"));
        // Another open file description, as another process has.
        let other = open(&ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        assert!(flock(&other, FlockOperation::NonBlockingLockExclusive).is_err(), "held");
        let path = ws.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let mut slot = None;
            let started = Instant::now();
            let _held = hold(&path, &mut slot).map_err(|e| e.to_string())?;
            Ok::<_, String>(started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
        let waited = waiter.join().unwrap_or_else(|_| panic!("waiter panicked")).unwrap_or_else(|e| panic!("{e}"));
        assert!(waited >= Duration::from_millis(90), "it waited for the first holder: {waited:?}");
    }
}
