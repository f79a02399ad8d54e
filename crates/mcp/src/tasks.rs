//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663, as rmcp 3.9.0 speaks it):
//! a `tools/call` answered at once with a task handle (`CreateTaskResult`), then `tasks/get`
//! (its state, and its result once it ended), `tasks/cancel` and `tasks/update`.
//!
//! The server does not keep tasks itself: it asks a [`TaskHost`], the port a
//! [`CallHandler`](crate::CallHandler) offers through [`CallHandler::tasks`](crate::CallHandler::tasks).
//! toolgate's gate implements it with its job records, so a task outlives the HTTP session that
//! started it and another session of the same user sees it; another user's task is "not found".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, ServerCapabilities, TASKS_EXTENSION_ID,
    Task, TaskPayload, TaskStatus as WireStatus,
};
use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};

use crate::convert;

/// How often a client is asked to poll `tasks/get`.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Where a task is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskStatus {
    /// Queued or running.
    Working,
    /// The call returned: the result a plain `tools/call` would have given.
    Completed(ToolOutput),
    /// The call ran and failed as a tool call fails (`isError` in a plain call): `kind` is
    /// [`ToolError::kind`], `message` what the model reads. MCP calls this `completed` too.
    ToolFailed {
        /// The error's kind (`denied`, `timeout`, ...).
        kind: String,
        /// What was wrong and what to do.
        message: String,
    },
    /// The task could not run to an answer (its server stopped: `interrupted`).
    Failed(String),
    /// Cancelled (`tasks/cancel`, `cancel_job`), with who or why.
    Cancelled(Option<String>),
}

/// One task as its host reports it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskState {
    /// Its id (for toolgate, the job's id).
    pub id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// A line for people (the tool and what it runs).
    pub message: Option<String>,
    /// When it was created, Unix milliseconds.
    pub created_ms: i64,
    /// When it last changed, Unix milliseconds.
    pub updated_ms: i64,
}

impl TaskState {
    /// A task `id` in `status`, created at `created_ms` and changed at `updated_ms`.
    pub fn new(id: impl Into<String>, status: TaskStatus, created_ms: i64, updated_ms: i64) -> Self {
        TaskState { id: id.into(), status, message: None, created_ms, updated_ms }
    }

    /// The same with a status message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Why a task request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// No task with this id that the caller may see (another user's is not found either).
    #[error(
        "no task `{0}`: a task id is the taskId of the CreateTaskResult your tools/call got (list yours with the list_jobs tool)"
    )]
    NotFound(String),
    /// The request cannot be served as asked.
    #[error("{0}")]
    Invalid(String),
}

/// What serves tasks: a call made a task, its state, its cancellation. Every method acts for the
/// caller `ctx` names (`ctx.identity.user`): a task is seen and cancelled by its owner only.
#[async_trait::async_trait]
pub trait TaskHost: Send + Sync + std::fmt::Debug {
    /// Whether a call of `tool` by `ctx`'s caller runs as a task when its client accepts tasks
    /// (the long-running tools).
    fn runs_as_task(&self, ctx: &CallContext, tool: &str) -> bool;

    /// Starts `tool(params)` in the background as `ctx`'s caller, through the same pipeline as
    /// a plain call (policy, approvals, audit); returns the task once `get` finds it.
    async fn start(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<TaskState, ToolError>;

    /// The task `id` of `ctx`'s caller.
    async fn get(&self, ctx: &CallContext, id: &str) -> Result<TaskState, TaskError>;

    /// Cancels the task `id` of `ctx`'s caller (a running call is stopped, its processes
    /// killed); a task that already ended stays as it is. Returns its state afterwards.
    async fn cancel(&self, ctx: &CallContext, id: &str) -> Result<TaskState, TaskError>;
}

/// The handler's task host and a context for the request's caller; "method not found" when
/// the handler keeps no tasks (rmcp answers so before asking when the extension is not declared).
pub(crate) fn host_for<H: crate::CallHandler>(
    handler: &H,
    context: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
) -> Result<(std::sync::Arc<dyn TaskHost>, CallContext), McpError> {
    let host = handler.tasks().ok_or_else(McpError::method_not_found::<rmcp::model::GetTaskMethod>)?;
    let mut ctx = handler.context();
    crate::session::apply(&mut ctx, context);
    ctx.cancel = context.ct.clone();
    Ok((host, ctx))
}

/// `tasks/update` answers: toolgate's tasks never ask the client for input (an approval a
/// task needs goes to the gate's approval channel), so there is nothing to answer.
pub(crate) async fn update(
    host: &dyn TaskHost,
    ctx: &CallContext,
    params: rmcp::model::UpdateTaskParams,
) -> Result<(), McpError> {
    let state = host.get(ctx, &params.task_id).await.map_err(|e| refused(&e))?;
    Err(McpError::invalid_params(
        format!(
            "task `{}` asks for no input (toolgate's tasks never do: approvals go to the server's approval \
             channel); poll it with tasks/get",
            state.id
        ),
        None,
    ))
}

/// `capabilities` with the tasks extension declared.
pub(crate) fn declare(mut capabilities: ServerCapabilities) -> ServerCapabilities {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
    capabilities
}

/// The task handle a `tools/call` answers with.
pub(crate) fn created(state: &TaskState) -> CreateTaskResult {
    CreateTaskResult::new(base(state))
}

/// `tasks/get`'s answer: the task and, once it ended, its result or error.
pub(crate) fn detailed(state: TaskState) -> GetTaskResult {
    let task = base(&state);
    let payload = match state.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::Completed(output) => TaskPayload::Completed { result: object(convert::success(output)) },
        TaskStatus::ToolFailed { kind, message } => {
            TaskPayload::Completed { result: object(convert::failure_of(&kind, &message)) }
        }
        TaskStatus::Failed(message) => {
            let error = McpError::internal_error(message, None);
            TaskPayload::Failed { error: serde_json::to_value(error).ok().and_then(into_object).unwrap_or_default() }
        }
        TaskStatus::Cancelled(_) => TaskPayload::Cancelled,
    };
    GetTaskResult::new(DetailedTask::new(task, payload))
}

