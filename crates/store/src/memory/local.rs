//! Local mode: notes are Markdown files in the workspace (`MEMORY.md`, `memory/**/*.md`), which
//! the user can read, edit and version; the index follows them.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::chunk::chunk;
use super::index::{DocState, DocUpdate, MemoryIndex, is_corrupt, sha256_hex};
use super::{
    Embedder, Entry, MemoryError, MemoryStore, Scope, SearchOptions, SearchResults, WriteMode, Written, paths, search,
};

/// The index scope of local notes (one user).
const SCOPE: &str = "local";
/// Most files a scan looks at.
const MAX_FILES: usize = 100_000;
/// Chunks embedded per batch.
const EMBED_BATCH: usize = 32;

/// What a scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Notes (re)indexed.
    pub indexed: usize,
    /// Notes that left the index (deleted on disk).
    pub removed: usize,
    /// Notes unchanged.
    pub unchanged: usize,
    /// Files not indexed, with why.
    pub skipped: Vec<String>,
}

/// Notes in the workspace, indexed in the state database.
#[derive(Debug)]
pub struct LocalMemory {
    root: PathBuf,
    index: MemoryIndex,
    embedder: Option<Arc<dyn Embedder>>,
    max_note_bytes: u64,
    rescan_interval: Duration,
    /// When the files were last compared with the index, and what the scan skipped.
    last_scan: Mutex<Option<(Instant, Vec<String>)>>,
    /// Held by a write from reading the old note to indexing the new one (no lost update
    /// between two writers in this process).
    write_lock: Mutex<()>,
    /// Whether the index was checked for damage since it was opened.
    checked: std::sync::atomic::AtomicBool,
    /// Whether a file watcher reports changes (searches then skip the periodic scan).
    watched: std::sync::atomic::AtomicBool,
}

