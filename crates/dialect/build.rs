//! Reads the dialect files at build time for the tables a call in the default dialect needs
//! (`$OUT_DIR/names.rs`, `src/names.rs` includes it): every name the registry protects, the
//! seed tools the default dialect understands as aliases (lower-case name, canonical tool),
//! and the parameter spellings those tools map. With them a plain canonical call (`echo {message}`) and the gate's build
//! skip parsing the 114 KB of TOML (about a millisecond of a one-shot `toolgate call`); the
//! files are still parsed, checked and indexed when a call needs a mapping. A unit test
//! (`names::tests`) checks these tables against the parsed files.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

const FILES: [&str; 5] = ["goclaw", "linggen", "gomini", "openclaw", "ironclaw"];

fn main() {
    let mut protected = BTreeSet::new();
    let mut alias_tools = BTreeSet::new();
    let mut alias_params = BTreeSet::new();
    for name in FILES {
        let path = format!("dialects/{name}.toml");
        println!("cargo::rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // A file that does not parse is reported by the crate's own loader (and its test) with
        // the same parser; here it only has no names.
        let Ok(file) = text.parse::<toml::Table>() else { continue };
        let str_of = |v: &toml::Value, key: &str| v.get(key).and_then(toml::Value::as_str).map(str::to_owned);
        for tool in file.get("tools").and_then(toml::Value::as_array).into_iter().flatten() {
            let (Some(tool_name), Some(canonical)) = (str_of(tool, "name"), str_of(tool, "canonical")) else {
                continue;
            };
            protected.insert(tool_name.clone());
            protected.insert(canonical.clone());
            if tool.get("default_alias").and_then(toml::Value::as_bool) == Some(false) {
                continue;
            }
            alias_tools.insert((tool_name.to_ascii_lowercase(), canonical.clone()));
            // Every spelling the tool maps but a plain rename to the same name (`message =
            // "message"`), which the default dialect's index leaves out too; a superset of the
            // index's, since it also leaves out other mappings that change nothing.
            for table in ["params", "aliases"] {
                for (key, value) in tool.get(table).and_then(toml::Value::as_table).into_iter().flatten() {
                    if table == "params" && value.as_str() == Some(key.as_str()) {
                        continue;
                    }
                    alias_params.insert((canonical.clone(), key.clone()));
                }
            }
        }
        for missing in file.get("missing").and_then(toml::Value::as_array).into_iter().flatten() {
            if let Some(n) = str_of(missing, "name") {
                protected.insert(n);
            }
        }
    }
    let mut out = String::new();
    let list = |out: &mut String, name: &str, items: &mut dyn Iterator<Item = String>| {
        let _ = writeln!(out, "pub(crate) const {name}: &[&str] = &[");
        for item in items {
            let _ = writeln!(out, "    {item:?},");
        }
        out.push_str("];\n");
    };
    list(&mut out, "PROTECTED", &mut protected.into_iter());
    let pairs = |out: &mut String, name: &str, items: BTreeSet<(String, String)>| {
        let _ = writeln!(out, "pub(crate) const {name}: &[(&str, &str)] = &[");
        for (a, b) in items {
            let _ = writeln!(out, "    ({a:?}, {b:?}),");
        }
        out.push_str("];\n");
    };
    pairs(&mut out, "ALIAS_TOOLS", alias_tools);
    pairs(&mut out, "ALIAS_PARAMS", alias_params);
    let dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let target = Path::new(&dir).join("names.rs");
    std::fs::write(&target, out).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
}
