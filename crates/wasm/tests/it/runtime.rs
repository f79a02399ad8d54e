//! The runtime with real components built from WAT: the happy path, every limit, capability
//! checks, install and integrity. Each adversarial guest must end in a clear error, in bounded
//! time, and leave the host able to run the next call.

use toolgate_testkit::wasm as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Guest, WIT};
use toolgate_core::{CallContext, Tool, ToolError};
use toolgate_wasm::{
    Capabilities, HttpCapability, HttpClient, HttpOrigin, HttpRequest, HttpResponse, Installer, RuntimeConfig,
    Services, WasmError, WasmRuntime, WasmTool,
};

fn config() -> RuntimeConfig {
    RuntimeConfig { epoch_tick: Duration::from_millis(50), ..RuntimeConfig::default() }
}

fn runtime() -> WasmRuntime {
    WasmRuntime::new(config()).expect("runtime starts")
}

fn caps(json: &str) -> Capabilities {
    Capabilities::from_json(json).expect("valid capabilities")
}

async fn tool(rt: &WasmRuntime, guest: &Guest<'_>, caps: Capabilities, services: Services) -> WasmTool {
    let prepared = rt.prepare(&guest.component(), &caps).await.expect("component prepares");
    WasmTool::new(rt.clone(), prepared, guest.name, caps, services)
}

/// Runs `execute` straight through the runtime, returning the guest's result and the report.
async fn run(
    rt: &WasmRuntime,
    guest: &Guest<'_>,
    caps: Capabilities,
    services: Services,
) -> (Result<Result<String, String>, WasmError>, toolgate_wasm::CallReport) {
    let prepared = rt.prepare(&guest.component(), &caps).await.expect("component prepares");
    let ctx = CallContext::new(std::env::temp_dir());
    rt.execute(&prepared, Arc::from("t"), Arc::new(caps), services, Some(ctx), "{}").await
}