/// A host's refusal as the protocol error SEP-2663 names for a bad task id: `-32602`.
pub(crate) fn refused(e: &TaskError) -> McpError {
    McpError::invalid_params(e.to_string(), None)
}

fn base(state: &TaskState) -> Task {
    let status = match &state.status {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::Completed(_) | TaskStatus::ToolFailed { .. } => WireStatus::Completed,
        TaskStatus::Failed(_) => WireStatus::Failed,
        TaskStatus::Cancelled(_) => WireStatus::Cancelled,
    };
    let mut task = Task::new(state.id.clone(), status, rfc3339(state.created_ms), rfc3339(state.updated_ms))
        .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64);
    let message = match &state.status {
        TaskStatus::Failed(m) => Some(m.clone()),
        TaskStatus::Cancelled(why) => why.clone().or_else(|| state.message.clone()),
        _ => state.message.clone(),
    };
    if let Some(message) = message {
        task = task.with_status_message(message);
    }
    // The records are kept until someone deletes them: no expiry (`ttlMs: null`).
    task
}

fn object(result: CallToolResult) -> JsonObject {
    serde_json::to_value(result).ok().and_then(into_object).unwrap_or_default()
}

fn into_object(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Unix milliseconds as an RFC 3339 UTC timestamp (`2026-11-28T05:21:08.123Z`).
pub(crate) fn rfc3339(ms: i64) -> String {
    let ms = if ms > 0 { ms } else { SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64) };
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1_000 % 60, rest % 1_000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(86_400_000), "1970-01-02T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_843_268_123), "2026-11-28T05:21:08.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn states_reach_the_wire_as_sep_2663_says() {
        let working =
            serde_json::to_value(created(&TaskState::new("t1", TaskStatus::Working, 1_000, 2_000))).unwrap_or_default();
        assert_eq!(working["resultType"], "task");
        assert_eq!(working["taskId"], "t1");
        assert_eq!(working["status"], "working");
        assert_eq!(working["ttlMs"], Value::Null, "kept until deleted");
        let done = TaskState::new("t1", TaskStatus::Completed(ToolOutput::text("hi")), 1_000, 2_000);
        let wire = serde_json::to_value(detailed(done)).unwrap_or_default();
        assert_eq!(wire["status"], "completed");
        assert_eq!(wire["result"]["content"][0]["text"], "hi");
        assert_eq!(wire["result"]["isError"], false);
        let failed = TaskState::new("t1", TaskStatus::ToolFailed { kind: "denied".into(), message: "no".into() }, 1, 2);
        let wire = serde_json::to_value(detailed(failed)).unwrap_or_default();
        assert_eq!(wire["status"], "completed", "a tool's failure is a completed task with isError");
        assert_eq!(wire["result"]["isError"], true);
        assert_eq!(wire["result"]["_meta"]["io.toolgate/errorKind"], "denied");
        let lost = TaskState::new("t1", TaskStatus::Failed("interrupted".into()), 1, 2);
        let wire = serde_json::to_value(detailed(lost)).unwrap_or_default();
        assert_eq!(wire["status"], "failed");
        assert_eq!(wire["error"]["code"], -32603);
        assert_eq!(wire["statusMessage"], "interrupted");
    }
}
