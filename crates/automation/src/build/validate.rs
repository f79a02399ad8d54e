//! Validating a built WASM tool against toolgate's own component world (`toolgate:tool@0.1.0`,
//! `toolgate_wasm::WIT`), not the seed's core-module `run` export: a component (not a core
//! module), valid, at most the size its capabilities allow, exporting the functions `describe`
//! and `execute`, and importing nothing but the world's interfaces and WASI (which toolgate links
//! empty). Then the WASM runtime itself links it against the world and asks it to describe
//! itself, and runs the model's test cases in it with no capabilities. Every finding is written
//! for the model that has to fix it.

use std::path::Path;

use serde_json::Value;
use toolgate_wasm::{Capabilities, Prepared, Services, WasmRuntime};

/// What a valid component exposes, for the build log.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    pub size: usize,
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// The interfaces toolgate's world offers a guest.
const WORLD_PREFIX: &str = "toolgate:tool/";

/// Checks `bytes` with wasmparser: the findings, or what the component exports and imports.
pub(crate) fn check(bytes: &[u8], max_bytes: u64) -> Result<Shape, Vec<String>> {
    use wasmparser::{ComponentExternalKind, Parser, Payload};
    if bytes.len() as u64 > max_bytes {
        return Err(vec![format!(
            "the component is {} bytes, more than the {max_bytes} its capabilities file allows (limits.component_mb)",
            bytes.len()
        )]);
    }
    if !Parser::is_component(bytes) {
        let what = if Parser::is_core_wasm(bytes) { "a core module" } else { "not WebAssembly" };
        return Err(vec![format!(
            "the file is {what}, not a component of the toolgate:tool world: build it with the project's build.sh"
        )]);
    }
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    if let Err(e) = validator.validate_all(bytes) {
        return Err(vec![format!("the component is not valid WebAssembly: {e}")]);
    }
    let mut shape = Shape { size: bytes.len(), ..Shape::default() };
    let mut funcs = Vec::new();
    // Only the outer component's own sections: nested modules and components have theirs.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = match payload {
            Ok(p) => p,
            Err(e) => return Err(vec![format!("the component cannot be parsed: {e}")]),
        };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader.into_iter().flatten() {
                    match export.kind {
                        ComponentExternalKind::Func => funcs.push(export.name.name.to_owned()),
                        ComponentExternalKind::Type => continue,
                        _ => {}
                    }
                    shape.exports.push(export.name.name.to_owned());
                }
            }
            Payload::ComponentImportSection(reader) if depth == 0 => {
                // Type imports (the world's records) are the guest's own view of the types.
                for import in reader.into_iter().flatten() {
                    if !matches!(import.ty, wasmparser::ComponentTypeRef::Type(_)) {
                        shape.imports.push(import.name.name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    let mut findings = Vec::new();
    for wanted in ["describe", "execute"] {
        if !funcs.iter().any(|f| f == wanted) {
            findings.push(format!(
                "the component does not export the function `{wanted}` of the toolgate:tool world (it exports: {})",
                list(&shape.exports)
            ));
        }
    }
    let foreign: Vec<&String> = shape.imports.iter().filter(|i| !provided(i)).collect();
    if !foreign.is_empty() {
        findings.push(format!(
            "the component imports {} which toolgate does not provide (only {WORLD_PREFIX}log, workspace, http, \
             secrets, tools and an empty WASI)",
            list(&foreign)
        ));
    }
    if findings.is_empty() { Ok(shape) } else { Err(findings) }
}

/// Whether toolgate links `import`: one of the world's own interfaces (any version of the
/// package: the runtime's linker then checks it), or WASI, which it links empty. Not any name
/// under `toolgate:tool/`: a component may not ask for an interface the world does not have.
fn provided(import: &str) -> bool {
    if import.starts_with("wasi:") {
        return true;
    }
    let unversioned = import.split('@').next().unwrap_or_default();
    unversioned.strip_prefix(WORLD_PREFIX).is_some_and(|interface| WORLD_INTERFACES.contains(&interface))
}

/// The interfaces of the `tool` world (`toolgate_wasm::WIT`).
const WORLD_INTERFACES: [&str; 5] = ["log", "workspace", "http", "secrets", "tools"];

fn list<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "nothing".to_owned();
    }
    items.iter().map(|s| format!("`{}`", s.as_ref())).collect::<Vec<_>>().join(", ")
}

/// Links the component against the world in a runtime caching under `state` and runs its
/// `describe`: the runtime's own check (types of the exports, the description's rules).
pub(crate) async fn link(
    runtime: &WasmRuntime,
    bytes: &[u8],
    caps: &Capabilities,
    want_name: &str,
) -> Result<Prepared, String> {
    let prepared =
        runtime.prepare(bytes, caps).await.map_err(|e| format!("toolgate's WASM runtime refused it: {e}"))?;
    if prepared.description.name != want_name {
        return Err(format!(
            "`describe` returns the name {:?}; it must be {want_name:?} (the tool is installed under that name)",
            prepared.description.name
        ));
    }
    Ok(prepared)
}

/// One of the model's test cases.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    input: Value,
    #[serde(default)]
    expect: Option<String>,
    #[serde(default)]
    error: bool,
}

