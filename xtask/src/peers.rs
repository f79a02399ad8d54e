//! MCP peers, installed into `.cache/peers/` (not committed): a Python venv with the official MCP
//! SDK (`mcp==2.3.0`) that the conformance tests drive `toolgate serve` with, and the reference
//! server `@modelcontextprotocol/server-everything` that the MCP benchmark compares against.
//! Idempotent: what is there at the right version is left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The Python MCP SDK the tests drive `toolgate serve` with.
pub(crate) const PYTHON_MCP: &str = "mcp==2.3.0";

/// The reference MCP server the benchmark measures beside `toolgate serve`.
pub(crate) const NPM_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// `<repo>/.cache/peers/venv`.
pub(crate) fn venv() -> PathBuf {
    crate::root().join(".cache/peers/venv")
}

pub(crate) fn install() -> anyhow::Result<()> {
    if let Err(e) = install_npm() {
        // Only the benchmark needs it, and it says so when it is missing.
        eprintln!("xtask: {e:#}; the MCP benchmark will run without its reference server");
    }
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

/// `server-everything` under `<repo>/.cache/peers/npm`.
fn install_npm() -> anyhow::Result<()> {
    let prefix = crate::root().join(".cache/peers/npm");
    let version = NPM_EVERYTHING.rsplit('@').next().unwrap_or_default();
    let manifest = prefix.join("node_modules/@modelcontextprotocol/server-everything/package.json");
    if std::fs::read_to_string(&manifest).is_ok_and(|m| m.contains(&format!("\"version\": \"{version}\""))) {
        return Ok(());
    }
    if !crate::have("npm") {
        bail!("npm is not installed, so {NPM_EVERYTHING} cannot be");
    }
    eprintln!("xtask: installing {NPM_EVERYTHING} into {}", prefix.display());
    std::fs::create_dir_all(&prefix).with_context(|| format!("cannot create {}", prefix.display()))?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .arg(NPM_EVERYTHING)
        .status()
        .context("cannot run npm")?;
    if !status.success() {
        bail!("`npm install {NPM_EVERYTHING}` failed");
    }
    Ok(())
}
