//! Ranking pieces shared by memory search and `skill_search`: unit vectors searched by cosine
//! similarity, a cache of query vectors, and Reciprocal Rank Fusion of ranked lists.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use super::{EmbedError, Embedder};

/// Reciprocal Rank Fusion constant (the usual 60: a rank's weight falls slowly).
pub const RRF_K: f64 = 60.0;

/// Vector hits less similar than this (cosine) are not candidates: unrelated texts always have
/// some nearest neighbour, and it should not reach the results on meaning alone.
pub const MIN_SIMILARITY: f64 = 0.2;

/// Vectors of one length, each scaled to unit length, in one contiguous block (a search is a
/// scan of dot products).
#[derive(Debug, Clone)]
pub struct Vectors {
    dims: usize,
    ids: Vec<i64>,
    /// `ids.len() * dims` floats, each row of unit length (or all zero).
    data: Vec<f32>,
}

impl Vectors {
    /// An empty set of `dims`-long vectors, with room for `capacity`.
    pub fn with_capacity(dims: usize, capacity: usize) -> Vectors {
        Vectors { dims, ids: Vec::with_capacity(capacity), data: Vec::with_capacity(capacity * dims) }
    }

    /// The length of every vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many vectors there are.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds `vector` under `id`, normalized. A vector of another length cannot be compared: it
    /// is left out and `false` returned.
    pub fn push(&mut self, id: i64, vector: impl IntoIterator<Item = f32>) -> bool {
        let start = self.data.len();
        self.data.extend(vector);
        if self.data.len() - start != self.dims {
            self.data.truncate(start);
            return false;
        }
        normalize(&mut self.data[start..]);
        self.ids.push(id);
        true
    }

    /// The `limit` nearest vectors to `query`: (id, cosine distance = 1 - cosine similarity),
    /// nearest first, ties by id. A query of another length finds nothing.
    pub fn nearest(&self, query: &[f32], limit: usize) -> Vec<(i64, f64)> {
        if query.len() != self.dims || self.dims == 0 {
            return Vec::new();
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        let mut scored: Vec<(f32, i64)> =
            self.data.chunks_exact(self.dims).zip(&self.ids).map(|(row, id)| (1.0 - dot(row, &q), *id)).collect();
        let by = |a: &(f32, i64), b: &(f32, i64)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if scored.len() > limit {
            scored.select_nth_unstable_by(limit, by);
            scored.truncate(limit);
        }
        scored.sort_unstable_by(by);
        scored.into_iter().map(|(d, id)| (id, f64::from(d))).collect()
    }
}

/// The dot product, in eight independent lanes so the compiler can use SIMD.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length (a zero vector stays zero).
fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Recent query vectors by (model, query), least recently used dropped first: agents ask the
/// same thing again (retries, each session's first look), and embedding the query is most of a
/// search's time.
#[derive(Debug)]
pub struct QueryVectors {
    capacity: usize,
    inner: Mutex<QueryLru>,
}

#[derive(Debug, Default)]
struct QueryLru {
    tick: u64,
    entries: HashMap<(String, String), (u64, Vec<f32>)>,
}

impl QueryVectors {
    /// A cache of at most `capacity` vectors.
    pub fn new(capacity: usize) -> QueryVectors {
        QueryVectors { capacity: capacity.max(1), inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueryLru> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `query`'s vector under `embedder`'s model is cached.
    pub fn contains(&self, embedder: &dyn Embedder, query: &str) -> bool {
        self.lock().entries.contains_key(&(embedder.model_id().to_owned(), query.to_owned()))
    }

    /// `query`'s vector from `embedder`, from the cache when the same model embedded the same
    /// query recently. `Ok(None)`: the model returned nothing.
    pub fn embed(&self, embedder: &dyn Embedder, query: &str) -> Result<Option<Vec<f32>>, EmbedError> {
        let key = (embedder.model_id().to_owned(), query.to_owned());
        {
            let mut cache = self.lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some(entry) = cache.entries.get_mut(&key) {
                entry.0 = tick;
                return Ok(Some(entry.1.clone()));
            }
        }
        let Some(v) = embedder.embed(&[query])?.pop() else { return Ok(None) };
        let mut cache = self.lock();
        if cache.entries.len() >= self.capacity
            && let Some(oldest) = cache.entries.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone())
        {
            cache.entries.remove(&oldest);
        }
        let tick = cache.tick;
        cache.entries.insert(key, (tick, v.clone()));
        Ok(Some(v))
    }
}

/// Runs `background` on another thread while `here` runs on this one (embedding a query beside
/// a full-text search), and returns both results; a panic in either is passed on.
pub fn alongside<A: Send, B>(background: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|s| {
        let handle = s.spawn(background);
        let b = here();
        (handle.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), b)
    })
}

