//! In-process cost of `gate.call("echo")` through the whole pipeline, audit log on.
//!
//! Prints the median and p99 latency and calls/s, on one task and with 10 concurrent tasks.
//! Target (issue 2): median under 20 µs and at least 50,000 calls/s.
//!
//! Then the same for a tool that is not read-only and does nothing (`touch`): such a call also
//! writes a "started" audit row and waits for it before it runs (issue 11), so the difference
//! to `echo` is the cost of that row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::core::{CallContext, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_benchkit::summary::{Row, Target};

const TASKS: usize = 10;

/// Not read-only (a plain `ToolSpec`), needs no approval, does nothing.
#[derive(Debug)]
struct Touch(ToolSpec);

#[async_trait::async_trait]
impl Tool for Touch {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn execute(&self, _: &CallContext, _: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("touched"))
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    // Rate limiting stays on (it is part of the pipeline being measured), with a limit the
    // benchmark's 410,000 calls cannot reach.
    let mut config = toolgate::config::Config::default();
    config
        .rate_limits
        .tools
        .insert("echo".into(), toolgate::config::Window { per_minute: u32::MAX, per_hour: u32::MAX });
    config
        .rate_limits
        .tools
        .insert("touch".into(), toolgate::config::Window { per_minute: u32::MAX, per_hour: u32::MAX });
    let touch = ToolSpec::new("touch", "Does nothing, but is not read-only.", json!({"type": "object"}));
    assert!(!touch.annotations.read_only);
    let gate = Arc::new(
        Gate::builder(dir.path()).config(config).tool(Arc::new(Touch(touch))).build().expect("a gate with audit on"),
    );
    let params = json!({"message": "hello from the benchmark"});
    // `cargo xtask bench summary` runs a fifth of the calls.
    let calls = toolgate_benchkit::rounds(200_000, 40_000);
    // Calls of the tool that is not read-only (each waits for a database commit).
    let write_calls = toolgate_benchkit::rounds(20_000, 4_000);

    runtime.block_on(async {
        let ctx = gate.context();
        for _ in 0..10_000 {
            gate.call(&ctx, "echo", params.clone()).await.expect("warm-up call");
        }
        gate.flush_audit();

        let mut latencies = Vec::with_capacity(calls);
        let start = Instant::now();
        for _ in 0..calls {
            let t = Instant::now();
            gate.call(&ctx, "echo", params.clone()).await.expect("call");
            latencies.push(t.elapsed());
        }
        let wall = start.elapsed();
        let (median, _, rate) = report("1 task", &mut latencies, calls, wall);
        Row::new("`gate.call(echo)` in process, median", median, "µs").target(Target::AtMost(20.0)).emit();
        Row::new("`gate.call(echo)` in process, 1 task", rate, "calls/s").target(Target::AtLeast(50_000.0)).emit();
        gate.flush_audit();

        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..TASKS {
            let gate = gate.clone();
            let params = params.clone();
            handles.push(tokio::spawn(async move {
                let ctx = gate.context();
                let mut latencies = Vec::with_capacity(calls / TASKS);
                for _ in 0..calls / TASKS {
                    let t = Instant::now();
                    gate.call(&ctx, "echo", params.clone()).await.expect("call");
                    latencies.push(t.elapsed());
                }
                latencies
            }));
        }
        let mut latencies = Vec::with_capacity(calls);
        for h in handles {
            latencies.extend(h.await.expect("task"));
        }
        let wall = start.elapsed();
        report(&format!("{TASKS} tasks"), &mut latencies, calls, wall);
        let flush = Instant::now();
        gate.flush_audit();
        println!("audit flush after the run: {:.1} ms", flush.elapsed().as_secs_f64() * 1e3);

        // Different parameters each time: the loop breaker refuses a call repeated 3 times.
        for i in 0..1_000 {
            gate.call(&ctx, "touch", json!({ "i": i })).await.expect("warm-up call");
        }
        let mut latencies = Vec::with_capacity(write_calls);
        let start = Instant::now();
        for i in 0..write_calls {
            let params = json!({ "i": i });
            let t = Instant::now();
            gate.call(&ctx, "touch", params).await.expect("call");
            latencies.push(t.elapsed());
        }
        let p99 = report_plain("gate.call(touch), not read-only, 1 task", &mut latencies, write_calls, start.elapsed());
        Row::new("`gate.call` of a tool that is not read-only, p99", p99, "µs").emit();
        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..TASKS {
            let gate = gate.clone();
            handles.push(tokio::spawn(async move {
                let ctx = gate.context();
                let mut latencies = Vec::with_capacity(write_calls / TASKS);
                for i in 0..write_calls / TASKS {
                    let params = json!({ "i": i });
                    let t = Instant::now();
                    gate.call(&ctx, "touch", params).await.expect("call");
                    latencies.push(t.elapsed());
                }
                latencies
            }));
        }
        let mut latencies = Vec::with_capacity(write_calls);
        for h in handles {
            latencies.extend(h.await.expect("task"));
        }
        report_plain(
            &format!("gate.call(touch), not read-only, {TASKS} tasks"),
            &mut latencies,
            write_calls,
            start.elapsed(),
        );
        gate.flush_audit();
    });
    let store = toolgate::store::Store::open(&dir.path().join(".toolgate/state.db")).expect("the audit database");
    println!("audit records written: {}", store.audit_count().expect("count"));
}

/// Prints one run; returns its median and p99 in µs and its calls/s.
fn report(label: &str, latencies: &mut [Duration], calls: usize, wall: Duration) -> (f64, f64, f64) {
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    let rate = calls as f64 / wall.as_secs_f64();
    println!(
        "gate.call(echo), audit on, {label:>8}: median {:>6.2} µs  p99 {:>7.2} µs  {:>9.0} calls/s  (target: median < 20 µs, >= 50,000 calls/s: {})",
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        rate,
        if median < Duration::from_micros(20) && rate >= 50_000.0 { "met" } else { "NOT met" }
    );
    (median.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6, rate)
}

/// Prints one run; returns its p99 in µs.
fn report_plain(label: &str, latencies: &mut [Duration], calls: usize, wall: Duration) -> f64 {
    latencies.sort_unstable();
    println!(
        "{label}: median {:>6.2} µs  p99 {:>7.2} µs  {:>9.0} calls/s",
        latencies[latencies.len() / 2].as_secs_f64() * 1e6,
        latencies[latencies.len() * 99 / 100].as_secs_f64() * 1e6,
        calls as f64 / wall.as_secs_f64()
    );
    latencies[latencies.len() * 99 / 100].as_secs_f64() * 1e6
}
