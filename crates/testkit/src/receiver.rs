//! A loopback HTTP/1.1 receiver for the tests whose product sends requests out (webhooks,
//! notifiers, a model provider, a guest's HTTP calls, a forward proxy): it keeps every request
//! (method, path, headers, raw body) and answers each with a [`Response`] the test chooses.
//!
//! Each connection has its own thread, so requests are answered at once and an answer may block
//! (sleep, wait for another request) without holding up the rest. A body is read by its
//! `Content-Length`, which is what the clients under test send. The listener stops when the
//! [`Receiver`] is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target as sent: a path with its query, or a whole URL when the client took
    /// the receiver for a forward proxy.
    pub path: String,
    /// Every header in the order sent, names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body, `Content-Length` bytes of it.
    pub body: Vec<u8>,
    /// The request line and headers as they came, up to and including the blank line.
    pub head: String,
}

impl Request {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; a body that is not JSON fails the test, showing it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("the body of {} {} is not JSON ({e}): {}", self.method, self.path, self.body_text())
        })
    }

    /// The whole request as text: head, then body.
    pub fn text(&self) -> String {
        format!("{}{}", self.head, self.body_text())
    }
}

/// What the receiver answers. It sends `Content-Length` (but for a 204), and `Connection: close`
/// unless [`Response::keep_alive`] was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    keep_alive: bool,
}

impl Response {
    /// `status` with no body.
    pub fn new(status: u16) -> Response {
        Response { status, headers: Vec::new(), body: Vec::new(), keep_alive: false }
    }

    /// `status` with a `text/plain` body.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::new(status).header("content-type", "text/plain").body(body.into())
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Response {
        self.body = body.into();
        self
    }