/// An item of fused lists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused<T> {
    /// The item.
    pub id: T,
    /// Its fused score, from 0 to 1 (1: first in every list).
    pub score: f64,
    /// Bit `i` set when list `i` ranked it.
    pub lists: u32,
}

impl<T> Fused<T> {
    /// Whether list `i` ranked the item.
    pub fn in_list(&self, i: usize) -> bool {
        self.lists & (1 << i) != 0
    }
}

/// Reciprocal Rank Fusion of ranked lists (best first; at most 32 lists): each item scores the
/// sum of `1 / (RRF_K + rank)` over the lists that have it, scaled so that first place in every
/// list is 1. Unordered: callers sort with their own tie-break.
pub fn fuse<T: Copy + Eq + Hash>(lists: &[&[T]]) -> Vec<Fused<T>> {
    let lists = &lists[..lists.len().min(32)];
    let mut fused: HashMap<T, (f64, u32)> = HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        for (rank, id) in list.iter().enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            e.1 |= 1 << i;
        }
    }
    let best = lists.len().max(1) as f64 / (RRF_K + 1.0);
    fused.into_iter().map(|(id, (score, lists))| Fused { id, score: (score / best).clamp(0.0, 1.0), lists }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_ranks_by_cosine_and_leaves_out_wrong_lengths() {
        let mut v = Vectors::with_capacity(2, 3);
        assert!(v.push(1, [1.0, 0.0]));
        assert!(v.push(2, [10.0, 10.0]));
        assert!(!v.push(3, [1.0, 0.0, 0.0]));
        assert_eq!(v.len(), 2);
        let hits = v.nearest(&[0.0, 3.0], 5);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [2, 1]);
        assert!((hits[0].1 - (1.0 - std::f64::consts::FRAC_1_SQRT_2)).abs() < 1e-6);
        assert!(v.nearest(&[1.0], 5).is_empty());
        assert_eq!(v.nearest(&[1.0, 0.0], 1).len(), 1);
    }

    #[test]
    fn fusion_rewards_agreement_and_marks_the_lists() {
        let fused = fuse(&[&[1, 2, 3][..], &[3, 1][..]]);
        let get = |id| fused.iter().find(|f| f.id == id).copied().unwrap();
        assert!(get(1).score > get(3).score && get(3).score > get(2).score);
        assert!((get(1).score - (1.0 / 61.0 + 1.0 / 62.0) / (2.0 / 61.0)).abs() < 1e-9);
        assert!(get(2).in_list(0) && !get(2).in_list(1));
        assert_eq!(get(3).lists, 0b11);
        assert_eq!(fuse(&[&[7][..]])[0].score, 1.0);
    }

    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dims(&self) -> usize {
            1
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[test]
    fn query_vectors_are_cached_and_the_least_recent_is_dropped() {
        let model = Counting::default();
        let cache = QueryVectors::new(2);
        cache.embed(&model, "a").unwrap();
        cache.embed(&model, "bb").unwrap();
        cache.embed(&model, "a").unwrap();
        assert_eq!(model.0.load(std::sync::atomic::Ordering::SeqCst), 2);
        cache.embed(&model, "ccc").unwrap();
        assert!(cache.contains(&model, "a") && !cache.contains(&model, "bb") && cache.contains(&model, "ccc"));
    }
}
