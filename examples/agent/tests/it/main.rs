//! The example agent as a user runs it (its binary), against a scripted Chat Completions server
//! on loopback and, when `cargo xtask deps` installed it, the real local model.

mod scripted;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use scripted::{Scripted, answer, calls};

const NOTES: &str = "The secret word is pineapple.";

/// A workspace holding `notes.txt`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary folder");
    std::fs::write(dir.path().join("notes.txt"), format!("{NOTES}\n")).expect("write notes.txt");
    dir
}

/// Runs the example on `workspace` against `url` with `args`.
fn agent(url: &str, workspace: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate-example-agent"))
        .arg("--url")
        .arg(url)
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .output()
        .expect("run the example agent")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The model asks for three calls: one the gate runs, one the gate refuses (a path out of the
/// workspace) and one of a tool that was not offered; the results go back as `tool` messages and
/// the model's answer is printed.
#[test]
fn tool_calls_run_through_the_gate_and_the_answer_is_printed() {
    let dir = workspace();
    let model = Scripted::start(vec![
        calls(&[
            ("read", json!({"path": "notes.txt"})),
            ("read", json!({"path": "../../etc/passwd"})),
            ("write", json!({"path": "x.txt", "content": "x"})),
        ]),
        answer("The secret word is pineapple."),
    ]);
    let out = agent(&model.url, dir.path(), &["--tools", "read,ls", "What is the secret word in notes.txt?"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "The secret word is pineapple.", "{stderr}");
    assert!(stderr.contains(r#"tool call: read {"path":"notes.txt"}"#), "{stderr}");

    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    // The offered tools, in OpenAI's format (toolgate::core::export), and only those.
    let first = &requests[0];
    let names: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ls", "read"]);
    assert_eq!(first["tools"][1]["type"], "function");
    // OpenAI's strict mode: every property required, the optional ones nullable.
    assert_eq!(first["tools"][1]["function"]["strict"], true);
    assert_eq!(
        first["tools"][1]["function"]["parameters"]["required"],
        json!(["limit", "max_bytes", "offset", "path"])
    );
    assert_eq!(first["tools"][1]["function"]["parameters"]["properties"]["offset"]["type"], json!(["integer", "null"]));
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(first["messages"][1], json!({"role": "user", "content": "What is the secret word in notes.txt?"}));

    // The second request carries the assistant's calls and one result per call.
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6, "{messages:#?}");
    assert_eq!(messages[2]["tool_calls"].as_array().map(Vec::len), Some(3));
    let result = |id: &str| {
        let m = messages.iter().find(|m| m["tool_call_id"] == id).unwrap();
        assert_eq!(m["role"], "tool");
        m["content"].as_str().unwrap().to_owned()
    };
    // The file's text, wrapped by the gate's output stage as untrusted content.
    let read = result("call_1");
    assert!(read.contains(NOTES) && read.starts_with("<tool_output name=\"read\""), "{read}");
    // Refused by the gate: nothing outside the workspace is read.
    let escape = result("call_2");
    assert!(escape.starts_with("error: ") && escape.contains("outside the workspace"), "{escape}");
    // Refused by the example: `write` is visible to this caller but was not offered.
    let unoffered = result("call_3");
    assert!(unoffered.starts_with("error: ") && unoffered.contains("not one of the tools offered"), "{unoffered}");
    assert!(!dir.path().join("x.txt").exists());
}

/// `--json-schema`: no `tools`; the system prompt lists them and `response_format` constrains
/// each reply to a call of an offered tool or the final answer, which is printed.
#[test]
fn json_schema_mode_runs_the_step_through_the_gate() {
    let dir = workspace();
    let model = Scripted::start(vec![
        answer(r#"{"tool": "read", "arguments": {"path": "notes.txt"}}"#),
        answer(r#"{"tool": "final_answer", "answer": "pineapple"}"#),
    ]);
    let out = agent(&model.url, dir.path(), &["--json-schema", "--tools", "read", "Read notes.txt."]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "pineapple", "{stderr}");

    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let first = &requests[0];
    assert!(first.get("tools").is_none(), "{first:#}");
    assert!(first["messages"][0]["content"].as_str().unwrap().contains("\n- read: Read a file"), "{first:#}");
    let steps = first["response_format"]["json_schema"]["schema"]["anyOf"].as_array().unwrap();
    let tools: Vec<&Value> = steps.iter().map(|s| &s["properties"]["tool"]["const"]).collect();
    assert_eq!(tools, [&json!("read"), &json!("final_answer")]);
    // The step as the model wrote it, then the gate's result as a user turn.
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "assistant");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    let content = last["content"].as_str().unwrap();
    assert!(content.starts_with("Tool `read` returned:\n") && content.contains(NOTES), "{content}");
}

/// After `--max-steps` rounds of calls, the tools are withdrawn (`tool_choice: none`, or only
/// the final answer in the schema) so the run ends with an answer.
#[test]
fn the_last_round_asks_for_an_answer() {
    let dir = workspace();
    let read = || calls(&[("read", json!({"path": "notes.txt"}))]);
    let model = Scripted::start(vec![read(), read(), answer("done")]);
    let out = agent(&model.url, dir.path(), &["--tools", "read", "--max-steps", "2", "Read notes.txt."]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "done");
    let choices: Vec<Value> = model.requests().iter().map(|r| r["tool_choice"].clone()).collect();
    assert_eq!(choices, [json!("auto"), json!("auto"), json!("none")]);

    let model =
        Scripted::start(vec![answer(r#"{"tool": "read", "arguments": {"path": "notes.txt"}}"#), answer("done")]);
    let out =
        agent(&model.url, dir.path(), &["--json-schema", "--tools", "read", "--max-steps", "1", "Read notes.txt."]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let last = model.requests().pop().unwrap();
    let steps = last["response_format"]["json_schema"]["schema"]["anyOf"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["properties"]["tool"]["const"], "final_answer");
}

/// Mistakes end with a message and exit status 1, not a panic.
#[test]
fn errors_are_reported() {
    let dir = workspace();
    // Nothing listens on port 9 (discard) of loopback.
    let out = agent("http://127.0.0.1:9/v1", dir.path(), &["--tools", "read", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("error: cannot reach http://127.0.0.1:9/v1/chat/completions"),
        "{}",
        text(&out.stderr)
    );

    let out = agent("http://127.0.0.1:9/v1", dir.path(), &["--tools", "nope", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no tool `nope`"), "{}", text(&out.stderr));

    let out = agent("http://127.0.0.1:9/v1", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no prompt"), "{}", text(&out.stderr));
}

/// The local model (`cargo xtask deps`): SmolLM2-135M-Instruct behind llama.cpp's server, started
/// with the example's `local_model.py`. A 135M model gets a call right only when told which tool
/// to use (asked "Read notes.txt." it answers without reading), so this asserts only that the
/// loop completes and prints an answer; `--no-capture` shows what the model did. Fails, naming
/// `cargo xtask deps`, when the model is not installed (the suite's tests never skip).
#[test]
fn real_local_model_completes_the_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".cache/agent-model/venv/bin/python");
    assert!(python.exists(), "the local model is not installed in {}; run `cargo xtask deps`", python.display());
    let server = LocalModel::start(&python, &Path::new(env!("CARGO_MANIFEST_DIR")).join("local_model.py"));
    let dir = workspace();
    let args =
        ["--json-schema", "--tools", "read", "--max-steps", "2", "Use the read tool to read the file notes.txt."];
    let out = agent(&server.url, dir.path(), &args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!("--- what SmolLM2 did (stderr) ---\n{stderr}--- its answer (stdout) ---\n{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.trim().is_empty());
}

/// `local_model.py` running; stopped on drop (its stdin closes, then it is killed).
struct LocalModel {
    child: Child,
    url: String,
}

impl LocalModel {
    fn start(python: &PathBuf, script: &Path) -> LocalModel {
        let mut child = Command::new(python)
            .arg(script)
            .args(["--port", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start local_model.py");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = LocalModel { child, url: String::new() };
        let line = rx.recv_timeout(Duration::from_secs(300)).expect("the local model did not start in 5 minutes");
        let base = line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("local_model.py printed {line:?}"));
        server.url = format!("{base}/v1");
        server
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
