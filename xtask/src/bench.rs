//! `cargo xtask bench`: runs every benchmark; each prints its own figures and peer ratios.

use crate::{deps, run as sh};

/// (package, bench target) pairs, in the order they run.
const BENCHES: &[(&str, &str)] = &[
    ("toolgate", "gate"),
    ("toolgate-guard", "leak"),
    ("toolgate-tools", "fs_vs_rg"),
    ("toolgate-sandbox", "start"),
    ("toolgate", "mcp"),
];

pub(crate) fn run(filter: &[String]) -> anyhow::Result<()> {
    deps::install()?;
    for (package, bench) in BENCHES {
        if !filter.is_empty() && !filter.iter().any(|f| bench.contains(f.as_str()) || package.contains(f.as_str())) {
            continue;
        }
        sh("cargo", &["bench", "--package", package, "--bench", bench])?;
    }
    Ok(())
}
