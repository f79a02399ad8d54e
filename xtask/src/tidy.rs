//! `tidy`: architecture checks that are cheaper as code than as review comments.
//!
//! - The internal dependency direction is one way: core ← policy, guard, store ← sandbox ←
//!   tools ← mcp ← toolgate. Each crate may depend only on the crates listed for it below.
//! - Every crate root opens with `//!` docs.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

/// Internal crates each crate may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("toolgate-core", &[]),
    ("toolgate-policy", &["toolgate-core"]),
    ("toolgate-guard", &["toolgate-core"]),
    ("toolgate-store", &["toolgate-core"]),
    ("toolgate-embed", &["toolgate-store"]),
    ("toolgate-sandbox", &["toolgate-core", "toolgate-guard"]),
    (
        "toolgate-tools",
        &["toolgate-core", "toolgate-guard", "toolgate-sandbox", "toolgate-store", "toolgate-policy", "toolgate-fetch"],
    ),
    ("toolgate-mcp", &["toolgate-core", "toolgate-guard", "toolgate-sandbox"]),
    ("toolgate-fetch", &["toolgate-core", "toolgate-guard"]),
    ("toolgate-agent", &["toolgate-core", "toolgate-store"]),
    ("toolgate-wasm", &["toolgate-core", "toolgate-store"]),
    (
        "toolgate",
        &[
            "toolgate-core",
            "toolgate-policy",
            "toolgate-guard",
            "toolgate-store",
            "toolgate-sandbox",
            "toolgate-tools",
            "toolgate-mcp",
            "toolgate-fetch",
            "toolgate-agent",
            "toolgate-wasm",
            "toolgate-embed",
        ],
    ),
    // examples/agent: a program that embeds the library, as a user's agent would.
    ("toolgate-example-agent", &["toolgate"]),
    ("xtask", &[]),
];

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
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut problems = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(ok) = allowed.get(name) else {
            problems.push(format!(
                "crate `{name}` is not listed in xtask/src/tidy.rs: add it with its allowed dependencies"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let internal = dep_name == "toolgate" || dep_name.starts_with("toolgate-");
            let normal = dep["kind"].is_null();
            if internal && normal && !ok.contains(&dep_name) {
                problems.push(format!("`{name}` depends on `{dep_name}`, against the dependency direction"));
            }
        }
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_lib = target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "lib"));
            if !is_lib {
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
