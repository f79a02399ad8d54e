//! `cargo xtask bench [FILTER...]`: runs every benchmark; each prints its own figures and peer
//! ratios. A FILTER picks benchmarks by name or package; an MCP section name
//! (`cargo xtask bench read`) runs only that part of the `mcp` benchmark; `cargo xtask bench summary`
//! runs every one in its short form and prints one table (`summary.rs`). `cargo xtask bench load
//! [--secs N]` runs the load run (`crates/cli/benches/load.rs`, 5 minutes a phase by default),
//! which runs only when named; the summary takes a 30 s sample of it.

use crate::{deps, run as sh};

/// (package, bench target) pairs, in the order they run.
pub(crate) const BENCHES: &[(&str, &str)] = &[
    ("toolgate", "gate"),
    ("toolgate-guard", "leak"),
    ("toolgate-tools", "fs_vs_rg"),
    ("toolgate-sandbox", "start"),
    ("toolgate-cli", "mcp"),
    ("toolgate-cli", "gateway"),
    ("toolgate", "wasm"),
    ("toolgate", "agent"),
    ("toolgate", "message"),
    ("toolgate-cli", "cli"),
    ("toolgate-cli", "extensions"),
    ("toolgate-cli", "web"),
    ("toolgate-cli", "browser"),
    ("toolgate-embed", "memory"),
    ("toolgate-automation", "routines"),
];

/// The load run: only when named (`cargo xtask bench load [--secs N]`), its options passed through.
pub(crate) const LOAD: (&str, &str) = ("toolgate-cli", "load");

/// The sections of `crates/cli/benches/mcp.rs`, passed through to it.
const MCP_SECTIONS: &[&str] = &["echo-rmcp", "echo-python", "read", "bridge-sandbox"];

pub(crate) fn run(filter: &[String]) -> anyhow::Result<()> {
    if filter.len() == 1 && filter[0] == "summary" {
        return crate::summary::run();
    }
    if filter.first().is_some_and(|f| f == "load") {
        let mut args = vec!["bench", "--package", LOAD.0, "--bench", LOAD.1, "--"];
        args.extend(filter[1..].iter().map(String::as_str));
        return sh("cargo", &args);
    }
    deps::install()?;
    let (sections, filter): (Vec<&String>, Vec<&String>) =
        filter.iter().partition(|f| MCP_SECTIONS.contains(&f.as_str()));
    for (package, bench) in BENCHES {
        let everything = filter.is_empty() && sections.is_empty();
        let by_section = *bench == "mcp" && !sections.is_empty();
        let by_name = filter.iter().any(|f| bench.contains(f.as_str()) || package.contains(f.as_str()));
        if !(everything || by_name || by_section) {
            continue;
        }
        let mut args = vec!["bench", "--package", package, "--bench", bench];
        if *bench == "mcp" && !sections.is_empty() {
            args.push("--");
            args.extend(sections.iter().map(|s| s.as_str()));
        }
        sh("cargo", &args)?;
    }
    Ok(())
}
