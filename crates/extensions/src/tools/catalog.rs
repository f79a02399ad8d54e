//! The catalog of known MCP servers and WASM tools that `tool_search` ranks and `tool_install`
//! installs by name: `catalog/extensions.toml` (embedded), then the user's
//! `$XDG_CONFIG_HOME/toolgate/catalog.toml`, then the workspace's `.toolgate/catalog.toml`; an
//! entry of a later file replaces the one of the same name.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The catalog shipped with toolgate.
const BUILTIN: &str = include_str!("../../catalog/extensions.toml");

/// The workspace's catalog file, relative to the workspace.
pub(crate) const WORKSPACE_FILE: &str = ".toolgate/catalog.toml";

/// What an entry installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum EntryKind {
    /// An MCP server started as a process (`command`, `args`).
    McpStdio,
    /// A remote MCP server (`url`).
    McpHttp,
    /// A WASM component (`path`).
    Wasm,
}

impl EntryKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EntryKind::McpStdio => "mcp-stdio",
            EntryKind::McpHttp => "mcp-http",
            EntryKind::Wasm => "wasm",
        }
    }
}

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub name: String,
    pub description: String,
    pub kind: EntryKind,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    /// Environment variables the server needs.
    #[serde(default)]
    pub env: Vec<String>,
    /// `oauth` or `none`.
    #[serde(default = "no_auth")]
    pub auth: String,
    #[serde(default)]
    pub homepage: Option<String>,
    /// Which file it came from (filled in when loading).
    #[serde(skip)]
    pub origin: String,
}

fn no_auth() -> String {
    "none".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    entry: Vec<Entry>,
}

/// The user's catalog file: `$XDG_CONFIG_HOME/toolgate/catalog.toml`, else
/// `~/.config/toolgate/catalog.toml`.
pub(crate) fn user_file() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|dir| dir.join("toolgate/catalog.toml"))
}

/// The merged catalog for `workspace`, and the problems of files that could not be read (a
/// broken user file costs its own entries only).
pub(crate) fn load(workspace: &Path) -> (Vec<Entry>, Vec<String>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut problems = Vec::new();
    let mut add = |text: &str, origin: &str, problems: &mut Vec<String>| match toml::from_str::<File>(text) {
        Ok(file) => {
            for mut entry in file.entry {
                entry.origin = origin.to_owned();
                match entries.iter().position(|e| e.name == entry.name) {
                    Some(i) => entries[i] = entry,
                    None => entries.push(entry),
                }
            }
        }
        Err(e) => problems.push(format!("the catalog {origin} is not valid: {}", e.to_string().trim())),
    };
    add(BUILTIN, "shipped with toolgate", &mut problems);
    for path in user_file().into_iter().chain([workspace.join(WORKSPACE_FILE)]) {
        match std::fs::read_to_string(&path) {
            Ok(text) => add(&text, &path.display().to_string(), &mut problems),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => problems.push(format!("cannot read the catalog {}: {e}", path.display())),
        }
    }
    (entries, problems)
}

/// The entries matching `query`, best first (BM25 over name, description and what it runs).
pub(crate) fn search<'e>(entries: &'e [Entry], query: &str, limit: usize) -> Vec<(&'e Entry, f64)> {
    let docs: Vec<String> = entries
        .iter()
        .map(|e| {
            // The name counts three times, as in `skill_search`.
            let target = e.command.iter().chain(&e.args).chain(&e.url).cloned().collect::<Vec<_>>().join(" ");
            format!("{0} {0} {0} {1} {2} {3}", e.name.replace('-', " "), e.description, e.kind.as_str(), target)
        })
        .collect();
    let index = toolgate_core::bm25::Bm25::new(docs.iter().map(String::as_str));
    index.search(query, limit).into_iter().filter_map(|(i, score)| entries.get(i).map(|e| (e, score))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalog_parses_and_names_are_unique() {
        let file: File = toml::from_str(BUILTIN).unwrap_or_else(|e| panic!("catalog: {e}"));
        assert!(file.entry.len() >= 15, "{} entries", file.entry.len());
        let mut names: Vec<&str> = file.entry.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), file.entry.len());
        for e in &file.entry {
            assert!(toolgate_mcp::bridge::valid_server_name(&e.name), "{}", e.name);
            match e.kind {
                EntryKind::McpStdio => assert!(e.command.is_some() && e.url.is_none(), "{}", e.name),
                EntryKind::McpHttp => assert!(e.url.is_some() && e.command.is_none(), "{}", e.name),
                EntryKind::Wasm => assert!(e.path.is_some(), "{}", e.name),
            }
            assert!(e.auth == "none" || e.auth == "oauth", "{}", e.name);
        }
    }
}
