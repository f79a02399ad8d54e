//! The memory tools through `Gate::call`: real files, the real index in `.toolgate/state.db`,
//! and the file tools' interceptor.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use crate::support::llama;

use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::config::Config;
use toolgate::tools::memory::EmbeddingsProvider;

struct Fixture {
    dir: tempfile::TempDir,
    gate: Gate,
}

impl Fixture {
    /// A gate with full-text memory; a long rescan interval so only writes (not scans) can make
    /// a note searchable.
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.memory.embeddings.provider = EmbeddingsProvider::None;
        config.memory.rescan_interval_ms = 3_600_000;
        config.fs.write_safety = toolgate::tools::fs::WriteSafety::Off;
        let gate = Gate::builder(dir.path()).config(config).build().unwrap();
        Fixture { dir, gate }
    }

    async fn call(&self, name: &str, params: Value) -> Result<toolgate_core::ToolOutput, toolgate_core::ToolError> {
        self.gate.call(&self.gate.context(), name, params).await
    }

    async fn found(&self, query: &str) -> Vec<String> {
        let out = self.call("memory_search", json!({ "query": query, "min_score": 0 })).await.unwrap();
        let s = out.meta.unwrap_or_default();
        s["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_owned()).collect()
    }
}

#[tokio::test]
async fn write_search_read_get_tree_through_the_gate() {
    let f = Fixture::new();
    let specs = f.gate.visible_tools(&f.gate.context());
    for name in ["memory_search", "memory_write", "memory_read", "memory_get", "memory_tree"] {
        let spec = specs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} not registered"));
        assert_eq!(spec.group, "memory");
    }
    let out = f.call("memory_write", json!({ "content": "# Family\nAnn's sister lives in Lisbon." })).await.unwrap();
    assert!(out.text_content().contains("Created `MEMORY.md`"), "{}", out.text_content());
    f.call("memory_write", json!({ "content": "standup moved to 10am", "target": "daily_log" })).await.unwrap();
    f.call("memory_write", json!({ "content": "retro on friday", "target": "daily_log" })).await.unwrap();
    let out = f.call("memory_search", json!({ "query": "where does her sister live?" })).await.unwrap();
    let text = out.text_content();
    assert!(text.contains("MEMORY.md:1-2"), "{text}");
    assert!(text.contains("full-text only") && text.contains("no embedding model"), "{text}");
    let daily = f.found("standup retro").await;
    assert_eq!(daily.len(), 1, "{daily:?}");
    assert!(daily[0].starts_with("memory/daily/"));
    let log = f.call("memory_read", json!({ "path": daily[0] })).await.unwrap().text_content();
    assert!(log.contains("standup moved to 10am\nretro on friday"), "{log}");
    let got = f.call("memory_get", json!({ "path": "MEMORY.md", "from": 2, "lines": 1 })).await.unwrap();
    assert!(got.text_content().contains("2\tAnn's sister lives in Lisbon."), "{}", got.text_content());
    let tree = f.call("memory_tree", json!({})).await.unwrap().text_content();
    assert!(tree.contains("MEMORY.md") && tree.contains("memory/daily/"), "{tree}");
}

#[tokio::test]
async fn memory_tools_refuse_paths_outside_memory_and_identity_files() {
    let f = Fixture::new();
    std::fs::write(f.dir.path().join("SOUL.md"), "be kind\n").unwrap();
    for target in ["SOUL.md", "IDENTITY.md", "../escape.md", "/etc/passwd", "memory/../notes.md", "src/lib.rs"] {
        let err = f.call("memory_write", json!({ "content": "x", "target": target })).await.unwrap_err();
        assert!(matches!(err, toolgate_core::ToolError::InvalidParams { .. }), "{target}: {err}");
    }
    assert_eq!(std::fs::read_to_string(f.dir.path().join("SOUL.md")).unwrap(), "be kind\n");
    let err = f.call("memory_read", json!({ "path": ".toolgate/state.db" })).await.unwrap_err();
    assert!(err.to_string().contains("hidden"), "{err}");
    let err = f.call("memory_search", json!({ "query": "   " })).await.unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let err = f.call("memory_get", json!({ "path": "MEMORY.md" })).await.unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
}

