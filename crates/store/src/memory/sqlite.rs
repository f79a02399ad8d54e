//! The memory index in SQLite ([`SqliteIndex`]): notes' hashes, chunks, FTS5 over the chunks,
//! vectors per model id (sqlite-vec for sets too big to keep in memory), and `memory_meta`'s
//! change counter, in the workspace's state database.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use rusqlite::{Connection, OptionalExtension, params};

use super::backend::{ChunkRow, DocState, DocUpdate, IndexBackend, IndexHealth};
use super::rank::Vectors;
use super::vector;
use crate::StoreError;
use crate::error::Context;

/// The memory tables (a migration in `db.rs`). Idempotent (`IF NOT EXISTS`): while other
/// migrations land beside it, its position in the list may change once.
pub(crate) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS memory_docs (
        scope TEXT NOT NULL,
        path TEXT NOT NULL,
        hash TEXT NOT NULL,
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        content TEXT,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, path)
    );
    CREATE TABLE IF NOT EXISTS memory_chunks (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        path TEXT NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        heading TEXT NOT NULL,
        text TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS memory_chunks_doc ON memory_chunks(scope, path);
    CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
        path, text, content='memory_chunks', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER IF NOT EXISTS memory_chunks_ai AFTER INSERT ON memory_chunks BEGIN
        INSERT INTO memory_fts(rowid, path, text) VALUES (new.id, new.path, new.text);
    END;
    CREATE TRIGGER IF NOT EXISTS memory_chunks_ad AFTER DELETE ON memory_chunks BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, path, text) VALUES ('delete', old.id, old.path, old.text);
    END;
    CREATE TABLE IF NOT EXISTS memory_vectors (
        chunk_id INTEGER PRIMARY KEY REFERENCES memory_chunks(id) ON DELETE CASCADE,
        scope TEXT NOT NULL,
        model TEXT NOT NULL,
        vec BLOB NOT NULL
    );
    CREATE INDEX IF NOT EXISTS memory_vectors_model ON memory_vectors(scope, model);";

const TRIGGERS: &str = "
    CREATE TRIGGER memory_chunks_ai AFTER INSERT ON memory_chunks BEGIN
        INSERT INTO memory_fts(rowid, path, text) VALUES (new.id, new.path, new.text);
    END;
    CREATE TRIGGER memory_chunks_ad AFTER DELETE ON memory_chunks BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, path, text) VALUES ('delete', old.id, old.path, old.text);
    END;
";

const FTS_SCHEMA: &str = "CREATE VIRTUAL TABLE memory_fts USING fts5(
        path, text, content='memory_chunks', content_rowid='id', tokenize='porter unicode61'
    );";

/// The memory index on its own connection to a state database, opened on first use: a gate
/// that makes no memory call (a one-shot `toolgate call` of another tool) never opens it, and
/// a connection parses the whole schema when it first reads (docs/benchmarks.md, "Cold start").
#[derive(Debug)]
pub(crate) struct SqliteIndex {
    /// The state database; `None`: a private in-memory index.
    path: Option<PathBuf>,
    conn: OnceLock<Mutex<Connection>>,
}

/// Bumps the change counter (in the same transaction as the change).
const BUMP: &str = "UPDATE memory_meta SET generation = generation + 1";

impl SqliteIndex {
    /// The index in the state database at `path`, or in memory when `None`. The connection is
    /// opened (and the database migrated) on first use; an error then is that use's error.
    pub(crate) fn open(path: Option<&Path>) -> Result<SqliteIndex, StoreError> {
        Ok(SqliteIndex { path: path.map(Path::to_path_buf), conn: OnceLock::new() })
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        vector::register();
        Ok(match &self.path {
            Some(p) => crate::db::open_connection(p)?,
            None => {
                let mut conn = Connection::open_in_memory().doing("opening an in-memory index")?;
                conn.execute_batch("PRAGMA foreign_keys = ON;").doing("opening an in-memory index")?;
                crate::db::migrate(&mut conn)?;
                conn
            }
        })
    }

