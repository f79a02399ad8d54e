//! `delegate_search`: the caller's delegation targets ranked by BM25 over name and description,
//! fused (Reciprocal Rank Fusion, the `fuse` that `skill_search` and memory search use) with a
//! search by meaning when the runtime was given an embedder ([`crate::Runtime::set_embedder`]:
//! the gate gives it the memory tools' model, `[memory.embeddings]`). Without one, or when the
//! model fails, it ranks by BM25 alone and the result says so.
//!
//! An agent's vector is that of its name and description, which change only with the
//! configuration: they are embedded once per runtime and kept in the state database's embedding
//! cache (the one `skill_search` uses), so a new process does not run the model on them again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_store::memory::rank::{MIN_SIMILARITY, QueryVectors, Vectors, fuse};
use toolgate_store::memory::{EmbedError, Embedder, embed_batches};
use toolgate_store::{EmbeddingCache, embedding_key};

use crate::config::AgentsConfig;
use crate::runtime::clip_text;

/// Candidates taken from each ranking before fusion.
const CANDIDATES: usize = 50;
/// Agent texts embedded per call to the model.
const BATCH: usize = 32;
/// Query vectors kept.
const CACHED_QUERIES: usize = 64;
/// How long after a failure the model is asked again (an endpoint that hangs would otherwise
/// make every search wait for its timeout).
const RETRY_AFTER: Duration = Duration::from_secs(60);
/// The note when there is no model to rank by meaning with.
pub(crate) const NO_MODEL: &str = "semantic ranking unavailable: no embedding model installed; ranked by keywords";

/// Each configured agent's vector, by name.
type ByAgent = Arc<HashMap<String, Vec<f32>>>;

/// The agents' vectors under one embedder.
#[derive(Debug)]
pub(crate) struct AgentVectors {
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<dyn EmbeddingCache>>,
    queries: QueryVectors,
    /// Every configured agent's vector by name, once embedded.
    agents: Mutex<Option<ByAgent>>,
    failed: Mutex<Option<(Instant, EmbedError)>>,
}

impl AgentVectors {
    pub(crate) fn new(embedder: Arc<dyn Embedder>, cache: Option<Arc<dyn EmbeddingCache>>) -> AgentVectors {
        AgentVectors {
            embedder,
            cache,
            queries: QueryVectors::new(CACHED_QUERIES),
            agents: Mutex::default(),
            failed: Mutex::default(),
        }
    }

    /// Every agent's vector, and how many had to be embedded (neither in memory nor cached).
    fn agents(&self, cfg: &AgentsConfig) -> Result<(ByAgent, usize), EmbedError> {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = agents.as_ref() {
            return Ok((Arc::clone(set), 0));
        }
        let model = self.embedder.model_id().to_owned();
        let dims = self.embedder.dims();
        let texts: Vec<(&String, String)> =
            cfg.agents.iter().map(|(name, a)| (name, meaning_text(name, &a.description))).collect();
        let keys: Vec<String> = texts.iter().map(|(_, t)| embedding_key(t)).collect();
        let mut found = HashMap::new();
        if let Some(store) = &self.cache {
            match store.cached_embeddings(&model, &keys) {
                Ok(cached) => found = cached,
                Err(e) => tracing::warn!("cannot read cached agent vectors: {e}"),
            }
        }
        found.retain(|_, v| v.len() == dims);
        let missing: Vec<usize> = (0..texts.len()).filter(|i| !found.contains_key(&keys[*i])).collect();
        let missing_texts: Vec<&str> = missing.iter().map(|i| texts[*i].1.as_str()).collect();
        let vectors = embed_batches(&missing_texts, BATCH, dims, |batch| self.embed(batch))?;
        let mut fresh = Vec::with_capacity(missing.len());
        for (i, v) in missing.iter().zip(vectors) {
            fresh.push((keys[*i].clone(), v.clone()));
            found.insert(keys[*i].clone(), v);
        }
        if let Some(store) = &self.cache
            && let Err(e) = store.cache_embeddings(&model, &fresh, &keys)
        {
            tracing::warn!("cannot keep agent vectors in the state database: {e}");
        }
        let set: HashMap<String, Vec<f32>> = texts
            .iter()
            .zip(&keys)
            .filter_map(|((name, _), key)| found.get(key).map(|v| ((*name).clone(), v.clone())))
            .collect();
        let set = Arc::new(set);
        *agents = Some(Arc::clone(&set));
        Ok((set, missing.len()))
    }

