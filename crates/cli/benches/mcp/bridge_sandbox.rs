//! `bridge-sandbox`: what toolgate's sandbox costs a bridged stdio server
//! (`[mcp.servers.NAME]` with `command`), beside bubblewrap confining the same server.
//!
//! The server is `@modelcontextprotocol/server-everything stdio` on the peer cache's Node 22.
//! Target (the issue): the sandbox adds under 5 ms to a start and nothing measurable to a call.
//!
//! - **start**, [`STARTS`] of each of four variants, interleaved (the order rotates every round,
//!   so load falls on all alike), after one warm-up start each:
//!   - toolgate with the server's default profile and with `sandbox.enabled = false`: a fresh
//!     `Gate` for each start (built before the clock starts), timed from `connect_mcp` until it
//!     returns with the server connected and `mcp__everything__echo` registered. The figure
//!     includes the gate's own connect path (profile, spawn, handshake, tool listing,
//!     registration), so on and off are compared with each other, not with the rmcp rows;
//!   - the bench's rmcp client starting `bwrap` with a profile like toolgate's default
//!     ([`bwrap_command`]), and the same client starting Node directly: timed to a completed
//!     `initialize` and `tools/list`.
//!
//!   After each start the server is stopped, and the next start waits until its processes are
//!   gone (found by a marker argument, which server-everything ignores). The section also times
//!   `Sandbox::new` alone with the same policy: the Landlock ruleset and private temporary
//!   folder each sandboxed start builds.
//! - **echo**: sequential `mcp__everything__echo` calls through `gate.call` (the whole pipeline,
//!   no audit log), one gate with the sandbox on and one with it off, both connected first,
//!   then in rounds, the gates taking turns (which goes first alternates).
//!
//! It runs on its own multi-thread Tokio runtime (an embedding agent's `#[tokio::main]`), since
//! the bridge's supervisor tasks run beside the calls. `bwrap` comes from `cargo xtask deps`
//! (Debian's `bubblewrap`); without it the section fails. `BRIDGE_STARTS=N` changes the number
//! of starts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use serde_json::json;
use toolgate::Gate;
use toolgate::bridge::{ServerConfig, ServerSandbox, ServerState};
use toolgate::config::{ApprovalMode, Config, Window};
use toolgate::tools::runtime::{ResourceLimits, Sandbox, SandboxMode, SandboxPolicy};

use super::{Figures, Plan, Samples, servers, us};

/// Starts measured per variant (after one warm-up start each).
const STARTS: usize = 30;
/// Echo calls: warm-up per gate, then rounds × calls per gate.
const ECHO: Plan = Plan { warmup: 200, rounds: 10, calls: 200 };
/// The bridged server's name, so its tools are `mcp__everything__*`.
const SERVER: &str = "everything";
const ECHO_TOOL: &str = "mcp__everything__echo";
/// An upper bound on waits that must end (a broken start fails instead of hanging).
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The four ways the server is started, in the order of the table.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    GateOn,
    GateOff,
    Bwrap,
    Plain,
}

const VARIANTS: [Variant; 4] = [Variant::GateOn, Variant::GateOff, Variant::Bwrap, Variant::Plain];

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::GateOn => "toolgate bridge, sandbox on (default profile)",
            Variant::GateOff => "toolgate bridge, `sandbox.enabled = false`",
            Variant::Bwrap => "rmcp client, `bwrap` + node",
            Variant::Plain => "rmcp client, node directly",
        }
    }

    /// The argument that marks this variant's server processes.
    fn marker(self) -> &'static str {
        match self {
            Variant::GateOn => "toolgate-bench-start-on",
            Variant::GateOff => "toolgate-bench-start-off",
            Variant::Bwrap => "toolgate-bench-start-bwrap",
            Variant::Plain => "toolgate-bench-start-plain",
        }
    }
}

pub fn run() {
    require_bwrap();
    let starts = std::env::var("BRIDGE_STARTS").ok().and_then(|n| n.parse().ok()).unwrap_or(STARTS).max(2);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        start_section(starts).await;
        echo_section().await;
    });
}

