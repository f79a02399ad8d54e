//! Query handling and rank fusion, independent of where notes live.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Instant;

use super::index::MemoryIndex;
use super::rank::{MIN_SIMILARITY, fuse};
use super::{EmbedError, Embedder, SearchHit, SearchOptions, SearchResults};
use crate::StoreError;

/// Candidates taken from each method.
const CANDIDATES: usize = 50;
/// Most query terms passed to full-text search.
const MAX_TERMS: usize = 64;
/// Longest query used, in characters (the rest is ignored and the result says so).
pub(crate) const MAX_QUERY_CHARS: usize = 4_000;
/// Longest snippet, in characters.
const SNIPPET_CHARS: usize = 240;

/// The words of a query for full-text search: lowercase runs of letters and digits, each once,
/// at most 64 (no character of them is any engine's query syntax).
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let w = word.to_lowercase();
        if !terms.contains(&w) {
            terms.push(w);
        }
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    terms
}

/// The user's query as an FTS5 expression: each word quoted (so no character of the query is
/// FTS5 syntax) and OR-combined for recall. `None` when the query has no word characters.
pub(crate) fn fts_expression(query: &str) -> Option<String> {
    let terms = query_terms(query);
    (!terms.is_empty()).then(|| terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// Runs a search on `scopes` of `index`: full-text and (with an embedder) vector candidates fused
/// with RRF. Embedding failures (or `failed`, an error the embedder just gave) fall back to
/// full-text only, said in `notes`.
pub(crate) fn run(
    index: &MemoryIndex,
    embedder: Option<&Arc<dyn Embedder>>,
    failed: Option<&str>,
    scopes: (&str, &str),
    query: &str,
    options: &SearchOptions,
    notes: &mut Vec<String>,
) -> Result<SearchResults, StoreError> {
    let query: String = if query.chars().count() > MAX_QUERY_CHARS {
        notes.push(format!("the query was cut to its first {MAX_QUERY_CHARS} characters"));
        query.chars().take(MAX_QUERY_CHARS).collect()
    } else {
        query.to_owned()
    };
    let terms = query_terms(&query);
    let fts = || if terms.is_empty() { Ok(Vec::new()) } else { index.fts(scopes, &terms, CANDIDATES) };
    // Embedding the query is most of a search: it runs on another thread while full text runs
    // here, and full text waits for it at most the embedder's budget (unless the query's vector
    // is cached, the embedder just failed, or there is none). A late vector still lands in the
    // query cache: the same query asked again is hybrid.
    let mut budget = None;
    let start = Instant::now();
    let usable = embedder.filter(|_| failed.is_none());
    let (text_ids, embedded) = match usable {
        Some(e) if !index.has_query(e.as_ref(), &query) => {
            let pending = embed_beside(index, e, &query);
            let words = fts();
            budget = e.query_budget();
            let stopped = || EmbedError("the query's embedding stopped unexpectedly".into());
            let embedded = match (pending, budget) {
                (Some(rx), Some(budget)) => match rx.recv_timeout(budget.saturating_sub(start.elapsed())) {
                    Ok(r) => Some(r),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => Some(Err(stopped())),
                },
                (Some(rx), None) => Some(rx.recv().unwrap_or_else(|_| Err(stopped()))),
                (None, _) => Some(index.embed_query(e.as_ref(), &query)),
            };
            (words, embedded)
        }
        Some(e) => (fts(), Some(index.embed_query(e.as_ref(), &query))),
        None => (fts(), Some(Ok(None))),
    };
    let text_ids = text_ids?;
    let mut model = None;
    let mut vector_ids: Vec<i64> = Vec::new();
    match embedder {
        Some(_) if failed.is_none() && embedded.is_none() => notes.push(format!(
            "results by words only: the query's embedding took longer than {} ms (a busy machine); \
             asking again gives results by meaning too",
            budget.unwrap_or_default().as_millis()
        )),
        // The embedder just failed on the notes: not tried again (an endpoint that is down would
        // make the search wait twice).
        Some(_) if failed.is_some() => {
            notes.push(format!("full-text search only: embedding failed: {}", failed.unwrap_or_default()))
        }
        None => notes.push(
            "full-text search only: no embedding model is configured ([memory.embeddings] provider = \"none\")".into(),
        ),
        Some(e) => match embedded.unwrap_or(Ok(None)) {
            Ok(Some(v)) if v.len() == e.dims() => {
                vector_ids = index
                    .nearest(scopes, e.model_id(), &v, CANDIDATES)?
                    .into_iter()
                    .filter(|(_, d)| 1.0 - d >= MIN_SIMILARITY)
                    .map(|(id, _)| id)
                    .collect();
                model = Some(e.model_id().to_owned());
            }
            Ok(Some(v)) => notes.push(format!(
                "full-text search only: the embedding model returned {} dimensions, expected {}",
                v.len(),
                e.dims()
            )),
            Ok(None) => notes.push("full-text search only: the embedding model returned nothing".into()),
            Err(err) => notes.push(format!("full-text search only: embedding the query failed: {err}")),
        },
    }
    let fused = if model.is_some() { fuse(&[&text_ids, &vector_ids]) } else { fuse(&[&text_ids]) };
    let ids: Vec<i64> = fused.iter().map(|f| f.id).collect();
    let mut rows = index.chunks(&ids)?;
    // A note of the second scope (the agent's global notes) that the first (the user's) has a
    // note of the same path for is shadowed: reading that path gives the user's.
    if scopes.0 != scopes.1 {
        let mut shadowed = Vec::new();
        for (id, row) in &rows {
            if row.scope == scopes.1 && index.doc(scopes.0, &row.path)?.is_some() {
                shadowed.push(*id);
            }
        }
        for id in shadowed {
            rows.remove(&id);
        }
    }
    let mut hits: Vec<SearchHit> = fused
        .into_iter()
        .filter_map(|f| {
            let row = rows.get(&f.id)?;
            Some(SearchHit {
                path: row.path.clone(),
                start_line: row.start_line,
                end_line: row.end_line,
                score: f.score,
                snippet: snippet(&row.text, &query),
                by_text: f.in_list(0),
                by_meaning: f.in_list(1),
            })
        })
        .filter(|h| h.score >= options.min_score)
        .collect();
    // Deterministic order: score, then path, then position.
    hits.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.start_line.cmp(&b.start_line))
    });
    hits.truncate(options.limit);
    for h in &mut hits {
        h.score = (h.score * 1000.0).round() / 1000.0;
    }
    Ok(SearchResults { hits, model, notes: std::mem::take(notes) })
}

