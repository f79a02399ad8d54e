//! Installs what the peer tests and benchmarks need, when it is missing. Idempotent: a second
//! run finds everything and does nothing.

use crate::have;

#[path = "agent_model.rs"]
mod agent_model;
#[path = "memory_model.rs"]
mod memory_model;
#[path = "peers.rs"]
mod peers;
#[path = "wasm_peers.rs"]
mod wasm_peers;

/// Debian packages the benchmarks compare against and tests call (`pdftotext`: the
/// pdf-to-text skill fixture; `chromium`: the browser family and the gateway page's tests;
/// `espeak-ng`, `sox`, `ffmpeg`: the media family; `aiosmtpd` is PyPI's, in the peers' venv):
/// (command, package).
const DEBIAN: &[(&str, &str)] = &[
    ("rg", "ripgrep"),
    ("bwrap", "bubblewrap"),
    ("pdftotext", "poppler-utils"),
    ("chromium", "chromium"),
    ("espeak-ng", "espeak-ng"),
    ("sox", "sox"),
    ("ffmpeg", "ffmpeg"),
];

/// Debian's PostgreSQL server (the `toolgate-postgres` tests start throwaway clusters with its
/// `initdb` and `pg_ctl`, which Debian keeps off PATH in `/usr/lib/postgresql/<version>/bin`).
const POSTGRES_PACKAGE: &str = "postgresql";

pub(crate) fn install() -> anyhow::Result<()> {
    install_system()?;
    install_peers();
    Ok(())
}

/// The Debian packages (PostgreSQL's server included).
pub(crate) fn install_system() -> anyhow::Result<()> {
    let mut missing: Vec<&str> = DEBIAN.iter().filter(|(cmd, _)| !have(cmd)).map(|(_, pkg)| *pkg).collect();
    if !have_postgres_server() {
        missing.push(POSTGRES_PACKAGE);
    }
    if !missing.is_empty() {
        if have("apt-get") {
            apt_install(&missing);
        } else {
            eprintln!("xtask: cannot install {missing:?} (no apt-get); tests that need them will say so");
        }
    }
    Ok(())
}

/// The WASM build tools and test components, the models, and the peer clients and servers
/// (npm and PyPI): what fails is said, and the tests that need it fail saying so too.
pub(crate) fn install_peers() {
    if let Err(e) = wasm_peers::install() {
        eprintln!("xtask: {e:#}; the WASM component tests will fail until this works");
    }
    if let Err(e) = memory_model::install() {
        eprintln!("xtask: {e:#}; the memory search model tests will fail until this works");
    }
    if let Err(e) = peers::install() {
        eprintln!("xtask: {e:#}; the MCP peer tests will fail until this works");
    }
    if let Err(e) = agent_model::install() {
        eprintln!("xtask: {e:#}; the agent runtime's real-model tests will fail until this works");
    }
}

/// Whether `initdb` and `pg_ctl` are on PATH or in one of Debian's versioned folders.
fn have_postgres_server() -> bool {
    if have("initdb") && have("pg_ctl") {
        return true;
    }
    std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
        versions.filter_map(Result::ok).any(|v| {
            let bin = v.path().join("bin");
            bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()
        })
    })
}

fn apt_install(packages: &[&str]) {
    eprintln!("xtask: installing {packages:?} with apt-get");
    let sudo = if is_root() { "" } else { "sudo " };
    let script = format!(
        "{sudo}apt-get install -y -q {pkgs} >/dev/null 2>&1 || ({sudo}apt-get update -q >/dev/null 2>&1 && {sudo}apt-get install -y -q {pkgs})",
        pkgs = packages.join(" ")
    );
    match std::process::Command::new("sh").args(["-c", &script]).status() {
        Ok(s) if s.success() => {}
        _ => eprintln!("xtask: apt-get could not install {packages:?}; tests that need them will say so"),
    }
}

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0"))
}

/// `pip install ARGS` in the venv at `venv`, creating the venv first when it is missing (the
/// peers', the agent model's and componentize-py's venvs all come through here).
pub(crate) fn pip_install(venv: &std::path::Path, args: &[&str]) -> anyhow::Result<()> {
    use anyhow::{Context, bail};
    let python = venv.join("bin/python");
    if !python.exists() {
        let base = if have("python3") { "python3" } else { "python" };
        let status = std::process::Command::new(base)
            .args(["-m", "venv"])
            .arg(venv)
            .status()
            .with_context(|| format!("cannot run `{base} -m venv`; install Python 3.10 or newer"))?;
        if !status.success() {
            bail!("`{base} -m venv {}` failed; on Debian install `python3-venv`", venv.display());
        }
    }
    let status = std::process::Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(args)
        .status()
        .with_context(|| format!("cannot run pip in {}", venv.display()))?;
    if !status.success() {
        bail!("`pip install {}` failed in {}", args.join(" "), venv.display());
    }
    Ok(())
}
