//! The waiting part of a call that is not read-only: `AuditStore::record_started` (the "started"
//! row, committed before the call runs), then its completion queued with `record`, as the gate
//! does. Prints the median and p99 of `record_started` on one thread and on ten.
//!
//! `cargo bench -p toolgate-store --bench audit_started` (builds only the store crate; the
//! whole-pipeline figure is `crates/toolgate/benches/gate.rs`'s `touch`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_store::{AuditLog, AuditRecord, AuditStore, STARTED};

const CALLS: usize = 20_000;
const THREADS: usize = 10;

fn record(i: usize, thread: usize) -> AuditRecord {
    AuditRecord {
        id: format!("call-{thread}-{i}"),
        ts_ms: 1_700_000_000_000 + i as i64,
        user: "bench".into(),
        agent: "main".into(),
        session: "s".into(),
        tool: "touch".into(),
        params: format!("{{\"i\": {i}, \"path\": \"src/some/file/in/the/workspace.rs\"}}"),
        decision: "policy: allow (profile full)".into(),
        outcome: STARTED.into(),
        ..AuditRecord::default()
    }
}

fn call(log: &AuditLog, i: usize, thread: usize) -> Duration {
    let started = record(i, thread);
    let t = Instant::now();
    log.record_started(started.clone());
    let waited = t.elapsed();
    log.record(AuditRecord { outcome: "ok".into(), duration_us: 3, output_bytes: 7, ..started });
    waited
}

fn report(label: &str, latencies: &mut [Duration], wall: Duration) {
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    let p999 = latencies[latencies.len() * 999 / 1000];
    let max = latencies[latencies.len() - 1];
    println!(
        "record_started, {label:>10}: median {:>7.1} µs  p99 {:>8.1} µs  p99.9 {:>8.1} µs  max {:>8.1} µs  {:>7.0} calls/s",
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        p999.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6,
        latencies.len() as f64 / wall.as_secs_f64()
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let log = Arc::new(AuditLog::open(&dir.path().join(".toolgate/state.db")).expect("the audit log"));
    for i in 0..1_000 {
        call(&log, i, 99);
    }
    let mut latencies = Vec::with_capacity(CALLS);
    let start = Instant::now();
    for i in 0..CALLS {
        latencies.push(call(&log, i, 0));
    }
    report("1 thread", &mut latencies, start.elapsed());

    let start = Instant::now();
    let handles: Vec<_> = (1..=THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || (0..CALLS / THREADS).map(|i| call(&log, i, t)).collect::<Vec<_>>())
        })
        .collect();
    let mut latencies: Vec<Duration> = handles.into_iter().flat_map(|h| h.join().expect("a bench thread")).collect();
    report(&format!("{THREADS} threads"), &mut latencies, start.elapsed());
    log.flush();
    println!("rows: {}", log.audit_count().expect("count"));
}
