//! The `toolgate` command as a process: what a hook, a script or a test pays per call.
//!
//! Run with `cargo bench -p toolgate-cli --bench cli` (or `cargo xtask bench cli`). It times the
//! binary `cargo bench` builds beside it (or `TOOLGATE_BENCH_BIN`). Side by side, in the same run and the same
//! workspace: `toolgate --version` (the floor: process start and argument parsing),
//! `toolgate call echo`, `rg --version`, and a search with `toolgate call grep` against `rg`
//! on the same tree (a copy of `~/.cargo/registry/src`, or of `FS_BENCH_TREE`, so that the
//! workspace state toolgate keeps does not land in the registry). For each command: the median
//! and minimum wall time and the median CPU time (user + system, `getrusage` of children), over `RUNS`
//! runs after one warm-up.
//!
//! This is a benchmark, not a test: it fails only when a command fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};

const RUNS: usize = 21;

/// CPU time (user + system) of every child reaped so far.
fn children_cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
            };
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// One timed run: wall time and CPU time of the child.
fn run_once(argv: &[String], cwd: &Path) -> (Duration, Duration) {
    let cpu_before = children_cpu();
    let start = Instant::now();
    let out = Command::new(&argv[0]).args(&argv[1..]).current_dir(cwd).stdin(Stdio::null()).output();
    let wall = start.elapsed();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!("cli bench: `{}` failed: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("cli bench: cannot start {}: {e}", argv[0]);
            std::process::exit(1);
        }
    }
    (wall, children_cpu().saturating_sub(cpu_before))
}

struct Figures {
    wall_median: Duration,
    wall_min: Duration,
    cpu_median: Duration,
}

fn measure(argv: &[String], cwd: &Path) -> Figures {
    run_once(argv, cwd);
    let mut wall = Vec::with_capacity(RUNS);
    let mut cpu = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let (w, c) = run_once(argv, cwd);
        wall.push(w);
        cpu.push(c);
    }
    wall.sort();
    cpu.sort();
    Figures { wall_median: wall[RUNS / 2], wall_min: wall[0], cpu_median: cpu[RUNS / 2] }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
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
    let rows: Vec<(&str, Vec<String>, &Path)> = vec![
        ("toolgate --version", argv(&[&bin, "--version"]), scratch.path()),
        ("rg --version", argv(&["rg", "--version"]), scratch.path()),
        (
            "toolgate call echo",
            argv(&[&bin, "--workspace", &ws, "call", "echo", r#"{"message":"hi"}"#]),
            scratch.path(),
        ),
        (
            "toolgate call grep (registry)",
            argv(&[
                &bin,
                "--approval",
                "never",
                "call",
                "grep",
                r#"{"pattern":"impl Default for","output_mode":"count"}"#,
            ]),
            &tree,
        ),
        ("rg -c (registry)", argv(&["rg", "-c", "impl Default for"]), &tree),
    ];
    println!("{RUNS} runs each after a warm-up; wall time median (min), CPU time median (user + system)");
    println!("{:<32} {:>12} {:>12} {:>12}", "command", "wall", "wall min", "cpu");
    let mut results = Vec::new();
    for (name, argv, cwd) in &rows {
        let f = measure(argv, cwd);
        println!("{name:<32} {:>12} {:>12} {:>12}", ms(f.wall_median), ms(f.wall_min), ms(f.cpu_median));
        results.push(f);
    }
    let ratio = |a: &Figures, b: &Figures| a.wall_median.as_secs_f64() / b.wall_median.as_secs_f64();
    println!();
    println!("toolgate call echo / rg --version: {:.2}x wall", ratio(&results[2], &results[1]));
    println!("toolgate call grep / rg (same search): {:.2}x wall", ratio(&results[3], &results[4]));
    println!("target: `toolgate call echo` under 25 ms wall: {}", ms(results[2].wall_median));
}
