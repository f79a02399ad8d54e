//! WASM tools over MCP, seen by a real client: `toolgate serve` (stdio) driven by the official
//! MCP Python SDK (`tests/python/wasm_client.py`, venv `.cache/peers/venv` from `cargo xtask
//! deps`). The client lists an installed component with the schema it declared, calls it, and
//! gets a guest that runs out of fuel back as a tool error (`isError`), not a protocol error;
//! the server keeps serving.

use serde_json::json;

use toolgate_testkit::wasm::Guest;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

#[tokio::test(flavor = "multi_thread")]
async fn a_python_mcp_client_lists_and_calls_a_wasm_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    let installer = toolgate::wasm::installer(ws).expect("installer");
    let spin = Guest {
        name: "spin",
        schema: r#"{"type":"object"}"#,
        execute: "(loop $l (br $l)) unreachable",
        ..Guest::default()
    };
    for (guest, caps) in [(Guest::default(), "{}"), (spin, r#"{"limits": {"fuel": 5000000}}"#)] {
        let file = ws.join(format!("{}.wasm", guest.name));
        std::fs::write(&file, guest.component()).expect("component");
        let caps = toolgate::wasm::Capabilities::from_json(caps).expect("caps");
        installer.install(&file, None, caps).await.expect("install");
    }

    let report = crate::support::python::report("wasm_client.py", [TOOLGATE.as_ref(), ws.as_os_str()]).await;

    // Listed with the schema and annotations the component declared.
    let echo = &report["tools"]["wasm__echo"];
    assert_eq!(echo["description"], "Returns its parameters.");
    assert_eq!(
        echo["schema"],
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": false})
    );
    assert_eq!(echo["read_only"], true);
    assert!(report["tools"]["wasm__spin"].is_object(), "{report}");

    // Called: the guest's answer, wrapped as untrusted output.
    let called = &report["echo"];
    assert_eq!(called["is_error"], false, "{called}");
    assert!(called["text"].as_str().is_some_and(|t| t.contains(r#"{"text":"hello from the MCP client"}"#)), "{called}");
    // Parameters that do not fit the declared schema never reach the guest.
    assert_eq!(report["invalid"]["is_error"], true, "{report}");
    assert!(report["invalid"]["text"].as_str().is_some_and(|t| t.contains("invalid parameters")), "{report}");
    // A limit is a tool error the model can read, and the server carries on.
    let spin = &report["spin"];
    assert_eq!(spin["is_error"], true, "{spin}");
    assert!(spin["text"].as_str().is_some_and(|t| t.contains("used up its CPU budget")), "{spin}");
    assert_eq!(report["after"]["is_error"], false, "{report}");
}