impl LocalMemory {
    /// Notes under `root` (the workspace), indexed in `index`, embedded with `embedder` (none:
    /// full-text search only).
    pub fn new(root: impl Into<PathBuf>, index: MemoryIndex, embedder: Option<Arc<dyn Embedder>>) -> LocalMemory {
        LocalMemory {
            root: root.into(),
            index,
            embedder,
            max_note_bytes: 1 << 20,
            rescan_interval: Duration::from_secs(2),
            last_scan: Mutex::new(None),
            write_lock: Mutex::new(()),
            checked: std::sync::atomic::AtomicBool::new(false),
            watched: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Largest note indexed or written, in bytes (default 1 MiB).
    pub fn max_note_bytes(mut self, n: u64) -> Self {
        self.max_note_bytes = n;
        self
    }

    /// How often a search compares the files with the index (default 2 s; zero: every search).
    /// Writes through toolgate are indexed at once either way.
    pub fn rescan_interval(mut self, d: Duration) -> Self {
        self.rescan_interval = d;
        self
    }

    /// The index.
    pub fn index(&self) -> &MemoryIndex {
        &self.index
    }

    /// Compares every note on disk with the index now: new and changed notes are indexed,
    /// deleted ones removed, missing vectors filled in.
    pub fn sync(&self) -> Result<SyncReport, MemoryError> {
        let report = self.with_repair(|| self.scan())?;
        self.fill_vectors(Duration::from_secs(3600))?;
        Ok(report)
    }

    fn scan(&self) -> Result<SyncReport, MemoryError> {
        let mut report = SyncReport::default();
        let mut known = self.index.docs(SCOPE)?;
        let mut files = Vec::new();
        for name in ["MEMORY.md", "memory.md"] {
            match fs::symlink_metadata(self.root.join(name)) {
                Ok(m) if m.is_file() => files.push((name.to_owned(), m)),
                Ok(m) if m.file_type().is_symlink() => report.skipped.push(format!("{name}: a symbolic link")),
                _ => {}
            }
        }
        let dir = self.root.join("memory");
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => walk(&dir, "memory", 0, &mut files, &mut report.skipped),
            Ok(m) if m.file_type().is_symlink() => report.skipped.push("memory/: a symbolic link".into()),
            _ => {}
        }
        for (rel, meta) in files {
            let old = known.remove(&rel);
            if meta.len() > self.max_note_bytes {
                report.skipped.push(format!("{rel}: {} bytes, over the {}-byte cap", meta.len(), self.max_note_bytes));
                if old.is_some() {
                    self.index.remove(SCOPE, &rel)?;
                }
                continue;
            }
            if old.as_ref().is_some_and(|o| o.mtime_ns == mtime_ns(&meta) && o.size == meta.len() as i64) {
                report.unchanged += 1;
                continue;
            }
            match self.index_file(&rel, old.as_ref()) {
                Ok(true) => report.indexed += 1,
                Ok(false) => report.unchanged += 1,
                Err(MemoryError::NotText { .. }) => {
                    report.skipped.push(format!("{rel}: not UTF-8 text"));
                    self.index.remove(SCOPE, &rel)?;
                }
                Err(MemoryError::Io { .. }) => {
                    // Deleted or replaced between the walk and the read: the next scan sees it.
                    report.skipped.push(format!("{rel}: could not be read"));
                }
                Err(e) => return Err(e),
            }
        }
        for gone in known.keys() {
            self.index.remove(SCOPE, gone)?;
            report.removed += 1;
        }
        *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), report.skipped.clone()));
        Ok(report)
    }

    /// Indexes one note if its content changed; returns whether it did.
    fn index_file(&self, rel: &str, old: Option<&DocState>) -> Result<bool, MemoryError> {
        let path = self.root.join(rel);
        let bytes = fs::read(&path).map_err(|source| MemoryError::Io { path: path.clone(), source })?;
        let meta = fs::symlink_metadata(&path).map_err(|source| MemoryError::Io { path: path.clone(), source })?;
        let state = DocState { hash: sha256_hex(&bytes), mtime_ns: mtime_ns(&meta), size: bytes.len() as i64 };
        if old.is_some_and(|o| o.hash == state.hash) {
            self.index.touch(SCOPE, rel, &state)?;
            return Ok(false);
        }
        let text = String::from_utf8(bytes).map_err(|_| MemoryError::NotText { path: rel.to_owned() })?;
        self.index_text(rel, &text, state, None)?;
        Ok(true)
    }

    /// Chunks, embeds and stores a note's text (see [`index_note`]).
    fn index_text(
        &self,
        rel: &str,
        text: &str,
        state: DocState,
        notes: Option<&mut Vec<String>>,
    ) -> Result<usize, MemoryError> {
        index_note(&self.index, self.embedder.as_deref(), SCOPE, rel, text, state, None, notes)
    }

    /// Embeds chunks that have no vector for the current model (see [`fill_vectors`]).
    fn fill_vectors(&self, budget: Duration) -> Result<Filled, MemoryError> {
        fill_vectors(&self.index, self.embedder.as_deref(), SCOPE, budget)
    }

    /// Runs `f`; if the index turns out to be damaged, rebuilds it and runs `f` again.
    fn with_repair<T>(&self, mut f: impl FnMut() -> Result<T, MemoryError>) -> Result<T, MemoryError> {
        match f() {
            Err(MemoryError::Store(e)) if is_corrupt(&e) => {
                tracing::warn!("memory index damaged ({e}); rebuilding it");
                self.index.rebuild()?;
                *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = None;
                self.scan()?;
                f()
            }
            other => other,
        }
    }

    fn scan_if_due(&self) -> Result<Vec<String>, MemoryError> {
        let last = self.last_scan.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let watched = self.watched.load(std::sync::atomic::Ordering::Relaxed);
        match last {
            // A watcher re-indexes what changes: after the first scan, no scan is due.
            Some((_, skipped)) if watched => Ok(skipped),
            Some((at, skipped)) if at.elapsed() < self.rescan_interval => Ok(skipped),
            _ => Ok(self.scan()?.skipped),
        }
    }

    /// Checks that no folder on the way to `rel` is a symbolic link (a link could point outside
    /// the workspace), and returns the full path.
    fn confined(&self, rel: &str) -> Result<PathBuf, MemoryError> {
        let mut path = self.root.clone();
        for part in rel.split('/') {
            path.push(part);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(MemoryError::InvalidPath {
                        path: rel.to_owned(),
                        reason: "it goes through a symbolic link; memory notes must be real files under `memory/`"
                            .into(),
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(source) => return Err(MemoryError::Io { path, source }),
            }
        }
        Ok(self.root.join(rel))
    }

    fn read_note(&self, rel: &str) -> Result<Option<String>, MemoryError> {
        let path = self.confined(rel)?;
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(MemoryError::Io { path, source }),
        };
        if meta.is_dir() {
            return Err(MemoryError::Invalid(format!("`{rel}` is a folder; use memory_tree to list it")));
        }
        if meta.len() > self.max_note_bytes {
            return Err(MemoryError::TooLarge { path: rel.to_owned(), bytes: meta.len(), max: self.max_note_bytes });
        }
        let bytes = fs::read(&path).map_err(|source| MemoryError::Io { path: path.clone(), source })?;
        String::from_utf8(bytes).map(Some).map_err(|_| MemoryError::NotText { path: rel.to_owned() })
    }
}

