//! A named dialect (`linggen`, `gomini`, ...): exactly its system's tools and parameters. A
//! spelling from another dialect is refused with the spelling this one expects.

use serde_json::Value;
use toolgate_core::{Registry, ToolError};

use crate::{Dialect, DialectTool, Found, Lookup, ParamMap, Translated, default, map_params, object_of};

pub(crate) fn translate(
    dialect: &'static Dialect,
    name: &str,
    params: &Value,
    catalog: &Registry,
) -> Result<Option<Translated>, ToolError> {
    let Some(tool) = dialect.tool(name) else {
        // A tool from outside the seeds (MCP, WASM, custom) has the same name in every dialect;
        // a bridged server's tool may not be registered yet (its server is connecting), and the
        // gate waits for it.
        let outside = Found::lookup(catalog, name).map(|f| !f.builtin() && f.name() == name);
        if outside.unwrap_or_else(|| name.starts_with("mcp__")) {
            return Ok(None);
        }
        return Err(ToolError::UnknownTool {
            name: name.to_owned(),
            suggestion: spelling_here(dialect, name, catalog),
        });
    };
    let empty = serde_json::Map::new();
    let object = object_of(name, params, &empty)?;
    let (mut params, renamed) = map_params(name, object, |key| match tool.param(key) {
        Some(param) => Lookup::Map(param),
        None => match strict_json_form(tool, key) {
            Some(canonical) => Lookup::Rename(canonical),
            None => Lookup::Refuse(unknown_param(dialect, tool, key, catalog)),
        },
    })?;
    for (key, value) in tool.fixed() {
        params.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok(Some(Translated {
        tool: tool.canonical.clone(),
        params: Value::Object(params),
        called_as: (tool.name != tool.canonical).then(|| tool.name.clone()),
        renamed,
        via: Some(tool),
        dialect: Some(dialect),
    }))
}

/// `NAME_json`, the form OpenAI's strict export gives an any-value parameter `NAME`
/// (`toolgate_core::export`): passed on as the canonical parameter's `_json` form, which the
/// validator decodes.
fn strict_json_form(tool: &DialectTool, key: &str) -> Option<String> {
    let param = tool.param(key.strip_suffix("_json")?)?;
    (param.to.len() == 1 && param.conversion == crate::Conversion::Same).then(|| format!("{}_json", param.to[0]))
}

/// This dialect's name for the tool `name` means elsewhere (`read_file` in `linggen`: `Read`),
/// else its closest name.
fn spelling_here(dialect: &Dialect, name: &str, catalog: &Registry) -> Option<String> {
    if let Some(canonical) = default::canonical_of(name, catalog)
        && let Some(here) = dialect.names_of(&canonical).next()
    {
        return Some(here.to_owned());
    }
    let lower = name.to_ascii_lowercase();
    dialect
        .tools()
        .iter()
        .map(|t| (strsim::jaro_winkler(&t.name.to_ascii_lowercase(), &lower), &t.name))
        .filter(|(score, _)| *score >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n.clone())
}

/// Why `key` is refused, naming this dialect's spelling when `key` is another's.
fn unknown_param(dialect: &Dialect, tool: &DialectTool, key: &str, catalog: &Registry) -> String {
    let takes: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
    let takes = if takes.is_empty() { "no parameters".to_owned() } else { format!("takes: {}", takes.join(", ")) };
    // This dialect's parameters that fill what `key` fills elsewhere (`line_range`: gomini's
    // `offset` and `limit`).
    let fills = default::canonical_params(&tool.canonical, key, catalog);
    let spellings: Vec<&ParamMap> = tool.params.iter().filter(|p| p.to.iter().any(|t| fills.contains(t))).collect();
    let names = |sep: &str| spellings.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(sep);
    let here = match spellings.as_slice() {
        [] => String::new(),
        [one] => format!("; in the {} dialect write it as `{}`", dialect.name(), one.name),
        // Two spellings of one parameter (OpenClaw's `path` and `file_path`) are alternatives;
        // spellings of different parameters (gomini's `offset` and `limit`) go together.
        [first, rest @ ..] if rest.iter().all(|p| p.to == first.to) => {
            format!("; in the {} dialect write it as `{}`", dialect.name(), names("` or `"))
        }
        _ => format!("; in the {} dialect use `{}`", dialect.name(), names("` and `")),
    };
    format!("unknown parameter `{key}` for `{}`{here} (it {takes})", tool.name)
}
