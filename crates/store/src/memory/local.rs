//! Local mode: notes are Markdown files in the workspace (`MEMORY.md`, `memory/**/*.md`), which
//! the user can read, edit and version; the index follows them.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::backend::{DocState, DocUpdate};
use super::chunk::chunk;
use super::index::{MemoryIndex, is_corrupt, sha256_hex};
use super::{
    Embedder, Entry, MemoryError, MemoryStore, Scope, SearchOptions, SearchResults, WriteMode, Written, paths, search,
};

/// The index scope of local notes (one user).
const SCOPE: &str = "local";
/// Most files a scan looks at.
const MAX_FILES: usize = 100_000;
/// Chunks embedded per batch.
const EMBED_BATCH: usize = 32;
/// Longest a search waits for the background indexer's first pass to have every note's words.
const WORDS_WAIT: Duration = Duration::from_millis(100);
/// Most threads embedding at once in the foreground (`toolgate memory index`, `sync`).
const MAX_LANES: usize = 4;

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

/// How far indexing the notes is (a background pass, or `toolgate memory index`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexProgress {
    /// Notes found on disk (or in the index, once the first pass has listed them).
    pub notes: usize,
    /// Notes whose words are indexed (full text: cheap, so done first for every note).
    pub text: usize,
    /// Notes whose every chunk has a vector for the current model.
    pub embedded: usize,
    /// Whether notes get vectors at all (an embedding model is configured).
    pub vectors: bool,
    /// Whether a pass is running now.
    pub running: bool,
}

impl IndexProgress {
    /// The line a search result carries while the index is incomplete, `None` when it is whole.
    pub fn describe(&self) -> Option<String> {
        if self.running && self.text < self.notes {
            Some(format!(
                "index: {} of {} notes indexed so far (words first, then meaning); results from the indexed notes only",
                self.text, self.notes
            ))
        } else if self.vectors && self.embedded < self.notes {
            Some(format!(
                "index: {} of {} notes embedded; results from full text only for the rest",
                self.embedded, self.notes
            ))
        } else {
            None
        }
    }
}

/// The background indexer's shared state (`LocalMemory::start_indexing`).
#[derive(Debug, Default)]
struct Background {
    state: Mutex<BackgroundState>,
    /// Signals the worker that there is work (a scan found changes, a note lost its vectors).
    wake: Condvar,
    /// Searches in flight: the worker waits for them before each batch, so calls come first.
    searches: AtomicUsize,
}

#[derive(Debug, Default)]
struct BackgroundState {
    started: bool,
    /// Work asked for since the worker last looked.
    wanted: bool,
    /// The first pass over every note has ended (until then searches do not scan themselves).
    first_pass_done: bool,
    /// The first pass has indexed every note's words.
    words_done: bool,
    progress: IndexProgress,
}

impl Background {
    fn lock(&self) -> std::sync::MutexGuard<'_, BackgroundState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn want(&self) {
        self.lock().wanted = true;
        self.wake.notify_all();
    }

    /// Says the first pass has every note's words (searches waiting for that go on).
    fn words_done(&self) {
        self.lock().words_done = true;
        self.wake.notify_all();
    }

    /// Waits (bounded) while searches run: a call never queues behind a batch it did not ask for.
    fn yield_to_searches(&self) {
        let start = Instant::now();
        while self.searches.load(Ordering::Relaxed) > 0 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::yield_now();
    }
}

/// Counts a search in flight while it lives.
struct InFlight<'a>(&'a Background);

impl<'a> InFlight<'a> {
    fn new(bg: &'a Background) -> InFlight<'a> {
        bg.searches.fetch_add(1, Ordering::Relaxed);
        InFlight(bg)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.searches.fetch_sub(1, Ordering::Relaxed);
    }
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
    /// The background indexer (started by `serve`), shared with its thread.
    background: Arc<Background>,
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
            background: Arc::default(),
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
        let (report, _) = self.index_pass(false, &mut |_| {}, &|| false)?;
        Ok(report)
    }

    /// How far the index is: counted now (notes, and notes with vectors for the model).
    pub fn progress(&self) -> Result<IndexProgress, MemoryError> {
        let mut p = IndexProgress { vectors: self.embedder.is_some(), ..IndexProgress::default() };
        let (notes, embedded) =
            self.index.embed_progress(SCOPE, self.embedder.as_ref().map_or("", |e| e.model_id()))?;
        p.notes = notes;
        p.text = notes;
        p.embedded = if p.vectors { embedded } else { 0 };
        Ok(p)
    }

