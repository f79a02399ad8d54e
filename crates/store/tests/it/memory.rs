//! Local-mode memory through the public API: real files, a real SQLite index.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::Arc;
use std::time::Duration;

use toolgate_store::memory::{
    EmbedError, Embedder, LocalMemory, MemoryError, MemoryIndex, MemoryStore, Scope, SearchOptions, WriteMode,
};

fn local(dir: &std::path::Path, embedder: Option<Arc<dyn Embedder>>) -> LocalMemory {
    let index = MemoryIndex::open(Some(&dir.join(".toolgate/state.db"))).unwrap();
    LocalMemory::new(dir, index, embedder).rescan_interval(Duration::ZERO)
}

fn paths(m: &LocalMemory, q: &str) -> Vec<String> {
    m.search(&Scope::default(), q, &SearchOptions { limit: 10, min_score: 0.0 })
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.path)
        .collect()
}

#[test]
fn write_read_search_full_text_only() {
    let dir = tempfile::tempdir().unwrap();
    let m = local(dir.path(), None);
    let s = Scope::default();
    let w = m.write(&s, "MEMORY.md", "# People\nAnn's sister lives in Lisbon.\n", WriteMode::Replace).unwrap();
    assert!(w.created);
    assert_eq!(w.chunks, 1);
    m.write(&s, "memory/projects/apollo.md", "# Apollo\nThe launch deadline is March 3.", WriteMode::Replace).unwrap();
    assert_eq!(m.read(&s, "MEMORY.md").unwrap(), "# People\nAnn's sister lives in Lisbon.\n");
    let r = m.search(&s, "where does the sister live?", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits[0].path, "MEMORY.md");
    assert_eq!((r.hits[0].start_line, r.hits[0].end_line), (1, 2));
    assert!(r.hits[0].snippet.contains("sister"));
    assert!(r.model.is_none());
    assert!(r.notes.iter().any(|n| n.contains("full-text search only")), "{:?}", r.notes);
    assert_eq!(paths(&m, "launch deadline"), vec!["memory/projects/apollo.md"]);
    // Porter stemming: "launches" finds "launch".
    assert_eq!(paths(&m, "launches"), vec!["memory/projects/apollo.md"]);
}

#[test]
fn appends_keep_old_content_and_concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(local(dir.path(), None));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let m = m.clone();
            std::thread::spawn(move || {
                for j in 0..10 {
                    m.write(&Scope::default(), "memory/log.md", &format!("entry-{i}-{j}"), WriteMode::Append).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let text = m.read(&Scope::default(), "memory/log.md").unwrap();
    assert_eq!(text.lines().count(), 80, "{text}");
    for i in 0..8 {
        for j in 0..10 {
            assert!(text.contains(&format!("entry-{i}-{j}\n")));
        }
    }
}

#[test]
fn edits_and_deletes_on_disk_are_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let m = local(dir.path(), None);
    std::fs::create_dir_all(dir.path().join("memory/a")).unwrap();
    std::fs::write(dir.path().join("memory/a/pets.md"), "The cat is called Tom.\n").unwrap();
    assert_eq!(paths(&m, "cat"), vec!["memory/a/pets.md"]);
    std::fs::write(dir.path().join("memory/a/pets.md"), "The dog is called Rex, a much longer note now.\n").unwrap();
    assert!(paths(&m, "cat").is_empty());
    assert_eq!(paths(&m, "dog"), vec!["memory/a/pets.md"]);
    std::fs::remove_file(dir.path().join("memory/a/pets.md")).unwrap();
    assert!(paths(&m, "dog").is_empty());
    let report = m.sync().unwrap();
    assert_eq!((report.indexed, report.removed), (0, 0));
}

#[test]
fn the_index_survives_a_restart_and_only_changed_notes_are_indexed_again() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::create_dir_all(dir.path().join("memory")).unwrap();
        std::fs::write(dir.path().join(format!("memory/n{i}.md")), format!("note number {i}\n")).unwrap();
    }
    let first = local(dir.path(), None).sync().unwrap();
    assert_eq!(first.indexed, 20);
    std::fs::write(dir.path().join("memory/n3.md"), "changed note\n").unwrap();
    let again = local(dir.path(), None).sync().unwrap();
    assert_eq!((again.indexed, again.unchanged), (1, 19));
}

