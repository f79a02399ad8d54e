//! The team gateway's cost per call (`cargo xtask bench gateway`, or `cargo bench -p
//! toolgate-cli --bench gateway`), in one run, over Streamable HTTP from the rmcp client:
//!
//! - `echo` calls against `toolgate serve --http` in gateway mode (an API key, a user in a
//!   group, grants) beside the single-user server (its bearer token), servers taking turns:
//!   calls/s, median, p99, and each server's CPU per call (`/proc/PID/stat`), and the
//!   difference per call (issue 28's target: auth + grants add < 50 µs);
//! - a call that is not read-only (`write` of a new file: the audit write path) through the
//!   gateway: median and p99;
//! - the approval round trip: a call of a tool the policy asks about waits; an admin's decision
//!   is posted to `POST /api/approvals/{id}`; the time from sending the decision to the
//!   waiting call's answer (target < 100 ms);
//! - the same gateway with its shared state in PostgreSQL (`[store] url`, a throwaway cluster
//!   of `toolgate_testkit::postgres`, on this machine): echo on one node beside the same node
//!   on SQLite (issue 29's target: within 1.3× per call), echo alternating between two nodes
//!   with each node's CPU per call (target: within 1.1× of one node's), and the cross-node
//!   approval round trip: the call waits on node A, the decision is posted to node B (target
//!   < 100 ms).
//!
//! `TOOLGATE_BENCH_BIN=PATH` measures another `toolgate` build.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolgate_benchkit::server::{HttpServer as Server, Log};
use toolgate_benchkit::summary::{self, Row};

type Client = RunningService<RoleClient, ()>;

fn toolgate() -> String {
    std::env::var("TOOLGATE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolgate").to_owned())
}

/// The workspace's `toolgate.toml`: no rate limit or loop breaker (the run repeats one call),
/// `time` asks for approval, and `extra`.
fn workspace(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            "{extra}\n[loop_breaker]\nenabled = false\n\n[tools]\nask = [\"time\"]\n\n[rate_limits.tools]\n\
             echo = {{ per_minute = 4294967295, per_hour = 4294967295 }}\n\
             write = {{ per_minute = 4294967295, per_hour = 4294967295 }}\n"
        ),
    )
    .expect("write toolgate.toml");
    dir
}

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(toolgate()).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `toolgate serve --http 127.0.0.1:0` in `ws`, once it prints its URL.
fn serve(ws: &Path) -> Server {
    Server::start(&toolgate(), ws, &[], Log::Drop)
}

async fn connect(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.expect("initialize over HTTP")
}

async fn call(client: &Client, tool: &'static str, args: Value) -> Duration {
    let request = CallToolRequestParams::new(tool).with_arguments(args.as_object().cloned().unwrap_or_default());
    let start = Instant::now();
    let result = client.call_tool(request).await.expect("tools/call");
    let took = start.elapsed();
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    took
}

struct Figures {
    median: Duration,
    p99: Duration,
    max: Duration,
    per_sec: f64,
}

fn figures(times: &[Duration]) -> Figures {
    let mut t = times.to_vec();
    t.sort();
    let sum: Duration = t.iter().sum();
    Figures {
        median: t[t.len() / 2],
        p99: t[t.len() * 99 / 100],
        max: t[t.len() - 1],
        per_sec: t.len() as f64 / sum.as_secs_f64(),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".to_owned(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// A raw HTTP request to the server of `url`; the body of the answer.
fn http(url: &str, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_owned()))
}

/// The id of the first pending approval, once there is one.
fn pending(url: &str, key: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http(url, "GET", "/api/approvals", key, "");
        assert_eq!(status, 200, "GET /api/approvals: {body}");
        let body: Value = serde_json::from_str(&body).unwrap_or_default();
        if let Some(id) = body["pending"][0]["id"].as_u64() {
            return id;
        }
        assert!(Instant::now() < deadline, "no approval became pending");
        std::thread::sleep(Duration::from_millis(2));
    }
}