    /// The connection, opened now if this is the first use.
    fn lock(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        let conn = match self.conn.get() {
            Some(conn) => conn,
            None => {
                let opened = self.connect()?;
                // Two first uses at once: one connection is kept, the other closed.
                self.conn.get_or_init(|| Mutex::new(opened))
            }
        };
        Ok(conn.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl IndexBackend for SqliteIndex {
    /// Every indexed note of `scope` with its state.
    fn docs(&self, scope: &str) -> Result<HashMap<String, DocState>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached("SELECT path, hash, mtime_ns, size FROM memory_docs WHERE scope = ?1")
            .doing("listing indexed notes")?;
        let rows = stmt
            .query_map([scope], |r| {
                Ok((r.get::<_, String>(0)?, DocState { hash: r.get(1)?, mtime_ns: r.get(2)?, size: r.get(3)? }))
            })
            .doing("listing indexed notes")?;
        rows.collect::<Result<HashMap<_, _>, _>>().doing("listing indexed notes")
    }

    /// One note's state.
    fn doc(&self, scope: &str, path: &str) -> Result<Option<DocState>, StoreError> {
        let conn = self.lock()?;
        conn.query_row(
            "SELECT hash, mtime_ns, size FROM memory_docs WHERE scope = ?1 AND path = ?2",
            params![scope, path],
            |r| Ok(DocState { hash: r.get(0)?, mtime_ns: r.get(1)?, size: r.get(2)? }),
        )
        .optional()
        .doing("reading a note's index state")
    }

    /// A managed note's stored row: `None` when there is none, `Some(None)` when it is a
    /// deletion marker (no content).
    fn doc_content(&self, scope: &str, path: &str) -> Result<Option<Option<String>>, StoreError> {
        let conn = self.lock()?;
        conn.query_row("SELECT content FROM memory_docs WHERE scope = ?1 AND path = ?2", params![scope, path], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()
        .doing("reading a stored note")
    }

    /// Managed notes of `scope` whose chunks were dropped by a rebuild (hash cleared), with
    /// their content, to be indexed again.
    fn stale_docs(&self, scope: &str) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT path, content FROM memory_docs WHERE scope = ?1 AND hash = '' AND content IS NOT NULL",
            )
            .doing("listing notes to index again")?;
        let rows = stmt.query_map([scope], |r| Ok((r.get(0)?, r.get(1)?))).doing("listing notes to index again")?;
        rows.collect::<Result<Vec<_>, _>>().doing("listing notes to index again")
    }

    /// Updates only the stat part of a note whose content hash did not change.
    fn touch(&self, scope: &str, path: &str, state: &DocState) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.execute(
            "UPDATE memory_docs SET mtime_ns = ?3, size = ?4 WHERE scope = ?1 AND path = ?2",
            params![scope, path, state.mtime_ns, state.size],
        )
        .map(drop)
        .doing("updating a note's index state")
    }

