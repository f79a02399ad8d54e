//! Load held (issue 31, item 8 and "Bad input"): `cargo xtask bench load [--secs N]`, or
//! `cargo bench -p toolgate-cli --bench load -- [--secs N]` (default 300; the summary's quick run
//! takes 30). Loopback only, bounded in time and in calls per client.
//!
//! 1. **HTTP**: 64 rmcp clients over Streamable HTTP against one `toolgate serve --http`, each
//!    cycling through echo, read, grep, an `exec` of `true` and an `exec` that policy denies,
//!    beside the misbehaving clients of `load/raw.rs` (malformed JSON-RPC, oversized bodies,
//!    disconnects mid-call, answers never read).
//! 2. **stdio**: 16 `toolgate serve` processes on one workspace, one client each, the same mix.
//! 3. **kill -9**: phase 1's well-behaved clients; the server is killed half-way and restarted on
//!    the same workspace; the clients reconnect.
//!
//! Reported: calls/s, p50/p99/p999 per tool, errors by kind (only the denied calls may fail),
//! the server's resident memory, file descriptors and threads every 10 s (memory flat after
//! warm-up; descriptors and threads back to where they started once the clients are gone),
//! audit rows against calls made (read back with `toolgate audit --json`), and after the kill:
//! every answered call that is not read-only has its row, the read-only rows lost all fall in
//! the audit writer's batch window, and `toolgate audit` shows where the gap is.
//!
//! Every check that fails is printed as `FAILED:` and makes the run exit 1 at the end. `-- http`,
//! `-- stdio`, `-- kill` run only the phases named. No call waits more than 30 s for its answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "load/raw.rs"]
mod raw;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolgate_benchkit::server::{HttpServer, Log};
use toolgate_benchkit::summary::{Row, Target};

/// The binary measured: the one cargo built with this bench, or `TOOLGATE_BENCH_BIN` (another
/// build, as in the MCP benchmark).
fn toolgate() -> String {
    std::env::var("TOOLGATE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolgate").to_owned())
}
const HTTP_CLIENTS: usize = 64;
const STDIO_SERVERS: usize = 16;
/// The count bound: no client makes more calls than this, however long the run.
const MAX_CALLS_PER_CLIENT: u64 = 50_000;
/// The audit writer's batch window (`LINGER` in `crates/store/src/audit.rs`) is 5 ms; rows of
/// read-only calls lost to a kill must have been answered within this much of it.
const LOST_WINDOW: Duration = Duration::from_millis(100);
/// No call waits longer than this for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

type Client = RunningService<RoleClient, ()>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Tool {
    Echo,
    Read,
    Grep,
    ExecTrue,
    Denied,
}

const MIX: [Tool; 5] = [Tool::Echo, Tool::Read, Tool::Grep, Tool::ExecTrue, Tool::Denied];

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::Echo => "echo",
            Tool::Read => "read",
            Tool::Grep => "grep",
            Tool::ExecTrue => "exec true",
            Tool::Denied => "exec rm (denied)",
        }
    }

    fn read_only(self) -> bool {
        matches!(self, Tool::Echo | Tool::Read | Tool::Grep)
    }

    /// The request; `marker` makes the call findable in the audit log (all but `read`).
    fn request(self, marker: &str) -> CallToolRequestParams {
        let (name, args) = match self {
            Tool::Echo => ("echo", json!({"message": marker})),
            Tool::Read => ("read", json!({"path": "src/f1.txt"})),
            Tool::Grep => ("grep", json!({"pattern": format!("needle 2|{marker}"), "path": "src"})),
            Tool::ExecTrue => ("exec", json!({"command": format!("true {marker}")})),
            Tool::Denied => ("exec", json!({"command": format!("rm -rf {marker}")})),
        };
        CallToolRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap_or_default())
    }

    /// `Ok` when the answer is the right one; the kind of error otherwise.
    fn check(self, marker: &str, r: &CallToolResult) -> Result<(), String> {
        let text: String = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect();
        let failed = r.is_error == Some(true);
        let ok = match self {
            Tool::Echo => !failed && text.contains(marker),
            Tool::Read => !failed && text.contains("line needle 1 200"),
            Tool::Grep => !failed && text.contains("f2.txt"),
            Tool::ExecTrue => !failed && text.contains("exit code 0"),
            Tool::Denied => {
                return if failed && text.contains("denied by policy") {
                    Err("denied".into())
                } else {
                    Err(format!("not denied: {}", first(&text)))
                };
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{}: {}", if failed { "tool error" } else { "wrong answer" }, first(&text)))
        }
    }
}

