//! Tool dialects: each seed system's tool language, spoken by toolgate.
//!
//! A model or agent written for GoClaw, Linggen, the minimal Go agent, OpenClaw or IronClaw
//! calls tools by that system's names and parameters (`Read {path, line_range}`,
//! `process {action: "status", process_id}`). A [`Dialect`] presents that system's tool surface
//! ([`Dialect::present`]) and turns each of its calls into a call of one of toolgate's own
//! (canonical) tools ([`Dialect::translate`]), which then runs through the whole pipeline: policy,
//! approvals and the audit log see the canonical call.
//!
//! The mapping is data, one file per dialect (`dialects/NAME.toml`): tool renames, parameter
//! renames, value conversions from a fixed vocabulary (`convert.rs`). The default dialect,
//! `toolgate`, presents toolgate's own tools and understands every unambiguous spelling of
//! the five as an alias without listing it (`default.rs`).

mod convert;
mod data;
mod default;
mod localize;
mod named;
mod names;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};
use toolgate_core::{ParamProblem, RegisteredTool, Registry, ToolError, ToolSpec};

use convert::Conversion;

/// The dialect names, the default first.
pub const NAMES: [&str; 6] = ["toolgate", "goclaw", "linggen", "gomini", "openclaw", "ironclaw"];

/// The name of the default dialect.
pub const DEFAULT: &str = "toolgate";

const FILES: [&str; 5] = [
    include_str!("../dialects/goclaw.toml"),
    include_str!("../dialects/linggen.toml"),
    include_str!("../dialects/gomini.toml"),
    include_str!("../dialects/openclaw.toml"),
    include_str!("../dialects/ironclaw.toml"),
];

/// An unknown dialect name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dialect `{name}`: use one of {}", NAMES.join(", "))]
pub struct UnknownDialect {
    /// The name given.
    pub name: String,
}

/// One system's tool language.
#[derive(Debug)]
pub struct Dialect {
    name: String,
    system: String,
    seed: String,
    tools: Vec<DialectTool>,
    missing: Vec<(String, String)>,
    gaps: Vec<(String, String)>,
}

/// One tool of a dialect: its name and schema there, and the canonical tool it runs.
#[derive(Debug)]
pub struct DialectTool {
    /// The name in the dialect (`Read`).
    pub name: String,
    /// The toolgate tool that runs it (`read`).
    pub canonical: String,
    /// Where this spelling comes from (a seed section or the system's public documentation).
    pub source: String,
    /// The description the dialect shows.
    pub description: String,
    /// The parameter schema the dialect shows.
    pub schema: Value,
    /// What the seed says about the result, when it says something.
    pub result_note: Option<String>,
    params: Vec<ParamMap>,
    /// Other spellings the system accepts for a parameter: alias -> the dialect parameter.
    aliases: BTreeMap<String, String>,
    set: Map<String, Value>,
    /// Whether the default dialect understands this spelling (`default_alias` in the file).
    default_alias: bool,
}

/// How one dialect parameter becomes canonical parameters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParamMap {
    pub name: String,
    pub to: Vec<String>,
    pub conversion: Conversion,
}

impl DialectTool {
    /// Each dialect parameter and the canonical parameter(s) it fills, with the conversion's
    /// name (`""` for a plain rename), for documentation.
    pub fn param_table(&self) -> Vec<(String, Vec<String>, &'static str)> {
        self.params
            .iter()
            .map(|p| {
                let conversion = match &p.conversion {
                    Conversion::Same => "",
                    Conversion::ZeroBased => "zero_based",
                    Conversion::LineRange => "line_range",
                    Conversion::MsToSeconds => "ms_to_seconds",
                    Conversion::Signal => "signal",
                    Conversion::GlobList => "glob_list",
                    Conversion::Values(_) => "values",
                };
                (p.name.clone(), p.to.clone(), conversion)
            })
            .collect()
    }

