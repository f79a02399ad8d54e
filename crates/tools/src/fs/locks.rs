//! Advisory path locks for several agents working on one workspace (`lock_paths`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use globset::{Glob, GlobBuilder, GlobMatcher};
use toolgate_core::Identity;

/// One lock held by one agent.
#[derive(Debug, Clone)]
pub(crate) struct Lock {
    /// What the holder passes to `unlock_paths`.
    pub(crate) token: String,
    /// Who holds it.
    pub(crate) owner: Identity,
    /// The workspace it applies to.
    pub(crate) workspace: PathBuf,
    /// The globs, as given.
    pub(crate) globs: Vec<String>,
    matchers: Vec<GlobMatcher>,
    /// When it lapses.
    pub(crate) expires: Instant,
    /// When it lapses, on the wall clock (for messages).
    pub(crate) expires_wall: SystemTime,
}

impl Lock {
    fn covers(&self, rel: &str) -> bool {
        self.matchers.iter().any(|m| m.is_match(rel))
            || self.globs.iter().any(|g| rel.starts_with(&format!("{}/", g.trim_end_matches('/'))))
    }

    /// Who holds it and until when, for messages.
    pub(crate) fn describe(&self) -> String {
        let until = chrono::DateTime::<chrono::Utc>::from(self.expires_wall).format("%Y-%m-%dT%H:%M:%SZ");
        format!(
            "locked by agent `{}` (user `{}`, session `{}`) with `{}` until {until}",
            self.owner.agent,
            self.owner.user,
            self.owner.session,
            self.globs.join("`, `")
        )
    }
}

/// Compiles a lock glob (`/` is literal; a trailing `/` means the whole folder).
pub(crate) fn compile(glob: &str) -> Result<GlobMatcher, globset::Error> {
    let g = glob.trim_start_matches("./").trim_end_matches('/');
    let built: Glob = GlobBuilder::new(g).literal_separator(true).build()?;
    Ok(built.compile_matcher())
}

/// Why a lock could not be taken.
#[derive(Debug)]
pub(crate) enum LockError {
    /// A glob does not parse.
    BadGlob(String),
    /// Another agent holds a conflicting lock.
    Conflict(String, Box<Lock>),
}

/// All locks, across workspaces.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    locks: Vec<Lock>,
}

impl LockTable {
    fn prune(&mut self) {
        let now = Instant::now();
        self.locks.retain(|l| l.expires > now);
    }

    /// The lock of another agent that covers `rel` in `workspace`, if any.
    pub(crate) fn held_by_other(&mut self, workspace: &Path, owner: &Identity, rel: &str) -> Option<Lock> {
        self.prune();
        self.locks.iter().find(|l| l.workspace == workspace && &l.owner != owner && l.covers(rel)).cloned()
    }

    /// Takes a lock, unless another agent holds one that conflicts (same glob, or either glob
    /// matching the other taken as a path).
    pub(crate) fn acquire(
        &mut self,
        workspace: &Path,
        owner: &Identity,
        globs: Vec<String>,
        ttl: Duration,
    ) -> Result<Lock, LockError> {
        self.prune();
        let mut matchers = Vec::new();
        for g in &globs {
            match compile(g) {
                Ok(m) => matchers.push(m),
                Err(e) => return Err(LockError::BadGlob(format!("`{g}` is not a valid glob: {e}"))),
            }
        }
        for other in self.locks.iter().filter(|l| l.workspace == workspace && &l.owner != owner) {
            for (g, m) in globs.iter().zip(&matchers) {
                let g_norm = g.trim_start_matches("./").trim_end_matches('/');
                let conflict = other.globs.iter().any(|og| og.trim_start_matches("./").trim_end_matches('/') == g_norm)
                    || other.covers(g_norm)
                    || other.globs.iter().any(|og| m.is_match(og.trim_start_matches("./").trim_end_matches('/')));
                if conflict {
                    return Err(LockError::Conflict(
                        format!("`{g}` conflicts with a lock held by another agent"),
                        Box::new(other.clone()),
                    ));
                }
            }
        }
        let lock = Lock {
            token: toolgate_guard::ids::mint("lock"),
            owner: owner.clone(),
            workspace: workspace.to_path_buf(),
            globs,
            matchers,
            expires: Instant::now() + ttl,
            expires_wall: SystemTime::now() + ttl,
        };
        self.locks.push(lock.clone());
        Ok(lock)
    }

    /// Releases the locks with these tokens held by `owner`. Returns (released, not found or
    /// not owned).
    pub(crate) fn release(&mut self, owner: &Identity, tokens: &[String]) -> (Vec<String>, Vec<String>) {
        self.prune();
        let mut released = Vec::new();
        let mut missing = Vec::new();
        for t in tokens {
            let before = self.locks.len();
            self.locks.retain(|l| !(&l.token == t && &l.owner == owner));
            if self.locks.len() < before {
                released.push(t.clone());
            } else {
                missing.push(t.clone());
            }
        }
        (released, missing)
    }
}
