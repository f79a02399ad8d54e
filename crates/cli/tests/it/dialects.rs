//! The seed tables (issue 24, "Tests"): each seed system's tools called over MCP in its dialect,
//! `toolgate serve --dialect NAME` driven by the official MCP Python SDK over stdio. The tables
//! (tool, params, check), the inventory and audit checks and the policy check are in
//! `tests/python/dialect_tables.py`; this module writes the workspaces and runs it, one test per
//! dialect (they run in parallel).

use std::path::Path;
use std::process::Command;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// Agents on a model endpoint nobody listens on (the agent tools list and keep ids; a run fails
/// at once), a team led by the caller, the test site allowed, no embedding model (memory search
/// is full text) and no loop breaker (a table may repeat a call).
fn config(port: u16) -> String {
    format!(
        r#"
[web]
allow_private = ["127.0.0.1:{port}"]
[web.search]
provider = "searxng"
url = "http://127.0.0.1:{port}"
[memory.embeddings]
provider = "none"
[loop_breaker]
enabled = false
[identity]
agent = "coder"
[providers.nowhere]
base_url = "http://127.0.0.1:9/v1"
max_retries = 0
[agents.coder]
description = "Edits code"
provider = "nowhere"
model = "none"
links = ["reviewer"]
[agents.reviewer]
description = "Reviews Go code"
provider = "nowhere"
model = "none"
[teams.release]
lead = "coder"
members = ["reviewer"]
[automation.jobs]
agent = "coder"
"#
    )
}

/// The files the tables read, edit, patch, search and remember, and `config` plus `extra`.
fn workspace(port: u16, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("a.txt", "one\ntwo\nthree\nfour\n"),
        ("rep.txt", "a-a-a\n"),
        ("dup.txt", "x\nx\n"),
        ("old.txt", "to be deleted\n"),
        ("src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"),
        ("src/util.go", "package main\n\nfunc helper() int { return 42 }\n"),
        ("MEMORY.md", "# Memory\n\nThe deploy key rotates every Tuesday.\n"),
        ("memory/project.md", "# Project\n\nThe staging server is called marmot.\n"),
        (
            ".agents/skills/heron-facts/SKILL.md",
            "---\nname: heron-facts\ndescription: Facts about herons\n---\nHerons stand still.\n",
        ),
        ("toolgate.toml", &format!("{}{extra}", config(port))),
    ];
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// Runs the dialect's table; fails with the script's output on any failed check.
async fn table(dialect: &str) {
    let port = toolgate_testkit::ports::free();
    let ws = workspace(port, "");
    let denied = workspace(port, "[tools]\ndeny = [\"read\"]\n");
    let args = [TOOLGATE, dialect, path(ws.path()), path(denied.path()), &port.to_string()].map(str::to_owned);
    let report = python::report("dialect_tables.py", args).await;
    assert_eq!(report["dialect"], dialect, "{report}");
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
    let calls = report["calls"].as_u64().unwrap_or_default();
    let gaps = report["known_gaps"].as_array().map_or(0, Vec::len) as u64;
    assert!(calls >= 20 && report["calls_passed"].as_u64() == Some(calls - gaps), "{report}");
    eprintln!("{dialect}: {} of {calls} calls passed, {gaps} known gaps: {}", calls - gaps, report["known_gaps"]);
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

#[tokio::test]
async fn goclaw_seed_000_table() {
    table("goclaw").await;
}

#[tokio::test]
async fn linggen_seed_001_table() {
    table("linggen").await;
}

#[tokio::test]
async fn gomini_seed_002_table() {
    table("gomini").await;
}

#[tokio::test]
async fn openclaw_seed_003_table() {
    table("openclaw").await;
}

#[tokio::test]
async fn ironclaw_seed_004_table() {
    table("ironclaw").await;
}

#[test]
fn an_unknown_dialect_is_refused_naming_the_valid_ones() {
    let ws = tempfile::tempdir().unwrap();
    let out =
        Command::new(TOOLGATE).args(["serve", "--dialect", "klingon", "--workspace"]).arg(ws.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve started with --dialect klingon: {stderr}");
    assert!(stderr.contains("unknown dialect `klingon`"), "{stderr}");
    for name in toolgate::dialect::NAMES {
        assert!(stderr.contains(name), "the valid `{name}` is not named: {stderr}");
    }
}
