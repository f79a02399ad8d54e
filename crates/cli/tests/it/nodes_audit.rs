//! The audit log of two `toolgate serve` nodes on one PostgreSQL database and one workspace
//! folder (issue 29: the nodes behind a load balancer share the filesystem and the database):
//! both append to the workspace's one hash chain, and a database restarted under a load of
//! calls loses no row of a call that was answered. A legacy session sent to the node that did
//! not open it gets the specification's 404, after which a client opens a new one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use toolgate_testkit::postgres::Cluster;
use toolgate_testkit::serve::HttpServer;

use crate::support::gateway::{Client, admin, post};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn echo(client: &Client<'_>, id: usize, message: &str) -> String {
    client.send(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"{message}"}}}}}}"#
    ))
}

fn answered(reply: &str) -> bool {
    reply.starts_with("HTTP/1.1 200") && reply.contains(r#""isError":false"#)
}

/// `toolgate audit` (or `audit verify`) on `ws`: reads the shared log, both nodes' calls.
fn audit(ws: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("audit").args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn two_nodes_keep_one_audit_chain_through_a_database_restart() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let config = format!("[gateway]\nenabled = true\ndefault_tools = [\"echo\"]\n\n[store]\nurl = \"{url}\"\n");
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    let key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    let lee = admin(ws.path(), &["key", "create", "--user", "lee"]);
    let a = HttpServer::start_in(TOOLGATE, ws, &[]);
    let b = HttpServer::start_beside(TOOLGATE, &a, &[]);
    let (on_a, on_b) = (Client::connect(&a.url, &key), Client::connect(&b.url, &key));
    // A client before 2026-07-28 keeps a session with the node that opened it; sent to the
    // other node (a load balancer without affinity), it is answered 404, the specification's
    // "session gone", and the client starts a new session there.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let opened = post(&a.url, &key, None, init);
    let session = opened
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_owned()))
        .unwrap_or_else(|| panic!("no session from A: {opened}"));
    let elsewhere = post(&b.url, &key, Some(&session), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert!(elsewhere.starts_with("HTTP/1.1 404"), "{elsewhere}");
    assert!(
        post(&a.url, &key, Some(&session), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
            .starts_with("HTTP/1.1 200")
    );
    for i in 0..10 {
        let client = if i % 2 == 0 { &on_a } else { &on_b };
        let reply = echo(client, 10 + i, &format!("before-{i}"));
        assert!(answered(&reply), "{reply}");
    }

    // A load on both nodes while the database stops and starts again: every call that was
    // answered has its row afterwards.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = [a.url.clone(), b.url.clone()]
        .into_iter()
        .enumerate()
        .map(|(node, url)| {
            let (stop, key) = (Arc::clone(&stop), key.clone());
            std::thread::spawn(move || {
                let client = Client::connect(&url, &key);
                let mut answered_ids = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::Acquire) {
                    let message = format!("load-{node}-{i}");
                    if answered(&echo(&client, 100 + i, &message)) {
                        answered_ids.push(message);
                    }
                    i += 1;
                }
                answered_ids
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    cluster.stop_server().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    cluster.start_server().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Release);
    let answered_calls: Vec<String> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(answered_calls.len() > 20, "the load ran: {answered_calls:?}");
    eprintln!("{} calls answered across the restart", answered_calls.len());
    // Each node writes what it queued while the database was away once it is back.
    let workspace = a.ws.path().to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let missing = loop {
        let (ok, tail) = audit(&workspace, &["--json", "--tail", "100000"]);
        assert!(ok, "{tail}");
        let rows: Vec<serde_json::Value> =
            tail.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
        let params: Vec<&str> = rows.iter().filter_map(|r| r["params"].as_str()).collect();
        let has = |m: &str| params.iter().any(|p| p.contains(&format!("\"{m}\"")));
        let before: Vec<String> = (0..10).map(|i| format!("before-{i}")).collect();
        let missing: Vec<String> = before.iter().chain(&answered_calls).filter(|m| !has(m)).cloned().collect();
        if missing.is_empty() || std::time::Instant::now() > deadline {
            break missing;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(missing.is_empty(), "answered calls without an audit row: {missing:?}");
    let (intact, report) = audit(&workspace, &["verify"]);
    assert!(intact && report.contains("audit chain intact"), "{report}");
    assert_eq!(local_rows(&workspace), 0, "no row went to the workspace's own file");
    // The node's link to the shared database, as an operator scrapes it.
    let scrape = || metrics(&a, &lee);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut text = scrape();
    while !(text.contains("toolgate_store_in_step 1\n") && text.contains("toolgate_audit_queued 0\n")) {
        assert!(std::time::Instant::now() < deadline, "the node is not back in step: {text}");
        std::thread::sleep(Duration::from_millis(200));
        text = scrape();
    }
    assert!(text.contains("toolgate_store_connections_max 16\n"), "{text}");
    assert!(text.contains("toolgate_store_connections{state=\"idle\"}"), "{text}");
    drop((a, b));
}

/// Rows in the workspace's own SQLite log (none when the shared one is used).
fn local_rows(ws: &std::path::Path) -> u64 {
    toolgate::store::Store::open(&ws.join(".toolgate/state.db")).unwrap().audit_count().unwrap()
}

/// `GET /metrics` with `key`: the body of a 200.
fn metrics(server: &HttpServer, key: &str) -> String {
    use std::io::{Read, Write};
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}
