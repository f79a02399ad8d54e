//! `build_software` through `Gate::call`: a scripted model (it stands in for the model only:
//! the gate, the agent runtime, the sandboxed `exec`, componentize-py, the WASM runtime and the
//! installer are real) writes a Python WASM tool, the builder builds, validates and tests it
//! and installs it through `tool_install`, and the new tool answers a call. Then the bad input
//! of issue 27: a builder that loops, and one that only talks.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolgate::agent::{AgentConfig, Message, ModelClient, ModelReply, ModelRequest, ProviderConfig, ToolCall};
use toolgate::config::Config;
use toolgate::{ApprovalAnswer, Gate};
use toolgate_testkit::approver::Scripted;

/// The model: answers each request by a function of it, and keeps every request.
struct Model {
    answer: Box<dyn Fn(&ModelRequest) -> ModelReply + Send + Sync>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Model")
    }
}

#[toolgate::core::async_trait]
impl ModelClient for Model {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, toolgate::agent::AgentError> {
        // A model is reached over the network: the request yields, as a real one does.
        tokio::task::yield_now().await;
        self.requests.lock().unwrap().push(req.clone());
        Ok((self.answer)(req))
    }
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: args.to_string() }
}

fn text(t: &str) -> ModelReply {
    ModelReply { content: Some(t.into()), ..ModelReply::default() }
}

fn calls(c: Vec<ToolCall>) -> ModelReply {
    ModelReply { tool_calls: c, ..ModelReply::default() }
}

/// The repository's componentize-py, which `cargo xtask deps` installs.
fn venv() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/venv").canonicalize().unwrap_or_else(|e| {
        panic!("componentize-py is missing ({e}); run `cargo xtask deps`, which installs it into .cache/wasm/venv")
    })
}

/// The venv and the Python installation it was made from (`home` in `pyvenv.cfg`).
fn python_dirs() -> Vec<PathBuf> {
    let venv = venv();
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap();
    let home = cfg.lines().find_map(|l| l.strip_prefix("home = ")).map(|h| PathBuf::from(h.trim()));
    let install = home.and_then(|h| h.canonicalize().ok()).and_then(|h| h.parent().map(PathBuf::from));
    std::iter::once(venv).chain(install).collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    gate: Arc<Gate>,
    model: Arc<Model>,
    approver: Arc<Scripted>,
}

async fn fixture(answer: impl Fn(&ModelRequest) -> ModelReply + Send + Sync + 'static, approvals: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.rate_limits.enabled = false;
    // Never dialled: the provider's client is the scripted model.
    config
        .providers
        .insert("script".into(), ProviderConfig { base_url: "http://127.0.0.1:9/v1".into(), ..Default::default() });
    config
        .agents
        .insert("builder".into(), AgentConfig { provider: "script".into(), model: "m".into(), ..Default::default() });
    // componentize-py's packages and the Python its venv was made from live outside the
    // workspace: the sandbox must be told it may read them (docs/automation.md).
    config.runtime.sandbox.extra_readable.extend(python_dirs());
    // componentize-py's wasmtime reserves 4 GiB of address space for one memory.
    config.runtime.sandbox.limits.address_space_bytes = 16 << 30;
    let approver = Scripted::new(vec![ApprovalAnswer::AllowOnce; approvals]);
    let gate = Arc::new(Gate::builder(dir.path()).config(config).approver(approver.clone()).build().unwrap());
    gate.bind_agents();
    // `tool_install` loads what it installs with the gate's WASM host services.
    let _ = toolgate::wasm::load_tools_from(&gate, None).await;
    let model = Arc::new(Model { answer: Box::new(answer), requests: Mutex::new(Vec::new()) });
    gate.agents().unwrap().set_client("script", model.clone());
    Fixture { _dir: dir, gate, model, approver }
}

const APP: &str = r#"import json

import wit_world
from componentize_py_types import Err


class WitWorld(wit_world.WitWorld):
    def describe(self) -> wit_world.Description:
        return wit_world.Description(
            name="reverse-words",
            description="Reverses the order of the words in `text`.",
            input_schema=json.dumps({"type": "object", "properties": {"text": {"type": "string"}},
                                     "required": ["text"], "additionalProperties": False}),
            annotations=wit_world.Annotations(read_only=True, destructive=False, idempotent=True, open_world=False),
        )

    def execute(self, params: str) -> str:
        args = json.loads(params)
        text = args.get("text")
        if not isinstance(text, str):
            raise Err("`text` must be a string")
        return " ".join(reversed(text.split()))
"#;

