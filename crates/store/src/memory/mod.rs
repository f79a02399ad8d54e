//! Agent memory: Markdown notes, their search index (FTS5 + vectors fused with Reciprocal Rank
//! Fusion), and the [`MemoryStore`] trait the memory tools use without knowing where notes live.
//!
//! - [`LocalMemory`]: one user; notes are `MEMORY.md` and `memory/**/*.md` in the workspace, the
//!   index is in `.toolgate/state.db`, and edits made on disk are picked up before a search.
//! - [`ManagedMemory`]: many users; notes are rows of the state database per (user, agent) with
//!   the agent's global notes as the fallback, and the context files (`SOUL.md`, `USER.md`, ...)
//!   per user and agent beside them.
//! - `index`: [`MemoryIndex`], an index on one [`IndexBackend`] (`backend`) with the vectors and
//!   query vectors kept in memory; `sqlite`: SQLite's backend (chunks, FTS5, vectors per model
//!   id, note hashes; `toolgate-postgres` has PostgreSQL's); `chunk`: splitting notes; `paths`:
//!   which paths are memory; `rank`: vector scans, query-vector cache and rank fusion (shared
//!   with `skill_search`); `vector`: sqlite-vec registration.

mod backend;
mod chunk;
mod index;
mod local;
mod managed;
pub mod paths;
pub mod rank;
mod search;
mod sqlite;
mod vector;

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

pub use backend::{Chunk, ChunkRow, DocState, DocUpdate, IndexBackend, IndexHealth};
pub use index::MemoryIndex;
pub(crate) use index::sha256_hex;
pub(crate) use sqlite::SCHEMA;
// Team task search quotes a model's query the same way (`sessions.rs`).
pub use local::{IndexProgress, LocalMemory, SyncReport};
pub use managed::{ManagedMemory, Stored};
pub(crate) use search::fts_expression;
pub use search::query_terms;
pub(crate) use vector::to_blob as vector_blob;

use crate::StoreError;

/// Turns text into vectors. Implementations: `toolgate-embed` (a local model, OpenAI-compatible
/// endpoints). Calls block; the memory tools run them off the async runtime.
pub trait Embedder: Send + Sync + Debug {
    /// Identifies the model (and endpoint): vectors of different ids never mix.
    fn model_id(&self) -> &str;
    /// Length of every vector.
    fn dims(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// How long a search waits for its query's vector before it answers by words alone (the
    /// vector, once made, is cached for the next search). `None` (the default): it waits, as
    /// for a remote endpoint, whose latency is the network's.
    fn query_budget(&self) -> Option<std::time::Duration> {
        None
    }

    /// Gets ready to embed (loads a local model) so the first search does not wait for it:
    /// the background indexer calls it on its own thread when it starts. Default: nothing.
    fn warm_up(&self) {}
}

/// Why embedding failed (search falls back to full-text and says so).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct EmbedError(pub String);

/// Embeds `texts` `batch` at a time with `embed`, checking that every answer has one vector per
/// text and `dims` dimensions: the one batching loop of memory, skill and agent search.
pub fn embed_batches(
    texts: &[&str],
    batch: usize,
    dims: usize,
    mut embed: impl FnMut(&[&str]) -> Result<Vec<Vec<f32>>, EmbedError>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(batch.max(1)) {
        let vectors = embed(chunk)?;
        if vectors.len() != chunk.len() {
            return Err(EmbedError(format!(
                "the embedding model returned {} vectors for {} texts",
                vectors.len(),
                chunk.len()
            )));
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != dims) {
            return Err(EmbedError(format!("the embedding model returned {} dimensions, expected {dims}", v.len())));
        }
        out.extend(vectors);
    }
    Ok(out)
}

/// Whose memory: managed mode keys notes by user and agent; local mode has one user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Scope {
    /// The user.
    pub user: String,
    /// The agent.
    pub agent: String,
}

/// Search parameters.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Most hits returned.
    pub limit: usize,
    /// Lowest score (0..1) returned.
    pub min_score: f64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { limit: 6, min_score: 0.35 }
    }
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The note.
    pub path: String,
    /// First line of the matching chunk, 1-based.
    pub start_line: usize,
    /// Last line, inclusive.
    pub end_line: usize,
    /// Fused score, 0..1 (1 = ranked first by every method that ran).
    pub score: f64,
    /// A short excerpt.
    pub snippet: String,
    /// Whether full-text search found it.
    pub by_text: bool,
    /// Whether vector search found it.
    pub by_meaning: bool,
}

