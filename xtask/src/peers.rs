//! Peer clients for the MCP conformance tests, installed into `.cache/peers/` (not committed):
//! a Python venv with the official MCP SDK (`mcp==2.3.0`). Idempotent: an existing venv with
//! the right version is left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The Python MCP SDK the tests drive `toolgate serve` with.
pub(crate) const PYTHON_MCP: &str = "mcp==2.3.0";

/// `<repo>/.cache/peers/venv`.
pub(crate) fn venv() -> PathBuf {
    crate::root().join(".cache/peers/venv")
}

pub(crate) fn install() -> anyhow::Result<()> {
    let venv = venv();
    let python = venv.join("bin/python");
    if has_sdk(&python) {
        return Ok(());
    }
    eprintln!("xtask: installing the Python MCP SDK ({PYTHON_MCP}) into {}", venv.display());
    if !python.exists() {
        let base = if crate::have("python3") { "python3" } else { "python" };
        let status = Command::new(base)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .with_context(|| format!("cannot run `{base} -m venv`; install Python 3.10 or newer"))?;
        if !status.success() {
            bail!("`{base} -m venv {}` failed; on Debian install `python3-venv`", venv.display());
        }
    }
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYTHON_MCP])
        .status()
        .context("cannot run pip in the peers venv")?;
    if !status.success() || !has_sdk(&python) {
        bail!("`pip install {PYTHON_MCP}` failed in {}", venv.display());
    }
    Ok(())
}

fn has_sdk(python: &Path) -> bool {
    let version = PYTHON_MCP.trim_start_matches("mcp==");
    Command::new(python)
        .args(["-c", &format!("import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '{version}')")])
        .status()
        .is_ok_and(|s| s.success())
}
