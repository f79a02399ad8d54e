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
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, flock, fstat, mkdirat, openat, statat};
use rustix::io::Errno;
use toolgate_core::ToolError;

/// The lock file, relative to the workspace.
pub(crate) const WRITE_LOCK_FILE: &str = ".toolgate/fs-write.lock";

/// The folder and file name of [`WRITE_LOCK_FILE`], opened one component at a time.
const DIR: &str = ".toolgate";
const NAME: &str = "fs-write.lock";

/// How long a writing call waits for another process's write to finish. Writes take
/// milliseconds; a holder past this is stuck, and the caller is told so.
const WAIT: Duration = Duration::from_secs(30);

/// How many times a call reopens the lock file after finding the locked one deleted or
/// replaced. Once is the usual case (`git clean` ran since the last write); more means
/// something keeps removing it, and the caller is told so.
const REOPENS: usize = 8;

/// The held lock; released when dropped (also when the call panics).
#[derive(Debug)]
pub(crate) struct Held<'a>(&'a File);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = flock(self.0, FlockOperation::Unlock);
    }
}

/// Takes the write lock of `workspace`, keeping its open file in `slot` between calls.
///
/// A lock on a file that was deleted (`git clean -xfd`, `rm -rf .toolgate`) or replaced binds
/// nobody: another process opens and locks the new file at the path. So after locking, the
/// locked file must still be the one at the path (same device and inode); if not, it is
/// dropped and the file at the path is opened (or created) and locked instead.
pub(crate) fn hold<'a>(workspace: &Path, slot: &'a mut Option<File>) -> Result<Held<'a>, ToolError> {
    let path = workspace.join(WRITE_LOCK_FILE);
    let started = Instant::now();
    for _ in 0..REOPENS {
        let file = match slot.take() {
            Some(file) => file,
            None => open(workspace).map_err(|e| {
                ToolError::failed(format!(
                    "cannot open the workspace's write lock `{}` ({e}); nothing was written; check that `.toolgate/` \
                     in the workspace is a writable folder (not a symbolic link), then retry",
                    path.display()
                ))
            })?,
        };
        lock(&file, &path, started)?;
        if still_at_path(workspace, &file) {
            return Ok(Held(slot.insert(file)));
        }
        // Dropping the file releases its lock.
        drop(file);
    }
    Err(ToolError::failed(format!(
        "the workspace's write lock `{}` was deleted or replaced {REOPENS} times while this call took it; nothing \
         was written; stop whatever keeps removing `.toolgate/` in the workspace, then retry",
        path.display()
    )))
}

