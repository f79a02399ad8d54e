//! MCP round trips, toolgate against the reference servers, in one run (`cargo xtask bench mcp`,
//! or `cargo bench -p toolgate-cli --bench mcp [-- SECTION...]`, SECTION one of `echo-rmcp`,
//! `echo-python`, `read`, `bridge-sandbox`):
//!
//! - `echo-rmcp`: sequential `echo` calls from a small rmcp client against `toolgate serve` and
//!   `@modelcontextprotocol/server-everything`, over stdio and Streamable HTTP;
//! - `echo-python`: the same from the official MCP Python SDK (`benches/mcp_client.py`);
//! - `read`: the same 100 KB text file through toolgate's `read` and through
//!   `@modelcontextprotocol/server-filesystem`'s `read_text_file`, over stdio, rmcp client;
//! - `bridge-sandbox`: server-everything bridged through a `Gate` (`[mcp.servers.NAME]`), its
//!   start and `echo` calls with toolgate's sandbox on and off, and its start under `bwrap`
//!   against plain, from the rmcp client (`mcp/bridge_sandbox.rs`; the toolgate start figures
//!   include the gate's own connect path).
//!
//! The servers of a section are all connected first and then take turns (rounds of calls), so
//! load from other work on the machine falls on all of them alike. The rmcp client runs on a
//! current-thread runtime, to keep its own share of each round trip small. `toolgate serve` runs its
//! whole pipeline, audit log included; each toolgate server has its own workspace. The peers
//! are installed by `cargo xtask deps`; a missing one fails the run.
//!
//! `TOOLGATE_BENCH_BIN=PATH` measures another `toolgate` build instead of the one cargo built;
//! `TOOLGATE_BENCH_COMPARE=PATH` adds a second build's rows to `echo-rmcp` (before/after in one
//! run, on the same load).

#![allow(clippy::unwrap_used, clippy::expect_used)]

// Beside this file, in a folder cargo does not take for benchmarks of their own.
#[path = "mcp/bridge_sandbox.rs"]
mod bridge_sandbox;
#[path = "mcp/python.rs"]
mod python;
#[path = "mcp/servers.rs"]
mod servers;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use python::Endpoint;
use toolgate_benchkit::summary::{self, Row};

/// Warm-up calls per server, then rounds × calls measured per server.
const ECHO: Plan = Plan { warmup: 200, rounds: 5, calls: 400 };
const ECHO_PYTHON: Plan = Plan { warmup: 50, rounds: 5, calls: 100 };
const READ: Plan = Plan { warmup: 20, rounds: 5, calls: 40 };

/// The file read: 1,250 lines of 80 bytes.
const READ_FILE: &str = "bench-100k.txt";
const READ_LINES: usize = 1_250;
const READ_BYTES: usize = 100_000;

struct Plan {
    warmup: usize,
    rounds: usize,
    calls: usize,
}

/// Every call's round-trip time, and their sum (calls/s is calls over the sum).
#[derive(Debug)]
pub struct Samples {
    times: Vec<Duration>,
    elapsed: Duration,
    /// The size of one result as JSON, where measured.
    bytes: Option<usize>,
}

struct Figures {
    min: Duration,
    median: Duration,
    p99: Duration,
    per_sec: f64,
}

impl Samples {
    fn figures(&self) -> Figures {
        let mut t = self.times.clone();
        t.sort();
        let n = t.len();
        Figures { min: t[0], median: t[n / 2], p99: t[n * 99 / 100], per_sec: n as f64 / self.elapsed.as_secs_f64() }
    }
}

type Client = RunningService<RoleClient, ()>;

/// One tool call and what its result must show.
struct Call {
    tool: &'static str,
    args: serde_json::Map<String, Value>,
    check: fn(&CallToolResult),
}

struct Target<'a> {
    client: &'a Client,
    call: &'a Call,
}

/// One call, timed from sending the request to having the parsed result; checked afterwards.
async fn call_once(target: &Target<'_>) -> (Duration, CallToolResult) {
    let request = CallToolRequestParams::new(target.call.tool).with_arguments(target.call.args.clone());
    let start = Instant::now();
    let result = target.client.call_tool(request).await.expect("tools/call");
    let took = start.elapsed();
    (target.call.check)(&result);
    (took, result)
}

