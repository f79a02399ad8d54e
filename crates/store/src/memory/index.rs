//! [`MemoryIndex`]: a memory index on one [`IndexBackend`] (SQLite by default, `sqlite.rs`), with
//! what every backend shares: the vectors of a search kept in memory while the index's
//! generation stands, the "no chunk lacks a vector" answer remembered the same way, and the
//! cache of query vectors.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::backend::{ChunkRow, DocState, DocUpdate, IndexBackend, IndexHealth};
use super::rank::{QueryVectors, Vectors};
use super::sqlite::SqliteIndex;
use crate::StoreError;

/// The memory index: notes' hashes, chunks searchable by words, and vectors per model id.
#[derive(Debug)]
pub struct MemoryIndex {
    backend: Box<dyn IndexBackend>,
    /// Vectors kept in memory for search by meaning, per (scopes, model), valid while the
    /// backend's generation has not moved.
    vectors: Mutex<HashMap<(String, String, String), Arc<VectorSet>>>,
    /// (scope, model) pairs with no chunk lacking a vector, at the generation that was checked.
    complete: Mutex<HashMap<(String, String), i64>>,
    /// Recent query vectors by (model, query): agents ask the same thing again (retries, each
    /// session's first look at memory), and embedding is most of a search's time.
    queries: Arc<QueryVectors>,
}

/// Most query vectors kept.
const MAX_CACHED_QUERIES: usize = 256;
/// Most floats kept in memory per vector set (128 MB); bigger sets are scanned by the backend.
const MAX_CACHED_FLOATS: usize = 32 << 20;
/// Most vector sets kept (managed mode has one per user and agent).
const MAX_CACHED_SETS: usize = 16;

/// The vectors of some scopes under one model, as of an index generation.
#[derive(Debug)]
struct VectorSet {
    generation: i64,
    vectors: Vectors,
}

