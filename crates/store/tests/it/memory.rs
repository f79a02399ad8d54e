//! Memory through the public API on every backend's index: local notes in real files, managed
//! notes in the store, two handles on one database as two nodes have them.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::Arc;
use std::time::Duration;

use toolgate_store::memory::{
    EmbedError, Embedder, LocalMemory, ManagedMemory, MemoryError, MemoryIndex, MemoryStore, Scope, SearchOptions,
    WriteMode,
};

use crate::{Area, Database, on_every_backend_of};

/// Local notes in `dir`, indexed by `db`'s backend (a new handle: what another process has).
fn local_on(db: &dyn Database, dir: &std::path::Path, embedder: Option<Arc<dyn Embedder>>) -> LocalMemory {
    LocalMemory::new(dir, db.memory(dir), embedder).rescan_interval(Duration::ZERO)
}

/// Local notes in `dir`, indexed in its SQLite state database (SQLite-only checks).
fn local(dir: &std::path::Path, embedder: Option<Arc<dyn Embedder>>) -> LocalMemory {
    let index = MemoryIndex::open(Some(&dir.join(".toolgate/state.db"))).unwrap();
    LocalMemory::new(dir, index, embedder).rescan_interval(Duration::ZERO)
}

/// Runs `check` on every backend's index with a fresh workspace folder.
fn on_every_index(check: impl Fn(&dyn Database, &std::path::Path)) {
    on_every_backend_of(Area::Memory, |db| {
        let dir = tempfile::tempdir().unwrap();
        check(db, dir.path());
    });
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
    on_every_index(|db, dir| {
        let m = local_on(db, dir, None);
        let s = Scope::default();
        let w = m.write(&s, "MEMORY.md", "# People\nAnn's sister lives in Lisbon.\n", WriteMode::Replace).unwrap();
        assert!(w.created);
        assert_eq!(w.chunks, 1);
        m.write(&s, "memory/projects/apollo.md", "# Apollo\nThe launch deadline is March 3.", WriteMode::Replace)
            .unwrap();
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
    });
}

#[test]
fn appends_keep_old_content_and_concurrent_writers_lose_nothing() {
    on_every_index(|db, dir| {
        let m = Arc::new(local_on(db, dir, None));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        m.write(&Scope::default(), "memory/log.md", &format!("entry-{i}-{j}"), WriteMode::Append)
                            .unwrap();
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
    });
}

#[test]
fn edits_and_deletes_on_disk_are_picked_up() {
    on_every_index(|db, dir| {
        let m = local_on(db, dir, None);
        std::fs::create_dir_all(dir.join("memory/a")).unwrap();
        std::fs::write(dir.join("memory/a/pets.md"), "The cat is called Tom.\n").unwrap();
        assert_eq!(paths(&m, "cat"), vec!["memory/a/pets.md"]);
        std::fs::write(dir.join("memory/a/pets.md"), "The dog is called Rex, a much longer note now.\n").unwrap();
        assert!(paths(&m, "cat").is_empty());
        assert_eq!(paths(&m, "dog"), vec!["memory/a/pets.md"]);
        std::fs::remove_file(dir.join("memory/a/pets.md")).unwrap();
        assert!(paths(&m, "dog").is_empty());
        let report = m.sync().unwrap();
        assert_eq!((report.indexed, report.removed), (0, 0));
    });
}

#[test]
fn the_index_survives_a_restart_and_only_changed_notes_are_indexed_again() {
    on_every_index(|db, dir| {
        for i in 0..20 {
            std::fs::create_dir_all(dir.join("memory")).unwrap();
            std::fs::write(dir.join(format!("memory/n{i}.md")), format!("note number {i}\n")).unwrap();
        }
        let first = local_on(db, dir, None).sync().unwrap();
        assert_eq!(first.indexed, 20);
        std::fs::write(dir.join("memory/n3.md"), "changed note\n").unwrap();
        let again = local_on(db, dir, None).sync().unwrap();
        assert_eq!((again.indexed, again.unchanged), (1, 19));
    });
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
    on_every_index(|db, dir| {
        let m = local_on(db, dir, None);
        m.write(&Scope::default(), "MEMORY.md", "re-run the build: it's in /opt/ci\n", WriteMode::Replace).unwrap();
        for q in ["re-run", "it's", "a/b:c", "\"unbalanced", "NEAR(a b)", "* OR AND NOT", "col:value", "(((", "''"] {
            m.search(&Scope::default(), q, &SearchOptions::default()).unwrap_or_else(|e| panic!("{q}: {e}"));
        }
        let huge = "build ".repeat(20_000);
        let r = m.search(&Scope::default(), &huge, &SearchOptions::default()).unwrap();
        assert_eq!(r.hits.len(), 1);
        assert!(r.notes.iter().any(|n| n.contains("cut")), "{:?}", r.notes);
        assert!(matches!(m.search(&Scope::default(), "  ", &SearchOptions::default()), Err(MemoryError::Invalid(_))));
    });
}

