//! In-process cost of `gate.call("echo")` through the whole pipeline, audit log on.
//!
//! Prints the median and p99 latency and calls/s, on one task and with 10 concurrent tasks.
//! Target (issue 2): median under 20 µs and at least 50,000 calls/s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::Gate;

const CALLS: usize = 200_000;
const TASKS: usize = 10;

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
    let gate = Arc::new(Gate::builder(dir.path()).config(config).build().expect("a gate with audit on"));
    let params = json!({"message": "hello from the benchmark"});

    runtime.block_on(async {
        let ctx = gate.context();
        for _ in 0..10_000 {
            gate.call(&ctx, "echo", params.clone()).await.expect("warm-up call");
        }
        gate.flush_audit();

        let mut latencies = Vec::with_capacity(CALLS);
        let start = Instant::now();
        for _ in 0..CALLS {
            let t = Instant::now();
            gate.call(&ctx, "echo", params.clone()).await.expect("call");
            latencies.push(t.elapsed());
        }
        let wall = start.elapsed();
        report("1 task", &mut latencies, CALLS, wall);
        gate.flush_audit();

        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..TASKS {
            let gate = gate.clone();
            let params = params.clone();
            handles.push(tokio::spawn(async move {
                let ctx = gate.context();
                let mut latencies = Vec::with_capacity(CALLS / TASKS);
                for _ in 0..CALLS / TASKS {
                    let t = Instant::now();
                    gate.call(&ctx, "echo", params.clone()).await.expect("call");
                    latencies.push(t.elapsed());
                }
                latencies
            }));
        }
        let mut latencies = Vec::with_capacity(CALLS);
        for h in handles {
            latencies.extend(h.await.expect("task"));
        }
        let wall = start.elapsed();
        report(&format!("{TASKS} tasks"), &mut latencies, CALLS, wall);
        let flush = Instant::now();
        gate.flush_audit();
        println!("audit flush after the run: {:.1} ms", flush.elapsed().as_secs_f64() * 1e3);
    });
    let store = toolgate::store::Store::open(&dir.path().join(".toolgate/state.db")).expect("the audit database");
    println!("audit records written: {}", store.audit_count().expect("count"));
}

fn report(label: &str, latencies: &mut [Duration], calls: usize, wall: Duration) {
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
}