    /// One pass: every note's words first (cheap: a search finds every note by words soon),
    /// then vectors for the chunks that lack them, in batches (one matrix product per layer for
    /// the whole batch). `background`: wait for searches in flight before each batch. `report`
    /// hears the progress; `stop` ends the pass early (the owner is gone).
    fn index_pass(
        &self,
        background: bool,
        report: &mut dyn FnMut(&IndexProgress),
        stop: &dyn Fn() -> bool,
    ) -> Result<(SyncReport, IndexProgress), MemoryError> {
        let vectors = self.embedder.is_some();
        let mut progress = IndexProgress { vectors, running: true, ..IndexProgress::default() };
        let mut last: Option<Instant> = None;
        let scanned = self.with_repair(|| {
            self.scan_with(true, &mut |text, notes| {
                progress.text = text;
                progress.notes = notes;
                if background {
                    self.background.lock().progress = progress;
                }
                // Progress lines are for people: at most a few per second (the end of the scan
                // is reported with the count of embedded notes below).
                if text < notes && last.is_none_or(|t| t.elapsed() >= Duration::from_millis(200)) {
                    last = Some(Instant::now());
                    report(&progress);
                }
                !stop()
            })
        })?;
        let Some(scanned) = scanned else { return Ok((SyncReport::default(), progress)) };
        if background {
            self.background.words_done();
        }
        let publish = |p: &IndexProgress| {
            if background {
                self.background.lock().progress = *p;
            }
        };
        let count = |p: &mut IndexProgress| -> Result<(), MemoryError> {
            let now = self.progress()?;
            p.notes = now.notes;
            p.text = now.notes;
            p.embedded = now.embedded;
            Ok(())
        };
        count(&mut progress)?;
        publish(&progress);
        report(&progress);
        // In the foreground every core embeds a batch; the background indexer keeps to one
        // thread so calls have the rest of the machine.
        let lanes = if background {
            1
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(MAX_LANES)
        };
        if let Some(e) = self.embedder.as_deref() {
            loop {
                if stop() {
                    break;
                }
                if background {
                    self.background.yield_to_searches();
                }
                let missing = self.index.missing_vectors(SCOPE, e.model_id(), EMBED_BATCH * lanes)?;
                if missing.is_empty() {
                    break;
                }
                let texts: Vec<String> = missing.iter().map(|(_, h, t)| join_heading(h, t)).collect();
                match embed_lanes(e, &texts, lanes) {
                    Ok(vecs) => {
                        let pairs: Vec<(i64, Vec<f32>)> = missing.iter().map(|(id, _, _)| *id).zip(vecs).collect();
                        self.index.put_vectors(SCOPE, e.model_id(), &pairs)?;
                    }
                    Err(err) => {
                        // Searches say why (their own query embedding fails the same way).
                        tracing::warn!("memory: embedding notes failed: {err}");
                        break;
                    }
                }
                count(&mut progress)?;
                publish(&progress);
                report(&progress);
            }
        }
        progress.running = false;
        publish(&progress);
        report(&progress);
        Ok((scanned, progress))
    }

    /// Words only: the vectors of what changed are made afterwards, in batches (by the search's
    /// budget, the background indexer or `sync`).
    fn scan(&self) -> Result<SyncReport, MemoryError> {
        Ok(self.scan_with(true, &mut |_, _| true)?.unwrap_or_default())
    }

    /// Compares every note on disk with the index. `defer`: index the words only (the vectors
    /// are made later, in batches). `each(done, total)` is called per note; when it returns
    /// false the scan stops (`None`; nothing is removed from the index then).
    fn scan_with(
        &self,
        defer: bool,
        each: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Option<SyncReport>, MemoryError> {
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
        let total = files.len();
        for (done, (rel, meta)) in files.into_iter().enumerate() {
            if !each(done, total) {
                return Ok(None);
            }
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
            match self.index_file(&rel, old.as_ref(), defer) {
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
        each(total, total);
        *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), report.skipped.clone()));
        Ok(Some(report))
    }

