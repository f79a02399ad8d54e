//! `skill_search`: BM25 over each skill's name, description and instructions, fused (Reciprocal
//! Rank Fusion) with a search by meaning when an embedder is configured (`[memory.embeddings]`,
//! the memory tools' model). A skill's vector is that of its name and description, the text the
//! Agent Skills format writes for choosing a skill.
//!
//! Both indexes follow the skill folders' stamp ([`super::skills_stamp`]): the BM25 index is
//! rebuilt when a `SKILL.md` changed, and only new or edited skills are embedded again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::ToolOutput;
use toolgate_store::memory::rank::{MIN_SIMILARITY, QueryVectors, Vectors, alongside, fuse};
use toolgate_store::memory::{EmbedError, Embedder, embed_batches};
use toolgate_store::{EmbeddingCache, embedding_key};

use super::{Bm25, Skill, discover};

/// Candidates taken from each ranking before fusion.
const CANDIDATES: usize = 50;
/// Skill texts embedded per call to the model.
const BATCH: usize = 32;
/// Query vectors kept.
const CACHED_QUERIES: usize = 128;

/// The skills and their BM25 index, as of the last `skill_search`.
#[derive(Debug)]
pub(super) struct SearchIndex {
    /// Unique in the process: the vectors of this very skill list are keyed by it.
    id: u64,
    stamp: u64,
    workspace: PathBuf,
    skills: Vec<Skill>,
    index: Bm25,
}

static SEARCH: Mutex<Option<Arc<SearchIndex>>> = Mutex::new(None);
static NEXT_INDEX_ID: AtomicU64 = AtomicU64::new(0);

/// The search index for `workspace`'s skills, rebuilt only when a `SKILL.md` changed (the
/// discovery's stamp): building it tokenizes every skill's body.
fn search_index(workspace: &Path, user: Option<&Path>) -> Arc<SearchIndex> {
    let stamp = super::skills_stamp(workspace, user);
    let mut cached = SEARCH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cached.as_ref().filter(|c| c.stamp == stamp && c.workspace == workspace) {
        return Arc::clone(c);
    }
    let (skills, _) = discover(workspace, user);
    let docs: Vec<String> = skills
        .iter()
        .map(|s| format!("{0} {0} {0} {1} {1} {2}", s.name.replace('-', " "), s.description, s.body))
        .collect();
    let index = Bm25::new(docs.iter().map(String::as_str));
    let id = NEXT_INDEX_ID.fetch_add(1, Ordering::Relaxed);
    let fresh = Arc::new(SearchIndex { id, stamp, workspace: workspace.to_path_buf(), skills, index });
    *cached = Some(Arc::clone(&fresh));
    fresh
}

/// The text a skill is embedded by.
fn meaning_text(skill: &Skill) -> String {
    format!("{}: {}", skill.name.replace('-', " "), skill.description)
}

/// Skill vectors under one embedder (one per gate: gates may use different models), kept in
/// the state database too when there is one, so a new process does not embed them again.
#[derive(Debug)]
pub(crate) struct SkillVectors {
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<dyn EmbeddingCache>>,
    queries: QueryVectors,
    state: Mutex<VectorState>,
    /// The model's last failure: for [`RETRY_AFTER`] searches do not ask it again (an endpoint
    /// that hangs would make every search wait for its timeout).
    failed: Mutex<Option<(Instant, EmbedError)>>,
}

/// How long after a failure the model is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// The vectors of the skill set last searched, and each embedded text's vector (so a changed
/// set embeds only its new or edited skills).
#[derive(Debug, Default)]
struct VectorState {
    /// The [`SearchIndex::id`] the set was built for.
    of: Option<u64>,
    set: Option<Arc<Vectors>>,
    by_text: HashMap<String, Vec<f32>>,
}

impl SkillVectors {
    pub(crate) fn new(embedder: Arc<dyn Embedder>, cache: Option<Arc<dyn EmbeddingCache>>) -> SkillVectors {
        SkillVectors {
            embedder,
            cache,
            queries: QueryVectors::new(CACHED_QUERIES),
            state: Mutex::default(),
            failed: Mutex::default(),
        }
    }

