//! The memory index on PostgreSQL ([`PgStore::memory_index`]): notes, chunks and vectors of one
//! workspace (the name every node gives it: its path on the shared filesystem) in tables that
//! every node shares, so a managed note written through one node is read and found through
//! any other.
//!
//! - Full text is PostgreSQL's own: each chunk's words in a `tsvector` (`english`: stems, so
//!   "launches" finds "launch"), searched with a `to_tsquery` of the query's words, ranked by
//!   `ts_rank`. Both sides are split into words here, by the same rule as SQLite's tokenizer
//!   (runs of letters and digits), so no character of a note or a query is query syntax and no
//!   database locale changes what a word is.
//! - Vectors are stored as little-endian `f32` in `BYTEA` and ranked in this process, as in
//!   SQLite mode (`MemoryIndex` keeps them in memory while the generation stands). pgvector is
//!   not used yet: it is an extension the database's administrator must install, and the
//!   in-process scan is already what a search needs at a workspace's size.
//! - Every change raises the workspace's row of `memory_generations`, first thing in its
//!   transaction: changes to one workspace's index take turns across nodes (as SQLite's
//!   single writer does), and a node keeping vectors in memory sees another node's change.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_postgres::{Object, Transaction};
use toolgate_store::StoreError;
use toolgate_store::memory::rank::Vectors;
use toolgate_store::memory::{ChunkRow, DocState, DocUpdate, IndexBackend, IndexHealth, MemoryIndex};

use crate::PgStore;
use crate::error::PgError;

/// Vectors read per round trip when a set is too big to keep in memory.
const SCAN_PAGE: i64 = 10_000;

impl PgStore {
    /// The memory index of `workspace` in this database (see the module's docs).
    pub fn memory_index(&self, workspace: &str) -> MemoryIndex {
        MemoryIndex::with_backend(Box::new(PgMemoryIndex { store: self.clone(), workspace: Arc::from(workspace) }))
    }
}

/// One workspace's memory index in PostgreSQL.
#[derive(Debug)]
struct PgMemoryIndex {
    store: PgStore,
    workspace: Arc<str>,
}

/// A chunk as the insert needs it (owned: the work runs on the store's thread).
struct NewChunk {
    start_line: i64,
    end_line: i64,
    heading: String,
    text: String,
    hash: String,
    words: String,
    vec: Option<Vec<u8>>,
}

