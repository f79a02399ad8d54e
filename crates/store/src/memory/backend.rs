//! Where a memory index keeps its rows: the [`IndexBackend`] trait, with SQLite's implementation
//! in `sqlite.rs` (the workspace's state database) and PostgreSQL's in `toolgate-postgres` (one
//! database that several nodes share). [`super::MemoryIndex`] wraps a backend with what every
//! backend shares: the vectors kept in memory while the index's generation stands, and the
//! cache of query vectors.

use std::collections::HashMap;
use std::fmt::Debug;

pub use super::chunk::Chunk;
use super::rank::Vectors;
use crate::StoreError;

/// What the index knows about a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocState {
    /// The sha256 of its content (`""`: its chunks were dropped by a rebuild, to index again;
    /// `"deleted"`: a context file deleted on purpose).
    pub hash: String,
    /// Its file's modification time in nanoseconds (0 for managed notes).
    pub mtime_ns: i64,
    /// Its size in bytes.
    pub size: i64,
}

/// A chunk row.
#[derive(Debug, Clone)]
pub struct ChunkRow {
    /// The note's scope.
    pub scope: String,
    /// The note.
    pub path: String,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, inclusive.
    pub end_line: usize,
    /// The chunk's text.
    pub text: String,
}

/// A note to (re)index.
#[derive(Debug)]
pub struct DocUpdate<'a> {
    /// The note.
    pub path: &'a str,
    /// Its state.
    pub state: DocState,
    /// The note's text when the row is its only copy (managed notes, context files).
    pub content: Option<&'a str>,
    /// Its chunks, in order.
    pub chunks: &'a [Chunk],
    /// Vectors for the chunks (same order), with the model id.
    pub vectors: Option<(&'a str, Vec<Vec<f32>>)>,
    /// Only if the note's stored text is still this (`Some(None)`: there is none): a managed
    /// note's read-modify-write, which another process or node may have raced. `None`: always.
    pub unless_changed_from: Option<Option<&'a str>>,
}

/// What [`super::MemoryIndex::health`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHealth {
    /// Notes indexed (every scope).
    pub notes: usize,
    /// Chunks.
    pub chunks: usize,
    /// Non-empty notes recorded with no chunk (a torn index; or a note of blank lines only).
    pub notes_without_chunks: usize,
    /// Whether the full-text index passed its integrity check.
    pub fts_ok: bool,
}

/// The rows of a memory index: notes (with their hashes and, for managed notes, their text),
/// their chunks searchable by words, and the chunks' vectors per model. A scope is one set of
/// notes (`local`, or one user and agent's); chunk ids are the backend's, unique across scopes.
/// Every change raises the [generation](IndexBackend::generation) in the same transaction, so
/// another process (or node) keeping vectors in memory sees that they moved.
pub trait IndexBackend: Send + Sync + Debug {
    /// Every indexed note of `scope` with its state.
    fn docs(&self, scope: &str) -> Result<HashMap<String, DocState>, StoreError>;

    /// One note's state.
    fn doc(&self, scope: &str, path: &str) -> Result<Option<DocState>, StoreError>;

    /// A note's stored text: `None` when there is no row, `Some(None)` when the row has none
    /// (a note in a file, or a deletion marker).
    fn doc_content(&self, scope: &str, path: &str) -> Result<Option<Option<String>>, StoreError>;

    /// Notes of `scope` whose chunks a rebuild dropped (hash `""`) with their stored text.
    fn stale_docs(&self, scope: &str) -> Result<Vec<(String, String)>, StoreError>;

    /// Updates only the stat part of a note whose content hash did not change.
    fn touch(&self, scope: &str, path: &str, state: &DocState) -> Result<(), StoreError>;

    /// Vectors (little-endian `f32` blobs) already stored for chunks of `path` under `model`,
    /// by the chunk's hash ([`Chunk::hash`]).
    fn cached_vectors(&self, scope: &str, path: &str, model: &str) -> Result<HashMap<String, Vec<u8>>, StoreError>;

    /// Replaces a note's row, chunks and vectors in one transaction. Chunks with no vector in
    /// `update` take the blob `reuse` has for their hash, under `reuse_model`. Returns `false`,
    /// changing nothing, when `update.unless_changed_from` is set and the stored text differs.
    fn replace(
        &self,
        scope: &str,
        update: &DocUpdate<'_>,
        reuse: &HashMap<String, Vec<u8>>,
        reuse_model: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Removes a note, its chunks and their vectors.
    fn remove(&self, scope: &str, path: &str) -> Result<(), StoreError>;

    /// The change counter: raised by every change, in its transaction.
    fn generation(&self) -> Result<i64, StoreError>;

    /// Chunks of `scope` with no vector for `model`: (id, heading, text), by id, at most `limit`.
    fn missing_vectors(&self, scope: &str, model: &str, limit: usize)
    -> Result<Vec<(i64, String, String)>, StoreError>;

    /// (notes of `scope`, notes of `scope` whose every chunk has a vector for `model`).
    fn embed_progress(&self, scope: &str, model: &str) -> Result<(usize, usize), StoreError>;

    /// Stores vectors for chunks of `scope` (replacing another model's); a chunk that is gone
    /// is skipped.
    fn put_vectors(&self, scope: &str, model: &str, vecs: &[(i64, Vec<f32>)]) -> Result<(), StoreError>;

    /// Chunk ids of `scopes` containing any of `terms` (lowercase letters and digits only, so
    /// no term is query syntax), best first, at most `limit`. Words match by their stems.
    fn full_text(&self, scopes: (&str, &str), terms: &[String], limit: usize) -> Result<Vec<i64>, StoreError>;

    /// Every vector of `scopes` under `model` of length `dims`, or `None` when they are more
    /// than `max_floats` floats in all (too many to keep in memory).
    fn load_vectors(
        &self,
        scopes: (&str, &str),
        model: &str,
        dims: usize,
        max_floats: usize,
    ) -> Result<Option<Vectors>, StoreError>;

    /// The `limit` nearest vectors to `query` without keeping them (a set too big to keep):
    /// (chunk id, cosine distance), nearest first, ties by id.
    fn nearest_scan(
        &self,
        scopes: (&str, &str),
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError>;

    /// The chunks with these ids (ids that are gone are absent).
    fn chunks(&self, ids: &[i64]) -> Result<HashMap<i64, ChunkRow>, StoreError>;

    /// Whether the full-text index is sound.
    fn check(&self) -> bool;

    /// Rebuilds the full-text index; when the chunks themselves are unreadable, forgets every
    /// note's chunks (hash `""`) so they are indexed again.
    fn rebuild(&self) -> Result<(), StoreError>;

    /// What the index holds and whether it is sound.
    fn health(&self) -> Result<IndexHealth, StoreError>;

    /// Runs raw SQL on the backend (tests damage the index with it).
    fn execute_batch_for_tests(&self, sql: &str) -> Result<(), StoreError>;
}
