//! `toolgate tools --format openai` in every dialect, judged by the OpenAI Agents SDK's
//! strict-mode converter (`tests/python/openai_strict.py`): every built-in tool is exported with
//! `"strict": true` and the SDK accepts it unchanged. The agent tools are listed too
//! (`[agents.main]`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

#[test]
fn every_dialects_openai_export_is_strict() {
    let python = python::require("openai-agents", "0.24.0");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_strict.py");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), "[agents.main]\nprovider = \"none\"\n").unwrap();
    let mut exports = serde_json::Map::new();
    for dialect in toolgate::dialect::NAMES {
        let out = Command::new(TOOLGATE)
            .args(["tools", "--format", "openai", "--dialect", dialect, "--workspace"])
            .arg(ws.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{dialect}: {}", String::from_utf8_lossy(&out.stderr));
        let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(tools.as_array().is_some_and(|t| t.len() >= 10), "{dialect}: {tools}");
        exports.insert((*dialect).to_owned(), tools);
    }
    // One run of the SDK for every dialect: importing it takes seconds.
    let mut check = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(&serde_json::to_vec(&exports).unwrap()).unwrap();
    let verdict = check.wait_with_output().unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&verdict.stdout), String::from_utf8_lossy(&verdict.stderr));
    assert!(verdict.status.success(), "the Agents SDK refuses a strict export:\n{report}");
    for dialect in toolgate::dialect::NAMES {
        let line = report.lines().find(|l| l.starts_with(&format!("{dialect}: ")) && l.ends_with(" failed"));
        assert!(line.is_some_and(|l| l.ends_with(" passed, 0 failed")), "{dialect}: {report}");
    }
}
