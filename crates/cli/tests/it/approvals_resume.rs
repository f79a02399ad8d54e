//! A team gateway's approvals as its users meet them (issue 28, item 6 and its "Bad input"):
//! a 2026-07-28 MCP client (the official Python SDK 2.3.0 in `mode="2026-07-28"`: stateless, no
//! `initialize`, no session id) is pointed at the inbox with a URL-mode elicitation and a sealed
//! `requestState`, and resumes from a decision made from the CLI after `toolgate serve`
//! restarted; the state replayed by another user's key, with other arguments, changed, used up or
//! after its expiry is refused. An entry that expires while a (handshake-era) call waits denies
//! it, and a decision after the expiry gets 410, also when the expiry was already past when the
//! entry arrived (a node whose clock is behind). The client is
//! `crates/cli/tests/python/approvals_request_state.py`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate_testkit::serve::HttpServer;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `toolgate --workspace WS ARGS`: whether it succeeded, and stdout with stderr.
fn cli(ws: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// A gateway workspace (per-user workspaces, `[approval]` `extra`) with ann, bob and lee (an
/// admin); their keys.
fn gateway(extra: &str) -> (tempfile::TempDir, [String; 3]) {
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[approval]\n\
         inbox_url = \"https://gate.example/approvals/{{id}}\"\n{extra}"
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    let keys = ["ann", "bob", "lee"].map(|u| admin(ws.path(), &["key", "create", "--user", u]));
    (ws, keys)
}

/// Starts the client: `mode` is `2026-07-28` or `legacy`; `state` makes the call a retry.
pub(crate) fn start(server: &HttpServer, mode: &str, key: &str, content: &str, state: Option<&str>) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/approvals_request_state.py");
    Command::new(python::sdk_python())
        .arg(script)
        .args([mode, &server.url, key, content])
        .args(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The client's report (the JSON on its last line).
pub(crate) fn finish(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{stderr}"))
}

pub(crate) fn call(server: &HttpServer, mode: &str, key: &str, content: &str, state: Option<&str>) -> Value {
    finish(start(server, mode, key, content, state))
}

/// A 2026-07-28 call's first answer: the URL elicitation for entry `id`; its `requestState`.
pub(crate) fn pointed_at_inbox(report: &Value, id: i64) -> String {
    assert_eq!(report["kind"], "input_required", "{report}");
    assert_eq!(report["mode"], "url", "{report}");
    assert_eq!(report["url"], format!("https://gate.example/approvals/{id}"), "{report}");
    assert!(report["message"].as_str().unwrap().contains(&format!("waits for approval {id}")), "{report}");
    // Stateless: one `tools/call`, no handshake, and the server never named a session.
    assert_eq!(report["methods"], serde_json::json!(["tools/call"]), "{report}");
    assert_eq!(report["sessions"], serde_json::json!([]), "{report}");
    report["state"].as_str().unwrap().to_owned()
}

fn refused(report: &Value, why: &str) {
    assert_eq!(report["kind"], "result", "{report}");
    assert_eq!(report["is_error"], true, "{report}");
    assert!(report["text"].as_str().unwrap().contains(why), "expected `{why}`: {report}");
}

/// `GET`/`POST` on the server's `/api/` with `key`: the status and the JSON body.
pub(crate) fn api(server: &HttpServer, method: &str, path: &str, key: &str, body: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let json = out.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok()).unwrap_or(Value::Null);
    (status, json)
}

/// Waits (up to a minute) until `toolgate approvals pending` lists `n` entries.
fn wait_pending(ws: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, out) = cli(ws, &["approvals", "pending", "--json"]);
        assert!(ok, "{out}");
        if out.lines().filter(|l| l.starts_with('{')).count() >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} pending entries never appeared:\n{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Restarts `server` on the same workspace (a new process, a new port).
fn restart(mut server: HttpServer) -> HttpServer {
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);
    HttpServer::start_in(TOOLGATE, ws, &[])
}

