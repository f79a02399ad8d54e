//! Sequential `echo` round trips through MCP, from a small rmcp client: `toolgate serve` over
//! stdio and over Streamable HTTP, and the reference server
//! `@modelcontextprotocol/server-everything` (installed by `cargo xtask deps` into
//! `.cache/peers/npm`) over the same two transports, measured in the same run and reported as
//! ratios. `toolgate serve` runs its whole pipeline, audit log included.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;

const CALLS: usize = 2_000;
const WARMUP: usize = 200;
const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

struct Figures {
    median: Duration,
    p99: Duration,
    per_sec: f64,
}

async fn measure<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
) -> Figures {
    let args = json!({"message": "hello from the benchmark"}).as_object().cloned().unwrap_or_default();
    let call = || client.call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()));
    for _ in 0..WARMUP {
        call().await.expect("echo");
    }
    let mut times = Vec::with_capacity(CALLS);
    let start = Instant::now();
    for _ in 0..CALLS {
        let t = Instant::now();
        let result = call().await.expect("echo");
        assert_ne!(result.is_error, Some(true), "echo failed: {result:?}");
        times.push(t.elapsed());
    }
    let total = start.elapsed();
    times.sort();
    Figures { median: times[CALLS / 2], p99: times[CALLS * 99 / 100], per_sec: CALLS as f64 / total.as_secs_f64() }
}

async fn over_stdio(mut command: tokio::process::Command) -> Figures {
    command.stderr(Stdio::null());
    let transport = TokioChildProcess::new(command).expect("spawn the server");
    let client = ().serve(transport).await.expect("initialize over stdio");
    let figures = measure(&client).await;
    let _ = client.cancel().await;
    figures
}

async fn over_http(url: &str, token: Option<&str>) -> Figures {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let client = ().serve(transport).await.expect("initialize over HTTP");
    let figures = measure(&client).await;
    let _ = client.cancel().await;
    figures
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `toolgate serve --http 127.0.0.1:0`; returns the process, URL and token.
fn toolgate_http(workspace: &Path) -> (Killed, String, String) {
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(workspace)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolgate serve --http");
    let stderr = child.stderr.take().expect("stderr");
    let mut url = None;
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    for line in lines.by_ref() {
        if let Some(u) = line.split_whitespace().find(|w| w.starts_with("http://") && w.ends_with("/mcp")) {
            url = Some(u.to_owned());
            break;
        }
    }
    // Keep reading: the server must not write into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let token = std::fs::read_to_string(workspace.join(".toolgate/http-token")).expect("token").trim().to_owned();
    (Killed(child), url.expect("toolgate printed its URL"), token)
}

fn everything() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.cache/peers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    path.exists().then_some(path)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn everything_http(script: &Path) -> (Killed, String) {
    let port = free_port();
    let child = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything streamableHttp");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}

fn row(name: &str, f: &Figures, peer: Option<&Figures>) {
    let ratio = peer.map_or_else(|| "-".to_owned(), |p| format!("{:.2}x", f.per_sec / p.per_sec));
    println!(
        "| {name} | {:.1} µs | {:.1} µs | {:.0} | {ratio} |",
        f.median.as_secs_f64() * 1e6,
        f.p99.as_secs_f64() * 1e6,
        f.per_sec
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temporary workspace");
    // Rate limiting stays on (it is part of the pipeline measured), with a limit the run cannot reach.
    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[rate_limits.tools]\necho = { per_minute = 4294967295, per_hour = 4294967295 }\n",
    )
    .expect("write toolgate.toml");
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(TOOLGATE);
        cmd.arg("--workspace").arg(dir.path()).arg("serve");
        let tg_stdio = over_stdio(cmd).await;
        let (_server, url, token) = toolgate_http(dir.path());
        let tg_http = over_http(&url, Some(&token)).await;

        let (ev_stdio, ev_http) = match everything() {
            Some(script) => {
                let mut cmd = tokio::process::Command::new("node");
                cmd.arg(&script).arg("stdio");
                let stdio = over_stdio(cmd).await;
                let (_server, url) = everything_http(&script);
                let http = over_http(&url, None).await;
                (Some(stdio), Some(http))
            }
            None => {
                eprintln!("server-everything is not installed (run `cargo xtask deps`): no peer ratios");
                (None, None)
            }
        };
        println!("{CALLS} sequential echo calls after {WARMUP} warm-up calls; ratio = calls/s of toolgate / peer");
        println!("| server, transport | median | p99 | calls/s | vs server-everything |");
        println!("|---|---|---|---|---|");
        row("toolgate serve, stdio", &tg_stdio, ev_stdio.as_ref());
        row("toolgate serve, Streamable HTTP", &tg_http, ev_http.as_ref());
        if let (Some(s), Some(h)) = (&ev_stdio, &ev_http) {
            row("server-everything 2026.8.31, stdio", s, None);
            row("server-everything 2026.8.31, Streamable HTTP", h, None);
        }
    });
}
