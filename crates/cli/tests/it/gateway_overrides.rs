//! A grant's server settings (`toolgate admin grant add --server NAME --server-config '{...}'`,
//! seed 000 §12) applied by the bridge, through the binary: a team gateway with per-user
//! workspaces bridges a real stdio MCP server (`tests/python/env_server.py`, the official Python
//! SDK, in its sandbox) that says which `MODE` and arguments it was started with. Two agents of
//! one user call it through the official MCP Python SDK with their own keys: the one whose grant
//! sets `MODE` gets a connection of its own started with it, the other the server's own.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::gateway::admin;
use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// One call of `tool` through the official MCP Python SDK with `key`: (is_error, text).
fn call(url: &str, key: &str, tool: &str, arguments: &str) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_call.py");
    let out = Command::new(python::sdk_python()).arg(script).args([url, key, tool, arguments]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: Value = stdout.lines().find_map(|l| serde_json::from_str(l).ok()).unwrap_or_else(|| {
        panic!("no result from gateway_call.py:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    });
    (line["is_error"].as_bool().unwrap(), line["text"].as_str().unwrap().to_owned())
}

/// The `instance=ID` the fixture reports: which of its processes answered.
fn instance(text: &str) -> &str {
    text.split("instance=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no instance: {text}"))
}

#[test]
fn an_agents_grant_settings_start_its_own_connection_of_the_server() {
    let ws = toolgate_testkit::serve::workspace();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/env_server.py");
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[mcp.servers.envy]\ncommand = \"{}\"\n\
             args = [\"{}\"]\nenv = {{ MODE = \"plain\" }}\n",
            python::sdk_python().display(),
            script.display()
        ),
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    admin(ws.path(), &["agent", "add", "ann-a", "--owner", "ann"]);
    admin(ws.path(), &["agent", "add", "ann-b", "--owner", "ann"]);
    admin(ws.path(), &["grant", "add", "--to", "ann", "--server", "envy"]);
    let settings = r#"{"env": {"MODE": "a"}, "args": ["--from-grant"], "timeout_secs": 2}"#;
    admin(ws.path(), &["grant", "add", "--to", "ann-a", "--server", "envy", "--server-config", settings]);
    // Two grants of Bob's own, on the same level, that disagree: his calls are refused.
    let b1 = admin(
        ws.path(),
        &["grant", "add", "--to", "bob", "--server", "envy", "--server-config", r#"{"env":{"MODE":"x"}}"#],
    );
    let b2 = admin(
        ws.path(),
        &["grant", "add", "--to", "bob", "--server", "envy", "--server-config", r#"{"env":{"MODE":"y"}}"#],
    );

    // Settings that would make it another server, another program or another sandbox are refused
    // before anything is stored, with the key and why.
    for (config, why) in [
        (r#"{"command": "/bin/sh"}"#, "`command` cannot be overridden by a grant: it says which server this is"),
        (r#"{"url": "http://127.0.0.1:9/mcp"}"#, "`url` cannot be overridden by a grant"),
        (r#"{"sandbox": {"enabled": false}}"#, "`sandbox` cannot be overridden"),
        (r#"{"shared": true}"#, "`shared` cannot be overridden"),
        (r#"{"env": {"LD_PRELOAD": "/tmp/x.so"}}"#, "`LD_PRELOAD` cannot be set by a grant"),
        (r#"{"colour": "red"}"#, "`colour` is not a setting a grant may override"),
    ] {
        let out = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws.path())
            .args(["admin", "grant", "add", "--to", "ann-b", "--server", "envy", "--server-config", config])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{config}: {err}");
    }
    let listed = admin(ws.path(), &["grant", "list", "--to", "ann-b"]);
    assert!(listed.is_empty(), "nothing refused was stored: {listed}");

    let keys: Vec<String> = [["--agent", "ann-a"], ["--agent", "ann-b"], ["--user", "ann"], ["--user", "bob"]]
        .iter()
        .map(|who| admin(ws.path(), &["key", "create", who[0], who[1]]))
        .collect();
    let (key_a, key_b, key_ann, key_bob) = (&keys[0], &keys[1], &keys[2], &keys[3]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let url = &server.url;

    // The agent whose grant sets MODE: a connection started with it, its arguments appended.
    let (error, a) = call(url, key_a, "mcp__envy__mode", "{}");
    assert!(!error && a.contains("MODE=a") && a.contains(r#"args=["--from-grant"]"#), "{a}");
    // The other agent and their user: the server's own entry, another process.
    let (error, b) = call(url, key_b, "mcp__envy__mode", "{}");
    assert!(!error && b.contains("MODE=plain") && b.contains("args=[]"), "{b}");
    assert_ne!(instance(&a), instance(&b), "one connection per set of settings");
    let (error, ann) = call(url, key_ann, "mcp__envy__mode", "{}");
    assert!(!error && ann.contains("MODE=plain") && instance(&ann) == instance(&b), "{ann}");
    // Each keeps its own connection from call to call.
    let (error, again) = call(url, key_a, "mcp__envy__mode", "{}");
    assert!(!error && again.contains("MODE=a") && instance(&again) == instance(&a), "{again}");

    // The grant's deadline holds the agent's calls (not the others').
    let (error, text) = call(url, key_a, "mcp__envy__nap", r#"{"seconds": 30}"#);
    assert!(error && text.contains("timed out after 2"), "{text}");
    let (error, text) = call(url, key_b, "mcp__envy__nap", r#"{"seconds": 0.1}"#);
    assert!(!error && text.contains("slept"), "{text}");

    // Two grants of one level that disagree: refused, naming both.
    let (b1, b2) = (crate::support::gateway::grant_id(&b1), crate::support::gateway::grant_id(&b2));
    let (error, text) = call(url, key_bob, "mcp__envy__mode", "{}");
    assert!(error && text.contains(&format!("grants {b1} (to `bob`) and {b2} (to `bob`)")), "{text}");
    assert!(!text.contains("MODE="), "the server was not reached: {text}");
}
