//! `cargo xtask bench memory`: index 10,000 generated notes, then query them: notes/s indexed,
//! query p50/p99 in process (embedding the query included), and recall@5 on a labelled set of
//! questions that share few or no words with their note, full-text only vs hybrid.
//!
//! Needs the model from `cargo xtask deps` in `.cache/models/`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_benchkit::summary::{Row, Target};
use toolgate_embed::{Embedder, LocalModel};
use toolgate_store::memory::{LocalMemory, MemoryIndex, MemoryStore, Scope, SearchOptions};

/// (note, question): the question avoids the note's words.
const LABELLED: &[(&str, &str)] = &[
    ("Ann's sibling has an apartment in Lisbon, near the river.", "where does my sister stay?"),
    ("Allergic to penicillin; carries an epipen.", "what medicine must be avoided?"),
    ("Prefers vegetarian dishes and dislikes mushrooms.", "what should I cook for them?"),
    ("The quarterly board review is on the third Thursday of March.", "when is the meeting with the directors?"),
    ("Drives a blue 2014 Subaru Outback.", "what car do they own?"),
    ("Their dog Rex needs a walk at 7am.", "when must the pet go outside?"),
    ("Speaks fluent Portuguese and some Japanese.", "which languages do they know?"),
    ("Wedding anniversary: 14 September.", "when did they get married?"),
    ("Works remotely from a cabin in the mountains.", "where is their office?"),
    ("Running a marathon in October; training five days a week.", "what race are they preparing for?"),
    ("The staging database password rotates every 30 days.", "how often do credentials change?"),
    ("Daughter Mia starts kindergarten in the autumn.", "when does the child begin school?"),
    ("Is learning to play the cello.", "what instrument are they studying?"),
    ("Moved from Berlin to Toronto last year.", "which city did they relocate to?"),
    ("Takes the 8:15 train to work every morning.", "how do they commute?"),
    ("Hates flying; prefers overnight trains.", "how do they like to travel?"),
    ("Favourite author is Ursula K. Le Guin.", "which writer do they enjoy reading?"),
    ("Budget for the kitchen renovation is 20,000 euros.", "how much can be spent on remodelling?"),
    ("Is lactose intolerant.", "can they have milk?"),
    ("Their manager is Priya, who joined in 2022.", "who is their boss?"),
];

const TOPICS: &[&str] = &[
    "invoice",
    "deploy",
    "garden",
    "recipe",
    "meeting",
    "bug",
    "holiday",
    "budget",
    "library",
    "concert",
    "server",
    "bicycle",
    "painting",
    "contract",
    "warehouse",
    "lecture",
    "podcast",
    "harvest",
    "museum",
    "printer",
];
const VERBS: &[&str] = &["reviewed", "postponed", "ordered", "fixed", "planned", "cancelled", "shared", "moved"];

