//! What a client that leaves `toolgate serve --http` without ending its session leaves behind
//! (issue 31, item 8: descriptors back to where they started once the clients are gone). A
//! client before 2026-07-28 gets a session after `initialize`; one that is killed, loses its
//! network or never sends `DELETE` keeps it, with its event stream and its connection, on the
//! server. Each session ends after `--session-idle` without a request, a connection without a
//! request in flight closes after that (or 60 s), and `--max-sessions` caps how many are kept.
//!
//! Plain HTTP/1.1 on sockets, so the clients can do what a well-made client never does: go
//! silent with their connections open. The server's descriptors are read from `/proc/PID/fd`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use toolgate_testkit::serve::HttpServer;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// Sessions opened and left behind.
const ABANDONED: usize = 24;

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

fn connect(server: &HttpServer) -> TcpStream {
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp");
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream
}

fn head(server: &HttpServer, method: &str, session: Option<&str>, len: usize) -> String {
    let mut h = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
         Accept: application/json, text/event-stream\r\n",
        server.token.as_deref().unwrap()
    );
    if method == "POST" {
        h.push_str(&format!("Content-Type: application/json\r\nContent-Length: {len}\r\n"));
    }
    if let Some(id) = session {
        h.push_str(&format!("Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\n"));
    }
    h + "\r\n"
}

/// Reads one whole response on a kept-alive connection: its status, and its head and body as
/// text (a `Content-Length` body, or a chunked event stream up to its last chunk).
fn response(stream: &mut TcpStream) -> (u16, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((headers, body)) = text.split_once("\r\n\r\n") {
            let length = headers
                .lines()
                .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            let done = match length {
                Some(n) => body.len() >= n,
                // An event stream (chunked) that ends after the answer.
                None => body.ends_with("0\r\n\r\n"),
            };
            if done {
                let status = headers.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                return (status, text);
            }
        }
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed the connection mid-response: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

fn post(server: &HttpServer, stream: &mut TcpStream, session: Option<&str>, body: &str) -> (u16, String) {
    stream.write_all(head(server, "POST", session, body.len()).as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    response(stream)
}

/// `initialize` and `initialized` on `stream` (kept alive); the session's id.
fn open_session(server: &HttpServer, stream: &mut TcpStream) -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"left","version":"0"}}}"#;
    let (status, text) = post(server, stream, None, init);
    assert_eq!(status, 200, "initialize: {text}");
    let id = text
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no session id: {text}"));
    let (status, text) = post(server, stream, Some(&id), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(status, 202, "initialized: {text}");
    id
}

fn echo(server: &HttpServer, stream: &mut TcpStream, session: &str, n: usize) -> (u16, String) {
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"still here {n}"}}}}}}"#
    );
    post(server, stream, Some(session), &call)
}

/// A client that went silent: its session open, its connection kept alive and its event stream
/// (`GET /mcp`) open, neither closed nor used again.
struct Gone {
    _calls: TcpStream,
    _events: TcpStream,
}

fn leave_behind(server: &HttpServer) -> Gone {
    let mut calls = connect(server);
    let id = open_session(server, &mut calls);
    let (status, text) = echo(server, &mut calls, &id, 1);
    assert!(status == 200 && text.contains("still here 1"), "a call of the session: {text}");
    let mut events = connect(server);
    events.write_all(head(server, "GET", Some(&id), 0).as_bytes()).unwrap();
    let mut first = [0u8; 512];
    let n = events.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"), "the event stream opened");
    Gone { _calls: calls, _events: events }
}

#[test]
fn sessions_left_behind_end_after_the_idle_bound_and_free_their_descriptors() {
    let server = HttpServer::start(TOOLGATE, &["--session-idle", "3"]);
    let pid = server.pid();
    // The parts built on first use (the audit log, the tools), then the starting point.
    let mut warm = connect(&server);
    let id = open_session(&server, &mut warm);
    echo(&server, &mut warm, &id, 1);
    drop(warm);
    std::thread::sleep(Duration::from_secs(3));
    let baseline = fds(pid);

    // Two connections each; the first may end before the last is made on a loaded machine.
    let mut held = baseline;
    let gone: Vec<Gone> = (0..ABANDONED)
        .map(|_| {
            let gone = leave_behind(&server);
            held = held.max(fds(pid));
            gone
        })
        .collect();
    assert!(held >= baseline + ABANDONED, "the left-behind connections were open: {baseline} -> {held}");

    // A client that keeps working meanwhile keeps its session.
    let mut busy = connect(&server);
    let busy_id = open_session(&server, &mut busy);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut n = 2;
    let mut now = fds(pid);
    while now > baseline + 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let (status, text) = echo(&server, &mut busy, &busy_id, n);
        assert!(status == 200 && text.contains(&format!("still here {n}")), "the busy session still works: {text}");
        n += 1;
        now = fds(pid);
    }
    let listing: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.display().to_string())
        .collect();
    assert!(
        now <= baseline + 4,
        "{ABANDONED} sessions left behind with their connections: descriptors {baseline} at the start, \
         {held} with them, still {now} long after the 3 s idle bound: {listing:?}"
    );
    drop(gone);
}