#[test]
fn a_corrupt_index_is_rebuilt_without_losing_notes() {
    let dir = tempfile::tempdir().unwrap();
    let m = local(dir.path(), None);
    for i in 0..30 {
        m.write(&Scope::default(), &format!("memory/n{i}.md"), &format!("alpha bravo {i}"), WriteMode::Replace)
            .unwrap();
    }
    m.index().execute_batch_for_tests("UPDATE memory_fts_data SET block = randomblob(40) WHERE id > 10;").unwrap();
    // Damage is found when the index is opened (a restart after a crash).
    let m = local(dir.path(), None);
    let r = m.search(&Scope::default(), "bravo", &SearchOptions { limit: 50, min_score: 0.0 }).unwrap();
    assert_eq!(r.hits.len(), 30, "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("rebuilt")), "{:?}", r.notes);
    // The chunks table itself damaged: every note is indexed again from the files.
    m.index().execute_batch_for_tests("DROP TABLE memory_fts; CREATE TABLE memory_fts(x);").unwrap();
    let m = local(dir.path(), None);
    let r = m.search(&Scope::default(), "alpha", &SearchOptions { limit: 50, min_score: 0.0 }).unwrap();
    assert_eq!(r.hits.len(), 30, "{:?}", r.notes);
}

#[test]
fn hostile_queries_never_break_search() {
    let dir = tempfile::tempdir().unwrap();
    let m = local(dir.path(), None);
    m.write(&Scope::default(), "MEMORY.md", "re-run the build: it's in /opt/ci\n", WriteMode::Replace).unwrap();
    for q in ["re-run", "it's", "a/b:c", "\"unbalanced", "NEAR(a b)", "* OR AND NOT", "col:value", "(((", "''"] {
        m.search(&Scope::default(), q, &SearchOptions::default()).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let huge = "build ".repeat(20_000);
    let r = m.search(&Scope::default(), &huge, &SearchOptions::default()).unwrap();
    assert_eq!(r.hits.len(), 1);
    assert!(r.notes.iter().any(|n| n.contains("cut")), "{:?}", r.notes);
    assert!(matches!(m.search(&Scope::default(), "  ", &SearchOptions::default()), Err(MemoryError::Invalid(_))));
}

#[test]
fn paths_stay_in_memory_and_bad_files_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let m = local(dir.path(), None).max_note_bytes(1000);
    let s = Scope::default();
    for bad in ["../x.md", "/etc/passwd", "SOUL.md", "USER.md", "notes.md", "memory/../../x.md", "memory/.hidden.md"] {
        assert!(matches!(m.write(&s, bad, "x", WriteMode::Replace), Err(MemoryError::InvalidPath { .. })), "{bad}");
        assert!(m.read(&s, bad).is_err(), "{bad}");
    }
    assert!(matches!(
        m.write(&s, "memory/big.md", &"x".repeat(2000), WriteMode::Replace),
        Err(MemoryError::TooLarge { .. })
    ));
    std::fs::create_dir_all(dir.path().join("memory")).unwrap();
    std::fs::write(dir.path().join("memory/bin.md"), b"\xff\xfe\x00binary word").unwrap();
    std::fs::write(dir.path().join("memory/huge.md"), "word ".repeat(1000)).unwrap();
    std::fs::write(dir.path().join("memory/ok.md"), "word\n").unwrap();
    let outside = dir.path().join("secret.md");
    std::fs::write(&outside, "word secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join("memory/link.md")).unwrap();
    let r = m.search(&s, "word", &SearchOptions::default()).unwrap();
    assert_eq!(r.hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), vec!["memory/ok.md"]);
    let notes = r.notes.join("\n");
    assert!(
        notes.contains("memory/bin.md: not UTF-8")
            && notes.contains("memory/huge.md")
            && notes.contains("memory/link.md"),
        "{notes}"
    );
    assert!(matches!(m.read(&s, "memory/bin.md"), Err(MemoryError::NotText { .. })));
    assert!(matches!(m.read(&s, "memory/link.md"), Err(MemoryError::InvalidPath { .. })));
    assert!(matches!(m.write(&s, "memory/link.md", "x", WriteMode::Replace), Err(MemoryError::InvalidPath { .. })));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "word secret\n");
}

