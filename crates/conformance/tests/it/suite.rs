//! The official MCP conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.12`, on
//! Node 22) against `toolgate-conformance serve --http 127.0.0.1:PORT` (a gate plus the suite's
//! fixtures) and with `toolgate-conformance client` (toolgate's bridge) as its client.
//!
//! Every check the suite records (its `checks.json` per scenario) is judged against
//! `tests/baseline.toml`: a failure no entry covers fails the test, and so does an entry whose
//! scenario ran without the failure it excuses (a fix landed: delete the entry). Warnings are
//! printed, not judged.
//!
//! The suite and Node 22 are installed into `.cache/peers/npm` by `cargo xtask deps`; the tests
//! fail, never skip, when they are missing.

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolgate_testkit::npm;
use toolgate_testkit::serve::HttpServer;

/// The binary under test.
const CONFORMANCE: &str = env!("CARGO_BIN_EXE_toolgate-conformance");

/// One expected failure from the baseline file.
#[derive(Debug, Clone)]
struct Entry {
    scenario: String,
    /// One check id, or `None` for the whole scenario.
    check: Option<String>,
    /// A timing check of the suite that load decides: tolerated, never judged stale.
    flaky: bool,
}

/// One check the suite recorded.
#[derive(Debug, Clone)]
struct Check {
    scenario: String,
    id: String,
    status: String,
    message: String,
}

/// What judging one run found.
#[derive(Debug, Default)]
struct Verdict {
    /// Failures no baseline entry covers: `scenario:check: message`.
    unexpected: Vec<String>,
    /// Baseline entries whose scenario ran and did not fail as they say.
    stale: Vec<String>,
    /// Failures a baseline entry covers.
    expected: usize,
    passed: usize,
    warnings: Vec<String>,
}

fn baseline_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/baseline.toml")
}

/// The baseline entries for `role` (`server` or `client`); every entry must say why.
fn baseline(role: &str) -> Vec<Entry> {
    let text = std::fs::read_to_string(baseline_path()).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("baseline.toml does not parse: {e}"));
    let entries = doc.get(role).and_then(|v| v.as_array()).cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let field = |k: &str| e.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            let scenario = field("scenario").unwrap_or_else(|| panic!("a [[{role}]] entry has no scenario: {e}"));
            let why = field("why").unwrap_or_default();
            assert!(why.trim().len() > 20, "baseline entry {role} {scenario} must say why it fails");
            let flaky = e.get("flaky").and_then(toml::Value::as_bool).unwrap_or(false);
            Entry { scenario, check: field("check"), flaky }
        })
        .collect()
}

/// Every check under `root` (`<role>-<scenario>-<timestamp>/checks.json`; a `/` in a scenario
/// name makes extra directory levels).
fn checks(root: &Path, role: &str) -> Vec<Check> {
    let stamp = regex::Regex::new(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$").unwrap();
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.file_name().is_none_or(|n| n != "checks.json") {
                continue;
            }
            let name = dir.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            let name = stamp.replace(&name, "").to_string();
            let scenario = name.strip_prefix(&format!("{role}-")).unwrap_or(&name).to_owned();
            let list: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for c in list {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                out.push(Check {
                    scenario: scenario.clone(),
                    id: text("id"),
                    status: text("status"),
                    message: if text("errorMessage").is_empty() { text("description") } else { text("errorMessage") },
                });
            }
        }
    }
    out
}

