//! `canvas`: a live page the agent draws on and the user watches.
//!
//! [`Canvas`] holds one board per caller (user and session): its sections of sanitized HTML
//! (`sanitize.rs`), a version, and a `watch` channel that tells every open page of that board
//! what changed. Served by `toolgate serve --http` (the facade mounts [`Canvas::handle`] at
//! `/canvas`, `page.rs`), a board is reached at `/canvas/TOKEN`, where the token is 256 random
//! bits minted for that board: no other session can name it, and the server keeps only its
//! hash, so lookups take no time that depends on how close a guess is. Without an HTTP server
//! (stdio), each change is written to `.toolgate/canvas/NAME.html` in the workspace instead, a
//! page that reloads itself, and the board's state beside it, so a later process continues it.
//!
//! Memory is bounded: a piece of content is at most [`MAX_CONTENT`] bytes, a board at most
//! [`MAX_SECTIONS`] sections and [`MAX_BOARD_BYTES`], and the boards together [`MAX_BOARDS`] and
//! [`MAX_TOTAL_BYTES`] (the least recently changed board goes first, and its pages' streams
//! end); a board has at most [`MAX_VIEWERS`] open streams.

mod page;
mod sanitize;
mod tool;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use page::{Events, Page, Reply};
pub use sanitize::{Format, to_safe_html};

/// Largest piece of content one call may give (bytes).
pub const MAX_CONTENT: usize = 1024 * 1024;
/// Most sections on one board.
pub const MAX_SECTIONS: usize = 64;
/// Largest board, its sanitized sections together (bytes).
pub const MAX_BOARD_BYTES: usize = 2 * 1024 * 1024;
/// Most boards kept in memory.
pub const MAX_BOARDS: usize = 256;
/// Most bytes of all boards together.
pub const MAX_TOTAL_BYTES: usize = 64 * 1024 * 1024;
/// Most open event streams (viewers) of one board.
pub const MAX_VIEWERS: usize = 32;

/// The operator's settings for the canvas (`[browser]` in the configuration).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CanvasConfig {
    /// Keep scripts in HTML content (`canvas_scripts`, off by default). The page still runs it
    /// in a sandboxed frame of an opaque origin that may load nothing from the network.
    pub scripts: bool,
    /// The server's address as the user's browser reaches it (`canvas_url`, e.g.
    /// `https://tools.example.com`), for whole links in results; without it the tool gives the
    /// path.
    pub public_url: Option<String>,
}

impl CanvasConfig {
    /// Settings with scripts on or off and an optional public address.
    pub fn new(scripts: bool, public_url: Option<String>) -> Self {
        CanvasConfig { scripts, public_url }
    }
}

/// Takes a canvas screenshot: the browser family's machinery renders `html` (a whole page of
/// sanitized content) and returns PNG bytes.
#[async_trait::async_trait]
pub trait Snapshotter: Send + Sync + std::fmt::Debug {
    /// Renders `html` at `width` x `height` CSS pixels and returns a PNG.
    async fn snapshot(&self, html: String, width: u32, height: u32) -> Result<Vec<u8>, String>;
}

/// Every board of a gate, the tool that draws on them and the pages that show them.
#[derive(Debug, Default)]
pub struct Canvas {
    config: CanvasConfig,
    /// Alive while an HTTP server holds the canvas pages (see [`Canvas::served`]): changes
    /// are then announced to open pages instead of written to files.
    served: Mutex<Weak<Served>>,
    boards: Mutex<Boards>,
    snapshotter: OnceLock<Arc<dyn Snapshotter>>,
}

/// Held by the HTTP route that shows the boards ([`Canvas::served`]).
#[derive(Debug)]
pub struct Served(());

/// Who owns a board: the caller's user and session.
type Owner = (String, String);
/// A BLAKE3 hash of a token or frame id: the maps are keyed by these, never by the secrets.
type Key = [u8; 32];

#[derive(Debug, Default)]
struct Boards {
    by_owner: HashMap<Owner, Board>,
    /// Token hash → owner.
    by_token: HashMap<Key, Owner>,
    /// Current frame id hash → owner.
    by_frame: HashMap<Key, Owner>,
    /// Counts changes, to find the least recently changed board.
    clock: u64,
}

#[derive(Debug)]
struct Board {
    token: String,
    doc: Doc,
    /// The frame id of the current version (128 random bits): the page loads the content from
    /// `/canvas/-/frame/ID`, so the content's address never contains the board's token.
    frame: String,
    touched: u64,
    /// The newest [`page::event`] for open pages; dropping the board ends their streams.
    events: watch::Sender<String>,
}

