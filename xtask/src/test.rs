//! `cargo xtask test`.

use crate::{deps, have, run as sh, tidy};

pub(crate) fn run(extra: &[String]) -> anyhow::Result<()> {
    deps::install()?;
    tidy::run()?;
    sh("cargo", &["fmt", "--all", "--", "--check"])?;
    sh("cargo", &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    let mut nextest = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
    nextest.extend(extra.iter().map(String::as_str));
    if have("cargo-nextest") {
        sh("cargo", &nextest)?;
    } else {
        eprintln!("cargo-nextest is not installed; falling back to cargo test");
        sh("cargo", &["test", "--workspace", "--lib", "--bins", "--tests"])?;
    }
    sh("cargo", &["test", "--workspace", "--doc"])
}
