//! What a load balancer and an operator ask of `toolgate serve --http` (issue 29 item 6,
//! `docs/operations.md`), through the binary: `/healthz` and `/readyz` answer anyone, `/metrics`
//! only the bearer token's holder or a gateway admin, and counts the calls real MCP clients (the
//! official Python SDK) made; a made-up tool name never becomes a label.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::serve::HttpServer;

use crate::support::gateway::admin;
use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `GET path` on `server` with an optional bearer credential: the status and the body.
fn get(server: &HttpServer, path: &str, bearer: Option<&str>) -> (u16, String) {
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let auth = bearer.map(|b| format!("Authorization: Bearer {b}\r\n")).unwrap_or_default();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}\r\n").unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn call(server: &HttpServer, credential: &str, tool: &str, arguments: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_call.py");
    let out = Command::new(python::sdk_python())
        .arg(script)
        .args([&server.url, credential, tool, &arguments.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// The body of a chunked or plain answer, without the chunk sizes (the metrics are long).
fn lines(body: &str) -> Vec<&str> {
    body.lines().filter(|l| l.starts_with("toolgate_") || l.starts_with('#')).collect()
}

#[test]
fn probes_answer_anyone_and_metrics_count_the_calls_for_the_token_holder() {
    let server = HttpServer::start(TOOLGATE, &[]);
    let token = server.token.clone().unwrap();
    assert_eq!(get(&server, "/healthz", None), (200, "ok\n".to_owned()));
    assert_eq!(get(&server, "/readyz", None), (200, "ready\n".to_owned()));
    let (status, body) = get(&server, "/metrics", None);
    assert_eq!(status, 401, "{body}");
    assert_eq!(get(&server, "/metrics", Some("not-the-token")).0, 401);

    for text in ["one", "two"] {
        let out = call(&server, &token, "echo", json!({"message": text}));
        assert_eq!(out["is_error"], false, "{out}");
    }
    // A made-up name is refused as a protocol error (the client raises); it must not become a
    // label, nor inject a line into the exposition.
    let hostile = "no_such\"} 99\ntoolgate_calls_total{tool=\"echo";
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_call.py");
    let out =
        Command::new(python::sdk_python()).arg(script).args([&server.url, &token, hostile, "{}"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown tool"), "{out:?}");

    let (status, body) = get(&server, "/metrics", Some(&token));
    assert_eq!(status, 200, "{body}");
    let lines = lines(&body);
    assert!(lines.contains(&"toolgate_calls_total{tool=\"echo\",outcome=\"ok\"} 2"), "{body}");
    assert!(!body.contains("no_such"), "a made-up name is no label: {body}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("toolgate_calls_total{tool=\"echo\"")).count(), 1, "{body}");
    assert!(lines.contains(&"toolgate_call_duration_seconds_count{tool=\"echo\"} 2"), "{body}");
    assert!(lines.contains(&"toolgate_pending_approvals 0"), "{body}");
    assert!(lines.contains(&"toolgate_jobs{state=\"queued\"} 0"), "{body}");
    assert!(lines.contains(&"toolgate_jobs{state=\"running\"} 0"), "{body}");
    assert!(lines.contains(&"toolgate_outbox_messages 0"), "{body}");
    assert!(lines.iter().any(|l| l.starts_with("toolgate_uptime_seconds ")), "{body}");
}

#[test]
fn in_a_gateway_metrics_need_an_admins_key() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\n").unwrap();
    let admin = |args: &[&str]| admin(ws.path(), args);
    admin(&["user", "add", "ann"]);
    admin(&["user", "add", "lee", "--admin"]);
    let (ann, lee) = (admin(&["key", "create", "--user", "ann"]), admin(&["key", "create", "--user", "lee"]));
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    assert_eq!(get(&server, "/healthz", None).0, 200);
    assert_eq!(get(&server, "/readyz", None).0, 200);
    assert_eq!(get(&server, "/metrics", None).0, 401);
    let (status, body) = get(&server, "/metrics", Some(&ann));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin"), "{body}");
    let (status, body) = get(&server, "/metrics", Some(&lee));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("# TYPE toolgate_calls_total counter"), "{body}");
}

/// On PostgreSQL (`[store] url`) a node reports how late notifications reach it: its own probe
/// `NOTIFY`, timed until its `LISTEN` connection hears it (issue 29 item 6, "NOTIFY lag").
#[test]
fn a_node_on_postgresql_reports_its_notify_lag() {
    let cluster = toolgate_testkit::postgres::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), format!("[store]\nurl = \"{url}\"\n")).unwrap();
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let token = server.token.clone().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (lag, body) = loop {
        let (status, body) = get(&server, "/metrics", Some(&token));
        assert_eq!(status, 200, "{body}");
        let lag =
            lines(&body).iter().find_map(|l| l.strip_prefix("toolgate_store_notify_lag_seconds ")?.parse::<f64>().ok());
        if let Some(lag) = lag {
            break (lag, body);
        }
        assert!(std::time::Instant::now() < deadline, "no NOTIFY lag within a minute: {body}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(lag > 0.0 && lag.is_finite(), "{lag}");
    assert!(lines(&body).contains(&"# TYPE toolgate_store_notify_lag_seconds gauge"), "{body}");
    drop(server);
    drop(cluster);
}
