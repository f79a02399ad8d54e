//! Confinement: every path a tool touches is resolved beneath the workspace root by the kernel.
//!
//! The primitive is `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, relative to a
//! file descriptor of the workspace root ([`Root`]). The kernel refuses any resolution that leaves
//! the root (`..`, absolute symlinks, relative symlinks that climb out, `/proc/self/...` magic
//! links), and it does so at the moment of the open, so a symlink swapped in after a check cannot
//! redirect the access.
//!
//! Writes open the parent directory beneath the root, create a temporary file relative to that
//! directory descriptor, `fsync` it, and `renameat` it over the target relative to the same
//! descriptor: a directory swapped for a symlink between the check and the rename cannot redirect
//! the write, and the old file survives any failure.
//!
//! Lexical normalization ([`normalize`]) only turns the model's string into a relative path
//! (refusing NUL bytes, absolute paths outside the root and `..` that climbs above it); it is never
//! the security boundary.

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

/// Why a path was refused or could not be used.
#[derive(Debug)]
pub(crate) enum PathError {
    /// The path contains a NUL byte.
    Nul,
    /// An absolute path that does not lie inside the workspace.
    AbsoluteOutside,
    /// `..` climbs above the workspace root.
    Escapes,
    /// The kernel refused: a symlink (or magic link) on the way leads outside the workspace.
    SymlinkOutside,
    /// Nothing exists at the path.
    NotFound,
    /// A component on the way is a file, not a directory.
    NotADirectory,
    /// The path is a directory where a file was needed.
    IsDirectory,
    /// The path is a FIFO, socket or device.
    NotRegular,
    /// A file with more than one hard link: writing could change a file outside the workspace.
    HardLinked,
    /// Any other I/O failure.
    Io(io::Error),
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Nul => f.write_str("the path contains a NUL byte"),
            PathError::AbsoluteOutside => {
                f.write_str("the absolute path is outside the workspace; use a path relative to the workspace root")
            }
            PathError::Escapes => f.write_str("`..` leads outside the workspace; use a path inside the workspace"),
            PathError::SymlinkOutside => f.write_str(
                "the path goes through a symbolic link that points outside the workspace (or a /proc magic link); \
                 only paths inside the workspace can be used",
            ),
            PathError::NotFound => f.write_str("no such file or directory"),
            PathError::NotADirectory => f.write_str("a component of the path is a file, not a directory"),
            PathError::IsDirectory => f.write_str("the path is a directory, not a file"),
            PathError::NotRegular => f.write_str("the path is not a regular file (a FIFO, socket or device)"),
            PathError::HardLinked => f.write_str(
                "the file has more than one hard link, so writing it could change a file outside the workspace; \
                 refusing to write it",
            ),
            PathError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<Errno> for PathError {
    fn from(e: Errno) -> Self {
        match e {
            Errno::NOENT => PathError::NotFound,
            Errno::XDEV | Errno::LOOP => PathError::SymlinkOutside,
            Errno::NOTDIR => PathError::NotADirectory,
            Errno::ISDIR => PathError::IsDirectory,
            other => PathError::Io(io::Error::from(other)),
        }
    }
}

impl From<io::Error> for PathError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) => Errno::from_raw_os_error(code).into(),
            None => PathError::Io(e),
        }
    }
}

/// A workspace-relative path after lexical normalization: `/`-separated, no `.` or `..`
/// components, no leading `/`. The empty string is the root itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RelPath(String);

impl RelPath {
    /// The root itself.
    pub(crate) fn root() -> Self {
        RelPath(String::new())
    }

    /// The path as a string (`""` for the root).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// What to pass to the kernel: `.` for the root.
    fn kernel(&self) -> &str {
        if self.0.is_empty() { "." } else { &self.0 }
    }

    /// How to show the path to a model: `.` for the root.
    pub(crate) fn display(&self) -> &str {
        self.kernel()
    }

    /// Splits into the parent and the last component; `None` for the root.
    pub(crate) fn split_last(&self) -> Option<(RelPath, &str)> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => (RelPath(self.0[..i].to_owned()), &self.0[i + 1..]),
            None => (RelPath::root(), self.0.as_str()),
        })
    }

    /// The path of `name` inside this directory.
    pub(crate) fn join(&self, name: &str) -> RelPath {
        if self.0.is_empty() { RelPath(name.to_owned()) } else { RelPath(format!("{}/{name}", self.0)) }
    }

    /// The components.
    pub(crate) fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// Wraps an already-normalized string (from a walk or a `/proc` link).
    pub(crate) fn from_normalized(s: impl Into<String>) -> Self {
        RelPath(s.into())
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display())
    }
}

