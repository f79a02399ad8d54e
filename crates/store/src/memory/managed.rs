//! Managed mode: many users. Notes live in the state database per (user, agent), with the
//! agent's global notes (user `""`) as the fallback, and the context files (`SOUL.md`,
//! `USER.md`, ...) are kept beside them per user and per agent. Nothing is read from or written
//! to the workspace.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::backend::{DocState, DocUpdate};
use super::index::{MemoryIndex, is_corrupt, sha256_hex};
use super::local::{fill_vectors, index_note, index_note_unless_changed};
use super::{
    Embedder, Entry, MemoryError, MemoryStore, Scope, SearchOptions, SearchResults, WriteMode, Written, paths, search,
};

/// A context file's stored row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Its text.
    Text(String),
    /// Deleted on purpose (`BOOTSTRAP.md` written empty): no fallback to a template.
    Deleted,
}

/// Most times a write reads the note again because another writer changed it meanwhile.
const MAX_WRITE_ATTEMPTS: usize = 32;

/// Waits a random while before a write's next attempt, longer after each lost race (up to
/// 64 ms): without it two writers that keep meeting can keep meeting, and the same one loses
/// each time.
fn back_off(attempt: usize) {
    let mut byte = [0u8; 2];
    let _ = getrandom::fill(&mut byte);
    let cap_ms = 1u64 << attempt.min(6);
    let wait_us = u64::from(u16::from_le_bytes(byte)) % (cap_ms * 1000);
    std::thread::sleep(std::time::Duration::from_micros(wait_us));
}

/// Notes and context files of many users and agents, in the state database.
#[derive(Debug)]
pub struct ManagedMemory {
    index: MemoryIndex,
    embedder: Option<Arc<dyn Embedder>>,
    max_note_bytes: u64,
    /// Held by a write from reading the old note to storing the new one (no lost update).
    write_lock: Mutex<()>,
    /// Whether the index was checked for damage since it was opened.
    checked: std::sync::atomic::AtomicBool,
}

/// The index scope of a (agent, user) pair's notes. The agent's length comes first, so no
/// choice of names makes two pairs share a scope.
fn note_scope(agent: &str, user: &str) -> String {
    format!("note:{}:{agent}:{user}", agent.len())
}

/// The scope of a (agent, user) pair's context files (never searched).
fn context_scope(agent: &str, user: &str) -> String {
    format!("ctx:{}:{agent}:{user}", agent.len())
}