    /// The model, unless it failed less than [`RETRY_AFTER`] ago; its failures are remembered.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(e) = self.recent_failure() {
            return Err(e);
        }
        self.embedder.embed(texts).inspect_err(|e| {
            *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), e.clone()));
        })
    }

    fn recent_failure(&self) -> Option<EmbedError> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        let (at, e) = failed.as_ref().filter(|(at, _)| at.elapsed() < RETRY_AFTER)?;
        Some(EmbedError(format!(
            "{e} ({} s ago; asked again {} s after a failure)",
            at.elapsed().as_secs(),
            RETRY_AFTER.as_secs()
        )))
    }

    /// Indexes (into `targets`) nearest in meaning to `query`, nearest first, those too
    /// unrelated left out; and how many agents were embedded for it.
    fn nearest(&self, cfg: &AgentsConfig, targets: &[String], query: &str) -> Result<(Vec<usize>, usize), EmbedError> {
        let (agents, embedded) = self.agents(cfg)?;
        let q = match self.queries.embed(&Remembering(self), query)? {
            Some(q) => q,
            None => {
                return Err(EmbedError(format!("the embedding model {} returned nothing", self.embedder.model_id())));
            }
        };
        let mut set = Vectors::with_capacity(q.len(), targets.len());
        for (i, t) in targets.iter().enumerate() {
            if let Some(v) = agents.get(t) {
                set.push(i as i64, v.iter().copied());
            }
        }
        let near = set
            .nearest(&q, CANDIDATES)
            .into_iter()
            .filter(|(_, distance)| 1.0 - distance >= MIN_SIMILARITY)
            .map(|(i, _)| i as usize)
            .collect();
        Ok((near, embedded))
    }
}

/// The embedder as [`AgentVectors::embed`] calls it (remembering failures), for the query cache.
#[derive(Debug)]
struct Remembering<'a>(&'a AgentVectors);

impl Embedder for Remembering<'_> {
    fn model_id(&self) -> &str {
        self.0.embedder.model_id()
    }
    fn dims(&self) -> usize {
        self.0.embedder.dims()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0.embed(texts)
    }
}

/// The text an agent is embedded by: its name in words, and its description.
fn meaning_text(name: &str, description: &str) -> String {
    format!("{}: {description}", name.replace(['-', '_'], " "))
}