#[test]
fn a_2026_07_28_client_resumes_from_a_decision_made_after_a_restart() {
    let (ws, [ann, bob, _lee]) = gateway("");
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let first = call(&server, "2026-07-28", &ann, "approved after a restart\n", None);
    let state = pointed_at_inbox(&first, 1);
    assert!(!server.ws.path().join("users/ann/AGENTS.md").exists(), "nothing ran yet");

    // The server restarts; the entry and the key that sealed the state are in the database.
    let server = restart(server);
    let ws = server.ws.path();
    let (ok, out) = cli(ws, &["approvals", "pending"]);
    assert!(ok && out.contains("    1  pending") && out.contains("ann"), "still pending after a restart:\n{out}");
    let (ok, out) = cli(ws, &["approvals", "approve", "1", "--as", "lee"]);
    assert!(ok && out.contains("allowed by lee"), "{out}");

    // The state is ann's, for these arguments, and exactly as sealed: anything else is refused
    // and uses nothing up.
    let by_bob = call(&server, "2026-07-28", &bob, "approved after a restart\n", Some(&state));
    refused(&by_bob, "the requestState belongs to another caller; call again without it");
    assert!(!ws.join("users/bob/AGENTS.md").exists());
    let changed_args = call(&server, "2026-07-28", &ann, "something else\n", Some(&state));
    refused(&changed_args, "the requestState was issued for other arguments");
    let mut flipped = state.clone().into_bytes();
    flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let forged = call(&server, "2026-07-28", &ann, "approved after a restart\n", Some(&flipped));
    refused(&forged, "the requestState is not one this server issued (or it was changed)");
    assert!(!ws.join("users/ann/AGENTS.md").exists(), "no refused retry ran");

    // Ann's retry with her state resumes from the decision and runs, once.
    let resumed = call(&server, "2026-07-28", &ann, "approved after a restart\n", Some(&state));
    assert_eq!(resumed["kind"], "result", "{resumed}");
    assert_eq!(resumed["is_error"], false, "{resumed}");
    let written = std::fs::read_to_string(ws.join("users/ann/AGENTS.md")).unwrap();
    assert_eq!(written, "approved after a restart\n");
    let again = call(&server, "2026-07-28", &ann, "approved after a restart\n", Some(&state));
    pointed_at_inbox(&again, 2);
    let (ok, out) = cli(ws, &["approvals", "show", "1"]);
    assert!(ok && out.contains("used"), "the decision was used by one call:\n{out}");
    let audit = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.join("users/ann"))
        .args(["audit", "--json", "--tail", "100"])
        .output()
        .unwrap();
    let runs = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["tool"] == "write" && r["user"] == "ann" && r["outcome"] == "ok")
        .count();
    assert_eq!(runs, 1, "one write ran:\n{}", String::from_utf8_lossy(&audit.stdout));
}

#[test]
fn an_entry_that_expires_denies_its_call_and_refuses_a_late_decision() {
    // Entries expire after 2 s; a handshake-era call would wait a minute.
    let (ws, [ann, _bob, lee]) = gateway("expires_secs = 2\nwait_secs = 60\ntimeout_secs = 60\n");
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path();
    let waited = call(&server, "legacy", &ann, "never decided\n", None);
    refused(&waited, "approval 1 expired before anyone decided it");
    assert!(!ws.join("users/ann/AGENTS.md").exists());
    let (ok, out) = cli(ws, &["approvals", "approve", "1", "--as", "lee"]);
    assert!(!ok && out.contains("approval 1 expired"), "{out}");
    let (status, body) = api(&server, "POST", "/api/approvals/1", &lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 410, "{body}");
    assert!(body["error"].as_str().unwrap().contains("expired"), "{body}");

    // A requestState does not outlive its entry: its retry after the expiry is refused.
    let state = pointed_at_inbox(&call(&server, "2026-07-28", &ann, "late\n", None), 2);
    let (status, body) = api(&server, "GET", "/api/approvals/2", &lee, "");
    assert_eq!(status, 200, "{body}");
    let expires_ms = body["approval"]["expires_ms"].as_i64().unwrap();
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    while now_ms() <= expires_ms + 100 {
        std::thread::sleep(Duration::from_millis(100));
    }
    refused(
        &call(&server, "2026-07-28", &ann, "late\n", Some(&state)),
        "the requestState expired; call again without it",
    );
    let (status, _) = api(&server, "POST", "/api/approvals/2", &lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 410);
    assert!(!ws.join("users/ann/AGENTS.md").exists(), "nothing ran");
}