impl ManagedMemory {
    /// Notes in `index`, embedded with `embedder` (none: full-text search only).
    pub fn new(index: MemoryIndex, embedder: Option<Arc<dyn Embedder>>) -> ManagedMemory {
        ManagedMemory {
            index,
            embedder,
            max_note_bytes: 1 << 20,
            write_lock: Mutex::new(()),
            checked: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Largest note or context file, in bytes (default 1 MiB).
    pub fn max_note_bytes(mut self, n: u64) -> Self {
        self.max_note_bytes = n;
        self
    }

    /// The index.
    pub fn index(&self) -> &MemoryIndex {
        &self.index
    }

    /// The context file `name` stored for exactly (`agent`, `user`) (`user` `""`: the agent's
    /// template), with no fallback.
    pub fn context_file(&self, agent: &str, user: &str, name: &str) -> Result<Option<Stored>, MemoryError> {
        let row = self.index.doc_content(&context_scope(agent, user), name)?;
        Ok(row.map(|c| c.map_or(Stored::Deleted, Stored::Text)))
    }

    /// Stores the context file `name` for (`agent`, `user`); `None` marks it deleted. Returns
    /// whether it was new.
    pub fn set_context_file(
        &self,
        agent: &str,
        user: &str,
        name: &str,
        content: Option<&str>,
    ) -> Result<bool, MemoryError> {
        let len = content.map_or(0, str::len) as u64;
        if len > self.max_note_bytes {
            return Err(MemoryError::TooLarge { path: name.to_owned(), bytes: len, max: self.max_note_bytes });
        }
        let scope = context_scope(agent, user);
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let created = self.index.doc_content(&scope, name)?.is_none();
        let hash = content.map_or_else(|| "deleted".to_owned(), |c| sha256_hex(c.as_bytes()));
        let state = DocState { hash, mtime_ns: 0, size: len as i64 };
        let update = DocUpdate { path: name, state, content, chunks: &[], vectors: None, unless_changed_from: None };
        self.index.replace(&scope, &update, &Default::default(), None)?;
        Ok(created)
    }

    /// Runs `f`; if the index turns out to be damaged, rebuilds it, indexes the notes of
    /// `scopes` again from their stored content, and runs `f` again.
    fn with_repair<T>(
        &self,
        scopes: (&str, &str),
        mut f: impl FnMut() -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        match f() {
            Err(MemoryError::Store(e)) if is_corrupt(&e) => {
                tracing::warn!("memory index damaged ({e}); rebuilding it");
                self.index.rebuild()?;
                self.reindex_stale(scopes)?;
                f()
            }
            other => other,
        }
    }

    /// Indexes again the notes a rebuild left without chunks (their content is in the row).
    fn reindex_stale(&self, scopes: (&str, &str)) -> Result<(), MemoryError> {
        for scope in distinct(scopes) {
            for (path, content) in self.index.stale_docs(scope)? {
                let state = DocState { hash: sha256_hex(content.as_bytes()), mtime_ns: 0, size: content.len() as i64 };
                index_note(&self.index, self.embedder.as_deref(), scope, &path, &content, state, Some(&content), None)?;
            }
        }
        Ok(())
    }

    /// The user's note, else the agent's global one.
    fn read_note(&self, scope: &Scope, rel: &str) -> Result<Option<String>, MemoryError> {
        for s in scopes(scope) {
            if let Some(Some(text)) = self.index.doc_content(&s, rel)? {
                return Ok(Some(text));
            }
        }
        Ok(None)
    }
}

/// The user's scope, then the agent's global one (the same when the user is `""`).
fn scopes(scope: &Scope) -> [String; 2] {
    [note_scope(&scope.agent, &scope.user), note_scope(&scope.agent, "")]
}

impl MemoryStore for ManagedMemory {
    fn read(&self, scope: &Scope, path: &str) -> Result<String, MemoryError> {
        let rel = paths::normalize(path, false)?;
        self.read_note(scope, &rel)?.ok_or(MemoryError::NotFound { path: rel })
    }

    fn write(&self, scope: &Scope, path: &str, content: &str, mode: WriteMode) -> Result<Written, MemoryError> {
        let rel = paths::normalize_note(path)?;
        let own = note_scope(&scope.agent, &scope.user);
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        // Another process or node may write the note between the read and the write: the write
        // happens only if the note is still what was read, else it is read again.
        for attempt in 0..MAX_WRITE_ATTEMPTS {
            if attempt > 0 {
                back_off(attempt);
            }
            // Appending starts from the user's own note: the agent's global note is a shared
            // default the user's note shadows, not something a user's write changes.
            let old = self.index.doc_content(&own, &rel)?.flatten();
            let created = old.is_none();
            let new = mode.apply(old.as_deref(), content);
            if new.len() as u64 > self.max_note_bytes {
                return Err(MemoryError::TooLarge { path: rel, bytes: new.len() as u64, max: self.max_note_bytes });
            }
            let state = DocState { hash: sha256_hex(new.as_bytes()), mtime_ns: 0, size: new.len() as i64 };
            let mut notes = Vec::new();
            let chunks = self.with_repair((&own, &own), || {
                index_note_unless_changed(
                    &self.index,
                    self.embedder.as_deref(),
                    &own,
                    &rel,
                    &new,
                    state.clone(),
                    old.as_deref(),
                    Some(&mut notes),
                )
            })?;
            if let Some(chunks) = chunks {
                return Ok(Written { path: rel, created, bytes: new.len(), chunks, notes });
            }
        }
        Err(MemoryError::Invalid(format!(
            "`{rel}` kept changing while it was written (other writers at the same moment); write it again"
        )))
    }

    fn tree(&self, scope: &Scope, dir: &str, depth: usize) -> Result<Vec<Entry>, MemoryError> {
        let rel = paths::normalize(dir, true)?;
        // The user's notes shadow the agent's global notes of the same path.
        let mut notes: BTreeMap<String, u64> = BTreeMap::new();
        let [own, global] = scopes(scope);
        for s in [global, own] {
            for (path, state) in self.index.docs(&s)? {
                notes.insert(path, state.size.max(0) as u64);
            }
        }
        let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
        if !rel.is_empty() && rel != "memory" && notes.contains_key(&rel) {
            return Ok(vec![Entry { path: rel.clone(), bytes: notes[&rel], depth: 0 }]);
        }
        let mut out: Vec<Entry> = Vec::new();
        let mut folders = std::collections::BTreeSet::new();
        for (path, bytes) in &notes {
            let Some(rest) = path.strip_prefix(&prefix) else { continue };
            let parts: Vec<&str> = rest.split('/').collect();
            // Folders on the way, each listed once.
            for i in 1..parts.len() {
                let folder = format!("{prefix}{}/", parts[..i].join("/"));
                if i - 1 <= depth && folders.insert(folder.clone()) {
                    out.push(Entry { path: folder, bytes: 0, depth: i - 1 });
                }
            }
            if parts.len() - 1 <= depth {
                out.push(Entry { path: path.clone(), bytes: *bytes, depth: parts.len() - 1 });
            }
        }
        if out.is_empty() && !rel.is_empty() && rel != "memory" {
            return Err(MemoryError::NotFound { path: rel });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn search(&self, scope: &Scope, query: &str, options: &SearchOptions) -> Result<SearchResults, MemoryError> {
        if query.trim().is_empty() {
            return Err(MemoryError::Invalid("the query is empty; say what to look for".into()));
        }
        let [own, global] = scopes(scope);
        let pair = (own.as_str(), global.as_str());
        let mut notes = Vec::new();
        if !self.checked.swap(true, std::sync::atomic::Ordering::Relaxed) && !self.index.check() {
            tracing::warn!("memory index damaged; rebuilding it");
            self.index.rebuild()?;
            notes.push("the memory index was damaged and has been rebuilt from the stored notes".to_owned());
        }
        self.reindex_stale(pair)?;
        let mut pending = 0;
        let mut failed = None;
        for s in distinct(pair) {
            if failed.is_none() {
                let filled = fill_vectors(&self.index, self.embedder.as_deref(), s, Duration::from_millis(750))?;
                pending += filled.done;
                failed = filled.failed;
            }
        }
        if pending > 0 {
            notes.push(format!("{pending} chunks were embedded before this search"));
        }
        let embedder = self.embedder.as_ref();
        self.with_repair(pair, || {
            let mut n = notes.clone();
            search::run(&self.index, embedder, failed.as_deref(), pair, query, options, &mut n)
                .map_err(MemoryError::Store)
        })
    }

    fn reindex(&self, _scope: &Scope, _path: &str) -> Result<(), MemoryError> {
        // Managed notes change only through this store, which indexes them as it writes.
        Ok(())
    }
}

/// The two scopes of a search or write, once each: a global caller's own scope is the fallback
/// scope too.
fn distinct<'a>(scopes: (&'a str, &'a str)) -> impl Iterator<Item = &'a str> {
    std::iter::once(scopes.0).chain((scopes.1 != scopes.0).then_some(scopes.1))
}
