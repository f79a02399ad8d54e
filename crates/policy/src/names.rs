//! Tool names, wildcards and groups: what a visibility entry such as `group:fs` matches.

use std::collections::BTreeMap;

use crate::ToolRef;

/// Tool names toolgate knows without a registry: its built-ins and the seed inventory that
/// profiles and the default subagent lists mention. Other names draw a load-time warning.
/// Beyond toolgate's built-in and reserved names (`toolgate_core::RESERVED_NAMES`).
const SEED_TOOLS: &[&str] = &[
    "gateway",
    "subagents",
    "sessions_history",
    "sessions_spawn",
    "session_status",
    "image",
    "tts",
    "browser",
    "canvas",
    "delegate",
    "delegate_search",
    "evaluate_loop",
    "handoff",
    "team_tasks",
    "team_message",
    "skill_search",
    "nodes",
    "agents_list",
    "whatsapp_login",
];

/// Groups that exist without configuration (tools declare them in `ToolSpec::group`).
pub(crate) const BUILTIN_GROUPS: &[&str] = &[
    "fs",
    "runtime",
    "web",
    "memory",
    "sessions",
    "ui",
    "browser",
    "automation",
    "messaging",
    "delegation",
    "teams",
    "toolgate",
    "mcp",
    "extensions",
    "media",
    "nodes",
];

/// The canonical name for `name` (`bash`, `Bash` → `exec`; `Read` → `read`), or `name` itself.
pub(crate) fn canonical(name: &str) -> std::borrow::Cow<'_, str> {
    toolgate_core::canonical_tool_name(name)
}

/// Whether toolgate knows this tool name without a registry.
pub(crate) fn is_known_tool(name: &str) -> bool {
    toolgate_core::RESERVED_NAMES.contains(&name) || SEED_TOOLS.contains(&name)
}

/// Whether `tool` was bridged from an MCP server.
pub(crate) fn is_mcp(tool: ToolRef<'_>) -> bool {
    tool.group == "mcp" || tool.group.starts_with("mcp:") || tool.name.starts_with("mcp__")
}

/// The MCP server a bridged tool came from.
fn mcp_server<'t>(tool: ToolRef<'t>) -> Option<&'t str> {
    if let Some(server) = tool.group.strip_prefix("mcp:") {
        return Some(server);
    }
    let rest = tool.name.strip_prefix("mcp__")?;
    rest.split_once("__").map(|(server, _)| server)
}

/// What one visibility entry matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameMatcher {
    /// `*`: every tool.
    All,
    /// One tool, by canonical name.
    Exact(String),
    /// `prefix*`: every tool whose name starts with the prefix (`mcp__github__*`).
    Prefix(String),
    /// `group:NAME`.
    Group(String),
}

/// Why a name entry is malformed.
pub(crate) fn parse_name(entry: &str) -> Result<NameMatcher, String> {
    let entry = entry.trim();
    if entry.is_empty() {
        return Err("empty entry".to_owned());
    }
    if let Some(group) = entry.strip_prefix("group:") {
        let valid =
            !group.is_empty() && group.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'));
        if !valid {
            return Err("a group name is `group:` followed by letters, digits, `_`, `-`, `.` or `:`".to_owned());
        }
        return Ok(NameMatcher::Group(group.to_owned()));
    }
    if entry == "*" {
        return Ok(NameMatcher::All);
    }
    let (stem, wildcard) = match entry.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (entry, false),
    };
    if !stem.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
        return Err("a tool entry is a tool name (`read`), a name ending in `*` (`mcp__github__*`), `group:NAME`, \
             or an argument rule such as `exec(cargo test:*)`"
            .to_owned());
    }
    Ok(if wildcard { NameMatcher::Prefix(stem.to_owned()) } else { NameMatcher::Exact(canonical(stem).into_owned()) })
}

/// Custom groups from `[tools.groups]`, already checked for cycles.
pub(crate) type Groups = BTreeMap<String, Vec<NameMatcher>>;

impl NameMatcher {
    /// Whether the entry matches `tool`.
    pub(crate) fn matches(&self, tool: ToolRef<'_>, groups: &Groups) -> bool {
        match self {
            NameMatcher::All => true,
            NameMatcher::Exact(name) => name == tool.name,
            NameMatcher::Prefix(prefix) => tool.name.starts_with(prefix.as_str()),
            NameMatcher::Group(group) => group_contains(group, tool, groups),
        }
    }

    /// Whether the entry names a tool or group toolgate cannot know about before a registry
    /// exists (a typo, a tool from a plugin, an MCP tool not loaded yet).
    pub(crate) fn unknown_at_load(&self, groups: &Groups) -> bool {
        match self {
            NameMatcher::All | NameMatcher::Prefix(_) => false,
            NameMatcher::Exact(name) => !is_known_tool(name),
            NameMatcher::Group(group) => {
                !(BUILTIN_GROUPS.contains(&group.as_str()) || group.starts_with("mcp:") || groups.contains_key(group))
            }
        }
    }
}

/// Whether `tool` is a member of `group:NAME`.
pub(crate) fn group_contains(group: &str, tool: ToolRef<'_>, groups: &Groups) -> bool {
    match group {
        "toolgate" => !is_mcp(tool),
        "mcp" => is_mcp(tool),
        // The seeds' `group:ui` (browser, canvas) is toolgate's browser family.
        "ui" if tool.group == "browser" => true,
        _ => {
            if let Some(server) = group.strip_prefix("mcp:") {
                return mcp_server(tool) == Some(server);
            }
            if tool.group == group {
                return true;
            }
            groups.get(group).is_some_and(|members| members.iter().any(|m| m.matches(tool, groups)))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_match() {
        let groups = Groups::new();
        let t = |name, group| ToolRef { name, group };
        let cases: &[(&str, ToolRef<'_>, bool)] = &[
            ("read", t("read", "fs"), true),
            ("Read", t("read", "fs"), true),
            ("bash", t("exec", "runtime"), true),
            ("group:fs", t("read", "fs"), true),
            ("group:fs", t("exec", "runtime"), false),
            ("group:ui", t("browser", "browser"), true),
            ("group:browser", t("browser", "browser"), true),
            ("group:ui", t("read", "fs"), false),
            ("group:toolgate", t("exec", "runtime"), true),
            ("group:toolgate", t("mcp__gh__issue", "mcp:gh"), false),
            ("group:mcp", t("mcp__gh__issue", "mcp:gh"), true),
            ("group:mcp", t("mcp__gh__issue", "custom"), true),
            ("group:mcp:gh", t("mcp__gh__issue", "mcp"), true),
            ("group:mcp:gh", t("mcp__ghx__issue", "mcp"), false),
            ("mcp__gh__*", t("mcp__gh__issue", "mcp:gh"), true),
            ("mcp__gh__*", t("mcp__other__issue", "mcp:other"), false),
            ("*", t("anything", "x"), true),
        ];
        for (entry, tool, expect) in cases {
            let m = parse_name(entry).unwrap();
            assert_eq!(m.matches(*tool, &groups), *expect, "{entry} vs {tool:?}");
        }
        for bad in ["", "group:", "read file", "exec(", "a*b"] {
            assert!(parse_name(bad).is_err(), "{bad}");
        }
    }
}
