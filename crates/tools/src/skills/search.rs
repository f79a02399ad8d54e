//! `skill_search`: BM25 over each skill's name, description and instructions, fused (Reciprocal
//! Rank Fusion) with a search by meaning when an embedder is configured (`[memory.embeddings]`,
//! the memory tools' model). A skill's vector is that of its name and description, the text the
//! Agent Skills format writes for choosing a skill.
//!
//! Both indexes follow the skill folders' stamp ([`super::skills_stamp`]): the BM25 index is
//! rebuilt when a `SKILL.md` changed, and only new or edited skills are embedded again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_core::ToolOutput;
use toolgate_store::memory::rank::{MIN_SIMILARITY, QueryVectors, Vectors, fuse};
use toolgate_store::memory::{EmbedError, Embedder};

use super::{Bm25, Skill, discover, user_dir};

/// Candidates taken from each ranking before fusion.
const CANDIDATES: usize = 50;
/// Skill texts embedded per call to the model.
const BATCH: usize = 32;
/// Query vectors kept.
const CACHED_QUERIES: usize = 128;

/// The skills and their BM25 index, as of the last `skill_search`.
#[derive(Debug)]
pub(super) struct SearchIndex {
    stamp: u64,
    workspace: PathBuf,
    skills: Vec<Skill>,
    index: Bm25,
}

static SEARCH: Mutex<Option<Arc<SearchIndex>>> = Mutex::new(None);

/// The search index for `workspace`'s skills, rebuilt only when a `SKILL.md` changed (the
/// discovery's stamp): building it tokenizes every skill's body.
fn search_index(workspace: &Path) -> Arc<SearchIndex> {
    let user = user_dir();
    let stamp = super::skills_stamp(workspace, user.as_deref());
    let mut cached = SEARCH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cached.as_ref().filter(|c| c.stamp == stamp && c.workspace == workspace) {
        return Arc::clone(c);
    }
    let (skills, _) = discover(workspace, user.as_deref());
    let docs: Vec<String> = skills
        .iter()
        .map(|s| format!("{0} {0} {0} {1} {1} {2}", s.name.replace('-', " "), s.description, s.body))
        .collect();
    let index = Bm25::new(docs.iter().map(String::as_str));
    let fresh = Arc::new(SearchIndex { stamp, workspace: workspace.to_path_buf(), skills, index });
    *cached = Some(Arc::clone(&fresh));
    fresh
}

/// The text a skill is embedded by.
fn meaning_text(skill: &Skill) -> String {
    format!("{}: {}", skill.name.replace('-', " "), skill.description)
}

/// Skill vectors under one embedder (one per gate: gates may use different models).
#[derive(Debug)]
pub(crate) struct SkillVectors {
    embedder: Arc<dyn Embedder>,
    queries: QueryVectors,
    state: Mutex<VectorState>,
}

/// The vectors of the skill set last searched, and each embedded text's vector (so a changed
/// set embeds only its new or edited skills).
#[derive(Debug, Default)]
struct VectorState {
    of: Option<(u64, PathBuf)>,
    set: Option<Arc<Vectors>>,
    by_text: HashMap<String, Vec<f32>>,
}

impl SkillVectors {
    pub(crate) fn new(embedder: Arc<dyn Embedder>) -> SkillVectors {
        SkillVectors { embedder, queries: QueryVectors::new(CACHED_QUERIES), state: Mutex::default() }
    }

    /// `query`'s vector (cached for repeated queries).
    fn query_vector(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        self.queries.embed(&*self.embedder, query)?.ok_or_else(|| no_vector(&*self.embedder))
    }