#[test]
fn an_entry_whose_expiry_is_already_past_on_arrival_is_expired() {
    let (ws, [ann, _bob, lee]) = gateway("wait_secs = 60\ntimeout_secs = 60\n");
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path();
    let waiting = start(&server, "legacy", &ann, "skewed\n", None);
    wait_pending(ws, 1);
    // As another node on the same database would write it with its clock a minute behind: the
    // entry arrives with its expiry already past.
    let db = rusqlite::Connection::open(ws.join(".toolgate/state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute(
        "UPDATE approvals SET created_ms = created_ms - 3660000, expires_ms = created_ms - 60000 WHERE id = 1",
        [],
    )
    .unwrap();
    drop(db);
    // The decision is refused (no 200 for an expired entry, whatever its status says) and the
    // waiting call is denied, not run.
    let (status, body) = api(&server, "POST", "/api/approvals/1", &lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 410, "{body}");
    refused(&finish(waiting), "approval 1 expired before anyone decided it");
    assert!(!ws.join("users/ann/AGENTS.md").exists());
    let (ok, out) = cli(ws, &["approvals", "history", "--status", "expired"]);
    assert!(ok && out.contains("    1  expired"), "{out}");
}

/// The pending entries `toolgate approvals pending --json` lists, once there are `n` (a minute
/// at most).
async fn pending_entries(ws: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, out) = cli(ws, &["approvals", "pending", "--json"]);
        assert!(ok, "{out}");
        let entries: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        if entries.len() >= n {
            return entries;
        }
        assert!(Instant::now() < deadline, "{n} pending entries never appeared:\n{out}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Seed 004 §9's batch through the binary: the model's one turn asks for two writes that each
/// need approval (an agent run started over MCP on `toolgate serve --http`, the model a scripted
/// server); both inbox entries are pending at once, with the turn's batch; they are decided per
/// call from the CLI, the second first (approved) and then the first (denied); the second still
/// runs only after the first is answered (the model's order), and the turn goes on to the
/// model's next request with both answers, without being restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_turn_form_a_batch_decided_per_call() {
    use crate::support::scripted::{Scripted, answer, calls};
    use serde_json::json;

    let model = Scripted::start(vec![
        calls(&[
            ("write", json!({"path": "AGENTS.md", "content": "denied\n"})),
            ("write", json!({"path": "CLAUDE.md", "content": "approved\n"})),
        ]),
        answer("one written, one refused"),
    ])
    .await;
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[providers.local]\nbase_url = {:?}\nmax_retries = 1\n\n[agents.main]\nprovider = \"local\"\nmodel = \"m\"\n\
         description = \"writes files\"\n",
        model.url
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_call.py");
    let run = tokio::process::Command::new(python::sdk_python())
        .arg(script)
        .args([&server.url, server.token.as_deref().unwrap(), "subagents"])
        .arg(json!({"action": "run", "task": "write the two instruction files"}).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Both wait at once, before anyone decided anything.
    let both = pending_entries(ws, 2).await;
    let entry = |path: &str| both.iter().find(|e| e["shown"]["params"]["path"] == path).cloned().unwrap();
    let (first, second) = (entry("AGENTS.md"), entry("CLAUDE.md"));
    let batch = first["batch"].as_str().expect("the turn's batch").to_owned();
    assert_eq!(second["batch"], batch, "one turn, one batch");
    let (ok, out) = cli(ws, &["approvals", "approve", &second["id"].to_string(), "--as", "ops"]);
    assert!(ok, "{out}");
    // Approved, but its turn has not come: the first call is not answered yet.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!ws.join("CLAUDE.md").exists(), "the second call ran before the first was answered");
    let (ok, out) = cli(ws, &["approvals", "deny", &first["id"].to_string(), "-m", "not this one", "--as", "ops"]);
    assert!(ok, "{out}");

    let out = run.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(report["text"].as_str().unwrap().contains("one written, one refused"), "{report}");
    assert_eq!(std::fs::read_to_string(ws.join("CLAUDE.md")).unwrap(), "approved\n");
    assert!(!ws.join("AGENTS.md").exists(), "the denied call did not run");
    // Two model requests: the turn was not restarted; its second carries both answers.
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let tools: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools[0].contains("not approved") && tools[0].contains("not this one"), "{tools:?}");
    assert!(tools[1].contains("CLAUDE.md") && !tools[1].contains("not approved"), "{tools:?}");
    let (ok, out) = cli(ws, &["approvals", "history", "--json"]);
    assert!(ok, "{out}");
    let rows: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(rows.len() == 2 && rows.iter().all(|r| r["batch"] == batch), "{out}");
}

/// A loopback address nothing listens on (a webhook that is down).
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/hook")
}

