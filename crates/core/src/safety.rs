//! Per-call safety metadata: how risky is *this* call, with *these* parameters.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a tool says about one call before it runs. Computed by [`crate::Tool::safety`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSafety {
    /// Whether a person must approve the call.
    pub approval: ApprovalRequirement,
    /// Why approval is asked (shown in the approval request), when it is.
    pub approval_reason: Option<Cow<'static, str>>,
    /// The normalized thing that will run, for approvals and "allow always" (for `exec`, the
    /// unwrapped argv of each simple command). `None` means the whole parameter object.
    pub approval_subject: Option<String>,
    /// Top-level parameter names whose values are secrets: redacted in audit, approvals, logs.
    pub sensitive_params: Cow<'static, [&'static str]>,
    /// This call's deadline, overriding the gate's default.
    pub timeout: Option<Duration>,
    /// Which rate-limit bucket the call counts against.
    pub rate_class: RateClass,
    /// What the call will touch, for policy argument rules (`exec(cargo test:*)`, `read(src/**)`).
    pub touches: Touches,
    /// Why this call must never run (a blocked command), whatever policy, hooks or approvals
    /// say. The gate refuses such a call before anyone is asked.
    pub refusal: Option<Cow<'static, str>>,
    /// This call only reads, although the tool as a whole may write: an `exec` whose every
    /// command is known-safe read-only, `process` listing or polling. Approval mode `untrusted`
    /// runs such calls without asking, like calls of read-only tools.
    pub read_only: bool,
    /// The gate calls [`crate::Tool::inspect`] before asking for approval: what the call will
    /// do can only be known with the workspace or I/O (a skill's supply-chain scan).
    pub inspect: bool,
    /// This call may be sent to another node (a background process or browser session held
    /// there), whose gate may ask a person before it runs: the gate's execute stage then waits
    /// for it as long as the call could take on that node, its approval wait included.
    pub forwards: bool,
}

/// What one call will touch, as the tool itself understands its parameters. Policy argument
/// rules match against these, never against raw parameter strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    /// Simple commands to run, each an argv after unwrapping wrappers (`env`, `sh -c`, `sudo`).
    pub commands: Vec<Vec<String>>,
    /// Workspace-relative paths (or globs) read.
    pub reads: Vec<String>,
    /// Workspace-relative paths written, created, moved or deleted.
    pub writes: Vec<String>,
    /// Hosts contacted (lowercase, no port).
    pub hosts: Vec<String>,
    /// The command could not be fully understood (unparseable shell): never auto-allowed.
    pub opaque: bool,
}

impl Default for CallSafety {
    fn default() -> Self {
        CallSafety {
            approval: ApprovalRequirement::Never,
            approval_reason: None,
            approval_subject: None,
            sensitive_params: Cow::Borrowed(&[]),
            timeout: None,
            rate_class: RateClass::Default,
            touches: Touches::default(),
            refusal: None,
            read_only: false,
            inspect: false,
            forwards: false,
        }
    }
}

impl CallSafety {
    /// Safety of a call that needs approval for the given reason.
    pub fn needs_approval(requirement: ApprovalRequirement, reason: impl Into<Cow<'static, str>>) -> Self {
        CallSafety { approval: requirement, approval_reason: Some(reason.into()), ..Self::default() }
    }
}

/// When a call needs a person's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirement {
    /// Never ask.
    #[default]
    Never,
    /// Ask, unless the caller approved this exact subject before ("allow always") or the
    /// approval mode says not to ask.
    UnlessAutoApproved,
    /// Always ask, whatever was stored before (destructive commands).
    Always,
}

/// Rate-limit buckets, with defaults from IronClaw's limiter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateClass {
    /// Shell and process execution: 30/min, 300/h.
    Exec,
    /// Outbound HTTP: 30/min, 500/h.
    Http,
    /// File writes: 20/min, 200/h.
    FileWrite,
    /// Memory writes: 20/min, 200/h.
    MemoryWrite,
    /// Messages to people: 10/min, 100/h.
    Message,
    /// Everything else: 60/min, 1000/h.
    #[default]
    Default,
}

impl RateClass {
    /// Default (per minute, per hour) limits for this class.
    pub fn default_limits(self) -> (u32, u32) {
        match self {
            RateClass::Exec => (30, 300),
            RateClass::Http => (30, 500),
            RateClass::FileWrite | RateClass::MemoryWrite => (20, 200),
            RateClass::Message => (10, 100),
            RateClass::Default => (60, 1000),
        }
    }

    /// The config name of this class.
    pub fn as_str(self) -> &'static str {
        match self {
            RateClass::Exec => "exec",
            RateClass::Http => "http",
            RateClass::FileWrite => "file_write",
            RateClass::MemoryWrite => "memory_write",
            RateClass::Message => "message",
            RateClass::Default => "default",
        }
    }
}
