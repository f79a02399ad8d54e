//! Routines: scheduler precision and webhook → job start latency, on a real state database.
//!
//! - precision: 1,000 cron routines (`* * * * *`) on the real clock for two minutes; for each
//!   fire, the time its job was handed to the jobs engine minus its scheduled instant (p50, p99,
//!   max; target p99 < 50 ms). All 1,000 are due at the same instant, the worst case.
//! - webhook: 1,000 signed requests to `Routines::webhook` (the route's logic without the HTTP
//!   server): request received → job start (p50, p99; target p50 < 10 ms).
//!
//! `cargo bench -p toolgate-automation --bench routines` (`ROUTINES_BENCH_MINUTES=N` for more).
//! The jobs engine is a recorder here: what is measured is the routines' own path (lease,
//! checks, the claim transaction, the prompt), not an agent's run.

#![allow(clippy::unwrap_used)] // a benchmark fails loudly

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolgate_automation::routines::webhook::sign;
use toolgate_automation::routines::{
    ActionType, CatchUp, RoutineRun, RoutineSpec, Routines, RoutinesConfig, RoutinesSetup, RunSink, Started, Trigger,
};
use toolgate_core::CallContext;
use toolgate_store::{Store, Stores};
use toolgate_tools::fs::{FsConfig, FsState};

#[derive(Debug, Default)]
struct Recorder {
    started: Mutex<Vec<(i64, i64, Instant)>>,
}

#[async_trait::async_trait]
impl RunSink for Recorder {
    async fn start(&self, run: RoutineRun) -> Result<Started, String> {
        let now = chrono::Utc::now().timestamp_millis();
        let mut v = self.started.lock().unwrap();
        v.push((run.scheduled_ms, now, Instant::now()));
        Ok(Started::Job(format!("job-{}", v.len())))
    }

    fn is_active(&self, _: &str) -> Option<bool> {
        Some(false)
    }
}

fn spec(trigger: Trigger) -> RoutineSpec {
    RoutineSpec {
        trigger,
        prompt: "bench".into(),
        description: None,
        schedule: (trigger == Trigger::Cron).then(|| "* * * * *".into()),
        timezone: "UTC".into(),
        event_channel: None,
        event_pattern: None,
        context_paths: Vec::new(),
        action_type: ActionType::Tool,
        tool: Some("echo".into()),
        params: None,
        cooldown_secs: 0,
        catch_up: CatchUp::Skip,
        catch_up_max_age_secs: 3600,
        agent: None,
        session: None,
    }
}

fn service(dir: &std::path::Path, sink: Arc<Recorder>) -> Arc<Routines> {
    let stores = Stores::sqlite(Arc::new(Store::open(&dir.join(".toolgate/state.db")).unwrap()));
    let mut config = RoutinesConfig::default();
    config.max_fires_per_minute = 1_000_000;
    let setup = RoutinesSetup::new(
        dir.to_owned(),
        Arc::clone(&stores.routines),
        Arc::clone(&stores.secrets),
        FsState::new_shared(FsConfig::default()).unwrap(),
        sink,
        false,
    )
    .with_config(config);
    Routines::new(setup)
}

fn percentiles(label: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{label}: n = {}, p50 = {:.2} ms, p99 = {:.2} ms, max = {:.2} ms",
        ms.len(),
        at(0.50),
        at(0.99),
        ms[ms.len() - 1]
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let minutes: i64 = std::env::var("ROUTINES_BENCH_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(2).max(0);

    // Precision.
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let sink = Arc::new(Recorder::default());
    let routines = service(&ws, Arc::clone(&sink));
    let ctx = CallContext::new(ws.clone());
    for i in 0..1_000 {
        routines.create(&ctx, &format!("r{i}"), spec(Trigger::Cron), true, None).unwrap();
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(Arc::clone(&routines).run(shutdown.clone()));
    let now = chrono::Utc::now().timestamp_millis();
    let end = (now / 60_000 + minutes + 1) * 60_000 + 2_000;
    println!(
        "precision: 1,000 routines `* * * * *`, {minutes} minute(s) of fires (until {} s from now)",
        (end - now) / 1000
    );
    tokio::time::sleep(Duration::from_millis(end.saturating_sub(now).max(0) as u64)).await;
    shutdown.cancel();
    task.await.unwrap();
    let late: Vec<f64> = sink.started.lock().unwrap().iter().map(|(s, at, _)| (at - s) as f64).collect();
    percentiles("fire time - scheduled (1,000 due at once)", late);

    // Webhook → job start.
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let sink = Arc::new(Recorder::default());
    let routines = service(&ws, Arc::clone(&sink));
    let secret = "bench-webhook-secret-0123456789";
    routines.create(&CallContext::new(ws.clone()), "hook", spec(Trigger::Webhook), true, Some(secret.into())).unwrap();
    let mut latencies = Vec::new();
    for i in 0..1_000 {
        let body = format!("{{\"delivery\":{i}}}");
        let ts = chrono::Utc::now().timestamp();
        let sig = sign(secret.as_bytes(), ts, body.as_bytes());
        let t = Instant::now();
        let (status, reply) =
            routines.webhook("POST", "/hooks/hook", Some(&ts.to_string()), Some(&sig), body.as_bytes()).await;
        assert_eq!(status, 202, "request {i}: {reply}");
        let started = sink.started.lock().unwrap().last().unwrap().2;
        latencies.push(started.duration_since(t).as_secs_f64() * 1000.0);
    }
    percentiles("webhook request -> job start (in process, no HTTP)", latencies);
}
