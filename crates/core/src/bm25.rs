//! BM25 ranking of short documents (skills, agents): the name and description of each are
//! repeated by the caller to weigh them more than the body.

use std::collections::HashMap;

/// BM25 parameters (the usual ones).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// An index over documents, each given as its text; the name and description are repeated by
/// the caller to weigh them more than the body.
#[derive(Debug, Default)]
pub struct Bm25 {
    /// Term frequencies per document.
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    /// Documents containing each term.
    df: HashMap<String, u32>,
}

/// Lowercase alphanumeric words (any script), at most 10,000 per document.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).take(10_000).map(str::to_lowercase)
}

impl Bm25 {
    /// Indexes `docs`.
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index = Bm25::default();
        for text in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut len = 0;
            for w in words(text) {
                *tf.entry(w).or_default() += 1;
                len += 1;
            }
            for term in tf.keys() {
                *index.df.entry(term.clone()).or_default() += 1;
            }
            index.docs.push(tf);
            index.lengths.push(len);
        }
        index
    }

    /// (document index, score) of the documents matching `query`, best first, at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let n = self.docs.len() as f64;
        if self.docs.is_empty() {
            return Vec::new();
        }
        let avg = self.lengths.iter().sum::<usize>() as f64 / n;
        let mut terms: Vec<String> = words(query).take(32).collect();
        terms.sort();
        terms.dedup();
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .filter_map(|(i, tf)| {
                let mut score = 0.0;
                for t in &terms {
                    let Some(&f) = tf.get(t) else { continue };
                    let df = f64::from(self.df.get(t).copied().unwrap_or(0));
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let f = f64::from(f);
                    let norm = K1 * (1.0 - B + B * self.lengths[i] as f64 / avg.max(1.0));
                    score += idf * f * (K1 + 1.0) / (f + norm);
                }
                (score > 0.0).then_some((i, score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_the_matching_document_first() {
        let idx = Bm25::new([
            "pdf pdf extract text from pdf files with pdftotext",
            "changelog write a changelog entry from git history",
            "images resize images",
        ]);
        assert_eq!(idx.search("extract text from a PDF", 3)[0].0, 0);
        assert_eq!(idx.search("changelog git", 3)[0].0, 1);
        assert!(idx.search("kubernetes", 3).is_empty());
    }
}