/// The most test cases run.
const MAX_CASES: usize = 20;

/// Runs the cases of `tests.json` (`text`) in the runtime with no capabilities; the failures,
/// or how many passed.
pub(crate) async fn run_cases(
    runtime: &WasmRuntime,
    prepared: &Prepared,
    name: &str,
    caps: &Capabilities,
    text: &str,
) -> Result<usize, Vec<String>> {
    let cases: Vec<Case> = serde_json::from_str(text).map_err(|e| {
        vec![format!(
            "tests.json is not a JSON array of cases {{\"input\": {{...}}, \"expect\": \"...\"}} or {{\"input\": \
             {{...}}, \"error\": true}}: {e}"
        )]
    })?;
    if cases.is_empty() {
        return Err(vec!["tests.json has no cases: add at least one".to_owned()]);
    }
    let validator = toolgate_core::ParamValidator::new(name, &prepared.description.input_schema);
    let caps = std::sync::Arc::new(caps.clone());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().take(MAX_CASES).enumerate() {
        let n = i + 1;
        if !case.error
            && let Err(e) = validator.as_ref().map_err(String::clone).and_then(|v| {
                v.check(case.input.clone(), &toolgate_core::Limits::default()).map(drop).map_err(|e| e.to_string())
            })
        {
            failures.push(format!("case {n}: its input does not match the tool's input schema: {e}"));
            continue;
        }
        let params = case.input.to_string();
        let (result, _) =
            runtime.execute(prepared, name.into(), caps.clone(), Services::default(), None, &params).await;
        match (result, case.error) {
            (Ok(Ok(out)), false) => {
                if let Some(want) = &case.expect
                    && !out.contains(want.as_str())
                {
                    failures.push(format!("case {n} ({params}): expected the result to contain {want:?}, got {out:?}"));
                }
            }
            (Ok(Err(_)), true) => {}
            (Ok(Ok(out)), true) => failures.push(format!("case {n} ({params}): expected an error, got {out:?}")),
            (Ok(Err(e)), false) => failures.push(format!("case {n} ({params}): the tool returned the error {e:?}")),
            (Err(e), _) => failures.push(format!("case {n} ({params}): the component failed: {e}")),
        }
    }
    let passed = cases.len().min(MAX_CASES) - failures.len();
    if failures.is_empty() { Ok(passed) } else { Err(failures) }
}

/// Reads the capabilities file beside the component (`NAME.capabilities.json`).
pub(crate) fn capabilities(component: &Path, name: &str) -> Result<Capabilities, String> {
    let caps = toolgate_wasm::read_capabilities(component, Some(name), None)?;
    caps.validate().map_err(|e| format!("the capabilities file beside the component: {e}"))?;
    Ok(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_worlds_interfaces_and_wasi_are_provided() {
        for ok in
            ["toolgate:tool/log@0.1.0", "toolgate:tool/tools@0.1.0", "toolgate:tool/http", "wasi:io/streams@0.2.0"]
        {
            assert!(provided(ok), "{ok}");
        }
        for bad in ["toolgate:tool/steal@0.1.0", "toolgate:tool/", "toolgate:toolx/log", "evil:x/log", "log"] {
            assert!(!provided(bad), "{bad}");
        }
        // The list is the world's.
        for i in WORLD_INTERFACES {
            assert!(toolgate_wasm::WIT.contains(&format!("interface {i} {{")), "{i}");
            assert!(toolgate_wasm::WIT.contains(&format!("import {i};")), "{i}");
        }
    }

    #[test]
    fn a_core_module_is_not_a_tool() {
        // The seed's shape: a core module exporting `run`.
        let module = b"\0asm\x01\0\0\0";
        let e = check(module, 1 << 20).unwrap_err();
        assert!(e[0].contains("core module"), "{e:?}");
        let e = check(b"hello", 1 << 20).unwrap_err();
        assert!(e[0].contains("not WebAssembly"), "{e:?}");
        let e = check(&[0u8; 100], 10).unwrap_err();
        assert!(e[0].contains("more than"), "{e:?}");
    }
}
