//! Reading validated parameters, the safety metadata the tools share, and running a tool's body
//! off the async runtime.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{ApprovalRequirement, CallContext, CallSafety, RateClass, ToolError, ToolOutput, Touches};

use super::state::FsState;

/// A required string parameter.
pub(crate) fn string<'a>(tool: &str, params: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    params.get(name).and_then(Value::as_str).ok_or_else(|| {
        ToolError::invalid(tool, format!("/{name}"), format!("`{name}` is required and must be a string"))
    })
}

/// An optional string parameter.
pub(crate) fn opt_string<'a>(params: &'a Value, name: &str) -> Option<&'a str> {
    params.get(name).and_then(Value::as_str)
}

/// An optional non-negative integer parameter.
pub(crate) fn opt_u64(tool: &str, params: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ToolError::invalid(tool, format!("/{name}"), format!("`{name}` must be a non-negative integer"))
        }),
    }
}

/// An optional boolean parameter (default `false`).
pub(crate) fn flag(params: &Value, name: &str) -> bool {
    params.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// The path as a policy sees it before the workspace is known: lexically normalized, relative.
pub(crate) fn touch_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if p.starts_with('/') {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// Safety of a call that writes `paths`: file-write rate class, and approval when one of them
/// is an instruction file agents load into their prompts.
pub(crate) fn write_safety(state: &FsState, paths: Vec<String>) -> CallSafety {
    let instruction: Vec<&String> = paths.iter().filter(|p| state.rules.instruction_file(p)).collect();
    let mut safety = CallSafety { rate_class: RateClass::FileWrite, ..CallSafety::default() };
    if state.config.approve_instruction_files && !instruction.is_empty() {
        let list = instruction.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
        safety.approval = ApprovalRequirement::UnlessAutoApproved;
        safety.approval_reason =
            Some(Cow::Owned(format!("writes {list}, an instruction file that agents load into their prompts")));
    }
    safety.touches = Touches { writes: paths, ..Touches::default() };
    safety
}

/// Safety of a call that reads `paths`.
pub(crate) fn read_safety(paths: Vec<String>) -> CallSafety {
    CallSafety { touches: Touches { reads: paths, ..Touches::default() }, ..CallSafety::default() }
}

/// Safety of a call that reads its optional `path` parameter (the workspace root when absent).
pub(crate) fn path_read_safety(params: &Value) -> CallSafety {
    read_safety(vec![opt_string(params, "path").map(touch_path).unwrap_or_else(|| ".".to_owned())])
}

/// Safety of a call that writes its `path` parameter.
pub(crate) fn path_write_safety(state: &FsState, params: &Value) -> CallSafety {
    write_safety(state, opt_string(params, "path").map(touch_path).into_iter().collect())
}

/// Runs a tool's body on tokio's blocking pool: file I/O and directory walks must not stall the
/// async runtime. A panic in the body becomes an error that names the tool.
pub(crate) async fn blocking(
    tool: &'static str,
    state: &Arc<FsState>,
    ctx: &CallContext,
    params: Value,
    body: impl FnOnce(&Arc<FsState>, &CallContext, &Value) -> Result<ToolOutput, ToolError> + Send + 'static,
) -> Result<ToolOutput, ToolError> {
    let state = Arc::clone(state);
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || body(&state, &ctx, &params))
        .await
        .map_err(|e| ToolError::failed(format!("{tool} failed: {e}")))?
}
