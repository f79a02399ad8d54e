//! The `toolgate` command as a process: what a hook, a script or a test pays per call.
//!
//! Run with `cargo bench -p toolgate-cli --bench cli` (or `cargo xtask bench cli`). It times the
//! binary `cargo bench` builds beside it (or `TOOLGATE_BENCH_BIN`). Side by side, in the same run and the same
//! workspace: `toolgate --version` (the floor: process start and argument parsing),
//! `toolgate call echo`, `rg --version`, and a search with `toolgate call grep` against `rg`
//! on the same tree (a copy of `~/.cargo/registry/src`, or of `FS_BENCH_TREE`, so that the
//! workspace state toolgate keeps does not land in the registry). For each command: the median
//! and minimum wall time and the median CPU time (user + system, `getrusage` of children), over 21
//! runs after one warm-up (7 in `cargo xtask bench summary`'s short run), timed by
//! `toolgate-benchkit`'s whole-process timer.
//!
//! This is a benchmark, not a test: it fails only when a command fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use toolgate_benchkit::process::{self, Timed};
use toolgate_benchkit::summary::{Row, Target};

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let bin = std::env::var_os("TOOLGATE_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolgate")), PathBuf::from);
    if !bin.is_file() {
        eprintln!("cli bench: {} is missing", bin.display());
        std::process::exit(1);
    }
    let tree = std::env::var_os("FS_BENCH_TREE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo/registry/src"));
    let Ok(tree) = tree.canonicalize() else {
        eprintln!("cli bench: the tree {} does not exist; set FS_BENCH_TREE", tree.display());
        std::process::exit(1);
    };
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("cli bench: `rg` is not installed (`cargo xtask deps` installs it)");
        std::process::exit(1);
    }
    let bin = bin.to_string_lossy().into_owned();
    let copy = tempfile::tempdir().unwrap_or_else(|e| {
        eprintln!("cli bench: {e}");
        std::process::exit(1)
    });
    let copied = Command::new("cp").arg("-a").arg(&tree).arg(copy.path().join("tree")).status();
    if !copied.is_ok_and(|s| s.success()) {
        eprintln!("cli bench: cannot copy {} to {}", tree.display(), copy.path().display());
        std::process::exit(1);
    }
    let tree = copy.path().join("tree");
    // The echo and version rows run in an empty workspace of their own: its state (audit log,
    // `.toolgate/`) is created by the warm-up run, as for any workspace used more than once.
    let scratch = tempfile::tempdir().unwrap_or_else(|e| {
        eprintln!("cli bench: {e}");
        std::process::exit(1)
    });
    let ws = scratch.path().to_string_lossy().into_owned();
    let runs = toolgate_benchkit::rounds(21, 7);
    let echo_argv = [bin.as_str(), "--workspace", &ws, "call", "echo", r#"{"message":"hi"}"#];
    let grep_argv = [
        bin.as_str(),
        "--approval",
        "never",
        "call",
        "grep",
        r#"{"pattern":"impl Default for","output_mode":"count"}"#,
    ];
    let version_argv = [bin.as_str(), "--version"];
    let rows: Vec<(&str, &[&str], &Path)> = vec![
        ("toolgate --version", &version_argv, scratch.path()),
        ("rg --version", &["rg", "--version"], scratch.path()),
        ("toolgate call echo", &echo_argv, scratch.path()),
        ("toolgate call grep (registry)", &grep_argv, &tree),
        ("rg -c (registry)", &["rg", "-c", "impl Default for"], &tree),
    ];
    println!("{runs} runs each after a warm-up; wall time median (min, max), CPU time median (user + system)");
    println!("{:<32} {:>12} {:>12} {:>12} {:>12}", "command", "wall", "wall min", "wall max", "cpu");
    let mut results: Vec<Timed> = Vec::new();
    for (name, argv, cwd) in &rows {
        let t = process::time(argv, cwd, runs).unwrap_or_else(|e| {
            eprintln!("cli bench: {e}");
            std::process::exit(1)
        });
        println!(
            "{name:<32} {:>12} {:>12} {:>12} {:>12}",
            ms(t.wall.median),
            ms(t.wall.min),
            ms(t.wall.max),
            ms(t.cpu.median)
        );
        results.push(t);
    }
    let ratio = |a: &Timed, b: &Timed| a.wall.median.as_secs_f64() / b.wall.median.as_secs_f64();
    println!();
    println!("toolgate call echo / rg --version: {:.2}x wall", ratio(&results[2], &results[1]));
    println!("toolgate call grep / rg (same search): {:.2}x wall", ratio(&results[3], &results[4]));
    let (echo, grep, rg) = (&results[2], &results[3], &results[4]);
    Row::new("`toolgate call echo` cold, wall median", millis(echo.wall.median), "ms")
        .target(Target::AtMost(8.0))
        .emit();
    Row::new("`toolgate call echo` cold, CPU median", millis(echo.cpu.median), "ms").target(Target::AtMost(6.0)).emit();
    Row::new("`call grep` on the registry, wall median", millis(grep.wall.median), "ms")
        .peer("rg -c", millis(rg.wall.median))
        .target(Target::RatioAtMost(0.85))
        .emit();
    Row::new("`call grep` on the registry, CPU median", millis(grep.cpu.median), "ms")
        .peer("rg -c", millis(rg.cpu.median))
        .target(Target::RatioAtMost(1.0))
        .emit();
}
