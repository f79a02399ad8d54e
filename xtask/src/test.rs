//! `cargo xtask test`.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, anyhow, bail};

use crate::{deps, have, root, run as sh, tidy};

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
    // Clippy shares no compiled code with the test build (it stops at metadata), so it runs
    // beside the build and the tests instead of before them, at the lowest CPU priority: it
    // takes the cycles they leave idle (links, serial crate chains, tests waiting on processes
    // or clocks) and next to nothing from them. Its own target folder keeps it off the build's
    // lock. On CI this moved its ten minutes off the critical path.
    let clippy = std::thread::spawn(|| timed("clippy (beside the tests, lowest priority)", clippy_beside));
    let tested = test_and_doc_test(peers, extra);
    // Clippy is waited for whatever the tests did: it is never left running on its own, and its
    // findings are reported beside a test failure.
    let linted = clippy.join().map_err(|_| anyhow!("clippy's thread panicked")).and_then(|linted| linted);
    match (tested, linted) {
        (Err(tests), Err(lints)) => bail!("{tests:#}; and {lints:#}"),
        (tested, linted) => tested.and(linted)?,
    }
    eprintln!("xtask: the whole test run took {}", minutes(started));
    Ok(())
}

/// Waits for the peers, then runs the tests and, if they pass, the doc tests.
fn test_and_doc_test(peers: std::thread::JoinHandle<anyhow::Result<()>>, extra: &[String]) -> anyhow::Result<()> {
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
    timed("doc tests", || sh("cargo", &["test", "--workspace", "--doc"]))
}

/// `cargo clippy --workspace --all-targets -D warnings` under `nice -n 19`, in `target/clippy`,
/// its output kept and printed once it ends (not interleaved with the tests').
fn clippy_beside() -> anyhow::Result<()> {
    let args = ["-n", "19", "cargo", "clippy", "--workspace", "--all-targets", "--", "-D", "warnings"];
    let target = root().join("target/clippy");
    let out = Command::new("nice")
        .args(args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(root())
        .output()
        .context("cannot run `nice cargo clippy`")?;
    let log = String::from_utf8_lossy(&out.stderr);
    // Only what clippy said, not the list of crates it checked.
    let said: Vec<&str> = log.lines().filter(|l| !is_progress(l)).collect();
    if !said.is_empty() {
        eprintln!("$ nice {}\n{}", args.join(" "), said.join("\n"));
    }
    if !out.status.success() {
        bail!("`cargo clippy` failed ({})", out.status);
    }
    Ok(())
}

/// Cargo's progress lines ("Compiling x", "Checking y", "Finished ...").
fn is_progress(line: &str) -> bool {
    let word = line.trim_start().split(' ').next().unwrap_or("");
    matches!(word, "Compiling" | "Checking" | "Finished" | "Blocking" | "Downloaded" | "Downloading" | "Locking")
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
