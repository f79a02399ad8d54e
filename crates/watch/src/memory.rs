//! The memory index kept in step with the notes on disk (local mode): a note
//! written, edited, renamed or deleted by an editor or `git pull` is re-indexed within
//! [`DEBOUNCE`], without waiting for the next search. While the watcher runs, searches skip
//! their periodic scan of `memory/` (`MemoryStore::set_watched`); a lost event (the kernel's
//! queue overflowed) or a folder change makes the watcher compare every note instead.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::store::memory::{MemoryStore, Scope, paths};
use toolgate::tools::memory::MemoryMode;

/// How long a burst of events (one save is several) is gathered before re-indexing.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What changed.
#[derive(Debug)]
enum Change {
    /// This note (workspace-relative).
    Note(String),
    /// Something the watcher cannot pin to one note (a folder, a lost event): compare all.
    All,
}

/// What an event means for the notes under `root`.
fn classify(root: &Path, event: &Event) -> Vec<Change> {
    if event.need_rescan() {
        return vec![Change::All];
    }
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) | EventKind::Other => return Vec::new(),
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => {}
    }
    let mut out = Vec::new();
    for path in &event.paths {
        let Ok(rel) = path.strip_prefix(root) else { continue };
        // Hidden names (the atomic writes' temporary files, `.git`) are never notes.
        if rel.components().any(|c| matches!(c, Component::Normal(n) if n.to_string_lossy().starts_with('.'))) {
            continue;
        }
        let Some(rel) = rel.to_str() else { continue };
        if paths::is_memory_path(rel) {
            out.push(Change::Note(rel.to_owned()));
        } else if rel == "memory" || (rel.starts_with("memory/") && !rel.ends_with(".md")) {
            // A folder created, renamed or removed: the notes under it changed with it.
            out.push(Change::All);
        }
    }
    out
}

/// Starts watching the workspace's notes, for as long as the Tokio runtime runs.
pub(crate) fn watch(gate: &Gate, shutdown: CancellationToken) {
    let Some(store) = gate.memory().cloned() else { return };
    if gate.config().memory.mode != MemoryMode::Local {
        return;
    }
    let root = gate.workspace().to_path_buf();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Change>();
    let r = root.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        let changes = match event {
            Ok(event) => classify(&r, &event),
            Err(_) => vec![Change::All],
        };
        for c in changes {
            let _ = tx.send(c);
        }
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("notes edited on disk will be indexed at the next search: cannot watch them: {e}");
            return;
        }
    };
    // The workspace itself (MEMORY.md, and `memory/` appearing), then `memory/` whole.
    if let Err(e) = watcher.watch(&root, RecursiveMode::NonRecursive) {
        tracing::warn!("notes edited on disk will be indexed at the next search: cannot watch them: {e}");
        return;
    }
    let memory_dir = root.join("memory");
    let mut armed = arm(&mut watcher, &memory_dir, false);
    // Searches skip their scan only while every note is watched (a `memory/` that exists but
    // could not be watched, e.g. the inotify limit reached, keeps the scans).
    let exists = |d: &PathBuf| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
    store.set_watched(armed || !exists(&memory_dir));
    tokio::spawn(async move {
        // What changed before the watch was armed.
        reindex(store.clone(), Vec::new(), true).await;
        loop {
            let first = tokio::select! {
                change = rx.recv() => match change { Some(c) => c, None => break },
                () = shutdown.cancelled() => break,
            };
            tokio::time::sleep(DEBOUNCE).await;
            let mut notes = BTreeSet::new();
            let mut all = false;
            let mut take = |c: Change| match c {
                Change::Note(n) => {
                    notes.insert(n);
                }
                Change::All => all = true,
            };
            take(first);
            while let Ok(c) = rx.try_recv() {
                take(c);
            }
            if !armed || all {
                // `memory/` appeared (it may already hold notes), or was replaced (its watch went
                // with the old folder).
                let was = armed;
                armed = arm(&mut watcher, &memory_dir, true);
                all |= armed && !was;
                store.set_watched(armed || !exists(&memory_dir));
            }
            reindex(store.clone(), notes.into_iter().collect(), all).await;
        }
    });
}

/// Watches `memory/` recursively once it exists; returns whether it is watched.
fn arm(watcher: &mut notify::RecommendedWatcher, dir: &PathBuf, again: bool) -> bool {
    // A link is not followed: the scan refuses a linked `memory/` too.
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    match watcher.watch(dir, RecursiveMode::Recursive) {
        Ok(()) => true,
        Err(e) => {
            if !again {
                tracing::warn!("cannot watch {} for changes: {e}", dir.display());
            }
            false
        }
    }
}

async fn reindex(store: Arc<dyn MemoryStore>, notes: Vec<String>, all: bool) {
    let done = tokio::task::spawn_blocking(move || {
        if all {
            return store.rescan();
        }
        for note in &notes {
            store.reindex(&Scope::default(), note)?;
        }
        Ok(())
    })
    .await;
    match done {
        Ok(Err(e)) => tracing::warn!("memory: re-indexing notes changed on disk failed: {e}"),
        Err(e) => tracing::warn!("memory: re-indexing notes changed on disk failed: {e}"),
        Ok(Ok(())) => {}
    }
}
