//! Advisory path locks for several agents working on one workspace (`lock_paths`).
//!
//! With a state database ([`Locks::set_store`]) the locks are rows of its [`LockStore`], so
//! every process serving the workspace (two `toolgate serve`, later several nodes) honours the
//! others'; without one they live in this process ([`LockTable`]). Which locks clash is decided
//! here either way ([`Lock::clash`]); the store only makes the check and the insert one atomic
//! step. Expiry is wall-clock Unix milliseconds, which processes share.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use globset::{Glob, GlobBuilder, GlobMatcher};
use toolgate_core::Identity;
use toolgate_store::{LockOwner, LockStore, PathLock, StoreError};

/// One lock held by one agent.
#[derive(Debug, Clone)]
pub(crate) struct Lock {
    /// What the holder passes to `unlock_paths`.
    pub(crate) token: String,
    /// Who holds it.
    pub(crate) owner: Identity,
    /// The workspace it applies to.
    workspace: String,
    /// The globs, as given (normalized).
    pub(crate) globs: Vec<String>,
    /// The globs compiled; a stored glob that does not compile (written by another version)
    /// still covers its folder by prefix.
    matchers: Vec<GlobMatcher>,
    /// When it lapses, Unix milliseconds.
    expires_ms: i64,
}

fn norm(glob: &str) -> &str {
    glob.trim_start_matches("./").trim_end_matches('/')
}

impl Lock {
    fn from_row(row: PathLock) -> Lock {
        let matchers = row.globs.iter().filter_map(|g| compile(g).ok()).collect();
        Lock {
            token: row.token,
            owner: Identity { user: row.owner.user, agent: row.owner.agent, session: row.owner.session },
            workspace: row.workspace,
            globs: row.globs,
            matchers,
            expires_ms: row.expires_ms,
        }
    }

    fn to_row(&self, now_ms: i64) -> PathLock {
        PathLock {
            token: self.token.clone(),
            workspace: self.workspace.clone(),
            owner: owner_of(&self.owner),
            globs: self.globs.clone(),
            created_ms: now_ms,
            expires_ms: self.expires_ms,
        }
    }

    fn covers(&self, rel: &str) -> bool {
        self.matchers.iter().any(|m| m.is_match(rel))
            || self.globs.iter().any(|g| rel.starts_with(&format!("{}/", norm(g))))
    }

    /// The first of this lock's globs that clashes with `other` (the same glob, or either glob
    /// matching the other taken as a path), if any.
    fn clash(&self, other: &Lock) -> Option<&str> {
        self.globs.iter().zip(&self.matchers).map(|(g, m)| (g.as_str(), m)).find_map(|(g, m)| {
            let g_norm = norm(g);
            let clashes = other.globs.iter().any(|og| norm(og) == g_norm)
                || other.covers(g_norm)
                || other.globs.iter().any(|og| m.is_match(norm(og)));
            clashes.then_some(g)
        })
    }

    /// Who holds it and until when, for messages.
    pub(crate) fn describe(&self) -> String {
        let until = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(self.expires_ms)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_else(|| format!("{} ms after the Unix epoch", self.expires_ms));
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
    let built: Glob = GlobBuilder::new(norm(glob)).literal_separator(true).build()?;
    Ok(built.compile_matcher())
}

/// Why a lock could not be taken, checked or released.
#[derive(Debug)]
pub(crate) enum LockError {
    /// A glob does not parse.
    BadGlob(String),
    /// Another agent holds a conflicting lock.
    Conflict(String, Box<Lock>),
    /// The state database failed.
    Store(StoreError),
}

/// Now, in Unix milliseconds.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn owner_of(identity: &Identity) -> LockOwner {
    LockOwner { user: identity.user.clone(), agent: identity.agent.clone(), session: identity.session.clone() }
}

fn workspace_key(workspace: &Path) -> String {
    workspace.to_string_lossy().into_owned()
}

/// Locks held in this process, across workspaces (no state database).
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    locks: Vec<Lock>,
}