    /// `query`'s vector (cached for repeated queries).
    fn query_vector(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        self.queries.embed(self, query)?.ok_or_else(|| no_vector(&*self.embedder))
    }

    /// The model's failure of less than [`RETRY_AFTER`] ago, if any.
    fn recent_failure(&self) -> Option<EmbedError> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        let (at, e) = failed.as_ref().filter(|(at, _)| at.elapsed() < RETRY_AFTER)?;
        Some(EmbedError(format!(
            "{e} ({} s ago; asked again {} s after a failure)",
            at.elapsed().as_secs(),
            RETRY_AFTER.as_secs()
        )))
    }

    /// Whether skills were embedded already (so the model is loaded and the query can be
    /// embedded while the skills are read).
    fn warm(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).set.is_some()
    }

    /// Indexes (into `search.skills`) of the skills nearest in meaning to the query vector `q`,
    /// nearest first, those too unrelated left out; and how many skills were embedded for it.
    fn nearest(&self, search: &SearchIndex, q: &[f32]) -> Result<(Vec<usize>, usize), EmbedError> {
        let (set, embedded) = self.vectors(search)?;
        if q.len() != set.dims() {
            return Err(wrong_dims(q.len(), set.dims()));
        }
        let near = set
            .nearest(q, CANDIDATES)
            .into_iter()
            .filter(|(_, distance)| 1.0 - distance >= MIN_SIMILARITY)
            .map(|(i, _)| i as usize)
            .collect();
        Ok((near, embedded))
    }

    /// The vectors of `search`'s skills, and how many had to be embedded (those neither in
    /// memory nor in the state database).
    fn vectors(&self, search: &SearchIndex) -> Result<(Arc<Vectors>, usize), EmbedError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let of = search.id;
        if let Some(set) = state.set.as_ref().filter(|_| state.of == Some(of)) {
            return Ok((Arc::clone(set), 0));
        }
        let texts: Vec<String> = search.skills.iter().map(meaning_text).collect();
        let model = self.embedder.model_id().to_owned();
        let dims = self.embedder.dims();
        let missing: Vec<&str> = texts.iter().map(String::as_str).filter(|t| !state.by_text.contains_key(*t)).collect();
        let mut embedded = 0;
        if !missing.is_empty() {
            let keys: Vec<String> = texts.iter().map(|t| embedding_key(t)).collect();
            let key_of: HashMap<&str, &String> = texts.iter().map(String::as_str).zip(&keys).collect();
            if let Some(store) = &self.cache {
                let wanted: Vec<String> = missing.iter().map(|t| key_of[t].clone()).collect();
                match store.cached_embeddings(&model, &wanted) {
                    Ok(found) => {
                        for text in &missing {
                            if let Some(v) = found.get(key_of[text]).filter(|v| v.len() == dims) {
                                state.by_text.insert((*text).to_owned(), v.clone());
                            }
                        }
                    }
                    Err(e) => tracing::warn!("cannot read cached skill vectors: {e}"),
                }
            }
            let to_embed: Vec<&str> = missing.into_iter().filter(|t| !state.by_text.contains_key(*t)).collect();
            let vectors = embed_batches(&to_embed, BATCH, dims, |batch| self.embed(batch))?;
            let mut fresh = Vec::with_capacity(to_embed.len());
            for (text, v) in to_embed.iter().zip(vectors) {
                fresh.push((key_of[text].clone(), v.clone()));
                state.by_text.insert((*text).to_owned(), v);
            }
            embedded = to_embed.len();
            if let Some(store) = &self.cache
                && let Err(e) = store.cache_embeddings(&model, &fresh, &keys)
            {
                tracing::warn!("cannot keep skill vectors in the state database: {e}");
            }
        }
        let mut set = Vectors::with_capacity(dims, texts.len());
        for (i, text) in texts.iter().enumerate() {
            if let Some(v) = state.by_text.get(text) {
                set.push(i as i64, v.iter().copied());
            }
        }
        let current: HashSet<&String> = texts.iter().collect();
        state.by_text.retain(|text, _| current.contains(text));
        let set = Arc::new(set);
        state.set = Some(Arc::clone(&set));
        state.of = Some(of);
        Ok((set, embedded))
    }
}

