//! The misbehaving clients of the load run (issue 31, "Bad input"), on plain sockets: each
//! sends HTTP/1.1 by hand, so it can do what a well-made client never does.
//!
//! - `malformed`: bodies that are not JSON-RPC (broken JSON, the wrong shapes, deep nesting,
//!   binary), with and without a session;
//! - `oversized`: a body over the server's 4 MiB limit, and one whose `Content-Length` promises
//!   100 MB and stops after 1 KB;
//! - `disconnect`: a fresh session, a `tools/call` of `exec sleep 5`, and the socket closed
//!   100 ms later (the session abandoned too);
//! - `never-read`: a connection that sends 20 pipelined `read`s of a 200 KB file and never
//!   reads a byte of the answers; up to 8 are held open at once.
//!
//! Each counts what it got back by kind; anything but a 4xx (or a JSON-RPC error, or an
//! accepted notification) is a finding the report shows.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the misbehaving clients aim.
#[derive(Clone)]
pub struct Aim {
    pub addr: String,
    pub token: String,
}

/// What the misbehaving clients got back: (client, outcome) → count.
pub type Tally = Arc<Mutex<BTreeMap<(&'static str, String), u64>>>;

fn count(tally: &Tally, who: &'static str, what: impl Into<String>) {
    *tally.lock().unwrap().entry((who, what.into())).or_default() += 1;
}

/// One request's head.
fn head(aim: &Aim, len: usize, session: Option<&str>, close: bool) -> String {
    let mut h = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {len}\r\n",
        aim.addr, aim.token
    );
    if let Some(s) = session {
        h.push_str(&format!("Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-06-18\r\n"));
    }
    if close {
        h.push_str("Connection: close\r\n");
    }
    h.push_str("\r\n");
    h
}

fn connect(aim: &Aim) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(&aim.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.set_write_timeout(Some(Duration::from_secs(20)))?;
    Ok(s)
}

/// Sends one request on a fresh connection and returns the status and the whole response
/// (`Connection: close`: the server ends it).
fn exchange(aim: &Aim, body: &[u8], session: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut s = connect(aim)?;
    s.write_all(head(aim, body.len(), session, true).as_bytes())?;
    // The server may answer (413) and close before the body is all sent.
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((status, text))
}

/// A session as an old-protocol client opens one: `initialize`, then `initialized`.
fn session(aim: &Aim) -> Result<String, String> {
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"misbehaving","version":"0"}}}"#;
    let (status, text) = exchange(aim, init, None).map_err(|e| format!("initialize: {e}"))?;
    let id = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")))
        .map(|(_, v)| v.trim().to_owned())
        .ok_or_else(|| format!("initialize: status {status}, no session id"))?;
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    exchange(aim, note, Some(&id)).map_err(|e| format!("initialized: {e}"))?;
    Ok(id)
}

fn kind(status: u16, text: &str) -> String {
    match status {
        0 => "no answer (connection closed)".to_owned(),
        400..=499 => format!("{status}"),
        200 if text.contains("\"error\"") => "200 with a JSON-RPC error".to_owned(),
        202 => "202 accepted".to_owned(),
        s => format!("{s} (unexpected)"),
    }
}

fn bad_bodies() -> Vec<Vec<u8>> {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    vec![
        b"{".to_vec(),
        b"not json at all".to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"a string"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":{"an":"object"},"method":"tools/call","params":{"name":7}}"#.to_vec(),
        br#"{"jsonrpc":"1.0","id":1,"method":"initialize"}"#.to_vec(),
        b"[]".to_vec(),
        deep.into_bytes(),
        vec![0xff, 0xfe, 0x00, 0x80, 0x7b],
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"\ud800"}}}"#
            .to_vec(),
    ]
}

/// Runs the misbehaving clients until `stop`; bounded by `max` attempts each.
pub fn spawn(aim: Aim, stop: Arc<AtomicBool>, tally: Tally, max: u64) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    let (a, s, t) = (aim.clone(), stop.clone(), tally.clone());
    threads.push(std::thread::spawn(move || {
        let bodies = bad_bodies();
        let sess = session(&a).ok();
        for n in 0..max {
            if s.load(Ordering::Relaxed) {
                break;
            }
            let body = &bodies[n as usize % bodies.len()];
            let with = if n % 2 == 0 { sess.as_deref() } else { None };
            match exchange(&a, body, with) {
                Ok((status, text)) => count(&t, "malformed", kind(status, &text)),
                Err(e) => count(&t, "malformed", format!("io error: {}", e.kind())),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }));
    let (a, s, t) = (aim.clone(), stop.clone(), tally.clone());
    threads.push(std::thread::spawn(move || {
        let big = vec![b' '; 5 * 1024 * 1024];
        for n in 0..max {
            if s.load(Ordering::Relaxed) {
                break;
            }
            if n % 2 == 0 {
                match exchange(&a, &big, None) {
                    Ok((status, text)) => count(&t, "oversized", kind(status, &text)),
                    Err(e) => count(&t, "oversized", format!("io error: {}", e.kind())),
                }
            } else {
                // A length promised and never delivered: the connection is closed after 1 KB.
                let lied = connect(&a).and_then(|mut c| {
                    let h = head(&a, 100_000_000, None, true).into_bytes();
                    c.write_all(&h)?;
                    c.write_all(&[b' '; 1024])
                });
                count(
                    &t,
                    "oversized",
                    if lied.is_ok() { "lying length sent, closed" } else { "lying length: io error" },
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }));
    let (a, s, t) = (aim.clone(), stop.clone(), tally.clone());
    threads.push(std::thread::spawn(move || {
        for n in 0..max {
            if s.load(Ordering::Relaxed) {
                break;
            }
            let Ok(id) = session(&a) else {
                count(&t, "disconnect", "no session");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"exec","arguments":{{"command":"sleep 5"}}}}}}"#
            );
            let sent = connect(&a).and_then(|mut c| {
                c.write_all(head(&a, call.len(), Some(&id), false).as_bytes())?;
                c.write_all(call.as_bytes())?;
                std::thread::sleep(Duration::from_millis(100));
                Ok(())
            });
            count(&t, "disconnect", if sent.is_ok() { "sent, closed after 100 ms" } else { "io error" });
            std::thread::sleep(Duration::from_millis(200));
        }
    }));
    let (a, s, t) = (aim, stop, tally);
    threads.push(std::thread::spawn(move || {
        let Ok(id) = session(&a) else {
            count(&t, "never-read", "no session");
            return;
        };
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"big.txt","max_bytes":262144}}}"#;
        let mut held: std::collections::VecDeque<TcpStream> = Default::default();
        for _ in 0..max {
            if s.load(Ordering::Relaxed) {
                break;
            }
            let opened = connect(&a).and_then(|mut c| {
                c.set_write_timeout(Some(Duration::from_secs(2)))?;
                for _ in 0..20 {
                    c.write_all(head(&a, call.len(), Some(&id), false).as_bytes())?;
                    c.write_all(call.as_bytes())?;
                }
                Ok(c)
            });
            match opened {
                Ok(c) => {
                    count(&t, "never-read", "20 requests sent, answers never read");
                    held.push_back(c);
                }
                Err(e) => count(&t, "never-read", format!("io error: {}", e.kind())),
            }
            if held.len() > 8 {
                held.pop_front();
            }
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until && !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }));
    threads
}