impl LockTable {
    fn prune(&mut self, now_ms: i64) {
        self.locks.retain(|l| l.expires_ms > now_ms);
    }
}

/// The lock table of the fs tools: in the state database when there is one, else in memory.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    memory: Mutex<LockTable>,
    store: OnceLock<Arc<dyn LockStore>>,
}

impl Locks {
    fn memory(&self) -> MutexGuard<'_, LockTable> {
        self.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps the locks in `store` from now on (once, before the first call; later calls are
    /// ignored).
    pub(crate) fn set_store(&self, store: Arc<dyn LockStore>) {
        let _ = self.store.set(store);
    }

    /// Whether the locks are in a state database (shared with other processes).
    pub(crate) fn shared(&self) -> bool {
        self.store.get().is_some()
    }

    /// The lock of another agent that covers `rel` in `workspace`, if any.
    pub(crate) fn held_by_other(
        &self,
        workspace: &Path,
        owner: &Identity,
        rel: &str,
    ) -> Result<Option<Lock>, StoreError> {
        let now = now_ms();
        let key = workspace_key(workspace);
        let covering = |l: &Lock| l.workspace == key && &l.owner != owner && l.covers(rel);
        match self.store.get() {
            Some(store) => Ok(store.locks_live(&key, now)?.into_iter().map(Lock::from_row).find(covering)),
            None => {
                let mut table = self.memory();
                table.prune(now);
                Ok(table.locks.iter().find(|l| covering(l)).cloned())
            }
        }
    }

    /// Takes a lock, unless another agent holds one that conflicts (same glob, or either glob
    /// matching the other taken as a path).
    pub(crate) fn acquire(
        &self,
        workspace: &Path,
        owner: &Identity,
        globs: Vec<String>,
        ttl: Duration,
    ) -> Result<Lock, LockError> {
        let mut matchers = Vec::new();
        for g in &globs {
            match compile(g) {
                Ok(m) => matchers.push(m),
                Err(e) => return Err(LockError::BadGlob(format!("`{g}` is not a valid glob: {e}"))),
            }
        }
        let now = now_ms();
        let lock = Lock {
            token: toolgate_guard::ids::mint("lock"),
            owner: owner.clone(),
            workspace: workspace_key(workspace),
            globs,
            matchers,
            expires_ms: now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
        };
        let conflict = |other: Lock| {
            let glob = lock.clash(&other).unwrap_or_default().to_owned();
            LockError::Conflict(format!("`{glob}` conflicts with a lock held by another agent"), Box::new(other))
        };
        match self.store.get() {
            Some(store) => {
                let clashes = |row: &PathLock| lock.clash(&Lock::from_row(row.clone())).is_some();
                match store.lock_take(&lock.to_row(now), now, &clashes).map_err(LockError::Store)? {
                    None => Ok(lock),
                    Some(other) => Err(conflict(Lock::from_row(other))),
                }
            }
            None => {
                let mut table = self.memory();
                table.prune(now);
                let other = table
                    .locks
                    .iter()
                    .find(|l| l.workspace == lock.workspace && l.owner != lock.owner && lock.clash(l).is_some())
                    .cloned();
                if let Some(other) = other {
                    return Err(conflict(other));
                }
                table.locks.push(lock.clone());
                Ok(lock)
            }
        }
    }

    /// Releases the locks with these tokens held by `owner`. Returns (released, not found or
    /// not owned).
    pub(crate) fn release(
        &self,
        owner: &Identity,
        tokens: &[String],
    ) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let now = now_ms();
        let mut released = Vec::new();
        let mut missing = Vec::new();
        let store = self.store.get();
        let mut table = self.memory();
        table.prune(now);
        for t in tokens {
            let found = match store {
                Some(store) => store.lock_release(t, &owner_of(owner), now)?,
                None => {
                    let before = table.locks.len();
                    table.locks.retain(|l| !(&l.token == t && &l.owner == owner));
                    table.locks.len() < before
                }
            };
            if found { released.push(t.clone()) } else { missing.push(t.clone()) }
        }
        Ok((released, missing))
    }
}
