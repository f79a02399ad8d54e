//! `cargo xtask bench agent`: the agent runtime's own overhead per model turn and per tool call,
//! how soon a background sub-agent's announcement reaches its parent's model, and how many
//! tasks a team gets through.
//!
//! The models are in-process scripted `ModelClient`s that answer at once, so what is timed is
//! the runtime: building the request, the session writes to SQLite, the loop's checks, and the
//! tool calls through the real gate with its audit log. The peer in the same run is a direct
//! `gate.call` of the same tool: the per-turn overhead is the difference.
//!
//! Sections (all when none is named): `turns`, `announce`, `teams`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::Gate;
use toolgate::agent::{
    AgentConfig, AgentError, Message, ModelClient, ModelReply, ModelRequest, ProviderConfig, RunSpec, RunStatus,
    TeamConfig, ToolCall,
};
use toolgate::config::Config;
use toolgate::store::SessionStore;

/// Calls `echo` until the conversation holds `calls` results, then answers.
#[derive(Debug)]
struct Script {
    calls: usize,
    /// Tools offered in the last request.
    offered: Arc<Mutex<usize>>,
}

#[async_trait::async_trait]
impl ModelClient for Script {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) = req.tools.len();
        let done = req.messages.iter().filter(|m| matches!(m, Message::Tool { .. })).count();
        if done < self.calls {
            Ok(ModelReply { tool_calls: vec![echo(done)], ..ModelReply::default() })
        } else {
            Ok(ModelReply { content: Some("done".into()), ..ModelReply::default() })
        }
    }
}

/// An `echo` call whose arguments differ by `n` (the gate's loop breaker refuses repeats).
fn echo(n: usize) -> ToolCall {
    ToolCall { id: format!("c{n}"), name: "echo".into(), arguments: format!("{{\"message\":\"m{n}\"}}") }
}

fn provider() -> ProviderConfig {
    // Never dialled: every provider here has a scripted client.
    ProviderConfig { base_url: "http://127.0.0.1:9/v1".into(), ..Default::default() }
}

fn agent(provider: &str, tools: &[&str]) -> AgentConfig {
    let mut a = AgentConfig { provider: provider.into(), model: "m".into(), ..Default::default() };
    a.max_iterations = 1000;
    if !tools.is_empty() {
        a.tools = tools.iter().map(|t| (*t).to_owned()).collect();
    }
    a
}

fn build(dir: &std::path::Path, config: Config) -> Arc<Gate> {
    let gate = Arc::new(Gate::builder(dir).config(config).build().expect("gate"));
    gate.bind_agents();
    gate
}

/// A gate whose agent `bench` makes `calls` echo calls per run, offered `tools` (empty: every
/// tool its policy shows, the default).
fn gate(dir: &std::path::Path, calls: usize, tools: &[&str]) -> (Arc<Gate>, Arc<Mutex<usize>>) {
    let mut config = Config::default();
    config.rate_limits.enabled = false;
    config.providers.insert("script".into(), provider());
    config.agents.insert("bench".into(), agent("script", tools));
    let gate = build(dir, config);
    let offered = Arc::new(Mutex::new(0));
    if let Some(rt) = gate.agents() {
        rt.set_client("script", Arc::new(Script { calls, offered: offered.clone() }));
    }
    (gate, offered)
}

fn per(total: Duration, n: usize) -> f64 {
    total.as_secs_f64() * 1e6 / n as f64
}

/// CPU time of this process so far, all threads, user and system (Linux, `/proc/self/stat`, in
/// clock ticks of 10 ms): the work done, which other processes on the machine inflate far less
/// than the wall time.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    // After the command name: state is field 3, utime and stime are fields 14 and 15.
    let fields: Vec<u64> = after.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