fn first(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with("<tool_output"))
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect()
}

/// One call as the client saw it.
struct Answer {
    tool: Tool,
    marker: String,
    took: Duration,
    /// When the answer arrived.
    at: Instant,
    outcome: Result<(), String>,
}

/// The workspace every phase serves: small files to read and grep, a 200 KB one for the
/// clients that never read, and a policy that pre-approves `exec true`/`sleep` and denies `rm`.
/// Rate limits stay on with limits the run cannot reach; the loop breaker is off (the clients
/// repeat calls on purpose).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    let p = dir.path();
    std::fs::write(
        p.join("toolgate.toml"),
        "[gate]\nmax_output_bytes = 262144\n\n[loop_breaker]\nenabled = false\n\n\
         [tools]\nallow = [\"exec(true:*)\", \"exec(sleep:*)\"]\ndeny = [\"exec(rm:*)\"]\n\n[rate_limits.tools]\n\
         echo = { per_minute = 4294967295, per_hour = 4294967295 }\n\
         read = { per_minute = 4294967295, per_hour = 4294967295 }\n\
         grep = { per_minute = 4294967295, per_hour = 4294967295 }\n\
         exec = { per_minute = 4294967295, per_hour = 4294967295 }\n",
    )
    .unwrap();
    std::fs::create_dir(p.join("src")).unwrap();
    for i in 1..=3 {
        let text: String = (1..=200).map(|n| format!("line needle {i} {n}\n")).collect();
        std::fs::write(p.join(format!("src/f{i}.txt")), text).unwrap();
    }
    std::fs::write(p.join("big.txt"), format!("{}\n", "x".repeat(79)).repeat(2_500)).unwrap();
    dir
}

/// How long the HTTP server keeps a session without a request (`serve --session-idle`; 300 s
/// by default): the misbehaving clients leave theirs without `DELETE`, and the descriptors are
/// compared once these have ended.
const SESSION_IDLE: Duration = Duration::from_secs(20);

/// `toolgate serve --http 127.0.0.1:0` on `ws`, once it listens; its warnings go to our stderr.
fn serve_http(ws: &Path) -> HttpServer {
    let idle = SESSION_IDLE.as_secs().to_string();
    HttpServer::start(&toolgate(), ws, &["--session-idle", &idle], Log::Forward)
}

/// The server's bearer token (a single-user server always has one).
fn token(server: &HttpServer) -> String {
    server.token.clone().expect("toolgate serve --http wrote its token")
}

/// How long the starting point waits after the warm-up calls: a blocking thread the runtime
/// started for them ends after 10 s idle, and a start counted with it would find the end one
/// thread short (10 → 9 in the runs of 2026-11-28 and 11-29), which is no leak.
const WARM_SETTLE: Duration = Duration::from_secs(11);

/// How long a stopped server may take to end on SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// One look at a process in `/proc`.
#[derive(Clone, Copy, Debug, Default)]
struct Probe {
    rss_kb: u64,
    fds: usize,
    threads: usize,
}

fn probe(pid: u32) -> Option<Probe> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count();
    Some(Probe { rss_kb, fds, threads })
}

fn probe_all(pids: &[u32]) -> Option<Probe> {
    pids.iter().try_fold(Probe::default(), |acc, &pid| {
        let p = probe(pid)?;
        Some(Probe { rss_kb: acc.rss_kb + p.rss_kb, fds: acc.fds + p.fds, threads: acc.threads + p.threads })
    })
}

