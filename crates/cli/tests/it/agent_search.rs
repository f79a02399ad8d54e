//! `delegate_search` by meaning (BM25 fused with the real local embedding model, and the
//! keyword fallback without one), and the research sub-agent's tool set as configuration
//! (`[agents_defaults] research_tools`), through the real gate with the scripted model server.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use crate::support::scripted;

use std::path::Path;
use std::sync::Arc;

use scripted::{Scripted, answer, call};
use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::agent::{AgentConfig, ProviderConfig, RunSpec, RunStatus};
use toolgate::config::Config;
use toolgate::core::{CallContext, Identity};
use toolgate::store::{SessionFilter, SessionStore, Store};

/// A config from TOML plus a provider at `url` and an agent `main` linked to `links`.
fn config(toml_text: &str, url: &str, links: &[(&str, &str)]) -> Config {
    let mut c: Config = toml::from_str(toml_text).unwrap();
    let provider =
        ProviderConfig { base_url: url.to_owned(), max_retries: 0, timeout_secs: 20.0, ..Default::default() };
    c.providers.insert("mock".into(), provider);
    let agent = |d: &str| AgentConfig {
        provider: "mock".into(),
        model: "m".into(),
        description: d.into(),
        ..Default::default()
    };
    let mut main = agent("the main agent");
    main.links = links.iter().map(|(n, _)| (*n).to_owned()).collect();
    c.agents.insert("main".into(), main);
    for (name, description) in links {
        c.agents.insert((*name).into(), agent(description));
    }
    c
}

fn as_main(gate: &Gate, session: &str) -> CallContext {
    let mut ctx = gate.context();
    ctx.identity = Identity { agent: "main".into(), session: session.into(), ..ctx.identity };
    ctx
}

async fn search(gate: &Gate, query: &str) -> Value {
    gate.call(&as_main(gate, "m-1"), "delegate_search", json!({"query": query})).await.unwrap().structured.unwrap()
}