    /// Keeps the connection open for the client's next request, as a pooled client expects.
    pub fn keep_alive(mut self) -> Response {
        self.keep_alive = true;
        self
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        // A 204 has no body and must not say it has one (RFC 9110 8.6).
        if self.status != 204 {
            out.push_str(&format!("content-length: {}\r\n", self.body.len()));
        }
        if !self.keep_alive {
            out.push_str("connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// A reason phrase (clients read the code; the phrase is for people reading a capture).
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        302 => "Found",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Turns a request into its response; runs on the request's connection thread.
type Answer = dyn Fn(&Request) -> Response + Send + Sync;

/// The requests so far, and how many [`Receiver::next`] has handed out.
#[derive(Debug, Default)]
struct Log {
    all: Vec<Request>,
    taken: usize,
}

/// The log and the signal that it grew.
type Shared = Arc<(Mutex<Log>, Condvar)>;

/// A listening receiver on `127.0.0.1`, a free port; stops listening on drop.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    log: Shared,
    stopped: Arc<AtomicBool>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag and lets the port go.
        let _ = TcpStream::connect(self.addr);
    }
}

impl Receiver {
    /// A receiver that answers every request with `response`.
    pub fn answering(response: Response) -> Receiver {
        Receiver::start(move |_| response.clone())
    }

    /// A receiver that answers each request with `answer(request)`. The request is kept before
    /// `answer` runs, so a test can see it while the answer waits.
    pub fn start(answer: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a loopback receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let log: Shared = Arc::default();
        let stopped = Arc::new(AtomicBool::new(false));
        let answer: Arc<Answer> = Arc::new(answer);
        let (kept, stop) = (log.clone(), stopped.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (log, answer) = (kept.clone(), answer.clone());
                std::thread::spawn(move || serve(stream, &log, &*answer));
            }
        });
        Receiver { addr, log, stopped }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.log).all.clone()
    }

    /// The oldest request that `next` has not handed out yet, waiting up to `wait` for one to
    /// arrive (`Duration::ZERO`: only what has come already).
    pub fn next(&self, wait: Duration) -> Option<Request> {
        let deadline = Instant::now() + wait;
        let (_, grew) = &*self.log;
        let mut log = lock(&self.log);
        loop {
            if let Some(request) = log.all.get(log.taken).cloned() {
                log.taken += 1;
                return Some(request);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            log = grew.wait_timeout(log, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

fn lock(log: &Shared) -> MutexGuard<'_, Log> {
    log.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers the requests on one connection until the client closes it or a response closes it.
fn serve(stream: TcpStream, log: &Shared, answer: &Answer) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let close = request.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        lock(log).all.push(request.clone());
        log.1.notify_all();
        let response = answer(&request);
        if out.write_all(&response.to_bytes()).is_err() || close || !response.keep_alive {
            return;
        }
    }
}

/// The next request on the connection; `None` when it closed (or broke) before a whole one came.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut head = String::new();
    loop {
        let before = head.len();
        if reader.read_line(&mut head).ok()? == 0 {
            return None;
        }
        let line = &head[before..];
        if line == "\r\n" || line == "\n" {
            // Blank lines before a request line are allowed (RFC 9112 2.2); after it, the end.
            if before == 0 {
                head.clear();
                continue;
            }
            break;
        }
    }
    let mut lines = head.lines();
    let mut start = lines.next()?.split(' ');
    let method = start.next()?.to_owned();
    let path = start.next().unwrap_or("/").to_owned();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))).collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { method, path, headers, body, head })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `raw` on one connection and reads until the server closes it.
    fn exchange(receiver: &Receiver, raw: &[u8]) -> String {
        let mut stream = TcpStream::connect(receiver.addr()).expect("connect");
        stream.write_all(raw).expect("send");
        let mut got = String::new();
        stream.read_to_string(&mut got).expect("read");
        got
    }

    #[test]
    fn a_request_is_kept_whole_and_answered() {
        let receiver = Receiver::start(|r| Response::text(201, format!("got {}", r.body.len())).header("x-seen", "1"));
        let got =
            exchange(&receiver, b"POST /hook?a=1 HTTP/1.1\r\nHost: x\r\nX-Sig: abc\r\nContent-Length: 5\r\n\r\nhello");
        assert!(got.starts_with("HTTP/1.1 201 "), "{got}");
        assert!(got.contains("x-seen: 1\r\n") && got.contains("content-length: 5\r\n"), "{got}");
        assert!(got.contains("connection: close\r\n") && got.ends_with("\r\n\r\ngot 5"), "{got}");
        let request = receiver.next(Duration::ZERO).expect("kept");
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/hook?a=1"));
        assert_eq!(request.header("x-sig"), Some("abc"));
        assert_eq!(request.body, b"hello");
        assert!(request.text().starts_with("POST /hook?a=1 HTTP/1.1\r\nHost: x\r\n"), "{}", request.text());
        assert!(request.text().ends_with("\r\n\r\nhello"));
        assert_eq!(receiver.next(Duration::ZERO), None, "one request, handed out once");
        assert_eq!(receiver.requests(), vec![request]);
    }

    #[test]
    fn a_body_split_across_packets_is_read_to_its_length() {
        let receiver = Receiver::answering(Response::new(204));
        let mut stream = TcpStream::connect(receiver.addr()).expect("connect");
        stream.write_all(b"PUT /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234").expect("send");
        stream.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(50));
        stream.write_all(b"56789").expect("send");
        let mut got = String::new();
        stream.read_to_string(&mut got).expect("read");
        assert!(got.starts_with("HTTP/1.1 204 "), "{got}");
        assert_eq!(receiver.next(Duration::from_secs(5)).expect("kept").body, b"0123456789");
    }

    #[test]
    fn a_kept_alive_connection_carries_several_requests() {
        let receiver = Receiver::start(|r| Response::text(200, r.path.clone()).keep_alive());
        let mut stream = TcpStream::connect(receiver.addr()).expect("connect");
        stream.write_all(b"GET /one HTTP/1.1\r\n\r\nGET /two HTTP/1.1\r\nConnection: close\r\n\r\n").expect("send");
        let mut got = String::new();
        stream.read_to_string(&mut got).expect("read");
        assert!(got.contains("\r\n\r\n/one") && got.ends_with("\r\n\r\n/two"), "{got}");
        assert!(!got.contains("connection: close"), "{got}");
        let paths: Vec<String> = receiver.requests().into_iter().map(|r| r.path).collect();
        assert_eq!(paths, ["/one", "/two"]);
    }

    #[test]
    fn next_waits_for_a_request_and_gives_up_when_none_comes() {
        let receiver = Receiver::answering(Response::new(200));
        assert_eq!(receiver.next(Duration::from_millis(20)), None);
        let url = receiver.addr();
        let sender = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(url).expect("connect");
            stream.write_all(b"GET /late HTTP/1.1\r\n\r\n").expect("send");
            let _ = stream.read_to_end(&mut Vec::new());
        });
        assert_eq!(receiver.next(Duration::from_secs(20)).expect("it came").path, "/late");
        sender.join().expect("sender");
    }

    #[test]
    fn a_dropped_receiver_lets_its_port_go() {
        let receiver = Receiver::answering(Response::new(200));
        let addr = receiver.addr();
        drop(receiver);
        // The accept loop ends after the wake-up connection; the port is then free to bind.
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpListener::bind(addr).is_err() {
            assert!(Instant::now() < deadline, "{addr} is still taken");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
