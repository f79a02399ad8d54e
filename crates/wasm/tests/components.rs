//! The example tools built from real Python (componentize-py) and JavaScript (jco +
//! componentize-js) source by `cargo xtask deps` into `.cache/wasm/`: they describe
//! themselves, echo, report their own errors, and stay inside their limits.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use toolgate_core::{CallContext, Tool, ToolError};
use toolgate_wasm::{Capabilities, RuntimeConfig, Services, WasmRuntime, WasmTool};

fn component(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm").join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{} is missing ({e}); run `cargo xtask deps` to build it from examples/wasm/{name}", path.display())
    })
}

/// Interpreters need more than the 10 MB default.
const CAPS: &str = r#"{"limits": {"memory_mb": 128}}"#;

/// Compiling an interpreter takes a while: the tests share a disk cache under `.cache/wasm`.
fn config() -> RuntimeConfig {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    RuntimeConfig { epoch_tick: Duration::from_millis(50), cache_dir: Some(cache), ..RuntimeConfig::default() }
}

async fn example(name: &str) -> WasmTool {
    let rt = WasmRuntime::new(config()).expect("runtime");
    let caps = Capabilities::from_json(CAPS).expect("caps");
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
async fn an_interpreter_in_ten_megabytes_fails_cleanly() {
    let rt = WasmRuntime::new(config()).expect("runtime");
    let err = rt.prepare(&component("python-echo"), &Capabilities::none()).await.expect_err("too little memory");
    assert!(err.to_string().contains("memory") || err.to_string().contains("crashed"), "{err}");
}