#[test]
fn a_session_beyond_the_cap_ends_the_oldest() {
    let server = HttpServer::start(TOOLGATE, &["--max-sessions", "3"]);
    let mut clients: Vec<(TcpStream, String)> = (0..5)
        .map(|_| {
            let mut stream = connect(&server);
            let id = open_session(&server, &mut stream);
            (stream, id)
        })
        .collect();
    for (i, (stream, id)) in clients.iter_mut().enumerate() {
        let (status, text) = echo(&server, stream, id, 10 + i);
        if i < 2 {
            assert_eq!(status, 404, "session {i} of 5 was ended by the cap of 3: {text}");
        } else {
            assert!(status == 200 && text.contains(&format!("still here {}", 10 + i)), "session {i} kept: {text}");
        }
    }
    // The client whose session ended starts a new one, as the specification asks; it works.
    let (stream, _) = &mut clients[0];
    let id = open_session(&server, stream);
    let (status, text) = echo(&server, stream, &id, 20);
    assert!(status == 200 && text.contains("still here 20"), "a new session after the old one ended: {text}");
}

/// Processes on the host whose command line holds `marker`.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(marker))
}

/// Sends a session's `tools/call` of `exec sleep SECS` and reads the response's head and
/// first event (the priming event, whose id a client resumes from); the connection stays open.
fn start_sleep(server: &HttpServer, session: &str, secs: &str) -> (TcpStream, String) {
    let mut stream = connect(server);
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"exec","arguments":{{"command":"sleep {secs}"}}}}}}"#
    );
    stream.write_all(head(server, "POST", Some(session), call.len()).as_bytes()).unwrap();
    stream.write_all(call.as_bytes()).unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.split_once("id:").is_some_and(|(_, rest)| rest.contains('\n')) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the call's stream closed: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let id = got.split_once("id:").unwrap().1.lines().next().unwrap().trim().to_owned();
    (stream, id)
}

/// A client of a session that closes its call's stream mid-call and does not come back (the
/// load run's disconnecting clients): the call is cancelled as its `notifications/cancelled`
/// would cancel it, its process killed, its audit row `cancelled`, its descriptors freed. A
/// client that resumes the stream (`GET` with `Last-Event-ID`) gets its answer instead.
#[test]
fn a_call_whose_client_left_is_cancelled_unless_the_client_resumes() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[tools]\nallow = [\"exec(sleep:*)\"]\n").unwrap();
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    let pid = server.pid();
    let mut calls = connect(&server);
    let id = open_session(&server, &mut calls);
    // The sandbox is built on the first command: the starting point is after one.
    let sleep0 =
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0"}}}"#;
    let (status, text) = post(&server, &mut calls, Some(&id), sleep0);
    assert!(status == 200 && text.contains(r#""exit_code":0"#), "{text}");
    std::thread::sleep(Duration::from_millis(500));
    let baseline = fds(pid);

    let (left, _) = start_sleep(&server, &id, "4831.61");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running("4831.61") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(running("4831.61"), "the call's sleep started");
    drop(left);
    let deadline = Instant::now() + Duration::from_secs(30);
    while (running("4831.61") || fds(pid) > baseline) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!running("4831.61"), "the call of a client that left still runs");
    assert!(fds(pid) <= baseline, "descriptors {baseline} before the call, {} after it was cancelled", fds(pid));
    let audit = std::process::Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(server.ws.path())
        .args(["audit", "--json", "--tail", "20"])
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&audit.stdout);
    let row = rows.lines().find(|l| l.contains("4831.61")).unwrap_or_else(|| panic!("no audit row: {rows}"));
    assert!(row.contains(r#""outcome":"cancelled""#), "{row}");

    // Resumed within the grace: the call runs to its end and answers on the resumed stream.
    let (resumed, event) = start_sleep(&server, &id, "1.5");
    drop(resumed);
    std::thread::sleep(Duration::from_millis(300));
    let mut events = connect(&server);
    let get = head(&server, "GET", Some(&id), 0).replace("\r\n\r\n", &format!("\r\nLast-Event-ID: {event}\r\n\r\n"));
    events.write_all(get.as_bytes()).unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.contains("exit_code") && !got.contains("cancelled") {
        let n = events.read(&mut buf).unwrap();
        assert!(n > 0, "the resumed stream closed: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(got.contains(r#""exit_code":0"#), "the resumed call ran to its end: {got}");
}
