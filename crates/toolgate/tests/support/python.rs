//! The Python the tests drive MCP clients with: the venv `cargo xtask deps` creates at
//! `<repo>/.cache/peers/venv`, holding the official MCP Python SDK.

use std::path::{Path, PathBuf};

/// The SDK version the tests are written against.
const MCP_SDK: &str = "2.3.0";

/// The venv's python; fails naming `cargo xtask deps` when the SDK is not installed.
pub fn sdk_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/venv/bin/python");
    let check = format!("import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '{MCP_SDK}')");
    let ok = std::process::Command::new(&python).args(["-c", &check]).status().is_ok_and(|s| s.success());
    assert!(ok, "the MCP Python SDK (mcp=={MCP_SDK}) is not in {}; run `cargo xtask deps`", python.display());
    python
}
