//! A workspace's state belongs to its owner alone: `.toolgate/` is `0700` and everything in it
//! readable and writable by the owner only (the state database holds the audit log, agent
//! sessions and the memory index). New files are created with these modes whatever the umask
//! (created with the mode, then set exactly); an older workspace is fixed when its database is
//! opened.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of `.toolgate/` and any folder toolgate makes in it.
pub(crate) const DIR_MODE: u32 = 0o700;
/// The mode of a file toolgate keeps there.
pub(crate) const FILE_MODE: u32 = 0o600;
/// At most this many entries are looked at when fixing an older `.toolgate/` (spilled outputs,
/// a bridged server's state): the folder itself is `0700` first, which alone keeps others out.
const MAX_ENTRIES: usize = 20_000;

/// Creates `dir` (and missing parents) with mode `0700`; when the folder is a workspace's
/// `.toolgate`, it and everything in it lose any rights of group and others.
pub(crate) fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.as_os_str().is_empty() && !dir.exists() {
        DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    }
    if dir.file_name().is_some_and(|n| n == ".toolgate") {
        secure_tree(dir);
    }
    Ok(())
}

/// Creates the database file `path` with mode `0600` if it does not exist, and sets `0600` on it
/// and on its `-wal`, `-shm` and `-journal` files where they exist. SQLite creates the `-wal`
/// and `-shm` files with the database's mode, so they start `0600` too.
pub(crate) fn prepare_db_file(path: &Path) -> std::io::Result<()> {
    match OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    restrict(path)?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        match restrict(Path::new(&side)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Removes the rights of group and others from `path` if it is a plain file or folder (not a
/// link: a link's target is not ours to change), keeping the owner's. Whether it changed it.
fn restrict(path: &Path) -> std::io::Result<bool> {
    let meta = std::fs::symlink_metadata(path)?;
    if !(meta.is_file() || meta.is_dir()) {
        return Ok(false);
    }
    let mode = meta.permissions().mode() & 0o7777;
    let want = if meta.is_dir() { DIR_MODE | (mode & 0o700) } else { (mode & 0o700) | FILE_MODE };
    if mode != want {
        std::fs::set_permissions(path, Permissions::from_mode(want))?;
    }
    Ok(mode != want)
}

/// `.toolgate/` becomes `0700` and, if it was not, every file and folder in it loses the rights
/// of group and others. Best effort: a file that cannot be changed is logged, not an error (the folder's own
/// mode already keeps others out).
fn secure_tree(dir: &Path) {
    match restrict(dir) {
        Err(e) => {
            tracing::warn!(path = %dir.display(), error = %e, "cannot make the state folder private (chmod 700 it)");
            return;
        }
        // Already private: fixed by an earlier open (or made so), and the folder alone keeps
        // others out, so every open (four per `toolgate call`) does not walk it again.
        Ok(false) => return,
        Ok(true) => {}
    }
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_symlink() {
                continue;
            }
            if let Err(e) = restrict(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot make a state file private (chmod go-rwx it)");
            }
            if kind.is_dir() {
                stack.push(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn an_older_state_folder_is_made_private_and_links_are_left_alone() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("theirs");
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&target, Permissions::from_mode(0o644)).unwrap();
        let state = ws.path().join(".toolgate");
        std::fs::create_dir_all(state.join("outputs")).unwrap();
        for (p, m) in [(state.as_path(), 0o755), (&state.join("outputs"), 0o775)] {
            std::fs::set_permissions(p, Permissions::from_mode(m)).unwrap();
        }
        std::fs::write(state.join("outputs/a.log"), "log").unwrap();
        std::fs::set_permissions(state.join("outputs/a.log"), Permissions::from_mode(0o666)).unwrap();
        std::fs::write(state.join("script"), "").unwrap();
        std::fs::set_permissions(state.join("script"), Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&target, state.join("link")).unwrap();
        prepare_dir(&state).unwrap();
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join("outputs")), 0o700);
        assert_eq!(mode(&state.join("outputs/a.log")), 0o600);
        assert_eq!(mode(&state.join("script")), 0o700, "the owner's execute right is kept");
        assert_eq!(mode(&target), 0o644, "a link's target is not changed");
    }
}
