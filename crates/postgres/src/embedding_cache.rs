//! [`EmbeddingCache`] on PostgreSQL: vectors of short texts (skills' names and descriptions) by
//! model and the text's sha256, as SQLite's (`toolgate-store`'s `embedding_cache.rs`), in one
//! table every node shares: a key names its text, so one workspace's vector serves any other's.
//! Entries unused for 30 days are dropped when the cache is written.

use std::collections::HashMap;

use toolgate_store::{EmbeddingCache, StoreError};

use crate::PgStore;

/// How long an entry nobody asked for is kept (as SQLite's).
const UNUSED_FOR_MS: i64 = 30 * 24 * 3600 * 1000;

impl EmbeddingCache for PgStore {
    fn cached_embeddings(&self, model: &str, keys: &[String]) -> Result<HashMap<String, Vec<f32>>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (model, keys) = (model.to_owned(), keys.to_vec());
        self.run("reading cached vectors", move |c| async move {
            let rows = c
                .query("SELECT hash, vec FROM embedding_cache WHERE model = $1 AND hash = ANY($2)", &[&model, &keys])
                .await?;
            let mut found = HashMap::new();
            for r in &rows {
                let blob: &[u8] = r.try_get(1)?;
                // A damaged entry is skipped: the text is embedded again.
                if !blob.is_empty() && blob.len().is_multiple_of(4) {
                    let v = blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                    found.insert(r.try_get(0)?, v);
                }
            }
            Ok(found)
        })
    }

    fn cache_embeddings(&self, model: &str, fresh: &[(String, Vec<f32>)], used: &[String]) -> Result<(), StoreError> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let model = model.to_owned();
        let fresh: Vec<(String, Vec<u8>)> =
            fresh.iter().map(|(k, v)| (k.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
        let used = used.to_vec();
        self.run("caching vectors", move |mut c| async move {
            let tx = c.transaction().await?;
            if !fresh.is_empty() {
                let put = tx
                    .prepare(
                        "INSERT INTO embedding_cache (model, hash, vec, used_ms) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (model, hash) DO UPDATE SET vec = excluded.vec, used_ms = excluded.used_ms",
                    )
                    .await?;
                for (key, vec) in &fresh {
                    tx.execute(&put, &[&model, key, vec, &now]).await?;
                }
            }
            if !used.is_empty() {
                tx.execute(
                    "UPDATE embedding_cache SET used_ms = $3 WHERE model = $1 AND hash = ANY($2)",
                    &[&model, &used, &now],
                )
                .await?;
            }
            tx.execute("DELETE FROM embedding_cache WHERE used_ms < $1", &[&(now - UNUSED_FOR_MS)]).await?;
            tx.commit().await?;
            Ok(())
        })
    }
}