/// Judges `checks` against `entries`.
fn judge(checks: &[Check], entries: &[Entry]) -> Verdict {
    let covers = |e: &Entry, c: &Check| e.scenario == c.scenario && e.check.as_ref().is_none_or(|id| *id == c.id);
    let mut verdict = Verdict::default();
    for c in checks {
        match c.status.as_str() {
            "SUCCESS" => verdict.passed += 1,
            "WARNING" => verdict.warnings.push(format!("{}:{}: {}", c.scenario, c.id, c.message)),
            "FAILURE" if entries.iter().any(|e| covers(e, c)) => verdict.expected += 1,
            "FAILURE" => verdict.unexpected.push(format!("{}:{}: {}", c.scenario, c.id, c.message)),
            _ => {}
        }
    }
    for e in entries {
        let ran = checks.iter().any(|c| c.scenario == e.scenario);
        let failed = checks.iter().any(|c| c.status == "FAILURE" && covers(e, c));
        if ran && !failed && !e.flaky {
            let what = e.check.as_ref().map_or(e.scenario.clone(), |id| format!("{}:{id}", e.scenario));
            verdict.stale.push(what);
        }
    }
    verdict
}

/// The suite's entry point, run with Node 22.
fn suite(home: &Path) -> std::process::Command {
    npm::node_command(&npm::peer("@modelcontextprotocol/conformance/dist/index.js"), home)
}

/// Runs `conformance server ARGS` against a fresh `toolgate-conformance serve` and judges it.
fn server_suite(args: &[&str]) -> (Vec<Check>, Verdict) {
    let server = HttpServer::start(CONFORMANCE, &[]);
    assert!(server.token.is_none(), "toolgate-conformance serve makes no bearer token:\n{}", server.banner);
    run_suite("server", &["server", "--url", &server.url], args)
}

/// Runs `conformance LEADING -o RESULTS ARGS` and judges its checks of `kind` (`server` or
/// `client`) against the baseline.
fn run_suite(kind: &str, leading: &[&str], args: &[&str]) -> (Vec<Check>, Verdict) {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    let out = suite(work.path())
        .env("RUST_BACKTRACE", "0")
        .args(leading)
        .arg("-o")
        .arg(&results)
        .args(args)
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(results.is_dir(), "the suite wrote no results ({}):\n{stdout}\n{stderr}", out.status);
    let checks = checks(&results, kind);
    let verdict = judge(&checks, &baseline(kind));
    report(&verdict, &stdout);
    (checks, verdict)
}

/// Prints the counts and warnings, and fails on unexpected failures or stale entries.
fn report(verdict: &Verdict, stdout: &str) {
    eprintln!(
        "conformance: {} checks passed, {} expected failures (baseline), {} warnings",
        verdict.passed,
        verdict.expected,
        verdict.warnings.len()
    );
    for warning in &verdict.warnings {
        eprintln!("  warning: {warning}");
    }
    let summary = stdout.split("=== SUMMARY ===").nth(1).unwrap_or(stdout);
    assert!(
        verdict.unexpected.is_empty(),
        "checks failed that tests/baseline.toml does not expect:\n  {}\n--- suite summary{summary}",
        verdict.unexpected.join("\n  ")
    );
    assert!(
        verdict.stale.is_empty(),
        "baseline entries that no longer fail (delete them from tests/baseline.toml): {}",
        verdict.stale.join(", ")
    );
}

/// Every server scenario, each at the protocol version the suite picks for it (2025-11-25, the
/// `initialize` handshake, for most; 2026-07-28 for the scenarios only that version has, and the
/// extensions).
#[test]
fn conformance_server_suite_all() {
    let (checks, verdict) = server_suite(&["--suite", "all"]);
    ran_every_baselined_scenario(&checks, "server", 60);
    assert!(verdict.passed >= 150, "only {} checks passed", verdict.passed);
}

/// The suite ran at least `at_least` scenarios, among them every one the `kind` baseline names
/// (an entry for a scenario that no longer exists would excuse nothing and never go stale).
fn ran_every_baselined_scenario(checks: &[Check], kind: &str, at_least: usize) {
    let scenarios: std::collections::BTreeSet<&str> = checks.iter().map(|c| c.scenario.as_str()).collect();
    assert!(scenarios.len() >= at_least, "the suite ran only {} scenarios: {scenarios:?}", scenarios.len());
    for entry in baseline(kind) {
        assert!(
            scenarios.contains(entry.scenario.as_str()),
            "baseline names a scenario the suite has not: {}",
            entry.scenario
        );
    }
}

