//! Pages served on loopback, a listener that counts connections, and a pool that may reach the
//! page server's exact port (`allow_private`), nothing else private.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolgate_browser::{BrowserConfig, Browsers};
use toolgate_fetch::{AllowPrivate, FetchPolicy, Fetcher};

/// One response: status line, extra headers, body.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

pub fn html(body: &str) -> Reply {
    Reply {
        status: "200 OK",
        headers: vec![("Content-Type".into(), "text/html; charset=utf-8".into())],
        body: body.to_owned(),
    }
}

pub fn redirect(to: &str) -> Reply {
    Reply { status: "302 Found", headers: vec![("Location".into(), to.to_owned())], body: String::new() }
}

/// A page server on 127.0.0.1:PORT. A path that is not in `pages` never answers (a page that
/// never finishes loading is `/hang`).
pub async fn serve(pages: HashMap<&'static str, Reply>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let pages = Arc::new(pages);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let pages = Arc::clone(&pages);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_owned();
                let Some(reply) = pages.get(path.as_str()).cloned() else {
                    // Never answers: held open until the client goes.
                    let _ = stream.read(&mut chunk).await;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                };
                let mut out = format!(
                    "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&reply.body);
                let _ = stream.write_all(out.as_bytes()).await;
            });
        }
    });
    addr
}

/// A listener that only counts the connections it gets.
pub async fn counting_listener() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (addr, count)
}

pub fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

/// A pool whose browser may reach `allowed` (exact address and port) and public addresses.
pub fn browsers(dir: &Path, allowed: &[SocketAddr]) -> Browsers {
    let entries: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
    let policy = FetchPolicy { allow_private: AllowPrivate::parse(&entries).expect("allow"), ..FetchPolicy::default() };
    let fetcher = Fetcher::new(policy).expect("fetcher");
    Browsers::new(BrowserConfig::new(dir.join(".toolgate/browser"), fetcher))
}

/// Processes whose command line mentions `dir` (the profile folders are under it).
pub fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push((pid, cmdline.chars().take(120).collect()));
        }
    }
    found
}

/// Waits (with a deadline) until no process mentions `dir`.
pub async fn no_processes_left(dir: &Path) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let left = processes_under(dir);
        if left.is_empty() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "browser processes left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().canonicalize().expect("canonical");
    (dir, path)
}