/// Warms every target up, then runs the rounds, targets taking turns.
async fn interleaved(targets: &[Target<'_>], plan: &Plan) -> Vec<Samples> {
    for target in targets {
        for _ in 0..plan.warmup {
            call_once(target).await;
        }
    }
    let mut samples: Vec<Samples> = targets
        .iter()
        .map(|_| Samples { times: Vec::with_capacity(plan.rounds * plan.calls), elapsed: Duration::ZERO, bytes: None })
        .collect();
    for _ in 0..plan.rounds {
        for (target, s) in targets.iter().zip(&mut samples) {
            let mut last = None;
            for _ in 0..plan.calls {
                let (took, result) = call_once(target).await;
                s.times.push(took);
                s.elapsed += took;
                last = Some(result);
            }
            s.bytes = last.map(|r| serde_json::to_vec(&r).map_or(0, |v| v.len()));
        }
    }
    samples
}

async fn connect_stdio(command: &[String]) -> Client {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().expect("spawn the server");
    ().serve(transport).await.expect("initialize over stdio")
}

async fn connect_http(url: &str, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.expect("initialize over HTTP")
}

/// A fresh workspace for one toolgate server. Rate limiting stays on (it is part of the
/// pipeline measured) with limits the run cannot reach; the output cap is raised above the
/// numbered 100 KB file so `read` returns all of it.
///
/// The benchmark repeats one call on purpose: no rate limit, and no loop breaker (which refuses
/// the fourth identical call in a row).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[gate]\nmax_output_bytes = 262144\n\n[loop_breaker]\nenabled = false\n\n[rate_limits.tools]\n\
         echo = { per_minute = 4294967295, per_hour = 4294967295 }\n\
         read = { per_minute = 4294967295, per_hour = 4294967295 }\n",
    )
    .expect("write toolgate.toml");
    dir
}

fn echo_call() -> Call {
    let args = json!({"message": "hello from the benchmark"}).as_object().cloned().unwrap_or_default();
    Call { tool: "echo", args, check: |r| assert_ne!(r.is_error, Some(true), "echo failed: {r:?}") }
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect()
}

/// The whole file must come back: first and last line, and at least its size in text.
fn check_read(result: &CallToolResult) {
    assert_ne!(result.is_error, Some(true), "read failed: {}", text_of(result));
    let text = text_of(result);
    assert!(
        text.len() >= READ_BYTES && text.contains(&line(0)) && text.contains(&line(READ_LINES - 1)),
        "the read did not return the whole file ({} bytes): {}",
        text.len(),
        &text[text.len().saturating_sub(300)..]
    );
}

/// Line `i` of the read file: 79 characters of prose-like words and a newline's worth.
fn line(i: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "gate",
        "checks",
        "every",
        "call",
        "against",
        "policy",
        "before",
        "a",
        "tool",
        "runs",
        "and",
        "records",
        "what",
        "it",
        "did",
        "in",
        "audit",
        "log",
        "workspace",
        "file",
        "reads",
        "are",
        "confined",
        "to",
        "one",
        "tree",
    ];
    let mut out = format!("{i:05}");
    let mut k = i.wrapping_mul(2_654_435_761);
    while out.len() < 79 {
        k = k.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        out.push(' ');
        out.push_str(WORDS[(k >> 33) % WORDS.len()]);
    }
    out.truncate(79);
    out
}