/// Turns a model's path string into a [`RelPath`] beneath `root`, lexically.
///
/// Accepts relative paths and absolute paths inside `root`. Refuses NUL bytes, absolute paths
/// elsewhere and `..` that climbs above the root. Percent-encoded or overlong sequences are not
/// decoded: they are literal file names.
pub(crate) fn normalize(root: &Path, input: &str) -> Result<RelPath, PathError> {
    if input.contains('\0') {
        return Err(PathError::Nul);
    }
    let rest: &str = if input.starts_with('/') {
        let p = Path::new(input);
        match strip_root(root, p) {
            Some(rest) => rest,
            None => return Err(PathError::AbsoluteOutside),
        }
    } else if input == "~" || input.starts_with("~/") {
        return Err(PathError::AbsoluteOutside);
    } else {
        input
    };
    let mut parts: Vec<&str> = Vec::new();
    for comp in rest.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathError::Escapes);
                }
            }
            other => parts.push(other),
        }
    }
    Ok(RelPath(parts.join("/")))
}

/// `p` relative to `root` when `p` lies lexically inside it (components compared, `..` in `p`
/// resolved lexically first).
fn strip_root<'a>(root: &Path, p: &'a Path) -> Option<&'a str> {
    let s = p.to_str()?;
    let r = root.to_str()?;
    let r = r.trim_end_matches('/');
    if s == r {
        return Some("");
    }
    if r.is_empty() {
        return Some(s.trim_start_matches('/'));
    }
    s.strip_prefix(r).and_then(|rest| rest.strip_prefix('/'))
}

/// Set when the kernel turned out not to have `openat2`.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens one component relative to `dir` without following a symlink; a symlink is refused.
fn open_component(dir: &OwnedFd, name: &str, flags: OFlags) -> Result<OwnedFd, PathError> {
    let result = rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty());
    let fd = match result {
        Ok(fd) => fd,
        Err(e) => {
            if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                && FileType::from_raw_mode(st.st_mode) == FileType::Symlink
            {
                return Err(PathError::SymlinkOutside);
            }
            return Err(e.into());
        }
    };
    // `O_PATH | O_NOFOLLOW` opens a symlink itself instead of failing.
    if flags.contains(OFlags::PATH) && FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink {
        return Err(PathError::SymlinkOutside);
    }
    Ok(fd)
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// An open handle on the workspace root; every access goes through it.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

impl Root {
    /// Opens the workspace root (`O_PATH | O_DIRECTORY`).
    pub(crate) fn open(workspace: &Path) -> Result<Root, PathError> {
        let fd = rustix::fs::open(workspace, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Root { fd, path: workspace.to_path_buf() })
    }

    /// The root's absolute path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `rel` beneath the root with `flags` (the kernel refuses every escape).
    pub(crate) fn open_beneath(&self, rel: &RelPath, flags: OFlags) -> Result<OwnedFd, PathError> {
        self.openat2_or_walk(rel, flags, RESOLVE)
    }

    /// Opens `rel` beneath the root following no symlink at all (`RESOLVE_NO_SYMLINKS`).
    pub(crate) fn open_beneath_strict(&self, rel: &RelPath, flags: OFlags) -> Result<OwnedFd, PathError> {
        self.openat2_or_walk(rel, flags, RESOLVE.union(ResolveFlags::NO_SYMLINKS))
    }

    /// `openat2` when the kernel has it (Linux 5.6+); otherwise [`Root::walk_no_symlinks`].
    fn openat2_or_walk(&self, rel: &RelPath, flags: OFlags, resolve: ResolveFlags) -> Result<OwnedFd, PathError> {
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            match rustix::fs::openat2(&self.fd, rel.kernel(), flags | OFlags::CLOEXEC, Mode::empty(), resolve) {
                Err(Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
                // A seccomp filter that does not know openat2 may answer EPERM for it.
                Err(Errno::PERM)
                    if rustix::fs::openat2(&self.fd, ".", OFlags::PATH, Mode::empty(), resolve).is_err() =>
                {
                    NO_OPENAT2.store(true, Ordering::Relaxed)
                }
                other => return Ok(other?),
            }
        }
        self.walk_no_symlinks(rel, flags)
    }