/// A board's content: what the stdio mode saves beside the page.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Doc {
    title: String,
    sections: Vec<Section>,
    version: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Section {
    name: Option<String>,
    html: String,
}

impl Doc {
    fn bytes(&self) -> usize {
        self.sections.iter().map(|s| s.html.len()).sum::<usize>() + self.title.len()
    }
}

/// One change a call makes to a board.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// Replace everything with one section.
    Present { title: Option<String>, section: Option<String>, html: String },
    /// Replace the named section, or add a section.
    Update { title: Option<String>, section: Option<String>, html: String },
    /// Empty the board.
    Clear,
}

/// What a change left on the board.
#[derive(Debug, Clone)]
pub(crate) struct Changed {
    pub version: u64,
    pub sections: usize,
    pub bytes: usize,
    /// `/canvas/TOKEN` when served over HTTP.
    pub path: Option<String>,
    /// The page written, when not served over HTTP.
    pub file: Option<PathBuf>,
}

/// Why a change was refused; the board is as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanvasError {
    /// The board would hold more than [`MAX_SECTIONS`] sections.
    #[error(
        "the canvas already has {MAX_SECTIONS} sections, the most it holds: replace one by giving its `section` name, \
         or start over with `present`"
    )]
    TooManySections,
    /// The board would hold more than [`MAX_BOARD_BYTES`].
    #[error(
        "the canvas would hold {bytes} bytes of content, more than the {MAX_BOARD_BYTES} it may: replace sections \
         (`update` with a `section` name), or `clear` and present less"
    )]
    TooLarge {
        /// What it would have held.
        bytes: usize,
    },
    /// The operating system's random generator failed (no token could be made).
    #[error("cannot make a canvas token: the system's random generator failed ({reason}); try again")]
    Random {
        /// The operating system's words.
        reason: String,
    },
    /// The stdio mode's page could not be written.
    #[error("cannot write the canvas page {path}: {reason}")]
    Write {
        /// The page's path.
        path: PathBuf,
        /// The operating system's words.
        reason: String,
    },
}

impl Canvas {
    /// A canvas with `config`, not yet served over HTTP.
    pub fn new(config: CanvasConfig) -> Arc<Self> {
        Arc::new(Canvas { config, ..Canvas::default() })
    }

    /// Its settings.
    pub fn config(&self) -> &CanvasConfig {
        &self.config
    }

    /// A marker for the HTTP route that serves [`Canvas::handle`] at `/canvas` to hold: while
    /// it is alive, changes are pushed to open pages and no longer written to files.
    pub fn served(&self) -> Arc<Served> {
        let mut slot = self.served.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(marker) = slot.upgrade() {
            return marker;
        }
        let marker = Arc::new(Served(()));
        *slot = Arc::downgrade(&marker);
        marker
    }

    /// Whether an HTTP server shows the boards now.
    pub fn is_served(&self) -> bool {
        self.served.lock().unwrap_or_else(|p| p.into_inner()).strong_count() > 0
    }

    /// Gives `snapshot` the browser machinery (once; later calls are ignored).
    pub fn set_snapshotter(&self, snapshotter: Arc<dyn Snapshotter>) {
        let _ = self.snapshotter.set(snapshotter);
    }

    /// The `canvas` tool drawing on these boards.
    pub fn tool(self: &Arc<Self>) -> Arc<dyn toolgate_core::Tool> {
        Arc::new(tool::CanvasTool::new(Arc::clone(self)))
    }