/// The names of the tools a model request offered, sorted.
fn offered(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn spawn_description(gate: &Arc<Gate>) -> String {
    let tools = toolgate::agent::ToolCaller::tools(&**gate, &as_main(gate, "m-1"));
    tools.into_iter().find(|t| t.name == "sessions_spawn").unwrap().description
}

const AGENTS: &[(&str, &str)] = &[
    ("ledger", "Reconciles accounts, issues refunds and answers questions about invoices."),
    ("image-tools", "Resizes and compresses PNG and JPEG images before they are committed."),
    ("courier", "Sends release announcements to the mailing list."),
    ("sentinel", "Reviews pull requests for security problems."),
];

/// With the real local model (installed by `cargo xtask deps` into `.cache/models/`), a task
/// that shares no word with the right agent's name or description finds it by meaning, which
/// BM25 alone cannot; the agents' vectors are kept, so a new gate embeds none; without a model
/// the search ranks by keywords and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegate_search_finds_an_agent_by_meaning_and_falls_back_to_keywords() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models");
    assert!(
        models.join("all-minilm-l6-v2/model.safetensors").is_file(),
        "the embedding model is missing: run `cargo xtask deps`"
    );
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/v1"; // no model request is made
    let task = "make my holiday photographs smaller";
    let hybrid = {
        let mut c = config("", url, AGENTS);
        c.memory.embeddings.models_dir = Some(models.clone());
        Gate::builder(dir.path()).config(c).build_shared().unwrap()
    };
    let found = search(&hybrid, task).await;
    assert_eq!((&found["mode"], &found["model"]), (&json!("hybrid"), &json!("local:all-minilm-l6-v2")), "{found}");
    assert_eq!(found["agents"][0]["agent"], "image-tools", "{found}");
    assert_eq!((&found["agents"][0]["by_text"], &found["agents"][0]["by_meaning"]), (&json!(false), &json!(true)));
    assert_eq!(found["notes"], json!(["embedded 5 agent descriptions (their vectors are kept)"]), "main and its four");
    assert_eq!(found["of"], 4);
    // Words still count.
    let found = search(&hybrid, "refunds for a double charge").await;
    assert_eq!(found["agents"][0]["agent"], "ledger", "{found}");
    assert_eq!((&found["agents"][0]["by_text"], &found["notes"]), (&json!(true), &json!([])));
    // The vectors are in the state database: a new gate over the workspace embeds no agent.
    let again = Gate::builder(dir.path()).config(hybrid.config().clone()).build_shared().unwrap();
    let found = search(&again, task).await;
    assert_eq!((&found["agents"][0]["agent"], &found["notes"]), (&json!("image-tools"), &json!([])), "{found}");

    // BM25 alone does not find it.
    let none = {
        let c = config("[memory.embeddings]\nprovider = \"none\"\n", url, AGENTS);
        Gate::builder(dir.path()).config(c).build_shared().unwrap()
    };
    let found = search(&none, task).await;
    assert_eq!((&found["mode"], &found["agents"]), (&json!("bm25"), &json!([])), "{found}");
    assert_eq!(found["notes"][0], "semantic ranking unavailable: no embedding model installed; ranked by keywords");
    let found = search(&none, "refunds").await;
    assert_eq!((&found["agents"][0]["agent"], &found["notes"].as_array().unwrap().len()), (&json!("ledger"), &1));
    // The configured model is not installed: keywords, and the note says how to install it.
    let missing = {
        let mut c = config("", url, AGENTS);
        c.memory.embeddings.models_dir = Some(dir.path().join("no-models"));
        Gate::builder(dir.path()).config(c).build_shared().unwrap()
    };
    let found = search(&missing, "refunds").await;
    assert_eq!((&found["mode"], &found["agents"][0]["agent"]), (&json!("bm25"), &json!("ledger")), "{found}");
    let note = found["notes"][0].as_str().unwrap();
    assert!(note.starts_with("semantic ranking unavailable: ") && note.ends_with("; ranked by keywords"), "{note}");
    assert!(note.contains("toolgate models install all-minilm-l6-v2"), "{note}");
}

/// The default research set: `sessions_spawn` names read, grep, glob and ls, and the spawned
/// sub-agent is offered exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_research_sub_agent_gets_the_default_set() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        Scripted::start(vec![call("sessions_spawn", json!({"prompt": "find it"})), answer("found"), answer("done")])
            .await;
    let gate = Gate::builder(dir.path()).config(config("", &server.url, &[])).build_shared().unwrap();
    let description = spawn_description(&gate);
    assert!(description.contains("a read-only research sub-agent"), "{description}");
    assert!(
        description.ends_with("only these tools (fewer if its policy hides some): read, grep, glob, ls."),
        "{description}"
    );
    let out = gate.agents().unwrap().run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done, "{out:?}");
    let requests = server.requests();
    assert!(offered(&requests[0]).contains(&"memory_search".to_owned()), "main sees the memory tools");
    assert_eq!(offered(&requests[1]), ["glob", "grep", "ls", "read"]);
}

