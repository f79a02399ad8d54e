//! What every benchmark shares, so that `cargo xtask bench summary` can run them all and print one
//! table (issue 31):
//!
//! - [`quick`]: whether the summary asked for a short run (`TOOLGATE_BENCH_QUICK`);
//! - [`summary::Row`]: one line of the table (metric, toolgate, peer, ratio, target, met), printed
//!   by the benchmark on its own line, tagged, for the summary to collect;
//! - [`process`]: a whole-process timer (wall and CPU time, min/median/max over repeated runs
//!   after a warm-up), the method hyperfine uses;
//! - [`server`]: `toolgate serve --http` on a free loopback port, started once it listens.
//!
//! Dev-only, with no internal dependency: benchmarks of the lowest crates use it without pulling
//! in the gate.

#![deny(missing_docs)]

pub mod process;
pub mod server;
pub mod summary;

/// Whether this is the summary's short run: fewer rounds, same steps.
pub fn quick() -> bool {
    std::env::var_os("TOOLGATE_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `full` normally, `short` in a quick run.
pub fn rounds(full: usize, short: usize) -> usize {
    if quick() { short } else { full }
}