/// Median, lowest and highest of `xs`.
fn spread(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

/// Per-call and per-turn figures: medians over batches of runs, with the batches' spread.
async fn turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Peer: the tool call alone, through the same gate.
    let (g, _) = gate(dir.path(), 0, &[]);
    let ctx = g.context();
    let n = 2000;
    for i in 0..100 {
        let _ = g.call(&ctx, "echo", json!({"message": format!("w{i}")})).await;
    }
    let mut directs = Vec::new();
    let c = cpu();
    for _ in 0..5 {
        let t = Instant::now();
        for i in 0..n {
            let _ = g.call(&ctx, "echo", json!({"message": format!("m{i}")})).await;
        }
        directs.push(per(t.elapsed(), n));
    }
    let direct_cpu = per(cpu() - c, 5 * n);
    let (direct, lo, hi) = spread(&mut directs);
    println!(
        "direct gate.call(echo):                    {direct:8.1} µs per call   (5 batches: {lo:.1} .. {hi:.1}; CPU {direct_cpu:.1} µs)"
    );

    // One turn, no tool: session create, its first messages, one model turn, finish.
    let out = g.agents().expect("agents").run(RunSpec::new("bench", "warm up"), &ctx).await.expect("run");
    assert_eq!((out.status, out.iterations), (RunStatus::Done, 1), "{out:?}");
    let mut ones = Vec::new();
    for _ in 0..5 {
        let runs = 100;
        let t = Instant::now();
        for _ in 0..runs {
            let _ = g.agents().expect("agents").run(RunSpec::new("bench", "go"), &ctx).await;
        }
        ones.push(per(t.elapsed(), runs));
    }
    let (one, lo, hi) = spread(&mut ones);
    println!("agent run, 1 turn, no tool call:           {one:8.1} µs per run    (5 batches: {lo:.1} .. {hi:.1})");

    // 20 tool calls: 21 turns per run; every tool offered (the default), then only `echo`.
    for (label, tools) in [("every tool offered", &[][..]), ("only echo offered", &["echo"][..])] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (g20, offered) = gate(dir.path(), 20, tools);
        let ctx = g20.context();
        let out = g20.agents().expect("agents").run(RunSpec::new("bench", "warm up"), &ctx).await.expect("run");
        assert_eq!((out.status, out.tool_calls), (RunStatus::Done, 20), "{out:?}");
        let mut overheads = Vec::new();
        let mut runs20 = Vec::new();
        let c = cpu();
        for _ in 0..7 {
            let runs = 20;
            let t = Instant::now();
            for _ in 0..runs {
                let out = g20.agents().expect("agents").run(RunSpec::new("bench", "go"), &ctx).await.expect("run");
                assert_eq!((out.status, out.tool_calls, out.iterations), (RunStatus::Done, 20, 21), "{out:?}");
            }
            let run20 = per(t.elapsed(), runs);
            runs20.push(run20);
            overheads.push((run20 - 20.0 * direct) / 21.0);
        }
        let overhead_cpu = (per(cpu() - c, 7 * 20) - 20.0 * direct_cpu) / 21.0;
        let (run20, _, _) = spread(&mut runs20);
        let (overhead, lo, hi) = spread(&mut overheads);
        let offered = *offered.lock().unwrap_or_else(|e| e.into_inner());
        println!("agent run, 20 echo calls (21 turns), {label} ({offered} tools):");
        println!("  per run:                                 {run20:8.1} µs");
        println!(
            "  runtime overhead per turn (minus the direct call): {overhead:8.1} µs  (7 batches: {lo:.1} .. {hi:.1}; target < 250 µs)"
        );
        println!("  the same in CPU time (all threads, 10 ms ticks):   {overhead_cpu:8.1} µs");
    }
}

/// The parent: spawns `child` in the background, then makes echo calls until a request holds
/// the child's announcement, and answers.
#[derive(Debug)]
struct Parent {
    /// When a request first held the announcement.
    seen: Arc<Mutex<Option<Instant>>>,
}

#[async_trait::async_trait]
impl ModelClient for Parent {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let announced =
            req.messages.iter().any(|m| matches!(m, Message::User { content } if content.contains("[subagent:")));
        if announced {
            self.seen.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Instant::now);
            return Ok(ModelReply { content: Some("done".into()), ..ModelReply::default() });
        }
        let results = req.messages.iter().filter(|m| matches!(m, Message::Tool { .. })).count();
        let call = if results == 0 {
            ToolCall {
                id: "spawn".into(),
                name: "subagents".into(),
                arguments: json!({"action": "spawn", "agent": "child", "task": "look it up"}).to_string(),
            }
        } else {
            // Working on while the child runs, as a parent does.
            tokio::time::sleep(Duration::from_millis(1)).await;
            echo(results)
        };
        Ok(ModelReply { tool_calls: vec![call], ..ModelReply::default() })
    }
}

/// The child: answers at once, noting when.
#[derive(Debug)]
struct Child {
    finished: Arc<Mutex<Option<Instant>>>,
}

#[async_trait::async_trait]
impl ModelClient for Child {
    async fn complete(&self, _req: &ModelRequest) -> Result<ModelReply, AgentError> {
        *self.finished.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        Ok(ModelReply { content: Some("found it".into()), ..ModelReply::default() })
    }
}

/// From a background child's answer to its announcement in the parent's next model request.
async fn announce() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::default();
    config.rate_limits.enabled = false;
    config.providers.insert("parent".into(), provider());
    config.providers.insert("child".into(), provider());
    config.agents.insert("parent".into(), agent("parent", &["subagents", "echo"]));
    config.agents.insert("child".into(), agent("child", &["echo"]));
    let g = build(dir.path(), config);
    let rt = g.agents().expect("agents");
    let seen = Arc::new(Mutex::new(None));
    let finished = Arc::new(Mutex::new(None));
    rt.set_client("parent", Arc::new(Parent { seen: seen.clone() }));
    rt.set_client("child", Arc::new(Child { finished: finished.clone() }));
    let debounce = toolgate::agent::Limits::default().announce_debounce;
    let mut latencies = Vec::new();
    for i in 0..21 {
        *seen.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *finished.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let out = rt.run(RunSpec::new("parent", "go"), &g.context()).await.expect("parent run");
        assert_eq!(out.status, RunStatus::Done, "{out:?}");
        let (Some(done), Some(seen)) =
            (*finished.lock().unwrap_or_else(|e| e.into_inner()), *seen.lock().unwrap_or_else(|e| e.into_inner()))
        else {
            panic!("run {i}: the child did not finish or its announcement was not seen: {out:?}");
        };
        if i > 0 {
            latencies.push(seen.duration_since(done).as_secs_f64() * 1e3);
        }
    }
    let (median, lo, hi) = spread(&mut latencies);
    let d = debounce.as_secs_f64() * 1e3;
    println!(
        "announcement latency (child answered -> in the parent's next request): {median:6.1} ms  \
         (20 runs: {lo:.1} .. {hi:.1}; of it the {d:.0} ms debounce)"
    );
}