/// Probes `pids` every 10 s until `stop`: (seconds since start, probe).
fn sampler(pids: Vec<u32>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u64, Probe)>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut out = Vec::new();
        let mut next = 0;
        while !stop.load(Ordering::Relaxed) {
            if start.elapsed().as_secs() >= next {
                if let Some(p) = probe_all(&pids) {
                    out.push((next, p));
                }
                next += 10;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(p) = probe_all(&pids) {
            out.push((start.elapsed().as_secs(), p));
        }
        out
    })
}

async fn connect_http(url: &str, token: &str) -> Result<Client, String> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.map_err(|e| format!("initialize: {e}"))
}

async fn connect_stdio(ws: &Path) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.arg("--workspace").arg(ws).arg("serve");
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().expect("spawn toolgate serve");
    let pid = transport.id().expect("a child pid");
    (().serve(transport).await.expect("initialize over stdio"), pid)
}

/// Where the HTTP clients connect: a generation number that changes when the server restarts.
type Endpoint = Arc<Mutex<(u64, String, String)>>;

/// A well-behaved client: the mix in turn until `deadline` or the count bound; `client` stays
/// open (the caller closes it). With an `endpoint` (HTTP), a transport error (the server was
/// killed) is recorded and the client reconnects to the next server it names; without one, the
/// client stops at its first transport error.
async fn well_behaved(
    id: usize,
    phase: u32,
    client: &mut Client,
    endpoint: Option<Endpoint>,
    deadline: Instant,
) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut generation = endpoint.as_ref().map_or(0, |e| e.lock().unwrap().0);
    for n in 0..MAX_CALLS_PER_CLIENT {
        if Instant::now() >= deadline {
            break;
        }
        let tool = MIX[(n as usize + id) % MIX.len()];
        let marker = format!("zq{phase}c{id}n{n}");
        let start = Instant::now();
        // Bounded: a call whose server died can wait forever for its answer.
        let result = tokio::time::timeout(CALL_TIMEOUT, client.call_tool(tool.request(&marker))).await;
        let at = Instant::now();
        let outcome = match result {
            Ok(Ok(r)) => tool.check(&marker, &r),
            Ok(Err(e)) => Err(format!("transport: {}", e.to_string().chars().take(80).collect::<String>())),
            Err(_) => Err(format!("transport: no answer in {} s", CALL_TIMEOUT.as_secs())),
        };
        let lost = outcome.as_ref().is_err_and(|e| e.starts_with("transport"));
        out.push(Answer { tool, marker, took: at - start, at, outcome });
        if lost {
            let Some(endpoint) = &endpoint else { break };
            // Wait for the restarted server, then reconnect.
            loop {
                if Instant::now() >= deadline {
                    return out;
                }
                let (g, url, token) = endpoint.lock().unwrap().clone();
                if g != generation
                    && let Ok(c) = connect_http(&url, &token).await
                {
                    let _ = std::mem::replace(client, c).cancel().await;
                    generation = g;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".to_owned(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The run's verdicts: each failed check is printed and counted.
#[derive(Default)]
struct Verdicts(Vec<String>);

impl Verdicts {
    fn check(&mut self, ok: bool, what: String) {
        if ok {
            println!("- ok: {what}");
        } else {
            println!("- FAILED: {what}");
            self.0.push(what);
        }
    }
}

/// Per-tool latency table, errors by kind; returns (calls/s, well-behaved p99 over all tools).
fn report_calls(answers: &[Answer], secs: f64, v: &mut Verdicts, after_kill: bool) -> (f64, Duration) {
    println!("| tool | calls | calls/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|");
    let mut all: Vec<Duration> = Vec::new();
    for tool in MIX {
        let mut t: Vec<Duration> = answers.iter().filter(|a| a.tool == tool).map(|a| a.took).collect();
        t.sort();
        all.extend(&t);
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} |",
            tool.label(),
            t.len(),
            t.len() as f64 / secs,
            ms(pct(&t, 0.5)),
            ms(pct(&t, 0.99)),
            ms(pct(&t, 0.999)),
            ms(t.last().copied().unwrap_or_default())
        );
    }
    all.sort();
    let rate = all.len() as f64 / secs;
    println!(
        "| all | {} | {rate:.0} | {} | {} | {} | {} |\n",
        all.len(),
        ms(pct(&all, 0.5)),
        ms(pct(&all, 0.99)),
        ms(pct(&all, 0.999)),
        ms(all.last().copied().unwrap_or_default())
    );
    let mut errors: BTreeMap<(Tool, String), u64> = BTreeMap::new();
    for a in answers {
        if let Err(e) = &a.outcome {
            *errors.entry((a.tool, e.clone())).or_default() += 1;
        }
    }
    println!("Errors by kind:\n");
    for ((tool, kind), n) in &errors {
        println!("- {}: {kind}: {n}", tool.label());
    }
    let unexpected: u64 = errors
        .iter()
        .filter(|((tool, kind), _)| !(*tool == Tool::Denied && kind == "denied"))
        .filter(|((_, kind), _)| !(after_kill && kind.starts_with("transport")))
        .map(|(_, n)| n)
        .sum();
    let denied_ok = answers.iter().filter(|a| a.tool == Tool::Denied).all(|a| a.outcome.as_ref().is_err());
    println!();
    v.check(
        unexpected == 0 && denied_ok,
        format!(
            "no errors but the denied calls{}: {unexpected} other",
            if after_kill { " (and the calls in flight at the kill)" } else { "" }
        ),
    );
    (rate, pct(&all, 0.99))
}

/// Resident memory, descriptors and threads every 10 s; memory flat after warm-up.
fn report_probes(samples: &[(u64, Probe)], secs: u64, v: &mut Verdicts) -> f64 {
    println!("| s | RSS MB | fds | threads |\n|---|---|---|---|");
    for (t, p) in samples {
        println!("| {t} | {:.1} | {} | {} |", p.rss_kb as f64 / 1024.0, p.fds, p.threads);
    }
    // The last 4 minutes, or the part after the first third of a shorter run.
    let from = secs.saturating_sub(240).max(secs / 3);
    let window: Vec<u64> = samples.iter().filter(|(t, _)| *t >= from).map(|(_, p)| p.rss_kb).collect();
    let growth = match (window.first(), window.iter().max()) {
        (Some(&a), Some(&b)) if a > 0 => (b as f64 - a as f64) / a as f64 * 100.0,
        _ => 0.0,
    };
    println!();
    v.check(growth < 10.0, format!("resident memory from {from} s to the end grew {growth:.1}% (< 10%)"));
    growth
}

/// Descriptors and threads back to where they were before the clients, within `grace` plus
/// 30 s (the runtime's idle blocking threads end after 10 s; an SSE stream whose client went
/// away is found out at its next keep-alive, every 15 s).
fn settle(pids: &[u32], start: Probe, grace: Duration, v: &mut Verdicts) {
    let deadline = Instant::now() + grace + Duration::from_secs(30);
    let began = Instant::now();
    let mut now = probe_all(pids).unwrap_or_default();
    while (now.fds != start.fds || now.threads != start.threads) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        now = probe_all(pids).unwrap_or_default();
    }
    if now.fds != start.fds {
        // What is left over, by kind, so a leak names itself.
        for &pid in pids {
            println!("  pid {pid}'s descriptors by kind: {:?}", fd_kinds(pid));
        }
    }
    v.check(
        now.fds == start.fds && now.threads == start.threads,
        format!(
            "descriptors {} → {} and threads {} → {} (start → end, {:.1} s after the clients left)",
            start.fds,
            now.fds,
            start.threads,
            now.threads,
            began.elapsed().as_secs_f64()
        ),
    );
}

/// A process's open descriptors by kind: `socket`, `pipe`, `anon_inode:[eventfd]`, ... or the
/// file's name for files (`state.db-wal`).
fn fd_kinds(pid: u32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let target = target.to_string_lossy().into_owned();
        let kind = if target.starts_with('/') {
            Path::new(&target).file_name().map_or(target.clone(), |n| n.to_string_lossy().into_owned())
        } else if target.starts_with("anon_inode:") {
            target
        } else {
            // `socket:[12345]`, `pipe:[678]`: the kind without the inode.
            target.split_once(":[").map_or(target.clone(), |(kind, _)| kind.to_owned())
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// One audit row, as `toolgate audit --json` prints it.
struct AuditRow {
    tool: String,
    params: String,
    outcome: String,
    ts_ms: i64,
    error: Option<String>,
}

fn audit_rows(ws: &Path) -> Vec<AuditRow> {
    let out = Command::new(toolgate())
        .arg("--workspace")
        .arg(ws)
        .args(["audit", "--json", "--tail", "100000000"])
        .output()
        .expect("run toolgate audit");
    assert!(out.status.success(), "toolgate audit: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| AuditRow {
            tool: v["tool"].as_str().unwrap_or_default().to_owned(),
            params: v["params"].as_str().unwrap_or_default().to_owned(),
            outcome: v["outcome"].as_str().unwrap_or_default().to_owned(),
            ts_ms: v["ts_ms"].as_i64().unwrap_or_default(),
            error: v["error"].as_str().map(str::to_owned),
        })
        .collect()
}

/// The well-behaved client's call a row is for (by its marker), or the misbehaving kind.
fn classify(row: &AuditRow, marker: &regex::Regex) -> (String, Option<String>) {
    let m = marker.find(&row.params).map(|m| m.as_str().to_owned());
    let kind = match (row.tool.as_str(), &m) {
        ("echo", Some(_)) => "echo",
        ("grep", Some(_)) => "grep",
        ("read", _) if row.params.contains("src/f1.txt") => "read",
        ("read", _) if row.params.contains("big.txt") => "read big.txt (never-read clients)",
        ("exec", Some(_)) if row.params.contains("true") => "exec true",
        ("exec", Some(_)) if row.params.contains("rm -rf") => "exec rm (denied)",
        ("exec", _) if row.params.contains("sleep 5") => "exec sleep 5 (disconnecting clients)",
        _ => return (format!("other: {} {}", row.tool, row.outcome), m),
    };
    (kind.to_owned(), m)
}

/// Audit rows equal to calls made, per tool (after waiting for the last batch, 10 s at most).
fn report_audit(ws: &Path, answers: &[Answer], v: &mut Verdicts) -> u64 {
    let marker = regex::Regex::new(r"zq\d+c\d+n\d+").unwrap();
    let mut made: BTreeMap<String, u64> = BTreeMap::new();
    for a in answers {
        *made.entry(a.tool.label().to_owned()).or_default() += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut rows: BTreeMap<String, u64> = BTreeMap::new();
        for r in audit_rows(ws) {
            *rows.entry(classify(&r, &marker).0).or_default() += 1;
        }
        let equal = made.iter().all(|(k, n)| rows.get(k) == Some(n));
        if equal || Instant::now() >= deadline {
            println!("| calls of | made | audit rows |\n|---|---|---|");
            let keys: std::collections::BTreeSet<&String> = made.keys().chain(rows.keys()).collect();
            for k in keys {
                println!(
                    "| {k} | {} | {} |",
                    made.get(k).map_or("-".to_owned(), u64::to_string),
                    rows.get(k).copied().unwrap_or(0)
                );
            }
            println!();
            let missing: u64 = made.iter().map(|(k, n)| n.saturating_sub(rows.get(k).copied().unwrap_or(0))).sum();
            v.check(equal, format!("audit rows equal to the well-behaved calls made, per tool ({missing} missing)"));
            return missing;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime")
}

/// Phase 1: 64 HTTP clients and the misbehaving ones against one server.
fn http_phase(secs: u64, v: &mut Verdicts) {
    println!("## 1. Streamable HTTP: {HTTP_CLIENTS} clients and the misbehaving ones, one server, {secs} s\n");
    let ws = workspace();
    let server = serve_http(ws.path());
    let server_token = token(&server);
    let rt = runtime();
    // One call of each tool first (the lazily built parts), then the starting point.
    rt.block_on(async {
        let c = connect_http(&server.url, &server_token).await.expect("connect");
        for tool in MIX {
            let _ = c.call_tool(tool.request("zq0c0n0")).await;
        }
        let _ = c.cancel().await;
    });
    std::thread::sleep(WARM_SETTLE);
    let start = probe(server.pid()).expect("the server runs");
    let warm_rows = audit_rows(ws.path()).len();
    println!(
        "Load average before: {}. Server at start: {start:?}, descriptors by kind: {:?}\n",
        loadavg(),
        fd_kinds(server.pid())
    );
    let stop = Arc::new(AtomicBool::new(false));
    let probes = sampler(vec![server.pid()], stop.clone());
    let tally: raw::Tally = Default::default();
    let aim = raw::Aim { addr: server.addr().to_owned(), token: server_token.clone() };
    let bad = raw::spawn(aim, stop.clone(), tally.clone(), 100_000);
    let began = Instant::now();
    let deadline = began + Duration::from_secs(secs);
    let answers: Vec<Answer> = rt.block_on(async {
        let mut tasks = Vec::new();
        for id in 0..HTTP_CLIENTS {
            let (url, token) = (server.url.clone(), server_token.clone());
            tasks.push(tokio::spawn(async move {
                let mut c = connect_http(&url, &token).await.expect("connect");
                let answers = well_behaved(id, 1, &mut c, None, deadline).await;
                let _ = c.cancel().await;
                answers
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("a client task"));
        }
        all
    });
    let elapsed = began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in bad {
        let _ = t.join();
    }
    let samples = probes.join().unwrap();
    println!("Load average after: {}\n", loadavg());
    println!("### Well-behaved clients ({elapsed:.0} s)\n");
    let (rate, p99) = report_calls(&answers, elapsed, v, false);
    println!("### Misbehaving clients: what they got back\n");
    for ((who, what), n) in tally.lock().unwrap().iter() {
        println!("- {who}: {what}: {n}");
    }
    let findings: u64 =
        tally.lock().unwrap().iter().filter(|((_, what), _)| what.contains("unexpected")).map(|(_, n)| n).sum();
    println!();
    v.check(findings == 0, format!("the misbehaving clients got only 4xx or JSON-RPC errors ({findings} otherwise)"));
    println!("### The server every 10 s\n");
    let growth = report_probes(&samples, secs, v);
    // The sessions the misbehaving clients left behind end after the idle timeout.
    settle(&[server.pid()], start, SESSION_IDLE, v);
    println!("\n### Audit ({warm_rows} rows of the warm-up calls, counted as calls made)\n");
    let mut answers = answers;
    answers.extend(MIX.iter().map(|&tool| Answer {
        tool,
        marker: String::new(),
        took: Duration::ZERO,
        at: Instant::now(),
        outcome: Ok(()),
    }));
    let missing = report_audit(ws.path(), &answers, v);
    println!("Server: {}\n", server.stop(STOP_GRACE));
    Row::new(format!("load: {HTTP_CLIENTS} MCP clients over HTTP, calls/s ({secs} s)"), rate, "calls/s").emit();
    Row::new("load: well-behaved p99 beside misbehaving clients", p99.as_secs_f64() * 1e3, "ms").emit();
    Row::new("load: resident memory growth after warm-up", growth, "%").target(Target::AtMost(10.0)).emit();
    Row::new("load: audit rows missing (HTTP run)", missing as f64, "rows").target(Target::AtMost(0.0)).emit();
}

/// Phase 2: 16 stdio servers on one workspace, one client each.
fn stdio_phase(secs: u64, v: &mut Verdicts) {
    println!("## 2. stdio: {STDIO_SERVERS} servers on one workspace, one client each, {secs} s\n");
    let ws = workspace();
    let rt = runtime();
    let clients: Vec<(Client, u32)> = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..STDIO_SERVERS {
            let (c, pid) = connect_stdio(ws.path()).await;
            for tool in MIX {
                let _ = c.call_tool(tool.request("zq0c0n0")).await;
            }
            out.push((c, pid));
        }
        out
    });
    let pids: Vec<u32> = clients.iter().map(|(_, p)| *p).collect();
    std::thread::sleep(WARM_SETTLE);
    let start = probe_all(&pids).expect("the servers run");
    println!("Load average before: {}. The 16 servers at start (summed): {start:?}\n", loadavg());
    let stop = Arc::new(AtomicBool::new(false));
    let probes = sampler(pids.clone(), stop.clone());
    let began = Instant::now();
    let deadline = began + Duration::from_secs(secs);
    let (answers, clients): (Vec<Answer>, Vec<Client>) = rt.block_on(async {
        let mut tasks = Vec::new();
        for (id, (mut c, _)) in clients.into_iter().enumerate() {
            tasks.push(tokio::spawn(async move {
                // The client stays open until the end: the servers' descriptors are compared
                // while they still serve.
                let answers = well_behaved(id, 2, &mut c, None, deadline).await;
                (answers, c)
            }));
        }
        let mut all = Vec::new();
        let mut kept = Vec::new();
        for t in tasks {
            let (a, c) = t.await.expect("a client task");
            all.extend(a);
            kept.push(c);
        }
        (all, kept)
    });
    let elapsed = began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let samples = probes.join().unwrap();
    println!("Load average after: {}\n", loadavg());
    let (rate, _) = report_calls(&answers, elapsed, v, false);
    println!("### The 16 servers every 10 s (summed)\n");
    report_probes(&samples, secs, v);
    settle(&pids, start, Duration::ZERO, v);
    rt.block_on(async {
        for c in clients {
            let _ = c.cancel().await;
        }
    });
    println!("\n### Audit (16 writers on one database)\n");
    let mut answers = answers;
    // The warm-up calls: one of each tool per server.
    for _ in 0..STDIO_SERVERS {
        answers.extend(MIX.iter().map(|&tool| Answer {
            tool,
            marker: String::new(),
            took: Duration::ZERO,
            at: Instant::now(),
            outcome: Ok(()),
        }));
    }
    report_audit(ws.path(), &answers, v);
    Row::new(format!("load: {STDIO_SERVERS} stdio servers on one workspace, calls/s ({secs} s)"), rate, "calls/s")
        .emit();
}

/// Phase 3: the HTTP clients, `kill -9` of the server half-way, a restart, reconnects.
fn kill_phase(secs: u64, v: &mut Verdicts) {
    println!(
        "## 3. kill -9 half-way: {HTTP_CLIENTS} HTTP clients, {secs} s, the server killed at {} s and restarted\n",
        secs / 2
    );
    let ws = workspace();
    let server = serve_http(ws.path());
    let endpoint: Endpoint = Arc::new(Mutex::new((0, server.url.clone(), token(&server))));
    let rt = runtime();
    let began = Instant::now();
    let deadline = began + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..HTTP_CLIENTS)
        .map(|id| {
            let endpoint = endpoint.clone();
            rt.spawn(async move {
                let (_, url, token) = endpoint.lock().unwrap().clone();
                let mut c = connect_http(&url, &token).await.expect("connect");
                let answers = well_behaved(id, 3, &mut c, Some(endpoint), deadline).await;
                let _ = c.cancel().await;
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs / 2));
    let mut server = server;
    let killed_at = Instant::now();
    let killed_pid = server.pid();
    server.kill();
    let restarted = serve_http(ws.path());
    println!("Killed pid {killed_pid}; restarted in {:.0} ms\n", killed_at.elapsed().as_secs_f64() * 1e3);
    *endpoint.lock().unwrap() = (1, restarted.url.clone(), token(&restarted));
    let answers: Vec<Answer> = rt.block_on(async {
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("a client task"));
        }
        all
    });
    let elapsed = began.elapsed().as_secs_f64();
    report_calls(&answers, elapsed, v, true);
    println!("Server: {}\n", restarted.stop(STOP_GRACE));
    // Answered calls (an answer the client read, right or refused) against the rows.
    let marker = regex::Regex::new(r"zq\d+c\d+n\d+").unwrap();
    let rows = audit_rows(ws.path());
    let mut by_marker: HashMap<String, &AuditRow> = HashMap::new();
    for r in &rows {
        if let (_, Some(m)) = classify(r, &marker) {
            by_marker.insert(m, r);
        }
    }
    let answered = |a: &&Answer| a.outcome.as_ref().err().is_none_or(|e| !e.starts_with("transport"));
    let mut lost_writes = Vec::new();
    let mut lost_reads: Vec<Duration> = Vec::new();
    let mut lost_after = 0;
    for a in answers.iter().filter(answered).filter(|a| a.tool != Tool::Read) {
        if by_marker.contains_key(&a.marker) {
            continue;
        }
        if a.at > killed_at {
            lost_after += 1;
        } else if a.tool.read_only() {
            lost_reads.push(killed_at - a.at);
        } else {
            lost_writes.push(a.marker.clone());
        }
    }
    let interrupted = rows.iter().filter(|r| r.outcome == "interrupted").count();
    println!(
        "Rows: {} ({} interrupted); answered calls with a marker: {}",
        rows.len(),
        interrupted,
        answers.iter().filter(answered).filter(|a| a.tool != Tool::Read).count()
    );
    v.check(
        lost_writes.is_empty(),
        format!(
            "every answered call that is not read-only has its row ({} without: {:?})",
            lost_writes.len(),
            lost_writes.iter().take(5).collect::<Vec<_>>()
        ),
    );
    let oldest = lost_reads.iter().max().copied().unwrap_or_default();
    v.check(
        oldest <= LOST_WINDOW,
        format!(
            "read-only rows lost to the kill: {}, answered at most {} ms before it (≤ {} ms; the writer's batch window is 5 ms)",
            lost_reads.len(),
            ms(oldest),
            LOST_WINDOW.as_millis()
        ),
    );
    v.check(lost_after == 0, format!("no row lost after the restart ({lost_after})"));
    // What `toolgate audit` shows around the kill.
    let gap = rows.iter().find(|r| r.tool == "toolgate" || r.outcome == "gap");
    match gap {
        Some(g) => println!(
            "The gap as `toolgate audit` shows it: {} at {} ms: {}",
            g.outcome,
            g.ts_ms,
            g.error.clone().unwrap_or_default()
        ),
        None => println!("`toolgate audit` shows no gap row"),
    }
    v.check(gap.is_some(), format!("`toolgate audit` shows where the server died (pid {killed_pid})"));
    let _ = killed_at;
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let secs = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(if toolgate_benchkit::quick() { 30 } else { 300 });
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("# Load held: {secs} s per phase, {cores} cores, load average {} at start\n", loadavg());
    // `http`, `stdio`, `kill`: only those phases (default: all three).
    let only: Vec<&str> = args.iter().map(String::as_str).filter(|a| ["http", "stdio", "kill"].contains(a)).collect();
    let wanted = |phase: &str| only.is_empty() || only.contains(&phase);
    let mut v = Verdicts::default();
    if wanted("http") {
        http_phase(secs, &mut v);
    }
    if wanted("stdio") {
        stdio_phase(secs, &mut v);
    }
    if wanted("kill") {
        kill_phase(secs, &mut v);
    }
    println!("\nLoad average at end: {}", loadavg());
    if !v.0.is_empty() {
        println!("\n{} check(s) FAILED:", v.0.len());
        for f in &v.0 {
            println!("- {f}");
        }
        std::process::exit(1);
    }
}