    fn boards(&self) -> MutexGuard<'_, Boards> {
        // A panic while holding the lock leaves consistent maps (every change is applied at the
        // end, after its checks), so a poisoned lock is still usable.
        self.boards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `change` to `owner`'s board (made on first use; in the stdio mode, continued
    /// from the page's saved state in `workspace`).
    pub(crate) fn apply(&self, workspace: &Path, owner: Owner, change: Change) -> Result<Changed, CanvasError> {
        let served = self.is_served();
        let saved = if served { None } else { load(workspace, &owner, self.config.scripts) };
        let mut boards = self.boards();
        boards.clock += 1;
        let clock = boards.clock;
        let mut board = match boards.by_owner.remove(&owner) {
            Some(board) => board,
            None => {
                let board = Board::new(saved.unwrap_or_default(), clock)?;
                boards.by_token.insert(key(&board.token), owner.clone());
                boards.by_frame.insert(key(&board.frame), owner.clone());
                board
            }
        };
        let next = changed_doc(&board.doc, change).and_then(|doc| {
            let file = if served { None } else { Some(save(workspace, &owner, &doc, self.config.scripts)?) };
            Ok((doc, file, random_hex::<16>()?))
        });
        let (doc, file, frame) = match next {
            Ok(next) => next,
            Err(e) => {
                boards.by_owner.insert(owner, board);
                return Err(e);
            }
        };
        boards.by_frame.remove(&key(&board.frame));
        boards.by_frame.insert(key(&frame), owner.clone());
        board.doc = doc;
        board.frame = frame;
        board.touched = clock;
        board.events.send_replace(page::event(&board.doc, &board.frame));
        let changed = Changed {
            version: board.doc.version,
            sections: board.doc.sections.len(),
            bytes: board.doc.bytes(),
            path: served.then(|| format!("/canvas/{}", board.token)),
            file,
        };
        boards.by_owner.insert(owner.clone(), board);
        evict(&mut boards, &owner);
        Ok(changed)
    }

    /// The whole page of `owner`'s board as a document for a screenshot (its policy inline);
    /// in the stdio mode a board an earlier process drew is read from its saved state.
    pub(crate) fn document(&self, workspace: &Path, owner: &Owner) -> Option<String> {
        if let Some(board) = self.boards().by_owner.get(owner) {
            return Some(page::file_html(&board.doc, self.config.scripts, false));
        }
        let saved = if self.is_served() { None } else { load(workspace, owner, self.config.scripts) };
        saved.map(|doc| page::file_html(&doc, self.config.scripts, false))
    }

    pub(crate) fn snapshotter(&self) -> Option<&Arc<dyn Snapshotter>> {
        self.snapshotter.get()
    }
}

impl Board {
    fn new(doc: Doc, clock: u64) -> Result<Board, CanvasError> {
        let token = random_hex::<32>()?;
        let frame = random_hex::<16>()?;
        let (events, _) = watch::channel(page::event(&doc, &frame));
        Ok(Board { token, doc, frame, touched: clock, events })
    }
}

/// `doc` after `change`, or why not.
fn changed_doc(doc: &Doc, change: Change) -> Result<Doc, CanvasError> {
    let mut next = doc.clone();
    match change {
        Change::Present { title, section, html } => {
            next.title = title.unwrap_or_default();
            next.sections = vec![Section { name: section, html }];
        }
        Change::Update { title, section, html } => {
            if let Some(title) = title {
                next.title = title;
            }
            let count = next.sections.len();
            match next.sections.iter_mut().find(|s| section.is_some() && s.name == section) {
                Some(existing) => existing.html = html,
                None if count >= MAX_SECTIONS => return Err(CanvasError::TooManySections),
                None => next.sections.push(Section { name: section, html }),
            }
        }
        Change::Clear => {
            next.title.clear();
            next.sections.clear();
        }
    }
    let bytes = next.bytes();
    if bytes > MAX_BOARD_BYTES {
        return Err(CanvasError::TooLarge { bytes });
    }
    next.version += 1;
    Ok(next)
}

/// Drops the least recently changed boards (never `keep`) while there are too many or they
/// hold too much.
fn evict(boards: &mut Boards, keep: &Owner) {
    loop {
        let total: usize = boards.by_owner.values().map(|b| b.doc.bytes()).sum();
        if boards.by_owner.len() <= MAX_BOARDS && total <= MAX_TOTAL_BYTES {
            return;
        }
        let Some(oldest) =
            boards.by_owner.iter().filter(|(o, _)| *o != keep).min_by_key(|(_, b)| b.touched).map(|(o, _)| o.clone())
        else {
            return;
        };
        if let Some(board) = boards.by_owner.remove(&oldest) {
            boards.by_token.remove(&key(&board.token));
            boards.by_frame.remove(&key(&board.frame));
        }
    }
}

fn key(secret: &str) -> Key {
    *blake3::hash(secret.as_bytes()).as_bytes()
}

/// `N` bytes from the operating system's generator, as hex.
fn random_hex<const N: usize>() -> Result<String, CanvasError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| CanvasError::Random { reason: e.to_string() })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The stdio mode's files for `owner`: `.toolgate/canvas/NAME.html` and `NAME.json`, NAME a
/// hash of user and session (file names say nothing about either).
fn files(workspace: &Path, owner: &Owner) -> (PathBuf, PathBuf) {
    let name = blake3::hash(format!("{}\0{}", owner.0, owner.1).as_bytes()).to_hex();
    let dir = workspace.join(".toolgate").join("canvas");
    (dir.join(format!("{}.html", &name[..24])), dir.join(format!("{}.json", &name[..24])))
}

