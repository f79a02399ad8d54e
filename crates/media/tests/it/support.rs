//! A workspace with the media tools, and a loopback HTTP server that records requests.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_core::{CallContext, Content, Tool, ToolError, ToolOutput};
use toolgate_fetch::{AllowPrivate, FetchPolicy, Fetcher};
use toolgate_media::{MediaConfig, Setup};

pub struct Media {
    pub dir: tempfile::TempDir,
    tools: Vec<Arc<dyn Tool>>,
}

impl Media {
    pub fn new() -> Media {
        Media::with(MediaConfig::default(), &[])
    }

    /// The tools with `config`, the fetcher letting through the loopback addresses `allow`.
    pub fn with(config: MediaConfig, allow: &[String]) -> Media {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = toolgate_tools::fs::FsState::new_shared(Default::default()).expect("fs");
        let policy =
            FetchPolicy { allow_private: AllowPrivate::parse(allow).expect("allow"), ..FetchPolicy::default() };
        let fetcher = Fetcher::new(policy).expect("fetcher");
        let tools = toolgate_media::tools(&Setup::new(config, fs, fetcher).with_secrets(Arc::new(Keys)));
        Media { dir, tools }
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    pub async fn call(&self, tool: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let t = self.tools.iter().find(|t| t.spec().name == tool).expect("tool");
        t.execute(&CallContext::new(self.dir.path()), params).await
    }

    pub async fn ok(&self, tool: &str, params: Value) -> ToolOutput {
        match self.call(tool, params.clone()).await {
            Ok(out) => out,
            Err(e) => panic!("{tool} {params}: {e}"),
        }
    }

    pub async fn err(&self, tool: &str, params: Value) -> String {
        match self.call(tool, params.clone()).await {
            Ok(out) => panic!("{tool} {params} should fail, got {}", out.text_content()),
            Err(e) => e.to_string(),
        }
    }
}

/// The key the provider tests use, found under [`KEY_NAME`] in the (test's) secrets store.
pub const KEY: &str = "sk-test-secret-0123456789abcdef";
pub const KEY_NAME: &str = "TOOLGATE_MEDIA_TEST_KEY";

#[derive(Debug)]
struct Keys;

impl toolgate_tools::custom::SecretSource for Keys {
    fn secret(&self, name: &str) -> Result<Option<String>, String> {
        Ok((name == KEY_NAME).then(|| KEY.to_owned()))
    }
}

pub fn images(out: &ToolOutput) -> Vec<(&str, &str)> {
    out.content
        .iter()
        .filter_map(|c| match c {
            Content::Image { data, mime_type } => Some((mime_type.as_str(), data.as_str())),
            _ => None,
        })
        .collect()
}

/// A PNG of `w` × `h` with a gradient.
pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x % 256) as u8, (y % 256) as u8, 128]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .expect("png");
    out
}

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
}

type Answer = Arc<dyn Fn(&Seen) -> (u16, &'static str, Vec<u8>) + Send + Sync>;

/// An HTTP/1.1 server on 127.0.0.1 answering every request with `answer`.
pub struct Server {
    pub addr: std::net::SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub async fn start(answer: impl Fn(&Seen) -> (u16, &'static str, Vec<u8>) + Send + Sync + 'static) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Answer = Arc::new(answer);
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let answer = Arc::clone(&answer);
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else { return };
                    let (status, ctype, body) = answer(&req);
                    log.lock().expect("log").push(req);
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(&body).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Server { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))).collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen { method, path, headers, body })
}

/// `sox --i` of a file: (channels, sample rate, duration line).
pub fn sox_info(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sox").arg("--i").arg(path).output().expect("sox --i");
    assert!(out.status.success(), "sox --i {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}
