//! Who is asking about which tool.

use std::collections::BTreeSet;

/// What policy needs to know about a tool: its name and its group (from `ToolSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolRef<'a> {
    /// The canonical tool name (`exec`, not `bash`).
    pub name: &'a str,
    /// The tool's group (`fs`, `runtime`, `mcp:github`, ...).
    pub group: &'a str,
}

impl<'a> ToolRef<'a> {
    /// A tool reference.
    pub fn new(name: &'a str, group: &'a str) -> Self {
        ToolRef { name, group }
    }
}

impl<'a> From<&'a toolgate_core::ToolSpec> for ToolRef<'a> {
    fn from(spec: &'a toolgate_core::ToolSpec) -> Self {
        ToolRef { name: &spec.name, group: &spec.group }
    }
}

/// Who is asking: the agent, its provider and channel, its sub-agent depth and its parent.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The agent's name (`main` for the top-level agent).
    pub agent: &'a str,
    /// The model provider (`openai`, `anthropic/claude-sonnet-4`), when known.
    pub provider: Option<&'a str>,
    /// The chat group or channel the conversation is in, for `[tools.byChannel.NAME]`.
    pub channel: Option<&'a str>,
    /// 0 for the main agent, 1 for its sub-agents, and so on.
    pub depth: u32,
    /// The parent of a sub-agent: its effective policy is intersected with the parent's.
    pub parent: Option<Parent<'a>>,
    /// Tool names the sub-agent deny list does not remove for this caller (a `sessions_spawn`
    /// research sub-agent's configured set); the leaf deny list and every other rule still apply.
    pub subagent_deny_exempt: &'a [String],
}

/// What a sub-agent's parent may do; the sub-agent never gets more.
#[derive(Debug, Clone, Copy)]
pub enum Parent<'a> {
    /// The parent is evaluated with the same policy (visibility and argument rules).
    Caller(&'a Caller<'a>),
    /// The parent's visible tool names, when the parent was narrowed some other way (a spawn
    /// call that named the child's tools). Only visibility is intersected.
    Tools(&'a BTreeSet<String>),
}

impl<'a> Caller<'a> {
    /// The main agent (`main`), no provider, depth 0.
    pub fn main() -> Self {
        Caller::agent("main")
    }

    /// A top-level agent with this name.
    pub fn agent(agent: &'a str) -> Self {
        Caller { agent, provider: None, channel: None, depth: 0, parent: None, subagent_deny_exempt: &[] }
    }

    /// A sub-agent of `parent`: one level deeper, same provider and channel.
    pub fn subagent(agent: &'a str, parent: &'a Caller<'a>) -> Self {
        Caller {
            agent,
            provider: parent.provider,
            channel: parent.channel,
            depth: parent.depth + 1,
            parent: Some(Parent::Caller(parent)),
            subagent_deny_exempt: &[],
        }
    }

    /// Sets the provider.
    pub fn with_provider(mut self, provider: &'a str) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Sets the channel.
    pub fn with_channel(mut self, channel: &'a str) -> Self {
        self.channel = Some(channel);
        self
    }

    /// Sets the depth.
    pub fn with_depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Sets the tools the sub-agent deny list lets through for this caller.
    pub fn with_subagent_deny_exempt(mut self, tools: &'a [String]) -> Self {
        self.subagent_deny_exempt = tools;
        self
    }

    /// Sets the parent.
    pub fn with_parent(mut self, parent: Parent<'a>) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Runs `f` with the last of a chain of agents, each a sub-agent of the one before:
    /// `["main", "researcher"]` is `researcher` at depth 1 with parent `main`. All share the
    /// provider. An empty chain is `main`. This is what `toolgate policy explain --depth N` needs.
    pub fn with_chain<R>(agents: &[&str], provider: Option<&str>, f: impl FnOnce(&Caller<'_>) -> R) -> R {
        fn step<R>(agents: &[&str], parent: &Caller<'_>, f: impl FnOnce(&Caller<'_>) -> R) -> R {
            match agents.split_first() {
                None => f(parent),
                Some((agent, rest)) => step(rest, &Caller::subagent(agent, parent), f),
            }
        }
        let (first, rest) = agents.split_first().map_or(("main", &[][..]), |(a, r)| (*a, r));
        let mut top = Caller::agent(first);
        top.provider = provider;
        step(rest, &top, f)
    }

    /// The depth policy uses: [`Caller::depth`], but never less than one more than the parent's,
    /// so a caller with a parent is always treated as a sub-agent.
    pub fn effective_depth(&self) -> u32 {
        match self.parent {
            None => self.depth,
            Some(Parent::Tools(_)) => self.depth.max(1),
            Some(Parent::Caller(parent)) => self.depth.max(parent.effective_depth().saturating_add(1)),
        }
    }
}
