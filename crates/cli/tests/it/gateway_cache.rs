//! The gateway's caches (issue 28, "cached by revision"; `crates/gateway/src/cache.rs`) through
//! the real binary: a running `toolgate serve --http` keeps each key's verification and each
//! caller's compiled grants, and still sees a change made by `toolgate admin` in another process
//! on its very next request — a revoked key, a disabled user, a grant added and revoked — and an
//! expired key is refused once its time has passed.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// One MCP POST with `key` (and the session, once there is one); the status line, headers and
/// body as text.
fn post(url: &str, key: &str, session: Option<&str>, body: &str) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let session = session.map(|s| format!("Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-06-18\r\n"));
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n{}\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        session.unwrap_or_default(),
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// An MCP session of one key: `initialize`, then calls.
struct Client<'a> {
    url: &'a str,
    key: String,
    session: Option<String>,
}

impl<'a> Client<'a> {
    fn connect(url: &'a str, key: &str) -> Client<'a> {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
        let answer = post(url, key, None, init);
        assert!(answer.starts_with("HTTP/1.1 200"), "initialize: {answer}");
        let session = answer
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|_| l[15..].trim().to_owned()));
        let client = Client { url, key: key.to_owned(), session };
        let initialized =
            post(url, key, client.session.as_deref(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(initialized.starts_with("HTTP/1.1 202"), "initialized: {initialized}");
        client
    }

    /// `echo` called once: the whole HTTP answer.
    fn echo(&self) -> String {
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"cached?"}}}"#;
        post(self.url, &self.key, self.session.as_deref(), call)
    }
}

fn echoed(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200")
        && answer.contains(r#""text":"cached?""#)
        && answer.contains(r#""isError":false"#)
}

fn gateway(config: &str) -> toolgate_testkit::serve::HttpServer {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), format!("[gateway]\nenabled = true\n{config}")).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[])
}

#[test]
fn a_revoked_key_or_disabled_user_is_refused_on_the_next_call() {
    let server = gateway("");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    let bob = admin(ws, &["key", "create", "--user", "bob"]);
    let (ann_client, bob_client) = (Client::connect(&server.url, &ann), Client::connect(&server.url, &bob));
    for _ in 0..3 {
        assert!(echoed(&ann_client.echo()) && echoed(&bob_client.echo()), "both keys work, and are cached");
    }
    admin(ws, &["key", "revoke", &ann[3..19]]);
    let refused = ann_client.echo();
    assert!(refused.starts_with("HTTP/1.1 401") && refused.contains("revoked"), "the next call: {refused}");
    assert!(echoed(&bob_client.echo()), "another key is untouched");
    admin(ws, &["user", "disable", "bob"]);
    let refused = bob_client.echo();
    assert!(refused.starts_with("HTTP/1.1 403") && refused.contains("disabled"), "the next call: {refused}");
    admin(ws, &["user", "enable", "bob"]);
    assert!(echoed(&bob_client.echo()), "enabled again");
}

#[test]
fn grants_written_by_another_process_apply_to_the_next_call() {
    // `echo` needs a grant here.
    let server = gateway("default_tools = []\n");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    let client = Client::connect(&server.url, &ann);
    for _ in 0..2 {
        let refused = client.echo();
        assert!(refused.contains("no grant") && !echoed(&refused), "no grant yet: {refused}");
    }
    let granted = admin(ws, &["grant", "add", "--to", "ann", "--tool", "echo"]);
    let id = granted.strip_prefix("grant ").and_then(|r| r.split(':').next()).expect("the grant's id").to_owned();
    for _ in 0..2 {
        assert!(echoed(&client.echo()), "granted from the next call");
    }
    admin(ws, &["grant", "disable", &id]);
    assert!(client.echo().contains("no grant"), "disabled at once");
    admin(ws, &["grant", "enable", &id]);
    assert!(echoed(&client.echo()), "enabled at once");
    admin(ws, &["grant", "revoke", &id]);
    assert!(client.echo().contains("no grant"), "revoked at once");
    // A group's grant reaches its members from the next call too (membership and grant both
    // change).
    admin(ws, &["user", "add", "cy", "--group", "ops"]);
    admin(ws, &["grant", "add", "--to", "ops", "--tool", "echo"]);
    let cy = admin(ws, &["key", "create", "--user", "cy"]);
    assert!(echoed(&Client::connect(&server.url, &cy).echo()), "a member of ops");
    assert!(client.echo().contains("no grant"), "ann is not in ops");
}

#[test]
fn an_expired_key_is_refused_once_its_time_has_passed() {
    let server = gateway("");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    // The shortest `--expires` is minutes: the test sets the key's end 2 s ahead in the store,
    // as a key made earlier would have it.
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let ends = now_ms + 2_000;
    let db = rusqlite::Connection::open(ws.join(".toolgate/state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let changed = db.execute("UPDATE api_keys SET expires_ms = ?1 WHERE id = ?2", rusqlite::params![ends, &ann[3..19]]);
    assert_eq!(changed.unwrap(), 1);
    let client = Client::connect(&server.url, &ann);
    assert!(echoed(&client.echo()), "valid (and now cached) until its end");
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let answer = client.echo();
        if !echoed(&answer) {
            break answer;
        }
        assert!(Instant::now() < deadline, "still admitted long after the key's end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(refused.starts_with("HTTP/1.1 401") && refused.contains("expired"), "{refused}");
    assert!(after >= ends, "refused only once the end has passed");
}