async fn run() {
    let quick = toolgate_benchkit::quick();
    let (warmup, rounds, calls) = if quick { (100, 2, 300) } else { (200, 5, 400) };

    let single_ws = workspace("");
    let gateway_ws = workspace("[gateway]\nenabled = true\ndefault_tools = []\n");
    let g = gateway_ws.path();
    admin(g, &["user", "add", "ann", "--group", "ops"]);
    admin(g, &["user", "add", "lee", "--admin"]);
    admin(g, &["grant", "add", "--to", "ops", "--tool", "echo", "--tool", "write", "--tool", "time"]);
    admin(g, &["grant", "add", "--to", "ann", "--tool", "read", "--deny-tool", "exec"]);
    let ann = admin(g, &["key", "create", "--user", "ann"]);
    let lee = admin(g, &["key", "create", "--user", "lee"]);

    let single = serve(single_ws.path());
    let token = std::fs::read_to_string(single_ws.path().join(".toolgate/http-token")).expect("token");
    let gateway = serve(g);
    let single_client = connect(&single.url, token.trim()).await;
    let gateway_client = connect(&gateway.url, &ann).await;

    // Echo, servers taking turns so load from other work falls on both alike.
    let echo = || json!({"message": "hello from the benchmark"});
    for client in [&single_client, &gateway_client] {
        for _ in 0..warmup {
            call(client, "echo", echo()).await;
        }
    }
    let servers = [
        ("single-user (bearer token)", &single, &single_client),
        ("gateway (API key + grants)", &gateway, &gateway_client),
    ];
    let mut times = [Vec::new(), Vec::new()];
    let mut cpu = [Duration::ZERO; 2];
    for _ in 0..rounds {
        for (i, (_, server, client)) in servers.iter().enumerate() {
            let before = server.cpu();
            for _ in 0..calls {
                times[i].push(call(client, "echo", echo()).await);
            }
            cpu[i] += server.cpu() - before;
        }
    }
    let n = (rounds * calls) as f64;
    println!(
        "### echo over Streamable HTTP, rmcp client: {rounds} rounds of {calls} sequential calls per server, after {warmup} warm-up calls\n"
    );
    println!("| server | median | p99 | calls/s | server CPU per call |\n|---|---|---|---|---|");
    let f: Vec<Figures> = times.iter().map(|t| figures(t)).collect();
    for (i, (name, _, _)) in servers.iter().enumerate() {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.0} | {:.1} µs |",
            us(f[i].median),
            us(f[i].p99),
            f[i].per_sec,
            us(cpu[i]) / n
        );
    }
    let added_median = us(f[1].median) - us(f[0].median);
    let added_cpu = (us(cpu[1]) - us(cpu[0])) / n;
    println!("\nThe gateway adds {added_median:.1} µs per call by median, {added_cpu:.1} µs of server CPU per call.\n");
    Row::new("gateway: echo over Streamable HTTP with key + grants, calls/s", f[1].per_sec, "calls/s")
        .peer("single-user server", f[0].per_sec)
        .emit();
    Row::new("gateway: auth + grants added per echo call (median)", added_median, "µs")
        .target(summary::Target::AtMost(50.0))
        .emit();

    // Not read-only: each call creates a file (the audit row is written durably).
    let mut writes = Vec::new();
    let writes_n = if quick { 200 } else { 1000 };
    for i in 0..writes_n {
        writes.push(call(&gateway_client, "write", json!({"path": format!("bench/{i}.txt"), "content": "x"})).await);
    }
    let w = figures(&writes);
    println!(
        "### write of a new file through the gateway ({writes_n} calls): median {:.1} µs, p99 {:.1} µs\n",
        us(w.median),
        us(w.p99)
    );
    Row::new("gateway: p99 of a call that is not read-only (write)", us(w.p99) / 1000.0, "ms").emit();

    // Approval round trip: `time` asks; lee decides over the API.
    let trips = if quick { 5 } else { 20 };
    let r = approval_round_trips(&gateway_client, &gateway.url, &lee, trips).await;
    println!(
        "### approval round trip ({trips} calls): decision posted -> the waiting call's answer: median {:.2} ms, max {:.2} ms\n",
        us(r.median) / 1000.0,
        us(r.max) / 1000.0
    );
    Row::new("gateway: approval round trip (decision -> waiting call answers), median", us(r.median) / 1000.0, "ms")
        .target(summary::Target::AtMost(100.0))
        .emit();

    let sqlite_echo = (f[1].median, cpu[1] / (rounds * calls) as u32);
    for client in [single_client, gateway_client] {
        let _ = client.cancel().await;
    }
    drop((single, gateway));
    postgres_nodes(quick, (warmup, rounds, calls), sqlite_echo).await;
}

