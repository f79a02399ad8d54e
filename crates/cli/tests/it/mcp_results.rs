//! Every tool `toolgate serve` lists, called over MCP (stdio, the rmcp client), checked for what
//! a model is handed (`docs/mcp.md`, "Results"): Claude Code, Codex and Pydantic AI hand the
//! model `structuredContent` when a result has it and drop the text, others read the text.
//! So a result carries `structuredContent` only when the tool lists an `outputSchema`, and then
//! it validates against it and says what the text says; every other result is text, and the
//! text holds what the call was for (the file's lines, the matches, the entries, the Markdown).
//!
//! The table below must name every listed tool: a new tool fails this test until it has a row.

use std::collections::BTreeSet;
use std::io::{Read, Write};

use crate::support::npm;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use serde_json::{Value, json};

/// What a call must give the model.
enum Expect {
    /// A result whose text holds each of these.
    Text(&'static [&'static str]),
    /// An error result whose text holds this (the tool needs something this test does not set
    /// up: a model, a search provider, a person); its shape is checked all the same.
    Error(&'static str),
}

/// One call per tool, in order (later rows use what earlier ones made).
fn table(page: &str, data: &str) -> Vec<(&'static str, Value, Expect)> {
    use Expect::{Error, Text};
    vec![
        ("echo", json!({"message": "hi there"}), Text(&["hi there"])),
        ("time", json!({"operation": "parse", "timestamp": "2026-11-27T14:00:00Z"}), Text(&["1795788000"])),
        ("json", json!({"operation": "query", "data": {"a": [7, 8]}, "path": "$.a[*]"}), Text(&["7", "8"])),
        ("read", json!({"path": "notes.txt"}), Text(&["The code word is PELICAN-42."])),
        ("grep", json!({"pattern": "PELICAN"}), Text(&["notes.txt"])),
        ("grep", json!({"pattern": "PELICAN", "output_mode": "content"}), Text(&["The code word is PELICAN-42."])),
        ("grep", json!({"pattern": "PELICAN", "output_mode": "count"}), Text(&["notes.txt:1"])),
        ("ls", json!({"path": "."}), Text(&["notes.txt", "src"])),
        ("glob", json!({"pattern": "**/*.rs"}), Text(&["src/lib.rs"])),
        ("write", json!({"path": "new.txt", "content": "fresh\n"}), Text(&["new.txt"])),
        ("read", json!({"path": "new.txt"}), Text(&["fresh"])),
        ("edit", json!({"path": "new.txt", "old_string": "fresh", "new_string": "edited"}), Text(&["new.txt"])),
        (
            "multi_edit",
            json!({"path": "new.txt", "edits": [{"old_string": "edited", "new_string": "twice"}]}),
            Text(&["new.txt"]),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: patched.txt\n+patched line\n*** End Patch"}),
            Text(&["patched.txt"]),
        ),
        ("exec", json!({"command": "echo exec-said-this"}), Text(&["exec-said-this"])),
        ("execute_code", json!({"language": "python", "code": "print(6 * 7)"}), Text(&["42"])),
        ("process", json!({"action": "list"}), Text(&[])),
        ("lock_paths", json!({"globs": ["src/**"]}), Text(&["Token"])),
        ("unlock_paths", json!({"tokens": ["FROM_LOCK_PATHS"]}), Text(&[])),
        (
            "html_to_markdown",
            json!({"html": "<h1>Heading</h1><p>Some <b>bold</b> words.</p>"}),
            Text(&["# Heading", "**bold**"]),
        ),
        ("web_fetch", json!({"url": page}), Text(&["A distinctive sentence about herons."])),
        ("http", json!({"method": "GET", "url": data}), Text(&["\"n\":3"])),
        (
            "web_search",
            json!({"query": "herons"}),
            Text(&["Grey herons", "https://birds.example/herons", "They wade."]),
        ),
        ("memory_write", json!({"content": "The deploy day is Thursday."}), Text(&["MEMORY.md"])),
        ("memory_read", json!({"path": "MEMORY.md"}), Text(&["The deploy day is Thursday."])),
        ("memory_get", json!({"path": "MEMORY.md"}), Text(&["The deploy day is Thursday."])),
        ("memory_search", json!({"query": "deploy day", "min_score": 0}), Text(&["MEMORY.md", "Thursday"])),
        ("memory_tree", json!({}), Text(&["MEMORY.md"])),
        ("skill_list", json!({}), Text(&["heron-facts"])),
        ("skill_search", json!({"query": "herons"}), Text(&["heron-facts"])),
        ("skill_read", json!({"name": "heron-facts"}), Text(&["Herons stand still."])),
        ("skill_install", json!({"path": "incoming/owl-facts"}), Text(&["owl-facts"])),
        ("skill_remove", json!({"name": "owl-facts"}), Text(&["owl-facts"])),
        ("tool_search", json!({"query": "github"}), Text(&["github"])),
        ("tool_list", json!({}), Text(&["read"])),
        ("tool_install", json!({"name": "nothing-like-this"}), Error("nothing-like-this")),
        ("tool_activate", json!({"name": "nothing-like-this", "active": false}), Error("nothing-like-this")),
        ("tool_auth", json!({"name": "nothing-like-this"}), Error("nothing-like-this")),
        ("tool_remove", json!({"name": "nothing-like-this"}), Error("nothing-like-this")),
        ("greet", json!({"name": "Ada"}), Text(&["hello", "Ada"])),
        ("agents_list", json!({}), Text(&["helper", "Helps with herons"])),
        ("delegate_search", json!({"query": "herons"}), Text(&["helper"])),
        ("delegate", json!({"action": "list"}), Text(&["delegations"])),
        ("subagents", json!({"action": "list"}), Text(&["subagents"])),
        ("sessions_list", json!({}), Text(&["sessions"])),
        ("sessions_spawn", json!({"agent": "helper", "prompt": "say hi"}), Text(&[])),
        ("session_status", json!({}), Text(&["mcp (stdio)", "\"calls\""])),
        ("sessions_history", json!({"session_id": "nope"}), Error("nope")),
        ("sessions_send", json!({"session_id": "nope", "message": "hi"}), Error("nope")),
        (
            "team_tasks",
            json!({"action": "create", "team": "herons", "subject": "count herons"}),
            Text(&["count herons"]),
        ),
        ("team_tasks", json!({"action": "list", "team": "herons"}), Text(&["count herons"])),
        ("team_message", json!({"action": "send", "team": "herons", "to": "helper", "content": "hi"}), Text(&[])),
        ("team_message", json!({"action": "read", "team": "herons"}), Text(&[])),
        ("image", json!({"action": "resize", "path": "pic.png", "width": 8}), Text(&["pic.resized.png", "8×6"])),
        ("tts", json!({"text": "Herons stand still.", "output": "herons.wav"}), Text(&["herons.wav", "espeak-ng"])),
        ("audio", json!({"action": "transcribe", "path": "herons.wav"}), Error("[media.transcribe]")),
        ("video", json!({"action": "info", "path": "notes.txt"}), Error("not a video")),
        ("browser", json!({"action": "tabs"}), Text(&[])),
        ("capture_screenshot", json!({"url": page}), Text(&["browser-output"])),
        ("canvas", json!({"action": "present", "content": "<h1>Herons</h1>", "format": "html"}), Text(&[])),
        (
            "create_job",
            json!({"title": "say", "description": "echo job-said-this", "mode": "command", "wait": true}),
            Text(&["job-said-this"]),
        ),
        ("list_jobs", json!({}), Text(&["say"])),
        ("job_status", json!({"job_id": "ffffffff"}), Error("ffffffff")),
        ("job_events", json!({"job_id": "ffffffff"}), Error("ffffffff")),
        ("cancel_job", json!({"job_id": "ffffffff"}), Error("ffffffff")),
        ("job_prompt", json!({"job_id": "ffffffff", "content": "hi"}), Error("ffffffff")),
        (
            "routine_create",
            json!({"name": "hello", "trigger_type": "manual", "prompt": "say hi", "action_type": "tool",
                   "tool": "echo", "params": {"message": "routine-said-this"}}),
            Text(&["hello"]),
        ),
        ("routine_list", json!({}), Text(&["hello"])),
        ("routine_update", json!({"name": "hello", "cooldown_secs": 5}), Text(&["hello"])),
        ("routine_run", json!({"name": "hello"}), Text(&[])),
        ("routine_history", json!({"name": "hello"}), Text(&[])),
        ("routine_delete", json!({"name": "hello"}), Text(&["hello"])),
        ("cron", json!({"action": "list"}), Text(&[])),
        ("message", json!({"to": "signal:+15551234567", "content": "hi"}), Error("signal")),
        (
            "build_software",
            json!({"description": "a tool that reverses words", "type": "wasm_tool", "language": "rust"}),
            Error("[agents.builder]"),
        ),
        ("handoff", json!({"agent": "helper"}), Error("inside an agent session")),
        (
            "evaluate_loop",
            json!({"generator": "helper", "evaluator": "helper", "task": "t"}),
            Error("did not finish round 1"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_hands_a_model_its_whole_result_over_mcp() {
    let site = Site::start();
    let ws = workspace(site.port);
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(ws.path()).args(["--approval", "never", "serve"]);
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("start toolgate serve");
    let client = ().serve(transport).await.expect("MCP handshake");
    let tools = client.list_all_tools().await.expect("tools/list");

    let table = table(&format!("http://127.0.0.1:{}/page", site.port), &format!("http://127.0.0.1:{}/data", site.port));
    let listed: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let covered: BTreeSet<&str> = table.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(listed, covered, "every listed tool needs a row in the table (and only those)");

    let mut lock_token = String::new();
    for (name, mut args, expect) in table {
        if name == "unlock_paths" {
            args = json!({"tokens": [lock_token.clone()]});
        }
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        let mut request = CallToolRequestParams::new(name);
        if let Value::Object(map) = args.clone() {
            request = request.with_arguments(map);
        }
        let result = client.call_tool(request).await.unwrap_or_else(|e| panic!("{name} {args}: {e}"));
        let text = text_of(&result);
        check_shape(tool, &result, &text);
        match expect {
            Expect::Text(needles) => {
                assert_ne!(result.is_error, Some(true), "{name} {args} failed: {text}");
                for needle in needles {
                    assert!(text.contains(needle), "{name} {args}: the model is not handed `{needle}`: {text}");
                }
            }
            Expect::Error(needle) => {
                assert_eq!(result.is_error, Some(true), "{name} {args} should fail here: {text}");
                assert!(text.contains(needle), "{name} {args}: {text}");
            }
        }
        if name == "lock_paths" {
            lock_token =
                text.split("Token: ").nth(1).and_then(|t| t.split_whitespace().next()).unwrap_or("").to_owned();
        }
    }
    client.cancel().await.expect("close the session");
}

/// A bridged server's tools are untrusted, so they reach the model as text only: no
/// `outputSchema` is listed for them, and a result the server gave as `structuredContent` with
/// a short text (server-everything's `get-structured-content`) arrives as text, inside the
/// untrusted boundary, with every value in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_server_s_structured_results_reach_the_model_as_wrapped_text() {
    let ws = tempfile::tempdir().expect("temp dir");
    let config = format!(
        "[mcp.servers.everything]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
        npm::node().display().to_string(),
        npm::peer("@modelcontextprotocol/server-everything/dist/index.js").display().to_string()
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).expect("write config");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(ws.path()).args(["--approval", "never", "serve"]);
    let client = ().serve(rmcp::transport::TokioChildProcess::new(command).expect("start")).await.expect("handshake");
    let tools = client.list_all_tools().await.expect("tools/list");
    let bridged: Vec<&Tool> = tools.iter().filter(|t| t.name.starts_with("mcp__everything__")).collect();
    assert!(
        bridged.len() > 5,
        "server-everything's tools are listed: {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    for tool in &bridged {
        assert!(tool.output_schema.is_none(), "{} lists an outputSchema", tool.name);
    }
    let mut request = CallToolRequestParams::new("mcp__everything__get-structured-content");
    request = request.with_arguments(json!({"location": "Chicago"}).as_object().cloned().unwrap_or_default());
    let result = client.call_tool(request).await.expect("call");
    assert!(result.structured_content.is_none(), "{result:?}");
    let text = text_of(&result);
    assert!(text.starts_with("<tool_output name=\"mcp__everything__get-structured-content\""), "{text}");
    for value in ["36", "Light rain / drizzle", "82"] {
        assert!(text.contains(value), "the model is not handed `{value}`: {text}");
    }
    client.cancel().await.expect("close the session");
}

/// The rule of `docs/mcp.md`, "Results", for one result.
fn check_shape(tool: &Tool, result: &CallToolResult, text: &str) {
    let name = tool.name.as_ref();
    let Some(structured) = &result.structured_content else {
        assert!(
            tool.output_schema.is_none() || result.is_error == Some(true),
            "{name} lists an outputSchema but returned no structuredContent"
        );
        return;
    };
    let schema =
        tool.output_schema.as_ref().unwrap_or_else(|| panic!("{name}: structuredContent without outputSchema"));
    let schema = Value::Object((**schema).clone());
    let validator = jsonschema::validator_for(&schema).expect("a valid output schema");
    assert!(validator.is_valid(structured), "{name}: {structured} does not follow its schema {schema}");
    // Equal in information: each string and number of the structured copy is in the text, and
    // the text says nothing the structured copy lacks (it is that JSON, pretty-printed).
    let mut leaves = Vec::new();
    leaves_of(structured, &mut leaves);
    for leaf in &leaves {
        assert!(text.contains(leaf.as_str()), "{name}: the text lacks `{leaf}` of {structured}: {text}");
    }
    let parsed: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{name}: text is not its JSON: {text}"));
    assert_eq!(&parsed, structured, "{name}: the text and structuredContent differ");
}

fn leaves_of(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| leaves_of(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves_of(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// A workspace with a note, a source file, a skill, a skill to install, and `web_fetch` and
/// `http` allowed to reach the test's loopback site.
fn workspace(port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("notes.txt", "The code word is PELICAN-42.\n");
    write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    // A real PNG for `image` (ffmpeg, which `cargo xtask deps` installs).
    let made = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-f", "lavfi", "-i", "testsrc=size=16x12", "-frames:v", "1", "-y"])
        .arg(dir.path().join("pic.png"))
        .status()
        .expect("ffmpeg");
    assert!(made.success());
    write(
        ".agents/skills/heron-facts/SKILL.md",
        "---\nname: heron-facts\ndescription: Facts about herons\n---\nHerons stand still.\n",
    );
    write(
        "incoming/owl-facts/SKILL.md",
        "---\nname: owl-facts\ndescription: Facts about owls\n---\nOwls turn their heads.\n",
    );
    write(
        "toolgate.toml",
        &format!(
            "[web]\nallow_private = [\"127.0.0.1:{port}\"]\n[web.search]\nprovider = \"searxng\"\n\
             url = \"http://127.0.0.1:{port}\"\n[memory.embeddings]\nprovider = \"none\"\n\
             [loop_breaker]\nenabled = false\n{AGENTS_AND_CUSTOM}"
        ),
    );
    dir
}

/// Two agents on a model endpoint nobody listens on (the agent tools that need no model answer;
/// the others fail and say why), and a custom shell-template tool.
const AGENTS_AND_CUSTOM: &str = r#"
[providers.local]
base_url = "http://127.0.0.1:9/v1"
max_retries = 0

[agents.main]
description = "The main agent"
provider = "local"
model = "m"
links = ["helper"]

[agents.helper]
description = "Helps with herons"
provider = "local"
model = "m"

[teams.herons]
lead = "main"
members = ["helper"]

[[tools.custom]]
name = "greet"
description = "Print a greeting for a name."
parameters = { type = "object", properties = { name = { type = "string" } }, required = ["name"] }
command = "printf '%s\n' hello {{.name}}"
"#;

/// A loopback HTTP/1.1 server with an HTML page and a JSON document, on its own thread.
struct Site {
    port: u16,
}

impl Site {
    fn start() -> Site {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut request = [0u8; 4096];
                let n = stream.read(&mut request).unwrap_or(0);
                let head = String::from_utf8_lossy(&request[..n]);
                let (kind, body) = if head.starts_with("GET /data") {
                    ("application/json", r#"{"ok":true,"n":3}"#.to_owned())
                } else if head.starts_with("GET /search") {
                    // SearXNG's JSON format, which `web_search` reads (docs/web.md).
                    let hit = r#"{"title":"Grey herons","url":"https://birds.example/herons","content":"They wade."}"#;
                    ("application/json", format!(r#"{{"results":[{hit}]}}"#))
                } else {
                    (
                        "text/html; charset=utf-8",
                        "<html><head><title>Herons</title></head><body><article><h1>Herons</h1>\
                         <p>A distinctive sentence about herons.</p><p>They wade in shallow water and wait \
                         for fish, standing still for a long time.</p></article></body></html>"
                            .to_owned(),
                    )
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
            }
        });
        Site { port }
    }
}
