//! `grep` and `glob` against ripgrep on a large real tree, in the same run.
//!
//! Run with `cargo bench -p toolgate-tools --bench fs_vs_rg`. The tree is the cargo registry
//! sources (`~/.cargo/registry/src`), or `FS_BENCH_TREE`. Needs `rg` on `PATH` (Debian:
//! `apt-get install -y ripgrep`). For each query it times 7 runs (3 in `cargo xtask bench summary`) of the toolgate tool (its
//! `execute`, called directly) and of `rg` with equivalent options, checks that both find the same
//! number of matches, and prints the medians and the ratio toolgate / rg.
//!
//! This is a benchmark, not a test: it never fails on time, only on differing counts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{CallContext, Tool};
use toolgate_tools::fs::{FsConfig, FsState, GlobTool, GrepTool};

// Runs of each query; `cargo xtask bench summary` takes 3.
fn runs() -> usize {
    toolgate_benchkit::rounds(7, 3)
}

fn main() {
    let tree = match std::env::var_os("FS_BENCH_TREE") {
        Some(t) => PathBuf::from(t),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo/registry/src"),
    };
    let Ok(tree) = tree.canonicalize() else {
        eprintln!("fs_vs_rg: the tree {} does not exist; set FS_BENCH_TREE", tree.display());
        std::process::exit(1);
    };
    let rg_version = Command::new("rg").arg("--version").output();
    let Ok(rg_version) = rg_version else {
        eprintln!("fs_vs_rg: `rg` is not installed (Debian: apt-get install -y ripgrep)");
        std::process::exit(1);
    };
    let rg_version = String::from_utf8_lossy(&rg_version.stdout).lines().next().unwrap_or_default().to_owned();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fs_vs_rg: cannot start a runtime: {e}");
            std::process::exit(1);
        }
    };
    let config = FsConfig { grep_max_results: usize::MAX, glob_max_results: 100, ..FsConfig::default() };
    let state = match FsState::new_shared(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fs_vs_rg: {e}");
            std::process::exit(1);
        }
    };
    let grep = GrepTool::new(state.clone());
    let glob = GlobTool::new(state);
    let ctx = CallContext::new(tree.clone());

    println!("tree: {} ({} files by rg --files)", tree.display(), rg_lines(&tree, &["--files"]));
    println!("rg: {rg_version}; {} runs each, medians; toolgate calls the tool's execute directly", runs());
    println!();
    println!("{:<40} {:>12} {:>12} {:>7} {:>10}", "query", "toolgate", "rg", "ratio", "matches");

    let mut mismatch = false;
    let cases: [(&str, &str, Vec<&str>); 2] = [
        ("grep literal `impl Drop for`", "impl Drop for", vec!["-n", "--no-heading", "impl Drop for"]),
        (
            "grep regex `fn \\w+_(new|with)\\w*\\(`",
            r"fn \w+_(new|with)\w*\(",
            vec!["-n", "--no-heading", r"fn \w+_(new|with)\w*\("],
        ),
    ];
    for (label, pattern, rg_args) in cases {
        let params = json!({ "pattern": pattern, "output_mode": "content" });
        let (tg_time, tg_count) = time(|| {
            let out = runtime.block_on(grep.execute(&ctx, params.clone()));
            match out {
                Ok(o) => meta_count(&o.meta, "matches"),
                Err(e) => panic!("grep failed: {e}"),
            }
        });
        let (rg_time, rg_count) = time(|| rg_lines(&tree, &rg_args));
        mismatch |= report(label, tg_time, rg_time, tg_count, rg_count);
    }
    let (tg_time, tg_count) = time(|| {
        let out = runtime.block_on(glob.execute(&ctx, json!({ "pattern": "**/*" })));
        match out {
            Ok(o) => meta_count(&o.meta, "total"),
            Err(e) => panic!("glob failed: {e}"),
        }
    });
    let (rg_time, rg_count) = time(|| rg_lines(&tree, &["--files"]));
    mismatch |= report("glob `**/*` vs rg --files", tg_time, rg_time, tg_count, rg_count);
    if mismatch {
        eprintln!("\nfs_vs_rg: match counts differ");
        std::process::exit(1);
    }
}

fn meta_count(v: &Option<Value>, key: &str) -> u64 {
    v.as_ref().and_then(|s| s[key].as_u64()).unwrap_or(0)
}

/// Lines `rg` prints (its own notes about binary files excluded), run the way the tools search:
/// no config file, `.gitignore` honoured outside git repositories too, hidden files skipped.
fn rg_lines(tree: &Path, args: &[&str]) -> u64 {
    let out = Command::new("rg")
        .args(["--no-config", "--no-require-git", "--color", "never"])
        .args(args)
        .arg(tree)
        .output()
        .unwrap_or_else(|e| panic!("rg: {e}"));
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.windows(19).any(|w| w == b"binary file matches"))
        .count() as u64
}

/// Median time of [`runs`] runs after one warm-up, and the result of the last run.
fn time(mut f: impl FnMut() -> u64) -> (Duration, u64) {
    let mut count = f();
    let runs = runs();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        count = f();
        times.push(start.elapsed());
    }
    times.sort();
    (times[runs / 2], count)
}

fn report(label: &str, tg: Duration, rg: Duration, tg_count: u64, rg_count: u64) -> bool {
    let ratio = tg.as_secs_f64() / rg.as_secs_f64().max(1e-9);
    let counts = if tg_count == rg_count { format!("{tg_count}") } else { format!("{tg_count} != {rg_count}") };
    println!(
        "{label:<40} {:>10.1}ms {:>10.1}ms {:>6.2}x {:>10}",
        tg.as_secs_f64() * 1000.0,
        rg.as_secs_f64() * 1000.0,
        ratio,
        counts
    );
    tg_count != rg_count
}