/// Fails the run, saying how to fix it, when `bwrap` is not installed.
fn require_bwrap() {
    let found = Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "`bwrap` (Debian's bubblewrap) is missing: run `cargo xtask deps`, which installs it");
}

/// Node from the peer cache, its path resolved (every variant starts the same file).
fn node() -> PathBuf {
    servers::node().canonicalize().expect("node from the peer cache")
}

/// server-everything's entry point, its path resolved.
fn everything() -> PathBuf {
    servers::everything().canonicalize().expect("server-everything from the peer cache")
}

/// The folder holding the peer cache's `node_modules` (Node and the server): what toolgate's
/// profile reads as the server's installation.
fn peer_cache() -> PathBuf {
    let node = node();
    let npm = node.ancestors().find(|a| a.ends_with("node_modules")).and_then(Path::parent);
    npm.expect("node lives in the peer cache's node_modules").to_path_buf()
}

/// A workspace for one variant: its `toolgate.toml` is not read (the gate gets its config in
/// code); it is where the server runs and what its profile lets it read.
fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary workspace")
}

/// The gate's configuration: server-everything as `[mcp.servers.everything]`, its sandbox on or
/// off, and nothing in the pipeline that would stop a benchmark repeating one call.
fn config(sandboxed: bool, marker: &str) -> Config {
    let server = ServerConfig {
        command: Some(node().display().to_string()),
        args: vec![everything().display().to_string(), "stdio".into(), marker.into()],
        sandbox: ServerSandbox { enabled: sandboxed, ..ServerSandbox::default() },
        ..ServerConfig::default()
    };
    let mut config = Config::default();
    config.mcp.servers.insert(SERVER.to_owned(), server);
    config.approval.mode = ApprovalMode::Never;
    config.loop_breaker.enabled = false;
    config.rate_limits.tools.insert(ECHO_TOOL.to_owned(), Window { per_minute: u32::MAX, per_hour: u32::MAX });
    config
}

fn gate(workspace: &Path, sandboxed: bool, marker: &str) -> Gate {
    Gate::builder(workspace).config(config(sandboxed, marker)).no_audit().build().expect("build the gate")
}

/// Connects the gate's bridge; panics unless the server is connected with its echo registered.
async fn connect(gate: &Gate) -> Duration {
    let start = Instant::now();
    let finished = gate.connect_mcp(HANG_GUARD).await;
    let took = start.elapsed();
    let status = gate.mcp_status();
    assert!(finished, "the server's first connection attempt did not finish: {status:?}");
    assert!(
        status.len() == 1
            && status[0].state == ServerState::Connected
            && status[0].tools.iter().any(|t| t == ECHO_TOOL),
        "the server is not connected with {ECHO_TOOL} registered: {status:?}"
    );
    took
}

/// The command line that starts the server under `bwrap`, with a profile like toolgate's
/// default for it: the system read-only (`/usr`, `/etc`, the merged-`/usr` links), the peer
/// cache holding Node and the server's `node_modules` read-only, the workspace read-only with
/// its `.toolgate` hidden and `.toolgate/mcp/everything` writable, a private `/tmp`, every
/// namespace unshared (no network), the environment cleared.
fn bwrap_command(workspace: &Path, marker: &str) -> Command {
    let npm = peer_cache();
    let state = workspace.join(".toolgate/mcp").join(SERVER);
    std::fs::create_dir_all(&state).expect("the server's state folder");
    let mut cmd = Command::new("bwrap");
    // /tmp first: the workspace is a temporary folder, bound on top of it.
    cmd.args(["--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]);
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64"] {
        match std::fs::read_link(dir) {
            Ok(target) => {
                cmd.arg("--symlink").arg(target).arg(dir);
            }
            Err(_) => {
                cmd.args(["--ro-bind-try", dir, dir]);
            }
        }
    }
    cmd.arg("--ro-bind").arg(&npm).arg(&npm);
    cmd.arg("--ro-bind").arg(workspace).arg(workspace);
    cmd.arg("--tmpfs").arg(workspace.join(".toolgate"));
    cmd.arg("--bind").arg(&state).arg(&state);
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]);
    cmd.arg("--setenv").arg("TMPDIR").arg("/tmp");
    cmd.arg("--chdir").arg(workspace);
    cmd.arg(node()).arg(everything()).args(["stdio", marker]);
    cmd
}