/// The model, unless it failed less than [`RETRY_AFTER`] ago; its failures are remembered.
impl Embedder for SkillVectors {
    fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    fn dims(&self) -> usize {
        self.embedder.dims()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(e) = self.recent_failure() {
            return Err(e);
        }
        self.embedder.embed(texts).inspect_err(|e| {
            *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), e.clone()));
        })
    }
}

fn wrong_dims(got: usize, expected: usize) -> EmbedError {
    EmbedError(format!("the embedding model returned {got} dimensions, expected {expected}"))
}

fn no_vector(embedder: &dyn Embedder) -> EmbedError {
    EmbedError(format!("the embedding model {} returned nothing", embedder.model_id()))
}

/// Runs `skill_search` (blocking: reads skill folders, may run the embedding model).
pub(super) fn search(
    workspace: &Path,
    user: Option<&Path>,
    query: &str,
    limit: usize,
    vectors: Option<&SkillVectors>,
) -> ToolOutput {
    let words = || {
        let search = search_index(workspace, user);
        let by_text = search.index.search(query, CANDIDATES.max(limit));
        (search, by_text)
    };
    // Embedding a new query is most of a search: once the model is loaded it runs beside
    // reading the skills and BM25 (before that, only when there are skills to compare with).
    let ((search, by_text), query_vector) = match vectors {
        Some(v) if v.warm() && v.recent_failure().is_none() => {
            let (embedded, found) = alongside(|| v.query_vector(query), words);
            (found, Some(embedded))
        }
        _ => (words(), None),
    };
    let mut notes = Vec::new();
    // By meaning too: (skill index, fused score, found by text, found by meaning), and the model.
    let fused = vectors.filter(|_| !search.skills.is_empty()).and_then(|v| {
        let q = query_vector.unwrap_or_else(|| v.query_vector(query));
        match q.and_then(|q| v.nearest(&search, &q)) {
            Ok((by_meaning, embedded)) => {
                if embedded > 0 {
                    notes.push(format!("embedded {embedded} skills (their vectors are kept)"));
                }
                let text_ids: Vec<usize> = by_text.iter().map(|(i, _)| *i).collect();
                let hits: Vec<_> = fuse(&[&text_ids, &by_meaning])
                    .into_iter()
                    .map(|f| (f.id, (f.score * 1000.0).round() / 1000.0, f.in_list(0), Some(f.in_list(1))))
                    .collect();
                Some((hits, v.embedder.model_id().to_owned()))
            }
            Err(e) => {
                notes.push(format!("ranked by BM25 only: embedding failed: {e}"));
                None
            }
        }
    });
    let (mut hits, model) = match fused {
        Some((hits, model)) => (hits, Some(model)),
        None => (by_text.into_iter().map(|(i, score)| (i, score, true, None)).collect(), None),
    };
    // Deterministic order: score, then name.
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| search.skills[a.0].name.cmp(&search.skills[b.0].name)));
    hits.truncate(limit);
    let mut text = String::new();
    if hits.is_empty() {
        text.push_str("no skill matches; try other words or `skill_list`\n");
    }
    let mut list = Vec::new();
    for (i, score, found_by_text, found_by_meaning) in hits {
        let s = &search.skills[i];
        text.push_str(&format!("{} ({score:.2}): {}\n", s.name, s.description.replace('\n', " ")));
        let mut hit = json!({"name": s.name, "score": score, "description": s.description, "by_text": found_by_text});
        if let Some(m) = found_by_meaning {
            hit["by_meaning"] = Value::Bool(m);
        }
        list.push(hit);
    }
    for note in &notes {
        text.push_str(&format!("note: {note}\n"));
    }
    let mode = if model.is_some() { "hybrid" } else { "bm25" };
    ToolOutput::text(text).with_meta(json!({"results": list, "mode": mode, "model": model, "notes": notes}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use toolgate_store::Store;

    /// Counts the texts it is asked to embed. A stand-in for a model here, where only the
    /// bookkeeping is tested (what is embedded when); `tests/extensions.rs` runs the real one.
    #[derive(Debug, Default)]
    struct Counting {
        texts: AtomicUsize,
        dims: usize,
    }

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dims(&self) -> usize {
            3
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0, 0.0][..self.dims].to_vec()).collect())
        }
    }

    fn skill(workspace: &Path, name: &str, description: &str) {
        let dir = workspace.join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: {description}\n---\nbody\n"))
            .unwrap();
    }

    #[test]
    fn only_new_or_edited_skills_are_embedded_again() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..40 {
            skill(dir.path(), &format!("skill-{i}"), &format!("does thing {i}"));
        }
        let model = Arc::new(Counting { dims: 3, ..Counting::default() });
        let db = tempfile::tempdir().unwrap();
        let store: Arc<dyn EmbeddingCache> = Arc::new(Store::open(&db.path().join("state.db")).unwrap());
        let vectors = SkillVectors::new(model.clone(), Some(Arc::clone(&store)));
        let out = search(dir.path(), None, "thing", 5, Some(&vectors));
        assert_eq!(out.meta.as_ref().unwrap()["mode"], "hybrid");
        assert_eq!(out.meta.as_ref().unwrap()["notes"][0], "embedded 40 skills (their vectors are kept)");
        // 40 skills in two batches, plus the query.
        assert_eq!(model.texts.load(Ordering::SeqCst), 41);
        search(dir.path(), None, "thing", 5, Some(&vectors));
        assert_eq!(model.texts.load(Ordering::SeqCst), 41, "nothing changed, the query is cached");
        // A new mtime or length changes the stamp: one skill edited, one added.
        skill(dir.path(), "skill-3", "does another thing entirely");
        skill(dir.path(), "skill-new", "a new one");
        search(dir.path(), None, "thing", 5, Some(&vectors));
        assert_eq!(model.texts.load(Ordering::SeqCst), 43);
        // A new process (a new gate) finds the vectors in the state database: only the query
        // is embedded, and the result does not say it embedded skills.
        let again = SkillVectors::new(model.clone(), Some(store));
        let out = search(dir.path(), None, "thing", 5, Some(&again));
        assert_eq!(model.texts.load(Ordering::SeqCst), 44);
        let notes = &out.meta.unwrap()["notes"];
        assert_eq!(notes, &serde_json::json!([]), "{notes}");
    }

    /// Fails every call, counting them.
    #[derive(Debug, Default)]
    struct Down(AtomicUsize);

    impl Embedder for Down {
        fn model_id(&self) -> &str {
            "down"
        }
        fn dims(&self) -> usize {
            3
        }
        fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(EmbedError("connection refused".into()))
        }
    }

    #[test]
    fn a_failing_model_is_not_asked_again_for_a_minute() {
        let dir = tempfile::tempdir().unwrap();
        skill(dir.path(), "pdf-to-text", "extract the text of a pdf");
        let model = Arc::new(Down::default());
        let vectors = SkillVectors::new(model.clone(), None);
        for _ in 0..3 {
            let s = search(dir.path(), None, "pdf", 5, Some(&vectors)).meta.unwrap();
            assert_eq!((&s["mode"], &s["results"][0]["name"]), (&json!("bm25"), &json!("pdf-to-text")));
            assert!(s["notes"][0].as_str().unwrap().contains("embedding failed: connection refused"), "{s}");
        }
        assert_eq!(model.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_model_returning_the_wrong_length_falls_back_to_bm25_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        skill(dir.path(), "pdf-to-text", "extract the text of a pdf");
        let vectors = SkillVectors::new(Arc::new(Counting { dims: 2, ..Counting::default() }), None);
        let out = search(dir.path(), None, "pdf", 5, Some(&vectors));
        let s = out.meta.unwrap();
        assert_eq!(s["mode"], "bm25");
        assert_eq!(s["results"][0]["name"], "pdf-to-text");
        assert!(s["notes"][0].as_str().unwrap().contains("returned 2 dimensions, expected 3"), "{s}");
    }
}