    /// Vectors already stored for chunks of `path` under `model`, by chunk hash (unchanged chunks
    /// of an edited note are not embedded again).
    fn cached_vectors(&self, scope: &str, path: &str, model: &str) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.hash, v.vec FROM memory_chunks c JOIN memory_vectors v ON v.chunk_id = c.id
                 WHERE c.scope = ?1 AND c.path = ?2 AND v.model = ?3",
            )
            .doing("reading cached vectors")?;
        let rows = stmt
            .query_map(params![scope, path, model], |r| Ok((r.get(0)?, r.get(1)?)))
            .doing("reading cached vectors")?;
        rows.collect::<Result<HashMap<_, _>, _>>().doing("reading cached vectors")
    }

    /// Replaces a note's chunks (and vectors) in one transaction.
    fn replace(
        &self,
        scope: &str,
        update: &DocUpdate<'_>,
        reuse: &HashMap<String, Vec<u8>>,
        reuse_model: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.lock()?;
        let tx = match update.unless_changed_from {
            // Took the write lock first: the text read is the one replaced.
            Some(expected) => {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .doing("indexing a note")?;
                let now: Option<String> = tx
                    .query_row(
                        "SELECT content FROM memory_docs WHERE scope = ?1 AND path = ?2",
                        params![scope, update.path],
                        |r| r.get(0),
                    )
                    .optional()
                    .doing("indexing a note")?
                    .flatten();
                if now.as_deref() != expected {
                    return Ok(false);
                }
                tx
            }
            None => conn.transaction().doing("indexing a note")?,
        };
        tx.execute("DELETE FROM memory_chunks WHERE scope = ?1 AND path = ?2", params![scope, update.path])
            .doing("indexing a note")?;
        tx.execute(
            "INSERT INTO memory_docs (scope, path, hash, mtime_ns, size, content, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (scope, path) DO UPDATE SET hash = ?3, mtime_ns = ?4, size = ?5, content = ?6, updated_ms = ?7",
            params![
                scope,
                update.path,
                update.state.hash,
                update.state.mtime_ns,
                update.state.size,
                update.content,
                now_ms()
            ],
        )
        .doing("indexing a note")?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO memory_chunks (scope, path, start_line, end_line, heading, text, hash)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .doing("indexing a note")?;
            let mut insert_vec = tx
                .prepare_cached("INSERT INTO memory_vectors (chunk_id, scope, model, vec) VALUES (?1, ?2, ?3, ?4)")
                .doing("indexing a note")?;
            for (i, c) in update.chunks.iter().enumerate() {
                let hash = c.hash();
                insert
                    .execute(params![
                        scope,
                        update.path,
                        c.start_line as i64,
                        c.end_line as i64,
                        c.heading,
                        c.text,
                        hash
                    ])
                    .doing("indexing a note")?;
                let id = tx.last_insert_rowid();
                if let Some((model, vecs)) = &update.vectors {
                    if let Some(v) = vecs.get(i) {
                        insert_vec.execute(params![id, scope, model, vector::to_blob(v)]).doing("indexing a note")?;
                    }
                } else if let (Some(model), Some(blob)) = (reuse_model, reuse.get(&hash)) {
                    insert_vec.execute(params![id, scope, model, blob]).doing("indexing a note")?;
                }
            }
        }
        tx.execute(BUMP, []).doing("indexing a note")?;
        tx.commit().doing("indexing a note")?;
        Ok(true)
    }

    /// Removes a note from the index.
    fn remove(&self, scope: &str, path: &str) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction().doing("removing a note from the index")?;
        tx.execute("DELETE FROM memory_chunks WHERE scope = ?1 AND path = ?2", params![scope, path])
            .doing("removing a note from the index")?;
        tx.execute("DELETE FROM memory_docs WHERE scope = ?1 AND path = ?2", params![scope, path])
            .doing("removing a note from the index")?;
        tx.execute(BUMP, []).doing("removing a note from the index")?;
        tx.commit().doing("removing a note from the index")
    }

    /// Chunks of `scope` with no vector for `model` (after a model change), at most `limit`.
    fn missing_vectors(
        &self,
        scope: &str,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.id, c.heading, c.text FROM memory_chunks c
                 LEFT JOIN memory_vectors v ON v.chunk_id = c.id AND v.model = ?2
                 WHERE c.scope = ?1 AND v.chunk_id IS NULL ORDER BY c.id LIMIT ?3",
            )
            .doing("finding chunks to embed")?;
        let rows = stmt
            .query_map(params![scope, model, limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .doing("finding chunks to embed")?;
        rows.collect::<Result<Vec<_>, _>>().doing("finding chunks to embed")
    }

    /// (notes of `scope`, notes of `scope` whose every chunk has a vector for `model`): how far
    /// embedding is, for the progress line of a search during indexing.
    fn embed_progress(&self, scope: &str, model: &str) -> Result<(usize, usize), StoreError> {
        let conn = self.lock()?;
        let (notes, lacking): (i64, i64) = conn
            .prepare_cached(
                "SELECT (SELECT count(*) FROM memory_docs WHERE scope = ?1),
                        (SELECT count(DISTINCT c.path) FROM memory_chunks c
                         WHERE c.scope = ?1 AND NOT EXISTS
                            (SELECT 1 FROM memory_vectors v WHERE v.chunk_id = c.id AND v.model = ?2))",
            )
            .and_then(|mut stmt| stmt.query_row(params![scope, model], |r| Ok((r.get(0)?, r.get(1)?))))
            .doing("counting embedded notes")?;
        let notes = notes.max(0) as usize;
        Ok((notes, notes.saturating_sub(lacking.max(0) as usize)))
    }

    /// Stores vectors for chunks (replacing another model's).
    fn put_vectors(&self, scope: &str, model: &str, vecs: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction().doing("storing vectors")?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO memory_vectors (chunk_id, scope, model, vec)
                     SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM memory_chunks WHERE id = ?1)",
                )
                .doing("storing vectors")?;
            for (id, v) in vecs {
                stmt.execute(params![id, scope, model, vector::to_blob(v)]).doing("storing vectors")?;
            }
        }
        tx.execute(BUMP, []).doing("storing vectors")?;
        tx.commit().doing("storing vectors")
    }

    fn full_text(&self, scopes: (&str, &str), terms: &[String], limit: usize) -> Result<Vec<i64>, StoreError> {
        // Each term quoted: letters and digits only, so none is FTS5 syntax; any term matches.
        let expr = terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR ");
        if expr.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.id FROM memory_fts f JOIN memory_chunks c ON c.id = f.rowid
                 WHERE memory_fts MATCH ?1 AND c.scope IN (?2, ?4) ORDER BY bm25(memory_fts), c.id LIMIT ?3",
            )
            .doing("searching notes")?;
        let rows =
            stmt.query_map(params![expr, scopes.0, limit as i64, scopes.1], |r| r.get(0)).doing("searching notes")?;
        rows.collect::<Result<Vec<_>, _>>().doing("searching notes")
    }

    fn generation(&self) -> Result<i64, StoreError> {
        generation(&*self.lock()?).doing("reading the memory index's generation")
    }

    fn load_vectors(
        &self,
        scopes: (&str, &str),
        model: &str,
        dims: usize,
        max_floats: usize,
    ) -> Result<Option<Vectors>, StoreError> {
        load_vectors(&*self.lock()?, scopes, model, dims, max_floats)
    }

    /// sqlite-vec's brute-force scan.
    fn nearest_scan(
        &self,
        scopes: (&str, &str),
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT chunk_id, vec_distance_cosine(vec, ?1) AS d FROM memory_vectors
                 WHERE scope IN (?2, ?5) AND model = ?3 ORDER BY d, chunk_id LIMIT ?4",
            )
            .doing("searching notes by meaning")?;
        let rows = stmt
            .query_map(params![vector::to_blob(query), scopes.0, model, limit as i64, scopes.1], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .doing("searching notes by meaning")?;
        rows.collect::<Result<Vec<_>, _>>().doing("searching notes by meaning")
    }

    /// The chunks with these ids.
    fn chunks(&self, ids: &[i64]) -> Result<HashMap<i64, ChunkRow>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached("SELECT path, start_line, end_line, text, scope FROM memory_chunks WHERE id = ?1")
            .doing("reading chunks")?;
        let mut out = HashMap::new();
        for id in ids {
            let row = stmt
                .query_row([id], |r| {
                    Ok(ChunkRow {
                        path: r.get(0)?,
                        start_line: r.get::<_, i64>(1)? as usize,
                        end_line: r.get::<_, i64>(2)? as usize,
                        text: r.get(3)?,
                        scope: r.get(4)?,
                    })
                })
                .optional()
                .doing("reading chunks")?;
            if let Some(row) = row {
                out.insert(*id, row);
            }
        }
        Ok(out)
    }

    /// Whether the full-text index is sound (any failure of the check counts as damage).
    fn check(&self) -> bool {
        let Ok(conn) = self.lock() else { return false };
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)", []).is_ok()
    }

    /// Rebuilds the full-text index from the chunks; when the chunks themselves are unreadable,
    /// forgets every note of every scope so the next scan indexes them again (notes in files are
    /// never touched; managed notes' content is kept in `memory_docs`).
    fn rebuild(&self) -> Result<(), StoreError> {
        let conn = self.lock()?;
        let fts = conn
            .execute_batch(&format!(
                "DROP TABLE IF EXISTS memory_fts; {FTS_SCHEMA} INSERT INTO memory_fts(memory_fts) VALUES ('rebuild');"
            ))
            .doing("rebuilding the memory index");
        if fts.is_ok() {
            return Ok(());
        }
        tracing::warn!("memory index: the chunks are unreadable; indexing every note again");
        let dropped = conn.execute_batch(&format!(
            "DROP TRIGGER IF EXISTS memory_chunks_ai; DROP TRIGGER IF EXISTS memory_chunks_ad;
             DROP TABLE IF EXISTS memory_fts; DROP TABLE IF EXISTS memory_vectors; DELETE FROM memory_chunks;
             UPDATE memory_docs SET hash = ''; {FTS_SCHEMA} {TRIGGERS}
             CREATE TABLE IF NOT EXISTS memory_vectors (
                chunk_id INTEGER PRIMARY KEY REFERENCES memory_chunks(id) ON DELETE CASCADE,
                scope TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL);
             CREATE INDEX IF NOT EXISTS memory_vectors_model ON memory_vectors(scope, model);"
        ));
        // Other processes keeping vectors in memory drop theirs (best effort: `memory_meta`
        // may be the damaged part; the notes' re-indexing bumps it again).
        let _ = conn.execute(BUMP, []);
        dropped.doing("rebuilding the memory index")
    }

    /// What the index holds and whether it is sound (checks after a crash, `toolgate doctor`).
    fn health(&self) -> Result<IndexHealth, StoreError> {
        let fts_ok = self.check();
        let conn = self.lock()?;
        let count = |sql: &str| -> Result<usize, StoreError> {
            conn.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as usize)
                .doing("checking the memory index")
        };
        Ok(IndexHealth {
            notes: count("SELECT count(*) FROM memory_docs WHERE scope NOT LIKE 'ctx:%'")?,
            chunks: count("SELECT count(*) FROM memory_chunks")?,
            notes_without_chunks: count(
                "SELECT count(*) FROM memory_docs d WHERE d.scope NOT LIKE 'ctx:%' AND d.size > 0 AND d.hash != ''
                 AND NOT EXISTS (SELECT 1 FROM memory_chunks c WHERE c.scope = d.scope AND c.path = d.path)",
            )?,
            fts_ok,
        })
    }

    /// Runs raw SQL on the index's connection (tests damage the index with it).
    fn execute_batch_for_tests(&self, sql: &str) -> Result<(), StoreError> {
        self.lock()?.execute_batch(sql).doing("running test SQL")
    }
}

