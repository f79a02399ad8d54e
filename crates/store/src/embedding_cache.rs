//! Vectors of short texts (skills' names and descriptions) by model and the text's sha256, so a
//! new process finds them instead of running the model again: the [`EmbeddingCache`] trait and
//! its SQLite implementation on [`Store`] (table `embedding_cache`, migration 12 in `db.rs`;
//! `toolgate-postgres` has PostgreSQL's).
//! Entries unused for 30 days are dropped when the cache is written.

use std::collections::HashMap;
use std::fmt::Debug;

use rusqlite::params;

use crate::error::Context;
use crate::memory::sha256_hex;
use crate::{Store, StoreError};

/// How long an entry nobody asked for is kept (a skill deleted, a model no longer used).
const UNUSED_FOR_MS: i64 = 30 * 24 * 3600 * 1000;

/// The cache key of `text`.
pub fn embedding_key(text: &str) -> String {
    sha256_hex(text.as_bytes())
}

/// Vectors kept by model and [`embedding_key`], so that a new process does not embed the same
/// texts again (`skill_search`).
pub trait EmbeddingCache: Send + Sync + Debug {
    /// The cached vectors of `model` for these keys ([`embedding_key`]), by key; keys with no
    /// entry (or an unreadable one) are absent. Vectors of another model are never returned.
    fn cached_embeddings(&self, model: &str, keys: &[String]) -> Result<HashMap<String, Vec<f32>>, StoreError>;

    /// Stores `fresh` vectors of `model` (by key), marks the `used` keys as used now and drops
    /// entries unused for 30 days, all at once (another process sees all of it or none).
    fn cache_embeddings(&self, model: &str, fresh: &[(String, Vec<f32>)], used: &[String]) -> Result<(), StoreError>;
}

impl EmbeddingCache for Store {
    fn cached_embeddings(&self, model: &str, keys: &[String]) -> Result<HashMap<String, Vec<f32>>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT vec FROM embedding_cache WHERE model = ?1 AND hash = ?2")
                .doing("reading cached vectors")?;
            let mut found = HashMap::new();
            for key in keys {
                let blob: Option<Vec<u8>> = stmt
                    .query_row(params![model, key], |r| r.get(0))
                    .map(Some)
                    .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })
                    .doing("reading cached vectors")?;
                if let Some(blob) = blob.filter(|b| !b.is_empty() && b.len() % 4 == 0) {
                    found.insert(
                        key.clone(),
                        blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
                    );
                }
            }
            Ok(found)
        })
    }

    fn cache_embeddings(&self, model: &str, fresh: &[(String, Vec<f32>)], used: &[String]) -> Result<(), StoreError> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        self.with(|conn| {
            let doing = "caching vectors";
            let tx = conn.unchecked_transaction().doing(doing)?;
            {
                let mut put = tx
                    .prepare_cached(
                        "INSERT INTO embedding_cache (model, hash, vec, used_ms) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (model, hash) DO UPDATE SET vec = excluded.vec, used_ms = excluded.used_ms",
                    )
                    .doing(doing)?;
                for (key, v) in fresh {
                    put.execute(params![model, key, crate::memory::vector_blob(v), now]).doing(doing)?;
                }
                let mut touch = tx
                    .prepare_cached("UPDATE embedding_cache SET used_ms = ?3 WHERE model = ?1 AND hash = ?2")
                    .doing(doing)?;
                for key in used {
                    touch.execute(params![model, key, now]).doing(doing)?;
                }
                tx.execute("DELETE FROM embedding_cache WHERE used_ms < ?1", params![now - UNUSED_FOR_MS])
                    .doing(doing)?;
            }
            tx.commit().doing(doing)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_unused_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let (a, b) = (embedding_key("a skill"), embedding_key("b skill"));
        store.cache_embeddings("m", &[(a.clone(), vec![1.0, -2.5]), (b.clone(), vec![3.0, 4.0])], &[]).unwrap();
        let found = store.cached_embeddings("m", &[a.clone(), b.clone(), embedding_key("none")]).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[&a], [1.0, -2.5]);
        assert!(store.cached_embeddings("other model", std::slice::from_ref(&a)).unwrap().is_empty());
        // `b` was last used long ago; `a` is marked used by the next write, which drops `b`.
        store.with(|c| c.execute("UPDATE embedding_cache SET used_ms = 0", []).map(drop).doing("test")).unwrap();
        store.cache_embeddings("m", &[], std::slice::from_ref(&a)).unwrap();
        let found = store.cached_embeddings("m", &[a.clone(), b]).unwrap();
        assert_eq!(found.keys().collect::<Vec<_>>(), [&a]);
        // A damaged row is skipped, not an error.
        store.with(|c| c.execute("UPDATE embedding_cache SET vec = x'010203'", []).map(drop).doing("test")).unwrap();
        assert!(store.cached_embeddings("m", &[a]).unwrap().is_empty());
    }
}