/// The same server, started directly (environment cleared, like the bridge does).
fn plain_command(workspace: &Path, marker: &str) -> Command {
    let mut cmd = Command::new(node());
    cmd.arg(everything()).args(["stdio", marker]).env_clear().current_dir(workspace);
    cmd
}

/// One start by the rmcp client: spawn, `initialize`, `tools/list`; then the client closes.
/// Returns the wall time and the CPU time to that point ([`cpu_since`]).
async fn rmcp_start(cmd: Command, marker: &str) -> (Duration, Duration) {
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;
    let cpu = own_cpu();
    let start = Instant::now();
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let client = ().serve(transport).await.expect("initialize over stdio");
    let tools = client.list_all_tools().await.expect("tools/list");
    let took = start.elapsed();
    let cpu = cpu_since(cpu, marker);
    assert!(tools.iter().any(|t| t.name == "echo"), "server-everything lists no echo");
    let _ = client.cancel().await;
    (took, cpu)
}

/// One start of `variant`, then its teardown; returns the wall time and the CPU time to a
/// connected server.
async fn start_once(variant: Variant, workspace: &Path) -> (Duration, Duration) {
    let marker = variant.marker();
    let took = match variant {
        Variant::GateOn | Variant::GateOff => {
            let gate = gate(workspace, variant == Variant::GateOn, marker);
            let cpu = own_cpu();
            let took = connect(&gate).await;
            let cpu = cpu_since(cpu, marker);
            gate.shutdown();
            drop(gate);
            (took, cpu)
        }
        Variant::Bwrap => rmcp_start(bwrap_command(workspace, marker), marker).await,
        Variant::Plain => rmcp_start(plain_command(workspace, marker), marker).await,
    };
    gone(marker).await;
    took
}

/// This process's CPU time (user + system, every thread).
fn own_cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1_000);
    tv(usage.user_time()) + tv(usage.system_time())
}

/// CPU time since `own` was read: this process's, plus the time on CPU so far of the server's
/// processes (those marked, and their ancestors below this process: a sandbox's init, bwrap),
/// every thread, from `/proc/PID/task/TID/schedstat` (nanoseconds).
fn cpu_since(own: Duration, marker: &str) -> Duration {
    let me = std::process::id();
    let mut tree = Vec::new();
    for pid in pids_with(marker) {
        let mut pid = pid;
        while pid != me && pid > 1 && !tree.contains(&pid) {
            tree.push(pid);
            pid = parent_of(pid).unwrap_or(0);
        }
    }
    let on_cpu: u64 = tree
        .iter()
        .filter_map(|pid| std::fs::read_dir(format!("/proc/{pid}/task")).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()))
        .sum();
    own_cpu().saturating_sub(own) + Duration::from_nanos(on_cpu)
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Waits until no process has `marker` in its command line (the stopped server and anything it
/// started).
async fn gone(marker: &str) {
    let deadline = Instant::now() + HANG_GUARD;
    while !pids_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "the server marked {marker} outlived its stop: {:?}", pids_with(marker));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn pids_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()))
        })
        .collect()
}

/// Start times, sorted.
struct Starts(Vec<Duration>);