    /// The canonical parameters every call carries, when the caller gave none.
    pub fn fixed(&self) -> &Map<String, Value> {
        &self.set
    }

    /// The mapping of a parameter given as `name`: its own, or the one it is an alias of.
    fn param(&self, name: &str) -> Option<&ParamMap> {
        let name = self.aliases.get(name).map_or(name, String::as_str);
        self.params.iter().find(|p| p.name == name)
    }
}

/// A tool of the gate's registry, as a dialect needs to see it.
#[derive(Debug, Clone)]
pub(crate) struct Found(Arc<RegisteredTool>);

impl Found {
    /// The tool `name` resolves to in `registry` (by name, alias or case), if any.
    pub(crate) fn lookup(registry: &Registry, name: &str) -> Option<Found> {
        registry.resolve(name).map(Found)
    }

    /// Its canonical name.
    pub(crate) fn name(&self) -> &str {
        &self.0.tool.spec().name
    }

    /// Whether it takes the parameter `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0
            .tool
            .spec()
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(key))
    }

    /// Its required parameters.
    pub(crate) fn required(&self) -> impl Iterator<Item = &str> {
        self.0
            .tool
            .spec()
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// Whether it is a built-in (dialects present built-ins under their own names; other tools
    /// keep theirs).
    pub(crate) fn builtin(&self) -> bool {
        self.0.builtin
    }
}

/// A call as toolgate runs it, and how to say its errors in the caller's dialect.
#[derive(Debug, Clone)]
pub struct Translated {
    /// The tool to resolve (canonical when the dialect knows it).
    pub tool: String,
    /// The parameters, canonical.
    pub params: Value,
    /// The name the caller used, when it is not the tool's own.
    pub called_as: Option<String>,
    /// Canonical parameter -> the caller's parameter, for errors.
    renamed: Vec<(String, String)>,
    /// The dialect's tool, for what a result says about calling it again.
    via: Option<&'static DialectTool>,
    /// The named dialect, for what a result says about calling its other tools.
    dialect: Option<&'static Dialect>,
}

impl Dialect {
    /// The dialect's name (`linggen`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The system it speaks for (`Linggen`).
    pub fn system(&self) -> &str {
        &self.system
    }

    /// The seed document that describes that system.
    pub fn seed(&self) -> &str {
        &self.seed
    }

    /// Whether this is the default dialect (toolgate's own names).
    pub fn is_default(&self) -> bool {
        self.name == DEFAULT
    }

    /// The tools of the system's inventory that toolgate implements.
    pub fn tools(&self) -> &[DialectTool] {
        &self.tools
    }

    /// The tools of the system's inventory toolgate has no tool for yet: (name, reason).
    pub fn not_implemented(&self) -> &[(String, String)] {
        &self.missing
    }

    /// Where a tool of this dialect does not do quite what the system's does: (tool, note).
    pub fn gaps(&self) -> &[(String, String)] {
        &self.gaps
    }

    /// The tool named `name` in this dialect.
    pub fn tool(&self, name: &str) -> Option<&DialectTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// What the system has and toolgate does not: the tools of the seed's inventory with no
    /// toolgate tool yet, and those whose tool is not registered in `registry` (a family that
    /// is off), each with the reason.
    pub fn missing(&self, registry: &Registry) -> Vec<(String, String)> {
        let mut out = self.missing.clone();
        for tool in &self.tools {
            if Found::lookup(registry, &tool.canonical).is_none_or(|f| f.name() != tool.canonical) {
                out.push((
                    tool.name.clone(),
                    format!("runs toolgate's `{}`, which is not registered in this gate", tool.canonical),
                ));
            }
        }
        out.sort();
        out
    }