/// Starts embedding `query` on its own thread (the result also lands in the index's query
/// cache, so a vector that comes after the budget serves the next search). `None` when no
/// thread could be started: the caller embeds in place.
fn embed_beside(
    index: &MemoryIndex,
    embedder: &Arc<dyn Embedder>,
    query: &str,
) -> Option<mpsc::Receiver<Result<Option<Vec<f32>>, EmbedError>>> {
    let (tx, rx) = mpsc::channel();
    let cache = index.query_cache();
    let embedder = Arc::clone(embedder);
    let query = query.to_owned();
    std::thread::Builder::new()
        .name("memory-query".into())
        .spawn(move || {
            // The search may have answered already: then nobody receives this, which is fine.
            let _ = tx.send(cache.embed(embedder.as_ref(), &query));
        })
        .ok()
        .map(|_| rx)
}

/// A short excerpt of `text` around the first query word it contains (or its start).
fn snippet(text: &str, query: &str) -> String {
    let lower = text.to_lowercase();
    let at = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2)
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .unwrap_or(0);
    // `lower` can differ in length from `text`; map back by characters.
    let char_at = lower[..at.min(lower.len())].chars().count();
    let start = char_at.saturating_sub(SNIPPET_CHARS / 3);
    let mut out: String = text.chars().skip(start).take(SNIPPET_CHARS).collect::<String>();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        out.insert_str(0, "...");
    }
    if text.chars().count() > start + SNIPPET_CHARS {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_never_become_fts_syntax() {
        assert_eq!(
            fts_expression("don't re-run: a/b").as_deref(),
            Some("\"don\" OR \"t\" OR \"re\" OR \"run\" OR \"a\" OR \"b\"")
        );
        assert_eq!(
            fts_expression("NEAR(x y) AND \"z\" *").as_deref(),
            Some("\"near\" OR \"x\" OR \"y\" OR \"and\" OR \"z\"")
        );
        assert_eq!(fts_expression("  -:/'\"* "), None);
        let long = "word ".repeat(10_000);
        assert_eq!(fts_expression(&long).as_deref(), Some("\"word\""));
    }

    #[test]
    fn snippets_center_on_a_query_word() {
        let text = format!("{} the dentist is on tuesday {}", "a ".repeat(300), "b ".repeat(300));
        let s = snippet(&text, "when is the Dentist");
        assert!(s.contains("dentist is on tuesday"), "{s}");
        assert!(s.starts_with("...") && s.ends_with("..."));
    }
}
