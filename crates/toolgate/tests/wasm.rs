//! WASM tools through the gate: installed components are loaded into the registry and every
//! call passes the whole pipeline (validation against the declared schema, untrusted output);
//! `tools.invoke` calls back through `Gate::call`; a changed file is not loaded.

#[path = "../../wasm/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use serde_json::json;
use support::Guest;
use toolgate::Gate;
use toolgate::core::ToolError;
use toolgate::wasm::Capabilities;

async fn install(ws: &std::path::Path, guest: &Guest<'_>, name: &str, caps: &str) {
    let file = ws.join(format!("{name}.wasm"));
    std::fs::write(&file, guest.component()).expect("write component");
    let installer = toolgate::wasm::installer(ws).expect("installer");
    let caps = Capabilities::from_json(caps).expect("caps");
    installer.install(&file, Some(name), caps).await.expect("install");
}

fn gate(ws: &std::path::Path) -> Arc<Gate> {
    Arc::new(Gate::builder(ws).build().expect("gate"))
}

#[tokio::test]
async fn an_installed_component_runs_through_the_pipeline() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(dir.path(), &Guest::default(), "echo", "{}").await;
    let gate = gate(dir.path());
    assert!(toolgate::wasm::load_tools(&gate).await.is_empty());
    let ctx = gate.context();
    let out = gate.call(&ctx, "wasm__echo", json!({"text": "hi"})).await.expect("call");
    let text = out.text_content();
    assert!(text.contains(r#"{"text":"hi"}"#), "{text}");
    // Untrusted output: wrapped in the boundary.
    assert!(text.contains("<tool_output"), "{text}");
    // The schema the component declared is enforced before the guest runs.
    let err = gate.call(&ctx, "wasm__echo", json!({"nope": 1})).await.expect_err("invalid");
    assert!(matches!(err, ToolError::InvalidParams { .. }), "{err}");
    let err = gate.call(&ctx, "wasm__echo", json!({"text": 5})).await.expect_err("invalid");
    assert!(matches!(err, ToolError::InvalidParams { .. }), "{err}");
    // No tool lets a caller install WASM tools or grant them anything: that is the CLI's.
    let names: Vec<String> = gate.registry().all().iter().map(|t| t.tool.spec().name.clone()).collect();
    assert_eq!(names.iter().filter(|n| n.contains("wasm")).collect::<Vec<_>>(), ["wasm__echo"]);
}

#[tokio::test]
async fn a_guest_calls_tools_through_the_gate_by_alias() {
    let dir = tempfile::tempdir().expect("tempdir");
    let params = r#"{\"message\":\"from wasm\"}"#;
    let extra = format!(r#"(data (i32.const 3000) "say") (data (i32.const 3100) "{params}")"#);
    let execute = format!(
        "(call $invoke (i32.const 3000) (i32.const 3) (i32.const 3100) (i32.const {})) (i32.const 512)",
        params.replace('\\', "").len()
    );
    let guest = Guest {
        name: "caller",
        schema: r#"{"type":"object"}"#,
        imports: r#"(import "toolgate:tool/tools@0.1.0" "invoke" (func $invoke_raw (param i32 i32 i32 i32 i32)))"#,
        extra: &format!(
            "{extra} (func $invoke (param i32 i32 i32 i32) (call $invoke_raw (local.get 0) (local.get 1) (local.get 2) (local.get 3) (i32.const 512)))"
        ),
        execute: &execute,
        ..Guest::default()
    };
    install(dir.path(), &guest, "caller", r#"{"tools": {"aliases": {"say": "echo"}}}"#).await;
    // A tool that calls tools asks first.
    let strict = gate(dir.path());
    assert!(toolgate::wasm::load_tools(&strict).await.is_empty());
    let err = strict.call(&strict.context(), "wasm__caller", json!({})).await.expect_err("asks");
    assert!(matches!(err, ToolError::NeedsApproval { .. }), "{err}");

    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let gate = Arc::new(Gate::builder(dir.path()).config(config).build().expect("gate"));
    assert!(toolgate::wasm::load_tools(&gate).await.is_empty());
    let out = gate.call(&gate.context(), "wasm__caller", json!({})).await.expect("call");
    assert!(out.text_content().contains("from wasm"), "{}", out.text_content());
}

#[tokio::test]
async fn a_changed_file_is_not_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(dir.path(), &Guest::default(), "echo", "{}").await;
    let file = dir.path().join(".toolgate/tools/echo.wasm");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.push(0);
    std::fs::write(&file, bytes).expect("tamper");
    let gate = gate(dir.path());
    let failed = toolgate::wasm::load_tools(&gate).await;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.to_string().contains("changed since it was installed"), "{}", failed[0].1);
    let err = gate.call(&gate.context(), "wasm__echo", json!({"text": "x"})).await.expect_err("not loaded");
    assert!(matches!(err, ToolError::UnknownTool { .. }), "{err}");
}

#[path = "wasm/http.rs"]
mod http;

#[path = "wasm/cli.rs"]
mod cli;