    /// The tools a caller of this dialect sees, from the canonical tools it may see
    /// (`visible`, each with whether it is a built-in): a built-in under each dialect name that
    /// runs it, any other tool (MCP, WASM, custom) under its own name, sorted by name. The
    /// default dialect returns `visible` as it is.
    pub fn present(&self, visible: &[(ToolSpec, bool)]) -> Vec<ToolSpec> {
        if self.is_default() {
            return visible.iter().map(|(spec, _)| spec.clone()).collect();
        }
        let mut out: Vec<ToolSpec> = visible.iter().filter(|(_, builtin)| !builtin).map(|(s, _)| s.clone()).collect();
        for tool in &self.tools {
            if let Some((canonical, _)) = visible.iter().find(|(s, builtin)| *builtin && s.name == tool.canonical) {
                let mut spec = ToolSpec::new(tool.name.clone(), tool.description.clone(), tool.schema.clone())
                    .group(canonical.group.clone())
                    .annotations(canonical.annotations);
                spec.output_trust = canonical.output_trust;
                out.push(spec);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The canonical call for `name(params)` in this dialect (`None`: the call as it is), or
    /// an error that names the spelling this dialect expects.
    pub fn translate(
        &'static self,
        name: &str,
        params: &Value,
        registry: &Registry,
    ) -> Result<Option<Translated>, ToolError> {
        if self.is_default() {
            default::translate(name, params, registry)
        } else {
            named::translate(self, name, params, registry)
        }
    }

    /// The dialect names of a canonical tool.
    fn names_of(&self, canonical: &str) -> impl Iterator<Item = &str> {
        self.tools.iter().filter(move |t| t.canonical == canonical).map(|t| t.name.as_str())
    }
}

/// The dialect called `name`.
pub fn dialect(name: &str) -> Result<&'static Dialect, UnknownDialect> {
    // The default needs none of the files (a gate's build asks for it before any call).
    if name == DEFAULT {
        static PLAIN: OnceLock<Dialect> = OnceLock::new();
        return Ok(PLAIN.get_or_init(default_dialect));
    }
    all().iter().find(|d| d.name == name).ok_or_else(|| UnknownDialect { name: name.to_owned() })
}

/// Every dialect, the default first.
pub fn all() -> &'static [Dialect] {
    static ALL: OnceLock<Vec<Dialect>> = OnceLock::new();
    ALL.get_or_init(|| {
        let default = default_dialect();
        // The files are part of the build and a test loads each one: a broken file is a
        // build-time bug, not an input error.
        let mut out = vec![default];
        out.extend(FILES.iter().map(|text| load(text).unwrap_or_else(|e| panic!("a dialect file is invalid: {e}"))));
        out
    })
}

fn default_dialect() -> Dialect {
    Dialect {
        name: DEFAULT.to_owned(),
        system: "toolgate".to_owned(),
        seed: String::new(),
        tools: Vec::new(),
        missing: Vec::new(),
        gaps: Vec::new(),
    }
}

/// Every tool name any dialect uses (listed or missing) and every canonical name a dialect
/// maps onto, for the registry to protect (sorted; read from the files at build time).
pub fn protected_names() -> Vec<String> {
    names::PROTECTED.iter().map(|n| (*n).to_owned()).collect()
}

fn load(text: &str) -> Result<Dialect, String> {
    let file: data::File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut tools = Vec::with_capacity(file.tools.len());
    for entry in file.tools {
        let at = |e: String| format!("{}: tool `{}`: {e}", file.name, entry.name);
        let schema: Value = serde_json::from_str(&entry.schema).map_err(|e| at(format!("schema: {e}")))?;
        let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut params = Vec::with_capacity(entry.params.len());
        for (name, param) in &entry.params {
            let (to, conversion) = param.resolve().map_err(|e| at(format!("parameter `{name}`: {e}")))?;
            if !properties.contains_key(name) {
                return Err(at(format!("parameter `{name}` is mapped but not in the schema")));
            }
            params.push(ParamMap { name: name.clone(), to, conversion });
        }
        if let Some(unmapped) = properties.keys().find(|k| !entry.params.contains_key(*k)) {
            return Err(at(format!("schema property `{unmapped}` has no `params` entry")));
        }
        if let Some((alias, target)) =
            entry.aliases.iter().find(|(a, t)| properties.contains_key(*a) || !properties.contains_key(*t))
        {
            return Err(at(format!(
                "alias `{alias}` -> `{target}`: an alias names a parameter of the schema and is not one"
            )));
        }
        tools.push(DialectTool {
            name: entry.name,
            canonical: entry.canonical,
            source: entry.source,
            description: entry.description,
            schema,
            result_note: entry.result_note,
            params,
            aliases: entry.aliases,
            set: entry.set,
            default_alias: entry.default_alias,
        });
    }
    let missing = file.missing.into_iter().map(|m| (m.name, m.reason)).collect();
    let gaps = file.gaps.into_iter().map(|g| (g.tool, g.note)).collect();
    Ok(Dialect { name: file.name, system: file.system, seed: file.seed, tools, missing, gaps })
}

/// Maps the parameters of `object` through `lookup` (a dialect parameter by name), into a new
/// object: every problem is collected, and two names for one canonical parameter are refused.
fn map_params<'a>(
    tool: &str,
    object: &Map<String, Value>,
    mut lookup: impl FnMut(&str) -> Lookup<'a>,
) -> Result<(Map<String, Value>, Renames), ToolError> {
    let mut out = Map::new();
    let mut from: BTreeMap<String, String> = BTreeMap::new();
    let mut renamed = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in object {
        // `null` is "not given" (OpenAI's strict mode sends every parameter, absent ones as
        // null): not converted, not a second name for a parameter, and a fixed value fills it.
        if value.is_null() {
            continue;
        }
        let (targets, values) = match lookup(key) {
            Lookup::Keep => (vec![key.clone()], Ok(vec![value.clone()])),
            Lookup::Rename(target) => (vec![target], Ok(vec![value.clone()])),
            Lookup::Map(param) => (param.to.clone(), param.conversion.apply(key, value.clone())),
            Lookup::Refuse(message) => {
                problems.push(ParamProblem { pointer: format!("/{key}"), message });
                continue;
            }
        };
        let values = match values {
            Ok(values) => values,
            Err(message) => {
                problems.push(ParamProblem { pointer: format!("/{key}"), message });
                continue;
            }
        };
        for (target, value) in targets.into_iter().zip(values) {
            if let Some(first) = from.get(&target) {
                problems.push(ParamProblem {
                    pointer: format!("/{key}"),
                    message: format!("`{first}` and `{key}` are the same parameter here: give it once"),
                });
                continue;
            }
            if target != *key {
                renamed.push((target.clone(), key.clone()));
            }
            from.insert(target.clone(), key.clone());
            out.insert(target, value);
        }
    }
    if problems.is_empty() {
        Ok((out, renamed))
    } else {
        Err(ToolError::InvalidParams { tool: tool.to_owned(), problems })
    }
}

/// Canonical parameter -> the caller's name for it.
type Renames = Vec<(String, String)>;

/// What to do with one parameter of a call.
enum Lookup<'a> {
    /// Keep it as it is (a canonical parameter, or one the schema will judge).
    Keep,
    /// Pass it on under this name.
    Rename(String),
    /// Map it.
    Map(&'a ParamMap),
    /// Refuse it with this message.
    Refuse(String),
}

/// The parameter object of a call (`null` is none).
fn object_of<'a>(
    tool: &str,
    params: &'a Value,
    empty: &'a Map<String, Value>,
) -> Result<&'a Map<String, Value>, ToolError> {
    match params {
        Value::Null => Ok(empty),
        Value::Object(object) => Ok(object),
        other => Err(ToolError::invalid(
            tool,
            "",
            format!("expected an object of parameters, got {}", convert::brief(other)),
        )),
    }
}

#[cfg(test)]
mod tests;