#[tokio::test]
async fn the_file_tools_reindex_memory_notes_they_write() {
    let f = Fixture::new();
    // Indexed by the interceptor, not by a scan (the rescan interval is an hour).
    assert!(f.found("zebra").await.is_empty());
    f.call("write", json!({ "path": "memory/animals.md", "content": "a zebra named Zed\n" })).await.unwrap();
    assert_eq!(f.found("zebra").await, vec!["memory/animals.md"]);
    f.call("edit", json!({ "path": "memory/animals.md", "old_string": "zebra", "new_string": "giraffe" }))
        .await
        .unwrap();
    assert!(f.found("zebra").await.is_empty());
    assert_eq!(f.found("giraffe").await, vec!["memory/animals.md"]);
    let patch = "*** Begin Patch\n*** Delete File: memory/animals.md\n*** End Patch";
    f.call("apply_patch", json!({ "patch": patch })).await.unwrap();
    assert!(f.found("giraffe").await.is_empty());
    // Files outside memory/ are not indexed.
    f.call("write", json!({ "path": "notes/giraffe.md", "content": "giraffe\n" })).await.unwrap();
    assert!(f.found("giraffe").await.is_empty());
}

/// A gate with the real local model (installed by `cargo xtask deps` into `.cache/models/`).
fn hybrid() -> Fixture {
    let models = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models");
    assert!(
        models.join("all-minilm-l6-v2/model.safetensors").is_file(),
        "the memory search model is missing: run `cargo xtask deps`"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.memory.embeddings.models_dir = Some(models);
    // These tests check what a search by meaning finds: it waits for the query's vector even
    // on a busy machine.
    config.memory.query_budget_ms = 0;
    let gate = Gate::builder(dir.path()).config(config).build().unwrap();
    Fixture { dir, gate }
}

#[tokio::test]
async fn the_local_model_finds_a_note_that_shares_no_words_with_the_question() {
    let f = hybrid();
    let notes = [
        ("memory/family.md", "# Family\nAnn's sibling has an apartment in Lisbon, near the river."),
        ("memory/work.md", "# Work\nThe CI pipeline runs cargo test on every push to main."),
        ("memory/health.md", "# Health\nAllergic to penicillin; the dentist appointment is in June."),
        ("memory/food.md", "# Food\nPrefers vegetarian dishes, no mushrooms."),
    ];
    for (path, content) in notes {
        f.call("memory_write", json!({ "target": path, "content": content })).await.unwrap();
    }
    let out = f.call("memory_search", json!({ "query": "where does my sister stay?" })).await.unwrap();
    let s = out.meta.clone().unwrap();
    assert_eq!(s["mode"], "hybrid", "{}", out.text_content());
    assert_eq!(s["model"], "local:all-minilm-l6-v2");
    assert_eq!(s["results"][0]["path"], "memory/family.md", "{}", out.text_content());
    assert_eq!(s["results"][0]["by_meaning"], true);
    let out = f.call("memory_search", json!({ "query": "what medicine must be avoided?" })).await.unwrap();
    assert_eq!(out.meta.unwrap()["results"][0]["path"], "memory/health.md");
    // The vectors are in the state database: a new gate over the same workspace finds the note
    // without embedding the notes again.
    let again = Gate::builder(f.dir.path()).config(f.gate.config().clone()).build().unwrap();
    let out =
        again.call(&again.context(), "memory_search", json!({ "query": "where does my sister stay?" })).await.unwrap();
    let s = out.meta.unwrap();
    assert_eq!(s["results"][0]["path"], "memory/family.md");
    assert!(s["notes"].as_array().unwrap().iter().all(|n| !n.as_str().unwrap().contains("embedded")), "{s}");
}

#[tokio::test]
async fn a_missing_model_falls_back_to_full_text_and_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.memory.embeddings.models_dir = Some(dir.path().join("no-models"));
    let gate = Gate::builder(dir.path()).config(config).build().unwrap();
    let ctx = gate.context();
    gate.call(&ctx, "memory_write", json!({ "content": "the wifi password is on the fridge" })).await.unwrap();
    let out = gate.call(&ctx, "memory_search", json!({ "query": "wifi" })).await.unwrap();
    let text = out.text_content();
    assert!(text.contains("MEMORY.md") && text.contains("full-text only"), "{text}");
    assert!(text.contains("toolgate models install all-minilm-l6-v2"), "{text}");
}

