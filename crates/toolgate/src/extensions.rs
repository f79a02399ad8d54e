//! Extensions the user adds without writing Rust: custom shell-template tools from
//! `[[tools.custom]]` and from the store (`toolgate tools add --file def.json`), with their
//! environment values in the encrypted secrets store. See `docs/extensions.md`.

use std::sync::Arc;

use toolgate_core::Tool;
use toolgate_store::{CustomToolStore, SecretStore, Stores};
use toolgate_tools::custom::{self, CustomToolDef, SecretSource};
use toolgate_tools::runtime::ProcessRunner;

use crate::config::Config;

/// Touched (workspace-relative) whenever the store's custom tools change, so that a running
/// `toolgate serve` reloads them.
pub const CUSTOM_TOOLS_STAMP: &str = ".toolgate/custom-tools.changed";

/// Tells a running `toolgate serve` over `workspace` that the stored custom tools changed.
pub fn announce_custom_tools_changed(workspace: &std::path::Path) -> std::io::Result<()> {
    std::fs::write(workspace.join(CUSTOM_TOOLS_STAMP), b"")
}

/// The prefix of custom tools' secrets in the store (MCP tokens use another).
pub const SECRET_PREFIX: &str = "custom/";

/// Custom tools' environment values, from the store's encrypted secrets.
#[derive(Debug)]
pub struct StoreSecrets(pub Arc<dyn SecretStore>);

impl SecretSource for StoreSecrets {
    fn secret(&self, name: &str) -> Result<Option<String>, String> {
        let value = self.0.secret_get(&format!("{SECRET_PREFIX}{name}")).map_err(|e| e.to_string())?;
        value.map(|v| String::from_utf8(v).map_err(|_| format!("the secret `{name}` is not UTF-8 text"))).transpose()
    }
}

/// Why a custom tool could not be loaded or added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    /// A definition is invalid.
    #[error(transparent)]
    Custom(#[from] custom::CustomError),
    /// A stored definition is not valid JSON for a definition.
    #[error("the custom tool `{name}` {origin} is not a valid definition: {message}")]
    Parse {
        /// The tool.
        name: String,
        /// Where it came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// Two definitions have the same name.
    #[error("two custom tools are named `{0}`; names must be unique across `[[tools.custom]]` and the store")]
    Duplicate(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] toolgate_store::StoreError),
}

/// Every enabled custom definition for this configuration's agent: `[[tools.custom]]` first,
/// then the store's. A stored definition that no longer validates is skipped with a warning
/// (the file wins over the store on a name clash is refused instead: both are the user's).
pub fn custom_defs(config: &Config, store: Option<&dyn CustomToolStore>) -> Result<Vec<CustomToolDef>, ExtensionError> {
    let mut defs: Vec<CustomToolDef> = config.tools.custom.clone();
    if let Some(store) = store {
        for stored in store.custom_tools()? {
            match serde_json::from_str::<CustomToolDef>(&stored.definition) {
                Ok(def) => defs.push(def),
                Err(e) => tracing::warn!("skipping the stored custom tool `{}`: {e}", stored.name),
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for def in &defs {
        if !seen.insert(def.name.as_str()) {
            return Err(ExtensionError::Duplicate(def.name.clone()));
        }
    }
    let agent = &config.identity.agent;
    defs.retain(|d| d.enabled && d.agent.as_ref().is_none_or(|a| a == agent));
    Ok(defs)
}

/// The custom tools to register in a gate.
pub(crate) fn custom_tools(
    workspace: &std::path::Path,
    config: &Config,
    stores: Option<&Stores>,
    runner: &ProcessRunner,
) -> Result<Vec<Arc<dyn Tool>>, ExtensionError> {
    let defs = custom_defs(config, stores.map(|s| &*s.custom_tools))?;
    let secrets: Arc<dyn SecretSource> = match stores {
        Some(s) => Arc::new(StoreSecrets(Arc::clone(&s.secrets))),
        None => Arc::new(custom::NoSecrets),
    };
    let mut tools = custom::tools(defs, runner, Arc::clone(&secrets))?;
    tools.extend(skill_tools(workspace, runner, secrets)?);
    Ok(tools)
}

/// The tools skills declare in their front matter, in group `skill:NAME`, running in the
/// skill's folder when it is inside the workspace. Registered after the built-ins.
fn skill_tools(
    workspace: &std::path::Path,
    runner: &ProcessRunner,
    secrets: Arc<dyn SecretSource>,
) -> Result<Vec<Arc<dyn Tool>>, ExtensionError> {
    use toolgate_tools::skills;
    let (found, warnings) = skills::discover(workspace, skills::user_dir().as_deref());
    for w in warnings {
        tracing::warn!("skills: {w}");
    }
    let mut out = Vec::new();
    for skill in found.into_iter().filter(|s| !s.tools.is_empty()) {
        let rel = skill.dir.strip_prefix(workspace).ok().map(|p| p.to_string_lossy().into_owned());
        let defs: Vec<CustomToolDef> = skill
            .tools
            .iter()
            .cloned()
            .map(|mut d| {
                if d.workdir.is_none() {
                    d.workdir.clone_from(&rel);
                }
                d
            })
            .collect();
        let group = format!("skill:{}", skill.name);
        out.extend(custom::tools_in_group(defs, &group, runner, Arc::clone(&secrets))?);
    }
    Ok(out)
}

/// Parses and validates a definition (JSON text) and stores it; returns it.
pub fn add_custom_tool(store: &dyn CustomToolStore, json: &str) -> Result<CustomToolDef, ExtensionError> {
    let def: CustomToolDef = serde_json::from_str(json).map_err(|e| ExtensionError::Parse {
        name: String::new(),
        origin: "in the file".into(),
        message: e.to_string(),
    })?;
    def.validate()?;
    let text = serde_json::to_string(&def).map_err(|e| ExtensionError::Parse {
        name: def.name.clone(),
        origin: "being stored".into(),
        message: e.to_string(),
    })?;
    store.custom_tool_put(&def.name, &text)?;
    Ok(def)
}