/// The whole loop with the real builder: the model's first try has a bug the builder's test
/// cases catch (it returns the words unchanged), the failure goes back to it, it fixes it; the
/// component is validated, installed after approval, and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(unsafe_code)] // std::env::set_var (see the SAFETY note)
async fn a_python_wasm_tool_is_built_installed_and_answers() {
    let cpy = venv().join("bin/componentize-py");
    // SAFETY: nextest runs each test in a process of its own, and nothing in this one reads the
    // environment concurrently yet (set before the gate and its threads exist).
    unsafe { std::env::set_var("TOOLGATE_COMPONENTIZE_PY", &cpy) };
    let dir = "builds/reverse-words";
    let buggy = APP.replace("\" \".join(reversed(text.split()))", "text");
    let f = fixture(
        move |req| {
            let turn = req.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
            match turn {
                // Implement: the source (with a bug) and the test cases.
                0 => calls(vec![
                    call("c1", "write", json!({"path": format!("{dir}/app.py"), "content": buggy})),
                    call(
                        "c2",
                        "write",
                        json!({"path": format!("{dir}/tests.json"), "content": json!([
                            {"input": {"text": "hello big world"}, "expect": "world big hello"},
                            {"input": {"text": 42}, "error": true}
                        ]).to_string()}),
                    ),
                ]),
                1 => text("Written app.py and tests.json."),
                // The builder's feedback: read, then fix.
                2 => calls(vec![call("c3", "read", json!({"path": format!("{dir}/app.py")}))]),
                3 => calls(vec![call("c4", "write", json!({"path": format!("{dir}/app.py"), "content": APP}))]),
                _ => text("Fixed: the words are reversed now."),
            }
        },
        16,
    )
    .await;
    let ctx = f.gate.context();
    let out = f
        .gate
        .call(&ctx, "build_software", json!({"description": "Reverse the order of the words of a text", "type": "wasm_tool", "name": "reverse-words"}))
        .await;
    let requests = f.model.requests.lock().unwrap().clone();
    let out = out.unwrap_or_else(|e| {
        let said: Vec<String> = requests.last().map_or(Vec::new(), |r| {
            r.messages
                .iter()
                .filter_map(|m| match m {
                    Message::User { content } => Some(content.chars().take(3000).collect()),
                    _ => None,
                })
                .collect()
        });
        panic!("build failed: {e}\nthe model was told:\n{}", said.join("\n---\n"))
    });
    let text = out.text_content();
    assert!(text.contains("Installed as `wasm__reverse-words`"), "{text}");
    let meta = out.meta.clone().unwrap();
    assert_eq!(meta["registered"], "wasm__reverse-words");
    assert_eq!(meta["turns"], 5, "{meta}");
    let phases: Vec<&str> = meta["log"].as_array().unwrap().iter().map(|p| p["phase"].as_str().unwrap()).collect();
    for p in [
        "analyzing",
        "scaffolding",
        "implementing",
        "building",
        "validating",
        "testing",
        "fixing",
        "registering",
        "complete",
    ] {
        assert!(phases.contains(&p), "{p} missing from {phases:?}");
    }
    // The builder's feedback named the failing case.
    let fed_back = requests.iter().flat_map(|r| r.messages.iter()).any(|m| {
        matches!(m, Message::User { content } if content.contains("Tests failed") && content.contains("world big hello"))
    });
    assert!(fed_back, "the test failure was not fed back");
    // A person approved the build and the install (which showed the hash).
    let seen = f.approver.seen.lock().unwrap().clone();
    assert_eq!(seen[0].tool, "build_software");
    let install = seen.iter().find(|r| r.tool == "tool_install").expect("tool_install asked");
    assert!(format!("{install:?}").contains("BLAKE3"), "{install:?}");
    // The new tool answers through the gate.
    let answer = f.gate.call(&ctx, "wasm__reverse-words", json!({"text": "one two three"})).await.unwrap();
    assert!(answer.text_content().contains("three two one"), "{}", answer.text_content());
}

/// A builder that loops: the model calls tools forever and never answers. It is stopped after
/// its 10 turns (the 11th reply is not acted on), with a failure that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_that_loops_is_stopped_after_ten_turns() {
    let f = fixture(
        |req| {
            let n = req.messages.len();
            calls(vec![call(&format!("c{n}"), "read", json!({"path": format!("missing-{n}.txt")}))])
        },
        4,
    )
    .await;
    let err = f
        .gate
        .call(
            &f.gate.context(),
            "build_software",
            json!({"description": "a script that prints hello", "type": "script"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("10 turns") && err.contains("loops"), "{err}");
    assert!(err.contains("builds/a-script-that-prints"), "{err}");
    assert_eq!(f.model.requests.lock().unwrap().len(), 11);
}

/// A model stuck planning: two answers in a row without a tool call end the build at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_only_talks_fails_fast() {
    let f = fixture(|_| text("First I will think about the design of the script."), 4).await;
    let err = f
        .gate
        .call(
            &f.gate.context(),
            "build_software",
            json!({"description": "a script that prints hello", "type": "script"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 times in a row without calling a tool"), "{err}");
    let requests = f.model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    // Between the two, the builder told it what is missing.
    let last = requests[1].messages.last().unwrap();
    assert!(matches!(last, Message::User { content } if content.contains("does not exist yet")), "{last:?}");
}

/// Bad pairs are refused before any model turn, with what to ask for instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_wasm_tool_is_refused_with_the_alternatives() {
    let f = fixture(|_| text("unused"), 4).await;
    let err = f
        .gate
        .call(
            &f.gate.context(),
            "build_software",
            json!({"description": "reverse words", "type": "wasm_tool", "language": "rust"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("python") && err.contains("javascript"), "{err}");
    assert!(f.model.requests.lock().unwrap().is_empty());
}