/// The saved state of `owner`'s board, sanitized again (the file is ours, but it is on disk).
fn load(workspace: &Path, owner: &Owner, scripts: bool) -> Option<Doc> {
    let (_, state) = files(workspace, owner);
    let text = std::fs::read_to_string(state).ok()?;
    let mut doc: Doc = serde_json::from_str(&text).ok()?;
    for section in &mut doc.sections {
        section.html = to_safe_html(&section.html, Format::Html, scripts);
    }
    Some(doc)
}

/// Writes the page and the state (each to a temporary file renamed over the old one, so a
/// failed write leaves the old page).
fn save(workspace: &Path, owner: &Owner, doc: &Doc, scripts: bool) -> Result<PathBuf, CanvasError> {
    let (html, state) = files(workspace, owner);
    let fail = |path: &Path, e: std::io::Error| CanvasError::Write { path: path.to_owned(), reason: e.to_string() };
    if let Some(dir) = html.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    }
    let json = serde_json::to_string(doc).unwrap_or_default();
    for (path, body) in [(&state, json), (&html, page::file_html(doc, scripts, true))] {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, body).map_err(|e| fail(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| fail(path, e))?;
    }
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn present(html: &str) -> Change {
        Change::Present { title: None, section: None, html: html.to_owned() }
    }

    #[test]
    fn each_owner_has_a_board_with_its_own_token() {
        let canvas = Canvas::new(CanvasConfig::default());
        let _served = canvas.served();
        let dir = std::env::temp_dir();
        let a = canvas.apply(&dir, ("u".into(), "a".into()), present("<p>a</p>")).unwrap();
        let b = canvas.apply(&dir, ("u".into(), "b".into()), present("<p>b</p>")).unwrap();
        let again = canvas.apply(&dir, ("u".into(), "a".into()), present("<p>a2</p>")).unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(a.path, again.path);
        assert_eq!(again.version, 2);
        assert_eq!(a.path.as_ref().map(|p| p.len()), Some("/canvas/".len() + 64));
    }

    #[test]
    fn a_refused_change_leaves_the_board() {
        let canvas = Canvas::new(CanvasConfig::default());
        let _served = canvas.served();
        let dir = std::env::temp_dir();
        let owner: Owner = ("u".into(), "s".into());
        let head = Change::Present { title: None, section: Some("head".into()), html: "<p>kept</p>".into() };
        canvas.apply(&dir, owner.clone(), head).unwrap();
        for i in 1..MAX_SECTIONS {
            let html = format!("<p>{i}</p>");
            canvas.apply(&dir, owner.clone(), Change::Update { title: None, section: None, html }).unwrap();
        }
        let over = Change::Update { title: None, section: None, html: "<p>one too many</p>".into() };
        assert!(matches!(canvas.apply(&dir, owner.clone(), over), Err(CanvasError::TooManySections)));
        // A named section that exists is replaced, not added.
        let named = Change::Update { title: None, section: Some("head".into()), html: "<p>kept too</p>".into() };
        assert!(canvas.apply(&dir, owner.clone(), named).is_ok());
        let big = "x".repeat(MAX_BOARD_BYTES + 1);
        assert!(matches!(canvas.apply(&dir, owner.clone(), present(&big)), Err(CanvasError::TooLarge { .. })));
        let doc = canvas.document(&dir, &owner).unwrap();
        assert!(doc.contains("kept too") && doc.contains("<p>63</p>"), "{doc}");
    }

    #[test]
    fn boards_past_the_limit_are_evicted_oldest_first() {
        let canvas = Canvas::new(CanvasConfig::default());
        let _served = canvas.served();
        let dir = std::env::temp_dir();
        for i in 0..=MAX_BOARDS {
            canvas.apply(&dir, ("u".into(), i.to_string()), present("<p>x</p>")).unwrap();
        }
        assert!(canvas.document(&dir, &("u".into(), "0".into())).is_none());
        assert!(canvas.document(&dir, &("u".into(), MAX_BOARDS.to_string())).is_some());
        let boards = canvas.boards();
        assert_eq!(boards.by_owner.len(), MAX_BOARDS);
        assert_eq!(boards.by_token.len(), MAX_BOARDS);
        assert_eq!(boards.by_frame.len(), MAX_BOARDS);
    }
}