/// `trips` calls of `time` by `client` (through the server of `waits_on`), each decided by `lee`
/// on the server of `decided_on`: from the decision posted to the waiting call's answer.
async fn approval_round_trips(client: &Client, decided_on: &str, lee: &str, trips: usize) -> Figures {
    let mut round_trips = Vec::new();
    for _ in 0..trips {
        let url = decided_on.to_owned();
        let lee = lee.to_owned();
        let decide = std::thread::spawn(move || {
            let id = pending(&url, &lee);
            let sent = Instant::now();
            let (status, body) =
                http(&url, "POST", &format!("/api/approvals/{id}"), &lee, r#"{"decision": "allow_once"}"#);
            assert_eq!(status, 200, "the decision: {body}");
            sent
        });
        let request = CallToolRequestParams::new("time")
            .with_arguments(json!({"operation": "now"}).as_object().cloned().unwrap_or_default());
        let result = client.call_tool(request).await.expect("tools/call time");
        let answered = Instant::now();
        assert_ne!(result.is_error, Some(true), "the approved call: {result:?}");
        let sent = decide.join().expect("the decider");
        round_trips.push(answered.saturating_duration_since(sent));
    }
    figures(&round_trips)
}

/// The gateway with `[store] url` on a throwaway PostgreSQL cluster: one node, then two nodes
/// taking calls in turn, then an approval decided on the other node. `sqlite`: the SQLite
/// gateway's echo median and CPU per call from the same run.
async fn postgres_nodes(quick: bool, (warmup, rounds, calls): (usize, usize, usize), sqlite: (Duration, Duration)) {
    let cluster = toolgate_testkit::postgres::Cluster::start().expect("a PostgreSQL cluster (cargo xtask deps)");
    let url = cluster.database().expect("a database");
    let config = format!("[gateway]\nenabled = true\ndefault_tools = []\n\n[store]\nurl = \"{url}\"\n");
    let (a_ws, b_ws) = (workspace(&config), workspace(&config));
    let a = a_ws.path();
    admin(a, &["user", "add", "ann", "--group", "ops"]);
    admin(a, &["user", "add", "lee", "--admin"]);
    admin(a, &["grant", "add", "--to", "ops", "--tool", "echo", "--tool", "time"]);
    let ann = admin(a, &["key", "create", "--user", "ann"]);
    let lee = admin(a, &["key", "create", "--user", "lee"]);
    let nodes = [serve(a), serve(b_ws.path())];
    let clients = [connect(&nodes[0].url, &ann).await, connect(&nodes[1].url, &ann).await];
    let echo = || json!({"message": "hello from the benchmark"});
    for client in &clients {
        for _ in 0..warmup {
            call(client, "echo", echo()).await;
        }
    }
    let cpu = |nodes: &[Server; 2]| nodes[0].cpu() + nodes[1].cpu();
    // One node: every call to A.
    let mut one = Vec::new();
    let before = cpu(&nodes);
    for _ in 0..rounds * calls {
        one.push(call(&clients[0], "echo", echo()).await);
    }
    let one_cpu = (cpu(&nodes) - before) / (rounds * calls) as u32;
    // Two nodes: calls alternate, as a load balancer would spread them.
    let mut two = Vec::new();
    let before = cpu(&nodes);
    for i in 0..rounds * calls {
        two.push(call(&clients[i % 2], "echo", echo()).await);
    }
    let two_cpu = (cpu(&nodes) - before) / (rounds * calls) as u32;
    let (one, two) = (figures(&one), figures(&two));
    println!("### the gateway on PostgreSQL (`[store] url`, a local cluster on a Unix socket)\n");
    println!("| setup | median | p99 | calls/s | toolgate CPU per call |\n|---|---|---|---|---|");
    println!("| 1 node, SQLite (above) | {:.1} µs | | | {:.1} µs |", us(sqlite.0), us(sqlite.1));
    for (name, f, cpu) in [("1 node, PostgreSQL", &one, one_cpu), ("2 nodes, PostgreSQL, alternating", &two, two_cpu)] {
        println!("| {name} | {:.1} µs | {:.1} µs | {:.0} | {:.1} µs |", us(f.median), us(f.p99), f.per_sec, us(cpu));
    }
    println!(
        "\nThe PostgreSQL server's own CPU is not in the last column: it shares this machine's 2 cores with \
         the nodes and the client, so scaling is judged by the nodes' CPU per call.\n"
    );
    Row::new("gateway on PostgreSQL: echo median, 1 node", us(one.median), "µs")
        .peer("1 node on SQLite", us(sqlite.0))
        .target(summary::Target::RatioAtMost(1.3))
        .emit();
    Row::new("gateway on PostgreSQL: CPU per echo call, 2 nodes", us(two_cpu), "µs")
        .peer("1 node on PostgreSQL", us(one_cpu))
        .target(summary::Target::RatioAtMost(1.1))
        .emit();

    let trips = if quick { 5 } else { 20 };
    let r = approval_round_trips(&clients[0], &nodes[1].url, &lee, trips).await;
    println!(
        "### cross-node approval ({trips} calls): waiting on node A, decided on node B -> A's answer: median {:.2} ms, max {:.2} ms\n",
        us(r.median) / 1000.0,
        us(r.max) / 1000.0
    );
    Row::new("gateway on PostgreSQL: cross-node approval round trip, median", us(r.median) / 1000.0, "ms")
        .target(summary::Target::AtMost(100.0))
        .emit();
    for client in clients {
        let _ = client.cancel().await;
    }
    audit_rows_per_second(&url, quick);
}

/// Records written per second by a node's audit log, SQLite's and PostgreSQL's, from one thread
/// queueing as fast as it can until everything is flushed; each log's row count afterwards must
/// be every record (nothing lost).
fn audit_rows_per_second(url: &str, quick: bool) {
    use toolgate::store::{AuditLog, AuditOptions, AuditRecord, AuditStore};
    let n: usize = if quick { 20_000 } else { 100_000 };
    let record = |i: usize| AuditRecord {
        id: format!("bench-{i}"),
        ts_ms: i as i64,
        user: "ann".into(),
        agent: "bench".into(),
        session: "mcp-bench".into(),
        tool: "echo".into(),
        params: r#"{"message":"hello from the benchmark"}"#.into(),
        decision: "allow (grant)".into(),
        outcome: "ok".into(),
        duration_us: 40,
        output_bytes: 24,
        ..AuditRecord::default()
    };
    let rate = |log: &dyn AuditStore| {
        let start = Instant::now();
        for i in 0..n {
            log.record(record(i));
        }
        log.flush();
        let per_sec = n as f64 / start.elapsed().as_secs_f64();
        assert_eq!(log.audit_count().expect("a count"), n as u64, "every record is written");
        per_sec
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir_all(dir.path().join(".toolgate")).expect("a state folder");
    let sqlite = AuditLog::open(&dir.path().join(".toolgate/state.db")).expect("the SQLite log");
    let sqlite_rate = rate(&sqlite);
    let store = toolgate::config::StoreConfig { url: Some(url.to_owned()), ..Default::default() };
    let shared = toolgate::state::shared_audit_log(&store, dir.path(), AuditOptions::default())
        .expect("the shared log")
        .expect("a shared log for a PostgreSQL URL");
    let pg_rate = rate(&shared);
    println!(
        "### audit rows written per second ({n} records queued by one thread, then flushed; all {n} there after)\n\n\
         | log | rows/s |\n|---|---|\n| SQLite (`.toolgate/state.db`) | {sqlite_rate:.0} |\n\
         | PostgreSQL (batches sent with `COPY`) | {pg_rate:.0} |\n"
    );
    Row::new("audit rows/s sustained on PostgreSQL, nothing lost", pg_rate, "rows/s")
        .peer("SQLite", sqlite_rate)
        .emit();
}

fn main() {
    // reqwest is built with `rustls-no-provider` in this workspace; loopback HTTP needs no TLS,
    // but building a client needs a provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("gateway benchmark, load average at start {}\n", loadavg());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(run());
    println!("load average at end {}", loadavg());
}