/// After any failure the same runtime still runs a well-behaved tool.
async fn host_survives(rt: &WasmRuntime) {
    let echo = tool(rt, &Guest::default(), Capabilities::none(), Services::default()).await;
    let out = echo.execute(&CallContext::new("/"), json!({"text": "still here"})).await.expect("echo runs");
    assert_eq!(out.text_content(), r#"{"text":"still here"}"#);
}

#[tokio::test]
async fn echo_describes_itself_and_runs() {
    let rt = runtime();
    let echo = tool(&rt, &Guest::default(), Capabilities::none(), Services::default()).await;
    let spec = echo.spec();
    assert_eq!(spec.name, "wasm__echo");
    assert_eq!(spec.group, "wasm");
    assert_eq!(spec.input_schema["type"], "object");
    assert!(spec.annotations.read_only);
    assert_eq!(spec.output_trust, toolgate_core::OutputTrust::Untrusted);
    for _ in 0..3 {
        let out = echo.execute(&CallContext::new("/"), json!({"text": "héllo"})).await.expect("runs");
        assert_eq!(out.text_content(), r#"{"text":"héllo"}"#);
    }
}

#[tokio::test]
async fn not_a_component_or_another_world_is_refused() {
    let rt = runtime();
    let core = wat::parse_str("(module)").expect("wat");
    let err = rt.prepare(&core, &Capabilities::none()).await.expect_err("core module");
    assert!(matches!(err, WasmError::NotAComponent { .. }), "{err}");
    assert!(err.to_string().contains("core module"), "{err}");
    let err = rt.prepare(b"#!/bin/sh\nrm -rf /", &Capabilities::none()).await.expect_err("garbage");
    assert!(matches!(err, WasmError::NotAComponent { .. }), "{err}");
    let mut truncated = Guest::default().component();
    truncated.truncate(truncated.len() / 2);
    assert!(rt.prepare(&truncated, &Capabilities::none()).await.is_err());

    let other = "package evil:other@1.0.0;\nworld main { export run: func() -> u32; }";
    let wat = r#"(module (memory (export "memory") 1) (func (export "run") (result i32) i32.const 7))"#;
    let err = rt.prepare(&support::component_of(wat, other, "main"), &Capabilities::none()).await.expect_err("world");
    assert!(matches!(err, WasmError::WrongWorld { .. }), "{err}");
    host_survives(&rt).await;
}

#[tokio::test]
async fn a_bad_description_is_refused() {
    let rt = runtime();
    for (name, schema, want) in [
        ("Echo!", r#"{"type":"object"}"#, "name"),
        ("echo", "{not json", "not JSON"),
        ("echo", r#"{"type":"string"}"#, "object schema"),
    ] {
        let guest = Guest { name, schema, ..Guest::default() };
        let err = rt.prepare(&guest.component(), &Capabilities::none()).await.expect_err("bad description");
        assert!(matches!(err, WasmError::BadDescription { .. }) && err.to_string().contains(want), "{err}");
    }
}

#[tokio::test]
async fn an_infinite_loop_runs_out_of_fuel() {
    let rt = runtime();
    let guest = Guest { execute: "(loop $l (br $l)) unreachable", ..Guest::default() };
    let started = Instant::now();
    let (result, report) = run(&rt, &guest, caps(r#"{"limits": {"fuel": 5000000}}"#), Services::default()).await;
    let err = result.expect_err("loop stops");
    assert!(matches!(err, WasmError::FuelExhausted { fuel: 5_000_000 }), "{err}");
    assert!(err.to_string().contains("CPU budget"), "{err}");
    assert!(report.fuel_used >= 5_000_000);
    assert!(started.elapsed() < Duration::from_secs(20));
    host_survives(&rt).await;
}

#[tokio::test]
async fn an_infinite_loop_hits_the_epoch_deadline() {
    let rt = runtime();
    let guest = Guest { execute: "(loop $l (br $l)) unreachable", ..Guest::default() };
    let limits = r#"{"limits": {"fuel": 100000000000, "timeout_secs": 1}}"#;
    let started = Instant::now();
    let (result, _) = run(&rt, &guest, caps(limits), Services::default()).await;
    let err = result.expect_err("loop stops");
    assert!(matches!(err, WasmError::Deadline { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    host_survives(&rt).await;
}

#[tokio::test]
async fn dropping_the_call_preempts_a_spinning_guest() {
    // The gate's timeout drops the tool's future: the guest must stop at its next fuel yield,
    // not keep a thread busy until its own deadline.
    let rt = runtime();
    let guest = Guest { execute: "(loop $l (br $l)) unreachable", ..Guest::default() };
    let limits = r#"{"limits": {"fuel": 100000000000, "timeout_secs": 600}}"#;
    let spinner = tool(&rt, &guest, caps(limits), Services::default()).await;
    let started = Instant::now();
    let ctx = CallContext::new("/");
    let out = tokio::time::timeout(Duration::from_millis(200), spinner.execute(&ctx, json!({}))).await;
    assert!(out.is_err(), "the timeout fired");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // Cancellation through the context works the same way.
    let ctx = CallContext::new("/");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let err = spinner.execute(&ctx, json!({})).await.expect_err("cancelled");
    assert_eq!(err, ToolError::Cancelled);
    host_survives(&rt).await;
}

#[tokio::test]
async fn unbounded_memory_is_stopped_at_the_limit() {
    let rt = runtime();
    let guest = Guest {
        execute: "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &guest, Capabilities::none(), Services::default()).await;
    let err = result.expect_err("memory stops");
    assert!(matches!(err, WasmError::MemoryLimit { limit } if limit == 10 << 20), "{err}");
    host_survives(&rt).await;
}

#[tokio::test]
async fn a_guest_over_ten_megabytes_is_refused_by_default() {
    let rt = runtime();
    // 161 pages of 64 KiB: just over 10 MiB of initial memory.
    let big = Guest { pages: 161, ..Guest::default() };
    let err = rt.prepare(&big.component(), &Capabilities::none()).await.expect_err("over 10 MB");
    assert!(matches!(err, WasmError::MemoryLimit { limit } if limit == 10 << 20), "{err}");
    assert!(err.to_string().contains("more than 10485760 bytes of memory"), "{err}");
    // A person grants it more, per tool.
    let caps = caps(r#"{"limits": {"memory_mb": 11}}"#);
    let tool = tool(&rt, &big, caps, Services::default()).await;
    let out = tool.execute(&CallContext::new("/"), json!({"text": "x"})).await.expect("runs with 11 MB");
    assert!(out.text_content().contains("\"x\""), "{}", out.text_content());
    host_survives(&rt).await;
}

#[tokio::test]
async fn deep_recursion_overflows_the_stack_cleanly() {
    let rt = runtime();
    let guest = Guest {
        extra: "(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))",
        execute: "(drop (call $r (i32.const 0))) (call $ok (i32.const 0) (i32.const 0))",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &guest, Capabilities::none(), Services::default()).await;
    let err = result.expect_err("stack overflows");
    assert!(matches!(err, WasmError::StackOverflow), "{err}");
    host_survives(&rt).await;
}

#[tokio::test]
async fn ten_megabytes_of_logs_are_bounded() {
    let rt = runtime();
    let guest = Guest {
        imports: r#"(import "toolgate:tool/log@0.1.0" "log" (func $log (param i32 i32 i32)))"#,
        execute: "(local $i i32)
            (loop $l
              (call $log (i32.const 2) (i32.const 32768) (i32.const 32768))
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $l (i32.lt_u (local.get $i) (i32.const 320))))
            (call $ok (i32.const 0) (i32.const 0))",
        ..Guest::default()
    };
    let (result, report) = run(&rt, &guest, Capabilities::none(), Services::default()).await;
    assert_eq!(result.expect("runs").expect("ok"), "");
    assert_eq!(report.logs.len(), 320);
    assert!(report.logs.iter().all(|l| l.message.len() == toolgate_wasm::MAX_LOG_BYTES && l.level == "info"));

    let many = Guest {
        imports: guest.imports,
        execute: "(local $i i32)
            (loop $l
              (call $log (i32.const 0) (i32.const 32768) (i32.const 1))
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $l (i32.lt_u (local.get $i) (i32.const 100000))))
            (call $ok (i32.const 0) (i32.const 0))",
        ..Guest::default()
    };
    let (result, report) = run(&rt, &many, Capabilities::none(), Services::default()).await;
    result.expect("runs").expect("ok");
    assert_eq!(report.logs.len(), toolgate_wasm::MAX_LOG_ENTRIES);
    assert_eq!(report.logs_dropped, 100_000 - toolgate_wasm::MAX_LOG_ENTRIES);
}

/// Counts requests and answers each with 204; stands in for the fetcher to count what the
/// host lets through.
#[derive(Default)]
struct CountingHttp(AtomicU32, AtomicU32);

#[async_trait::async_trait]
impl HttpClient for CountingHttp {
    async fn send(&self, _: HttpOrigin<'_>, _: &HttpCapability, _: HttpRequest) -> Result<HttpResponse, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(HttpResponse { status: 204, headers: vec![], body: vec![] })
    }

    fn refused(&self, origin: HttpOrigin<'_>, _: &HttpRequest, reason: &str) {
        let over_budget = origin.index == toolgate_wasm::MAX_HTTP_REQUESTS + 1 && reason.contains("at most 50");
        let not_granted = origin.index == 1 && reason.contains("not granted");
        assert!(over_budget || not_granted, "{} {reason}", origin.index);
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

fn http_guest(url: &'static str) -> (String, String) {
    let extra = format!(r#"(data (i32.const 3000) "GET") (data (i32.const 3010) "{url}")"#);
    let execute = format!(
        "(local $i i32)
        (loop $l
          (call $send (i32.const 3000) (i32.const 3) (i32.const 3010) (i32.const {len})
                      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $l (i32.lt_u (local.get $i) (i32.const 10000))))
        (call $ok (i32.const 0) (i32.const 0))",
        len = url.len()
    );
    (extra, execute)
}

const HTTP_IMPORT: &str =
    r#"(import "toolgate:tool/http@0.1.0" "send" (func $send (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))"#;

#[tokio::test]
async fn ten_thousand_http_calls_are_cut_at_fifty() {
    let rt = runtime();
    let (extra, execute) = http_guest("https://api.example.com/v1/x");
    let guest = Guest { imports: HTTP_IMPORT, extra: &extra, execute: &execute, ..Guest::default() };
    let counter = Arc::new(CountingHttp::default());
    let services = Services { http: Some(counter.clone()), ..Services::default() };
    let granted = caps(r#"{"http": {"allow": [{"host": "api.example.com"}]}}"#);
    let (result, _) = run(&rt, &guest, granted, services.clone()).await;
    result.expect("runs").expect("ok");
    assert_eq!(counter.0.load(Ordering::SeqCst), toolgate_wasm::MAX_HTTP_REQUESTS);
    // The 9,950 refusals are reported once (one audit row), not 9,950 times.
    assert_eq!(counter.1.load(Ordering::SeqCst), 1);

    // Without the capability not one request leaves, and the refusal is reported once.
    let (result, _) = run(&rt, &guest, Capabilities::none(), services).await;
    result.expect("runs").expect("ok");
    assert_eq!(counter.0.load(Ordering::SeqCst), toolgate_wasm::MAX_HTTP_REQUESTS);
    assert_eq!(counter.1.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn invalid_utf8_and_huge_output_are_errors() {
    let rt = runtime();
    let bad = Guest {
        extra: r#"(data (i32.const 3000) "\ff\fe\fd")"#,
        execute: "(call $ok (i32.const 3000) (i32.const 3))",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &bad, Capabilities::none(), Services::default()).await;
    let err = result.expect_err("not UTF-8");
    assert!(matches!(err, WasmError::Trap { .. }), "{err}");

    // 100 MB of output (with the memory to hold it) is refused, not passed on.
    let huge = Guest {
        execute: "(drop (memory.grow (i32.const 1600))) (call $ok (i32.const 65536) (i32.const 104857600))",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &huge, caps(r#"{"limits": {"memory_mb": 200}}"#), Services::default()).await;
    let err = result.expect_err("too large");
    assert!(matches!(err, WasmError::OutputTooLarge { size: 104_857_600, .. }), "{err}");
    // With the default 10 MB it cannot even grow that far.
    let (result, _) = run(&rt, &huge, Capabilities::none(), Services::default()).await;
    assert!(result.is_err());
    host_survives(&rt).await;
}

#[tokio::test]
async fn ungranted_capabilities_answer_with_denials() {
    let rt = runtime();
    let read = Guest {
        imports: r#"(import "toolgate:tool/workspace@0.1.0" "read" (func $read (param i32 i32 i32)))"#,
        extra: r#"(data (i32.const 3000) "../etc/passwd") (data (i32.const 3100) "docs/a.md")"#,
        execute: "(call $read (i32.const 3100) (i32.const 9) (i32.const 512)) (i32.const 512)",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &read, Capabilities::none(), Services::default()).await;
    let denied = result.expect("runs").expect_err("denied");
    assert!(denied.contains("not granted"), "{denied}");

    let escape =
        Guest { execute: "(call $read (i32.const 3000) (i32.const 13) (i32.const 512)) (i32.const 512)", ..read };
    let (result, _) = run(&rt, &escape, caps(r#"{"workspace": {"read": ["./"]}}"#), Services::default()).await;
    let denied = result.expect("runs").expect_err("denied");
    assert!(denied.contains(".."), "{denied}");

    let secret = Guest {
        imports: r#"(import "toolgate:tool/secrets@0.1.0" "exists" (func $exists (param i32 i32) (result i32)))"#,
        extra: r#"(data (i32.const 3000) "API_KEY") (data (i32.const 3100) "01")"#,
        execute: "(call $ok (i32.add (i32.const 3100) (call $exists (i32.const 3000) (i32.const 7))) (i32.const 1))",
        ..Guest::default()
    };
    struct All;
    impl toolgate_wasm::SecretLookup for All {
        fn exists(&self, _name: &str) -> bool {
            true
        }
    }
    let services = Services { secrets: Some(Arc::new(All)), ..Services::default() };
    let (result, _) = run(&rt, &secret, Capabilities::none(), services.clone()).await;
    assert_eq!(result.expect("runs").expect("ok"), "0", "not granted: never says yes");
    let (result, _) = run(&rt, &secret, caps(r#"{"secrets": {"exists": ["API_*"]}}"#), services).await;
    assert_eq!(result.expect("runs").expect("ok"), "1");

    let invoke = Guest {
        imports: r#"(import "toolgate:tool/tools@0.1.0" "invoke" (func $invoke (param i32 i32 i32 i32 i32)))"#,
        extra: r#"(data (i32.const 3000) "exec") (data (i32.const 3100) "{}")"#,
        execute: "(call $invoke (i32.const 3000) (i32.const 4) (i32.const 3100) (i32.const 2) (i32.const 512)) (i32.const 512)",
        ..Guest::default()
    };
    let (result, _) = run(&rt, &invoke, Capabilities::none(), Services::default()).await;
    let denied = result.expect("runs").expect_err("denied");
    assert!(denied.contains("no tool alias `exec`"), "{denied}");
}

#[tokio::test]
async fn compiled_components_are_cached_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = RuntimeConfig { cache_dir: Some(dir.path().join("wasm-cache")), ..config() };
    let bytes = Guest::default().component();
    let first = WasmRuntime::new(cfg.clone()).expect("rt").prepare(&bytes, &Capabilities::none()).await.expect("ok");
    assert!(!first.from_cache);
    let second = WasmRuntime::new(cfg).expect("rt").prepare(&bytes, &Capabilities::none()).await.expect("ok");
    assert!(second.from_cache);
    assert_eq!(first.hash, second.hash);
    assert_eq!(first.hash, blake3::hash(&bytes).to_hex().to_string());
}

#[test]
fn runtimes_preparing_one_component_at_once_compile_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = RuntimeConfig { cache_dir: Some(dir.path().join("wasm-cache")), ..config() };
    let bytes = Guest::default().component();
    // Each thread has its own runtime and opens the lock file itself, as separate processes do.
    let compiled: Vec<bool> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let (cfg, bytes) = (cfg.clone(), &bytes);
                scope.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
                    rt.block_on(async {
                        let prepared = WasmRuntime::new(cfg).expect("rt").prepare(bytes, &Capabilities::none()).await;
                        !prepared.expect("prepares").from_cache
                    })
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("thread")).collect()
    });
    assert_eq!(compiled.iter().filter(|c| **c).count(), 1, "compiled by: {compiled:?}");
}

#[tokio::test]
async fn install_checks_integrity_on_every_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(toolgate_store::Store::open(&dir.path().join("state.db")).expect("store"));
    let installer = Installer::new(runtime(), dir.path().join("tools"), store);
    let src = dir.path().join("echo.wasm");
    std::fs::write(&src, Guest::default().component()).expect("write");

    let installed = installer.install(&src, Some("my-echo"), Capabilities::none()).await.expect("installs");
    assert_eq!(installed.name, "my-echo");
    assert_eq!(installer.list().expect("list").len(), 1);
    let tool = installer.load("my-echo", Services::default()).await.expect("loads");
    assert_eq!(tool.spec().name, "wasm__my-echo");

    // A changed binary is refused until installed again.
    let mut bytes = std::fs::read(&installed.file).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&installed.file, &bytes).expect("tamper");
    let err = installer.load("my-echo", Services::default()).await.expect_err("tampered");
    assert!(matches!(err, WasmError::Tampered { .. }), "{err}");
    assert!(err.to_string().contains("toolgate wasm install"), "{err}");

    // Refused: a capability file asking for everything, a core module, a bad name.
    let star = Capabilities::from_json(r#"{"http": {"allow": [{"host": "*"}]}}"#);
    assert!(star.is_err());
    std::fs::write(dir.path().join("core.wasm"), wat::parse_str("(module)").expect("wat")).expect("write");
    assert!(installer.install(&dir.path().join("core.wasm"), None, Capabilities::none()).await.is_err());
    assert!(installer.install(&src, Some("../../evil"), Capabilities::none()).await.is_err());

    installer.install(&src, Some("my-echo"), Capabilities::none()).await.expect("reinstalls");
    installer.load("my-echo", Services::default()).await.expect("loads again");
    installer.remove("my-echo").expect("removes");
    assert!(installer.list().expect("list").is_empty());
    assert!(matches!(installer.load("my-echo", Services::default()).await, Err(WasmError::NotInstalled { .. })));
}

#[test]
fn the_epoch_ticker_stops_with_the_runtime() {
    let tickers = || {
        std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|c| c.trim() == "wasm-epoch-tick")
                    .count()
            })
            .unwrap_or(0)
    };
    let wait_for = |want: usize| {
        // The thread names itself once it runs.
        let deadline = Instant::now() + Duration::from_secs(5);
        while tickers() != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        tickers()
    };
    let before = tickers();
    let rt = runtime();
    let clone = rt.clone();
    assert_eq!(wait_for(before + 1), before + 1);
    drop(rt);
    assert_eq!(tickers(), before + 1, "a clone keeps it running");
    drop(clone);
    assert_eq!(wait_for(before), before);
}

/// The published WIT is the contract tool authors build against: it must parse, and its world
/// `tool` must keep exactly the imports and exports documented in docs/wasm.md (a change here is
/// a breaking change for every installed tool and needs a new package version).
#[test]
fn the_wit_is_the_published_contract() {
    let mut resolve = wit_parser::Resolve::default();
    let pkg = resolve.push_str("tool.wit", toolgate_wasm::WIT).expect("the published WIT parses");
    assert_eq!(resolve.packages[pkg].name.to_string(), "toolgate:tool@0.1.0");
    let world = &resolve.worlds[resolve.select_world(&[pkg], Some("tool")).expect("world `tool`")];
    let names = |keys: Vec<&wit_parser::WorldKey>| {
        let mut names: Vec<String> = keys.into_iter().map(|k| resolve.name_world_key(k)).collect();
        names.sort();
        names
    };
    let imports = names(world.imports.keys().collect());
    for interface in ["log", "workspace", "http", "secrets", "tools"] {
        assert!(imports.iter().any(|i| i.ends_with(&format!("/{interface}@0.1.0"))), "import {interface}: {imports:?}");
    }
    assert_eq!(names(world.exports.keys().collect()), ["describe", "execute"]);
    assert_eq!(WIT, toolgate_wasm::WIT, "the tests build their guests against the published WIT");
}