    /// Whether skills were embedded already (so the model is loaded and the query can be
    /// embedded while the skills are read).
    fn warm(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).set.is_some()
    }

    /// Indexes (into `search.skills`) of the skills nearest in meaning to the query vector `q`,
    /// nearest first, those too unrelated left out.
    fn nearest(&self, search: &SearchIndex, q: &[f32]) -> Result<Vec<usize>, EmbedError> {
        let set = self.vectors(search)?;
        if q.len() != set.dims() {
            return Err(wrong_dims(q.len(), set.dims()));
        }
        Ok(set
            .nearest(q, CANDIDATES)
            .into_iter()
            .filter(|(_, distance)| 1.0 - distance >= MIN_SIMILARITY)
            .map(|(i, _)| i as usize)
            .collect())
    }

    /// The vectors of `search`'s skills, embedding those not seen before.
    fn vectors(&self, search: &SearchIndex) -> Result<Arc<Vectors>, EmbedError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let of = (search.stamp, search.workspace.clone());
        if let Some(set) = state.set.as_ref().filter(|_| state.of.as_ref() == Some(&of)) {
            return Ok(Arc::clone(set));
        }
        let texts: Vec<String> = search.skills.iter().map(meaning_text).collect();
        let mut missing: Vec<&str> =
            texts.iter().map(String::as_str).filter(|t| !state.by_text.contains_key(*t)).collect();
        missing.dedup();
        let dims = self.embedder.dims();
        for batch in missing.chunks(BATCH) {
            let vectors = self.embedder.embed(batch)?;
            if vectors.len() != batch.len() {
                return Err(EmbedError(format!(
                    "the embedding model returned {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            for (text, v) in batch.iter().zip(vectors) {
                if v.len() != dims {
                    return Err(wrong_dims(v.len(), dims));
                }
                state.by_text.insert((*text).to_owned(), v);
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
        Ok(set)
    }
}

fn wrong_dims(got: usize, expected: usize) -> EmbedError {
    EmbedError(format!("the embedding model returned {got} dimensions, expected {expected}"))
}

fn no_vector(embedder: &dyn Embedder) -> EmbedError {
    EmbedError(format!("the embedding model {} returned nothing", embedder.model_id()))
}

/// Runs `skill_search` (blocking: reads skill folders, may run the embedding model).
pub(super) fn search(workspace: &Path, query: &str, limit: usize, vectors: Option<&SkillVectors>) -> ToolOutput {
    let words = || {
        let search = search_index(workspace);
        let by_text = search.index.search(query, CANDIDATES.max(limit));
        (search, by_text)
    };
    // Embedding a new query is most of a search: once the model is loaded it runs beside
    // reading the skills and BM25 (before that, only when there are skills to compare with).
    let ((search, by_text), mut query_vector) = match vectors {
        Some(v) if v.warm() => std::thread::scope(|s| {
            let embedding = s.spawn(|| v.query_vector(query));
            let found = words();
            (found, Some(embedding.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
        }),
        _ => (words(), None),
    };
    let mut notes = Vec::new();
    // (skill index, score, found by text, found by meaning)
    let mut hits: Vec<(usize, f64, bool, Option<bool>)> = Vec::new();
    let mut model = None;
    match vectors {
        Some(v) if !search.skills.is_empty() => {
            let q = query_vector.take().unwrap_or_else(|| v.query_vector(query));
            match q.and_then(|q| v.nearest(&search, &q)) {
                Ok(by_meaning) => {
                    let text_ids: Vec<usize> = by_text.iter().map(|(i, _)| *i).collect();
                    hits = fuse(&[&text_ids, &by_meaning])
                        .into_iter()
                        .map(|f| (f.id, (f.score * 1000.0).round() / 1000.0, f.in_list(0), Some(f.in_list(1))))
                        .collect();
                    model = Some(v.embedder.model_id().to_owned());
                }
                Err(e) => notes.push(format!("ranked by BM25 only: embedding failed: {e}")),
            }
        }
        _ => {}
    }
    if model.is_none() {
        hits = by_text.into_iter().map(|(i, score)| (i, score, true, None)).collect();
    }
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
    ToolOutput::text(text).with_structured(json!({"results": list, "mode": mode, "model": model, "notes": notes}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
        let vectors = SkillVectors::new(model.clone());
        let out = search(dir.path(), "thing", 5, Some(&vectors));
        assert_eq!(out.structured.as_ref().unwrap()["mode"], "hybrid");
        // 40 skills in two batches, plus the query.
        assert_eq!(model.texts.load(Ordering::SeqCst), 41);
        search(dir.path(), "thing", 5, Some(&vectors));
        assert_eq!(model.texts.load(Ordering::SeqCst), 41, "nothing changed, the query is cached");
        // A new mtime or length changes the stamp: one skill edited, one added.
        skill(dir.path(), "skill-3", "does another thing entirely");
        skill(dir.path(), "skill-new", "a new one");
        search(dir.path(), "thing", 5, Some(&vectors));
        assert_eq!(model.texts.load(Ordering::SeqCst), 43);
    }

    #[test]
    fn a_model_returning_the_wrong_length_falls_back_to_bm25_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        skill(dir.path(), "pdf-to-text", "extract the text of a pdf");
        let vectors = SkillVectors::new(Arc::new(Counting { dims: 2, ..Counting::default() }));
        let out = search(dir.path(), "pdf", 5, Some(&vectors));
        let s = out.structured.unwrap();
        assert_eq!(s["mode"], "bm25");
        assert_eq!(s["results"][0]["name"], "pdf-to-text");
        assert!(s["notes"][0].as_str().unwrap().contains("returned 2 dimensions, expected 3"), "{s}");
    }
}
