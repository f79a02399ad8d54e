//! [`EmbeddingCache`]: vectors by model and text hash.

use toolgate_store::embedding_key;

use crate::{Area, on_every_backend_of};

#[test]
fn vectors_round_trip_per_model() {
    on_every_backend_of(Area::EmbeddingCache, |db| {
        let cache = db.connect().embeddings;
        let (a, b) = (embedding_key("a skill"), embedding_key("b skill"));
        cache.cache_embeddings("m", &[(a.clone(), vec![1.0, -2.5]), (b.clone(), vec![3.0, 4.0])], &[]).unwrap();
        let found = cache.cached_embeddings("m", &[a.clone(), b.clone(), embedding_key("none")]).unwrap();
        assert_eq!(found.len(), 2, "a key with no entry is absent");
        assert_eq!(found[&a], [1.0, -2.5]);
        assert_eq!(found[&b], [3.0, 4.0]);
        assert!(cache.cached_embeddings("other model", std::slice::from_ref(&a)).unwrap().is_empty());
        assert!(cache.cached_embeddings("m", &[]).unwrap().is_empty());
    });
}

#[test]
fn a_vector_is_replaced_and_used_keys_may_be_absent() {
    on_every_backend_of(Area::EmbeddingCache, |db| {
        let cache = db.connect().embeddings;
        let a = embedding_key("a skill");
        cache.cache_embeddings("m", &[(a.clone(), vec![1.0])], &[]).unwrap();
        cache.cache_embeddings("m", &[(a.clone(), vec![2.0, 0.5])], &[a.clone(), embedding_key("gone")]).unwrap();
        assert_eq!(cache.cached_embeddings("m", std::slice::from_ref(&a)).unwrap()[&a], [2.0, 0.5]);
        // Another process finds it.
        let later = db.connect().embeddings;
        assert_eq!(later.cached_embeddings("m", std::slice::from_ref(&a)).unwrap()[&a], [2.0, 0.5]);
    });
}