fn filler(i: usize) -> String {
    let t = TOPICS[i % TOPICS.len()];
    let u = TOPICS[(i / 7) % TOPICS.len()];
    let v = VERBS[(i / 3) % VERBS.len()];
    format!(
        "# Note {i}\nThe {t} for project {} was {v} on day {}; follow up about the {u} with team {}.",
        i % 97,
        i % 28 + 1,
        i % 13
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    // `cargo xtask bench summary` takes 2,000 notes and 200 queries, without the peer.
    let n: usize = std::env::var("MEMORY_BENCH_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(toolgate_benchkit::rounds(10_000, 2_000));
    let queries: usize = toolgate_benchkit::rounds(1000, 200);
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/all-minilm-l6-v2");
    let model: Arc<dyn Embedder> = Arc::new(
        LocalModel::load(&models).unwrap_or_else(|e| panic!("{e}: run `cargo xtask deps` to install the model")),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("memory/gen")).expect("mkdir");
    for i in 0..n.saturating_sub(LABELLED.len()) {
        std::fs::write(dir.path().join(format!("memory/gen/n{i:05}.md")), filler(i)).expect("write");
    }
    for (i, (note, _)) in LABELLED.iter().enumerate() {
        std::fs::write(dir.path().join(format!("memory/gen/fact{i:02}.md")), format!("# Fact\n{note}\n"))
            .expect("write");
    }
    // Where a hybrid query's time goes: embedding the query alone.
    let mut embed_times = Vec::with_capacity(200);
    for k in 0..200 {
        let (_, q) = LABELLED[k % LABELLED.len()];
        let q = format!("{q} {}", TOPICS[k % TOPICS.len()]);
        let t = Instant::now();
        model.embed(&[&q]).expect("embed");
        embed_times.push(t.elapsed());
    }
    embed_times.sort();
    println!(
        "query embedding alone: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&embed_times, 0.5).as_secs_f64() * 1e3,
        percentile(&embed_times, 0.99).as_secs_f64() * 1e3
    );
    let scope = Scope::default();
    println!("memory bench: {n} notes, {queries} queries, model {}", model.model_id());
    let timed: Vec<String> =
        (0..queries).map(|k| format!("{} {} {k}", LABELLED[k % LABELLED.len()].1, TOPICS[k % TOPICS.len()])).collect();
    for (label, embedder) in [("fts", None), ("hybrid", Some(model.clone()))] {
        let db = dir.path().join(format!(".toolgate/{label}.db"));
        let mem = LocalMemory::new(dir.path(), MemoryIndex::open(Some(&db)).expect("index"), embedder)
            .rescan_interval(Duration::from_secs(3600));
        // What `toolgate memory index` does: every note's words, then vectors in batches.
        let start = Instant::now();
        let mut words_at = None;
        let done = mem
            .index_all(&mut |p| {
                if p.text == p.notes && words_at.is_none() {
                    words_at = Some(start.elapsed());
                }
            })
            .expect("index");
        let took = start.elapsed();
        let rate = done.notes as f64 / took.as_secs_f64();
        println!(
            "{label:>6}: indexed {} notes in {:.1} s ({rate:.0} notes/s; words of every note after {:.1} s)",
            done.notes,
            took.as_secs_f64(),
            words_at.unwrap_or(took).as_secs_f64()
        );
        assert!(!done.vectors || done.embedded == done.notes, "not every note was embedded: {done:?}");
        if label == "hybrid" {
            // 10,000 notes in under 2 minutes.
            Row::new("memory: notes indexed per second (hybrid)", rate, "notes/s").target(Target::AtLeast(84.0)).emit();
        }
        let opts = SearchOptions { limit: 5, min_score: 0.0 };
        let mut hits = 0;
        let mut labelled_late = 0;
        for (i, (_, q)) in LABELLED.iter().enumerate() {
            let r = mem.search(&scope, q, &opts).expect("search");
            labelled_late += usize::from(r.notes.iter().any(|n| n.starts_with("results by words only")));
            if r.hits.iter().any(|h| h.path == format!("memory/gen/fact{i:02}.md")) {
                hits += 1;
            }
        }
        // Every timed query is new text (no query-vector cache hit), then the labelled questions
        // asked again (cache hits: an agent repeating itself).
        let mut times = Vec::with_capacity(queries);
        let mut repeated = Vec::with_capacity(queries);
        // New queries whose vector came after the budget (answered by words only).
        let mut late = 0;
        for (k, q) in timed.iter().enumerate() {
            let t = Instant::now();
            let r = mem.search(&scope, q, &opts).expect("search");
            times.push(t.elapsed());
            late += usize::from(r.notes.iter().any(|n| n.starts_with("results by words only")));
            let t = Instant::now();
            let _ = mem.search(&scope, LABELLED[k % LABELLED.len()].1, &opts).expect("search");
            repeated.push(t.elapsed());
        }
        times.sort();
        repeated.sort();
        println!(
            "{label:>6}: recall@5 {hits}/{} = {:.2} ({labelled_late} by words only: past the budget); query p50 {:.2} ms, p99 {:.2} ms (new queries); \
             p50 {:.2} ms, p99 {:.2} ms (repeated queries); {late} new queries answered by words only (their \
             vector came after the {} ms budget)",
            LABELLED.len(),
            hits as f64 / LABELLED.len() as f64,
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
            percentile(&repeated, 0.5).as_secs_f64() * 1e3,
            percentile(&repeated, 0.99).as_secs_f64() * 1e3,
            toolgate_embed::QUERY_BUDGET.as_millis()
        );
        let ms = |p| percentile(&times, p).as_secs_f64() * 1e3;
        Row::new(format!("memory_search, new {label} query on {n} notes, p50"), ms(0.5), "ms")
            .target(if label == "hybrid" { Target::AtMost(10.0) } else { Target::None })
            .emit();
        if label == "hybrid" {
            Row::new(format!("memory_search, new hybrid query on {n} notes, p99"), ms(0.99), "ms")
                .target(Target::AtMost(30.0))
                .emit();
            Row::new("memory_search recall@5, hybrid", hits as f64 / LABELLED.len() as f64, "").emit();
        }
    }
    while_indexing(dir.path(), &model, &timed);
    if !toolgate_benchkit::quick() {
        peer(dir.path(), n, &timed);
    }
}

/// Searches while `serve`'s background indexer works through the notes from scratch: each
/// answers at once from what is indexed (p50/p99 over the first 100), with the progress line.
fn while_indexing(dir: &std::path::Path, model: &Arc<dyn Embedder>, timed: &[String]) {
    let db = dir.join(".toolgate/background.db");
    let mem = Arc::new(
        LocalMemory::new(dir, MemoryIndex::open(Some(&db)).expect("index"), Some(model.clone()))
            .rescan_interval(Duration::from_secs(3600)),
    );
    let store: Arc<dyn MemoryStore> = mem.clone();
    store.start_indexing();
    let opts = SearchOptions { limit: 5, min_score: 0.0 };
    let mut times = Vec::new();
    let mut partial = 0;
    let mut last = String::new();
    for q in timed.iter().take(100) {
        let t = Instant::now();
        let r = mem.search(&Scope::default(), q, &opts).expect("search");
        times.push(t.elapsed());
        if let Some(line) = r.notes.iter().find(|n| n.starts_with("index: ")) {
            partial += 1;
            last = line.clone();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    times.sort();
    println!(
        "during background indexing: {} searches p50 {:.2} ms, p99 {:.2} ms; {partial} said the index was partial \
         (last: {last})",
        times.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3
    );
    // Dropping the store stops the worker.
}

/// The same notes (as entities whose observations are the note's lines) and questions through
/// `@modelcontextprotocol/server-memory`'s `search_nodes`, over MCP stdio (`memory_peer.py`).
fn peer(dir: &std::path::Path, n: usize, timed: &[String]) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let server = root.join(".cache/peers/npm/node_modules/.bin/mcp-server-memory");
    let python = root.join(".cache/peers/venv/bin/python");
    assert!(
        server.is_file() && python.is_file(),
        "the server-memory peer or the MCP Python SDK is missing: run `cargo xtask deps`"
    );
    let mut notes = Vec::with_capacity(n);
    let note = |name: String, text: &str| {
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        serde_json::json!({ "name": name, "observations": lines })
    };
    for i in 0..n.saturating_sub(LABELLED.len()) {
        notes.push(note(format!("memory/gen/n{i:05}.md"), &filler(i)));
    }
    let mut labelled = Vec::new();
    for (i, (text, question)) in LABELLED.iter().enumerate() {
        let name = format!("memory/gen/fact{i:02}.md");
        notes.push(note(name.clone(), &format!("# Fact\n{text}\n")));
        labelled.push(serde_json::json!([name, question]));
    }
    let spec = serde_json::json!({
        "server": [server],
        "memory_file": dir.join("peer-memory.jsonl"),
        "notes": notes,
        "labelled": labelled,
        "queries": timed,
    });
    let spec_path = dir.join("peer-spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("write the peer spec");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/memory_peer.py");
    let out = std::process::Command::new(python).arg(script).arg(&spec_path).output().expect("run the peer driver");
    assert!(out.status.success(), "the peer driver failed: {}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the peer driver's JSON line");
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "  peer: @modelcontextprotocol/server-memory (search_nodes over MCP stdio): {n} entities created in {:.1} s; \
         recall@5 {}/{} = {:.2}; query p50 {:.2} ms, p99 {:.2} ms (new queries, round trip included)",
        f("indexing_s"),
        r["hits"],
        r["labelled"],
        f("hits") / f("labelled"),
        f("p50_ms"),
        f("p99_ms")
    );
}
