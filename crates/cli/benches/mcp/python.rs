//! Runs `benches/mcp_client.py`: the same calls from the official MCP Python SDK.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::Samples;
use super::servers;

/// Where a Python-driven target is: a command line it starts (stdio) or a URL.
pub enum Endpoint {
    Stdio(Vec<String>),
    Http { url: String, token: Option<String> },
}

/// Calls `tool` with `args` on every target from the Python SDK, interleaved as described in
/// the script; returns the samples in the order of `targets`.
pub fn run(
    tool: &str,
    args: &Value,
    warmup: usize,
    rounds: usize,
    calls: usize,
    targets: &[(&str, Endpoint)],
) -> Vec<Samples> {
    let targets_json: Vec<Value> = targets
        .iter()
        .map(|(name, endpoint)| match endpoint {
            Endpoint::Stdio(command) => json!({"name": name, "command": command}),
            Endpoint::Http { url, token } => json!({"name": name, "url": url, "token": token}),
        })
        .collect();
    let spec = json!({"tool": tool, "args": args, "warmup": warmup, "rounds": rounds, "calls": calls, "targets": targets_json});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/mcp_client.py");
    let out =
        Command::new(servers::python()).arg(script).arg(spec.to_string()).output().expect("run the Python client");
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the Python client's JSON report");
    targets
        .iter()
        .map(|(name, _)| {
            let times: Vec<Duration> = report[*name]
                .as_array()
                .expect("a list of times")
                .iter()
                .map(|t| Duration::from_secs_f64(t.as_f64().expect("a time") / 1e6))
                .collect();
            Samples { elapsed: times.iter().sum(), times, bytes: None }
        })
        .collect()
}
