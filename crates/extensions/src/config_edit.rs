//! Editing a config file in place: `toolgate mcp add|remove` and the extension tools
//! (`tool_install`, `tool_remove`, `tool_activate`) change `toolgate.toml` with `toml_edit`, so
//! the user's comments and layout survive.
//!
//! Every write is checked and atomic: the new text must still load as a configuration layer
//! (the check is the caller's: `toolgate::config::Config::check_layer`, which this crate cannot
//! name), then it goes to a temporary file beside the old one, is synced and renamed over it. A
//! file that does not parse is never rewritten.

use std::io::Write;
use std::path::{Path, PathBuf};

use toolgate_mcp::bridge::ServerConfig;

/// Checks a whole file's text as one configuration layer; the error is the parser's message.
pub type LayerCheck<'a> = &'a dyn Fn(&str) -> Result<(), String>;

/// Why a config file could not be edited. The old file is intact in every case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigEditError {
    /// The file could not be read or written.
    #[error("cannot {doing} {}: {source}", path.display())]
    Io {
        /// What was being done.
        doing: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The existing file is not valid TOML: it is left as it is.
    #[error("{} is not valid TOML, so it was left untouched (fix it first): {message}", path.display())]
    Broken {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The edit would make the file an invalid configuration: nothing was written.
    #[error("the change would make {} invalid, so nothing was written: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What would be wrong.
        message: String,
    },
    /// A key that must be a table is something else.
    #[error("`{key}` in {} is not a table", path.display())]
    NotTable {
        /// The dotted key.
        key: String,
        /// The file.
        path: PathBuf,
    },
}

/// Reads `path` as an editable TOML document (an empty one when it does not exist).
pub fn read_document(path: &Path) -> Result<toml_edit::DocumentMut, ConfigEditError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(ConfigEditError::Io { doing: "read", path: path.to_owned(), source }),
    };
    text.parse().map_err(|e: toml_edit::TomlError| ConfigEditError::Broken {
        path: path.to_owned(),
        message: e.to_string().trim().to_owned(),
    })
}

/// `[mcp.servers]` of `doc`, created when missing (as implicit tables, so only
/// `[mcp.servers.NAME]` headers appear).
pub fn servers_table<'d>(
    doc: &'d mut toml_edit::DocumentMut,
    path: &Path,
) -> Result<&'d mut toml_edit::Table, ConfigEditError> {
    let not_table = |key: &str| ConfigEditError::NotTable { key: key.to_owned(), path: path.to_owned() };
    let mcp = doc.entry("mcp").or_insert_with(implicit_table).as_table_mut().ok_or_else(|| not_table("mcp"))?;
    mcp.entry("servers").or_insert_with(implicit_table).as_table_mut().ok_or_else(|| not_table("mcp.servers"))
}

/// Removes `[mcp.servers.NAME]`; whether it was there. Leaves no empty `[mcp.servers]` /
/// `[mcp]` headers behind.
pub fn remove_server(doc: &mut toml_edit::DocumentMut, path: &Path, name: &str) -> Result<bool, ConfigEditError> {
    let removed = servers_table(doc, path)?.remove(name).is_some();
    if let Some(mcp) = doc.get_mut("mcp").and_then(|m| m.as_table_like_mut()) {
        if mcp.get("servers").and_then(|s| s.as_table_like()).is_some_and(|s| s.is_empty()) {
            mcp.remove("servers");
        }
        if mcp.is_empty() {
            doc.remove("mcp");
        }
    }
    Ok(removed)
}

fn implicit_table() -> toml_edit::Item {
    let mut table = toml_edit::Table::new();
    table.set_implicit(true);
    toml_edit::Item::Table(table)
}

/// `server` as a TOML table, through serde so the keys are exactly the config's. Keys that only
/// repeat a default are left out, and sub-tables (`env`, `headers`, `tools`, `sandbox`) are
/// written inline (without their default keys),
/// so the entry stays one block under its `[mcp.servers.NAME]` header.
pub fn server_table(server: &ServerConfig) -> Result<toml_edit::Table, String> {
    let toml::Value::Table(fields) =
        toml::Value::try_from(server).map_err(|e| format!("cannot write the server entry as TOML: {e}"))?
    else {
        return Err("the server entry is not a table".to_owned());
    };
    let defaults = match toml::Value::try_from(ServerConfig::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    };
    // The order of `ServerConfig`'s fields, not the alphabet: `command` before `args`.
    const ORDER: [&str; 13] = [
        "enabled",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "transport",
        "headers",
        "oauth",
        "tools",
        "prefix",
        "timeout_secs",
        "sandbox",
    ];
    let mut fields: Vec<(String, toml::Value)> = fields.into_iter().collect();
    fields.sort_by_key(|(key, _)| ORDER.iter().position(|k| k == key).unwrap_or(ORDER.len()));
    let mut table = toml_edit::Table::new();
    for (key, value) in fields {
        if defaults.get(&key) == Some(&value) {
            continue;
        }
        let value = match value {
            toml::Value::Table(sub) => {
                let default_sub = defaults.get(&key).and_then(toml::Value::as_table);
                let sub: toml::Table = sub
                    .into_iter()
                    .filter(|(k, v)| !is_empty(v) && default_sub.and_then(|d| d.get(k)) != Some(v))
                    .collect();
                if sub.is_empty() {
                    continue;
                }
                toml::Value::Table(sub)
            }
            other => other,
        };
        // `Value`'s display is inline TOML; re-parse it as a `toml_edit` value.
        let parsed: toml_edit::Value =
            value.to_string().parse().map_err(|e| format!("cannot re-read the server entry: {e}"))?;
        table.insert(&key, toml_edit::value(parsed));
    }
    Ok(table)
}

fn is_empty(value: &toml::Value) -> bool {
    match value {
        toml::Value::Array(a) => a.is_empty(),
        toml::Value::Table(t) => t.is_empty(),
        _ => false,
    }
}

/// Checks with `check` that `doc` loads as a configuration layer on its own: known keys, right
/// types. (An MCP server entry may be completed by another layer, so whether each is whole is
/// checked by the caller, for the entry it writes.)
pub fn check_document(doc: &toml_edit::DocumentMut, path: &Path, check: LayerCheck<'_>) -> Result<(), ConfigEditError> {
    check(&doc.to_string()).map_err(|message| ConfigEditError::Invalid { path: path.to_owned(), message })
}

/// [`check_document`], then writes `doc` to `path` atomically: a temporary file beside it,
/// fsync, rename (the old file's permissions kept).
pub fn write_document(path: &Path, doc: &toml_edit::DocumentMut, check: LayerCheck<'_>) -> Result<(), ConfigEditError> {
    check_document(doc, path, check)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fn io(doing: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ConfigEditError {
        let path = path.to_owned();
        move |source| ConfigEditError::Io { doing, path, source }
    }
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io("write in", dir))?;
    let mut text = doc.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    tmp.write_all(text.as_bytes()).and_then(|()| tmp.as_file().sync_all()).map_err(io("write", tmp.path()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Keep the old file's permissions (a config with headers may be private).
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| ConfigEditError::Io { doing: "replace", path: path.to_owned(), source: e.error })?;
    Ok(())
}
