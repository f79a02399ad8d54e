//! The dialect files (`dialects/NAME.toml`) as they are written: parsed and checked once.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::convert::Conversion;

/// One dialect file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pub name: String,
    pub system: String,
    pub seed: String,
    #[serde(default)]
    pub tools: Vec<ToolEntry>,
    #[serde(default)]
    pub missing: Vec<Missing>,
    /// Where toolgate's tool does not do quite what the system's does.
    #[serde(default)]
    pub gaps: Vec<Gap>,
}

/// One difference between the system's tool and toolgate's, for the documentation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Gap {
    pub tool: String,
    pub note: String,
}

/// One tool of the seed's inventory that toolgate implements.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolEntry {
    pub name: String,
    pub canonical: String,
    pub source: String,
    pub description: String,
    /// The parameter schema as the dialect presents it, as JSON text.
    pub schema: String,
    #[serde(default)]
    pub params: BTreeMap<String, ParamEntry>,
    /// Other spellings of a parameter the system documents (`file` for `path`): accepted, not listed.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// Canonical parameters every call of this tool carries (when the caller gave none).
    #[serde(default)]
    pub set: Map<String, Value>,
    /// What the seed says about the result's shape.
    #[serde(default)]
    pub result_note: Option<String>,
    /// Whether the default dialect understands this spelling as an alias (default true);
    /// false where the name is also toolgate's own tool and means something broader there
    /// (GoClaw's and OpenClaw's `sessions_spawn`, a background sub-agent with every tool).
    #[serde(default = "yes")]
    pub default_alias: bool,
}

fn yes() -> bool {
    true
}

/// A tool of the seed's inventory that toolgate does not implement yet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Missing {
    pub name: String,
    pub reason: String,
}

/// How one dialect parameter becomes canonical parameters.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ParamEntry {
    /// A plain rename (or the same name).
    Rename(String),
    /// A rename with a conversion of the value.
    Convert {
        to: Targets,
        #[serde(default)]
        convert: Option<String>,
        #[serde(default)]
        values: BTreeMap<String, String>,
    },
}

/// One canonical parameter, or several (a `line_range` becomes `offset` and `limit`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Targets {
    One(String),
    Many(Vec<String>),
}

impl ParamEntry {
    /// The canonical parameter names and the conversion, checked.
    pub fn resolve(&self) -> Result<(Vec<String>, Conversion), String> {
        match self {
            ParamEntry::Rename(to) => Ok((vec![to.clone()], Conversion::Same)),
            ParamEntry::Convert { to, convert, values } => {
                let to = match to {
                    Targets::One(t) => vec![t.clone()],
                    Targets::Many(t) => t.clone(),
                };
                let conversion = Conversion::parse(convert.as_deref(), values)?;
                if to.len() != conversion.targets() {
                    return Err(format!(
                        "conversion `{}` fills {} parameter(s), `to` names {}",
                        convert.as_deref().unwrap_or("(none)"),
                        conversion.targets(),
                        to.len()
                    ));
                }
                Ok((to, conversion))
            }
        }
    }
}
