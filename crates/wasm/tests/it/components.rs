//! The example tools built from real Python (componentize-py) and JavaScript (jco +
//! componentize-js) source by `cargo xtask deps` into `.cache/wasm/`: they describe
//! themselves, echo, report their own errors, and stay inside their limits.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use toolgate_core::{CallContext, Tool, ToolError};
use toolgate_wasm::{Capabilities, RuntimeConfig, Services, WasmError, WasmRuntime, WasmTool};

fn component(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm").join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{} is missing ({e}); run `cargo xtask deps` to build it from examples/wasm/{name}", path.display())
    })
}

/// What the example's sidecar grants: an interpreter needs more memory, instances and file
/// size than the defaults.
fn sidecar(name: &str) -> Capabilities {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/wasm")
        .join(name)
        .join(format!("{name}.capabilities.json"));
    Capabilities::from_json(&std::fs::read_to_string(&path).expect("read the sidecar")).expect("valid sidecar")
}

/// Compiling an interpreter takes a while: the tests share a disk cache under `.cache/wasm`.
fn config() -> RuntimeConfig {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    RuntimeConfig { epoch_tick: Duration::from_millis(50), cache_dir: Some(cache), ..RuntimeConfig::default() }
}

async fn example(name: &str) -> WasmTool {
    let rt = WasmRuntime::new(config()).expect("runtime");
    let caps = sidecar(name);
    let prepared = rt.prepare(&component(name), &caps).await.unwrap_or_else(|e| panic!("{name} prepares: {e}"));
    assert_eq!(prepared.description.name, name);
    WasmTool::new(rt, prepared, name, caps, Services::default())
}

async fn check(name: &str) {
    let tool = example(name).await;
    assert_eq!(tool.spec().name, format!("wasm__{name}"));
    assert_eq!(tool.spec().input_schema["required"], json!(["text"]));
    let ctx = CallContext::new("/");
    for text in ["hello", "ünïcödé ✓", ""] {
        let out = tool.execute(&ctx, json!({"text": text})).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.text_content(), text);
    }
    // The guest's own error comes back as the tool's error.
    let err = tool.execute(&ctx, json!({"text": 5})).await.expect_err("not a string");
    assert!(
        matches!(&err, ToolError::ExternalService { message, .. } if message.contains("must be a string")),
        "{err}"
    );
}

#[tokio::test]
async fn python_echo_runs() {
    check("python-echo").await;
}

#[tokio::test]
async fn js_echo_runs() {
    check("js-echo").await;
}

#[tokio::test]
async fn an_interpreter_within_the_default_limits_fails_cleanly() {
    let rt = WasmRuntime::new(config()).expect("runtime");
    // By default a component file is at most 10 MB: the interpreters are refused before
    // anything is compiled, with what to change.
    for name in ["python-echo", "js-echo"] {
        let err = rt.prepare(&component(name), &Capabilities::none()).await.expect_err("too large");
        assert!(matches!(err, WasmError::TooLarge { limit: 10485760, .. }), "{name}: {err}");
        assert!(err.to_string().contains("limits.component_mb"), "{err}");
    }
    // Allowed in size, but in 10 MB of memory: refused at its first instantiation.
    let caps = Capabilities::from_json(r#"{"limits": {"component_mb": 32, "instances": 16}}"#).expect("caps");
    let err = rt.prepare(&component("python-echo"), &caps).await.expect_err("too little memory");
    assert!(matches!(err, WasmError::MemoryLimit { limit: 10485760 }), "{err}");
    // And with 10 instances (the default): refused, naming the limit to raise.
    let caps = Capabilities::from_json(r#"{"limits": {"component_mb": 32, "memory_mb": 64}}"#).expect("caps");
    let err = rt.prepare(&component("python-echo"), &caps).await.expect_err("too few instances");
    assert!(matches!(err, WasmError::CountLimit { instances: 10, .. }), "{err}");
    assert!(err.to_string().contains("limits.instances"), "{err}");
}
