//! State shared by the fs tools: what each session has read (for write safety) and the locks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};
use toolgate_core::{CallContext, ToolError};

use super::config::{FsConfig, WriteSafety};
use super::confine::{PathError, RelPath, Root};
use super::locks::Locks;
use super::rules::PathRules;

/// Most read-before-write records kept for all sessions together (see [`FsState::record`]).
const MAX_READ_RECORDS: usize = 100_000;
/// What a file looked like when a session read it (or last wrote it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    size: u64,
    mtime: (i64, u64),
    /// `None` for a large file read one page at a time (`read` does not hash a file it does
    /// not read whole): then size and modification time alone say it is unchanged.
    hash: Option<[u8; 32]>,
}

impl FileStamp {
    /// The stamp of `bytes` with metadata `stat`.
    pub(crate) fn of(stat: &rustix::fs::Stat, bytes: &[u8]) -> FileStamp {
        FileStamp::with_hash(stat, Sha256::digest(bytes).into())
    }

    /// The stamp of a file with metadata `stat` whose content hashed (SHA-256) to `hash`.
    pub(crate) fn with_hash(stat: &rustix::fs::Stat, hash: [u8; 32]) -> FileStamp {
        FileStamp { hash: Some(hash), ..FileStamp::of_metadata(stat) }
    }

    /// The stamp of a file by its size and modification time only (a large file read in pages).
    pub(crate) fn of_metadata(stat: &rustix::fs::Stat) -> FileStamp {
        FileStamp {
            size: u64::try_from(stat.st_size).unwrap_or(0),
            #[allow(clippy::unnecessary_cast)]
            mtime: (stat.st_mtime as i64, stat.st_mtime_nsec as u64),
            hash: None,
        }
    }