/// `provider = "openai"` against a real endpoint: notes are embedded in batches (4 notes, batches
/// of 2), search is hybrid under the endpoint's model id, the vectors persist; a wrong `dims`, a
/// wrong key or an unset key variable fall back to full text and say why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(unsafe_code)] // std::env::set_var (see the SAFETY note)
async fn an_openai_compatible_endpoint_embeds_notes_in_batches() {
    let key = "tg-embeddings-test-key";
    // llama.cpp serving SmolLM2-135M's mean-pooled embeddings behind a bearer key.
    let (_server, url) = llama::start(&["--embedding", "--api-key", key]).await;
    // SAFETY: nextest runs each test in a process of its own, and nothing in this one reads
    // the environment concurrently (the server is a child process that got its own copy).
    unsafe {
        std::env::set_var("TG_TEST_EMBEDDINGS_KEY", key);
        std::env::set_var("TG_TEST_WRONG_KEY", "not-the-key");
    }
    let gate_for = |dims: usize, key_var: &str| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        let e = &mut config.memory.embeddings;
        e.provider = EmbeddingsProvider::Openai;
        e.url.clone_from(&url);
        e.model = "smollm2".into();
        e.dims = Some(dims);
        e.batch_size = 2;
        e.api_key_env = Some(key_var.into());
        let gate = Gate::builder(dir.path()).config(config).build().unwrap();
        Fixture { dir, gate }
    };
    let f = gate_for(576, "TG_TEST_EMBEDDINGS_KEY");
    for (path, content) in [
        ("memory/family.md", "# Family\nAnn's sibling has an apartment in Lisbon, near the river."),
        ("memory/work.md", "# Work\nThe CI pipeline runs cargo test on every push to main."),
        ("memory/health.md", "# Health\nAllergic to penicillin; the dentist appointment is in June."),
        ("memory/food.md", "# Food\nPrefers vegetarian dishes, no mushrooms."),
    ] {
        f.call("memory_write", json!({ "target": path, "content": content })).await.unwrap();
    }
    let out = f.call("memory_search", json!({ "query": "penicillin allergy", "min_score": 0 })).await.unwrap();
    let s = out.meta.clone().unwrap();
    assert_eq!(s["mode"], "hybrid", "{}", out.text_content());
    assert_eq!(s["model"], format!("openai:{url}#smollm2"), "{s}");
    assert_eq!(s["results"][0]["path"], "memory/health.md", "{}", out.text_content());
    assert!(s["results"].as_array().unwrap().iter().any(|r| r["by_meaning"] == true), "{s}");
    let again = f.call("memory_search", json!({ "query": "vegetarian", "min_score": 0 })).await.unwrap();
    let notes = again.meta.unwrap()["notes"].clone();
    assert!(notes.as_array().unwrap().iter().all(|n| !n.as_str().unwrap().contains("embedded")), "{notes}");

    for (f, why) in [
        (gate_for(384, "TG_TEST_EMBEDDINGS_KEY"), "dims is 384"),
        (gate_for(576, "TG_TEST_WRONG_KEY"), "HTTP 401"),
        (gate_for(576, "TG_TEST_UNSET_VARIABLE"), "not set in the environment"),
    ] {
        f.call("memory_write", json!({ "target": "memory/a.md", "content": "penicillin" })).await.unwrap();
        let out = f.call("memory_search", json!({ "query": "penicillin" })).await.unwrap();
        let s = out.meta.clone().unwrap();
        assert_eq!(s["mode"], "fts", "{}", out.text_content());
        assert!(out.text_content().contains(why), "{why}: {}", out.text_content());
        assert_eq!(s["results"][0]["path"], "memory/a.md", "full text still finds it");
    }
}