/// `[approval] no_self_approval`, "allow always" and a notification that fails (seed 003),
/// through the binary: ann cannot decide her own call; lee's "always" runs it and her next
/// identical call without asking, but not bob's; the webhook being down is recorded on the
/// entry; with `notify_fallback_secs` the entry nobody could be told of is denied.
#[test]
fn no_self_approval_allow_always_and_a_failed_notification() {
    let config = format!(
        "no_self_approval = true\nwait_secs = 60\ntimeout_secs = 60\nnotify_url = {:?}\nnotify_fallback_secs = 0\n",
        closed_url()
    );
    let (ws, [ann, bob, _lee]) = gateway(&config);
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path();
    let waiting = start(&server, "legacy", &ann, "always\n", None);
    wait_pending(ws, 1);
    let (ok, out) = cli(ws, &["approvals", "approve", "1", "--as", "ann"]);
    assert!(!ok && out.contains("another person must decide it (no self-approval)"), "{out}");
    // The webhook is down: that is on the entry (the fallback is off: it waits for a person).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out) = cli(ws, &["approvals", "show", "1"]);
        assert!(ok, "{out}");
        if out.contains("\"notify_error\": \"") {
            break;
        }
        assert!(Instant::now() < deadline, "the failed notification was never recorded:\n{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, out) = cli(ws, &["approvals", "approve", "1", "--always", "--as", "lee"]);
    assert!(ok, "{out}");
    let ran = finish(waiting);
    assert_eq!(ran["is_error"], false, "{ran}");
    // The grant is kept in the gateway's grant store (one store, out of the users' tools'
    // reach), not in ann's workspace database.
    let (ok, grants) = cli(ws, &["approvals", "list"]);
    assert!(ok && grants.contains("write") && grants.contains("ann"), "{grants}");
    let (ok, own) = cli(&ws.join("users/ann"), &["approvals", "list"]);
    assert!(ok && !own.contains("write"), "{own}");
    // Standing approval: ann's identical call runs at once, and nothing new is pending. (The
    // file is removed first: rewriting it would need a `read` in the session.)
    std::fs::remove_file(ws.join("users/ann/AGENTS.md")).unwrap();
    let again = call(&server, "legacy", &ann, "always\n", None);
    assert_eq!(again["is_error"], false, "{again}");
    let (_, pending) = cli(ws, &["approvals", "pending", "--json"]);
    assert!(pending.lines().all(|l| !l.starts_with('{')), "{pending}");
    // It is ann's: bob's identical call waits for a decision of its own.
    let bobs = start(&server, "legacy", &bob, "always\n", None);
    wait_pending(ws, 1);
    let (ok, out) = cli(ws, &["approvals", "deny", "2", "-m", "ann's grant is not yours", "--as", "lee"]);
    assert!(ok, "{out}");
    refused(&finish(bobs), "ann's grant is not yours");
    assert!(!ws.join("users/bob/AGENTS.md").exists());
    drop(server);

    // With a fallback: nobody could be told, so after 2 s the entry is denied.
    let config =
        format!("wait_secs = 60\ntimeout_secs = 60\nnotify_url = {:?}\nnotify_fallback_secs = 2\n", closed_url());
    let (ws, [ann, _bob, _lee]) = gateway(&config);
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let denied = call(&server, "legacy", &ann, "nobody was told\n", None);
    refused(&denied, "nobody could be notified");
    let (ok, out) = cli(server.ws.path(), &["approvals", "history", "--status", "denied", "--json"]);
    assert!(ok && out.contains("\"decided_by\":\"toolgate\"") && out.contains("notify_error"), "{out}");
    assert!(!server.ws.path().join("users/ann/AGENTS.md").exists());
}

/// Seed 003's fallback outlives the server that armed it: the webhook is down, the server
/// restarts before the fallback is due, and the entry is still denied at its instant (the
/// instant is stored on the entry, not kept in a timer of the process that died); the
/// 2026-07-28 client's retry gets the denial.
#[test]
fn a_notification_fallback_armed_before_a_restart_still_denies() {
    let config =
        // 8 s: the restart below must end before the fallback is due, also on a loaded machine
        // (with 3 s, a slow restart once found the entry already denied).
        format!("wait_secs = 60\ntimeout_secs = 60\nnotify_url = {:?}\nnotify_fallback_secs = 8\n", closed_url());
    let (ws, [ann, _bob, _lee]) = gateway(&config);
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let first = call(&server, "2026-07-28", &ann, "nobody was told\n", None);
    let state = pointed_at_inbox(&first, 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cli(server.ws.path(), &["approvals", "show", "1"]).1.contains("\"notify_error\": \"") {
        assert!(Instant::now() < deadline, "the failed notification was never recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let server = restart(server);
    let ws = server.ws.path();
    let (_, out) = cli(ws, &["approvals", "show", "1"]);
    assert!(out.contains("pending") && out.contains("fallback_ms"), "not due yet:\n{out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let (ok, out) = cli(ws, &["approvals", "show", "1"]);
        assert!(ok, "{out}");
        if !out.contains("\"status\": \"pending\"") {
            break out;
        }
        assert!(Instant::now() < deadline, "the fallback never denied entry 1 after the restart:\n{out}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(out.contains("\"status\": \"denied\"") && out.contains("\"decided_by\": \"toolgate\""), "{out}");
    let retried = call(&server, "2026-07-28", &ann, "nobody was told\n", Some(&state));
    refused(&retried, "nobody could be notified");
    assert!(!ws.join("users/ann/AGENTS.md").exists(), "the denied call never ran");
}
