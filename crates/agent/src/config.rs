//! `[providers.NAME]`, `[agents.NAME]`, `[[agent_links]]`, `[teams.NAME]` and `[agents_defaults]`.
//!
//! The facade's `Config` holds these as top-level tables; [`AgentsConfig`] gathers them for the
//! [`crate::Runtime`]. Every struct denies unknown keys so a typo is reported where it is.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the runtime needs from configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentsConfig {
    /// Model endpoints by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Agents by name.
    pub agents: BTreeMap<String, AgentConfig>,
    /// Delegation links in their full form.
    pub agent_links: Vec<AgentLink>,
    /// Teams by name.
    pub teams: BTreeMap<String, TeamConfig>,
    /// Settings for every agent (`[agents_defaults]`).
    pub agents_defaults: AgentsDefaults,
}

/// `[agents_defaults]`: settings for every agent of the runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentsDefaults {
    /// The tools a `sessions_spawn` research sub-agent is offered, by exact name (default
    /// [`crate::RESEARCH_TOOLS`]). The ones listed here pass the sub-agent deny list
    /// (`[tools.subagents] deny`) for these sub-agents only, so `memory_search` and `memory_get`
    /// added here reach them (seed 002 §8) and still no other sub-agent.
    pub research_tools: Vec<String>,
    /// Finished sub-agent and delegation tasks leave `subagents list` / `delegate list`, and
    /// idle finished sessions are marked `archived`, after this many minutes (default 60, seed
    /// 000 §6); `sessions_history` still shows them.
    pub archive_after_minutes: u64,
}

impl Default for AgentsDefaults {
    fn default() -> Self {
        AgentsDefaults {
            research_tools: crate::RESEARCH_TOOLS.iter().map(|s| (*s).to_owned()).collect(),
            archive_after_minutes: 60,
        }
    }
}

/// The API a provider speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, llama.cpp, vLLM, Ollama, LM Studio, OpenRouter).
    #[default]
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
}

/// How tool calls travel between the runtime and the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallMode {
    /// The API's own tool calling (`tools`, `tool_calls`).
    #[default]
    Native,
    /// For models too small to emit tool calls reliably: no `tools` are sent; the model answers
    /// with JSON constrained by a schema (`response_format` `json_schema`) naming one tool and
    /// its arguments, or the final answer, so every call it makes is well-formed.
    JsonSchema,
}

/// `[providers.NAME]`: a model endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// `openai` (default) or `anthropic`.
    pub kind: ProviderKind,
    /// The API root: `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`,
    /// `https://api.anthropic.com`.
    pub base_url: String,
    /// The environment variable holding the API key (none: no key is sent).
    pub api_key_env: Option<String>,
    /// Deadline of one request, in seconds (default 120).
    pub timeout_secs: f64,
    /// Retries on 429, 5xx and connection errors, with exponential backoff (default 3).
    pub max_retries: u32,
    /// `native` (default) or `json_schema`.
    pub tool_calls: ToolCallMode,
    /// Stream the reply (server-sent events) instead of waiting for the whole body.
    pub stream: bool,
    /// Most tokens a reply may have (default: the server's; Anthropic requires one: 4096).
    pub max_tokens: Option<u32>,
    /// Sampling temperature (default: the server's).
    pub temperature: Option<f64>,
    /// Prices per million tokens, by model, for the cost of a session.
    pub prices: BTreeMap<String, Price>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            kind: ProviderKind::Openai,
            base_url: String::new(),
            api_key_env: None,
            timeout_secs: 120.0,
            max_retries: 3,
            tool_calls: ToolCallMode::Native,
            stream: false,
            max_tokens: None,
            temperature: None,
            prices: BTreeMap::new(),
        }
    }
}

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Price {
    /// Per million input (prompt) tokens.
    pub input: f64,
    /// Per million output (completion) tokens.
    pub output: f64,
}

/// Whether others may configure an agent's behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentType {
    /// Any agent may spawn it as a sub-agent with its own task.
    #[default]
    Open,
    /// Runs only as configured: reachable by delegation, not spawned as someone's sub-agent.
    Predefined,
}

/// `[agents.NAME]`: an agent. Its tool policy is `[tools.agents.NAME]` (profile, allow, deny).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// What it is for (shown by `agents_list` and to delegating agents).
    pub description: String,
    /// The provider's name (`[providers.NAME]`).
    pub provider: String,
    /// The model name sent to the provider.
    pub model: String,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// A file holding the system prompt, relative to the workspace (instead of `system_prompt`).
    pub system_prompt_file: Option<PathBuf>,
    /// `open` (default) or `predefined`.
    #[serde(rename = "type")]
    pub kind: AgentType,
    /// Model turns before the run stops (default 20).
    pub max_iterations: u32,
    /// Agents this one may delegate to (outbound links; `[[agent_links]]` for more).
    pub links: Vec<String>,
    /// Delegations this agent accepts at once (default 5).
    pub max_delegation_load: u32,
    /// The tools offered to the model: names, `*`, a name prefix ending in `*`, `group:NAME`
    /// (default, like `*`: every tool its policy lets it see).
    pub tools: Vec<String>,
    /// Checks run on the result of every delegation this agent makes (seed 000 §11).
    pub quality_gates: Vec<QualityGate>,
    /// The tool language its model speaks (`docs/dialects.md`; default: `[gate] dialect`).
    pub dialect: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            description: String::new(),
            provider: String::new(),
            model: String::new(),
            system_prompt: None,
            system_prompt_file: None,
            kind: AgentType::Open,
            max_iterations: 20,
            links: Vec::new(),
            max_delegation_load: 5,
            tools: Vec::new(),
            quality_gates: Vec::new(),
            dialect: None,
        }
    }
}