/// `kill -9` of the real binary while it indexes 4,000 notes (full text: indexing is then the
/// fastest, so the window is the narrowest): every note is intact byte for byte, the index holds
/// whole notes only (one transaction per note: no note without its chunks, FTS sound), and the
/// next start indexes the rest, so a search finds a note the killed run never reached.
#[test]
fn kill_9_during_indexing_loses_no_note_and_the_next_start_repairs_the_index() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const N: usize = 4_000;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[memory]\nrescan_interval_ms = 0\n[memory.embeddings]\nprovider = \"none\"\n",
    )
    .unwrap();
    let words = ["garden", "invoice", "sister", "flight", "dentist", "river", "budget", "guitar", "recipe", "server"];
    let mut notes = Vec::with_capacity(N);
    for i in 0..N {
        let folder = dir.path().join(format!("memory/f{}", i % 20));
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join(format!("n{i:05}.md"));
        let mut text = format!("# Note {i}\n\nmarker zq{i}x about the {}.\n", words[i % words.len()]);
        for p in 0..(3 + i % 5) {
            text.push_str(&format!(
                "\n## Part {p}\n{} {} and more words to index, line {p}.\n",
                words[(i + p) % 10],
                i * p
            ));
        }
        std::fs::write(&path, &text).unwrap();
        notes.push((path, text));
    }
    let toolgate = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("--workspace").arg(dir.path()).args(["--approval", "never"]);
        cmd
    };
    let mut child = toolgate()
        .args(["call", "memory_search", r#"{"query":"zq1x"}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until indexing is well under way (an eighth of the notes indexed), then SIGKILL.
    let db = dir.path().join(".toolgate/state.db");
    let start = Instant::now();
    let mut index = None;
    let seen = loop {
        assert!(start.elapsed() < Duration::from_secs(120), "indexing never started");
        if let Some(status) = child.try_wait().unwrap() {
            // Seen once in a full run (exit after ~1 s): say what toolgate said.
            let mut said = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said);
            panic!("toolgate finished ({status}) before it could be killed: {said}");
        }
        if index.is_none() && db.exists() {
            index = toolgate::store::memory::MemoryIndex::open(Some(&db)).ok();
        }
        if let Some(h) = index.as_ref().and_then(|i| i.health().ok())
            && h.notes >= N / 8
        {
            break h.notes;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let index = index.unwrap();
    let after_kill = index.health().unwrap();
    assert!(after_kill.notes >= seen && after_kill.notes < N, "killed mid-way: {after_kill:?} of {N}");
    assert!(after_kill.fts_ok && after_kill.notes_without_chunks == 0, "{after_kill:?}");
    eprintln!("killed with {} of {N} notes indexed", after_kill.notes);

    for (path, text) in &notes {
        assert_eq!(&std::fs::read_to_string(path).unwrap(), text, "{}", path.display());
    }
    // The next start indexes the rest; the last note was never reached by the killed run.
    let last = N - 1;
    let out = toolgate().args(["call", "memory_search", &format!(r#"{{"query":"zq{last}x"}}"#)]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("n{last:05}.md")), "{stdout}");
    let repaired = index.health().unwrap();
    assert_eq!(repaired.notes, N, "{repaired:?}");
    assert!(repaired.fts_ok && repaired.notes_without_chunks == 0, "{repaired:?}");
}

/// `toolgate serve` (the real binary, driven by an MCP client over stdio) re-indexes notes
/// edited on disk without waiting for a search's scan: the rescan interval is an hour, so after
/// the first search only its file watcher can index a new, edited, moved or deleted note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reindexes_notes_edited_on_disk() {
    serve_watch(true).await;
}

/// The same when `memory/` does not exist when `serve` starts: its creation (with a folder and
/// a note inside, before the watch on it is armed) is seen from the workspace's watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_watches_a_memory_folder_created_later() {
    serve_watch(false).await;
}

async fn serve_watch(memory_first: bool) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        // The polling below repeats one call, which the loop breaker would refuse.
        "[loop_breaker]\nenabled = false\n[memory]\nrescan_interval_ms = 3600000\n[memory.embeddings]\nprovider = \"none\"\n",
    )
    .unwrap();
    if memory_first {
        std::fs::create_dir_all(dir.path().join("memory")).unwrap();
        std::fs::write(dir.path().join("memory/a.md"), "alpha note\n").unwrap();
    }
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(dir.path()).args(["--approval", "never", "serve"]);
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.unwrap();
    let search = |query: &str| {
        let mut args = serde_json::Map::new();
        args.insert("query".into(), json!(query));
        args.insert("min_score".into(), json!(0));
        let request = CallToolRequestParams::new("memory_search").with_arguments(args);
        let client = &client;
        async move {
            let result = client.call_tool(request).await.unwrap();
            assert_ne!(result.is_error, Some(true), "{result:?}");
            // Text only for the model; the rows for programs in `_meta`.
            assert!(result.structured_content.is_none(), "{result:?}");
            let s = result.meta.and_then(|m| m.get(toolgate::mcp::RESULT_META).cloned()).unwrap_or_default();
            s["results"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| r["path"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    // Polls until `query` finds exactly `want` (the watcher gathers events for 100 ms).
    let until = |query: &'static str, want: Vec<&'static str>| {
        let search = &search;
        async move {
            let start = std::time::Instant::now();
            loop {
                let got = search(query).await;
                if got == want {
                    return;
                }
                assert!(start.elapsed() < std::time::Duration::from_secs(20), "{query}: {got:?}, want {want:?}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    if !memory_first {
        until("alpha", vec![]).await;
        std::fs::create_dir_all(dir.path().join("memory/deep/er")).unwrap();
        std::fs::write(dir.path().join("memory/deep/er/a.md"), "alpha note\n").unwrap();
        until("alpha", vec!["memory/deep/er/a.md"]).await;
        std::fs::rename(dir.path().join("memory/deep/er/a.md"), dir.path().join("memory/a.md")).unwrap();
    }
    until("alpha", vec!["memory/a.md"]).await;
    // A new note.
    std::fs::write(dir.path().join("memory/b.md"), "bravo zulu\n").unwrap();
    until("zulu", vec!["memory/b.md"]).await;
    // An editor's save: a temporary file renamed over the note.
    std::fs::write(dir.path().join("memory/.a.md.swp"), "charlie note\n").unwrap();
    std::fs::rename(dir.path().join("memory/.a.md.swp"), dir.path().join("memory/a.md")).unwrap();
    until("charlie", vec!["memory/a.md"]).await;
    until("alpha", vec![]).await;
    // A new folder holding a note, and MEMORY.md at the root.
    std::fs::create_dir_all(dir.path().join("memory/people")).unwrap();
    std::fs::write(dir.path().join("memory/people/ann.md"), "ann likes delta\n").unwrap();
    std::fs::write(dir.path().join("MEMORY.md"), "echo foxtrot\n").unwrap();
    until("delta", vec!["memory/people/ann.md"]).await;
    until("foxtrot", vec!["MEMORY.md"]).await;
    // Deleted notes and folders leave the index.
    std::fs::remove_file(dir.path().join("memory/b.md")).unwrap();
    until("zulu", vec![]).await;
    std::fs::remove_dir_all(dir.path().join("memory/people")).unwrap();
    until("delta", vec![]).await;
    let _ = client.cancel().await;
}

/// A workspace of `n` notes like the memory benchmark's (templated fillers) plus one labelled
/// fact that shares no words with its question, the local model from `.cache/models/`.
fn many_notes(n: usize) -> tempfile::TempDir {
    let models = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models");
    assert!(
        models.join("all-minilm-l6-v2/model.safetensors").is_file(),
        "the embedding model is missing: run `cargo xtask deps`"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            // The polling below repeats one call, which the loop breaker would refuse.
            "[loop_breaker]\nenabled = false\n[rate_limits]\nenabled = false\n\
             [memory.embeddings]\nmodels_dir = \"{}\"\n",
            models.display()
        ),
    )
    .unwrap();
    let topics = ["invoice", "deploy", "garden", "recipe", "meeting", "bug", "holiday", "budget", "printer"];
    std::fs::create_dir_all(dir.path().join("memory/gen")).unwrap();
    for i in 0..n {
        let text = format!(
            "# Note {i}\nThe {} for project {} was reviewed on day {}; follow up with team {}.\n",
            topics[i % topics.len()],
            i % 97,
            i % 28 + 1,
            i % 13
        );
        std::fs::write(dir.path().join(format!("memory/gen/n{i:05}.md")), text).unwrap();
    }
    std::fs::write(
        dir.path().join("memory/fact.md"),
        "# Fact\nAnn's sibling has an apartment in Lisbon, near the river.\n",
    )
    .unwrap();
    dir
}

/// An MCP client of `toolgate serve` over stdio on `dir`.
async fn serve_stdio(dir: &std::path::Path) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(dir).args(["--approval", "never", "serve"]);
    ().serve(rmcp::transport::TokioChildProcess::new(command).unwrap()).await.unwrap()
}

/// `memory_search` over MCP: (paths found with how, the result's notes).
async fn search_mcp(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    query: &str,
) -> (Vec<(String, bool)>, Vec<String>) {
    let mut args = serde_json::Map::new();
    args.insert("query".into(), json!(query));
    args.insert("max_results".into(), json!(5));
    let request = rmcp::model::CallToolRequestParams::new("memory_search").with_arguments(args);
    let result = client.call_tool(request).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let s = result.meta.and_then(|m| m.get(toolgate::mcp::RESULT_META).cloned()).unwrap_or_default();
    let hits = s["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| (r["path"].as_str().unwrap().to_owned(), r["by_meaning"].as_bool().unwrap()))
        .collect();
    let notes =
        s["notes"].as_array().cloned().unwrap_or_default().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
    (hits, notes)
}

/// The progress line's "N of M notes embedded", if the result has one.
fn embedded(notes: &[String]) -> Option<(usize, usize)> {
    let line = notes.iter().find(|n| n.starts_with("index: ") && n.contains("notes embedded"))?;
    let mut words = line["index: ".len()..].split(' ');
    let done = words.next()?.parse().ok()?;
    let of = words.nth(1)?.parse().ok()?;
    Some((done, of))
}

/// Polls until a search for the fact's paraphrase finds it by meaning with the index whole.
async fn until_embedded(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) {
    let start = std::time::Instant::now();
    loop {
        let (hits, notes) = search_mcp(client, "where does my sister stay?").await;
        if !notes.iter().any(|n| n.starts_with("index: ")) {
            assert!(hits.contains(&("memory/fact.md".to_owned(), true)), "indexed, but not found: {hits:?} {notes:?}");
            return;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(300), "indexing never ended: {notes:?}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// A user who already has notes (issue 31): `serve` indexes them on a background thread, so the
/// first `memory_search` answers at once from what is indexed and says how far the index is
/// (partial: a pass over 1,500 notes with the model takes many seconds, the first call comes
/// right after the handshake); later searches find a note by meaning once it is embedded. Then
/// a restart resumes (nothing embedded is embedded again; a note changed while the server was
/// down is indexed again by its content).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_indexes_existing_notes_in_the_background_and_resumes_after_a_restart() {
    const N: usize = 1_500;
    let dir = many_notes(N);
    let client = serve_stdio(dir.path()).await;
    let (_, notes) = search_mcp(&client, "where does my sister stay?").await;
    assert!(
        notes.iter().any(|n| n.starts_with("index: ")),
        "the first search did not say the index is partial: {notes:?}"
    );
    // Words are indexed first: a search by words finds the fact long before every vector is made.
    let start = std::time::Instant::now();
    loop {
        let (hits, notes) = search_mcp(&client, "apartment Lisbon").await;
        if hits.iter().any(|(p, _)| p == "memory/fact.md") {
            break;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(120), "never found by words: {notes:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Stop the server part-way through embedding (as soon as some notes have vectors).
    let before = loop {
        let (_, notes) = search_mcp(&client, "garden").await;
        match embedded(&notes) {
            Some((done, of)) if done > 0 => {
                assert_eq!(of, N + 1, "{notes:?}");
                break Some(done);
            }
            Some(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            // Already whole (a fast machine): the restart has nothing to resume.
            None => break None,
        }
    };
    let _ = client.cancel().await;
    // Changed while the server was down: its new words are indexed again on the next start.
    std::fs::write(dir.path().join("memory/gen/n00007.md"), "# Note 7\nThe quokka migration is on hold.\n").unwrap();
    let client = serve_stdio(dir.path()).await;
    if let Some(before) = before {
        let (_, notes) = search_mcp(&client, "garden").await;
        if let Some((done, _)) = embedded(&notes) {
            // Resumed from what was stored (one note changed, so at most one fewer).
            assert!(done + 1 >= before, "the restart started over: {done} embedded, {before} before the restart");
        }
    }
    until_embedded(&client).await;
    let (hits, _) = search_mcp(&client, "quokka").await;
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("memory/gen/n00007.md"), "{hits:?}");
    let _ = client.cancel().await;
}

/// `toolgate memory index` indexes every note in the foreground, printing progress (plain
/// lines: stderr is not a terminal here) and a last line saying all are indexed; a search then
/// finds the paraphrased note by meaning with no progress line; a second run embeds nothing.
#[test]
fn memory_index_prints_progress_and_indexes_every_note() {
    use std::process::Command;
    const N: usize = 300;
    let dir = many_notes(N);
    let toolgate = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("--workspace").arg(dir.path()).args(["--approval", "never"]);
        cmd
    };
    let out = toolgate().args(["memory", "index"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("indexing words: ")), "{stderr}");
    assert!(lines.iter().filter(|l| l.starts_with("embedding: ")).count() >= 2, "{stderr}");
    assert!(!stderr.contains('\r'), "a progress bar in a pipe: {stderr}");
    let last = lines.last().unwrap();
    assert!(last.starts_with(&format!("memory index: all {} notes indexed by words and meaning", N + 1)), "{stderr}");
    // A budget no real embedding meets: a server would answer by words, a single call waits
    // for the query's vector (under load the default 25 ms was missed too).
    let config = dir.path().join("toolgate.toml");
    let with_budget = std::fs::read_to_string(&config)
        .unwrap()
        .replace("[memory.embeddings]", "[memory]\nquery_budget_ms = 1\n[memory.embeddings]");
    std::fs::write(&config, with_budget).unwrap();
    let out = toolgate().args(["call", "memory_search", r#"{"query":"where does my sister stay?"}"#]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("memory/fact.md") && stdout.contains("meaning"), "{stdout}");
    assert!(!stdout.contains("index: "), "{stdout}");
    let again = toolgate().args(["memory", "index"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    // Nothing changed: nothing embedded again (the first count is already whole).
    let embedding: Vec<&str> = stderr.lines().filter(|l| l.starts_with("embedding: ")).collect();
    assert_eq!(embedding, [format!("embedding: {} of {} notes", N + 1, N + 1)], "{stderr}");
}
