//! What the WASM tool tests and benchmark need, installed into `.cache/wasm/` (not committed):
//! componentize-py (PyPI) in a venv, jco + componentize-js (npm), and the example components
//! built from `examples/wasm/*/` with them (`.cache/wasm/python-echo.wasm`, `python-http.wasm`,
//! `js-echo.wasm`),
//! rebuilt when their source is newer. Idempotent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, bail};

/// The Python component builder.
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The npm package manifest of `.cache/wasm/npm`. jco 1.35.0's vendored wasm-tools reads the
/// WIT through preview2-shim, whose 0.26 release dropped the default `/` preopen (jco then
/// cannot read any file): pin the shim to 0.25.0.
const NPM_MANIFEST: &str = r#"{
  "private": true,
  "dependencies": {
    "@bytecodealliance/jco": "1.35.0",
    "@bytecodealliance/componentize-js": "0.23.0"
  },
  "overrides": {
    "@bytecodealliance/preview2-shim": "0.25.0"
  }
}
"#;

/// `<repo>/.cache/wasm`.
fn dir() -> PathBuf {
    crate::root().join(".cache/wasm")
}

pub(crate) fn install() -> anyhow::Result<()> {
    let dir = dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let py = install_python(&dir);
    let js = install_npm(&dir);
    if py.is_ok() {
        build_example("python-echo", &["app.py", "build.sh"])?;
        build_example("python-http", &["app.py", "build.sh"])?;
    }
    if js.is_ok() {
        build_example("js-echo", &["app.js", "build.sh"])?;
    }
    py.and(js)
}

fn install_python(dir: &Path) -> anyhow::Result<()> {
    let venv = dir.join("venv");
    let bin = venv.join("bin/componentize-py");
    if bin.is_file() {
        return Ok(());
    }
    eprintln!("xtask: installing {COMPONENTIZE_PY} into {}", venv.display());
    super::pip_install(&venv, &[COMPONENTIZE_PY])
}

fn install_npm(dir: &Path) -> anyhow::Result<()> {
    let prefix = dir.join("npm");
    let manifest = prefix.join("package.json");
    let current = std::fs::read_to_string(&manifest).unwrap_or_default();
    if current == NPM_MANIFEST && prefix.join("node_modules/.bin/jco").exists() {
        return Ok(());
    }
    if !crate::have("npm") {
        bail!("npm is not installed, so jco and componentize-js cannot be");
    }
    eprintln!("xtask: installing jco and componentize-js into {}", prefix.display());
    std::fs::create_dir_all(&prefix).with_context(|| format!("cannot create {}", prefix.display()))?;
    std::fs::write(&manifest, NPM_MANIFEST).with_context(|| format!("cannot write {}", manifest.display()))?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&prefix)
        .status()
        .context("cannot run npm")?;
    if !status.success() {
        bail!("`npm install` of jco and componentize-js failed");
    }
    Ok(())
}

/// Runs `examples/wasm/NAME/build.sh .cache/wasm/NAME.wasm` when the output is missing or older
/// than its sources or the WIT.
fn build_example(name: &str, sources: &[&str]) -> anyhow::Result<()> {
    let root = crate::root();
    let src = root.join("examples/wasm").join(name);
    let out = dir().join(format!("{name}.wasm"));
    let built = modified(&out);
    let newest = sources
        .iter()
        .map(|s| src.join(s))
        .chain([root.join("crates/wasm/wit/tool.wit")])
        .filter_map(|p| modified(&p))
        .max();
    if built.is_some() && built >= newest {
        return Ok(());
    }
    eprintln!("xtask: building {}", out.display());
    let status = Command::new("sh").arg(src.join("build.sh")).arg(&out).status().context("cannot run sh")?;
    if !status.success() {
        bail!("building the {name} example failed");
    }
    Ok(())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
