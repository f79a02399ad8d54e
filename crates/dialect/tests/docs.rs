//! `docs/dialects.md` carries every dialect's table, generated from the dialect files: this test
//! fails when they differ, and `TOOLGATE_BLESS=1 cargo test -p toolgate-dialect --test docs`
//! writes the tables again.

use std::fmt::Write as _;
use std::path::Path;

const BEGIN: &str = "<!-- BEGIN GENERATED: dialect tables (crates/dialect/tests/docs.rs) -->";
const END: &str = "<!-- END GENERATED -->";

fn conversion_words(conversion: &str) -> &'static str {
    match conversion {
        "" => "",
        "zero_based" => " (0-based: +1)",
        "line_range" => " (`[start, end]` or `\"start-end\"`: offset and line count)",
        "ms_to_seconds" => " (ms: seconds, rounded up)",
        "signal" => " (`SIGTERM`, `TERM` or `15`: `TERM`)",
        "glob_list" => " (a list of globs: one `{a,b}` glob)",
        "values" => " (values renamed)",
        _ => " (?)",
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn render() -> String {
    let mut out = String::new();
    for d in toolgate_dialect::all().iter().filter(|d| !d.is_default()) {
        let _ = writeln!(out, "### `{}`: {} (seed `{}`)\n", d.name(), d.system(), d.seed());
        out.push_str("| name | toolgate tool | parameters: theirs → toolgate's | always sent | spelling from |\n");
        out.push_str("|---|---|---|---|---|\n");
        for tool in d.tools() {
            let params: Vec<String> = tool
                .param_table()
                .into_iter()
                .map(|(name, to, conversion)| {
                    let to = to.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(" + ");
                    if to == format!("`{name}`") && conversion.is_empty() {
                        format!("`{name}`")
                    } else {
                        format!("`{name}` → {to}{}", conversion_words(conversion))
                    }
                })
                .collect();
            let fixed: Vec<String> = tool.fixed().iter().map(|(k, v)| format!("`{k}: {v}`")).collect();
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} | {} |",
                tool.name,
                tool.canonical,
                cell(&params.join(", ")),
                cell(&fixed.join(", ")),
                cell(&tool.source)
            );
        }
        if !d.not_implemented().is_empty() {
            out.push_str("\nNot in toolgate yet (not listed; `toolgate tools --dialect ");
            out.push_str(d.name());
            out.push_str(" --missing`):\n\n");
            for (name, reason) in d.not_implemented() {
                let _ = writeln!(out, "- `{name}`: {}", cell(reason));
            }
        }
        if !d.gaps().is_empty() {
            out.push_str("\nWhere toolgate's tool differs from the system's:\n\n");
            for (tool, note) in d.gaps() {
                let _ = writeln!(out, "- `{tool}`: {}", cell(note));
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn the_docs_carry_every_dialect_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/dialects.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (head, rest) = doc.split_once(BEGIN).unwrap_or_else(|| panic!("docs/dialects.md has no `{BEGIN}` line"));
    let (current, tail) = rest.split_once(END).unwrap_or_else(|| panic!("docs/dialects.md has no `{END}` line"));
    let fresh = format!("\n\n{}", render());
    if current == fresh {
        return;
    }
    if std::env::var_os("TOOLGATE_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{BEGIN}{fresh}{END}{tail}")).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    panic!(
        "docs/dialects.md's tables are not the dialect files': run `TOOLGATE_BLESS=1 cargo test -p toolgate-dialect --test docs`"
    );
}
