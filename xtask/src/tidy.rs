//! `tidy`: architecture checks that are cheaper as code than as review comments.
//!
//! - The internal dependency graph is exactly [`EDGES`] (one way: core ← policy, guard ← sandbox,
//!   fetch ← tools, mcp ← toolgate ← cli): a new edge fails until it is listed on purpose, a
//!   listed edge that is gone fails until it is removed, and the dev-only crates (testkit, the
//!   conformance suite's binary) are nobody's normal dependency.
//! - Every crate root (library or binary) opens with `//!` docs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

/// The internal dependency graph, exactly: each crate and the internal crates it depends on
/// (normal dependencies). Tidy fails on an edge the manifests have and this list does not (a new
/// edge is added here on purpose, with ARCHITECTURE.md's "Dependency direction"), and on an edge
/// this list has and the manifests do not (so the list stays the real graph).
const EDGES: &[(&str, &[&str])] = &[
    ("toolgate-core", &[]),
    ("toolgate-policy", &["toolgate-core"]),
    ("toolgate-dialect", &["toolgate-core"]),
    ("toolgate-guard", &["toolgate-core"]),
    ("toolgate-store", &[]),
    ("toolgate-embed", &["toolgate-store"]),
    ("toolgate-sandbox", &["toolgate-guard"]),
    ("toolgate-fetch", &["toolgate-core", "toolgate-guard"]),
    ("toolgate-tools", &["toolgate-core", "toolgate-fetch", "toolgate-guard", "toolgate-sandbox", "toolgate-store"]),
    ("toolgate-mcp", &["toolgate-core", "toolgate-fetch", "toolgate-guard", "toolgate-sandbox"]),
    ("toolgate-agent", &["toolgate-core", "toolgate-store"]),
    ("toolgate-wasm", &["toolgate-core", "toolgate-store"]),
    (
        "toolgate-automation",
        &[
            "toolgate-agent",
            "toolgate-core",
            "toolgate-fetch",
            "toolgate-guard",
            "toolgate-store",
            "toolgate-tools",
            "toolgate-wasm",
        ],
    ),
    ("toolgate-browser", &["toolgate-core", "toolgate-fetch", "toolgate-sandbox", "toolgate-store", "toolgate-tools"]),
    ("toolgate-media", &["toolgate-core", "toolgate-fetch", "toolgate-sandbox", "toolgate-tools"]),
    ("toolgate-gateway", &["toolgate-core", "toolgate-mcp", "toolgate-policy", "toolgate-store"]),
    ("toolgate-postgres", &["toolgate-store"]),
    ("toolgate-nodes", &["toolgate-core", "toolgate-mcp", "toolgate-store"]),
    (
        "toolgate-extensions",
        &["toolgate-core", "toolgate-guard", "toolgate-mcp", "toolgate-store", "toolgate-tools", "toolgate-wasm"],
    ),
    (
        "toolgate",
        &[
            "toolgate-agent",
            "toolgate-automation",
            "toolgate-browser",
            "toolgate-core",
            "toolgate-dialect",
            "toolgate-embed",
            "toolgate-extensions",
            "toolgate-fetch",
            "toolgate-gateway",
            "toolgate-guard",
            "toolgate-mcp",
            "toolgate-media",
            "toolgate-nodes",
            "toolgate-policy",
            "toolgate-postgres",
            "toolgate-sandbox",
            "toolgate-store",
            "toolgate-tools",
            "toolgate-wasm",
        ],
    ),
    ("toolgate-watch", &["toolgate"]),
    (
        "toolgate-cli",
        &[
            "toolgate",
            "toolgate-core",
            "toolgate-embed",
            "toolgate-extensions",
            "toolgate-mcp",
            "toolgate-wasm",
            "toolgate-watch",
        ],
    ),
    // Dev-only: tidy also checks that no crate has these as a normal dependency.
    ("toolgate-testkit", &["toolgate"]),
    ("toolgate-benchkit", &[]),
    // The MCP conformance suite's server fixtures and client (a test-only binary).
    ("toolgate-conformance", &["toolgate", "toolgate-core", "toolgate-mcp"]),
    // examples/agent: a program that embeds the library, as a user's agent would.
    ("toolgate-example-agent", &["toolgate"]),
    ("xtask", &[]),
];

/// Crates no library or binary may depend on (dev-dependencies only).
const DEV_ONLY: &[&str] = &["toolgate-testkit", "toolgate-benchkit", "toolgate-conformance"];

pub(crate) fn run() -> anyhow::Result<()> {
    eprintln!("$ tidy (dependency direction, crate docs)");
    let out = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(crate::root())
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("cargo metadata printed invalid JSON")?;
    let edges: BTreeMap<&str, &[&str]> = EDGES.iter().copied().collect();
    let mut problems = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(listed) = edges.get(name) else {
            problems.push(format!("crate `{name}` is not listed in xtask/src/tidy.rs: add it with its dependencies"));
            continue;
        };
        let actual: BTreeSet<&str> = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["kind"].is_null())
            .filter_map(|dep| dep["name"].as_str())
            .filter(|dep| *dep == "toolgate" || dep.starts_with("toolgate-"))
            .collect();
        let listed: BTreeSet<&str> = listed.iter().copied().collect();
        for dep in actual.difference(&listed) {
            problems.push(if DEV_ONLY.contains(dep) {
                format!("`{name}` depends on `{dep}`, which is for tests only (a dev-dependency)")
            } else {
                format!(
                    "`{name}` depends on `{dep}`, an edge tidy does not list: if it keeps the direction one way, \
                     add it to EDGES in xtask/src/tidy.rs and to ARCHITECTURE.md"
                )
            });
        }
        for dep in listed.difference(&actual) {
            problems.push(format!("tidy lists `{name}` -> `{dep}`, which the manifests no longer have: remove it"));
        }
        for target in package["targets"].as_array().into_iter().flatten() {
            let root = target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "lib" || k == "bin"));
            if !root {
                continue;
            }
            let path = target["src_path"].as_str().unwrap_or_default();
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            if !text.trim_start().starts_with("//!") {
                problems.push(format!("{path} does not open with `//!` crate docs"));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("tidy found {} problem(s):\n  {}", problems.len(), problems.join("\n  "))
}