impl Starts {
    fn sorted(mut times: Vec<Duration>) -> Starts {
        times.sort();
        Starts(times)
    }
    fn median_ms(&self) -> f64 {
        self.median().as_secs_f64() * 1e3
    }
    fn at(&self, q: f64) -> Duration {
        self.0[((self.0.len() - 1) as f64 * q).round() as usize]
    }
    fn min(&self) -> Duration {
        self.0[0]
    }
    fn median(&self) -> Duration {
        self.at(0.5)
    }
    fn p90(&self) -> Duration {
        self.at(0.9)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

async fn start_section(starts: usize) {
    let workspaces: Vec<tempfile::TempDir> = VARIANTS.iter().map(|_| workspace()).collect();
    for (variant, ws) in VARIANTS.iter().zip(&workspaces) {
        start_once(*variant, ws.path()).await;
    }
    // [variant][round]: wall time and CPU time.
    let mut wall: Vec<Vec<Duration>> = VARIANTS.iter().map(|_| Vec::with_capacity(starts)).collect();
    let mut cpu: Vec<Vec<Duration>> = VARIANTS.iter().map(|_| Vec::with_capacity(starts)).collect();
    for round in 0..starts {
        for k in 0..VARIANTS.len() {
            let i = (round + k) % VARIANTS.len();
            let (w, c) = start_once(VARIANTS[i], workspaces[i].path()).await;
            wall[i].push(w);
            cpu[i].push(c);
        }
    }
    let new_times = sandbox_new_times(workspaces[0].path(), starts * 5);
    // What a confinement adds, two ways: the difference of the medians, and the median of the
    // differences within each round (the two starts of a round share the machine's load).
    let added = |times: &[Vec<Duration>], with: usize, without: usize| {
        let medians =
            Starts::sorted(times[with].clone()).median_ms() - Starts::sorted(times[without].clone()).median_ms();
        let mut paired: Vec<f64> =
            times[with].iter().zip(&times[without]).map(|(a, b)| (a.as_secs_f64() - b.as_secs_f64()) * 1e3).collect();
        paired.sort_by(f64::total_cmp);
        (medians, paired[paired.len() / 2])
    };
    let (sandbox, bwrap) = (added(&wall, 0, 1), added(&wall, 2, 3));
    let (sandbox_cpu, bwrap_cpu) = (added(&cpu, 0, 1), added(&cpu, 2, 3));
    let s: Vec<Starts> = wall.iter().cloned().map(Starts::sorted).collect();
    let c: Vec<Starts> = cpu.iter().cloned().map(Starts::sorted).collect();
    println!(
        "### bridge-sandbox: server start, {starts} starts per variant, interleaved, after one warm-up start each\n"
    );
    println!(
        "toolgate rows: `gate.connect_mcp` until the server is connected and its tools are registered, \
         the gate's own connect path included. rmcp rows: spawn until `initialize` and `tools/list` are done. \
         Added: the difference of the medians (the median of the per-round differences). CPU: this process's \
         and the server's processes' time on CPU to that point, all threads (less sensitive to other load \
         than the wall time).\n"
    );
    println!("| start | min | median | p90 | added | CPU, median | CPU added |");
    println!("|---|---|---|---|---|---|---|");
    for (i, variant) in VARIANTS.iter().enumerate() {
        let (added, cpu_added) = match variant {
            Variant::GateOn => (
                format!("{:+.1} ms ({:+.1} ms) vs off", sandbox.0, sandbox.1),
                format!("{:+.1} ms ({:+.1} ms)", sandbox_cpu.0, sandbox_cpu.1),
            ),
            Variant::Bwrap => (
                format!("{:+.1} ms ({:+.1} ms) vs plain", bwrap.0, bwrap.1),
                format!("{:+.1} ms ({:+.1} ms)", bwrap_cpu.0, bwrap_cpu.1),
            ),
            _ => ("-".to_owned(), "-".to_owned()),
        };
        println!(
            "| {} | {} | {} | {} | {added} | {} | {cpu_added} |",
            variant.label(),
            ms(s[i].min()),
            ms(s[i].median()),
            ms(s[i].p90()),
            ms(c[i].median())
        );
    }
    println!();
    println!(
        "Added to a start by toolgate's sandbox: {:.1} ms wall, {:.1} ms CPU (medians on − off; target under \
         5 ms); by bwrap: {:.1} ms wall, {:.1} ms CPU (medians bwrap − plain).",
        sandbox.0, sandbox_cpu.0, bwrap.0, bwrap_cpu.0
    );
    println!(
        "Of a sandboxed start, `Sandbox::new` alone (Landlock ruleset, private temporary folder; same policy, \
         {} times): min {}, median {}, p90 {}.\n",
        new_times.0.len(),
        us(new_times.min()),
        us(new_times.median()),
        us(new_times.p90())
    );
}

/// `Sandbox::new` with the policy the default profile gives this server (`profile.rs`): the
/// workspace read-only, the peer cache readable, the state folder writable, no network. The
/// drop (which removes the private temporary folder) is not timed.
fn sandbox_new_times(workspace: &Path, n: usize) -> Starts {
    let workspace = workspace.canonicalize().expect("the workspace");
    let npm = peer_cache();
    let policy = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        network: toolgate::tools::runtime::Network::Off,
        extra_writable: vec![workspace.join(".toolgate/mcp").join(SERVER)],
        extra_readable: vec![npm],
        limits: ResourceLimits { cpu_seconds: u64::MAX, address_space_bytes: 64 << 30, ..ResourceLimits::default() },
        workspace,
        ..SandboxPolicy::default()
    };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let sandbox = Sandbox::new(policy.clone()).expect("the sandbox can be set up");
        times.push(start.elapsed());
        drop(sandbox);
    }
    Starts::sorted(times)
}