/// When a quality gate runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GateEvent {
    /// A delegation this agent made finished with an answer.
    #[default]
    #[serde(rename = "delegation.completed")]
    DelegationCompleted,
}

/// How a quality gate judges a result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateKind {
    /// A shell command run through the gate's `exec` (sandbox, policy, audit) as the delegating
    /// agent, the result on its standard input: exit 0 passes, its stderr (else stdout) is the
    /// feedback.
    #[default]
    Command,
    /// A reviewer agent: its answer starts with `APPROVED`, or `REJECTED: feedback`.
    Agent,
}

/// `[[agents.NAME.quality_gates]]`: a check of a delegate's result before the delegating agent
/// sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QualityGate {
    /// When it runs (`delegation.completed`, the default and only event).
    pub event: GateEvent,
    /// `command` (default) or `agent`.
    #[serde(rename = "type")]
    pub kind: GateKind,
    /// For `command`: the command line.
    pub command: Option<String>,
    /// For `agent`: the reviewer (an `[agents.NAME]`).
    pub agent: Option<String>,
    /// On failure, run the delegate again with the feedback (up to `max_retries` times) and, if it
    /// still fails, hand the delegating agent an error instead of the result. When false, the
    /// result passes with the feedback attached.
    pub block_on_failure: bool,
    /// Revisions asked for before giving up (default 1).
    pub max_retries: u32,
}

impl Default for QualityGate {
    fn default() -> Self {
        QualityGate {
            event: GateEvent::DelegationCompleted,
            kind: GateKind::Command,
            command: None,
            agent: None,
            block_on_failure: false,
            max_retries: 1,
        }
    }
}

impl QualityGate {
    /// How it is named in messages: its command or reviewer.
    pub fn label(&self) -> String {
        match self.kind {
            GateKind::Command => format!("command `{}`", self.command.as_deref().unwrap_or_default()),
            GateKind::Agent => format!("reviewer `{}`", self.agent.as_deref().unwrap_or_default()),
        }
    }
}

/// `[[agent_links]]`: `from` may delegate to `to` (and back when `bidirectional`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentLink {
    /// The delegating agent.
    pub from: String,
    /// The agent delegated to.
    pub to: String,
    /// `to` may delegate to `from` too.
    pub bidirectional: bool,
    /// Delegations running over this link at once (default 3).
    pub max_concurrent: u32,
    /// Per-user settings: only these users' sessions may use the link (empty: every user).
    pub allow_users: Vec<String>,
    /// Per-user settings: these users' sessions may not use the link (wins over `allow_users`).
    pub deny_users: Vec<String>,
}

impl Default for AgentLink {
    fn default() -> Self {
        AgentLink {
            from: String::new(),
            to: String::new(),
            bidirectional: false,
            max_concurrent: 3,
            allow_users: Vec::new(),
            deny_users: Vec::new(),
        }
    }
}

impl AgentLink {
    /// Whether a session of `user` may use the link.
    pub fn open_to(&self, user: &str) -> bool {
        !self.deny_users.iter().any(|u| u == user)
            && (self.allow_users.is_empty() || self.allow_users.iter().any(|u| u == user))
    }
}

/// `[teams.NAME]`: a lead and its members, sharing a task board and messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeamConfig {
    /// The lead agent.
    pub lead: String,
    /// The member agents.
    pub members: Vec<String>,
    /// Members the runtime runs at once (default 3).
    pub max_active: usize,
    /// Model turns the members' runs and the lead's automatic continuations (runs the team's
    /// results start) may take, together, before the team is stopped (default 200). Counted
    /// from the lead's last action on the team from outside it (not when the board goes idle).
    pub max_turns: u64,
    /// Tokens (in and out) those runs may use, together, before the team is stopped (default
    /// 2,000,000). Counted like `max_turns`.
    pub max_tokens: u64,
    /// How long a claim holds without renewal (default 300 s). The runtime renews the claims of
    /// members it runs; a claim whose holder stopped (crashed) lapses and the task is pending
    /// again.
    pub lease_secs: f64,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            lead: String::new(),
            members: Vec::new(),
            max_active: 3,
            max_turns: 200,
            max_tokens: 2_000_000,
            lease_secs: 300.0,
        }
    }
}

impl TeamConfig {
    /// How long a claim holds without renewal (`lease_secs`, at least 100 ms).
    pub fn lease(&self) -> std::time::Duration {
        let secs = if self.lease_secs.is_finite() { self.lease_secs.clamp(0.1, 1e7) } else { 300.0 };
        std::time::Duration::from_secs_f64(secs)
    }
}