fn write_read_file(dir: &Path) -> PathBuf {
    let text: String = (0..READ_LINES).map(|i| line(i) + "\n").collect();
    assert_eq!(text.len(), READ_BYTES);
    let path = dir.join(READ_FILE);
    std::fs::write(&path, text).expect("write the file to read");
    path
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Prints a table of `rows` (name, samples, index of the peer row or none).
fn table(rows: &[(&str, &Samples, Option<usize>)]) {
    let figures: Vec<Figures> = rows.iter().map(|(_, s, _)| s.figures()).collect();
    let bytes = rows.iter().any(|(_, s, _)| s.bytes.is_some());
    println!(
        "| server, transport | min | median | p99 | calls/s |{} toolgate vs peer: median | calls/s |",
        if bytes { " result bytes |" } else { "" }
    );
    println!("|---|---|---|---|---|{}---|---|", if bytes { "---|" } else { "" });
    for ((name, s, peer), f) in rows.iter().zip(&figures) {
        let (by_median, by_rate) = match peer {
            Some(p) => {
                let p = &figures[*p];
                (
                    format!("{:.2}x", p.median.as_secs_f64() / f.median.as_secs_f64()),
                    format!("{:.2}x", f.per_sec / p.per_sec),
                )
            }
            None => ("-".to_owned(), "-".to_owned()),
        };
        let size = if bytes {
            format!(" {} |", s.bytes.map_or_else(|| "-".to_owned(), |b| b.to_string()))
        } else {
            String::new()
        };
        println!(
            "| {name} | {} | {} | {} | {:.0} |{size} {by_median} | {by_rate} |",
            us(f.min),
            us(f.median),
            us(f.p99),
            f.per_sec
        );
    }
    println!();
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".to_owned(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Connects to `binary` serving a fresh workspace over stdio and over HTTP.
async fn toolgate_pair(binary: &str) -> ([Client; 2], servers::HttpServer, [tempfile::TempDir; 2]) {
    let (ws_stdio, ws_http) = (workspace(), workspace());
    let stdio = connect_stdio(&servers::toolgate_stdio(binary, ws_stdio.path())).await;
    let process = servers::toolgate_http(binary, ws_http.path());
    let http = connect_http(&process.url, process.token.as_deref()).await;
    ([stdio, http], process, [ws_stdio, ws_http])
}

async fn echo_rmcp() {
    let ([tg_stdio, tg_http], _tg, _ws) = toolgate_pair(&servers::toolgate()).await;
    let ev_stdio = connect_stdio(&servers::everything_stdio()).await;
    let (_ev, ev_url) = servers::everything_http();
    let ev_http = connect_http(&ev_url, None).await;
    let mut clients = vec![
        ("toolgate serve, stdio".to_owned(), tg_stdio, Some(2)),
        ("toolgate serve, Streamable HTTP".to_owned(), tg_http, Some(3)),
        ("server-everything, stdio".to_owned(), ev_stdio, None),
        ("server-everything, Streamable HTTP".to_owned(), ev_http, None),
    ];
    let compare = servers::toolgate_compare();
    let mut _compared = None;
    if let Some(binary) = &compare {
        let ([stdio, http], process, ws) = toolgate_pair(binary).await;
        clients.push((format!("{binary} serve, stdio"), stdio, Some(2)));
        clients.push((format!("{binary} serve, Streamable HTTP"), http, Some(3)));
        _compared = Some((process, ws));
    }
    let echo = echo_call();
    let targets: Vec<Target<'_>> = clients.iter().map(|(_, client, _)| Target { client, call: &echo }).collect();
    let plan = if toolgate_benchkit::quick() { Plan { rounds: 2, ..ECHO } } else { ECHO };
    let s = interleaved(&targets, &plan).await;
    println!(
        "### echo, rmcp 3.9.0 client: {} rounds of {} sequential calls per server, after {} warm-up calls\n",
        plan.rounds, plan.calls, plan.warmup
    );
    let rows: Vec<(&str, &Samples, Option<usize>)> =
        clients.iter().zip(&s).map(|((name, _, peer), s)| (name.as_str(), s, *peer)).collect();
    table(&rows);
    for (transport, ours, peer, times) in [("stdio", 0, 2, 3.0), ("Streamable HTTP", 1, 3, 10.0)] {
        let (ours, peer) = (s[ours].figures(), s[peer].figures());
        Row::new(format!("MCP echo over {transport} (rmcp client), calls/s"), ours.per_sec, "calls/s")
            .peer("server-everything", peer.per_sec)
            .target(summary::Target::RatioAtLeast(times))
            .emit();
    }
    drop(targets);
    for (_, client, _) in clients {
        let _ = client.cancel().await;
    }
}

fn echo_python() {
    let (ws_stdio, ws_http) = (workspace(), workspace());
    let toolgate = servers::toolgate();
    let tg = servers::toolgate_http(&toolgate, ws_http.path());
    let (url, token) = (tg.url.clone(), tg.token.clone().expect("the server's token"));
    let (_ev, ev_url) = servers::everything_http();
    let targets = [
        ("toolgate serve, stdio", Endpoint::Stdio(servers::toolgate_stdio(&toolgate, ws_stdio.path()))),
        ("toolgate serve, Streamable HTTP", Endpoint::Http { url, token: Some(token) }),
        ("server-everything, stdio", Endpoint::Stdio(servers::everything_stdio())),
        ("server-everything, Streamable HTTP", Endpoint::Http { url: ev_url, token: None }),
    ];
    let p = &if toolgate_benchkit::quick() { Plan { rounds: 2, ..ECHO_PYTHON } } else { ECHO_PYTHON };
    let args = json!({"message": "hello from the benchmark"});
    let s = python::run("echo", &args, p.warmup, p.rounds, p.calls, &targets);
    for (transport, ours, peer) in [("stdio", 0, 2), ("Streamable HTTP", 1, 3)] {
        let (ours, peer) = (s[ours].figures(), s[peer].figures());
        Row::new(format!("MCP echo over {transport} (Python SDK client), calls/s"), ours.per_sec, "calls/s")
            .peer("server-everything", peer.per_sec)
            .emit();
    }
    println!(
        "### echo, Python SDK client (mcp 2.3.0, mode=\"legacy\"): {} rounds of {} sequential calls per server, after {} warm-up calls\n",
        p.rounds, p.calls, p.warmup
    );
    table(&[
        (targets[0].0, &s[0], Some(2)),
        (targets[1].0, &s[1], Some(3)),
        (targets[2].0, &s[2], None),
        (targets[3].0, &s[3], None),
    ]);
}

async fn read() {
    let ws = workspace();
    let file = write_read_file(ws.path());
    let tg = connect_stdio(&servers::toolgate_stdio(&servers::toolgate(), ws.path())).await;
    let fs = connect_stdio(&servers::filesystem_stdio(ws.path())).await;
    // The page is raised above the file (default 50 KiB); the line limit (2,000) already is.
    let tg_call = Call {
        tool: "read",
        args: json!({"path": READ_FILE, "max_bytes": 262_144}).as_object().cloned().unwrap_or_default(),
        check: check_read,
    };
    let fs_call = Call {
        tool: "read_text_file",
        args: json!({"path": file.display().to_string()}).as_object().cloned().unwrap_or_default(),
        check: check_read,
    };
    let targets = [Target { client: &tg, call: &tg_call }, Target { client: &fs, call: &fs_call }];
    let s = interleaved(&targets, &READ).await;
    println!(
        "### read a {READ_BYTES}-byte text file ({READ_LINES} lines), rmcp client, stdio: {} rounds of {} sequential calls per server, after {} warm-up calls\n",
        READ.rounds, READ.calls, READ.warmup
    );
    table(&[
        ("toolgate serve `read`, stdio", &s[0], Some(1)),
        ("server-filesystem `read_text_file`, stdio", &s[1], None),
    ]);
    // What a result costs on the wire beyond its text (docs/mcp.md, "Results"): the text is
    // the result; a structured copy is sent only by tools that list an output schema.
    println!("Bytes of one result, JSON as sent (content / structuredContent / _meta):\n");
    let time = json!({"operation": "parse", "timestamp": "2026-11-27T14:00:00Z"});
    for (name, client, tool, args) in [
        ("toolgate `read`", &tg, "read", json!({"path": READ_FILE, "max_bytes": 262_144})),
        ("server-filesystem `read_text_file`", &fs, "read_text_file", json!({"path": file.display().to_string()})),
        ("toolgate `time`", &tg, "time", time),
    ] {
        let request = CallToolRequestParams::new(tool).with_arguments(args.as_object().cloned().unwrap_or_default());
        let result = client.call_tool(request).await.expect("tools/call");
        let size = |v: Option<serde_json::Value>| v.map_or(0, |v| v.to_string().len());
        let wire = serde_json::to_value(&result).expect("a result serializes");
        println!(
            "- {name}: {} / {} / {} bytes",
            size(wire.get("content").cloned()),
            size(wire.get("structuredContent").cloned()),
            size(wire.get("_meta").cloned())
        );
    }
    println!();
    let _ = tg.cancel().await;
    let _ = fs.cancel().await;
}

fn main() {
    // reqwest is built with `rustls-no-provider` in this workspace; loopback HTTP needs no TLS,
    // but building a client needs a provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |section: &str| filters.is_empty() || filters.iter().any(|f| section.contains(f.as_str()));
    let node = std::process::Command::new(servers::node()).arg("--version").output().expect("run node");
    println!(
        "MCP benchmark: server-everything {}, server-filesystem {}, Node {}, load average at start {}\n",
        servers::npm_version("@modelcontextprotocol/server-everything"),
        servers::npm_version("@modelcontextprotocol/server-filesystem"),
        String::from_utf8_lossy(&node.stdout).trim(),
        loadavg()
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    // `cargo xtask bench summary` takes the two echo sections only.
    let wanted = |section: &str| wanted(section) && (!toolgate_benchkit::quick() || section.starts_with("echo"));
    if wanted("echo-rmcp") {
        runtime.block_on(echo_rmcp());
    }
    if wanted("echo-python") {
        echo_python();
    }
    if wanted("read") {
        runtime.block_on(read());
    }
    if wanted("bridge-sandbox") {
        bridge_sandbox::run();
    }
    println!("load average at end {}", loadavg());
}
