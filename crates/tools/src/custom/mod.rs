//! Custom tools: shell-command templates that users define without writing Rust.
//!
//! A [`CustomToolDef`] (from `[[tools.custom]]` in `toolgate.toml`, from the store through
//! `toolgate tools add --file def.json`, or from a skill's front matter) names a tool, describes
//! its parameters with a JSON Schema, and gives a `command` template such as
//! `pdftotext -layout {{.file}} -`. [`CustomToolDef::validate`] checks it once, when it is
//! loaded: every placeholder must name a declared parameter and stand where the shell reads it
//! as one word (see [`Template`]). Each call then:
//!
//! 1. renders the template in one pass, each value one single-quoted word;
//! 2. analyzes the rendered line with the same classifier as `exec`
//!    ([`toolgate_guard::shell::analyze`]): blocked commands are refused, dangerous ones ask
//!    every time, policy argument rules see the unwrapped argvs;
//! 3. runs `bash -c LINE` through the same sandboxed runner as `exec`, with the definition's
//!    timeout (default 60 s), working directory and environment. Environment values are names
//!    of secrets, looked up through a [`SecretSource`] (the encrypted store) at call time and
//!    never shown.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use toolgate_tools::custom::{CustomToolDef, NoSecrets, tools};
//! use toolgate_tools::runtime::{ProcessRunner, RuntimeConfig};
//!
//! let def: CustomToolDef = serde_json::from_value(serde_json::json!({
//!     "name": "count_lines",
//!     "description": "Count the lines of a file.",
//!     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
//!     "command": "wc -l -- {{.path}}"
//! })).unwrap();
//! let runner = ProcessRunner::new(RuntimeConfig::default()).unwrap();
//! let built = tools(vec![def], &runner, Arc::new(NoSecrets)).unwrap();
//! assert_eq!(built[0].spec().name, "count_lines");
//! ```

mod template;
mod tool;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::Tool;

pub use template::{MAX_RENDERED_BYTES, MAX_TEMPLATE_BYTES, Template, TemplateError};
pub use tool::CustomTool;

use crate::runtime::ProcessRunner;

/// Default deadline of a custom tool's command, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// Longest description accepted, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// One user-defined tool, as written in `[[tools.custom]]`, a `def.json` or a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomToolDef {
    /// The tool's name: 1 to 64 of `a-z`, `A-Z`, `0-9`, `_`, `-`; not a built-in's, no `__`.
    pub name: String,
    /// What the tool does, for the model choosing a tool (at most 1,024 characters).
    pub description: String,
    /// JSON Schema of the parameters (an object schema; JSON text is accepted too). Every
    /// placeholder must be one of its `properties`, of a scalar type.
    #[serde(default = "empty_schema", deserialize_with = "schema_or_text")]
    pub parameters: Value,
    /// The command template, run with `bash -c` after rendering: `{{.key}}` or `{{key}}`.
    pub command: String,
    /// Deadline of the command, in seconds (default 60).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Working directory, relative to the workspace (default: its root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// Environment variables: variable name → name of a secret in the encrypted store
    /// (`toolgate tools secret NAME`). The values are never shown.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Only this agent sees and calls the tool (default: every agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Whether the tool is registered (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

fn yes() -> bool {
    true
}

/// Accepts the schema as a table/object or as JSON text.
fn schema_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    match Value::deserialize(d)? {
        Value::String(text) => serde_json::from_str(&text)
            .map_err(|e| serde::de::Error::custom(format!("`parameters` is text but not JSON: {e}"))),
        other => Ok(other),
    }
}