    /// Whether the file seen as `self` is still `now`: same size and modification time, and the
    /// same content when both were hashed.
    fn still(&self, now: &FileStamp) -> bool {
        self.size == now.size
            && self.mtime == now.mtime
            && match (self.hash, now.hash) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

type ReadKey = (PathBuf, String, String);

/// State shared by all fs tools of one [`super::tools`] call.
#[derive(Debug)]
pub struct FsState {
    pub(crate) config: FsConfig,
    pub(crate) rules: PathRules,
    reads: Mutex<HashMap<ReadKey, FileStamp>>,
    locks: Locks,
    /// One mutex per workspace, held by a writing call from its checks to its commit, so two
    /// calls in this process cannot both pass the staleness check and then overwrite each other.
    /// With a state database the call also holds an advisory `flock` on the workspace's
    /// `.toolgate/fs-write.lock` (opened once, kept here), so two processes cannot either.
    writers: Mutex<HashMap<PathBuf, Arc<Mutex<Option<std::fs::File>>>>>,
    /// Told about every file a tool wrote or deleted (the memory index follows `memory/**`).
    observer: std::sync::OnceLock<Arc<dyn WriteObserver>>,
    /// Serves some paths from elsewhere than the disk (managed memory).
    redirect: std::sync::OnceLock<Arc<dyn FileRedirect>>,
    /// Line counts of large files, taken in the background for `read`'s next call.
    pub(crate) lines: super::lines::LineCounts,
}

/// Told about every file the fs tools wrote, created or deleted, after the change is on disk.
pub trait WriteObserver: Send + Sync + std::fmt::Debug {
    /// `rel` (workspace-relative, real path) changed.
    fn written(&self, ctx: &CallContext, rel: &str);

    /// Paths this observer serves itself instead of the disk (managed memory), if any.
    fn redirect(&self) -> Option<Arc<dyn FileRedirect>> {
        None
    }
}

/// Serves some workspace paths from somewhere other than the disk: in managed memory mode,
/// `MEMORY.md`, `memory/**` and the context files (`SOUL.md`, `USER.md`, ...) live in the store
/// per user and agent. `read`, `write`, `edit` and `multi_edit` go through it for the paths it
/// claims; `apply_patch` refuses them.
pub trait FileRedirect: Send + Sync + std::fmt::Debug {
    /// Whether `rel` (workspace-relative, lexically normalized) is served by this redirect.
    fn claims(&self, ctx: &CallContext, rel: &str) -> bool;
    /// The content of a claimed path, as this call's user and agent see it.
    fn read(&self, ctx: &CallContext, rel: &str) -> Result<String, ToolError>;
    /// Replaces a claimed path's content; returns a sentence saying what was done.
    fn write(&self, ctx: &CallContext, rel: &str, content: &str) -> Result<String, ToolError>;
}

/// How a write-safety check came out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Read in this session and unchanged since.
    Fresh,
    /// Never read in this session.
    NotRead,
    /// Changed on disk since it was read.
    Changed,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FsState {
    pub(crate) fn new(config: FsConfig, rules: PathRules) -> FsState {
        FsState {
            config,
            rules,
            reads: Mutex::default(),
            locks: Locks::default(),
            writers: Mutex::default(),
            observer: std::sync::OnceLock::new(),
            redirect: std::sync::OnceLock::new(),
            lines: super::lines::LineCounts::default(),
        }
    }

    /// The redirect serving `rel` for this call, if one claims it.
    pub(crate) fn redirected(&self, ctx: &CallContext, rel: &RelPath) -> Option<&dyn FileRedirect> {
        self.redirect.get().map(|r| r.as_ref()).filter(|r| r.claims(ctx, rel.as_str()))
    }

    /// Sets the observer told about every write (once; later calls are ignored).
    pub fn set_observer(&self, observer: Arc<dyn WriteObserver>) {
        if let Some(r) = observer.redirect() {
            let _ = self.redirect.set(r);
        }
        let _ = self.observer.set(observer);
    }

    /// Tells the observer that `rel` changed.
    pub(crate) fn notify(&self, ctx: &CallContext, rel: &str) {
        if let Some(o) = self.observer.get() {
            o.written(ctx, rel);
        }
    }

    /// Keeps the path locks in the state database's `store`, shared with every process on the
    /// workspace, and makes the write mutex hold across processes too (an advisory `flock` on
    /// `.toolgate/fs-write.lock`). Once, before the first call; later calls are ignored.
    pub fn share_across_processes(&self, store: Arc<dyn toolgate_store::LockStore>) {
        self.locks.set_store(store);
    }

    /// Runs `f` while holding the write mutex of this call's workspace (and, when shared across
    /// processes, its write lock file).
    pub(crate) fn exclusive<T>(
        &self,
        ctx: &CallContext,
        f: impl FnOnce() -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        let m = lock(&self.writers).entry(ctx.workspace.to_path_buf()).or_default().clone();
        let mut file = lock(&m);
        let _held = if self.locks.shared() { Some(super::write_lock::hold(&ctx.workspace, &mut file)?) } else { None };
        f()
    }

    fn key(ctx: &CallContext, rel: &RelPath) -> ReadKey {
        (ctx.workspace.to_path_buf(), ctx.identity.session.clone(), rel.as_str().to_owned())
    }

    /// Records that this session saw `rel` as `stamp` (after a read or its own write).
    ///
    /// Every MCP session over HTTP is a session, so a long-running server sees many: past
    /// [`MAX_READ_RECORDS`] the other sessions' records are dropped. Forgetting is safe: a later
    /// write of a forgotten file asks for a fresh `read`, it never lets a write through.
    pub(crate) fn record(&self, ctx: &CallContext, rel: &RelPath, stamp: FileStamp) {
        let mut reads = lock(&self.reads);
        if reads.len() >= MAX_READ_RECORDS {
            reads.retain(|(_, session, _), _| *session == ctx.identity.session);
        }
        reads.insert(Self::key(ctx, rel), stamp);
    }

    /// Forgets `rel` (after a delete).
    pub(crate) fn forget(&self, ctx: &CallContext, rel: &RelPath) {
        lock(&self.reads).remove(&Self::key(ctx, rel));
    }

    /// Compares what is on disk now with what this session saw.
    pub(crate) fn freshness(&self, ctx: &CallContext, rel: &RelPath, now: &FileStamp) -> Freshness {
        match lock(&self.reads).get(&Self::key(ctx, rel)) {
            None => Freshness::NotRead,
            Some(seen) if seen.still(now) => Freshness::Fresh,
            Some(_) => Freshness::Changed,
        }
    }

    /// Applies the write-safety mode to an existing file. `Ok(Some(warning))` in `warn` mode.
    pub(crate) fn check_write_safety(
        &self,
        ctx: &CallContext,
        tool: &str,
        rel: &RelPath,
        now: &FileStamp,
    ) -> Result<Option<String>, ToolError> {
        if self.config.write_safety == WriteSafety::Off {
            return Ok(None);
        }
        let problem = match self.freshness(ctx, rel, now) {
            Freshness::Fresh => return Ok(None),
            Freshness::NotRead => format!(
                "`{rel}` exists and has not been read in this session; call `read` on it first, then retry `{tool}`"
            ),
            Freshness::Changed => format!(
                "`{rel}` changed on disk since it was last read (size, modification time or content differ); \
                 call `read` on it again to see the current content, then retry `{tool}`"
            ),
        };
        match self.config.write_safety {
            WriteSafety::Strict => Err(ToolError::failed(problem)),
            _ => Ok(Some(format!("warning: {problem}"))),
        }
    }

    /// Refuses when another agent holds a lock covering `rel`.
    pub(crate) fn check_lock(&self, ctx: &CallContext, rel: &RelPath) -> Result<(), ToolError> {
        let held = self.locks.held_by_other(&ctx.workspace, &ctx.identity, rel.as_str()).map_err(|e| {
            ToolError::failed(format!(
                "cannot check the path locks on `{rel}` in the state database ({e}); nothing was written, retry the call"
            ))
        })?;
        match held {
            None => Ok(()),
            Some(l) => Err(ToolError::failed(format!(
                "`{rel}` is {}; wait until then, or work on other files (locks are advisory locks between agents \
                 sharing this workspace)",
                l.describe()
            ))),
        }
    }

    /// The path locks.
    pub(crate) fn locks(&self) -> &Locks {
        &self.locks
    }

    /// Opens the workspace root of this call.
    pub(crate) fn root(&self, ctx: &CallContext) -> Result<Root, ToolError> {
        Root::open(&ctx.workspace)
            .map_err(|e| ToolError::failed(format!("cannot open the workspace `{}`: {e}", ctx.workspace.display())))
    }

    /// Normalizes `input` beneath the workspace and refuses denied paths (for reading).
    pub(crate) fn resolve(&self, tool: &str, root: &Path, input: &str) -> Result<RelPath, ToolError> {
        let rel = super::confine::normalize(root, input).map_err(|e| path_error(tool, input, e))?;
        if self.rules.denied(rel.as_str()) {
            return Err(denied(tool, &rel));
        }
        Ok(rel)
    }
}

/// The error for a denied path.
pub(crate) fn denied(tool: &str, rel: &RelPath) -> ToolError {
    ToolError::Denied {
        tool: tool.to_owned(),
        reason: format!("the path `{rel}` is denied by policy (toolgate's state, or a path the configuration denies)"),
    }
}

/// The error for a path that cannot be written by policy.
pub(crate) fn denied_write(tool: &str, rel: &RelPath) -> ToolError {
    ToolError::Denied {
        tool: tool.to_owned(),
        reason: format!(
            "writing `{rel}` is denied by policy (`.toolgate/`, `.git/hooks/`, `.git/config`, `toolgate.toml` and \
             configured paths cannot be written by tools)"
        ),
    }
}

/// The parameter that holds the paths of `tool`.
pub(crate) fn path_pointer(tool: &str) -> &'static str {
    if tool == "apply_patch" { "/patch" } else { "/path" }
}

/// Turns a confinement error into a message for the model.
pub(crate) fn path_error(tool: &str, shown: &str, e: PathError) -> ToolError {
    match e {
        PathError::NotFound => ToolError::NotFound {
            what: format!("file or directory `{shown}`"),
            hint: Some("check the path with `ls` or `glob`; paths are relative to the workspace root".to_owned()),
        },
        PathError::Nul | PathError::AbsoluteOutside | PathError::Escapes => {
            ToolError::invalid(tool, path_pointer(tool), format!("`{}`: {e}", shown.replace('\0', "\\0")))
        }
        PathError::SymlinkOutside => ToolError::Denied { tool: tool.to_owned(), reason: format!("`{shown}`: {e}") },
        other => ToolError::failed(format!("`{shown}`: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_other_sessions_reads_are_forgotten_never_granted() {
        let config = FsConfig::default();
        let state = FsState::new(config.clone(), PathRules::new(&config).unwrap_or_else(|_| panic!("default rules")));
        let stamp = FileStamp { size: 1, mtime: (0, 0), hash: Some([0; 32]) };
        let mut a = CallContext::new(std::env::temp_dir());
        a.identity.session = "a".into();
        let mut b = a.clone();
        b.identity.session = "b".into();
        for i in 0..MAX_READ_RECORDS {
            state.record(&a, &RelPath::from_normalized(format!("f{i}")), stamp.clone());
        }
        let first = RelPath::from_normalized("f0");
        assert!(matches!(state.freshness(&a, &first, &stamp), Freshness::Fresh));
        assert!(matches!(state.freshness(&b, &first, &stamp), Freshness::NotRead), "b never read it");
        state.record(&b, &RelPath::from_normalized("g"), stamp.clone());
        assert!(matches!(state.freshness(&a, &first, &stamp), Freshness::NotRead), "a must read again");
        assert!(matches!(state.freshness(&b, &RelPath::from_normalized("g"), &stamp), Freshness::Fresh));
    }
}