/// One call through the gate, timed; the result must carry the echo.
async fn echo_once(gate: &Gate) -> Duration {
    let start = Instant::now();
    let out = gate.call(&gate.context(), ECHO_TOOL, json!({"message": "hi"})).await;
    let took = start.elapsed();
    let out = out.expect("the echo call");
    assert!(out.text_content().contains("Echo: hi"), "{out:?}");
    took
}

async fn echo_section() {
    let (ws_on, ws_off) = (workspace(), workspace());
    let on = gate(ws_on.path(), true, "toolgate-bench-echo-on");
    let off = gate(ws_off.path(), false, "toolgate-bench-echo-off");
    connect(&on).await;
    connect(&off).await;
    let gates = [&on, &off];
    for gate in gates {
        for _ in 0..ECHO.warmup {
            echo_once(gate).await;
        }
    }
    let mut samples: Vec<Samples> = gates
        .iter()
        .map(|_| Samples { times: Vec::with_capacity(ECHO.rounds * ECHO.calls), elapsed: Duration::ZERO, bytes: None })
        .collect();
    // The gates take turns, and which goes first alternates from round to round.
    for round in 0..ECHO.rounds {
        for k in 0..gates.len() {
            let i = (round + k) % gates.len();
            for _ in 0..ECHO.calls {
                let took = echo_once(gates[i]).await;
                samples[i].times.push(took);
                samples[i].elapsed += took;
            }
        }
    }
    println!(
        "### bridge-sandbox: `gate.call(\"{ECHO_TOOL}\")`, {} rounds of {} sequential calls per gate, after {} \
         warm-up calls\n",
        ECHO.rounds, ECHO.calls, ECHO.warmup
    );
    let figures: Vec<Figures> = samples.iter().map(Samples::figures).collect();
    println!("| server | min | median | p99 | calls/s | on vs off: median | calls/s |");
    println!("|---|---|---|---|---|---|---|");
    let labels = ["sandbox on (default profile)", "`sandbox.enabled = false`"];
    let (on_f, off_f) = (&figures[0], &figures[1]);
    for (i, (label, f)) in labels.iter().zip(&figures).enumerate() {
        let (by_median, by_rate) = if i == 0 {
            (
                format!("{:.2}x", off_f.median.as_secs_f64() / on_f.median.as_secs_f64()),
                format!("{:.2}x", on_f.per_sec / off_f.per_sec),
            )
        } else {
            ("-".to_owned(), "-".to_owned())
        };
        println!(
            "| {label} | {} | {} | {} | {:.0} | {by_median} | {by_rate} |",
            us(f.min),
            us(f.median),
            us(f.p99),
            f.per_sec
        );
    }
    println!("\n(on vs off: 1.00x is no difference; below 1 the sandboxed server is slower.)\n");
    on.shutdown();
    off.shutdown();
    drop((on, off));
    gone("toolgate-bench-echo-on").await;
    gone("toolgate-bench-echo-off").await;
}
