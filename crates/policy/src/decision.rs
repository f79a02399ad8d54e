//! What policy answers: visibility and per-call verdicts, each with its trace.

use std::fmt;

use serde::Serialize;

use crate::trace::{Effect, Trace};

/// The outcome of a call check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Pre-approved by an allow rule: no approval is needed on policy's account. It stands in
    /// for a stored "allow always", so, like one, it does not override a tool's
    /// `ApprovalRequirement::Always` (a destructive command the tool itself detected).
    Allow,
    /// No rule decided: the tool's own approval requirement (`CallSafety::approval`) applies.
    ToolDefault,
    /// Ask a person first, whatever the tool says.
    Ask,
    /// Refuse the call.
    Deny,
}

impl Verdict {
    /// Strictness: `Deny` > `Ask` > `ToolDefault` > `Allow`.
    pub(crate) fn rank(self) -> u8 {
        match self {
            Verdict::Allow => 0,
            Verdict::ToolDefault => 1,
            Verdict::Ask => 2,
            Verdict::Deny => 3,
        }
    }

    pub(crate) fn effect(self) -> Effect {
        match self {
            Verdict::Allow => Effect::Allow,
            Verdict::ToolDefault => Effect::ToolDefault,
            Verdict::Ask => Effect::Ask,
            Verdict::Deny => Effect::Deny,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.effect().fmt(f)
    }
}

/// Whether a caller may see a tool, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Visibility {
    /// Whether the tool is offered to the caller.
    pub visible: bool,
    /// The entry that hid the tool (`` `exec` in [tools].deny ``), when hidden.
    pub rule: Option<String>,
    /// Every step taken.
    pub trace: Trace,
}

impl fmt::Display for Visibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.visible, &self.rule) {
            (true, _) => writeln!(f, "visible")?,
            (false, Some(rule)) => writeln!(f, "hidden by {rule}")?,
            (false, None) => writeln!(f, "hidden")?,
        }
        self.trace.fmt(f)
    }
}

/// The policy's answer for one call. Serializes to JSON for the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// What to do.
    pub verdict: Verdict,
    /// The entry or rule that decided, with where it came from; `None` for [`Verdict::ToolDefault`]
    /// and for opaque calls.
    pub rule: Option<String>,
    /// One sentence for the person or model, saying why.
    pub reason: String,
    /// Every step taken.
    pub trace: Trace,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.verdict, self.reason)?;
        self.trace.fmt(f)
    }
}
