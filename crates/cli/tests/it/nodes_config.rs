//! The configuration several nodes share (issue 29 item 2, `toolgate::shared_config`): with
//! `[store] url`, `gateway config_apply` on one node stores the patch in PostgreSQL and every node
//! puts it in force; a node started later loads it; a bad policy pushed is refused whole; a
//! notification lost while a node's `LISTEN` connection is down is caught up when it reads the
//! revision again; `admin config clear` sends every node back to its own files. Real `toolgate serve` processes on a throwaway cluster, as `nodes_shared`.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_testkit::serve::HttpServer;

use crate::approvals_resume::api;
use crate::nodes_shared::{node, pending_on, tool_call, tool_call_at, two_nodes};
use crate::support::gateway::admin;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// Waits for `done`: a bound on liveness (what never happens fails after it), not on speed.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether ann's `echo` runs on `server`.
fn echo_runs(server: &HttpServer, ann: &str) -> bool {
    let (error, text) = tool_call(server, ann, "echo", json!({"message": "hi"}));
    !error && text.contains("hi")
}

/// `gateway config_apply` of `patch` by lee on `server`, approved by lee through the same node's
/// approvals API (it always asks a person): the answer.
fn apply(server: &HttpServer, lee: &str, patch: &str) -> (bool, String) {
    let (url, key) = (server.url.clone(), lee.to_owned());
    let arguments = json!({"action": "config_apply", "patch": patch});
    let applying = std::thread::spawn(move || tool_call_at(&url, &key, "gateway", arguments));
    let entry = pending_on(server, lee);
    assert_eq!(entry["tool"], "gateway", "{entry}");
    let (status, body) =
        api(server, "POST", &format!("/api/approvals/{}", entry["id"]), lee, r#"{"decision": "allow_once"}"#);
    assert_eq!(status, 200, "{body}");
    applying.join().unwrap()
}

/// The MCP servers in force on `server`, as `gateway config_get` shows them to lee.
fn mcp_servers(server: &HttpServer, lee: &str) -> Vec<String> {
    let (error, text) = tool_call(server, lee, "gateway", json!({"action": "config_get"}));
    assert!(!error, "{text}");
    let config: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    config["mcp"]["servers"].as_object().map(|s| s.keys().cloned().collect()).unwrap_or_default()
}

/// `toolgate admin config ARGS` in `ws`: whether it succeeded, stdout and stderr.
fn admin_config(ws: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).args(["admin", "config"]).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The `[store] url` in `ws`'s toolgate.toml.
fn store_url(ws: &std::path::Path) -> String {
    let text = std::fs::read_to_string(ws.join("toolgate.toml")).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    table["store"]["url"].as_str().unwrap().to_owned()
}

/// SQL as the cluster's superuser through psql, in one session.
pub(crate) fn psql(url: &str, statements: &[&str]) {
    let mut command = Command::new("psql");
    command.args([url, "-v", "ON_ERROR_STOP=1", "-q"]);
    for s in statements {
        command.args(["-c", s]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_configuration_change_made_through_one_node_applies_on_every_node() {
    let (cluster, a, b, ann, lee) = two_nodes(&[]);
    let url = store_url(a.ws.path());
    admin(a.ws.path(), &["grant", "add", "--to", "ann", "--tool", "echo"]);
    until("ann's echo grant reaches B", || echo_runs(&b, &ann));
    let (ok, shown, _) = admin_config(a.ws.path(), &["show"]);
    assert!(ok && shown.contains("nothing stored"), "{shown}");

    // A deny rule and a bridged server, applied on A: A at once, B as it hears of it.
    let (error, answer) = apply(&a, &lee, "[tools]\ndeny = [\"echo\"]\n\n[mcp.servers.notes]\ncommand = \"/bin/true\"");
    assert!(!error && answer.contains("every node shares"), "{answer}");
    assert!(!echo_runs(&a, &ann), "A denies echo once applied");
    until("B denies echo", || !echo_runs(&b, &ann));
    until("B bridges the server added on A", || mcp_servers(&b, &lee).contains(&"notes".to_owned()));
    assert!(!std::fs::read_to_string(a.ws.path().join("toolgate.toml")).unwrap().contains("deny"), "not in A's file");
    let (_, shown, _) = admin_config(b.ws.path(), &["show"]);
    assert!(shown.contains("stored by lee") && shown.contains("echo"), "{shown}");
    let stored = shown.clone();

    // A policy that does not compile is refused whole, with the entry named; nothing moves.
    let bad = b.ws.path().join("bad.toml");
    std::fs::write(&bad, "[tools]\ndeny = [\"echo(\"]\n[sandbox]\nmode = \"off\"\n").unwrap();
    let (ok, _, err) = admin_config(b.ws.path(), &["push", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("not stored") && err.contains("echo("), "{err}");
    assert_eq!(admin_config(a.ws.path(), &["show"]).1, stored, "the stored configuration is unchanged");
    // Only the shared sections go through config_apply; another is named and refused.
    let (error, answer) = apply(&a, &lee, "[sandbox]\nmode = \"off\"");
    assert!(error && answer.contains("[sandbox]") && answer.contains("each node"), "{answer}");
    // ann is no admin: the gateway tool is refused her, and nothing is stored.
    let (error, answer) =
        tool_call(&b, &ann, "gateway", json!({"action": "config_apply", "patch": "[tools]\ndeny = []"}));
    assert!(error, "{answer}");
    assert_eq!(admin_config(a.ws.path(), &["show"]).1, stored);
    assert!(!echo_runs(&a, &ann) && !echo_runs(&b, &ann), "both nodes keep the last good configuration");

    // A node started after the change loads it, though its own file says nothing of it.
    let c = HttpServer::start_with_env(TOOLGATE, node(&url), &[], &[]);
    assert!(!echo_runs(&c, &ann), "C runs the shared policy from its start");
    assert!(mcp_servers(&c, &lee).contains(&"notes".to_owned()));

    // A change whose notification is lost: every node's LISTEN connection is cut just before it
    // commits (psql, as an operator), so none hears it; each finds the moved revision when it
    // reads it again (from the database while the connection is down, or on reconnecting).
    let database = url.rsplit('/').next().unwrap().to_owned();
    psql(
        &url,
        &[
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'toolgate-listen' \
                 AND datname = '{database}'"
            ),
            "UPDATE shared_config SET text = $$[tools]\ndeny = [\"time\"]\n$$, changed_by = 'psql'",
        ],
    );
    until("B puts the unheard change in force", || echo_runs(&b, &ann));
    until("C too", || echo_runs(&c, &ann));
    // A's connection was cut too: it catches up on its own clock (its next read of the
    // revision, or its reconnect), not necessarily before B and C.
    until("A too", || echo_runs(&a, &ann));

    // Back to each node's files: A's own file denies echo, which the stored [tools] hides until
    // `clear` removes it; then A runs its file's policy and B (whose file says nothing) not.
    let a_file = a.ws.path().join("toolgate.toml");
    let mut own = std::fs::read_to_string(&a_file).unwrap();
    own.push_str("\n[tools]\ndeny = [\"echo\"]\n");
    std::fs::write(&a_file, own).unwrap();
    assert!(echo_runs(&a, &ann), "the stored [tools] replaces A's file's");
    let (ok, cleared, err) = admin_config(b.ws.path(), &["clear"]);
    assert!(
        ok && cleared.contains("cleared") && cleared.contains("by psql") && cleared.contains("time"),
        "{cleared}{err}"
    );
    until("A runs its own file's deny again", || !echo_runs(&a, &ann));
    assert!(echo_runs(&b, &ann) && echo_runs(&c, &ann), "B and C run their own files, which deny nothing");
    let (_, shown, _) = admin_config(a.ws.path(), &["show"]);
    assert!(shown.contains("nothing stored"), "{shown}");
    let (ok, again, _) = admin_config(a.ws.path(), &["clear"]);
    assert!(ok && again.contains("nothing was stored"), "{again}");
    drop((a, b, c));
    drop(cluster);
}