impl AgentsConfig {
    /// The link that lets `from` delegate to `to` in a session of `user`, if any (`links = [...]`
    /// entries count as links open to every user with the default `max_concurrent`). A
    /// `[[agent_links]]` entry for the pair decides alone: one that is closed to `user` is not
    /// reopened by a `links` entry.
    pub fn link(&self, from: &str, to: &str, user: &str) -> Option<AgentLink> {
        if let Some(l) = self
            .agent_links
            .iter()
            .find(|l| (l.from == from && l.to == to) || (l.bidirectional && l.from == to && l.to == from))
        {
            return l.open_to(user).then(|| l.clone());
        }
        let listed = self.agents.get(from).is_some_and(|a| a.links.iter().any(|t| t == to));
        listed.then(|| AgentLink { from: from.to_owned(), to: to.to_owned(), ..AgentLink::default() })
    }

    /// Every agent `from` may delegate to in a session of `user`, sorted.
    pub fn targets(&self, from: &str, user: &str) -> Vec<String> {
        self.agents.keys().filter(|to| self.link(from, to, user).is_some()).cloned().collect()
    }

    /// Problems a person must fix: agents naming missing providers, links naming missing agents.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, a) in &self.agents {
            if !self.providers.contains_key(&a.provider) {
                out.push(format!("[agents.{name}] provider `{}` is not a [providers.NAME]", a.provider));
            }
            if a.model.is_empty() {
                out.push(format!("[agents.{name}] has no `model`"));
            }
            for to in &a.links {
                if !self.agents.contains_key(to) {
                    out.push(format!("[agents.{name}] links to `{to}`, which is not an agent"));
                }
            }
            for (i, g) in a.quality_gates.iter().enumerate() {
                match (g.kind, &g.command, &g.agent) {
                    (GateKind::Command, Some(c), _) if !c.trim().is_empty() => {}
                    (GateKind::Command, ..) => {
                        out.push(format!("[agents.{name}] quality gate {i}: type `command` needs a `command`"));
                    }
                    (GateKind::Agent, _, Some(r)) if self.agents.contains_key(r) => {}
                    (GateKind::Agent, ..) => {
                        out.push(format!(
                            "[agents.{name}] quality gate {i}: type `agent` needs an `agent` that is an [agents.NAME]"
                        ));
                    }
                }
            }
        }
        for l in &self.agent_links {
            for end in [&l.from, &l.to] {
                if !self.agents.contains_key(end) {
                    out.push(format!("[[agent_links]] names `{end}`, which is not an agent"));
                }
            }
        }
        for (name, t) in &self.teams {
            for m in std::iter::once(&t.lead).chain(&t.members) {
                if !self.agents.contains_key(m) {
                    out.push(format!("[teams.{name}] names `{m}`, which is not an agent"));
                }
            }
            if t.max_active == 0 {
                out.push(format!("[teams.{name}] max_active is 0: no member would ever run (the default is 3)"));
            }
            if !(t.lease_secs.is_finite() && t.lease_secs >= 0.1) {
                out.push(format!("[teams.{name}] lease_secs must be at least 0.1 (the default is 300)"));
            }
        }
        for (name, p) in &self.providers {
            if p.base_url.is_empty() {
                out.push(format!("[providers.{name}] has no `base_url`"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_both_forms() {
        let mut cfg = AgentsConfig::default();
        for n in ["a", "b", "c"] {
            cfg.agents.insert(n.into(), AgentConfig::default());
        }
        if let Some(a) = cfg.agents.get_mut("a") {
            a.links = vec!["b".into()];
        }
        cfg.agent_links.push(AgentLink {
            from: "c".into(),
            to: "a".into(),
            bidirectional: true,
            max_concurrent: 1,
            ..AgentLink::default()
        });
        assert!(cfg.link("a", "b", "u").is_some());
        assert!(cfg.link("b", "a", "u").is_none(), "links are outbound");
        assert_eq!(cfg.link("a", "c", "u").map(|l| l.max_concurrent), Some(1), "bidirectional");
        assert_eq!(cfg.targets("a", "u"), vec!["b".to_owned(), "c".to_owned()]);
    }

    #[test]
    fn per_user_link_settings() {
        let mut cfg = AgentsConfig::default();
        for n in ["a", "b"] {
            cfg.agents.insert(n.into(), AgentConfig::default());
        }
        if let Some(a) = cfg.agents.get_mut("a") {
            a.links = vec!["b".into()];
        }
        cfg.agent_links.push(AgentLink {
            from: "a".into(),
            to: "b".into(),
            allow_users: vec!["alice".into(), "bob".into()],
            deny_users: vec!["bob".into()],
            ..AgentLink::default()
        });
        assert!(cfg.link("a", "b", "alice").is_some());
        assert!(cfg.link("a", "b", "bob").is_none(), "deny wins over allow");
        assert!(cfg.link("a", "b", "carol").is_none(), "not allowed, and `links` does not reopen it");
        assert!(cfg.targets("a", "carol").is_empty());
    }
}