/// Waits for the exclusive lock on `file`, at most until `started` + [`WAIT`].
fn lock(file: &File, path: &Path, started: Instant) -> Result<(), ToolError> {
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(e) if e == Errno::WOULDBLOCK || e == Errno::INTR => {}
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

/// Whether `file` is the file at the lock path now. Anything else (gone, replaced, a link,
/// `.toolgate` no longer a folder) is "no": the caller reopens, and the reopen reports errors.
fn still_at_path(workspace: &Path, file: &File) -> bool {
    let now = || -> rustix::io::Result<bool> {
        let dir = open_dir(workspace, false)?;
        let (held, there) = (fstat(file)?, statat(&dir, NAME, AtFlags::SYMLINK_NOFOLLOW)?);
        Ok(held.st_dev == there.st_dev && held.st_ino == there.st_ino)
    };
    now().unwrap_or(false)
}

/// Opens `<workspace>/.toolgate`, creating it if `create`, without following a link there:
/// a link planted in place of the folder would put the lock file outside the workspace.
fn open_dir(workspace: &Path, create: bool) -> rustix::io::Result<OwnedFd> {
    let ws = rustix::fs::open(workspace, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    if create {
        // toolgate's state is its owner's alone.
        match mkdirat(&ws, DIR, Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(e) if e == Errno::EXIST => {}
            Err(e) => return Err(e),
        }
    }
    openat(&ws, DIR, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

/// Opens (or creates, owner-only) the lock file of `workspace`, never through a link planted in
/// place of the folder or the file, and only if it is a regular file.
fn open(workspace: &Path) -> std::io::Result<File> {
    let dir = open_dir(workspace, true)?;
    // NONBLOCK so that a FIFO planted there cannot hang the open; it is refused below.
    let fd = openat(
        &dir,
        NAME,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o600),
    )?;
    if FileType::from_raw_mode(fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("it is not a regular file; delete it"));
    }
    Ok(File::from(fd))
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
        let other = open(ws.path()).unwrap_or_else(|e| panic!("{e}"));
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

    /// Takes and releases the lock in a thread with `slot`, returning how long it waited.
    fn take_in_thread(
        path: std::path::PathBuf,
        mut slot: Option<File>,
    ) -> std::thread::JoinHandle<Result<Duration, String>> {
        std::thread::spawn(move || {
            let started = Instant::now();
            let _held = hold(&path, &mut slot).map_err(|e| e.to_string())?;
            Ok(started.elapsed())
        })
    }

    /// A second holder takes the lock at `ws` (opening the file there now); `first`, opened on
    /// an earlier file, must then wait until the second lets go.
    fn waits_for_a_new_holder(ws: &Path, first: Option<File>) {
        let mut second = None;
        let held = hold(ws, &mut second).unwrap_or_else(|e| panic!("{e}"));
        let waiter = take_in_thread(ws.to_path_buf(), first);
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
        let waited = waiter.join().unwrap_or_else(|_| panic!("waiter panicked")).unwrap_or_else(|e| panic!("{e}"));
        assert!(waited >= Duration::from_millis(90), "it waited for the second holder: {waited:?}");
    }

    #[test]
    fn holders_still_exclude_each_other_after_the_lock_file_is_deleted() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // The first holder has its file open from an earlier write.
        let mut first = None;
        drop(hold(ws.path(), &mut first).unwrap_or_else(|e| panic!("{e}")));
        std::fs::remove_dir_all(ws.path().join(".toolgate")).unwrap_or_else(|e| panic!("{e}"));
        // The second creates and locks a new file; the first must wait for it rather than lock
        // its deleted file.
        waits_for_a_new_holder(ws.path(), first);

        // The same when the file is replaced by another (a rename over it).
        let path = ws.path().join(WRITE_LOCK_FILE);
        let mut first = None;
        drop(hold(ws.path(), &mut first).unwrap_or_else(|e| panic!("{e}")));
        std::fs::write(ws.path().join(".toolgate/other"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(ws.path().join(".toolgate/other"), &path).unwrap_or_else(|e| panic!("{e}"));
        waits_for_a_new_holder(ws.path(), first);
    }

    #[test]
    fn a_link_planted_at_the_lock_or_its_folder_is_refused_and_not_followed() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // A link in place of the folder.
        std::os::unix::fs::symlink(outside.path(), ws.path().join(".toolgate")).unwrap_or_else(|e| panic!("{e}"));
        let err = hold(ws.path(), &mut None).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("not a symbolic link") && err.contains("nothing was written"), "{err}");
        assert!(!outside.path().join("fs-write.lock").exists(), "nothing created through the link");
        // A link in place of the file.
        std::fs::remove_file(ws.path().join(".toolgate")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(ws.path().join(".toolgate")).unwrap_or_else(|e| panic!("{e}"));
        let target = outside.path().join("target");
        std::os::unix::fs::symlink(&target, ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        let err = hold(ws.path(), &mut None).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("cannot open the workspace's write lock"), "{err}");
        assert!(!target.exists(), "nothing created through the link");
        // A link planted after the file was opened: the holder does not lock through it.
        std::fs::remove_file(ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        let mut slot = None;
        drop(hold(ws.path(), &mut slot).unwrap_or_else(|e| panic!("{e}")));
        std::fs::remove_file(ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&target, ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        assert!(hold(ws.path(), &mut slot).is_err());
        assert!(!target.exists(), "nothing created through the link");
        // A FIFO is not a lock file (and does not hang the open).
        std::fs::remove_file(ws.path().join(WRITE_LOCK_FILE)).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.path().join(WRITE_LOCK_FILE),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let err = hold(ws.path(), &mut None).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
