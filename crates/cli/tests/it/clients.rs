//! Real MCP clients against the real `toolgate serve` over stdio, run as their users run them:
//! Claude Code (`claude -p`), Codex CLI (`codex exec`), a Pydantic AI agent (`MCPToolset`) and
//! a Vercel AI SDK agent (`@ai-sdk/mcp` with `ai`'s `generateText`). Each agent's model calls
//! `read`, `grep`, `ls`, `glob` and `web_fetch`, and the test checks what the model was handed:
//! the file text, the matching line, the entries, the paths, the page's Markdown. (Clients that
//! find `structuredContent` in a result hand the model that and drop the text, issue 22.)
//!
//! Claude Code and Codex talk to a scripted model on loopback (`python/model_server.py`: the
//! Anthropic Messages API and the OpenAI Responses API), which also serves the page; the Pydantic
//! AI and Vercel agents have scripted models in process (`python/pydantic_agent.py`,
//! `npm/vercel_agent.mjs`). Every client is installed by `cargo xtask deps`; a missing one fails
//! the test saying so, nothing is downloaded here, and nothing but loopback is reached.

use crate::support::npm;
use crate::support::python;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A tool call every client's model makes, and what the model must be handed for it: the
/// information it needs, whether the client passes the text or a complete structured result.
struct Step {
    tool: &'static str,
    /// The arguments; `{PAGE_URL}` is the page on the scripted server.
    args: &'static str,
    expect: &'static [&'static str],
}