/// A team member: claims the next pending task, completes it, claims again, until none is left.
#[derive(Debug)]
struct Member;

#[async_trait::async_trait]
impl ModelClient for Member {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let n = req.messages.len();
        let call = |arguments: serde_json::Value| {
            let call = ToolCall { id: format!("c{n}"), name: "team_tasks".into(), arguments: arguments.to_string() };
            Ok(ModelReply { tool_calls: vec![call], ..ModelReply::default() })
        };
        let Some(Message::Tool { content, .. }) = req.messages.last() else {
            // The start message: take a task.
            return call(json!({"action": "claim"}));
        };
        if let Some(id) = claimed_id(content) {
            return call(json!({"action": "complete", "task_id": id, "result": format!("did #{id}")}));
        }
        if content.contains("\"completed\"") {
            return call(json!({"action": "claim"}));
        }
        // Nothing pending (or an error): this run is over.
        Ok(ModelReply { content: Some("nothing left".into()), ..ModelReply::default() })
    }
}

/// The id of the task in a `claim` result (`{"claimed": {"id": 7, ...}}` inside the tool's text).
fn claimed_id(content: &str) -> Option<i64> {
    let after = &content[content.find("\"claimed\"")?..];
    let at = after.find("\"id\"")? + 4;
    let digits: String =
        after[at..].chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Tasks per second through a team of `members` whose models answer at once: the lead posts
/// `tasks` tasks (through the gate, as the lead), members run, claim and complete them. Also
/// the CPU time per task (all threads).
async fn team_run(members: usize, tasks: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::default();
    config.rate_limits.enabled = false;
    config.providers.insert("member".into(), provider());
    config.providers.insert("lead".into(), provider());
    config.agents.insert("lead".into(), agent("lead", &["team_tasks"]));
    let names: Vec<String> = (1..=members).map(|i| format!("m{i}")).collect();
    for name in &names {
        // The default turn limit: a member's run ends after 20 turns (10 tasks) and the team
        // starts it again while tasks are pending, so no transcript grows without end.
        let member =
            AgentConfig { max_iterations: AgentConfig::default().max_iterations, ..agent("member", &["team_tasks"]) };
        config.agents.insert(name.clone(), member);
    }
    let team = TeamConfig {
        lead: "lead".into(),
        members: names,
        max_active: members,
        max_turns: 1_000_000,
        max_tokens: u64::MAX / 2,
        ..TeamConfig::default()
    };
    config.teams.insert("crew".into(), team);
    let g = build(dir.path(), config);
    let rt = g.agents().expect("agents");
    rt.set_client("member", Arc::new(Member));
    let board = toolgate::store::Store::open(&dir.path().join(".toolgate/state.db")).expect("state db");
    let done = || {
        let filter = toolgate::store::TaskFilter::Completed;
        board.team_tasks("crew", filter, toolgate::store::TaskOrder::Priority, 0).map(|t| t.len()).unwrap_or(0)
    };
    // The lead posts; its model is never asked (results go to a session the runtime does not
    // keep, so they are kept for it in memory).
    let mut lead = g.context();
    lead.identity.agent = "lead".into();
    lead.identity.session = format!("bench-lead-{members}");
    let (t, c) = (Instant::now(), cpu());
    for i in 0..tasks {
        let created = g.call(&lead, "team_tasks", json!({"action": "create", "subject": format!("task {i}")})).await;
        created.expect("a task is posted");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = done();
        if n == tasks {
            break;
        }
        assert!(Instant::now() < deadline, "{n} of {tasks} tasks done after 120 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (tasks as f64 / t.elapsed().as_secs_f64(), per(cpu() - c, tasks))
}

/// Team throughput with 2 and 8 members.
async fn teams() {
    let tasks = 200;
    for members in [2, 8] {
        let _ = team_run(members, 20).await;
        let (mut rates, mut cpus) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let (rate, cpu) = team_run(members, tasks).await;
            rates.push(rate);
            cpus.push(cpu);
        }
        let (rate, lo, hi) = spread(&mut rates);
        let (cpu, _, _) = spread(&mut cpus);
        println!(
            "team of {members} members, {tasks} tasks posted at once: {rate:7.1} tasks/s  (5 runs: {lo:.1} .. {hi:.1}; CPU {:.2} ms a task)",
            cpu / 1e3
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        if wanted("turns") {
            turns().await;
        }
        if wanted("announce") {
            announce().await;
        }
        if wanted("teams") {
            teams().await;
        }
    });
}