/// Every server scenario that 2026-07-28 has, on its wire (`server/discover`, per-request
/// `_meta`, no sessions, `InputRequiredResult` instead of server-to-client requests).
#[test]
fn conformance_server_suite_2026_07_28() {
    let (checks, _) = server_suite(&["--suite", "all", "--spec-version", "2026-07-28"]);
    let scenarios: std::collections::BTreeSet<&str> = checks.iter().map(|c| c.scenario.as_str()).collect();
    assert!(scenarios.len() >= 35, "the suite ran only {} scenarios: {scenarios:?}", scenarios.len());
    assert!(scenarios.contains("server-stateless") && scenarios.contains("input-required-result-multi-round"));
}

/// Runs `conformance client ARGS` with `toolgate-conformance client` (the bridge driven through
/// a gate, `src/client.rs`) as the client, and judges it. The bridge's log (`TOOLGATE_LOG`,
/// default warn) lands in each scenario's stderr.txt.
fn client_suite(args: &[&str]) -> (Vec<Check>, Verdict) {
    let command = format!("{CONFORMANCE} client");
    run_suite("client", &["client", "--command", &command], args)
}

/// Every client scenario, each at the protocol version the suite picks for it, with toolgate's
/// bridge as the client.
#[test]
fn conformance_client_suite_all() {
    // Every scenario runs at once; a generous per-client timeout keeps a loaded CI machine from
    // turning slowness into failures (a passing client takes about a second).
    let (checks, _) = client_suite(&["--suite", "all", "--timeout", "90000"]);
    ran_every_baselined_scenario(&checks, "client", 40);
}

/// `toolgate-conformance serve` serves without a token, so it refuses any address but loopback.
#[test]
fn the_server_binds_loopback_only() {
    let ws = toolgate_testkit::serve::workspace();
    let out = std::process::Command::new(CONFORMANCE)
        .arg("--workspace")
        .arg(ws.path())
        .args(["serve", "--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "toolgate-conformance serve on 0.0.0.0 must not start:\n{stderr}");
    assert!(stderr.contains("loopback addresses only"), "{stderr}");
}

/// The judge itself: a new failure and a stale entry are both reported.
#[test]
fn the_baseline_judge_reports_new_failures_and_stale_entries() {
    let check = |scenario: &str, id: &str, status: &str| Check {
        scenario: scenario.into(),
        id: id.into(),
        status: status.into(),
        message: "m".into(),
    };
    let checks = vec![
        check("a", "a-1", "FAILURE"),
        check("b", "b-1", "FAILURE"),
        check("b", "b-2", "SUCCESS"),
        check("c", "c-1", "SUCCESS"),
        check("d", "d-1", "WARNING"),
    ];
    let entry = |scenario: &str, check: Option<&str>| Entry {
        scenario: scenario.into(),
        check: check.map(Into::into),
        flaky: false,
    };
    let flaky = Entry { flaky: true, ..entry("d", None) };
    let entries = vec![entry("a", None), entry("b", Some("b-2")), entry("c", None), entry("z", None), flaky];
    let verdict = judge(&checks, &entries);
    assert_eq!(verdict.expected, 1, "a:a-1 is covered by the whole-scenario entry");
    assert_eq!(verdict.unexpected, vec!["b:b-1: m".to_owned()], "a per-check entry covers only its check");
    assert_eq!(
        verdict.stale,
        vec!["b:b-2".to_owned(), "c".to_owned()],
        "z did not run, so it is not stale; d is flaky, so it never is"
    );
    assert_eq!(verdict.passed, 2);
    assert_eq!(verdict.warnings.len(), 1);
    // The real baseline parses and every entry says why.
    assert!(!baseline("server").is_empty());
}