    /// The fallback without `openat2`: walks one component at a time relative to the previous
    /// directory's descriptor with `O_NOFOLLOW`, refusing every symlink (inside the workspace
    /// too), so nothing can lead out. `rel` is already normalized (no `..`).
    pub(crate) fn walk_no_symlinks(&self, rel: &RelPath, flags: OFlags) -> Result<OwnedFd, PathError> {
        let comps: Vec<&str> = rel.components().collect();
        let Some((last, parents)) = comps.split_last() else {
            return Ok(rustix::fs::openat(&self.fd, ".", flags | OFlags::CLOEXEC, Mode::empty())?);
        };
        let mut dir =
            rustix::fs::openat(&self.fd, ".", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        for comp in parents {
            dir = open_component(&dir, comp, OFlags::PATH | OFlags::DIRECTORY)?;
        }
        open_component(&dir, last, flags)
    }

    /// Where an open descriptor really is, relative to the root (through `/proc/self/fd`).
    /// `None` when it cannot be told (no `/proc`) or it is not beneath the root.
    pub(crate) fn real_rel(&self, fd: &impl AsFd) -> Option<RelPath> {
        let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        let target = std::fs::read_link(link).ok()?;
        let rest = strip_root(&self.path, &target)?;
        Some(RelPath(rest.to_owned()))
    }

    /// Where `fd` (opened from `rel`) really is. Without `/proc` to tell, `rel` is accepted only
    /// if it resolves without any symlink, so a link to a denied path cannot pass as `rel`.
    fn real_or_strict(&self, fd: &impl AsFd, rel: &RelPath) -> Result<RelPath, PathError> {
        match self.real_rel(fd) {
            Some(real) => Ok(real),
            None => self.open_beneath_strict(rel, OFlags::PATH).map(|_| rel.clone()),
        }
    }

    /// Opens a regular file for reading. Returns the file, its metadata and where it really is.
    pub(crate) fn open_file(&self, rel: &RelPath) -> Result<OpenFile, PathError> {
        let fd = self.open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)?;
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(PathError::IsDirectory),
            _ => return Err(PathError::NotRegular),
        }
        // Reads should block normally from here on.
        rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
        let real = self.real_or_strict(&fd, rel)?;
        Ok(OpenFile { file: File::from(fd), stat, real })
    }

    /// Opens a directory beneath the root for listing.
    pub(crate) fn open_dir(&self, rel: &RelPath) -> Result<(OwnedFd, RelPath), PathError> {
        let fd = self.open_beneath(rel, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let real = self.real_or_strict(&fd, rel)?;
        Ok((fd, real))
    }

    /// Metadata of whatever `rel` resolves to, beneath the root.
    pub(crate) fn stat(&self, rel: &RelPath) -> Result<(Stat, RelPath), PathError> {
        let fd = self.open_beneath(rel, OFlags::PATH)?;
        let stat = rustix::fs::fstat(&fd)?;
        let real = self.real_or_strict(&fd, rel)?;
        Ok((stat, real))
    }

    /// Prepares a write of the file at `rel`: finds the deepest existing parent directory beneath
    /// the root, holds it open, and looks at what is at the target now. Nothing is changed yet.
    pub(crate) fn prepare_write(&self, rel: &RelPath) -> Result<WriteTarget, PathError> {
        self.prepare_write_inner(rel, 0)
    }

    fn prepare_write_inner(&self, rel: &RelPath, depth: u32) -> Result<WriteTarget, PathError> {
        let Some((parent, name)) = rel.split_last() else {
            return Err(PathError::IsDirectory);
        };
        let name = name.to_owned();
        // Deepest existing ancestor, opened beneath the root.
        let comps: Vec<&str> = parent.components().collect();
        let mut existing = comps.len();
        let base = loop {
            let prefix = RelPath(comps[..existing].join("/"));
            match self.open_beneath(&prefix, OFlags::RDONLY | OFlags::DIRECTORY) {
                Ok(fd) => break fd,
                Err(PathError::NotFound) if existing > 0 => existing -= 1,
                Err(e) => return Err(e),
            }
        };
        let base_real = self.real_or_strict(&base, &RelPath(comps[..existing].join("/")))?;
        let missing: Vec<String> = comps[existing..].iter().map(|s| (*s).to_owned()).collect();
        let mut real = base_real.clone();
        for m in &missing {
            real = real.join(m);
        }
        let real = real.join(&name);
        let mut current = None;
        if missing.is_empty() {
            match rustix::fs::statat(&base, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => {
                        if st.st_nlink > 1 {
                            return Err(PathError::HardLinked);
                        }
                        current = Some(st);
                    }
                    FileType::Directory => return Err(PathError::IsDirectory),
                    FileType::Symlink => {
                        // Write through a link only when it resolves inside the workspace; then
                        // write the real file so the link stays a link.
                        if depth > 0 {
                            return Err(PathError::SymlinkOutside);
                        }
                        let target = match self.open_beneath(rel, OFlags::PATH) {
                            Ok(fd) => fd,
                            Err(PathError::NotFound) | Err(PathError::SymlinkOutside) => {
                                return Err(PathError::SymlinkOutside);
                            }
                            Err(e) => return Err(e),
                        };
                        let Some(real) = self.real_rel(&target) else {
                            return Err(PathError::SymlinkOutside);
                        };
                        return self.prepare_write_inner(&real, depth + 1);
                    }
                    _ => return Err(PathError::NotRegular),
                },
                Err(Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(WriteTarget { base, missing, name, real, current })
    }
}

/// A regular file opened for reading beneath the root.
#[derive(Debug)]
pub(crate) struct OpenFile {
    /// The open file.
    pub(crate) file: File,
    /// Its metadata at open time.
    pub(crate) stat: Stat,
    /// Where it really is (after symlinks inside the workspace), relative to the root.
    pub(crate) real: RelPath,
}

/// A write about to happen: the deepest existing parent directory is held open, so nothing can
/// redirect the write after the checks.
#[derive(Debug)]
pub(crate) struct WriteTarget {
    base: OwnedFd,
    missing: Vec<String>,
    name: String,
    /// Where the file really is (after symlinks inside the workspace), relative to the root.
    pub(crate) real: RelPath,
    /// The file there now, when one exists.
    pub(crate) current: Option<Stat>,
}

impl WriteTarget {
    /// Whether a file exists at the target now.
    pub(crate) fn exists(&self) -> bool {
        self.current.is_some()
    }

    /// Reads the current file's bytes (`None` when there is none).
    pub(crate) fn read_current(&self) -> Result<Option<Vec<u8>>, PathError> {
        if self.current.is_none() {
            return Ok(None);
        }
        let fd = rustix::fs::openat(
            &self.base,
            self.name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(PathError::NotRegular);
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
        let mut buf = Vec::with_capacity(usize::try_from(st.st_size).unwrap_or(0));
        io::Read::read_to_end(&mut File::from(fd), &mut buf)?;
        Ok(Some(buf))
    }

    /// Removes the file at the target (it must exist and have no missing parents).
    pub(crate) fn remove(&self) -> Result<(), PathError> {
        if !self.missing.is_empty() {
            return Err(PathError::NotFound);
        }
        let st = rustix::fs::statat(&self.base, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            return Err(PathError::IsDirectory);
        }
        rustix::fs::unlinkat(&self.base, self.name.as_str(), AtFlags::empty())?;
        let _ = rustix::fs::fsync(&self.base);
        Ok(())
    }

    /// Creates missing parent directories (relative to the held directory, never following a
    /// symlink) and returns a descriptor of the file's directory plus the ones created.
    fn make_parents(&self) -> Result<(OwnedFd, usize), PathError> {
        let mut dir =
            rustix::fs::openat(&self.base, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let mut created = 0;
        for comp in &self.missing {
            match rustix::fs::mkdirat(&dir, comp.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => created += 1,
                Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            dir = rustix::fs::openat(
                &dir,
                comp.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
        }
        Ok((dir, created))
    }

    /// Writes `bytes` atomically: a temporary file in the same directory, `fsync`, `renameat`
    /// over the target, `fsync` of the directory. Keeps the old file's permission bits. On any
    /// failure the old file is untouched and the temporary file removed.
    pub(crate) fn commit(&self, bytes: &[u8]) -> Result<(), PathError> {
        let (dir, _) = self.make_parents()?;
        // Keep the old permission bits, but never set-user-ID, set-group-ID or sticky.
        let mode = self.current.as_ref().map(|st| st.st_mode & 0o777).unwrap_or(0o644);
        let tmp = format!(".{}.toolgate-{}.tmp", truncate_name(&self.name), uuid::Uuid::new_v4().simple());
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        let result = (|| -> Result<(), PathError> {
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            // The umask may have narrowed the mode; set it exactly.
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            file.sync_all()?;
            drop(file);
            // If the target became a directory or a symlink after the check, refuse.
            match rustix::fs::statat(&dir, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => {
                        if st.st_nlink > 1 {
                            return Err(PathError::HardLinked);
                        }
                    }
                    FileType::Directory => return Err(PathError::IsDirectory),
                    FileType::Symlink => return Err(PathError::SymlinkOutside),
                    _ => return Err(PathError::NotRegular),
                },
                Err(Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, self.name.as_str())?;
            Ok(())
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
            return result;
        }
        let _ = rustix::fs::fsync(&dir);
        Ok(())
    }
}

/// Keeps temporary names short enough for `NAME_MAX`.
fn truncate_name(name: &str) -> &str {
    let mut end = name.len().min(180);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// A path inside the root as an absolute path (for the walkers, which need real paths).
pub(crate) fn absolute(root: &Path, rel: &RelPath) -> PathBuf {
    if rel.as_str().is_empty() { root.to_path_buf() } else { root.join(rel.as_str()) }
}

/// `p` (from a walk under `root`) as a [`RelPath`], or `None` if it is not lexically beneath.
pub(crate) fn rel_of(root: &Path, p: &Path) -> Option<RelPath> {
    let rest = p.strip_prefix(root).ok()?;
    let s = rest.as_os_str();
    let s: &str = std::str::from_utf8(OsStr::as_bytes(s)).ok()?;
    if s.split('/').any(|c| c == "..") {
        return None;
    }
    Some(RelPath(s.trim_matches('/').to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_walk_refuses_every_symlink() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("a/b/f.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/etc", ws.join("etc")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("a", ws.join("inside")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/etc/passwd", ws.join("a/pw")).unwrap_or_else(|e| panic!("{e}"));
        let root = Root::open(&ws).unwrap_or_else(|e| panic!("{e}"));
        let rel = |s: &str| RelPath(s.to_owned());
        assert!(root.walk_no_symlinks(&rel("a/b/f.txt"), OFlags::RDONLY).is_ok());
        assert!(root.walk_no_symlinks(&rel(""), OFlags::PATH).is_ok());
        for p in ["etc/passwd", "etc", "inside/b/f.txt", "a/pw"] {
            for flags in [OFlags::RDONLY, OFlags::PATH] {
                let r = root.walk_no_symlinks(&rel(p), flags);
                assert!(matches!(r, Err(PathError::SymlinkOutside)), "{p}: {r:?}");
            }
        }
        assert!(matches!(root.walk_no_symlinks(&rel("a/missing"), OFlags::RDONLY), Err(PathError::NotFound)));
    }

    #[test]
    fn normalizes_lexically() {
        let root = Path::new("/ws");
        assert_eq!(normalize(root, "a/./b//c").map(|p| p.0).ok(), Some("a/b/c".to_owned()));
        assert_eq!(normalize(root, "a/../b").map(|p| p.0).ok(), Some("b".to_owned()));
        assert_eq!(normalize(root, "/ws/x").map(|p| p.0).ok(), Some("x".to_owned()));
        assert_eq!(normalize(root, "/ws").map(|p| p.0).ok(), Some(String::new()));
        assert!(matches!(normalize(root, "../x"), Err(PathError::Escapes)));
        assert!(matches!(normalize(root, "a/../../x"), Err(PathError::Escapes)));
        assert!(matches!(normalize(root, "/wsx/y"), Err(PathError::AbsoluteOutside)));
        assert!(matches!(normalize(root, "/etc/passwd"), Err(PathError::AbsoluteOutside)));
        assert!(matches!(normalize(root, "a\0b"), Err(PathError::Nul)));
        assert_eq!(normalize(root, "%2e%2e/x").map(|p| p.0).ok(), Some("%2e%2e/x".to_owned()));
    }
}
