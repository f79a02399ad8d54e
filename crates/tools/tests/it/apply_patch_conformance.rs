//! Runs every Codex apply_patch conformance scenario through the `apply_patch` tool.
//!
//! The scenarios live in `shared/conformance/apply-patch/scenarios` beside the project root. Each
//! has `input/` (absent means empty), `patch.txt` and `expected/`. The test copies `input/` to a
//! temporary workspace, calls the tool, and compares the tree byte for byte with `expected/`.
//!
//! Scenario 015 is a documented divergence: Codex leaves the changes made before a failing hunk
//! on disk; toolgate applies all or nothing, so the tree must be exactly `input/` (empty).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;
use toolgate_core::{CallContext, Tool};
use toolgate_tools::fs::{ApplyPatchTool, FsConfig, FsState};

/// Scenarios where toolgate deliberately differs from Codex: the tree must equal `input/`.
const ALL_OR_NOTHING_DIVERGENCES: &[&str] = &["015_failure_after_partial_success_leaves_changes"];

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/apply-patch/scenarios")
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).map(|r| r.to_string_lossy().into_owned()).unwrap_or_default();
            let ft = e.file_type().map_err(|e| e.to_string());
            match ft {
                Ok(t) if t.is_dir() => walk(base, &p, out),
                Ok(_) => {
                    out.insert(rel, fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in snapshot(from) {
        let dest = to.join(&rel);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
        }
        fs::write(&dest, bytes).unwrap_or_else(|e| panic!("write {}: {e}", dest.display()));
    }
}

fn show(tree: &BTreeMap<String, Vec<u8>>) -> String {
    tree.iter().map(|(k, v)| format!("  {k}: {:?}\n", String::from_utf8_lossy(v))).collect()
}

#[tokio::test]
async fn codex_apply_patch_scenarios() {
    let dir = scenarios_dir();
    assert!(
        dir.is_dir(),
        "the apply_patch conformance scenarios are missing: expected them at {} (the `shared/` folder beside \
         the project root). This test must not be skipped; restore shared/conformance/apply-patch/",
        dir.display()
    );
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 23, "expected at least 23 scenarios, found {}", names.len());

    let mut failures = Vec::new();
    let mut divergences_checked = 0;
    for name in &names {
        let scenario = dir.join(name);
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = ws.path().canonicalize().unwrap_or_else(|e| panic!("canonicalize: {e}"));
        if scenario.join("input").is_dir() {
            copy_tree(&scenario.join("input"), &root);
        }
        let before = snapshot(&root);
        let patch = fs::read_to_string(scenario.join("patch.txt")).unwrap_or_else(|e| panic!("{name}: patch: {e}"));
        let state = FsState::new_shared(FsConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        let tool = ApplyPatchTool::new(state);
        let ctx = CallContext::new(root.clone());
        let result = tool.execute(&ctx, json!({ "patch": patch })).await;
        let after = snapshot(&root);
        match &result {
            Ok(out) => eprintln!("{name}: ok: {}", out.text_content().replace('\n', " | ")),
            Err(e) => eprintln!("{name}: error: {}", e.to_string().replace('\n', " | ")),
        }

        if ALL_OR_NOTHING_DIVERGENCES.contains(&name.as_str()) {
            divergences_checked += 1;
            if result.is_ok() {
                failures.push(format!("{name}: expected the patch to fail"));
            }
            if after != before {
                failures.push(format!(
                    "{name}: all-or-nothing divergence: the tree must be left as it started.\nstarted:\n{}now:\n{}",
                    show(&before),
                    show(&after)
                ));
            }
            continue;
        }
        let expected = snapshot(&scenario.join("expected"));
        if after != expected {
            failures.push(format!(
                "{name}: tree differs (tool said: {result:?})\nexpected:\n{}got:\n{}",
                show(&expected),
                show(&after)
            ));
        }
    }
    assert_eq!(divergences_checked, ALL_OR_NOTHING_DIVERGENCES.len(), "a divergence scenario is missing");
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), names.len(), failures.join("\n"));
}
