//! Why a call failed, in words a model can act on.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a tool call failed. `Display` is the message the model reads: it says what was wrong and
/// what to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The parameters do not fit the tool's schema or limits; every problem is listed.
    #[error("invalid parameters for `{tool}`:{}", list_problems(.problems))]
    InvalidParams {
        /// The tool called.
        tool: String,
        /// Each problem, with where it is.
        problems: Vec<ParamProblem>,
    },
    /// No tool has this name.
    #[error("unknown tool `{name}`{}", suggest(.suggestion))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The closest existing name, if any is close.
        suggestion: Option<String>,
    },
    /// Something the tool needed does not exist (a file, a process id, a memory document).
    #[error("{what} not found{}", hint_suffix(.hint))]
    NotFound {
        /// What was missing, e.g. "file `src/main.rs`".
        what: String,
        /// What to try instead.
        hint: Option<String>,
    },
    /// Policy refuses this call.
    #[error("`{tool}` is denied by policy: {reason}")]
    Denied {
        /// The tool called.
        tool: String,
        /// Which rule decided, in words.
        reason: String,
    },
    /// The call needs a person's approval and none could be obtained.
    #[error("`{tool}` needs approval: {reason}. {how}")]
    NeedsApproval {
        /// The tool called.
        tool: String,
        /// What needed approval and why.
        reason: String,
        /// How a person can grant it.
        how: String,
    },
    /// A person was asked and said no.
    #[error("`{tool}` was not approved{}", hint_suffix(.message))]
    ApprovalDenied {
        /// The tool called.
        tool: String,
        /// The person's or channel's words, if any.
        message: Option<String>,
    },
    /// Too many calls in a time window.
    #[error("rate limit for `{tool}` reached: at most {limit} calls per {window}; retry in {}s", .retry_after.as_secs().max(1))]
    RateLimited {
        /// The tool called.
        tool: String,
        /// The window that is full.
        window: RateWindow,
        /// The limit of that window.
        limit: u32,
        /// When a slot frees up.
        retry_after: Duration,
    },
    /// Too many calls already running for this agent.
    #[error(
        "too many concurrent calls: {in_flight} running and {queued} queued for this agent (limits {max_in_flight} and {max_queued}); wait for some to finish"
    )]
    TooManyConcurrentCalls {
        /// Calls running.
        in_flight: usize,
        /// Calls waiting.
        queued: usize,
        /// Limit on running calls.
        max_in_flight: usize,
        /// Limit on waiting calls.
        max_queued: usize,
    },
    /// The call ran past its deadline and was stopped.
    #[error("`{tool}` timed out after {}s and was stopped; use a smaller task or a longer `timeout` where the tool accepts one", .after.as_secs_f64())]
    Timeout {
        /// The tool called.
        tool: String,
        /// The deadline.
        after: Duration,
    },
    /// The caller cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
    /// The OS sandbox blocked the operation.
    #[error("blocked by the sandbox: {detail}. To do this, ask for approval to run with more access")]
    SandboxDenied {
        /// What was blocked, from the real signal (EACCES on a path, SIGSYS, ...).
        detail: String,
    },
    /// The tool ran and failed.
    #[error("{message}")]
    ExecutionFailed {
        /// What went wrong, and what to do about it.
        message: String,
    },
    /// A service the tool depends on failed.
    #[error("{service} failed: {message}")]
    ExternalService {
        /// The service (an MCP server's name, a host).
        service: String,
        /// What it said.
        message: String,
    },
}

impl ToolError {
    /// A tool failure with a message for the model.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::ExecutionFailed { message: message.into() }
    }

    /// Invalid parameters with a single problem.
    pub fn invalid(tool: impl Into<String>, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError::InvalidParams {
            tool: tool.into(),
            problems: vec![ParamProblem { pointer: pointer.into(), message: message.into() }],
        }
    }

    /// A stable, machine-readable name for the kind of error (audit, JSON output, metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidParams { .. } => "invalid_params",
            ToolError::UnknownTool { .. } => "unknown_tool",
            ToolError::NotFound { .. } => "not_found",
            ToolError::Denied { .. } => "denied",
            ToolError::NeedsApproval { .. } => "needs_approval",
            ToolError::ApprovalDenied { .. } => "approval_denied",
            ToolError::RateLimited { .. } => "rate_limited",
            ToolError::TooManyConcurrentCalls { .. } => "too_many_concurrent_calls",
            ToolError::Timeout { .. } => "timeout",
            ToolError::Cancelled => "cancelled",
            ToolError::SandboxDenied { .. } => "sandbox_denied",
            ToolError::ExecutionFailed { .. } => "execution_failed",
            ToolError::ExternalService { .. } => "external_service",
        }
    }
}

/// One thing wrong with the parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamProblem {
    /// JSON pointer to the offending value (`""` is the whole object, `/path`, `/edits/2/old_string`).
    pub pointer: String,
    /// What was expected and what was given.
    pub message: String,
}

impl fmt::Display for ParamProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(root)" } else { &self.pointer };
        write!(f, "{at}: {}", self.message)
    }
}

/// A rate-limit window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateWindow {
    /// The last 60 seconds.
    Minute,
    /// The last 3600 seconds.
    Hour,
}

impl fmt::Display for RateWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RateWindow::Minute => "minute",
            RateWindow::Hour => "hour",
        })
    }
}

fn list_problems(problems: &[ParamProblem]) -> String {
    let mut out = String::new();
    for p in problems {
        out.push_str("\n  - ");
        out.push_str(&p.to_string());
    }
    out
}

fn suggest(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => "; list the available tools to see their names".to_owned(),
    }
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(": {h}"),
        None => String::new(),
    }
}