impl MemoryStore for LocalMemory {
    fn read(&self, _scope: &Scope, path: &str) -> Result<String, MemoryError> {
        let rel = paths::normalize(path, false)?;
        self.read_note(&rel)?.ok_or(MemoryError::NotFound { path: rel })
    }

    fn write(&self, _scope: &Scope, path: &str, content: &str, mode: WriteMode) -> Result<Written, MemoryError> {
        let rel = paths::normalize_note(path)?;
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.read_note(&rel)?;
        let created = old.is_none();
        let new = match (mode, old) {
            (WriteMode::Append, Some(old)) if !old.is_empty() => {
                let sep = if old.ends_with('\n') { "" } else { "\n" };
                format!("{old}{sep}{content}")
            }
            _ => content.to_owned(),
        };
        let new = if new.ends_with('\n') || new.is_empty() { new } else { format!("{new}\n") };
        if new.len() as u64 > self.max_note_bytes {
            return Err(MemoryError::TooLarge { path: rel, bytes: new.len() as u64, max: self.max_note_bytes });
        }
        let full = self.confined(&rel)?;
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(|source| MemoryError::Io { path: parent.to_owned(), source })?;
            // A folder created by someone else between the check and here could be a link.
            self.confined(&rel)?;
        }
        atomic_write(&full, new.as_bytes())?;
        let meta = fs::symlink_metadata(&full).map_err(|source| MemoryError::Io { path: full.clone(), source })?;
        let state = DocState { hash: sha256_hex(new.as_bytes()), mtime_ns: mtime_ns(&meta), size: new.len() as i64 };
        let mut notes = Vec::new();
        let chunks = self.with_repair(|| self.index_text(&rel, &new, state.clone(), Some(&mut notes)))?;
        Ok(Written { path: rel, created, bytes: new.len(), chunks, notes })
    }

    fn tree(&self, _scope: &Scope, dir: &str, depth: usize) -> Result<Vec<Entry>, MemoryError> {
        let rel = paths::normalize(dir, true)?;
        let mut out = Vec::new();
        if rel.is_empty() {
            for name in ["MEMORY.md", "memory.md"] {
                if let Ok(m) = fs::symlink_metadata(self.root.join(name))
                    && m.is_file()
                {
                    out.push(Entry { path: name.to_owned(), bytes: m.len(), depth: 0 });
                }
            }
            let mem = self.root.join("memory");
            if fs::symlink_metadata(&mem).is_ok_and(|m| m.is_dir()) {
                out.push(Entry { path: "memory/".into(), bytes: 0, depth: 0 });
                if depth > 0 {
                    list(&mem, "memory", 1, depth, &mut out);
                }
            }
            return Ok(out);
        }
        let full = self.confined(&rel)?;
        match fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => list(&full, &rel, 0, depth, &mut out),
            Ok(m) => out.push(Entry { path: rel, bytes: m.len(), depth: 0 }),
            Err(_) => return Err(MemoryError::NotFound { path: rel }),
        }
        Ok(out)
    }

    fn search(&self, _scope: &Scope, query: &str, options: &SearchOptions) -> Result<SearchResults, MemoryError> {
        if query.trim().is_empty() {
            return Err(MemoryError::Invalid("the query is empty; say what to look for".into()));
        }
        let mut repaired = false;
        // The full check reads the whole index: once per process, then only on errors.
        if !self.checked.swap(true, std::sync::atomic::Ordering::Relaxed) && !self.index.check() {
            tracing::warn!("memory index damaged; rebuilding it");
            self.index.rebuild()?;
            *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = None;
            repaired = true;
        }
        let skipped = self.with_repair(|| self.scan_if_due())?;
        // A model change leaves chunks without vectors: embed some on every search.
        let filled = self.fill_vectors(Duration::from_millis(1500))?;
        let pending = filled.done;
        let mut notes = Vec::new();
        if repaired {
            notes.push("the memory index was damaged and has been rebuilt from the notes".into());
        }
        if pending > 0 {
            notes.push(format!("{pending} chunks were embedded before this search"));
        }
        if !skipped.is_empty() {
            let n = skipped.len();
            let list: Vec<&str> = skipped.iter().take(5).map(String::as_str).collect();
            notes.push(format!("{n} files under memory/ are not indexed: {}", list.join("; ")));
        }
        let embedder = self.embedder.as_deref();
        self.with_repair(|| {
            let mut n = notes.clone();
            search::run(&self.index, embedder, filled.failed.as_deref(), (SCOPE, SCOPE), query, options, &mut n)
                .map_err(MemoryError::Store)
        })
    }

    fn reindex(&self, _scope: &Scope, path: &str) -> Result<(), MemoryError> {
        let rel = paths::normalize(path, false)?;
        let old = self.index.doc(SCOPE, &rel)?;
        let full = self.confined(&rel)?;
        match fs::symlink_metadata(&full) {
            Ok(m) if m.is_file() && m.len() <= self.max_note_bytes && rel.ends_with(".md") => {
                match self.with_repair(|| self.index_file(&rel, old.as_ref())) {
                    Ok(_) => Ok(()),
                    Err(MemoryError::NotText { .. }) => self.index.remove(SCOPE, &rel).map_err(Into::into),
                    Err(e) => Err(e),
                }
            }
            _ => self.index.remove(SCOPE, &rel).map_err(Into::into),
        }
    }

    fn rescan(&self) -> Result<(), MemoryError> {
        self.with_repair(|| self.scan()).map(drop)
    }

    fn set_watched(&self, watched: bool) {
        self.watched.store(watched, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Chunks, embeds and stores a note's text in `scope` (with `content` for managed notes, whose
/// only copy is the row); embedding failures leave the note searchable by words (the vectors are
/// filled in by a later search) and are returned as a note. One transaction per note: a crash
/// leaves the old version of the note indexed or the new one, never a mix.
#[allow(clippy::too_many_arguments)]
pub(super) fn index_note(
    index: &MemoryIndex,
    embedder: Option<&dyn Embedder>,
    scope: &str,
    rel: &str,
    text: &str,
    state: DocState,
    content: Option<&str>,
    notes: Option<&mut Vec<String>>,
) -> Result<usize, MemoryError> {
    let chunks = chunk(text);
    let mut vectors = None;
    let mut reuse = HashMap::new();
    let mut reuse_model = None;
    if let Some(e) = embedder {
        reuse = index.cached_vectors(scope, rel, e.model_id())?;
        let all_cached = chunks.iter().all(|c| reuse.contains_key(&sha256_hex(c.text.as_bytes())));
        if all_cached {
            reuse_model = Some(e.model_id());
        } else {
            let texts: Vec<String> = chunks.iter().map(embed_text).collect();
            match embed_all(e, &texts) {
                Ok(v) => vectors = Some((e.model_id(), v)),
                Err(err) => {
                    tracing::warn!("memory: embedding `{rel}` failed: {err}");
                    if let Some(notes) = notes {
                        notes.push(format!("not embedded yet ({err}); it is searchable by words"));
                    }
                }
            }
        }
    }
    let update = DocUpdate { path: rel, state, content, chunks: &chunks, vectors };
    index.replace(scope, &update, &reuse, reuse_model)?;
    Ok(chunks.len())
}

/// What [`fill_vectors`] did: chunks embedded, and the embedding error that stopped it (a
/// search then does not try the embedder a second time for the query).
#[derive(Debug, Default)]
pub(super) struct Filled {
    pub(super) done: usize,
    pub(super) failed: Option<String>,
}

/// Embeds chunks of `scope` that have no vector for the current model (after a model change or
/// a failed embedding), until `budget` runs out.
pub(super) fn fill_vectors(
    index: &MemoryIndex,
    embedder: Option<&dyn Embedder>,
    scope: &str,
    budget: Duration,
) -> Result<Filled, MemoryError> {
    let mut filled = Filled::default();
    let Some(e) = embedder else { return Ok(filled) };
    let start = Instant::now();
    while start.elapsed() < budget {
        let missing = index.missing_vectors(scope, e.model_id(), EMBED_BATCH)?;
        if missing.is_empty() {
            break;
        }
        let texts: Vec<String> = missing.iter().map(|(_, h, t)| join_heading(h, t)).collect();
        let vecs = match embed_all(e, &texts) {
            Ok(v) => v,
            Err(err) => {
                filled.failed = Some(err.to_string());
                break;
            }
        };
        let pairs: Vec<(i64, Vec<f32>)> = missing.iter().map(|(id, _, _)| *id).zip(vecs).collect();
        index.put_vectors(scope, e.model_id(), &pairs)?;
        filled.done += pairs.len();
    }
    Ok(filled)
}

fn embed_text(c: &super::chunk::Chunk) -> String {
    join_heading(&c.heading, &c.text)
}

fn join_heading(heading: &str, text: &str) -> String {
    if heading.is_empty() || text.starts_with('#') { text.to_owned() } else { format!("{heading}\n{text}") }
}

/// Embeds in batches; checks the count and the dimensions.
fn embed_all(e: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, super::EmbedError> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    super::embed_batches(&refs, EMBED_BATCH, e.dims(), |batch| e.embed(batch))
}

fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

/// Notes under `dir` (real files ending in `.md`; links and hidden entries skipped).
fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<(String, fs::Metadata)>, skipped: &mut Vec<String>) {
    if depth > 16 || out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            skipped.push(format!("{rel}/{}: the name is not UTF-8", entry.file_name().to_string_lossy()));
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        let child = format!("{rel}/{name}");
        if meta.file_type().is_symlink() {
            skipped.push(format!("{child}: a symbolic link"));
        } else if meta.is_dir() {
            walk(&entry.path(), &child, depth + 1, out, skipped);
        } else if meta.is_file() && name.ends_with(".md") {
            out.push((child, meta));
        }
    }
}

fn list(dir: &Path, rel: &str, depth: usize, max_depth: usize, out: &mut Vec<Entry>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= 2000 {
            return;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if name.starts_with('.') {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        let child = format!("{rel}/{name}");
        if meta.is_dir() {
            out.push(Entry { path: format!("{child}/"), bytes: 0, depth });
            if depth < max_depth {
                list(&entry.path(), &child, depth + 1, max_depth, out);
            }
        } else if meta.is_file() {
            out.push(Entry { path: child, bytes: meta.len(), depth });
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, and renames it over `path`: a
/// crash leaves either the old note or the new one, never a torn one.
fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), MemoryError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let io = |source| MemoryError::Io { path: path.to_owned(), source };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("note");
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io)
}
