//! The configuration's sources: when the user config or the workspace's `toolgate.toml` (or the
//! file given instead), a skills folder, or the custom tools in the store (`toolgate tools
//! add|remove` touch [`CUSTOM_TOOLS_STAMP`]) change, events are gathered for [`DEBOUNCE`], then
//! the whole configuration is loaded again and [`Gate::reload`] swaps the policy and the tools
//! in. A file that does not parse (an editor's half-written save) leaves the gate on its last
//! good configuration, with the error in the log.
//!
//! Directories are watched, not files: editors save by writing a new file and renaming it over
//! the old one, which a watch on the old file's inode would miss.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::config::ConfigSources;
use toolgate::extensions::CUSTOM_TOOLS_STAMP;

/// How long a burst of events (one save is several) is gathered before reloading.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// What is watched: exact files and folders whose whole tree counts.
#[derive(Debug, Clone)]
struct Sources {
    files: Vec<PathBuf>,
    trees: Vec<PathBuf>,
}

impl Sources {
    fn of(config_file: Option<&Path>, workspace: &Path) -> Sources {
        let config = ConfigSources::standard(workspace, config_file);
        let mut files: Vec<PathBuf> = config.user_file.into_iter().chain(config.workspace_file).collect();
        files.push(workspace.join(CUSTOM_TOOLS_STAMP));
        let mut trees: Vec<PathBuf> =
            toolgate::tools::skills::WORKSPACE_DIRS.iter().map(|d| workspace.join(d)).collect();
        trees.extend(toolgate::tools::skills::user_dir());
        Sources { files, trees }
    }

    fn matches(&self, path: &Path) -> bool {
        self.files.iter().any(|f| f == path) || self.trees.iter().any(|t| path.starts_with(t) || t.starts_with(path))
    }

    /// The folders to watch: each file's folder, each tree (or, while it does not exist, the
    /// nearest existing ancestor, so that its creation is seen).
    fn watches(&self) -> Vec<(PathBuf, RecursiveMode)> {
        let mut out: Vec<(PathBuf, RecursiveMode)> = Vec::new();
        let mut add = |path: PathBuf, mode| {
            if !out.iter().any(|(p, m)| *p == path && *m == mode) {
                out.push((path, mode));
            }
        };
        for file in &self.files {
            if let Some(dir) = file.parent().and_then(existing_ancestor) {
                add(dir, RecursiveMode::NonRecursive);
            }
        }
        for tree in &self.trees {
            match existing_ancestor(tree) {
                Some(dir) if dir == *tree => add(dir, RecursiveMode::Recursive),
                Some(dir) => add(dir, RecursiveMode::NonRecursive),
                None => {}
            }
        }
        out
    }
}

fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|p| p.is_dir()).map(Path::to_path_buf)
}

/// Whether an event can change a source (reads, including toolgate's own, cannot).
fn changes(event: &Event) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        // inotify reports a write in progress (the truncation that starts an in-place save, each
        // `write`) as well as its end (the close above). Reloading on the first can read an empty
        // or half-written file that parses, as the defaults or as part of the policy, and puts
        // it in force until the save ends. Watchers of other systems report no close, so there
        // every write counts.
        EventKind::Modify(ModifyKind::Data(_)) if cfg!(target_os = "linux") => false,
        EventKind::Access(_) | EventKind::Other => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
    }
}

/// Starts watching until `shutdown`: one task owns the watcher, reloads, and watches folders
/// that appeared.
pub(crate) fn watch(gate: Arc<Gate>, config_file: Option<&Path>, shutdown: CancellationToken) -> notify::Result<()> {
    let sources = Sources::of(config_file, gate.workspace());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let filter = sources.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        if let Ok(event) = event
            && changes(&event)
            && event.paths.iter().any(|p| filter.matches(p))
        {
            let _ = tx.send(());
        }
    })?;
    let mut armed = Vec::new();
    arm(&mut watcher, &sources, &mut armed);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                event = rx.recv() => if event.is_none() { break },
                () = shutdown.cancelled() => break,
            }
            tokio::time::sleep(DEBOUNCE).await;
            while rx.try_recv().is_ok() {}
            reload(&gate);
            arm(&mut watcher, &sources, &mut armed);
        }
    });
    Ok(())
}

fn reload(gate: &Gate) {
    match gate.reload_config() {
        Err(e) => tracing::warn!("configuration not reloaded, the previous one stays in force: {e}"),
        Ok(r) => {
            if r.removed.is_empty() {
                tracing::info!("reloaded: {} custom and skill tools", r.tools.len());
            } else {
                tracing::info!("reloaded: {} custom and skill tools; removed {}", r.tools.len(), r.removed.join(", "));
            }
            if !r.mcp_stopped.is_empty() || !r.mcp_started.is_empty() {
                tracing::info!(
                    "MCP servers: stopped [{}], started [{}]",
                    r.mcp_stopped.join(", "),
                    r.mcp_started.join(", ")
                );
            }
        }
    }
}

/// Watches what is not watched yet (a folder that appeared, a tree that can now be watched
/// whole).
fn arm(watcher: &mut notify::RecommendedWatcher, sources: &Sources, armed: &mut Vec<(PathBuf, RecursiveMode)>) {
    for (path, mode) in sources.watches() {
        if armed.iter().any(|(p, m)| *p == path && *m == mode) {
            continue;
        }
        match watcher.watch(&path, mode) {
            Ok(()) => armed.push((path, mode)),
            Err(e) => tracing::warn!("cannot watch {} for changes: {e}", path.display()),
        }
    }
}
