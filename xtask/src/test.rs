//! `cargo xtask test`.

use std::time::Instant;

use anyhow::anyhow;

use crate::{deps, have, run as sh, tidy};

pub(crate) fn run(extra: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    // Debian packages first: a build may need one.
    timed("installing Debian packages", deps::install_system)?;
    // The peers, components and models are only for the tests: they install (mostly downloads)
    // while the code is checked, and the tests wait for them.
    let peers = std::thread::spawn(|| {
        timed("installing the peers, components and models", || {
            deps::install_peers();
            Ok(())
        })
    });
    timed("tidy", tidy::run)?;
    timed("fmt", || sh("cargo", &["fmt", "--all", "--", "--check"]))?;
    timed("clippy", || sh("cargo", &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    peers.join().map_err(|_| anyhow!("installing the peers panicked"))??;
    let mut nextest = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
    nextest.extend(extra.iter().map(String::as_str));
    if have("cargo-nextest") {
        timed("building and running the tests", || sh("cargo", &nextest))?;
    } else {
        eprintln!("cargo-nextest is not installed; falling back to cargo test");
        timed("building and running the tests", || {
            sh("cargo", &["test", "--workspace", "--lib", "--bins", "--tests"])
        })?;
    }
    timed("doc tests", || sh("cargo", &["test", "--workspace", "--doc"]))?;
    eprintln!("xtask: the whole test run took {}", minutes(started));
    Ok(())
}

/// Runs `step`, then says how long it took (the phases of a CI run, to see where time goes).
fn timed(what: &str, step: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let started = Instant::now();
    let result = step();
    eprintln!("xtask: {what} took {}", minutes(started));
    result
}

fn minutes(since: Instant) -> String {
    let secs = since.elapsed().as_secs();
    format!("{}m {:02}s", secs / 60, secs % 60)
}
