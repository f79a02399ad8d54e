//! Signed requests to `toolgate serve --http`'s `/hooks` routes, built the way a sender would:
//! the HMAC by Python (independent of toolgate's code) and a raw HTTP/1.1 POST (so a test
//! controls every header and byte).
#![allow(clippy::unwrap_used, dead_code)] // tests fail loudly on purpose; each test binary uses a part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

/// Hex HMAC-SHA256 of `message` under `key`, computed by Python.
pub fn python_hmac(key: &str, message: &str) -> String {
    let script = "import hmac, hashlib, sys\n\
                  print(hmac.new(sys.argv[1].encode(), sys.stdin.buffer.read(), hashlib.sha256).hexdigest())";
    let mut child = Command::new("python3")
        .args(["-c", script, key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(message.as_bytes()).unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_owned()
}

/// A raw HTTP/1.1 POST of a JSON `body` to `path` on `url`'s authority: the status (0 when no
/// answer could be read) and the body.
pub fn post(url: &str, path: &str, headers: &[(&str, String)], body: &str) -> (u16, String) {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut s = TcpStream::connect(authority).unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    // A refused large body may be answered before it is all read.
    let _ = s.write_all(req.as_bytes());
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
}