/// `[agents_defaults] research_tools` with the memory tools: `sessions_spawn` names exactly
/// that set, its sub-agent is offered it and its `memory_search` runs; a plain sub-agent
/// (`subagents run`) still has the memory tools denied, offered and called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_research_set_with_memory_tools_loosens_the_deny_list_for_that_set_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("MEMORY.md"), "# Notes\n\nThe deploy key rotates every Monday.\n").unwrap();
    let server = Scripted::start(vec![
        call("sessions_spawn", json!({"prompt": "when does the deploy key rotate?"})),
        call("memory_search", json!({"query": "deploy key"})),
        answer("Mondays"),
        call("subagents", json!({"action": "run", "task": "look too"})),
        answer("plain"),
        answer("done"),
        answer("again"),
    ])
    .await;
    let toml_text = "[agents_defaults]\nresearch_tools = [\"read\", \"grep\", \"glob\", \"ls\", \"memory_search\", \"memory_get\"]\n\
                     [memory.embeddings]\nprovider = \"none\"\n";
    let gate = Gate::builder(dir.path()).config(config(toml_text, &server.url, &[])).build_shared().unwrap();
    let description = spawn_description(&gate);
    assert!(
        description.ends_with("(fewer if its policy hides some): read, grep, glob, ls, memory_search, memory_get."),
        "{description}"
    );
    let out = gate.agents().unwrap().run(RunSpec::new("main", "go"), &gate.context()).await.unwrap();
    assert_eq!((out.status, out.answer.as_str()), (RunStatus::Done, "done"), "{out:?}");
    let requests = server.requests();
    assert_eq!(offered(&requests[1]), ["glob", "grep", "ls", "memory_get", "memory_search", "read"]);
    let plain = offered(&requests[4]);
    assert!(plain.contains(&"read".to_owned()), "{plain:?}");
    assert!(!plain.iter().any(|t| t.starts_with("memory_")), "a plain sub-agent: {plain:?}");
    // The research sub-agent's memory_search ran and found the note.
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    let spawned = &store.sessions(&SessionFilter { kind: Some("spawn"), limit: 10, ..Default::default() }).unwrap()[0];
    let results: Vec<_> =
        store.session_messages(&spawned.id, 0).unwrap().into_iter().filter(|m| m.role == "tool").collect();
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error && results[0].content.contains("rotates every Monday"), "{:?}", results[0]);
    // Continued, the research session keeps its set and its pass.
    let again = gate.agents().unwrap().send(&spawned.id, "and the other key?", None).await.unwrap();
    assert_eq!(again.answer, "again", "{again:?}");
    assert_eq!(offered(&server.requests()[6]), ["glob", "grep", "ls", "memory_get", "memory_search", "read"]);
    // A plain sub-agent calling it anyway is refused by the gate.
    let mut sub = gate.context().subagent("main");
    sub.identity.session = "sub-1".into();
    let err = gate.call(&sub, "memory_search", json!({"query": "deploy"})).await.unwrap_err();
    assert!(err.to_string().contains("subagent deny list"), "{err}");
}

/// A research set that names no tool is a configuration error at start, saying what to write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_research_tool_is_a_config_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for (entry, says) in [("memory_serach", "see `toolgate tools list`"), ("group:fs", "exact tool names only")] {
        let toml_text = format!("[agents_defaults]\nresearch_tools = [\"read\", \"{entry}\"]\n");
        let err =
            Gate::builder(dir.path()).config(config(&toml_text, "http://127.0.0.1:9/v1", &[])).build().unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&format!("[agents_defaults] research_tools: `{entry}` is not a tool")), "{text}");
        assert!(text.contains(says), "{text}");
    }
    // A configured MCP server's tools are registered once it connects: its prefix passes.
    let mcp = "[mcp.servers.gh]\ncommand = \"gh-mcp\"\n";
    let toml_text = format!("{mcp}[agents_defaults]\nresearch_tools = [\"read\", \"mcp__gh__search_code\"]\n");
    Gate::builder(dir.path()).config(config(&toml_text, "http://127.0.0.1:9/v1", &[])).build().unwrap();
    let toml_text = format!("{mcp}[agents_defaults]\nresearch_tools = [\"mcp__gitlab__search\"]\n");
    let err = Gate::builder(dir.path()).config(config(&toml_text, "http://127.0.0.1:9/v1", &[])).build().unwrap_err();
    assert!(err.to_string().contains("`mcp__gitlab__search` is not a tool"), "{err}");
    // A typo in the table's keys is caught by the config loader.
    let err = toml::from_str::<Config>("[agents_defaults]\nresearch_tool = [\"read\"]\n").unwrap_err();
    assert!(err.to_string().contains("research_tool"), "{err}");
}
