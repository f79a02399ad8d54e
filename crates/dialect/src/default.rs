//! The default dialect: toolgate's own names, and every unambiguous spelling of the five seed
//! systems understood as an alias (never listed).
//!
//! - A tool name is first what the catalog resolves (`read`, `Read`, `bash`); a seed's name for a
//!   tool is tried when the catalog has none, or when the parameters fit the seed's tool and not
//!   the catalog's (`apply_patch {path, old_string, new_string}` is IronClaw's string replace,
//!   `apply_patch {patch}` toolgate's).
//! - A parameter the canonical tool does not have is renamed and converted as a seed does
//!   (`line_range`, `process_id`, `timeout_ms`), unless two seeds disagree on it.
//! - A canonical parameter keeps its meaning (the 0-based `offset` of the minimal Go agent is
//!   its dialect's alone); only conversions that leave every canonical value as it is apply to
//!   it (`SIGTERM` as well as `TERM`, `status` as well as `poll`).
//! - A required parameter the call lacks takes the value a seed's tool of that name fixes
//!   (`subagents` with no `action` lists).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;
use toolgate_core::{Registry, ToolError};

use crate::{DialectTool, Found, Lookup, ParamMap, Translated, all, map_params, object_of};

/// The seeds' spellings, indexed once.
struct Index {
    /// Lowercase seed tool name -> the tools of that name, in dialect order.
    by_name: BTreeMap<String, Vec<&'static DialectTool>>,
    /// Canonical tool -> seed parameter name -> its mapping (`None`: the seeds disagree).
    params: BTreeMap<String, BTreeMap<String, Option<&'static ParamMap>>>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut by_name: BTreeMap<String, Vec<&'static DialectTool>> = BTreeMap::new();
        let mut params: BTreeMap<String, BTreeMap<String, Option<&'static ParamMap>>> = BTreeMap::new();
        for tool in all().iter().flat_map(|d| d.tools.iter()).filter(|t| t.default_alias) {
            by_name.entry(tool.name.to_ascii_lowercase()).or_default().push(tool);
            let spellings =
                tool.params.iter().map(|p| (p.name.as_str(), p)).chain(
                    tool.aliases.iter().filter_map(|(alias, target)| Some((alias.as_str(), tool.param(target)?))),
                );
            let known = params.entry(tool.canonical.clone()).or_default();
            for (spelling, param) in spellings {
                let plain =
                    param.to.len() == 1 && param.to[0] == spelling && param.conversion == crate::Conversion::Same;
                if plain {
                    continue;
                }
                known
                    .entry(spelling.to_owned())
                    .and_modify(|seen| {
                        if seen.is_some_and(|s| s.to != param.to || s.conversion != param.conversion) {
                            *seen = None;
                        }
                    })
                    .or_insert(Some(param));
            }
        }
        Index { by_name, params }
    })
}

/// What the index holds: (seed tool name, its canonical tool) and (canonical tool, spelling)
/// pairs, sorted, for the test of the build-time tables (`names.rs`).
#[cfg(test)]
pub(crate) fn indexed() -> [Vec<(String, String)>; 2] {
    let index = index();
    let mut tools: Vec<(String, String)> =
        index.by_name.iter().flat_map(|(n, ts)| ts.iter().map(move |t| (n.clone(), t.canonical.clone()))).collect();
    tools.sort();
    tools.dedup();
    let params = index.params.iter().flat_map(|(c, p)| p.keys().map(move |k| (c.clone(), k.clone()))).collect();
    [tools, params]
}

/// The canonical tool `name` means in the default dialect, if any.
pub(crate) fn canonical_of(name: &str, catalog: &Registry) -> Option<String> {
    if let Some(found) = Found::lookup(catalog, name) {
        return Some(found.name().to_owned());
    }
    index().by_name.get(&name.to_ascii_lowercase()).and_then(|tools| tools.first()).map(|t| t.canonical.clone())
}

/// The canonical parameters `key` fills for `canonical` in the default dialect (none when it
/// means nothing there; two for a `line_range`).
pub(crate) fn canonical_params(canonical: &str, key: &str, catalog: &Registry) -> Vec<String> {
    if Found::lookup(catalog, canonical).is_some_and(|f| f.has(key)) {
        return vec![key.to_owned()];
    }
    alias(canonical, key).map(|param| param.to.clone()).unwrap_or_default()
}

fn alias(canonical: &str, key: &str) -> Option<&'static ParamMap> {
    index().params.get(canonical).and_then(|p| p.get(key)).copied().flatten()
}

/// Whether `key` means something for the canonical tool `found`.
fn understood(found: &Found, key: &str) -> bool {
    found.has(key) || alias(found.name(), key).is_some()
}