/// What full-text search indexes of a chunk: its note's path and its text as words (runs of
/// letters and digits) separated by spaces.
pub(crate) fn words(path: &str, text: &str) -> String {
    let mut out = String::with_capacity(path.len() + text.len() + 1);
    for part in [path, text] {
        for w in part.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
    }
    out
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn count(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Raises the workspace's generation (and locks its row until the transaction ends).
async fn bump(client: &Transaction<'_>, ws: &str) -> Result<(), PgError> {
    client
        .execute(
            "INSERT INTO memory_generations (workspace, generation) VALUES ($1, 1)
             ON CONFLICT (workspace) DO UPDATE SET generation = memory_generations.generation + 1",
            &[&ws],
        )
        .await?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl PgMemoryIndex {
    fn run<T, W, F>(&self, doing: &'static str, work: W) -> Result<T, StoreError>
    where
        T: Send + 'static,
        W: FnOnce(Object, Arc<str>) -> F + Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        let ws = Arc::clone(&self.workspace);
        self.store.run(doing, move |client| work(client, ws))
    }
}

impl IndexBackend for PgMemoryIndex {
    fn docs(&self, scope: &str) -> Result<HashMap<String, DocState>, StoreError> {
        let scope = scope.to_owned();
        self.run("listing indexed notes", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT path, hash, mtime_ns, size FROM memory_docs WHERE workspace = $1 AND scope = $2",
                    &[&&*ws, &scope],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok((r.try_get(0)?, DocState { hash: r.try_get(1)?, mtime_ns: r.try_get(2)?, size: r.try_get(3)? }))
                })
                .collect()
        })
    }

    fn doc(&self, scope: &str, path: &str) -> Result<Option<DocState>, StoreError> {
        let (scope, path) = (scope.to_owned(), path.to_owned());
        self.run("reading a note's index state", move |c, ws| async move {
            let row = c
                .query_opt(
                    "SELECT hash, mtime_ns, size FROM memory_docs WHERE workspace = $1 AND scope = $2 AND path = $3",
                    &[&&*ws, &scope, &path],
                )
                .await?;
            row.map(|r| Ok(DocState { hash: r.try_get(0)?, mtime_ns: r.try_get(1)?, size: r.try_get(2)? })).transpose()
        })
    }

    fn doc_content(&self, scope: &str, path: &str) -> Result<Option<Option<String>>, StoreError> {
        let (scope, path) = (scope.to_owned(), path.to_owned());
        self.run("reading a stored note", move |c, ws| async move {
            let row = c
                .query_opt(
                    "SELECT content FROM memory_docs WHERE workspace = $1 AND scope = $2 AND path = $3",
                    &[&&*ws, &scope, &path],
                )
                .await?;
            row.map(|r| r.try_get(0).map_err(PgError::from)).transpose()
        })
    }

    fn stale_docs(&self, scope: &str) -> Result<Vec<(String, String)>, StoreError> {
        let scope = scope.to_owned();
        self.run("listing notes to index again", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT path, content FROM memory_docs
                     WHERE workspace = $1 AND scope = $2 AND hash = '' AND content IS NOT NULL",
                    &[&&*ws, &scope],
                )
                .await?;
            rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
        })
    }

    fn touch(&self, scope: &str, path: &str, state: &DocState) -> Result<(), StoreError> {
        let (scope, path, state) = (scope.to_owned(), path.to_owned(), state.clone());
        self.run("updating a note's index state", move |c, ws| async move {
            c.execute(
                "UPDATE memory_docs SET mtime_ns = $4, size = $5 WHERE workspace = $1 AND scope = $2 AND path = $3",
                &[&&*ws, &scope, &path, &state.mtime_ns, &state.size],
            )
            .await?;
            Ok(())
        })
    }

    fn cached_vectors(&self, scope: &str, path: &str, model: &str) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        let (scope, path, model) = (scope.to_owned(), path.to_owned(), model.to_owned());
        self.run("reading cached vectors", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT c.hash, v.vec FROM memory_chunks c JOIN memory_vectors v ON v.chunk_id = c.id
                     WHERE c.workspace = $1 AND c.scope = $2 AND c.path = $3 AND v.model = $4",
                    &[&&*ws, &scope, &path, &model],
                )
                .await?;
            rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
        })
    }

    fn replace(
        &self,
        scope: &str,
        update: &DocUpdate<'_>,
        reuse: &HashMap<String, Vec<u8>>,
        reuse_model: Option<&str>,
    ) -> Result<bool, StoreError> {
        // PostgreSQL's text cannot hold NUL: a note kept in its row is refused with why; a chunk
        // of a file (a copy, for snippets) has it as a space.
        if update.content.is_some_and(|c| c.contains('\0')) {
            return Err(PgError::Data(format!(
                "`{}` contains a NUL character (\\0), which a note stored in PostgreSQL cannot hold; remove it",
                update.path.escape_debug()
            ))
            .doing("indexing a note"));
        }
        let model = update.vectors.as_ref().map(|(m, _)| (*m).to_owned()).or(reuse_model.map(str::to_owned));
        let chunks: Vec<NewChunk> = update
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let hash = c.hash();
                let vec = match &update.vectors {
                    Some((_, vecs)) => vecs.get(i).map(|v| to_bytes(v)),
                    None => reuse_model.and_then(|_| reuse.get(&hash).cloned()),
                };
                NewChunk {
                    start_line: i64::try_from(c.start_line).unwrap_or(i64::MAX),
                    end_line: i64::try_from(c.end_line).unwrap_or(i64::MAX),
                    heading: c.heading.replace('\0', " "),
                    text: c.text.replace('\0', " "),
                    words: words(update.path, &c.text),
                    hash,
                    vec,
                }
            })
            .collect();
        let (scope, path, state) = (scope.to_owned(), update.path.to_owned(), update.state.clone());
        let content = update.content.map(str::to_owned);
        let expected = update.unless_changed_from.map(|e| e.map(str::to_owned));
        self.run("indexing a note", move |mut c, ws| async move {
            let tx = c.transaction().await?;
            // First: changes to the workspace's index take turns, so the text read is the one
            // replaced.
            bump(&tx, &ws).await?;
            if let Some(expected) = expected {
                let row = tx
                    .query_opt(
                        "SELECT content FROM memory_docs WHERE workspace = $1 AND scope = $2 AND path = $3",
                        &[&&*ws, &scope, &path],
                    )
                    .await?;
                let now: Option<String> = match row {
                    Some(r) => r.try_get(0)?,
                    None => None,
                };
                if now != expected {
                    return Ok(false);
                }
            }
            tx.execute(
                "INSERT INTO memory_docs (workspace, scope, path, hash, mtime_ns, size, content, updated_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (workspace, scope, path) DO UPDATE SET hash = excluded.hash,
                    mtime_ns = excluded.mtime_ns, size = excluded.size, content = excluded.content,
                    updated_ms = excluded.updated_ms",
                &[&&*ws, &scope, &path, &state.hash, &state.mtime_ns, &state.size, &content, &now_ms()],
            )
            .await?;
            tx.execute("DELETE FROM memory_chunks WHERE workspace = $1 AND scope = $2 AND path = $3", &[
                &&*ws, &scope, &path,
            ])
            .await?;
            if !chunks.is_empty() {
                let insert = tx
                    .prepare(
                        "INSERT INTO memory_chunks (workspace, scope, path, start_line, end_line, heading, text, hash,
                                                    words)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_tsvector('english', $9)) RETURNING id",
                    )
                    .await?;
                let insert_vec = tx
                    .prepare(
                        "INSERT INTO memory_vectors (chunk_id, workspace, scope, model, vec) VALUES ($1, $2, $3, $4, $5)",
                    )
                    .await?;
                for ch in &chunks {
                    let id: i64 = tx
                        .query_one(&insert, &[
                            &&*ws,
                            &scope,
                            &path,
                            &ch.start_line,
                            &ch.end_line,
                            &ch.heading,
                            &ch.text,
                            &ch.hash,
                            &ch.words,
                        ])
                        .await?
                        .try_get(0)?;
                    if let (Some(model), Some(vec)) = (&model, &ch.vec) {
                        tx.execute(&insert_vec, &[&id, &&*ws, &scope, model, vec]).await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    fn remove(&self, scope: &str, path: &str) -> Result<(), StoreError> {
        let (scope, path) = (scope.to_owned(), path.to_owned());
        self.run("removing a note from the index", move |mut c, ws| async move {
            let tx = c.transaction().await?;
            bump(&tx, &ws).await?;
            tx.execute(
                "DELETE FROM memory_chunks WHERE workspace = $1 AND scope = $2 AND path = $3",
                &[&&*ws, &scope, &path],
            )
            .await?;
            tx.execute(
                "DELETE FROM memory_docs WHERE workspace = $1 AND scope = $2 AND path = $3",
                &[&&*ws, &scope, &path],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn generation(&self) -> Result<i64, StoreError> {
        self.run("reading the memory index's generation", move |c, ws| async move {
            let row = c.query_opt("SELECT generation FROM memory_generations WHERE workspace = $1", &[&&*ws]).await?;
            Ok(match row {
                Some(r) => r.try_get(0)?,
                None => 0,
            })
        })
    }

    fn missing_vectors(&self, scope: &str, model: &str, n: usize) -> Result<Vec<(i64, String, String)>, StoreError> {
        let (scope, model, n) = (scope.to_owned(), model.to_owned(), limit(n));
        self.run("finding chunks to embed", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT c.id, c.heading, c.text FROM memory_chunks c
                     LEFT JOIN memory_vectors v ON v.chunk_id = c.id AND v.model = $3
                     WHERE c.workspace = $1 AND c.scope = $2 AND v.chunk_id IS NULL ORDER BY c.id LIMIT $4",
                    &[&&*ws, &scope, &model, &n],
                )
                .await?;
            rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?))).collect()
        })
    }

    fn embed_progress(&self, scope: &str, model: &str) -> Result<(usize, usize), StoreError> {
        let (scope, model) = (scope.to_owned(), model.to_owned());
        self.run("counting embedded notes", move |c, ws| async move {
            let row = c
                .query_one(
                    "SELECT (SELECT count(*) FROM memory_docs WHERE workspace = $1 AND scope = $2),
                            (SELECT count(DISTINCT c.path) FROM memory_chunks c
                             WHERE c.workspace = $1 AND c.scope = $2 AND NOT EXISTS
                                (SELECT 1 FROM memory_vectors v WHERE v.chunk_id = c.id AND v.model = $3))",
                    &[&&*ws, &scope, &model],
                )
                .await?;
            let (notes, lacking): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
            let notes = count(notes);
            Ok((notes, notes.saturating_sub(count(lacking))))
        })
    }

    fn put_vectors(&self, scope: &str, model: &str, vecs: &[(i64, Vec<f32>)]) -> Result<(), StoreError> {
        let (scope, model) = (scope.to_owned(), model.to_owned());
        let vecs: Vec<(i64, Vec<u8>)> = vecs.iter().map(|(id, v)| (*id, to_bytes(v))).collect();
        self.run("storing vectors", move |mut c, ws| async move {
            let tx = c.transaction().await?;
            // First: changes take turns, so a chunk found here is not deleted before the commit.
            bump(&tx, &ws).await?;
            let put = tx
                .prepare(
                    "INSERT INTO memory_vectors (chunk_id, workspace, scope, model, vec)
                     SELECT id, workspace, scope, $3, $4 FROM memory_chunks
                     WHERE id = $1 AND workspace = $2 AND scope = $5
                     ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, vec = excluded.vec",
                )
                .await?;
            for (id, vec) in &vecs {
                tx.execute(&put, &[id, &&*ws, &model, vec, &scope]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn full_text(&self, scopes: (&str, &str), terms: &[String], n: usize) -> Result<Vec<i64>, StoreError> {
        // Letters and digits only (`query_terms`), quoted all the same: no term is `to_tsquery`
        // syntax. Any term matches (`|`); stop words drop out of the query.
        let words: Vec<String> =
            terms.iter().filter(|t| t.chars().all(char::is_alphanumeric)).map(|t| format!("'{t}'")).collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let query = words.join(" | ");
        let (a, b, n) = (scopes.0.to_owned(), scopes.1.to_owned(), limit(n));
        self.run("searching notes", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT id FROM memory_chunks, to_tsquery('english', $4) q
                     WHERE workspace = $1 AND scope IN ($2, $3) AND words @@ q
                     ORDER BY ts_rank(words, q) DESC, id LIMIT $5",
                    &[&&*ws, &a, &b, &query, &n],
                )
                .await?;
            rows.iter().map(|r| r.try_get(0).map_err(PgError::from)).collect()
        })
    }

    fn load_vectors(
        &self,
        scopes: (&str, &str),
        model: &str,
        dims: usize,
        max_floats: usize,
    ) -> Result<Option<Vectors>, StoreError> {
        let (a, b, model) = (scopes.0.to_owned(), scopes.1.to_owned(), model.to_owned());
        let bytes = i32::try_from(dims.saturating_mul(4)).unwrap_or(i32::MAX);
        self.run("searching notes by meaning", move |c, ws| async move {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM memory_vectors WHERE workspace = $1 AND scope IN ($2, $3) AND model = $4",
                    &[&&*ws, &a, &b, &model],
                )
                .await?
                .try_get(0)?;
            if count(n).saturating_mul(dims) > max_floats {
                return Ok(None);
            }
            // A vector of another length cannot be compared: left out.
            let rows = c
                .query(
                    "SELECT chunk_id, vec FROM memory_vectors
                     WHERE workspace = $1 AND scope IN ($2, $3) AND model = $4 AND length(vec) = $5",
                    &[&&*ws, &a, &b, &model, &bytes],
                )
                .await?;
            let mut vectors = Vectors::with_capacity(dims, rows.len());
            for r in &rows {
                let vec: &[u8] = r.try_get(1)?;
                vectors.push(r.try_get(0)?, floats(vec));
            }
            Ok(Some(vectors))
        })
    }

    fn nearest_scan(
        &self,
        scopes: (&str, &str),
        model: &str,
        query: &[f32],
        n: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        // Page by page, keeping the best `n` of each: memory stays bounded whatever the set's size.
        let mut best: Vec<(i64, f64)> = Vec::new();
        let mut after = i64::MIN;
        let dims = query.len();
        let bytes = i32::try_from(dims.saturating_mul(4)).unwrap_or(i32::MAX);
        loop {
            let (a, b, model) = (scopes.0.to_owned(), scopes.1.to_owned(), model.to_owned());
            let page = self.run("searching notes by meaning", move |c, ws| async move {
                let rows = c
                    .query(
                        "SELECT chunk_id, vec FROM memory_vectors
                         WHERE workspace = $1 AND scope IN ($2, $3) AND model = $4 AND length(vec) = $5
                           AND chunk_id > $6
                         ORDER BY chunk_id LIMIT $7",
                        &[&&*ws, &a, &b, &model, &bytes, &after, &SCAN_PAGE],
                    )
                    .await?;
                let mut vectors = Vectors::with_capacity(dims, rows.len());
                let mut last = None;
                for r in &rows {
                    let id: i64 = r.try_get(0)?;
                    let vec: &[u8] = r.try_get(1)?;
                    vectors.push(id, floats(vec));
                    last = Some(id);
                }
                Ok((vectors, last))
            })?;
            let (vectors, last) = page;
            best.extend(vectors.nearest(query, n));
            best.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.0.cmp(&y.0)));
            best.truncate(n);
            match last {
                Some(id) => after = id,
                None => return Ok(best),
            }
        }
    }

    fn chunks(&self, ids: &[i64]) -> Result<HashMap<i64, ChunkRow>, StoreError> {
        let ids = ids.to_vec();
        self.run("reading chunks", move |c, ws| async move {
            let rows = c
                .query(
                    "SELECT id, path, start_line, end_line, text, scope FROM memory_chunks
                     WHERE workspace = $1 AND id = ANY($2)",
                    &[&&*ws, &ids],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let line = |i| r.try_get::<_, i64>(i).map(count);
                    Ok((
                        r.try_get(0)?,
                        ChunkRow {
                            path: r.try_get(1)?,
                            start_line: line(2)?,
                            end_line: line(3)?,
                            text: r.try_get(4)?,
                            scope: r.try_get(5)?,
                        },
                    ))
                })
                .collect()
        })
    }

    /// PostgreSQL keeps its own indexes sound (a damaged one is the server's to report).
    fn check(&self) -> bool {
        true
    }

    fn rebuild(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn health(&self) -> Result<IndexHealth, StoreError> {
        self.run("checking the memory index", move |c, ws| async move {
            let row = c
                .query_one(
                    "SELECT (SELECT count(*) FROM memory_docs WHERE workspace = $1 AND scope NOT LIKE 'ctx:%'),
                            (SELECT count(*) FROM memory_chunks WHERE workspace = $1),
                            (SELECT count(*) FROM memory_docs d
                             WHERE d.workspace = $1 AND d.scope NOT LIKE 'ctx:%' AND d.size > 0 AND d.hash != ''
                               AND NOT EXISTS (SELECT 1 FROM memory_chunks c
                                               WHERE c.workspace = d.workspace AND c.scope = d.scope
                                                 AND c.path = d.path))",
                    &[&&*ws],
                )
                .await?;
            Ok(IndexHealth {
                notes: count(row.try_get(0)?),
                chunks: count(row.try_get(1)?),
                notes_without_chunks: count(row.try_get(2)?),
                fts_ok: true,
            })
        })
    }

    fn execute_batch_for_tests(&self, sql: &str) -> Result<(), StoreError> {
        let sql = sql.to_owned();
        self.run("running test SQL", move |c, _| async move { Ok(c.batch_execute(&sql).await?) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_runs_of_letters_and_digits() {
        assert_eq!(words("memory/a-b.md", "it's /opt/ci: café 'x' & y|z"), "memory a b md it s opt ci café x y z");
        assert_eq!(words("", "''\\:*!"), "");
    }

    #[test]
    fn vectors_round_trip_as_bytes() {
        let v = [1.0f32, -2.5, 0.0];
        assert_eq!(floats(&to_bytes(&v)).collect::<Vec<_>>(), v);
    }
}