/// Ranks `targets` (agent names) for `query`: the tool's result. Blocking when `vectors` is
/// given (it may run the embedding model).
pub(crate) fn rank(
    cfg: &AgentsConfig,
    targets: &[String],
    query: &str,
    limit: usize,
    vectors: Option<&AgentVectors>,
) -> Value {
    let description = |t: &str| cfg.agents.get(t).map_or("", |a| a.description.as_str());
    let docs: Vec<String> = targets
        .iter()
        .map(|t| {
            // Names often join words with `-` or `_`: split them so `code-review` matches "review".
            let name = t.replace(['-', '_'], " ");
            let d = description(t);
            format!("{name} {name} {d} {d}")
        })
        .collect();
    let by_text = toolgate_core::bm25::Bm25::new(docs.iter().map(String::as_str)).search(query, CANDIDATES.max(limit));
    let mut notes = Vec::new();
    // (target index, score, found by text, found by meaning)
    let mut hits: Vec<(usize, f64, bool, Option<bool>)> = Vec::new();
    let mut model = None;
    match vectors {
        None => notes.push(NO_MODEL.to_owned()),
        Some(_) if targets.is_empty() => {}
        Some(v) => match v.nearest(cfg, targets, query) {
            Ok((by_meaning, embedded)) => {
                if embedded > 0 {
                    notes.push(format!("embedded {embedded} agent descriptions (their vectors are kept)"));
                }
                let text_ids: Vec<usize> = by_text.iter().map(|(i, _)| *i).collect();
                hits = fuse(&[&text_ids, &by_meaning])
                    .into_iter()
                    .map(|f| (f.id, f.score, f.in_list(0), Some(f.in_list(1))))
                    .collect();
                model = Some(v.embedder.model_id().to_owned());
            }
            Err(e) => notes.push(format!("semantic ranking unavailable: {e}; ranked by keywords")),
        },
    }
    if model.is_none() {
        hits = by_text.into_iter().map(|(i, score)| (i, score, true, None)).collect();
    }
    // Deterministic order: score, then name.
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| targets[a.0].cmp(&targets[b.0])));
    hits.truncate(limit);
    let rows: Vec<Value> = hits
        .into_iter()
        .map(|(i, score, by_text, by_meaning)| {
            let mut row = json!({
                "agent": targets[i], "description": clip_text(description(&targets[i]), 500),
                "score": (score * 1000.0).round() / 1000.0, "by_text": by_text,
            });
            if let Some(m) = by_meaning {
                row["by_meaning"] = Value::Bool(m);
            }
            row
        })
        .collect();
    if rows.is_empty() {
        notes.push("no agent you can delegate to matches; try other words, or handle it yourself".to_owned());
    }
    let mode = if model.is_some() { "hybrid" } else { "bm25" };
    json!({ "agents": rows, "of": targets.len(), "mode": mode, "model": model, "notes": notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentConfig;

    /// A stand-in model where only bookkeeping and fusion are tested: each text's vector says
    /// which of three topics it mentions (`tests/it/agent_search.rs` runs the real model).
    #[derive(Debug, Default)]
    struct Topics(std::sync::atomic::AtomicUsize);

    impl Embedder for Topics {
        fn model_id(&self) -> &str {
            "topics"
        }
        fn dims(&self) -> usize {
            3
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            let has = |t: &str, words: &[&str]| f32::from(u8::from(words.iter().any(|w| t.contains(w))));
            Ok(texts
                .iter()
                .map(|t| vec![has(t, &["money", "invoice", "refund"]), has(t, &["photo", "image"]), 0.1])
                .collect())
        }
    }

    fn cfg() -> AgentsConfig {
        let mut cfg = AgentsConfig::default();
        for (name, d) in
            [("billing", "handles invoices and refunds"), ("artist", "edits image files"), ("scribe", "writes notes")]
        {
            cfg.agents.insert(name.into(), AgentConfig { description: d.into(), ..AgentConfig::default() });
        }
        cfg
    }

    #[test]
    fn meaning_finds_what_words_miss_and_vectors_are_embedded_once() {
        let cfg = cfg();
        let targets: Vec<String> = cfg.agents.keys().cloned().collect();
        let model = Arc::new(Topics::default());
        let v = AgentVectors::new(model.clone(), None);
        // "money" is in no agent's text: BM25 finds nothing, the vectors find billing.
        let r = rank(&cfg, &targets, "who gets my money back", 5, Some(&v));
        assert_eq!((r["mode"].as_str(), r["agents"][0]["agent"].as_str()), (Some("hybrid"), Some("billing")), "{r}");
        assert_eq!((&r["agents"][0]["by_text"], &r["agents"][0]["by_meaning"]), (&json!(false), &json!(true)));
        assert_eq!(r["notes"], json!(["embedded 3 agent descriptions (their vectors are kept)"]));
        let r = rank(&cfg, &targets, "image", 5, Some(&v));
        assert_eq!(r["agents"][0]["agent"], "artist", "{r}");
        assert_eq!(r["notes"], json!([]));
        assert_eq!(model.0.load(std::sync::atomic::Ordering::SeqCst), 3 + 2, "3 agents once, then 2 queries");
        // Without a model: BM25 and the note.
        let r = rank(&cfg, &targets, "who gets my money back", 5, None);
        assert_eq!((r["mode"].as_str(), &r["agents"]), (Some("bm25"), &json!([])));
        assert_eq!(r["notes"][0], NO_MODEL);
    }

    #[derive(Debug)]
    struct Broken;

    impl Embedder for Broken {
        fn model_id(&self) -> &str {
            "broken"
        }
        fn dims(&self) -> usize {
            3
        }
        fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError("endpoint down".into()))
        }
    }

    #[test]
    fn a_failing_model_falls_back_to_keywords_and_says_why() {
        let cfg = cfg();
        let targets: Vec<String> = cfg.agents.keys().cloned().collect();
        let v = AgentVectors::new(Arc::new(Broken), None);
        let r = rank(&cfg, &targets, "refunds", 5, Some(&v));
        assert_eq!((r["mode"].as_str(), r["agents"][0]["agent"].as_str()), (Some("bm25"), Some("billing")));
        let note = r["notes"][0].as_str().unwrap_or_default();
        assert!(
            note.starts_with("semantic ranking unavailable: endpoint down") && note.ends_with("ranked by keywords"),
            "{note}"
        );
    }
}
