//! Two `toolgate serve` nodes on one PostgreSQL database (issue 29, `[store] url`): each node
//! has a workspace folder of its own (its own SQLite file for what stays local), so whatever
//! one node sees of the other's users, keys, grants, approvals and routines came through PostgreSQL, a
//! throwaway cluster of the tests' own (`toolgate_testkit::postgres`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_testkit::postgres::Cluster;
use toolgate_testkit::serve::HttpServer;

use crate::approvals_resume::{api, call, finish, pointed_at_inbox, start};
use crate::support::gateway::{Client, admin, heard};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// The key every node is given for the secrets they share (`TOOLGATE_SECRET_KEY`).
const SHARED_KEY: &str = "7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a";

/// A gateway workspace whose shared state is in the database at `url`.
pub(crate) fn node(url: &str) -> tempfile::TempDir {
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[gateway]\nenabled = true\nworkspaces = \"users\"\ndefault_tools = [\"write\"]\n\n[approval]\nwait_secs = 60\ntimeout_secs = 60\n\
         inbox_url = \"https://gate.example/approvals/{{id}}\"\n\n[store]\nurl = \"{url}\"\n"
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// The pending approvals node `server` lists to `key`, once there is one (30 s at most).
pub(crate) fn pending_on(server: &HttpServer, key: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = api(server, "GET", "/api/approvals", key, "");
        assert_eq!(status, 200, "{body}");
        if let Some(first) = body["pending"].as_array().and_then(|p| p.first()) {
            return first.clone();
        }
        assert!(Instant::now() < deadline, "nothing pending on the other node: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn lists_time(client: &Client<'_>) -> bool {
    client.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).contains(r#""name":"time""#)
}

/// Two nodes on one fresh cluster, serving with `env`, after ann and lee (an admin) were added
/// with node A's admin command: the cluster, the nodes, ann's and lee's keys.
pub(crate) fn two_nodes(env: &[(&str, &str)]) -> (Cluster, HttpServer, HttpServer, String, String) {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (node(&url), node(&url));
    admin(a.path(), &["user", "add", "ann"]);
    admin(a.path(), &["user", "add", "lee", "--admin"]);
    let ann = admin(a.path(), &["key", "create", "--user", "ann"]);
    let lee = admin(a.path(), &["key", "create", "--user", "lee"]);
    // People made with node A's admin command are node B's too.
    assert!(admin(b.path(), &["user", "list"]).contains("ann"), "B reads A's users");
    let a = HttpServer::start_with_env(TOOLGATE, a, &[], env);
    let b = HttpServer::start_with_env(TOOLGATE, b, &[], env);
    (cluster, a, b, ann, lee)
}

#[test]
fn two_nodes_share_users_keys_grants_and_approvals() {
    let (cluster, a, b, ann, lee) = two_nodes(&[]);

    // A call waiting on node A is decided on node B, and resumes on A, once.
    let waiting = start(&a, "legacy", &ann, "decided on the other node\n", None);
    let entry = pending_on(&b, &lee);
    assert_eq!(entry["tool"], "write", "{entry}");
    assert_eq!(entry["identity"]["user"], "ann", "{entry}");
    let path = format!("/api/approvals/{}", entry["id"]);
    let (status, body) = api(&b, "POST", &path, &lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 200, "{body}");
    let report = finish(waiting);
    assert_eq!((report["kind"].as_str(), report["is_error"].as_bool()), (Some("result"), Some(false)), "{report}");
    let written = std::fs::read_to_string(a.ws.path().join("users/ann/AGENTS.md")).unwrap();
    assert_eq!(written, "decided on the other node\n");
    assert!(!b.ws.path().join("users/ann/AGENTS.md").exists(), "the call ran on the node it was made to");
    // The same decision made again on A is refused: it was B's, and it is used.
    let (status, body) = api(&a, "POST", &path, &lee, r#"{"decision": "deny"}"#);
    assert_eq!(status, 409, "{body}");

    // A grant made on node B reaches a session open on node A (A reads the grants' revision
    // from the database every second) without a restart.
    let client = Client::connect(&a.url, &ann);
    assert!(!lists_time(&client), "time needs a grant");
    let mut stream = client.listen();
    let mut seen = String::new();
    admin(b.ws.path(), &["grant", "add", "--to", "ann", "--tool", "time"]);
    assert!(heard(&mut stream, &mut seen, "notifications/tools/list_changed", 1), "A not told of B's grant: {seen}");
    assert!(lists_time(&client), "B's grant applies on A");

    // The database goes away: each node says it is not ready, so a load balancer takes it out.
    assert_eq!(api(&a, "GET", "/readyz", "", "").0, 200);
    drop(cluster);
    for node in [&a, &b] {
        let (status, _) = api(node, "GET", "/readyz", "", "");
        assert_eq!(status, 503, "a node without its database is not ready");
    }
}

/// A 2026-07-28 client (stateless: any node may answer any request) is pointed at the inbox by
/// node A with a sealed `requestState`; the decision is made on node B, and the retry, sent to
/// B by the load balancer, resumes there: B opens a state A sealed, because the key ring is in
/// the shared database under the key both nodes are given.
#[test]
fn a_stateless_client_resumes_on_the_other_node() {
    let (cluster, a, b, ann, lee) = two_nodes(&[("TOOLGATE_SECRET_KEY", SHARED_KEY)]);

    let state = pointed_at_inbox(&call(&a, "2026-07-28", &ann, "resumed on B\n", None), 1);
    let (status, body) = api(&b, "POST", "/api/approvals/1", &lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 200, "{body}");
    let resumed = call(&b, "2026-07-28", &ann, "resumed on B\n", Some(&state));
    assert_eq!((resumed["kind"].as_str(), resumed["is_error"].as_bool()), (Some("result"), Some(false)), "{resumed}");
    assert_eq!(std::fs::read_to_string(b.ws.path().join("users/ann/AGENTS.md")).unwrap(), "resumed on B\n");
    // Used once, on whichever node: the same state sent to A asks anew (entry 2), runs nothing.
    pointed_at_inbox(&call(&a, "2026-07-28", &ann, "resumed on B\n", Some(&state)), 2);
    assert!(!a.ws.path().join("users/ann/AGENTS.md").exists());
    drop((a, b));
    drop(cluster);
}

/// A `[store] url` that names no PostgreSQL database, or one that cannot be reached, stops a
/// command at once with what was wrong.
#[test]
fn a_bad_store_url_is_a_clear_error() {
    let ws = toolgate_testkit::serve::workspace();
    let config = |url: &str| std::fs::write(ws.path().join("toolgate.toml"), format!("[store]\nurl = \"{url}\"\n"));
    let list_users = |ws: &Path| {
        std::process::Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws)
            .args(["admin", "user", "list"])
            .output()
            .unwrap()
    };
    config("mysql://db/toolgate").unwrap();
    let out = list_users(ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("expected a PostgreSQL URL"), "{err}");
    config("postgres://nobody@%2Fnonexistent%2Fsocket/toolgate").unwrap();
    let out = list_users(ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("PostgreSQL"), "{err}");
}

/// A node of its own workspace whose calls never ask (a routine's command writes a marker file
/// there, in the sandbox), with jobs and routines in the database at `url`.
fn scheduling_node(url: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let config = format!("[approval]\nmode = \"never\"\n\n[store]\nurl = \"{url}\"\n");
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// `toolgate call TOOL PARAMS` in `ws` (a process of its own, reading the shared database).
fn call_in(ws: &Path, tool: &str, params: Value) -> Value {
    let out = std::process::Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["call", tool, &params.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "toolgate call {tool}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.get("structured").cloned().unwrap_or(v)
}

/// Polls `routine_history` of `name` (read from the shared database through `ws`) until at
/// least `runs` fires are there and the newest one's job has ended (deadline `secs`).
fn fires_ended(ws: &Path, name: &str, runs: usize, secs: u64) -> Vec<Value> {
    let ended = |r: &Value| matches!(r["job"]["state"].as_str(), Some("completed" | "failed" | "cancelled"));
    let t = Instant::now();
    loop {
        let h = call_in(ws, "routine_history", json!({"name": name, "limit": 200}));
        let list = h["runs"].as_array().cloned().unwrap_or_default();
        if list.len() >= runs && list.first().is_some_and(ended) {
            return list;
        }
        assert!(t.elapsed() < Duration::from_secs(secs), "never {runs} ended fires: {h}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// How many fires node `ws` ran (its marker file's lines).
fn ran_on(ws: &Path) -> usize {
    std::fs::read_to_string(ws.join("fires.txt")).map(|t| t.lines().count()).unwrap_or(0)
}

/// When node `ws` last ran a fire (its marker file's last change), if ever.
fn last_ran(ws: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(ws.join("fires.txt")).and_then(|m| m.modified()).ok()
}

/// Kills `server` (SIGKILL: its scheduler lease is not released) and keeps its workspace.
fn kill_keeping_workspace(mut server: HttpServer) -> tempfile::TempDir {
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);
    ws
}

/// A cron routine with two nodes up fires once per minute, on one node (the scheduler lease's
/// holder); when that node is killed, the other takes the lease once it lapses and the next
/// minutes fire there: none lost, none run twice, on either node.
#[test]
fn a_routine_fires_once_per_minute_across_two_nodes_and_after_its_leader_is_killed() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (scheduling_node(&url), scheduling_node(&url));
    // Made by a command in A's workspace: B's node reads it from the database.
    call_in(
        a.path(),
        "routine_create",
        json!({"name": "minutely", "trigger_type": "cron", "schedule": "* * * * *", "timezone": "UTC",
               "prompt": "append a line", "action_type": "tool", "tool": "exec",
               "params": {"command": "echo fired >> fires.txt"}}),
    );
    let listed = call_in(b.path(), "routine_list", json!({}));
    assert!(listed.to_string().contains("minutely"), "B lists A's routine: {listed}");
    let (a, b) = (HttpServer::start_in(TOOLGATE, a, &[]), HttpServer::start_in(TOOLGATE, b, &[]));
    let (a_ws, b_ws) = (a.ws.path().to_owned(), b.ws.path().to_owned());

    // Two minutes with both nodes up.
    let before = fires_ended(&b_ws, "minutely", 2, 180);
    let (on_a, on_b) = (ran_on(&a_ws), ran_on(&b_ws));
    assert_eq!(on_a + on_b, before.len(), "each fire ran once, on one node: A {on_a}, B {on_b}: {before:?}");

    // The node that fired the last minute (its marker written last) holds the lease: killed,
    // the other fires the next minutes.
    let (survivor, _killed_ws) =
        if last_ran(&a_ws) > last_ran(&b_ws) { (b, kill_keeping_workspace(a)) } else { (a, kill_keeping_workspace(b)) };
    let survivor_before = ran_on(survivor.ws.path());
    let after = fires_ended(survivor.ws.path(), "minutely", before.len() + 1, 150);
    let survivor_ran = ran_on(survivor.ws.path()) - survivor_before;
    assert!(survivor_ran >= 1, "the surviving node fired nothing after the leader died: {after:?}");

    let mut minutes: Vec<i64> = after.iter().map(|r| r["scheduled_ms"].as_i64().unwrap()).collect();
    minutes.sort();
    for w in minutes.windows(2) {
        assert_eq!(w[1] - w[0], 60_000, "a minute lost or fired twice: {after:?}");
    }
    for r in &after {
        assert_eq!((r["status"].as_str(), r["job"]["state"].as_str()), (Some("started"), Some("completed")), "{r}");
    }
    // Every fire's command ran exactly once, on one node or the other.
    assert_eq!(ran_on(&a_ws) + ran_on(&b_ws), after.len(), "{after:?}");
    drop(survivor);
    drop(cluster);
}

/// `toolgate approvals list --json` on `ws`: the standing approvals ("allow always" grants).
fn standing_approvals(ws: &Path) -> Vec<Value> {
    let out = std::process::Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["approvals", "list", "--json"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A node killed in the middle of an approval (issue 29, "Bad input"): the call waiting on A
/// fails for its client when A dies (SIGKILL) and nothing runs. "Allow always" decided on B
/// afterwards is accepted whole: the decision and its standing grant, though no call is left to
/// use it; a second decision is refused. The client retrying on B runs once, there, under the
/// grant, and nothing is left waiting.
#[test]
fn a_node_killed_while_its_call_waits_for_approval_leaves_nothing_half_done() {
    let (cluster, a, b, ann, lee) = two_nodes(&[]);
    let waiting = start(&a, "legacy", &ann, "after A died\n", None);
    let entry = pending_on(&b, &lee);
    let path = format!("/api/approvals/{}", entry["id"]);
    let a_ws = kill_keeping_workspace(a);

    // The client is told, by its transport or an error result; never a success.
    let out = waiting.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Option<Value> = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok());
    assert!(
        !out.status.success() || report.as_ref().is_some_and(|r| r["is_error"] == true),
        "the client of a killed node saw: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!a_ws.path().join("users/ann/AGENTS.md").exists(), "nothing ran on A");

    // Decided on B after A died: accepted, entry and grant whole, nothing run by the decision.
    assert!(standing_approvals(b.ws.path()).is_empty());
    let (status, body) = api(&b, "POST", &path, &lee, r#"{"decision": "allow_always"}"#);
    assert_eq!(status, 200, "{body}");
    let (_, shown) = api(&b, "GET", &path, &lee, "");
    assert_eq!(shown["approval"]["status"], "allowed_always", "{shown}");
    assert!(shown["approval"]["used_ms"].is_null(), "no call has used it: {shown}");
    let grants = standing_approvals(b.ws.path());
    assert_eq!(grants.len(), 1, "the grant was made with the decision: {grants:?}");
    assert_eq!((grants[0]["user"].as_str(), grants[0]["tool"].as_str()), (Some("ann"), Some("write")), "{grants:?}");
    assert!(!b.ws.path().join("users/ann/AGENTS.md").exists(), "a decision runs nothing by itself");
    let (status, body) = api(&b, "POST", &path, &lee, r#"{"decision": "deny"}"#);
    assert_eq!(status, 409, "the first decision stands: {body}");

    // The client retries on B: the standing approval covers it, so the call runs there, once.
    let report = call(&b, "legacy", &ann, "after A died\n", None);
    assert_eq!((report["kind"].as_str(), report["is_error"].as_bool()), (Some("result"), Some(false)), "{report}");
    assert_eq!(std::fs::read_to_string(b.ws.path().join("users/ann/AGENTS.md")).unwrap(), "after A died\n");
    assert_eq!(standing_approvals(b.ws.path()).len(), 1, "still the one grant");
    let (_, pending) = api(&b, "GET", "/api/approvals", &lee, "");
    assert_eq!(pending["pending"], json!([]), "nothing left waiting: {pending}");
    drop((a_ws, b));
    drop(cluster);
}

/// A gateway workspace whose users run commands (`exec`, `process`) without being asked, with
/// its shared state in the database at `url`: the one workspace both nodes serve, as nodes
/// behind a load balancer mount one filesystem. The browser may open `page` (on loopback). Its
/// callers speak OpenClaw's tool language (`[gate] dialect`), which renames `process`'s and
/// `browser`'s parameters.
fn commands_node(url: &str, page: std::net::SocketAddr) -> tempfile::TempDir {
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[gate]\ndialect = \"openclaw\"\n\n\
         [gateway]\nenabled = true\nworkspaces = \"users\"\ndefault_tools = [\"exec\", \"process\", \"browser\"]\n\n\
         [approval]\nmode = \"never\"\n\n[web]\nallow_private = [\"{page}\"]\n\n[store]\nurl = \"{url}\"\n"
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// One `tools/call` of `tool` with `key` on `server`: whether it is an error, and its text.
pub(crate) fn tool_call(server: &HttpServer, key: &str, tool: &str, arguments: Value) -> (bool, String) {
    tool_call_at(&server.url, key, tool, arguments)
}

/// [`tool_call`] to the server at `url` (from a thread of its own).
pub(crate) fn tool_call_at(url: &str, key: &str, tool: &str, arguments: Value) -> (bool, String) {
    let client = Client::connect(url, key);
    let request =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let answer = client.send(&request.to_string());
    // The body is JSON or an event stream: the line that holds the JSON-RPC answer.
    let message = answer
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.strip_prefix("data: ").unwrap_or(l)).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to {tool}: {answer}"));
    let result = &message["result"];
    let text = result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
    (result["isError"].as_bool().unwrap_or(false), text)
}

/// The id starting with `prefix` in `text`.
/// One value `sql` selects in the database at `url`, as `psql` prints it unaligned.
pub(crate) fn query(url: &str, sql: &str) -> String {
    let out =
        std::process::Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql]).output().unwrap();
    assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub(crate) fn id_in(text: &str, prefix: &str) -> String {
    let id = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).find(|w| w.starts_with(prefix));
    id.unwrap_or_else(|| panic!("no {prefix} id in {text}")).to_owned()
}

/// A background process and a browser session (real Chromium) started by ann through node A,
/// used, listed and stopped through node B: B sends each call to A as ann (a key of hers made
/// for the call, limited to the tool, revoked once answered), so A's gate runs it and A's answer
/// comes back; bob, asking B about ann's ids, hears what an unknown id
/// gets; a forged session id reaches no node; once A is killed, B says A is down.
///
/// A and C speak OpenClaw's language (`sessionId`, `targetUrl`; no `id`, `url`, `session` or
/// `via`), B toolgate's (`--dialect toolgate`: `browser`'s `session` is toolgate's own): a
/// forwarded call is read canonically by its owner whatever the owner's dialect, from B and from
/// C alike, and only because the key it came with was made by a node for it: ann's own key
/// sending A the canonical call marked `via` is read in OpenClaw's words and refused.
#[test]
fn a_background_process_and_a_browser_session_started_on_one_node_are_reached_through_the_other() {
    let page = crate::support::pages::serve("<title>Node page</title><h1>Served to node A</h1>");
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = commands_node(&url, page);
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let a = HttpServer::start_with_env(TOOLGATE, ws, &[], &[]);
    let b = HttpServer::start_beside_with(TOOLGATE, &a, &["--dialect", "toolgate"], &[]);

    let (failed, started) =
        tool_call(&a, &ann, "exec", json!({"command": "echo ready; sleep 120", "background": true}));
    assert!(!failed, "{started}");
    let id = id_in(&started, "tg-proc-");

    // Polled through B: the output comes from the process on A, and is A's to hand out once.
    let (failed, on_b) = tool_call(&b, &ann, "process", json!({"action": "poll", "id": id, "wait": 10}));
    assert!(!failed && on_b.contains("running") && on_b.contains("ready"), "B forwards to A: {on_b}");
    let (failed, on_a) = tool_call(&a, &ann, "process", json!({"action": "poll", "sessionId": id}));
    assert!(!failed && on_a.contains("no new output"), "the poll through B took it from A: {on_a}");
    // Ann's own key, sending A the call as a node would (canonical, marked `via`), is read in
    // A's dialect like any call of hers: only a key a node made carries a forwarded call.
    let (failed, forged) = tool_call(&a, &ann, "process", json!({"action": "poll", "id": id, "via": "b"}));
    assert!(failed && forged.contains("unknown parameter `id`") && forged.contains("`sessionId`"), "{forged}");
    // From C, in OpenClaw's words on both sides: C reads `sessionId`, A the canonical call.
    let c = HttpServer::start_beside(TOOLGATE, &a, &[]);
    let (failed, on_c) = tool_call(&c, &ann, "process", json!({"action": "poll", "sessionId": id, "timeout": 100}));
    assert!(!failed && on_c.contains("running"), "C forwards to A: {on_c}");
    drop(c);
    let (_, listed) = tool_call(&b, &ann, "process", json!({"action": "list"}));
    assert!(listed.contains(&id) && listed.contains(&a.url), "B lists it on A: {listed}");
    let (failed, log) = tool_call(&b, &ann, "process", json!({"action": "log", "id": id}));
    assert!(!failed && log.contains("ready"), "the log is on the shared filesystem: {log}");

    // Bob, on B, with ann's id: the same "not found" as an id nobody had, no node, no URL, and
    // nothing sent to A.
    let (_, unknown) =
        tool_call(&b, &bob, "process", json!({"action": "poll", "id": "tg-proc-0123456789abcdef0123-abcd"}));
    let (failed, bobs) = tool_call(&b, &bob, "process", json!({"action": "kill", "id": id}));
    assert!(failed && bobs.contains("not found") && !bobs.contains(&a.url), "{bobs}");
    assert_eq!(bobs.replace(&id, "ID"), unknown.replace("tg-proc-0123456789abcdef0123-abcd", "ID"));

    // Killed through B, on A.
    let (failed, killed) = tool_call(&b, &ann, "process", json!({"action": "kill", "id": id}));
    assert!(!failed && killed.contains("killed"), "{killed}");
    let (_, on_a) = tool_call(&a, &ann, "process", json!({"action": "poll", "sessionId": id}));
    assert!(on_a.contains("killed"), "{on_a}");

    // Two browser sessions of ann's on A (each connection has its own), one used through B:
    // the page opens in A's Chromium, and the next snapshot of it shows the same page (an
    // OpenClaw caller cannot name a session: this one is B's caller's again, through A).
    let (failed, started) = tool_call(&a, &ann, "browser", json!({"action": "start"}));
    assert!(!failed, "{started}");
    let session = id_in(&started, "tg-browser-");
    let (_, other) = tool_call(&a, &ann, "browser", json!({"action": "start"}));
    let other = id_in(&other, "tg-browser-");
    let go = json!({"action": "navigate", "session": session, "url": format!("http://{page}/"), "snapshot": true});
    let (failed, on_b) = tool_call(&b, &ann, "browser", go);
    assert!(!failed && on_b.contains("Opened http://127.0.0.1") && on_b.contains("Served to node A"), "{on_b}");
    let (failed, on_a) = tool_call(&b, &ann, "browser", json!({"action": "snapshot", "session": session}));
    assert!(!failed && on_a.contains("heading \"Served to node A\""), "the page is A's: {on_a}");
    // Listed on B with their node; one stopped through B is gone from the list.
    let (failed, stopped) = tool_call(&b, &ann, "browser", json!({"action": "stop", "session": other}));
    assert!(!failed && stopped.contains("stopped"), "{stopped}");
    let (_, listed) = tool_call(&b, &ann, "browser", json!({"action": "sessions"}));
    assert!(listed.contains(&session) && listed.contains(&a.url) && !listed.contains(&other), "{listed}");
    // Bob's call naming ann's session: "not found", no node; a forged id is refused before
    // any lookup.
    let (failed, bobs) = tool_call(&b, &bob, "browser", json!({"action": "snapshot", "session": session}));
    assert!(failed && bobs.contains("not found") && !bobs.contains(&a.url), "{bobs}");
    let (failed, forged) =
        tool_call(&b, &ann, "browser", json!({"action": "snapshot", "session": "tg-browser-../../admin"}));
    assert!(failed && forged.contains("tg-browser-` and 32 hex digits"), "{forged}");

    // Each forwarded call was ann's own, limited to its tool, and none is left working.
    let keys = admin(a.ws.path(), &["key", "list", "--user", "ann", "--json"]);
    let keys: Vec<Value> = keys.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let forwarded: Vec<&Value> =
        keys.iter().filter(|k| k["note"].as_str().unwrap_or("").contains("forwarded")).collect();
    // The polls (B's and C's) and the kill (list and log are answered on B), the navigation,
    // the snapshot and the stop; each says which node forwarded it, which only a node's key can.
    let tools: Vec<&Value> = forwarded.iter().map(|k| &k["scope"]["tools"]).collect();
    assert_eq!(tools.iter().filter(|t| **t == &json!(["process"])).count(), 3, "{keys:?}");
    assert_eq!(tools.iter().filter(|t| **t == &json!(["browser"])).count(), 3, "{keys:?}");
    assert_eq!(forwarded.len(), 6, "{keys:?}");
    for k in &forwarded {
        assert_eq!(k["state"].as_str(), Some("revoked"), "{k}");
        assert!(k["scope"]["forwarded_by"].as_str().is_some_and(|n| !n.is_empty()), "{k}");
    }
    assert!(keys.iter().filter(|k| k["scope"].get("forwarded_by").is_some()).count() == 6, "{keys:?}");
    // The navigation through B is audited on both sides, in the shared log: B's row for the
    // call it forwarded, A's for the call it ran (marked `via` B). The writers are batched, so
    // this waits (bounded) for both rows.
    let rows = "SELECT count(*) FILTER (WHERE params NOT LIKE '%\"via\"%') || ' ' || \
                count(*) FILTER (WHERE params LIKE '%\"via\"%') \
                FROM audit WHERE tool = 'browser' AND params LIKE '%navigate%' AND outcome = 'ok'";
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut both = query(&url, rows);
    while both != "1 1" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        both = query(&url, rows);
    }
    assert_eq!(both, "1 1", "rows of the forwarded navigation (on B, then on A via B)");

    // A dies: B says the node that holds the process is down, at once.
    let a_url = a.url.clone();
    let _ws = kill_keeping_workspace(a);
    let (failed, down) = tool_call(&b, &ann, "process", json!({"action": "poll", "id": id}));
    assert!(failed && down.contains(&a_url) && down.contains("down or unreachable"), "{down}");
    let (failed, down) = tool_call(&b, &ann, "browser", json!({"action": "snapshot", "session": session}));
    assert!(failed && down.contains(&a_url) && down.contains("down or unreachable"), "{down}");
    assert!(down.contains(&format!("browser session {session}")), "{down}");
    drop(b);
    drop(cluster);
}

/// A managed note ann writes through node A is found by `memory_search` and read through node B:
/// the memory index is in the shared database (the workspace's own SQLite index holds no note).
#[test]
fn a_managed_note_written_on_one_node_is_found_on_the_other() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[gateway]\nenabled = true\ndefault_tools = [\"memory_write\", \"memory_search\", \"memory_read\"]\n\n\
         [approval]\nmode = \"never\"\n\n[memory]\nmode = \"managed\"\n\n[memory.embeddings]\nprovider = \"none\"\n\n\
         [store]\nurl = \"{url}\"\n"
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let a = HttpServer::start_with_env(TOOLGATE, ws, &[], &[]);
    let b = HttpServer::start_beside(TOOLGATE, &a, &[]);

    let note = json!({"target": "memory/trip.md", "content": "The flight to Lisbon launches at nine."});
    let (failed, wrote) = tool_call(&a, &ann, "memory_write", note);
    assert!(!failed, "{wrote}");
    let (failed, found) = tool_call(&b, &ann, "memory_search", json!({"query": "when does the Lisbon flight launch?"}));
    assert!(!failed && found.contains("memory/trip.md"), "B finds A's note: {found}");
    let (failed, read) = tool_call(&b, &ann, "memory_read", json!({"path": "memory/trip.md"}));
    assert!(!failed && read.contains("launches at nine"), "{read}");
    let (_, bobs) = tool_call(&b, &bob, "memory_search", json!({"query": "Lisbon flight"}));
    assert!(!bobs.contains("memory/trip.md"), "another user's notes stay theirs: {bobs}");
    let local = toolgate::store::memory::MemoryIndex::open(Some(&a.ws.path().join(".toolgate/state.db"))).unwrap();
    assert_eq!(local.health().unwrap().notes, 0, "the note is in PostgreSQL, not the workspace's file");
    drop((a, b));
    drop(cluster);
}