/// The index's change counter (bumped by every change, in its transaction).
fn generation(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT generation FROM memory_meta WHERE id = 1")?.query_row([], |r| r.get(0))
}

/// Reads every vector of `scopes` under `model` (`None` when there are too many to keep).
fn load_vectors(
    conn: &Connection,
    scopes: (&str, &str),
    model: &str,
    dims: usize,
    max_floats: usize,
) -> Result<Option<Vectors>, StoreError> {
    let doing = "searching notes by meaning";
    let count: i64 = conn
        .prepare_cached("SELECT count(*) FROM memory_vectors WHERE scope IN (?1, ?2) AND model = ?3")
        .and_then(|mut s| s.query_row(params![scopes.0, scopes.1, model], |r| r.get(0)))
        .doing(doing)?;
    let count = count.max(0) as usize;
    if count.saturating_mul(dims) > max_floats {
        return Ok(None);
    }
    let mut vectors = Vectors::with_capacity(dims, count);
    let mut stmt = conn
        .prepare_cached("SELECT chunk_id, vec FROM memory_vectors WHERE scope IN (?1, ?2) AND model = ?3")
        .doing(doing)?;
    let mut rows = stmt.query(params![scopes.0, scopes.1, model]).doing(doing)?;
    while let Some(row) = rows.next().doing(doing)? {
        let id: i64 = row.get(0).doing(doing)?;
        let blob = row.get_ref(1).doing(doing)?.as_blob().unwrap_or_default();
        // A vector of another length cannot be compared: left out, like sqlite-vec refuses it.
        if blob.len() == dims * 4 {
            vectors.push(id, blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        }
    }
    Ok(Some(vectors))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