/// Whether an error means the database (or the FTS index) is damaged.
pub(crate) fn is_corrupt(e: &StoreError) -> bool {
    match e {
        StoreError::Query { source: rusqlite::Error::SqliteFailure(f, msg), .. } => {
            matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
                || msg.as_deref().is_some_and(|m| m.contains("malformed") || m.contains("corrupt"))
        }
        _ => false,
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryIndex {
    /// The index in the state database at `path`, or in memory when `None`. Its connection is
    /// opened (and the database migrated) on first use, so a gate that makes no memory call
    /// never opens it; an error then is that use's error.
    pub fn open(path: Option<&Path>) -> Result<MemoryIndex, StoreError> {
        Ok(MemoryIndex::with_backend(Box::new(SqliteIndex::open(path)?)))
    }

    /// The index on another backend (`toolgate-postgres`: one database that several nodes share).
    pub fn with_backend(backend: Box<dyn IndexBackend>) -> MemoryIndex {
        MemoryIndex {
            backend,
            vectors: Mutex::default(),
            complete: Mutex::default(),
            queries: Arc::new(QueryVectors::new(MAX_CACHED_QUERIES)),
        }
    }

    /// Forgets what is kept in memory (the index was rebuilt or changed behind the generation).
    fn forget(&self) {
        lock(&self.vectors).clear();
        lock(&self.complete).clear();
    }

    pub(crate) fn docs(&self, scope: &str) -> Result<HashMap<String, DocState>, StoreError> {
        self.backend.docs(scope)
    }

    pub(crate) fn doc(&self, scope: &str, path: &str) -> Result<Option<DocState>, StoreError> {
        self.backend.doc(scope, path)
    }

    pub(crate) fn doc_content(&self, scope: &str, path: &str) -> Result<Option<Option<String>>, StoreError> {
        self.backend.doc_content(scope, path)
    }

    pub(crate) fn stale_docs(&self, scope: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.backend.stale_docs(scope)
    }

    pub(crate) fn touch(&self, scope: &str, path: &str, state: &DocState) -> Result<(), StoreError> {
        self.backend.touch(scope, path, state)
    }

    pub(crate) fn cached_vectors(
        &self,
        scope: &str,
        path: &str,
        model: &str,
    ) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        self.backend.cached_vectors(scope, path, model)
    }

    pub(crate) fn replace(
        &self,
        scope: &str,
        update: &DocUpdate<'_>,
        reuse: &HashMap<String, Vec<u8>>,
        reuse_model: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.backend.replace(scope, update, reuse, reuse_model)
    }

    pub(crate) fn remove(&self, scope: &str, path: &str) -> Result<(), StoreError> {
        self.backend.remove(scope, path)
    }

    /// Chunks of `scope` with no vector for `model` (after a model change), at most `limit`.
    pub(crate) fn missing_vectors(
        &self,
        scope: &str,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        // Every search asks; the answer is "none" until the index changes, and finding that out
        // joins every chunk: remembered per (scope, model) with the generation it was true at
        // (read first: a change after it makes the next search look again).
        let generation = self.backend.generation()?;
        let key = (scope.to_owned(), model.to_owned());
        if lock(&self.complete).get(&key) == Some(&generation) {
            return Ok(Vec::new());
        }
        let missing = self.backend.missing_vectors(scope, model, limit)?;
        if missing.is_empty() {
            let mut complete = lock(&self.complete);
            if complete.len() >= MAX_CACHED_SETS {
                complete.clear();
            }
            complete.insert(key, generation);
        }
        Ok(missing)
    }

    pub(crate) fn embed_progress(&self, scope: &str, model: &str) -> Result<(usize, usize), StoreError> {
        self.backend.embed_progress(scope, model)
    }

    pub(crate) fn put_vectors(&self, scope: &str, model: &str, vecs: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        self.backend.put_vectors(scope, model, vecs)
    }

    /// Full-text candidates: chunk ids, best first. `terms` come from `search::query_terms`
    /// (letters and digits only). `scopes`: the two scopes searched together (the same one twice
    /// for local notes; a user's and the agent's global notes in managed mode).
    pub(crate) fn fts(&self, scopes: (&str, &str), terms: &[String], limit: usize) -> Result<Vec<i64>, StoreError> {
        self.backend.full_text(scopes, terms, limit)
    }

    /// Vector candidates: (chunk id, cosine distance), nearest first (ties by id). The vectors
    /// are read once and kept in memory until the index changes (any process's change raises the
    /// backend's generation); a set too big to keep is scanned by the backend instead.
    pub(crate) fn nearest(
        &self,
        scopes: (&str, &str),
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let key = (scopes.0.to_owned(), scopes.1.to_owned(), model.to_owned());
        // Read before the vectors: a change in between makes the next search read them again.
        let generation = self.backend.generation()?;
        let cached = lock(&self.vectors).get(&key).cloned();
        let set = match cached {
            Some(set) if set.generation == generation && set.vectors.dims() == query.len() => Some(set),
            _ => match self.backend.load_vectors(scopes, model, query.len(), MAX_CACHED_FLOATS)? {
                Some(vectors) => {
                    let set = Arc::new(VectorSet { generation, vectors });
                    let mut sets = lock(&self.vectors);
                    if sets.len() >= MAX_CACHED_SETS {
                        sets.clear();
                    }
                    sets.insert(key, set.clone());
                    Some(set)
                }
                None => None,
            },
        };
        match set {
            Some(set) => Ok(set.vectors.nearest(query, limit)),
            None => self.backend.nearest_scan(scopes, model, query, limit),
        }
    }

    /// Whether the query's vector under `embedder`'s model is cached.
    pub(crate) fn has_query(&self, embedder: &dyn super::Embedder, query: &str) -> bool {
        self.queries.contains(embedder, query)
    }

    /// The query-vector cache (a query embedded past a search's budget still lands in it).
    pub(crate) fn query_cache(&self) -> Arc<QueryVectors> {
        Arc::clone(&self.queries)
    }

    /// The query's vector from `embedder`, from the cache when the same query was embedded
    /// by the same model recently. `Ok(None)`: the model returned nothing.
    pub(crate) fn embed_query(
        &self,
        embedder: &dyn super::Embedder,
        query: &str,
    ) -> Result<Option<Vec<f32>>, super::EmbedError> {
        self.queries.embed(embedder, query)
    }

    pub(crate) fn chunks(&self, ids: &[i64]) -> Result<HashMap<i64, ChunkRow>, StoreError> {
        self.backend.chunks(ids)
    }

    /// Whether the full-text index is sound (any failure of the check counts as damage).
    pub(crate) fn check(&self) -> bool {
        self.backend.check()
    }

    /// Rebuilds the full-text index from the chunks; when the chunks themselves are unreadable,
    /// forgets every note of every scope so the next scan indexes them again (notes in files are
    /// never touched; managed notes' content is kept in their rows).
    pub(crate) fn rebuild(&self) -> Result<(), StoreError> {
        self.forget();
        self.backend.rebuild()
    }

    /// What the index holds and whether it is sound (checks after a crash, `toolgate doctor`).
    pub fn health(&self) -> Result<IndexHealth, StoreError> {
        self.backend.health()
    }

    /// Runs raw SQL on the index's backend (tests damage the index with it).
    #[doc(hidden)]
    pub fn execute_batch_for_tests(&self, sql: &str) -> Result<(), StoreError> {
        self.forget();
        self.backend.execute_batch_for_tests(sql)
    }
}
