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
    assert!(toolgate::wasm::load_tools_from(&gate, None).await.failed.is_empty());
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
    assert!(toolgate::wasm::load_tools_from(&strict, None).await.failed.is_empty());
    let err = strict.call(&strict.context(), "wasm__caller", json!({})).await.expect_err("asks");
    assert!(matches!(err, ToolError::NeedsApproval { .. }), "{err}");

    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let gate = Arc::new(Gate::builder(dir.path()).config(config).build().expect("gate"));
    assert!(toolgate::wasm::load_tools_from(&gate, None).await.failed.is_empty());
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
    let failed = toolgate::wasm::load_tools_from(&gate, None).await.failed;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.to_string().contains("changed since it was installed"), "{}", failed[0].1);
    let err = gate.call(&gate.context(), "wasm__echo", json!({"text": "x"})).await.expect_err("not loaded");
    assert!(matches!(err, ToolError::UnknownTool { .. }), "{err}");
    // `tool_list` shows it, with why.
    let list = gate.call(&gate.context(), "tool_list", json!({"kind": "wasm"})).await.expect("tool_list");
    let text = list.text_content();
    assert!(text.contains("wasm__echo [not loaded: ") && text.contains("changed since it was installed"), "{text}");
    let rows = &list.structured.expect("structured")["tools"];
    assert_eq!(rows[0]["name"], "wasm__echo", "{rows}");
}

#[tokio::test]
async fn user_tools_load_everywhere_and_the_workspace_overrides_them() {
    let user = tempfile::tempdir().expect("tempdir");
    let installer = toolgate::wasm::user_installer(user.path()).expect("user installer");
    for guest in
        [Guest { description: "The user's echo.", ..Guest::default() }, Guest { name: "shout", ..Guest::default() }]
    {
        let file = user.path().join(format!("{}.wasm", guest.name));
        std::fs::write(&file, guest.component()).expect("write component");
        installer.install(&file, None, Capabilities::none()).await.expect("install");
    }
    assert!(user.path().join("tools/shout.wasm").is_file() && user.path().join("state.db").is_file());

    // A workspace without tools of its own gets the user's.
    let plain = tempfile::tempdir().expect("tempdir");
    let gate_plain = gate(plain.path());
    let report = toolgate::wasm::load_tools_from(&gate_plain, Some(user.path())).await;
    assert!(report.failed.is_empty() && report.warnings.is_empty(), "{report:?}");
    let echo = gate_plain.registry().resolve("wasm__echo").expect("the user's echo");
    assert_eq!(echo.tool.spec().description, "The user's echo.");

    // A workspace tool of the same name wins, with a warning; the others still load.
    let dir = tempfile::tempdir().expect("tempdir");
    let mine = Guest { description: "The workspace's echo.", ..Guest::default() };
    install(dir.path(), &mine, "echo", "{}").await;
    let gate = gate(dir.path());
    let report = toolgate::wasm::load_tools_from(&gate, Some(user.path())).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("`wasm__echo` replaces the user's tool"), "{}", report.warnings[0]);
    let echo = gate.registry().resolve("wasm__echo").expect("echo");
    assert_eq!(echo.tool.spec().description, "The workspace's echo.");
    let out = gate.call(&gate.context(), "wasm__shout", json!({"text": "from the user"})).await.expect("user tool");
    assert!(out.text_content().contains("from the user"), "{}", out.text_content());

    // The user's files are checked like the workspace's: a changed one is not loaded.
    let file = user.path().join("tools/shout.wasm");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.push(0);
    std::fs::write(&file, bytes).expect("tamper");
    let gate = self::gate(plain.path());
    let report = toolgate::wasm::load_tools_from(&gate, Some(user.path())).await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].1.to_string().contains("changed since it was installed"), "{:?}", report.failed);
    assert!(gate.registry().resolve("wasm__shout").is_none() && gate.registry().resolve("wasm__echo").is_some());
}

#[path = "wasm/http.rs"]
mod http;

#[path = "wasm/cli.rs"]
mod cli;

#[path = "wasm/mcp.rs"]
mod mcp;

#[path = "support/python.rs"]
mod python;