/// What a search returned and how it was done.
#[derive(Debug, Clone, Default)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The embedding model used, or `None` when the search was full-text only.
    pub model: Option<String>,
    /// Things the caller should know (full-text only and why, notes skipped, index rebuilt).
    pub notes: Vec<String>,
}

/// Replace or append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Replace the note's content.
    Replace,
    /// Add to the end (on a new line).
    Append,
}

impl WriteMode {
    /// A note's text after this write of `content` over `old` (`None`: no note yet): an append
    /// goes on a line of its own, and a note ends with a newline.
    pub(crate) fn apply(self, old: Option<&str>, content: &str) -> String {
        let new = match (self, old) {
            (WriteMode::Append, Some(old)) if !old.is_empty() => {
                let sep = if old.ends_with('\n') { "" } else { "\n" };
                format!("{old}{sep}{content}")
            }
            _ => content.to_owned(),
        };
        if new.ends_with('\n') || new.is_empty() { new } else { format!("{new}\n") }
    }
}

/// What a write did.
#[derive(Debug, Clone)]
pub struct Written {
    /// The note.
    pub path: String,
    /// Whether it was created.
    pub created: bool,
    /// Its size now, in bytes.
    pub bytes: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// Things the caller should know (not embedded, and why).
    pub notes: Vec<String>,
}

/// A note or folder in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path (folders end with `/`).
    pub path: String,
    /// Size in bytes (0 for folders).
    pub bytes: u64,
    /// Nesting below the listed folder (0 = directly in it).
    pub depth: usize,
}

/// The memory API the tools use; local and managed mode implement it.
pub trait MemoryStore: Send + Sync + Debug {
    /// A note's text.
    fn read(&self, scope: &Scope, path: &str) -> Result<String, MemoryError>;
    /// Writes a note atomically and indexes it before returning.
    fn write(&self, scope: &Scope, path: &str, content: &str, mode: WriteMode) -> Result<Written, MemoryError>;
    /// Notes and folders under `dir` (`""` = everything), down to `depth` levels.
    fn tree(&self, scope: &Scope, dir: &str, depth: usize) -> Result<Vec<Entry>, MemoryError>;
    /// Searches notes by words and meaning.
    fn search(&self, scope: &Scope, query: &str, options: &SearchOptions) -> Result<SearchResults, MemoryError>;
    /// Re-indexes one note after something else changed it (or removes it from the index if it
    /// is gone).
    fn reindex(&self, scope: &Scope, path: &str) -> Result<(), MemoryError>;

    /// Compares every note with the index now (a file watcher lost track of some changes).
    /// Managed notes change only through the store: nothing to do.
    fn rescan(&self) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Says that a file watcher now reports every change to the notes (through
    /// [`MemoryStore::reindex`] and [`MemoryStore::rescan`]), so searches can skip their
    /// periodic scan of the notes on disk.
    fn set_watched(&self, _watched: bool) {}

    /// Starts indexing the notes on one background thread (local mode; `serve` calls it when it
    /// opens a workspace): searches meanwhile answer at once from what is indexed (words first,
    /// then vectors) and say how far it is. Managed notes are indexed as they are written:
    /// nothing to do.
    fn start_indexing(self: Arc<Self>) {}

    /// Indexes every note now (`toolgate memory index`), telling `progress` how far it is.
    /// Managed notes are indexed as they are written: nothing to do.
    fn index_all(&self, _progress: &mut dyn FnMut(&IndexProgress)) -> Result<IndexProgress, MemoryError> {
        Ok(IndexProgress::default())
    }
}

/// Why a memory operation failed; `Display` is written for a model to act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The path is not a memory path.
    #[error("`{path}` cannot be used: {reason}")]
    InvalidPath {
        /// The path given (shortened).
        path: String,
        /// Why.
        reason: String,
    },
    /// No such note.
    #[error("no memory note `{path}`; use memory_tree to see the notes")]
    NotFound {
        /// The path.
        path: String,
    },
    /// The note or the content is over the size cap.
    #[error("`{path}` would be {bytes} bytes, over the {max}-byte limit for a note; split it into several notes")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        bytes: u64,
        /// The cap.
        max: u64,
    },
    /// Not UTF-8 text.
    #[error("`{path}` is not UTF-8 text; memory notes are Markdown")]
    NotText {
        /// The path.
        path: String,
    },
    /// A bad parameter value.
    #[error("{0}")]
    Invalid(String),
    /// The file system failed.
    #[error("cannot access `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The index failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
