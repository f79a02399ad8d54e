//! The `[tools]` section of `toolgate.toml`, as written by people.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The policy configuration: the `[tools]` section of `toolgate.toml`.
///
/// Every list takes tool names (`read`, `exec`, `mcp__github__create_issue`), name wildcards
/// (`mcp__github__*`, `*`), groups (`group:fs`, `group:mcp:github`, or a custom group from
/// [`PolicyConfig::groups`]) and, except in the subagent lists, argument rules such as
/// `exec(cargo test:*)`, `read(secrets/**)` or `web_fetch(domain:example.com)`.
/// See `docs/policy.md` for the precedence of the layers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyConfig {
    /// The base tool set. `None` means [`Profile::Full`]: with no profile configured, every
    /// registered tool is visible and approvals and the sandbox are what protect the setup.
    pub profile: Option<Profile>,
    /// Visibility allow list (intersection): when it names at least one tool, only the tools
    /// it names stay visible. Argument rules here pre-approve matching calls.
    pub allow: Vec<String>,
    /// Additive allow list: re-adds tools the profile or an allow list removed (never one a
    /// deny list or a subagent list removed). Argument rules here pre-approve matching calls.
    pub also_allow: Vec<String>,
    /// Tools hidden whatever else says, and argument rules that deny matching calls.
    pub deny: Vec<String>,
    /// Tools whose every call asks for approval, and argument rules that ask for matching calls.
    pub ask: Vec<String>,
    /// Per-provider layers (`openai`, `anthropic`, or `openai/gpt-5` for one model).
    pub by_provider: BTreeMap<String, ProviderPolicy>,
    /// Per-agent layers, keyed by agent name (`main`, or a sub-agent's name).
    pub agents: BTreeMap<String, AgentPolicy>,
    /// Step 7 of the pipeline ("group allow"): layers for the chat group or channel a
    /// conversation belongs to, keyed by the channel name the gateway passes in [`crate::Caller::channel`].
    pub by_channel: BTreeMap<String, ChannelPolicy>,
    /// What sub-agents lose, and how deep they may nest.
    pub subagents: SubagentPolicy,
    /// Custom tool groups, usable as `group:NAME` in every list: `review = ["read", "grep", "group:web"]`.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// A per-provider layer: `[tools.byProvider.NAME]` (and `[tools.agents.A.byProvider.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderPolicy {
    /// A profile applied on top of the global one (both must include a tool).
    pub profile: Option<Profile>,
    /// Visibility allow list for this provider (intersection), plus pre-approving argument rules.
    pub allow: Vec<String>,
    /// Additive allow list for this provider.
    pub also_allow: Vec<String>,
    /// Deny list for this provider.
    pub deny: Vec<String>,
    /// Ask list for this provider.
    pub ask: Vec<String>,
}

/// A per-agent layer: `[tools.agents.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentPolicy {
    /// Visibility allow list for this agent (intersection), plus pre-approving argument rules.
    pub allow: Vec<String>,
    /// Additive allow list for this agent.
    pub also_allow: Vec<String>,
    /// Deny list for this agent.
    pub deny: Vec<String>,
    /// Ask list for this agent.
    pub ask: Vec<String>,
    /// Per-provider layers for this agent (step 6, "agent + provider allow").
    pub by_provider: BTreeMap<String, ProviderPolicy>,
}

/// A per-channel layer: `[tools.byChannel.NAME]` (step 7, "group allow").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ChannelPolicy {
    /// Visibility allow list for this channel (intersection), plus pre-approving argument rules.
    pub allow: Vec<String>,
    /// Additive allow list for this channel.
    pub also_allow: Vec<String>,
    /// Deny list for this channel.
    pub deny: Vec<String>,
    /// Ask list for this channel.
    pub ask: Vec<String>,
}

/// `[tools.subagents]`: the lists no allow rule can re-open, and the nesting limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SubagentPolicy {
    /// Tools hidden from every sub-agent (depth 1 and deeper). Setting it replaces the default
    /// list [`DEFAULT_SUBAGENT_DENY`].
    pub deny: Vec<String>,
    /// Tools also hidden from sub-agents at the maximum depth (they cannot spawn further).
    /// Setting it replaces the default list [`DEFAULT_LEAF_DENY`].
    pub leaf_deny: Vec<String>,
    /// The deepest sub-agent level (default 1: the main agent's children cannot spawn).
    /// Callers deeper than this see no tools at all.
    pub max_depth: u32,
}

/// Tools no sub-agent sees, from seed 000 §6, widened to every memory tool.
pub const DEFAULT_SUBAGENT_DENY: &[&str] = &[
    "gateway",
    "agents_list",
    "whatsapp_login",
    "session_status",
    "cron",
    "memory_search",
    "memory_get",
    "group:memory",
    "sessions_send",
];

/// Tools a sub-agent at the maximum depth does not see: everything that spawns or steers
/// other sessions (seed 000 §6, plus the `subagents` spelling of its group table).
pub const DEFAULT_LEAF_DENY: &[&str] =
    &["sessions_list", "sessions_history", "sessions_spawn", "spawn", "subagent", "subagents"];

impl Default for SubagentPolicy {
    fn default() -> Self {
        SubagentPolicy {
            deny: DEFAULT_SUBAGENT_DENY.iter().map(|s| (*s).to_owned()).collect(),
            leaf_deny: DEFAULT_LEAF_DENY.iter().map(|s| (*s).to_owned()).collect(),
            max_depth: 1,
        }
    }
}

/// A predefined base tool set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// `session_status` only.
    Minimal,
    /// `group:fs`, `group:runtime`, `group:sessions`, `group:memory`, `image`, and
    /// `group:browser` (beyond the seeds' coding profile: a coding agent checks its own web work
    /// in the browser, which is behind the same URL policy as the web tools).
    Coding,
    /// `group:messaging`, `sessions_list`, `sessions_history`, `sessions_send`, `session_status`.
    Messaging,
    /// Every registered tool (the default when no profile is configured).
    Full,
}

impl Profile {
    /// The entries the profile includes, as they would be written in an allow list.
    pub fn entries(self) -> &'static [&'static str] {
        match self {
            Profile::Minimal => &["session_status"],
            Profile::Coding => {
                &["group:fs", "group:runtime", "group:sessions", "group:memory", "image", "group:browser"]
            }
            Profile::Messaging => {
                &["group:messaging", "sessions_list", "sessions_history", "sessions_send", "session_status"]
            }
            Profile::Full => &["*"],
        }
    }

    /// The config name (`minimal`, `coding`, `messaging`, `full`).
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Minimal => "minimal",
            Profile::Coding => "coding",
            Profile::Messaging => "messaging",
            Profile::Full => "full",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
