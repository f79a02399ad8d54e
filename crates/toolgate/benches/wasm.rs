//! WASM tools: per-call cost of a trivial tool (echo) through the runtime alone and through
//! `gate.call`, p50/p99 and calls/s on 1 and 8 tasks; cold start (compile) and warm start (disk
//! cache); the Python and JavaScript examples with the time split between instantiation and
//! execution; and, in the same run, the same echo as a sandboxed process (`exec` of Python).
//!
//! Target (issue 16): the WAT echo at most 20 µs p50 through the runtime.
//! The Python and JavaScript components come from `cargo xtask deps` (`.cache/wasm/`).

use toolgate_testkit::wasm as support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::Gate;
use toolgate::wasm::{Capabilities, RuntimeConfig, Services, WasmRuntime, WasmTool};
use toolgate_benchkit::summary::{Row, Target};

const TASKS: usize = 8;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    runtime.block_on(run());
}

async fn run() {
    // `cargo xtask bench summary` runs fewer calls of each kind.
    let calls = toolgate_benchkit::rounds(20_000, 5_000);
    let interpreter_calls = toolgate_benchkit::rounds(200, 30);
    let process_calls = toolgate_benchkit::rounds(100, 20);
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("wasm-cache");
    let cfg = RuntimeConfig { cache_dir: Some(cache.clone()), ..RuntimeConfig::default() };
    let rt = WasmRuntime::new(cfg.clone()).expect("runtime");
    let wat = support::Guest::default().component();
    let python = cached("python-echo");
    let js = cached("js-echo");
    let big =
        Capabilities::from_json(r#"{"limits": {"memory_mb": 64, "instances": 16, "component_mb": 32}}"#).expect("caps");

    println!("== start (compile = cold, disk cache = warm) ==");
    for (name, bytes, caps) in [
        ("wat-echo", Some(&wat), &Capabilities::none()),
        ("python-echo", python.as_ref(), &big),
        ("js-echo", js.as_ref(), &big),
    ] {
        let Some(bytes) = bytes else { continue };
        let t = Instant::now();
        let cold = rt.prepare(bytes, caps).await.expect("prepare");
        let cold_t = t.elapsed();
        assert!(!cold.from_cache);
        let warm_rt = WasmRuntime::new(cfg.clone()).expect("runtime");
        let t = Instant::now();
        let warm = warm_rt.prepare(bytes, caps).await.expect("prepare");
        let warm_t = t.elapsed();
        assert!(warm.from_cache);
        println!(
            "{name:<12} {:>6.1} MB  cold {:>9.1} ms  warm {:>8.2} ms  ({:.0}x)",
            bytes.len() as f64 / 1e6,
            ms(cold_t),
            ms(warm_t),
            cold_t.as_secs_f64() / warm_t.as_secs_f64()
        );
    }

    println!("\n== WAT echo through the runtime alone (instantiate + call, fresh store each) ==");
    let prepared = rt.prepare(&wat, &Capabilities::none()).await.expect("prepare");
    let caps = Arc::new(Capabilities::none());
    let name: Arc<str> = Arc::from("wasm__echo");
    let params = r#"{"text":"hello from the benchmark"}"#;
    for _ in 0..1_000 {
        rt.execute(&prepared, name.clone(), caps.clone(), Services::default(), None, params)
            .await
            .0
            .expect("ok")
            .expect("ok");
    }
    let mut lat = Vec::with_capacity(calls);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        rt.execute(&prepared, name.clone(), caps.clone(), Services::default(), None, params)
            .await
            .0
            .expect("ok")
            .expect("ok");
        lat.push(t.elapsed());
    }
    let runtime_p50 = report("runtime, 1 task", &mut lat, start.elapsed());
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let (rt, prepared, caps, name) = (rt.clone(), prepared.clone(), caps.clone(), name.clone());
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(calls / TASKS);
            for _ in 0..calls / TASKS {
                let t = Instant::now();
                rt.execute(&prepared, name.clone(), caps.clone(), Services::default(), None, params)
                    .await
                    .0
                    .expect("ok")
                    .expect("ok");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.expect("task"));
    }
    report(&format!("runtime, {TASKS} tasks"), &mut lat, start.elapsed());

    println!("\n== WAT echo through gate.call (whole pipeline, audit on) ==");
    let ws = tempfile::tempdir().expect("workspace");
    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    for tool in ["wasm__echo", "exec"] {
        config
            .rate_limits
            .tools
            .insert(tool.into(), toolgate::config::Window { per_minute: u32::MAX, per_hour: u32::MAX });
    }
    let echo = WasmTool::new(rt.clone(), prepared.clone(), "echo", Capabilities::none(), Services::default());
    let gate = Arc::new(Gate::builder(ws.path()).config(config).tool(Arc::new(echo)).build().expect("gate"));
    let p = json!({"text": "hello from the benchmark"});
    let ctx = gate.context();
    for _ in 0..1_000 {
        gate.call(&ctx, "wasm__echo", varied(&p)).await.expect("call");
    }
    let mut lat = Vec::with_capacity(calls);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        gate.call(&ctx, "wasm__echo", varied(&p)).await.expect("call");
        lat.push(t.elapsed());
    }
    let gate_p50 = report("gate.call, 1 task", &mut lat, start.elapsed());
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let (gate, p) = (gate.clone(), p.clone());
        handles.push(tokio::spawn(async move {
            let ctx = gate.context();
            let mut lat = Vec::with_capacity(calls / TASKS);
            for _ in 0..calls / TASKS {
                let t = Instant::now();
                gate.call(&ctx, "wasm__echo", varied(&p)).await.expect("call");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.expect("task"));
    }
    report(&format!("gate.call, {TASKS} tasks"), &mut lat, start.elapsed());
    gate.flush_audit();

    println!("\n== interpreters through the runtime ({interpreter_calls} calls each) ==");
    for (label, bytes) in [("python-echo", python.as_ref()), ("js-echo", js.as_ref())] {
        let Some(bytes) = bytes else { continue };
        let prepared = rt.prepare(bytes, &big).await.expect("prepare");
        let caps = Arc::new(big.clone());
        let (mut inst, mut exec, mut total) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..interpreter_calls + 10 {
            let t = Instant::now();
            let (r, report) =
                rt.execute(&prepared, name.clone(), caps.clone(), Services::default(), None, params).await;
            r.expect("ok").expect("ok");
            if i >= 10 {
                total.push(t.elapsed());
                inst.push(report.instantiate);
                exec.push(report.execute);
            }
        }
        let (i50, e50) = (median(&mut inst), median(&mut exec));
        let t50 = median(&mut total);
        println!("{label:<12} p50 {:>8.1} µs = instantiate {:>8.1} µs + execute {:>8.1} µs", us(t50), us(i50), us(e50));
    }

    println!("\n== peer: the same echo as a sandboxed process (gate.call exec python3) ==");
    let cmd =
        r#"python3 -c 'import json,sys; print(json.loads(sys.argv[1])["text"])' '{"text":"hello from the benchmark"}'"#;
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut failed = None;
    for _ in 0..process_calls {
        let t = Instant::now();
        match gate.call(&ctx, "exec", json!({"command": format!("{cmd} # {}", lat.len())})).await {
            Ok(_) => lat.push(t.elapsed()),
            Err(e) => {
                failed = Some(e.to_string());
                break;
            }
        }
    }
    match failed {
        Some(e) => println!("exec peer failed: {e}"),
        None => {
            let proc_p50 = report("gate.call(exec python3), 1 task", &mut lat, start.elapsed());
            println!(
                "\nWASM echo vs process: runtime {:.0}x faster, gate.call {:.0}x faster (p50)",
                proc_p50.as_secs_f64() / runtime_p50.as_secs_f64(),
                proc_p50.as_secs_f64() / gate_p50.as_secs_f64()
            );
        }
    }
    println!("target: WAT echo p50 through the runtime <= 20 µs: {:.1} µs", us(runtime_p50));
    Row::new("WASM echo through the runtime, p50", us(runtime_p50), "µs").target(Target::AtMost(20.0)).emit();
    Row::new("WASM echo through `gate.call`, p50", us(gate_p50), "µs").target(Target::AtMost(20.0)).emit();
}

/// The gate's loop breaker refuses the same call many times in a row: vary the text.
fn varied(p: &serde_json::Value) -> serde_json::Value {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    json!({"text": format!("{} {n}", p["text"].as_str().unwrap_or_default())})
}

fn cached(name: &str) -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm").join(format!("{name}.wasm"));
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(_) => {
            println!("({} missing: run `cargo xtask deps`; skipping {name})", path.display());
            None
        }
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn report(label: &str, lat: &mut [Duration], wall: Duration) -> Duration {
    lat.sort_unstable();
    let p50 = lat[lat.len() / 2];
    let p99 = lat[lat.len() * 99 / 100];
    println!(
        "{label:<34} p50 {:>8.1} µs  p99 {:>8.1} µs  {:>9.0} calls/s",
        us(p50),
        us(p99),
        lat.len() as f64 / wall.as_secs_f64()
    );
    p50
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
