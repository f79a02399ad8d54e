//! A call forwarded from one node to the node that holds its background process (issue 29):
//! approved once, on the node it reached; bounded as it is on its own node, a wait for the
//! owner's approval included; and carried by a one-call key that moves no identity revision.

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_testkit::postgres::Cluster;
use toolgate_testkit::serve::HttpServer;

use crate::approvals_resume::api;
use crate::nodes_shared::{id_in, pending_on, query, tool_call, tool_call_at};
use crate::support::gateway::admin;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// A and B ask before every `process` call (policy `ask`) through the shared inbox; C asks
/// nothing (`--approval never`). Execution is bounded at 3 s, approvals at 60 s.
///
/// - ann writes to her process on A through B: B asks, lee approves once on A's API, and A runs
///   the call without asking again; A's audit row says it was approved on B, by lee.
/// - ann polls it through C, which asks nothing: A asks, and lee decides after C's 3 s
///   execution bound has passed; the call still comes back, as it would on A (3 s after the
///   approval, which may take up to 60 s).
/// - Neither forward moved the identity revision, and both keys are revoked.
#[test]
fn a_forwarded_call_is_approved_once_waits_as_long_as_on_its_node_and_moves_no_revision() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let config = format!(
        "[gate]\ntimeout_secs = 3\n\n\
         [gateway]\nenabled = true\nworkspaces = \"users\"\ndefault_tools = [\"exec\", \"process\"]\n\n\
         [tools]\nask = [\"process\"]\n\n[approval]\ntimeout_secs = 60\nwait_secs = 60\n\n[store]\nurl = \"{url}\"\n"
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let lee = admin(ws.path(), &["key", "create", "--user", "lee"]);
    let a = HttpServer::start_with_env(TOOLGATE, ws, &[], &[]);
    let b = HttpServer::start_beside(TOOLGATE, &a, &[]);
    let c = HttpServer::start_beside_with(TOOLGATE, &a, &["--approval", "never"], &[]);
    let (failed, started) = tool_call(&a, &ann, "exec", json!({"command": "cat", "background": true}));
    assert!(!failed, "{started}");
    let id = id_in(&started, "tg-proc-");
    let identity = "SELECT value FROM revisions WHERE name = 'identity'";
    let revision = query(&url, identity);

    // Through B: asked once, on B.
    let write = {
        let (b_url, ann, id) = (b.url.clone(), ann.clone(), id.clone());
        std::thread::spawn(move || {
            tool_call_at(&b_url, &ann, "process", json!({"action": "write", "id": id, "input": "one\n"}))
        })
    };
    let entry = pending_on(&a, &lee);
    assert_eq!(entry["tool"], "process", "{entry}");
    let (status, body) = api(&a, "POST", &format!("/api/approvals/{}", entry["id"]), &lee, r#"{"decision": "allow"}"#);
    assert_eq!(status, 200, "{body}");
    let (failed, wrote) = write.join().unwrap();
    assert!(!failed && wrote.contains("wrote 4 bytes"), "A ran it without asking again: {wrote}");
    assert_eq!(query(&url, "SELECT count(*) FROM approvals"), "1", "one person asked once");
    let row = "SELECT decision FROM audit WHERE tool = 'process' AND params LIKE '%\"via\"%' AND outcome = 'ok'";
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut trace = query(&url, row);
    while trace.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        trace = query(&url, row);
    }
    assert!(trace.contains("approval: approved on node") && trace.contains("by lee"), "A's row says how: {trace}");
    assert!(!trace.contains("approval: allowed once"), "A asked nobody: {trace}");

    // Through C, which asks nothing: A asks, and its answer comes after C's 3 s bound.
    let asked = Instant::now();
    let poll = {
        let (c_url, ann, id) = (c.url.clone(), ann.clone(), id.clone());
        std::thread::spawn(move || tool_call_at(&c_url, &ann, "process", json!({"action": "poll", "id": id})))
    };
    let entry = pending_on(&a, &lee);
    std::thread::sleep(Duration::from_secs(4).saturating_sub(asked.elapsed()));
    let (status, body) = api(&a, "POST", &format!("/api/approvals/{}", entry["id"]), &lee, r#"{"decision": "allow"}"#);
    assert_eq!(status, 200, "{body}");
    let (failed, polled) = poll.join().unwrap();
    assert!(!failed && polled.contains("one"), "the forwarded poll waited for A's approval: {polled}");
    assert!(asked.elapsed() > Duration::from_secs(4));

    // The two one-call keys moved no revision, and neither works any more.
    assert_eq!(query(&url, identity), revision, "a forwarded call's key reloads no node's identities");
    let keys = admin(a.ws.path(), &["key", "list", "--user", "ann", "--json"]);
    let forwarded: Vec<serde_json::Value> = keys
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|k| k["scope"].get("forwarded_by").is_some())
        .collect();
    assert_eq!(forwarded.len(), 2, "{keys}");
    assert!(forwarded.iter().all(|k| k["state"] == "revoked"), "{keys}");
    let approved: Vec<&str> = forwarded.iter().filter_map(|k| k["scope"]["approved"]["decided"].as_str()).collect();
    assert!(approved.len() == 1 && approved[0].contains("by lee"), "B's carried lee's approval, C's none: {keys}");
    drop((b, c, a));
    drop(cluster);
}
