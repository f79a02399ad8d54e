//! The Python the tests drive MCP clients with: the venv `cargo xtask deps` creates at
//! `<repo>/.cache/peers/venv`, holding the official MCP Python SDK.

use std::path::{Path, PathBuf};

/// The SDK version the tests are written against.
const MCP_SDK: &str = "2.3.0";

/// The venv's python; fails naming `cargo xtask deps` when the SDK is not installed.
pub fn sdk_python() -> PathBuf {
    require("mcp", MCP_SDK)
}

/// The venv's python; fails naming `cargo xtask deps` unless the venv holds `package` at
/// `version`.
pub fn require(package: &str, version: &str) -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/venv/bin/python");
    let check = format!("import importlib.metadata as m, sys; sys.exit(m.version('{package}') != '{version}')");
    let ok = std::process::Command::new(&python).args(["-c", &check]).status().is_ok_and(|s| s.success());
    assert!(ok, "{package}=={version} is not in {}; run `cargo xtask deps`", python.display());
    python
}

/// Runs `tests/python/SCRIPT` with the SDK's python and `args`; returns its report, the JSON on
/// its last line of output. Fails with the script's output when it fails or prints no report.
#[allow(dead_code)] // not every test binary runs a script
pub async fn report(script: &str, args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python").join(script);
    let out = tokio::process::Command::new(sdk_python())
        .arg(&script)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{} failed:\n{stdout}\n{stderr}", script.display());
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the report of {} is not JSON ({e}):\n{stdout}\n{stderr}", script.display()))
}