    /// Indexes one note if its content changed; returns whether it did.
    fn index_file(&self, rel: &str, old: Option<&DocState>, defer: bool) -> Result<bool, MemoryError> {
        let path = self.root.join(rel);
        let bytes = fs::read(&path).map_err(|source| MemoryError::Io { path: path.clone(), source })?;
        let meta = fs::symlink_metadata(&path).map_err(|source| MemoryError::Io { path: path.clone(), source })?;
        let state = DocState { hash: sha256_hex(&bytes), mtime_ns: mtime_ns(&meta), size: bytes.len() as i64 };
        if old.is_some_and(|o| o.hash == state.hash) {
            self.index.touch(SCOPE, rel, &state)?;
            return Ok(false);
        }
        let text = String::from_utf8(bytes).map_err(|_| MemoryError::NotText { path: rel.to_owned() })?;
        if defer {
            index_chunks(&self.index, self.embedder.as_deref(), SCOPE, rel, &text, state, None, None, None, false)?;
        } else {
            self.index_text(rel, &text, state, None)?;
        }
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

    /// The files a scan skipped, and whether a scan ran now and changed the index.
    fn scan_if_due(&self) -> Result<(Vec<String>, bool), MemoryError> {
        let last = self.last_scan.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let watched = self.watched.load(std::sync::atomic::Ordering::Relaxed);
        match last {
            // A watcher re-indexes what changes: after the first scan, no scan is due.
            Some((_, skipped)) if watched => Ok((skipped, false)),
            Some((at, skipped)) if at.elapsed() < self.rescan_interval => Ok((skipped, false)),
            _ => {
                let r = self.scan()?;
                Ok((r.skipped, r.indexed > 0))
            }
        }
    }

    /// The full check reads the whole index: once per process, then only on errors. Returns
    /// whether the index was rebuilt.
    fn check_once(&self) -> Result<bool, MemoryError> {
        if !self.checked.swap(true, Ordering::Relaxed) && !self.index.check() {
            tracing::warn!("memory index damaged; rebuilding it");
            self.index.rebuild()?;
            *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(true);
        }
        Ok(false)
    }

    /// The background worker: a pass when asked (at start, when a scan or the watcher found
    /// changes), then sleep. One thread, waiting for searches in flight before each batch; it
    /// ends when the last owner of the store drops it.
    fn work(memory: &Weak<LocalMemory>, bg: &Background) {
        loop {
            {
                let mut s = bg.lock();
                while !s.wanted {
                    s = bg.wake.wait_timeout(s, Duration::from_millis(500)).unwrap_or_else(|e| e.into_inner()).0;
                    if memory.strong_count() == 0 {
                        return;
                    }
                }
                s.wanted = false;
                s.progress.running = true;
            }
            let Some(mem) = memory.upgrade() else { return };
            // Only this thread holds the store: its owner is gone, stop.
            let stop = || Arc::strong_count(&mem) == 1;
            let result =
                mem.check_once().and_then(|_| mem.index_pass(true, &mut |_| {}, &stop)).map(|(_, progress)| progress);
            let mut s = bg.lock();
            s.first_pass_done = true;
            s.words_done = true;
            bg.wake.notify_all();
            match result {
                Ok(p) => s.progress = p,
                Err(e) => {
                    s.progress.running = false;
                    tracing::warn!("memory: background indexing failed: {e}; searches scan the notes themselves");
                    // Searches fall back to scanning and embedding as they did without the worker.
                    s.started = false;
                    return;
                }
            }
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
        let new = mode.apply(old.as_deref(), content);
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
        let _in_flight = InFlight::new(&self.background);
        let (background, first_pass_done, progress) = {
            let mut s = self.background.lock();
            // A small workspace's words are indexed within milliseconds of the start: a search
            // that comes first waits for them a little, never for the vectors.
            if s.started && !s.words_done {
                s = self
                    .background
                    .wake
                    .wait_timeout_while(s, WORDS_WAIT, |s| s.started && !s.words_done)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            (s.started, s.first_pass_done, s.progress)
        };
        // With the background indexer (serve), a search never waits for indexing: it answers
        // from what is indexed and says how far that is; the worker checks the index, scans,
        // and embeds.
        let repaired = !background && self.check_once()?;
        let skipped = if background && !first_pass_done {
            self.last_scan.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.1.clone()).unwrap_or_default()
        } else {
            let (skipped, changed) = self.with_repair(|| self.scan_if_due())?;
            if background && changed {
                self.background.want();
            }
            skipped
        };
        // A model change leaves chunks without vectors: embed some on every search (the
        // background indexer does that instead when it runs).
        let filled = if background { Filled::default() } else { self.fill_vectors(Duration::from_millis(1500))? };
        let pending = filled.done;
        let mut notes = Vec::new();
        if let Some(line) = progress.describe().filter(|_| background) {
            notes.push(line);
        } else if filled.more
            && let Some(line) = self.progress()?.describe()
        {
            notes.push(line);
        }
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
        let embedder = self.embedder.as_ref();
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
                // With the background indexer running, a note changed on disk gets its words
                // indexed now and its vectors from the worker (the watcher never waits on the model).
                let defer = self.background.lock().started;
                match self.with_repair(|| self.index_file(&rel, old.as_ref(), defer)) {
                    Ok(true) if defer => {
                        self.background.want();
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                    Err(MemoryError::NotText { .. }) => self.index.remove(SCOPE, &rel).map_err(Into::into),
                    Err(e) => Err(e),
                }
            }
            _ => self.index.remove(SCOPE, &rel).map_err(Into::into),
        }
    }

    fn rescan(&self) -> Result<(), MemoryError> {
        let report = self.with_repair(|| self.scan())?;
        if report.indexed > 0 && self.background.lock().started {
            self.background.want();
        }
        Ok(())
    }

    fn start_indexing(self: Arc<Self>) {
        {
            let mut s = self.background.lock();
            if s.started {
                return;
            }
            s.started = true;
            s.wanted = true;
            s.progress = IndexProgress { vectors: self.embedder.is_some(), running: true, ..IndexProgress::default() };
        }
        // The model loads beside the first pass's words (once; it takes longer than a search's
        // budget), so the first searches answer by words instead of waiting for it.
        if let Some(e) = self.embedder.clone() {
            let _ = std::thread::Builder::new().name("memory-model".into()).spawn(move || e.warm_up());
        }
        let memory = Arc::downgrade(&self);
        let bg = self.background.clone();
        drop(self);
        let spawned =
            std::thread::Builder::new().name("memory-index".into()).spawn(move || LocalMemory::work(&memory, &bg));
        if let Err(e) = spawned {
            tracing::warn!("memory: cannot start the background indexer ({e}); searches index the notes themselves");
        }
    }

    fn index_all(&self, progress: &mut dyn FnMut(&IndexProgress)) -> Result<IndexProgress, MemoryError> {
        self.check_once()?;
        self.index_pass(false, progress, &|| false).map(|(_, p)| p)
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
    let unconditional = None;
    Ok(index_chunks(index, embedder, scope, rel, text, state, content, unconditional, notes, true)?.unwrap_or(0))
}

/// [`index_note`] for a managed note's read-modify-write: only if its stored text is still
/// `old` (`None`: there is none); `Ok(None)` when another writer changed it first.
#[allow(clippy::too_many_arguments)]
pub(super) fn index_note_unless_changed(
    index: &MemoryIndex,
    embedder: Option<&dyn Embedder>,
    scope: &str,
    rel: &str,
    text: &str,
    state: DocState,
    old: Option<&str>,
    notes: Option<&mut Vec<String>>,
) -> Result<Option<usize>, MemoryError> {
    index_chunks(index, embedder, scope, rel, text, state, Some(text), Some(old), notes, true)
}

/// [`index_note`]; with `embed_now` false the words are indexed and unchanged chunks keep their
/// vectors, the rest are embedded later in batches (`fill_vectors`, the background indexer).
#[allow(clippy::too_many_arguments)]
fn index_chunks(
    index: &MemoryIndex,
    embedder: Option<&dyn Embedder>,
    scope: &str,
    rel: &str,
    text: &str,
    state: DocState,
    content: Option<&str>,
    unless_changed_from: Option<Option<&str>>,
    notes: Option<&mut Vec<String>>,
    embed_now: bool,
) -> Result<Option<usize>, MemoryError> {
    let chunks = chunk(text);
    let mut vectors = None;
    let mut reuse = HashMap::new();
    let mut reuse_model = None;
    if let Some(e) = embedder {
        reuse = index.cached_vectors(scope, rel, e.model_id())?;
        let all_cached = chunks.iter().all(|c| reuse.contains_key(&sha256_hex(c.text.as_bytes())));
        if all_cached || !embed_now {
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
    let update = DocUpdate { path: rel, state, content, chunks: &chunks, vectors, unless_changed_from };
    Ok(index.replace(scope, &update, &reuse, reuse_model)?.then_some(chunks.len()))
}

/// What [`fill_vectors`] did: chunks embedded, and the embedding error that stopped it (a
/// search then does not try the embedder a second time for the query).
#[derive(Debug, Default)]
pub(super) struct Filled {
    pub(super) done: usize,
    pub(super) failed: Option<String>,
    /// The budget ran out with chunks still lacking vectors.
    pub(super) more: bool,
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
    loop {
        let missing = index.missing_vectors(scope, e.model_id(), EMBED_BATCH)?;
        if missing.is_empty() {
            break;
        }
        if start.elapsed() >= budget {
            filled.more = true;
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

/// [`embed_all`] with the texts split into `lanes` parts embedded at once, one thread each.
fn embed_lanes(e: &dyn Embedder, texts: &[String], lanes: usize) -> Result<Vec<Vec<f32>>, super::EmbedError> {
    if lanes <= 1 || texts.len() <= EMBED_BATCH {
        return embed_all(e, texts);
    }
    let part = texts.len().div_ceil(lanes);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = texts.chunks(part).map(|p| s.spawn(move || embed_all(e, p))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(super::EmbedError("the embedding thread panicked".into()))))
            .collect()
    });
    let mut out = Vec::with_capacity(texts.len());
    for r in results {
        out.extend(r?);
    }
    Ok(out)
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
