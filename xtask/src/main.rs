//! Project automation, run as `cargo xtask <command>`:
//!
//! - `cargo xtask test`: the one test command: `cargo fmt --check`, then `cargo nextest run` over
//!   the workspace (conformance suites included) and the doc tests, with `cargo clippy -D
//!   warnings` beside them at the lowest CPU priority, and what peer tests need installed (if
//!   missing) while the tests build; it says how long each step took.
//! - `cargo xtask bench`: every benchmark, each printing its figures and ratios against the
//!   named peer measured in the same run; `cargo xtask bench summary`: each in its short form,
//!   and one table of the headline figures (also written at the head of `docs/benchmarks.md`).
//! - `cargo xtask deps`: only the install step.

mod bench;
mod deps;
mod summary;
mod test;
mod tidy;

use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("deps") => deps::install(),
        Some("tidy") => tidy::run(),
        _ => {
            eprintln!("usage: cargo xtask <test|bench|deps> [args]\n");
            eprintln!(
                "  test   fmt check, clippy, nextest over the workspace (peers and conformance included), doc tests"
            );
            eprintln!("  bench  all benchmarks, with ratios against peers measured in the same run");
            eprintln!("  bench summary  each benchmark in its short form, one table of targets met or not");
            eprintln!("  deps   install what peer tests and benchmarks need (idempotent)");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command from the workspace root, echoing it, and fails if it fails.
fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .with_context(|| format!("cannot run `{program}`"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Whether `program` is on PATH.
fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The workspace root.
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(ToOwned::to_owned).unwrap_or_default()
}