/// An embedder whose endpoint answers with the wrong number of dimensions.
#[derive(Debug)]
struct WrongDims;

impl Embedder for WrongDims {
    fn model_id(&self) -> &str {
        "wrong"
    }
    fn dims(&self) -> usize {
        8
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|_| vec![0.5; 3]).collect())
    }
}

/// An embedder whose endpoint is down; counts the calls.
#[derive(Debug, Default)]
struct Down(std::sync::atomic::AtomicUsize);

impl Embedder for Down {
    fn model_id(&self) -> &str {
        "down"
    }
    fn dims(&self) -> usize {
        8
    }
    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(EmbedError("connection refused".into()))
    }
}

#[test]
fn a_failing_embedder_is_tried_once_per_search() {
    let dir = tempfile::tempdir().unwrap();
    let down = Arc::new(Down::default());
    let m = local(dir.path(), Some(down.clone()));
    m.write(&Scope::default(), "MEMORY.md", "the wifi password is on the fridge", WriteMode::Replace).unwrap();
    let before = down.0.load(std::sync::atomic::Ordering::SeqCst);
    for i in 1..=3 {
        let r = m.search(&Scope::default(), "wifi", &SearchOptions::default()).unwrap();
        assert_eq!(r.hits.len(), 1);
        assert!(r.notes.iter().any(|n| n.contains("connection refused")), "{:?}", r.notes);
        assert_eq!(down.0.load(std::sync::atomic::Ordering::SeqCst), before + i, "one call per search");
    }
}

/// A deterministic bag-of-words embedder: each word adds to one of 16 dimensions.
#[derive(Debug)]
struct Words;

impl Embedder for Words {
    fn model_id(&self) -> &str {
        "words"
    }
    fn dims(&self) -> usize {
        16
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0; 16];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
                    let h = w.to_lowercase().bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
                    v[h % 16] += 1.0;
                }
                v
            })
            .collect())
    }
}

/// The vectors a search keeps in memory follow changes made through another connection (another
/// process writing the same state database), not only this one's.
#[test]
fn vectors_kept_in_memory_follow_another_process_changes() {
    let dir = tempfile::tempdir().unwrap();
    let a = local(dir.path(), Some(Arc::new(Words)));
    let b = local(dir.path(), Some(Arc::new(Words)));
    let s = Scope::default();
    a.write(&s, "memory/one.md", "zebra giraffe okapi", WriteMode::Replace).unwrap();
    let by_meaning = |m: &LocalMemory, q: &str| -> Vec<String> {
        m.search(&s, q, &SearchOptions { limit: 10, min_score: 0.0 })
            .unwrap()
            .hits
            .into_iter()
            .filter(|h| h.by_meaning)
            .map(|h| h.path)
            .collect()
    };
    assert_eq!(by_meaning(&a, "zebra okapi"), vec!["memory/one.md"]);
    // Another connection adds a note and removes the first; the first sees both at once.
    b.write(&s, "memory/two.md", "penguin walrus seal", WriteMode::Replace).unwrap();
    std::fs::remove_file(dir.path().join("memory/one.md")).unwrap();
    b.sync().unwrap();
    let a_rescan_free = LocalMemory::new(
        dir.path(),
        MemoryIndex::open(Some(&dir.path().join(".toolgate/state.db"))).unwrap(),
        Some(Arc::new(Words)),
    )
    .rescan_interval(Duration::from_secs(3600));
    assert_eq!(by_meaning(&a_rescan_free, "zebra okapi"), Vec::<String>::new());
    assert_eq!(by_meaning(&a_rescan_free, "penguin walrus"), vec!["memory/two.md"]);
    // The first memory kept its vectors in memory from its first search: still right.
    assert_eq!(by_meaning(&a, "penguin walrus"), vec!["memory/two.md"]);
}

