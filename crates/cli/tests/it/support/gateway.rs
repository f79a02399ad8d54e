//! A team gateway as its tests drive it: `toolgate admin` in another process, and a raw MCP
//! session over Streamable HTTP (one request per connection, nothing hidden by a client library)
//! for tests that look at status lines and headers.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `toolgate --workspace WS admin ARGS`, which must succeed: its stdout, trimmed.
pub fn admin(ws: &Path, args: &[&str]) -> String {
    admin_with_input(ws, args, "")
}

/// [`admin`] with `stdin` as its input (`admin password set NAME` reads the password there).
pub fn admin_with_input(ws: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .arg("admin")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The id in `grant N: ...` (what `toolgate admin grant add` prints).
pub fn grant_id(added: &str) -> i64 {
    added.strip_prefix("grant ").and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok()).unwrap()
}

/// One MCP POST with `key` (and the session, once there is one): the status line, headers and
/// body as text.
pub fn post(url: &str, key: &str, session: Option<&str>, body: &str) -> String {
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

/// An MCP session of one key: `initialize`, then requests.
pub struct Client<'a> {
    url: &'a str,
    key: String,
    session: Option<String>,
}

impl<'a> Client<'a> {
    /// `initialize` and `notifications/initialized` with `key`.
    pub fn connect(url: &'a str, key: &str) -> Client<'a> {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
        let answer = post(url, key, None, init);
        assert!(answer.starts_with("HTTP/1.1 200"), "initialize: {answer}");
        let session = answer
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|_| l[15..].trim().to_owned()));
        let client = Client { url, key: key.to_owned(), session };
        let initialized = client.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(initialized.starts_with("HTTP/1.1 202"), "initialized: {initialized}");
        client
    }

    /// One request of the session: the whole HTTP answer.
    pub fn send(&self, body: &str) -> String {
        post(self.url, &self.key, self.session.as_deref(), body)
    }

    /// The session's stream of server messages (`GET /mcp`), open: read it for notifications.
    pub fn listen(&self) -> std::net::TcpStream {
        let addr = self.url.trim_start_matches("http://").trim_end_matches("/mcp");
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\
             Mcp-Session-Id: {}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n",
            self.key,
            self.session.as_deref().unwrap_or_default()
        )
        .unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
        stream
    }
}

/// Reads `stream` until `want` was seen `count` times in all (true), it ends, or 20 s pass
/// (false).
pub fn heard(stream: &mut std::net::TcpStream, seen: &mut String, want: &str, count: usize) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while seen.matches(want).count() < count {
        if std::time::Instant::now() > deadline {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
    }
    true
}
