//! A real HTTP/1.1 server on loopback (port 0) for the fetcher's tests: raw responses, so a
//! test controls every byte (bombs, slow bodies, odd redirects), and a log of what arrived.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server answers.
pub enum Reply {
    /// Status line + headers + body, as given (Content-Length added).
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// Headers, then the body one byte per `every`.
    Slow { body: Vec<u8>, every: Duration },
}

impl Reply {
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Full { status: 200, headers: vec![("content-type".into(), content_type.into())], body: body.into() }
    }
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::Full { status, headers: vec![("location".into(), location.into())], body: Vec::new() }
    }
    pub fn with_header(mut self, k: &str, v: &str) -> Reply {
        if let Reply::Full { headers, .. } = &mut self {
            headers.push((k.into(), v.into()));
        }
        self
    }
}

/// One request as received: the request line and the raw header block.
#[derive(Debug, Clone)]
pub struct Seen {
    pub line: String,
    pub head: String,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

pub type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

pub struct Server {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub connections: Arc<Mutex<usize>>,
    /// Set when a slow body's write failed (the client closed the connection).
    pub closed_early: Arc<Mutex<bool>>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    pub fn allow(&self) -> String {
        self.addr.to_string()
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

pub async fn serve(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Server {
    serve_on("127.0.0.1:0", handler).await
}

pub async fn serve_on(at: &str, handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind(at).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler: Handler = Arc::new(handler);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(Mutex::new(0));
    let closed_early = Arc::new(Mutex::new(false));
    let (s, c, e) = (seen.clone(), connections.clone(), closed_early.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            *c.lock().unwrap() += 1;
            let (handler, seen, closed) = (handler.clone(), s.clone(), e.clone());
            tokio::spawn(async move {
                loop {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i;
                        }
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let line = head.lines().next().unwrap_or_default().to_owned();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
                        .and_then(|(_, v)| v.trim().parse().ok())
                        .unwrap_or(0);
                    let mut body = buf[head_end + 4..].to_vec();
                    while body.len() < length {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => body.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
                    seen.lock().unwrap().push(Seen { line, head, body });
                    match handler(&path) {
                        Reply::Full { status, headers, body } => {
                            let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                            for (k, v) in headers {
                                out.push_str(&format!("{k}: {v}\r\n"));
                            }
                            out.push_str("\r\n");
                            let mut bytes = out.into_bytes();
                            bytes.extend_from_slice(&body);
                            if stream.write_all(&bytes).await.is_err() {
                                return;
                            }
                        }
                        Reply::Slow { body, every } => {
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            if stream.write_all(head.as_bytes()).await.is_err() {
                                return;
                            }
                            for b in body {
                                tokio::time::sleep(every).await;
                                if stream.write_all(&[b]).await.is_err() || stream.flush().await.is_err() {
                                    *closed.lock().unwrap() = true;
                                    return;
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    Server { addr, seen, connections, closed_early }
}