pub(crate) fn translate(name: &str, params: &Value, catalog: &Registry) -> Result<Option<Translated>, ToolError> {
    let identity = Found::lookup(catalog, name);
    // A canonical call that no seed spelling could touch (no seed tool of that name for another
    // tool, no parameter a seed maps onto this tool) is left as it is without indexing the
    // seeds (the build-time tables of `names.rs`): what the common case below decides, for less.
    if let Some(found) = &identity
        && !crate::names::names_other_tool(name, found.name())
        && let Value::Object(object) = params
        && object.keys().all(|k| found.has(k) && !crate::names::is_alias_param(found.name(), k))
        && found.required().all(|r| object.contains_key(r))
    {
        return Ok(None);
    }
    let mut seeds: Vec<&'static DialectTool> = index()
        .by_name
        .get(&name.to_ascii_lowercase())
        .map(|tools| {
            tools.iter().copied().filter(|t| identity.as_ref().is_none_or(|f| f.name() != t.canonical)).collect()
        })
        .unwrap_or_default();
    // One candidate per canonical tool, the first dialect's.
    let mut seen = Vec::new();
    seeds.retain(|t| {
        if seen.contains(&&t.canonical) {
            false
        } else {
            seen.push(&t.canonical);
            true
        }
    });
    if identity.is_none() && seeds.is_empty() {
        return Ok(None);
    }
    let empty = serde_json::Map::new();
    let object = object_of(name, params, &empty)?;
    // The common case, a canonical call with nothing to map, is not rebuilt.
    if let Some(found) = &identity
        && object.iter().all(|(k, v)| found.has(k) && !widened(found.name(), k, v))
        && found.required().all(|r| object.contains_key(r))
    {
        return Ok(None);
    }
    let fits_seed = |tool: &DialectTool| {
        let found = Found::lookup(catalog, &tool.canonical);
        object.keys().all(|k| tool.param(k).is_some() || found.as_ref().is_some_and(|f| understood(f, k)))
    };
    let seed = match &identity {
        Some(found) if seeds.is_empty() || object.keys().all(|k| understood(found, k)) => None,
        Some(_) => seeds.iter().copied().find(|t| fits_seed(t)),
        None => Some(seeds.iter().copied().find(|t| fits_seed(t)).unwrap_or(seeds[0])),
    };
    match (seed, identity) {
        (Some(tool), _) => as_seed_tool(name, tool, object, catalog).map(Some),
        (None, Some(found)) => as_canonical(name, &found, object).map(Some),
        (None, None) => unreachable!("a seed tool is chosen when the catalog has none"),
    }
}

/// Whether a seed's conversion changes the value `value` of the canonical parameter `key`
/// (`SIGTERM` does, `TERM` does not).
fn widened(canonical: &str, key: &str, value: &Value) -> bool {
    alias(canonical, key).is_some_and(|param| {
        widens_in_place(param, key)
            && param.conversion.apply(key, value.clone()).is_ok_and(|v| v.first() != Some(value))
    })
}

/// Whether a seed's mapping of the canonical parameter `key` keeps it where it is and leaves
/// every canonical value as it is (`signal`: `SIGTERM` as well as `TERM`), so the default
/// dialect may apply it without changing what toolgate's own callers mean.
fn widens_in_place(param: &ParamMap, key: &str) -> bool {
    param.to.len() == 1 && param.to[0] == key && param.conversion.widens()
}

/// A call by a seed's name for another tool: that seed's mapping, canonical names mixed in.
fn as_seed_tool(
    name: &str,
    tool: &'static DialectTool,
    object: &serde_json::Map<String, Value>,
    catalog: &Registry,
) -> Result<Translated, ToolError> {
    let found = Found::lookup(catalog, &tool.canonical);
    let (mut params, renamed) = map_params(name, object, |key| match tool.param(key) {
        Some(param) => Lookup::Map(param),
        None => match found.as_ref().filter(|f| !f.has(key)).and_then(|f| alias(f.name(), key)) {
            Some(param) => Lookup::Map(param),
            None => Lookup::Keep,
        },
    })?;
    for (key, value) in tool.fixed() {
        params.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok(Translated {
        tool: tool.canonical.clone(),
        params: Value::Object(params),
        called_as: Some(name.to_owned()),
        renamed,
        via: Some(tool),
        dialect: None,
    })
}

/// A call of a canonical tool (by its name, a catalog alias or another case), seed parameter
/// spellings understood.
fn as_canonical(name: &str, found: &Found, object: &serde_json::Map<String, Value>) -> Result<Translated, ToolError> {
    let (mut params, renamed) = map_params(name, object, |key| match alias(found.name(), key) {
        // A canonical parameter keeps its meaning: only conversions that leave its values be.
        Some(param) if found.has(key) => {
            if widens_in_place(param, key) {
                Lookup::Map(param)
            } else {
                Lookup::Keep
            }
        }
        Some(param) => Lookup::Map(param),
        None => Lookup::Keep,
    })?;
    // A required parameter the call lacks: the value the seed tool of this name that fits the
    // call most closely fixes (`subagents {}` is the minimal Go agent's list, `subagents {task}`
    // GoClaw's run).
    let mut fitting: Vec<&DialectTool> = index()
        .by_name
        .get(&name.to_ascii_lowercase())
        .into_iter()
        .flatten()
        .copied()
        .filter(|t| t.canonical == found.name() && params.keys().all(|k| t.params.iter().any(|p| p.to.contains(k))))
        .collect();
    fitting.sort_by_key(|t| t.params.len());
    for key in found.required() {
        if !params.contains_key(key)
            && let Some(value) = fitting.iter().find_map(|t| t.fixed().get(key))
        {
            params.insert(key.to_owned(), value.clone());
        }
    }
    let called_as = (name != found.name()).then(|| name.to_owned());
    Ok(Translated {
        tool: found.name().to_owned(),
        params: Value::Object(params),
        called_as,
        renamed,
        via: None,
        dialect: None,
    })
}