/// Why a custom tool definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CustomError {
    /// A field is wrong; `message` says how to fix it.
    #[error("custom tool `{tool}`: `{field}` {message}")]
    Invalid {
        /// The tool's name as given.
        tool: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl CustomToolDef {
    /// Checks every field and parses the template. Run when the definition is loaded, so a bad
    /// definition never becomes a tool.
    pub fn validate(&self) -> Result<Template, CustomError> {
        let bad = |field: &str, message: String| CustomError::Invalid {
            tool: self.name.chars().take(64).collect(),
            field: field.to_owned(),
            message,
        };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && !self.name.contains("__");
        if !name_ok {
            return Err(bad("name", "must be 1 to 64 of a-z, A-Z, 0-9, `_`, `-`, without `__`".into()));
        }
        let chars = self.description.chars().count();
        if self.description.trim().is_empty() || chars > MAX_DESCRIPTION_CHARS {
            return Err(bad(
                "description",
                format!("must say what the tool does in 1 to {MAX_DESCRIPTION_CHARS} characters (got {chars})"),
            ));
        }
        let Some(schema) = self.parameters.as_object() else {
            return Err(bad("parameters", "must be a JSON Schema object (`{\"type\": \"object\", ...}`)".into()));
        };
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(bad("parameters", "must have `\"type\": \"object\"` at its root".into()));
        }
        let empty = serde_json::Map::new();
        let properties = match schema.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(bad("parameters", "`properties` must be an object".into())),
        };
        let template = Template::parse(&self.command).map_err(|e| bad("command", e.to_string()))?;
        for key in template.params() {
            let Some(prop) = properties.get(key) else {
                let known: Vec<&str> = properties.keys().map(String::as_str).collect();
                return Err(bad(
                    "command",
                    format!(
                        "uses `{{{{{key}}}}}`, which is not a declared parameter (declared: {}); add it to \
                         `parameters.properties` or fix the name",
                        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                    ),
                ));
            };
            let scalar = |t: &str| matches!(t, "string" | "integer" | "number" | "boolean" | "null");
            let type_ok = match prop.get("type") {
                None => true,
                Some(Value::String(t)) => scalar(t),
                Some(Value::Array(ts)) => ts.iter().all(|t| t.as_str().is_some_and(scalar)),
                Some(_) => false,
            };
            if !type_ok {
                return Err(bad(
                    &format!("parameters.properties.{key}"),
                    "is used in the command, so it must be a string, integer, number or boolean (one argument)".into(),
                ));
            }
        }
        if self.timeout_seconds == 0 || self.timeout_seconds > 3600 {
            return Err(bad("timeout_seconds", format!("must be between 1 and 3600 (got {})", self.timeout_seconds)));
        }
        if let Some(w) = &self.workdir
            && (w.starts_with('/') || w.split('/').any(|c| c == ".."))
        {
            return Err(bad("workdir", format!("`{w}` must be a folder inside the workspace, relative to its root")));
        }
        for (var, secret) in &self.env {
            let var_ok = var.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !var_ok {
                return Err(bad(&format!("env.{var}"), "variable names are letters, digits and `_`".into()));
            }
            if !valid_secret_name(secret) {
                return Err(bad(
                    &format!("env.{var}"),
                    "must be the name of a secret (1 to 128 of a-z, A-Z, 0-9, `_`, `-`, `.`), stored with \
                     `toolgate tools secret NAME`; values are never written in definitions"
                        .into(),
                ));
            }
        }
        if let Some(agent) = &self.agent
            && agent.trim().is_empty()
        {
            return Err(bad("agent", "is empty; name an agent or leave it out for every agent".into()));
        }
        Ok(template)
    }
}

/// Whether `name` can name a secret.
pub fn valid_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Where custom tools' environment values come from: the encrypted secrets store, in the gate.
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// The value of the secret `name`, `Ok(None)` when there is none.
    fn secret(&self, name: &str) -> Result<Option<String>, String>;
}

/// A [`SecretSource`] with no secrets (definitions without `env`, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

impl SecretSource for NoSecrets {
    fn secret(&self, _name: &str) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// Builds a tool for each definition (validated first), running on `runner` (the gate's
/// process runner: its sandbox, output caps, timeout limits and process table). The group is
/// `custom`.
pub fn tools(
    defs: Vec<CustomToolDef>,
    runner: &ProcessRunner,
    secrets: Arc<dyn SecretSource>,
) -> Result<Vec<Arc<dyn Tool>>, CustomError> {
    tools_in_group(defs, "custom", runner, secrets)
}

/// [`tools`] with another group name (a skill's tools are in `skill:NAME`).
pub fn tools_in_group(
    defs: Vec<CustomToolDef>,
    group: &str,
    runner: &ProcessRunner,
    secrets: Arc<dyn SecretSource>,
) -> Result<Vec<Arc<dyn Tool>>, CustomError> {
    let runtime = &runner.0;
    let mut out: Vec<Arc<dyn Tool>> = Vec::with_capacity(defs.len());
    for def in defs {
        let template = def.validate()?;
        if def.timeout_seconds > runtime.config.max_timeout_secs {
            return Err(CustomError::Invalid {
                tool: def.name.clone(),
                field: "timeout_seconds".into(),
                message: format!(
                    "{} is more than [runtime] max_timeout_secs ({})",
                    def.timeout_seconds, runtime.config.max_timeout_secs
                ),
            });
        }
        out.push(Arc::new(CustomTool::new(def, template, group, Arc::clone(runtime), Arc::clone(&secrets))));
    }
    Ok(out)
}
