//! The private temporary folders, named after the process that owns them, and the sweep of
//! those whose owner died without removing them (`kill -9`, a crash, an OOM kill).
//!
//! A folder is `toolgate-sandbox-<pid>-<start>.<boot>-XXXXXX`: `<start>` is the owner's start
//! time in clock ticks since boot and `<boot>` the head of the boot id, so a reused pid (or a
//! pid from before a reboot) is not mistaken for the owner. Folders in another form are never
//! touched: their owner is unknown.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Once;

pub(crate) const PREFIX: &str = "toolgate-sandbox-";

pub(crate) use crate::process_token::start_token;

/// The prefix of this process's folders.
pub(crate) fn own_prefix() -> String {
    let pid = std::process::id();
    format!("{PREFIX}{pid}-{}-", start_token(pid).unwrap_or_else(|| "0.0".into()))
}

/// See [`crate::Sandbox::sweep_stale_temp_dirs`].
pub(crate) fn sweep_stale_temp_dirs() -> usize {
    sweep_in(&std::env::temp_dir())
}

/// [`sweep_stale_temp_dirs`], once per process.
pub(crate) fn sweep_once() {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| {
        sweep_stale_temp_dirs();
    });
}

pub(crate) fn sweep_in(dir: &Path) -> usize {
    // Without /proc no owner can be told alive: remove nothing.
    if start_token(std::process::id()).is_none() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        let mut parts = owner.splitn(3, '-');
        let (Some(pid), Some(token), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if !token.contains('.') || start_token(pid).as_deref() == Some(token) {
            continue; // not our naming, or the owner is alive
        }
        let path = entry.path();
        // A symbolic link or another user's folder is not ours to remove.
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() && m.uid() == uid => {}
            _ => continue,
        }
        if remove_tree(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// `remove_dir_all` that first makes directories writable again (a command may have left a
/// read-only folder in its temporary folder). Symbolic links are removed, never followed.
fn remove_tree(path: &Path) -> io::Result<()> {
    if std::fs::remove_dir_all(path).is_ok() {
        return Ok(());
    }
    make_writable(path);
    std::fs::remove_dir_all(path)
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_token_is_stable_and_names_this_process() {
        let prefix = own_prefix();
        assert!(prefix.starts_with(&format!("{PREFIX}{}-", std::process::id())), "{prefix}");
        assert_eq!(start_token(std::process::id()), start_token(std::process::id()));
        assert!(!prefix.contains("0.0-"), "{prefix}");
    }

    #[test]
    fn a_zombie_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap_or_else(|e| panic!("{e}"));
        let stat = format!("/proc/{}/stat", child.id());
        let start = std::time::Instant::now();
        while !std::fs::read_to_string(&stat).unwrap_or_default().contains(") Z ") {
            assert!(start.elapsed().as_secs() < 10, "the child did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(start_token(child.id()), None);
        let _ = child.wait();
    }

    #[test]
    fn sweeps_only_dead_owners_folders() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mine = tmp.path().join(format!("{}abc123", own_prefix()));
        // pid 1's start token differs from this made-up one: its owner is "dead".
        let dead = tmp.path().join(format!("{PREFIX}1-999999999.deadbeef-xyz"));
        let nested_ro = dead.join("ro/inner");
        let unknown = tmp.path().join(format!("{PREFIX}Ab12Cd"));
        let other = tmp.path().join("something-else");
        for d in [&mine, &nested_ro, &unknown, &other] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dead.join("ro"), std::fs::Permissions::from_mode(0o500))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sweep_in(tmp.path()), 1);
        assert!(!dead.exists());
        assert!(mine.exists() && unknown.exists() && other.exists());
    }
}