#[test]
fn a_broken_embedder_falls_back_to_full_text_and_says_so() {
    for (e, expect) in
        [(Arc::new(WrongDims) as Arc<dyn Embedder>, "dimensions"), (Arc::new(Down::default()), "connection refused")]
    {
        let dir = tempfile::tempdir().unwrap();
        let m = local(dir.path(), Some(e));
        let w =
            m.write(&Scope::default(), "MEMORY.md", "the wifi password is on the fridge", WriteMode::Replace).unwrap();
        assert!(w.notes.iter().any(|n| n.contains(expect)), "{:?}", w.notes);
        let r = m.search(&Scope::default(), "wifi", &SearchOptions::default()).unwrap();
        assert_eq!(r.hits.len(), 1);
        assert!(r.model.is_none());
        assert!(r.notes.iter().any(|n| n.contains("full-text search only") && n.contains(expect)), "{:?}", r.notes);
    }
}

/// Managed mode searches by meaning too, and the vectors of one user never answer another:
/// user A's search sees A's notes and the agent's global notes, never B's, though B's note is
/// the nearest by meaning.
#[test]
fn managed_vectors_stay_with_their_user() {
    use toolgate_store::memory::ManagedMemory;
    let m = ManagedMemory::new(MemoryIndex::open(None).unwrap(), Some(Arc::new(Words)));
    let scope = |user: &str| Scope { user: user.into(), agent: "helper".into() };
    m.write(&scope("a"), "MEMORY.md", "zebra giraffe okapi", WriteMode::Replace).unwrap();
    m.write(&scope("b"), "MEMORY.md", "penguin walrus seal", WriteMode::Replace).unwrap();
    m.write(&scope(""), "memory/team.md", "walrus meeting notes", WriteMode::Replace).unwrap();
    let found = |user: &str, q: &str| -> Vec<(String, String)> {
        let r = m.search(&scope(user), q, &SearchOptions { limit: 10, min_score: 0.0 }).unwrap();
        assert_eq!(r.model.as_deref(), Some("words"), "{:?}", r.notes);
        r.hits.into_iter().map(|h| (h.path, h.snippet)).collect()
    };
    let a = found("a", "penguin walrus seal");
    assert!(a.iter().all(|(_, s)| !s.contains("penguin")), "{a:?}");
    assert!(a.iter().any(|(p, _)| p == "memory/team.md"), "the global note: {a:?}");
    let b = found("b", "penguin walrus seal");
    assert_eq!(b.first().map(|h| h.0.as_str()), Some("MEMORY.md"), "{b:?}");
    assert!(b.iter().all(|(_, s)| !s.contains("zebra")), "{b:?}");
    // Another agent of the same user sees none of it.
    let other = m.search(&Scope { user: "a".into(), agent: "other".into() }, "zebra", &SearchOptions::default());
    assert!(other.unwrap().hits.is_empty());
    assert_eq!(m.read(&scope("b"), "memory/team.md").unwrap(), "walrus meeting notes\n");
    // A user's note shadows the global note of the same path, in reads and in search.
    m.write(&scope("b"), "memory/team.md", "b's own walrus plans", WriteMode::Replace).unwrap();
    assert_eq!(m.read(&scope("b"), "memory/team.md").unwrap(), "b's own walrus plans\n");
    let b = found("b", "walrus meeting");
    assert!(b.iter().all(|(_, s)| !s.contains("meeting")), "{b:?}");
    assert!(b.iter().any(|(_, s)| s.contains("plans")), "{b:?}");
    assert!(found("a", "walrus meeting").iter().any(|(_, s)| s.contains("meeting")));
    assert!(matches!(m.read(&scope("a"), "memory/none.md"), Err(MemoryError::NotFound { .. })));
}