#[test]
fn paths_stay_in_memory_and_bad_files_are_skipped_and_reported() {
    on_every_index(|db, dir| {
        let m = local_on(db, dir, None).max_note_bytes(1000);
        let s = Scope::default();
        for bad in
            ["../x.md", "/etc/passwd", "SOUL.md", "USER.md", "notes.md", "memory/../../x.md", "memory/.hidden.md"]
        {
            assert!(matches!(m.write(&s, bad, "x", WriteMode::Replace), Err(MemoryError::InvalidPath { .. })), "{bad}");
            assert!(m.read(&s, bad).is_err(), "{bad}");
        }
        assert!(matches!(
            m.write(&s, "memory/big.md", &"x".repeat(2000), WriteMode::Replace),
            Err(MemoryError::TooLarge { .. })
        ));
        std::fs::create_dir_all(dir.join("memory")).unwrap();
        std::fs::write(dir.join("memory/bin.md"), b"\xff\xfe\x00binary word").unwrap();
        std::fs::write(dir.join("memory/huge.md"), "word ".repeat(1000)).unwrap();
        std::fs::write(dir.join("memory/ok.md"), "word\n").unwrap();
        let outside = dir.join("secret.md");
        std::fs::write(&outside, "word secret\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("memory/link.md")).unwrap();
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
    });
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
    on_every_index(|db, dir| {
        let down = Arc::new(Down::default());
        let m = local_on(db, dir, Some(down.clone()));
        m.write(&Scope::default(), "MEMORY.md", "the wifi password is on the fridge", WriteMode::Replace).unwrap();
        let before = down.0.load(std::sync::atomic::Ordering::SeqCst);
        for i in 1..=3 {
            let r = m.search(&Scope::default(), "wifi", &SearchOptions::default()).unwrap();
            assert_eq!(r.hits.len(), 1);
            assert!(r.notes.iter().any(|n| n.contains("connection refused")), "{:?}", r.notes);
            assert_eq!(down.0.load(std::sync::atomic::Ordering::SeqCst), before + i, "one call per search");
        }
    });
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
    on_every_index(|db, dir| {
        let a = local_on(db, dir, Some(Arc::new(Words)));
        let b = local_on(db, dir, Some(Arc::new(Words)));
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
        std::fs::remove_file(dir.join("memory/one.md")).unwrap();
        b.sync().unwrap();
        let a_rescan_free =
            LocalMemory::new(dir, db.memory(dir), Some(Arc::new(Words))).rescan_interval(Duration::from_secs(3600));
        assert_eq!(by_meaning(&a_rescan_free, "zebra okapi"), Vec::<String>::new());
        assert_eq!(by_meaning(&a_rescan_free, "penguin walrus"), vec!["memory/two.md"]);
        // The first memory kept its vectors in memory from its first search: still right.
        assert_eq!(by_meaning(&a, "penguin walrus"), vec!["memory/two.md"]);
    });
}

#[test]
fn a_broken_embedder_falls_back_to_full_text_and_says_so() {
    on_every_backend_of(Area::Memory, |db| {
        for (e, expect) in [
            (Arc::new(WrongDims) as Arc<dyn Embedder>, "dimensions"),
            (Arc::new(Down::default()), "connection refused"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let m = local_on(db, dir.path(), Some(e));
            let w = m
                .write(&Scope::default(), "MEMORY.md", "the wifi password is on the fridge", WriteMode::Replace)
                .unwrap();
            assert!(w.notes.iter().any(|n| n.contains(expect)), "{:?}", w.notes);
            let r = m.search(&Scope::default(), "wifi", &SearchOptions::default()).unwrap();
            assert_eq!(r.hits.len(), 1);
            assert!(r.model.is_none());
            assert!(r.notes.iter().any(|n| n.contains("full-text search only") && n.contains(expect)), "{:?}", r.notes);
        }
    });
}

/// Managed mode searches by meaning too, and the vectors of one user never answer another:
/// user A's search sees A's notes and the agent's global notes, never B's, though B's note is
/// the nearest by meaning.
#[test]
fn managed_vectors_stay_with_their_user() {
    on_every_index(|db, dir| {
        let m = ManagedMemory::new(db.memory(dir), Some(Arc::new(Words)));
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
    });
}

/// Two nodes on one database (two handles on one index): a managed note written through one is
/// read, listed and found through the other, by words and by meaning, and a change one makes
/// reaches the vectors the other keeps in memory.
#[test]
fn two_nodes_see_each_others_managed_notes_and_searches() {
    on_every_index(|db, dir| {
        let a = ManagedMemory::new(db.memory(dir), Some(Arc::new(Words)));
        let b = ManagedMemory::new(db.memory(dir), Some(Arc::new(Words)));
        let ann = Scope { user: "ann".into(), agent: "helper".into() };
        let all = SearchOptions { limit: 10, min_score: 0.0 };
        a.write(&ann, "memory/trip.md", "# Trip\nThe flight to Lisbon launches at nine.", WriteMode::Replace).unwrap();
        assert_eq!(b.read(&ann, "memory/trip.md").unwrap(), "# Trip\nThe flight to Lisbon launches at nine.\n");
        assert!(b.tree(&ann, "", 3).unwrap().iter().any(|e| e.path == "memory/trip.md"));
        let r = b.search(&ann, "launch lisbon", &all).unwrap();
        assert_eq!(r.hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["memory/trip.md"], "{:?}", r.notes);
        assert!(r.hits[0].by_text, "{:?}", r.hits);
        assert_eq!(r.model.as_deref(), Some("words"), "{:?}", r.notes);
        // B appends; A reads both parts.
        b.write(&ann, "memory/trip.md", "Hotel near the river.", WriteMode::Append).unwrap();
        assert_eq!(
            a.read(&ann, "memory/trip.md").unwrap(),
            "# Trip\nThe flight to Lisbon launches at nine.\nHotel near the river.\n"
        );
        // B keeps its vectors in memory from its search; A adds a note; B finds it by meaning.
        a.write(&ann, "memory/pets.md", "zebra giraffe okapi", WriteMode::Replace).unwrap();
        let by_meaning: Vec<String> = b
            .search(&ann, "zebra okapi", &all)
            .unwrap()
            .hits
            .into_iter()
            .filter(|h| h.by_meaning)
            .map(|h| h.path)
            .collect();
        assert_eq!(by_meaning.first().map(String::as_str), Some("memory/pets.md"), "{by_meaning:?}");
        // Context files too.
        a.set_context_file("helper", "ann", "USER.md", Some("Ann likes tea.")).unwrap();
        assert_eq!(
            b.context_file("helper", "ann", "USER.md").unwrap(),
            Some(toolgate_store::memory::Stored::Text("Ann likes tea.".into()))
        );
        // Another user of the same agent sees none of Ann's notes on either node.
        let bob = Scope { user: "bob".into(), agent: "helper".into() };
        assert!(b.search(&bob, "lisbon zebra", &all).unwrap().hits.is_empty());
        assert!(matches!(a.read(&bob, "memory/trip.md"), Err(MemoryError::NotFound { .. })));
    });
}

/// Workspaces are kept apart: the same user, agent and path in another workspace is another note.
#[test]
fn workspaces_keep_their_own_notes() {
    on_every_backend_of(Area::Memory, |db| {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = ManagedMemory::new(db.memory(one.path()), None);
        let second = ManagedMemory::new(db.memory(two.path()), None);
        let s = Scope { user: "ann".into(), agent: "helper".into() };
        first.write(&s, "MEMORY.md", "the alpha secret", WriteMode::Replace).unwrap();
        assert!(matches!(second.read(&s, "MEMORY.md"), Err(MemoryError::NotFound { .. })));
        assert!(second.search(&s, "alpha secret", &SearchOptions::default()).unwrap().hits.is_empty());
        second.write(&s, "MEMORY.md", "the bravo plan", WriteMode::Replace).unwrap();
        assert_eq!(first.read(&s, "MEMORY.md").unwrap(), "the alpha secret\n");
        assert_eq!(first.index().health().unwrap().notes, 1);
    });
}

/// Queries made of any engine's query syntax (FTS5's and PostgreSQL's `tsquery`: quotes,
/// operators, prefixes, distances, SQL) are words or nothing: never an error, never a change.
#[test]
fn hostile_full_text_queries_are_only_words() {
    on_every_index(|db, dir| {
        let m = ManagedMemory::new(db.memory(dir), None);
        let s = Scope { user: "ann".into(), agent: "helper".into() };
        m.write(&s, "memory/ops.md", "Re-run the deploy: it's in /opt/ci. Café opens at 8.\n", WriteMode::Replace)
            .unwrap();
        let long = "x".repeat(3000);
        for q in [
            "'",
            "\\",
            "''",
            "a:*",
            "deploy:* & !x",
            "a & b | !c",
            "x <-> y",
            "x <2> y",
            "!!",
            "'; DROP TABLE memory_chunks; --",
            "\") OR 1=1 --",
            "NEAR(a b)",
            "\0",
            long.as_str(),
            "* OR AND NOT",
        ] {
            m.search(&s, q, &SearchOptions::default()).unwrap_or_else(|e| panic!("{q:?}: {e}"));
        }
        let found = |q: &str| -> Vec<String> {
            let r = m.search(&s, q, &SearchOptions { limit: 10, min_score: 0.0 }).unwrap();
            r.hits.into_iter().map(|h| h.path).collect()
        };
        // The words inside operators still find the note; nothing was dropped.
        assert_eq!(found("deploy:* & !nothing"), ["memory/ops.md"]);
        assert_eq!(found("'; DROP TABLE memory_chunks; -- deploys"), ["memory/ops.md"]);
        assert_eq!(found("café"), ["memory/ops.md"]);
        assert_eq!(found("opt"), ["memory/ops.md"], "a path's parts are words");
    });
}

/// A NUL character: a local note's file with one is indexed and found; a managed note with one is
/// kept exactly or refused with an error that says so, and search goes on working.
#[test]
fn a_nul_character_never_breaks_the_index() {
    on_every_index(|db, dir| {
        std::fs::create_dir_all(dir.join("memory")).unwrap();
        std::fs::write(dir.join("memory/nul.md"), "alpha\0beta gamma\n").unwrap();
        let local = local_on(db, dir, None);
        let r = local.search(&Scope::default(), "gamma", &SearchOptions::default()).unwrap();
        assert_eq!(r.hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["memory/nul.md"], "{:?}", r.notes);
        let m = ManagedMemory::new(db.memory(dir), None);
        let s = Scope { user: "ann".into(), agent: "helper".into() };
        match m.write(&s, "memory/n.md", "delta\0epsilon", WriteMode::Replace) {
            Ok(_) => assert_eq!(m.read(&s, "memory/n.md").unwrap(), "delta\0epsilon\n"),
            Err(e) => assert!(e.to_string().contains("NUL"), "{e}"),
        }
        m.write(&s, "memory/ok.md", "zeta", WriteMode::Replace).unwrap();
        assert_eq!(m.search(&s, "zeta", &SearchOptions::default()).unwrap().hits.len(), 1);
    });
}

/// Two nodes appending to one managed note at the same moment lose no entry: a write replaces
/// the note only if it is still what the writer read, and reads it again otherwise.
#[test]
fn appends_through_two_nodes_at_once_lose_nothing() {
    on_every_index(|db, dir| {
        let nodes =
            [Arc::new(ManagedMemory::new(db.memory(dir), None)), Arc::new(ManagedMemory::new(db.memory(dir), None))];
        let s = Scope { user: "ann".into(), agent: "helper".into() };
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let node = Arc::clone(&nodes[i % 2]);
                let s = s.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        node.write(&s, "memory/log.md", &format!("entry-{i}-{j}"), WriteMode::Append).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = nodes[1].read(&s, "memory/log.md").unwrap();
        assert_eq!(text.lines().count(), 40, "{text}");
        for i in 0..4 {
            for j in 0..10 {
                assert!(text.contains(&format!("entry-{i}-{j}\n")), "entry-{i}-{j} lost: {text}");
            }
        }
    });
}