const STEPS: &[Step] = &[
    Step { tool: "read", args: r#"{"path": "notes.txt"}"#, expect: &["The code word is PELICAN-42."] },
    Step {
        tool: "grep",
        args: r#"{"pattern": "PELICAN", "output_mode": "content"}"#,
        expect: &["notes.txt", "The code word is PELICAN-42."],
    },
    Step { tool: "ls", args: r#"{"path": "."}"#, expect: &["notes.txt", "readme.md", "docs"] },
    Step { tool: "glob", args: r#"{"pattern": "**/*.txt"}"#, expect: &["notes.txt", "docs/guide.txt"] },
    Step {
        tool: "web_fetch",
        args: r#"{"url": "{PAGE_URL}"}"#,
        expect: &[
            "# Pelicans",
            "Brown pelicans dive from the air to catch fish.",
            "[bird guide](https://example.org/birds)",
        ],
    },
];

const PAGE: &str = "<!doctype html><html><head><title>Pelican facts</title></head><body><h1>Pelicans</h1>\
    <p>Brown pelicans dive from the air to catch fish.</p>\
    <p>See the <a href=\"https://example.org/birds\">bird guide</a>.</p></body></html>";

const PROMPT: &str = "Read notes.txt, grep for PELICAN, list and glob the files, fetch the page.";
/// The scripted models' last words, once every call is answered.
const FINAL: &str = "All five tools answered.";
/// How long a client may take for the whole conversation.
const DEADLINE: Duration = Duration::from_secs(120);

/// The workspace, a temp dir for the client's home and the records, and the scripted model
/// server (killed on drop).
struct Scene {
    ws: tempfile::TempDir,
    dir: tempfile::TempDir,
    server: Child,
    port: u16,
    started: Instant,
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl Scene {
    fn start() -> Scene {
        let ws = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(ws.path().join("docs")).expect("mkdir docs");
        for (file, text) in [
            ("notes.txt", "The code word is PELICAN-42.\n"),
            ("readme.md", "# Readme\n"),
            ("docs/guide.txt", "Field guide.\n"),
        ] {
            std::fs::write(ws.path().join(file), text).expect("write a workspace file");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/model_server.py");
        let mut server = std::process::Command::new(python::sdk_python())
            .arg(&script)
            .arg(script_json())
            .arg(dir.path().join("records.jsonl"))
            .arg(PAGE)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("model_server.log")).expect("log file"))
            .spawn()
            .expect("start the scripted model server");
        let mut line = String::new();
        BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut line).expect("read the port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the model server printed no port: {line:?}"));
        let config = format!("[web]\nallow_private = [\"127.0.0.1:{port}\"]\n");
        std::fs::write(ws.path().join("toolgate.toml"), config).expect("write toolgate.toml");
        Scene { ws, dir, server, port, started: Instant::now() }
    }

    fn page_url(&self) -> String {
        format!("http://127.0.0.1:{}/page.html", self.port)
    }

    /// `toolgate --workspace WS serve`, as the clients' configs give it.
    fn serve_args(&self) -> Vec<String> {
        vec!["--workspace".into(), self.ws.path().display().to_string(), "serve".into()]
    }

    /// The tool results the scripted model server received.
    fn records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.path().join("records.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect()
    }

    /// Checks that the model was handed what each step needs; reports every step that fails,
    /// with the exact content, and the client's output.
    fn check(&self, client: &str, records: &[Value], output: &str) {
        eprintln!("{client}: {:.1} s from the start to the check", self.started.elapsed().as_secs_f64());
        let mut failures = Vec::new();
        for (i, step) in STEPS.iter().enumerate() {
            let suffix = format!("step{i}");
            let Some(record) = records.iter().find(|r| r["call_id"].as_str().is_some_and(|id| id.ends_with(&suffix)))
            else {
                failures.push(format!("{}: the model was handed no result", step.tool));
                continue;
            };
            let seen = strings(&record["content"]);
            let missing: Vec<_> = step.expect.iter().filter(|e| !seen.contains(*e)).collect();
            if !missing.is_empty() {
                failures.push(format!(
                    "{}: the model was not handed {missing:?}; it was handed {}",
                    step.tool, record["content"]
                ));
            }
        }
        let log = std::fs::read_to_string(self.dir.path().join("model_server.log")).unwrap_or_default();
        let log_tail = log.lines().skip(log.lines().count().saturating_sub(16)).collect::<Vec<_>>().join("\n");
        assert!(
            failures.is_empty(),
            "{client}: {} of {} steps failed:\n- {}\n\nclient output:\n{output}\n\nmodel server log (end):\n{log_tail}",
            failures.len(),
            STEPS.len(),
            failures.join("\n- ")
        );
        assert!(output.contains(FINAL), "{client} did not finish the conversation:\n{output}");
    }
}

/// The steps as the scripted models take them: `[{"tool", "args"}]`.
fn script_json() -> String {
    let steps: Vec<Value> = STEPS
        .iter()
        .map(|s| json!({"tool": s.tool, "args": serde_json::from_str::<Value>(s.args).expect("step args")}))
        .collect();
    Value::Array(steps).to_string()
}

/// Every string in `content` (a plain string, a list of text blocks, ...), one per line: the
/// text the model reads, whatever the client's wrapping.
fn strings(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(strings).collect::<Vec<_>>().join("\n"),
        Value::Object(map) => map.values().map(strings).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

/// Runs `cmd` to its end within [`DEADLINE`] with stdin closed; returns its stdout and stderr.
async fn run(client: &str, mut cmd: tokio::process::Command) -> String {
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(DEADLINE, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{client} did not finish within {DEADLINE:?}"))
        .unwrap_or_else(|e| panic!("cannot run {client}: {e}"));
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{client} failed ({}):\n{text}", out.status);
    text
}

/// `program` with nothing of this process's environment but what is set here: `PATH` (Node 22
/// first), `HOME` in `home`.
fn isolated(program: &Path, home: &Path) -> tokio::process::Command {
    let node_bin = npm::node().parent().map(Path::to_path_buf).unwrap_or_default();
    let mut cmd = tokio::process::Command::new(program);
    cmd.env_clear().env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", node_bin.display())).env("HOME", home);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_hands_the_model_what_the_tools_returned() {
    let claude = npm::peer("@anthropic-ai/claude-code/bin/claude.exe");
    let scene = Scene::start();
    let mcp_config = scene.dir.path().join("mcp.json");
    let servers = json!({"mcpServers": {"toolgate": {"command": npm::TOOLGATE, "args": scene.serve_args()}}});
    std::fs::write(&mcp_config, servers.to_string()).expect("write mcp.json");
    let mut cmd = isolated(&claude, scene.dir.path());
    cmd.current_dir(scene.ws.path())
        .args(["-p", PROMPT, "--strict-mcp-config", "--mcp-config"])
        .arg(&mcp_config)
        // Runs as root here, where bypassing permissions is refused: allow the server's tools.
        .args(["--allowedTools", "mcp__toolgate"])
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", scene.port))
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        // Offer the MCP tools themselves, not behind its tool search.
        .env("ENABLE_TOOL_SEARCH", "false");
    let output = run("claude", cmd).await;
    scene.check("Claude Code", &scene.records(), &output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_hands_the_model_what_the_tools_returned() {
    let codex = npm::peer("@openai/codex/bin/codex.js");
    let scene = Scene::start();
    let home = scene.dir.path();
    let config = format!(
        r#"model = "gpt-5-codex"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.scripted]
name = "Scripted model"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"

[mcp_servers.toolgate]
command = {command}
args = {args}
"#,
        port = scene.port,
        command = json!(npm::TOOLGATE),
        args = json!(scene.serve_args()),
    );
    std::fs::write(home.join("config.toml"), config).expect("write config.toml");
    let mut cmd = isolated(&npm::node(), home);
    cmd.current_dir(scene.ws.path())
        .arg(&codex)
        .args(["exec", "--skip-git-repo-check", PROMPT])
        .env("CODEX_HOME", home);
    let output = run("codex", cmd).await;
    scene.check("Codex CLI", &scene.records(), &output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pydantic_ai_hands_the_model_what_the_tools_returned() {
    python::require("pydantic-ai-slim", "2.68.0");
    let scene = Scene::start();
    let args = [script_json(), scene.page_url(), npm::TOOLGATE.to_owned(), scene.ws.path().display().to_string()];
    let report = python::report("pydantic_agent.py", args).await;
    let records = report["records"].as_array().cloned().unwrap_or_default();
    scene.check("Pydantic AI", &records, report["output"].as_str().unwrap_or_default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vercel_ai_sdk_hands_the_model_what_the_tools_returned_and_close_ends_toolgate() {
    let modules = npm::peer("");
    for package in ["ai/package.json", "@ai-sdk/mcp/package.json"] {
        npm::peer(package);
    }
    let scene = Scene::start();
    // The script resolves `ai` and `@ai-sdk/mcp` from a `node_modules` beside it.
    let script = scene.dir.path().join("vercel_agent.mjs");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/npm/vercel_agent.mjs"), &script)
        .expect("copy the script");
    std::os::unix::fs::symlink(&modules, scene.dir.path().join("node_modules")).expect("link node_modules");
    let mut cmd = isolated(&npm::node(), scene.dir.path());
    cmd.arg(&script).arg(script_json()).arg(scene.page_url()).arg(npm::TOOLGATE).arg(scene.ws.path());
    // The script must end by itself (it kills a toolgate that outlives `close()` by 5 s).
    let output = run("the Vercel AI SDK script", cmd).await;
    let report: Value = output
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok().filter(|r| r.get("records").is_some()))
        .unwrap_or_else(|| panic!("no report from the Vercel AI SDK script:\n{output}"));
    let exit = &report["exit"];
    eprintln!("toolgate serve after client.close(): {exit}");
    let records = report["records"].as_array().cloned().unwrap_or_default();
    scene.check("Vercel AI SDK", &records, report["output"].as_str().unwrap_or_default());
    assert!(
        exit.get("killed_after_5s").is_none(),
        "toolgate serve did not exit within 5 s of the SDK's client.close() (SIGTERM), and was killed: {exit}"
    );
}
