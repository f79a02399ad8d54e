//! Explanations: every visibility check and decision records the steps it took.

use std::fmt;

use serde::Serialize;

/// Which step of the pipeline a [`TraceStep`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stage {
    /// The caller is deeper than `[tools.subagents].maxDepth`.
    Depth,
    /// Step 1: the global profile (`full` when none is configured).
    Profile,
    /// Step 2: a provider's profile (`byProvider.NAME.profile`).
    ProviderProfile,
    /// Step 3: the global allow list.
    Allow,
    /// Step 4: a provider's allow list.
    ProviderAllow,
    /// Step 5: the agent's allow list.
    AgentAllow,
    /// Step 6: the agent's per-provider allow list.
    AgentProviderAllow,
    /// Step 7: the channel's ("group") allow list.
    ChannelAllow,
    /// A deny list (global, provider, agent, agent + provider, channel).
    Deny,
    /// An `alsoAllow` list.
    AlsoAllow,
    /// The subagent deny list (every depth ≥ 1).
    SubagentDeny,
    /// The leaf deny list (at the maximum depth).
    LeafDeny,
    /// The parent's policy (a sub-agent never gains what its parent lacks).
    Parent,
    /// An argument rule in a deny list.
    DenyRule,
    /// The call's touches are opaque: no allow rule may match.
    Opaque,
    /// An ask entry or argument rule.
    AskRule,
    /// An argument rule in an allow or `alsoAllow` list.
    AllowRule,
    /// No argument rule matched.
    NoRule,
}

impl Stage {
    /// A short lowercase label.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Depth => "depth",
            Stage::Profile => "profile",
            Stage::ProviderProfile => "provider profile",
            Stage::Allow => "allow",
            Stage::ProviderAllow => "provider allow",
            Stage::AgentAllow => "agent allow",
            Stage::AgentProviderAllow => "agent+provider allow",
            Stage::ChannelAllow => "channel allow",
            Stage::Deny => "deny",
            Stage::AlsoAllow => "alsoAllow",
            Stage::SubagentDeny => "subagent deny",
            Stage::LeafDeny => "leaf deny",
            Stage::Parent => "parent",
            Stage::DenyRule => "deny rule",
            Stage::Opaque => "opaque",
            Stage::AskRule => "ask rule",
            Stage::AllowRule => "allow rule",
            Stage::NoRule => "no rule",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Effect {
    /// The tool stayed visible.
    Kept,
    /// The tool was hidden.
    Removed,
    /// The tool was made visible again (`alsoAllow`).
    Added,
    /// The step matched but changed nothing (already hidden, or a deny cannot be re-opened).
    Unchanged,
    /// The call is allowed without approval.
    Allow,
    /// The call needs approval.
    Ask,
    /// The call is denied.
    Deny,
    /// The tool's own approval requirement applies.
    ToolDefault,
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Effect::Kept => "kept",
            Effect::Removed => "removed",
            Effect::Added => "added",
            Effect::Unchanged => "unchanged",
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
            Effect::ToolDefault => "tool default",
        })
    }
}

/// One step of an explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceStep {
    /// The pipeline step.
    pub stage: Stage,
    /// What was checked, naming the config entry and where it came from.
    pub detail: String,
    /// What the step did.
    pub effect: Effect,
    /// 0 for the caller itself, 1 for its parent, 2 for the grandparent, ...
    pub level: u32,
}

/// The steps behind a [`crate::Visibility`] or [`crate::Decision`], in order.
///
/// `Display` prints one numbered line per step, parents' steps indented:
///
/// ```text
/// 1 profile coding (from [tools].profile): `group:fs` includes `read` -> kept
/// 2 deny rule `read(secrets/**)` from [tools].deny matched `secrets/key` -> deny
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Trace(Vec<TraceStep>);

impl Trace {
    /// The steps, in order.
    pub fn steps(&self) -> &[TraceStep] {
        &self.0
    }

    pub(crate) fn push(&mut self, level: u32, stage: Stage, detail: impl Into<String>, effect: Effect) {
        self.0.push(TraceStep { stage, detail: detail.into(), effect, level });
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            let indent = "  ".repeat(step.level as usize);
            writeln!(f, "{indent}{} {} {} -> {}", i + 1, step.stage, step.detail, step.effect)?;
        }
        Ok(())
    }
}
