//! `toolgate admin migrate --from sqlite:WS --to postgres://...` (issue 29): a single node's
//! state moved into the database several nodes will share, then served from there: the keys
//! people hold still work, grants still apply, and the audit log verifies to the same head hash.

use std::process::Command;

use toolgate_testkit::postgres::Cluster;
use toolgate_testkit::serve::HttpServer;

use crate::support::gateway::{Client, admin};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const SHARED_KEY: &str = "5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b";

fn toolgate(ws: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(TOOLGATE)
        .env("TOOLGATE_SECRET_KEY", SHARED_KEY)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verified(ws: &std::path::Path) -> serde_json::Value {
    let (ok, out, err) = toolgate(ws, &["audit", "verify", "--json"]);
    assert!(ok, "{out}{err}");
    serde_json::from_str(out.trim()).unwrap()
}

#[test]
fn a_nodes_state_moves_into_the_shared_database_and_is_served_from_there() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let gateway = "[gateway]\nenabled = true\ndefault_tools = [\"echo\"]\n";
    std::fs::write(ws.path().join("toolgate.toml"), gateway).unwrap();
    admin(ws.path(), &["user", "add", "ann", "--group", "devs"]);
    let key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    admin(ws.path(), &["grant", "add", "--to", "devs", "--tool", "time"]);
    for message in ["one", "two", "three"] {
        let (ok, out, err) = toolgate(ws.path(), &["call", "echo", &format!(r#"{{"message":"{message}"}}"#)]);
        assert!(ok, "{out}{err}");
    }
    let before = verified(ws.path());
    assert_eq!(before["rows"], 3, "{before}");
    let local = toolgate::store::Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let def = r#"{"name": "count_lines", "description": "Count lines.", "command": "wc -l < {{.path}}",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}"#;
    toolgate::extensions::add_custom_tool(&local, def).unwrap();
    drop(local);

    let from = format!("sqlite:{}", ws.path().display());
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("2 principals, 1 memberships"), "ann and her group: {out}");
    assert!(out.contains("1 API keys") && out.contains("1 tool grants") && out.contains("3 audit rows"), "{out}");
    assert!(out.contains("1 custom tools"), "{out}");

    // The node now keeps its state in the shared database.
    std::fs::write(ws.path().join("toolgate.toml"), format!("{gateway}\n[store]\nurl = \"{url}\"\n")).unwrap();
    let after = verified(ws.path());
    assert_eq!(after["ends"]["head_hash"], before["ends"]["head_hash"], "the same chain, to the same head");
    assert_eq!(after["rows"], 3);
    let (_, tail, _) = toolgate(ws.path(), &["audit", "--json"]);
    assert!(["one", "two", "three"].iter().all(|m| tail.contains(&format!(r#"\"message\":\"{m}\""#))), "{tail}");
    assert!(admin(ws.path(), &["user", "list"]).contains("ann"));
    let (ok, tools, err) = toolgate(ws.path(), &["tools", "custom"]);
    assert!(ok && tools.contains("count_lines"), "the custom tool is read from the shared database: {tools}{err}");

    // A second move into the same database is refused before anything is written.
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(!ok && err.contains("already holds state"), "{out}{err}");
    let (ok, _, err) = toolgate(ws.path(), &["admin", "migrate", "--from", "state.db", "--to", &url]);
    assert!(!ok && err.contains("expected sqlite:PATH"), "{err}");

    // ann's key, made before the move, works on a node serving from the shared database, and
    // her group's grant applies.
    let server = HttpServer::start_with_env(TOOLGATE, ws, &[], &[("TOOLGATE_SECRET_KEY", SHARED_KEY)]);
    let client = Client::connect(&server.url, &key);
    let listed = client.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert!(listed.contains(r#""name":"time""#), "{listed}");
    let reply = client.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"after"}}}"#,
    );
    assert!(reply.contains(r#""isError":false"#), "{reply}");
    drop(server);
    drop(cluster);
}
