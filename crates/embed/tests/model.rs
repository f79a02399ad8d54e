//! The real model (installed by `cargo xtask deps` into `.cache/models/`): tokenizer ids and
//! embeddings that put paraphrases together.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::path::PathBuf;

use toolgate_embed::{Embedder, LocalModel};

fn model() -> LocalModel {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/all-minilm-l6-v2");
    LocalModel::load(&dir).unwrap_or_else(|e| panic!("{e}: run `cargo xtask deps` to install the memory search model"))
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn tokenizer_matches_bert_uncased_ids() {
    let m = model();
    // Hugging Face's documented example for bert-base-uncased (the same vocabulary).
    assert_eq!(
        m.tokenizer().encode("I have a new GPU!", 256),
        vec![101, 1045, 2031, 1037, 2047, 14246, 2226, 999, 102]
    );
    assert_eq!(m.tokenizer().encode("Hello, world.", 256), vec![101, 7592, 1010, 2088, 1012, 102]);
    // Accents stripped, truncation keeps [CLS] and [SEP].
    assert_eq!(m.tokenizer().encode("Héllo", 256), m.tokenizer().encode("hello", 256));
    let long = "word ".repeat(1000);
    let ids = m.tokenizer().encode(&long, 256);
    assert_eq!((ids.len(), ids[0], ids[255]), (256, 101, 102));
}

#[test]
fn paraphrases_are_close_and_unrelated_text_is_far() {
    let m = model();
    let v = m
        .embed(&[
            "Where does my sister live?",
            "Ann's sibling has an apartment in Lisbon.",
            "The CI pipeline runs cargo test on every push.",
            "",
        ])
        .unwrap();
    assert_eq!(v.len(), 4);
    for x in &v {
        assert_eq!(x.len(), 384);
        assert!((cos(x, x) - 1.0).abs() < 1e-4, "unit length");
    }
    let para = cos(&v[0], &v[1]);
    let unrelated = cos(&v[0], &v[2]);
    assert!(para > 0.3 && para > unrelated + 0.2, "paraphrase {para}, unrelated {unrelated}");
    // Batching does not change a vector.
    let alone = m.embed(&["Where does my sister live?"]).unwrap();
    assert!(cos(&alone[0], &v[0]) > 0.9999);
}
