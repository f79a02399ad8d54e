//! MCP tasks kept as job records: `toolgate-mcp`'s [`TaskHost`] port, implemented over the
//! automation family's [`Jobs`] (`toolgate-mcp` does not know the jobs; the automation crate
//! does not know MCP).
//!
//! A task is a one-call job (mode `tool`) of the caller: it runs through `Gate::call` as the
//! caller's user, with the gate's policy, approvals and audit; its record outlives the MCP
//! session, so `tasks/get` from another session of the same user finds it, and another user's
//! task id is "not found" like an id that never existed.

use std::sync::{Arc, Weak};

use serde_json::Value;
use toolgate_automation::jobs::{CallOutcome, JobError, JobOwner, Jobs};
use toolgate_core::{CallContext, Registry, ToolError, ToolOutput};
use toolgate_mcp::{TaskError, TaskHost, TaskState, TaskStatus};
use toolgate_store::JobRecord;

/// [`TaskHost`] over a gate's jobs.
#[derive(Debug)]
pub(crate) struct JobTasks {
    jobs: Jobs,
    /// To tell a tool of the gate from an unknown name (which gets the plain call's error).
    registry: Weak<Registry>,
    /// The tools run as tasks (`[automation] task_tools`), by their names.
    tools: Vec<String>,
}

impl JobTasks {
    pub(crate) fn new(jobs: Jobs, registry: Weak<Registry>, tools: Vec<String>) -> Self {
        JobTasks { jobs, registry, tools }
    }

    /// Job `id` of `ctx`'s user, by its whole id only (a task id is never abbreviated).
    fn job(&self, ctx: &CallContext, id: &str) -> Result<JobRecord, TaskError> {
        let shown = || TaskError::NotFound(id.chars().take(64).collect());
        let looks_like_id = id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !looks_like_id {
            return Err(shown());
        }
        match self.jobs.get(&ctx.identity.user, id) {
            Ok(job) if job.id == id => Ok(job),
            Ok(_) | Err(JobError::NotFound(_) | JobError::Ambiguous { .. }) => Err(shown()),
            Err(e) => Err(TaskError::Invalid(e.to_string())),
        }
    }
}

/// A job record as a task.
fn state(job: &JobRecord) -> TaskState {
    let status = match job.state.as_str() {
        "completed" => match Jobs::call_outcome(job) {
            Some(CallOutcome::Output(output)) => TaskStatus::Completed(output),
            _ => TaskStatus::Completed(ToolOutput::text(job.result.clone().unwrap_or_default())),
        },
        "failed" => match Jobs::call_outcome(job) {
            Some(CallOutcome::Error { kind, message }) => TaskStatus::ToolFailed { kind, message },
            Some(CallOutcome::Output(output)) => TaskStatus::Completed(output),
            None => TaskStatus::Failed(job.error.clone().unwrap_or_else(|| "failed".to_owned())),
        },
        "cancelled" => TaskStatus::Cancelled(job.error.clone()),
        _ => TaskStatus::Working,
    };
    let updated = job.finished_ms.or(job.started_ms).unwrap_or(job.created_ms);
    TaskState::new(job.id.clone(), status, job.created_ms, updated).message(format!("{}: {}", job.state, job.title))
}

#[async_trait::async_trait]
impl TaskHost for JobTasks {
    fn runs_as_task(&self, _ctx: &CallContext, tool: &str) -> bool {
        let known = self.registry.upgrade().and_then(|r| r.resolve(tool).map(|t| t.tool.spec().name.clone()));
        // By the tool's own name, so an alias or a dialect's spelling is a task exactly when
        // the tool is.
        known.is_some_and(|name| self.tools.contains(&name))
    }

    async fn start(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<TaskState, ToolError> {
        let id =
            self.jobs.submit_call(&JobOwner::of(ctx), tool, params).map_err(|e| ToolError::failed(e.to_string()))?;
        let job = self.jobs.get(&ctx.identity.user, &id).map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(state(&job))
    }

    async fn get(&self, ctx: &CallContext, id: &str) -> Result<TaskState, TaskError> {
        self.job(ctx, id).map(|job| state(&job))
    }

    async fn cancel(&self, ctx: &CallContext, id: &str) -> Result<TaskState, TaskError> {
        let job = self.job(ctx, id)?;
        if !job.is_finished() {
            match self.jobs.cancel(&ctx.identity.user, &job.id).await {
                Ok(job) => return Ok(state(&job)),
                // It ended meanwhile: the state it ended in is the answer.
                Err(JobError::Invalid(_)) => {}
                Err(e) => return Err(TaskError::Invalid(e.to_string())),
            }
        }
        self.job(ctx, id).map(|job| state(&job))
    }
}

/// The port the gate offers its MCP server, when its automation family keeps jobs and some
/// tools run as tasks (`tools`, `[automation] task_tools`; empty: none, and no port).
pub(crate) fn host(jobs: &Jobs, registry: &Arc<Registry>, tools: &[String]) -> Option<Arc<dyn TaskHost>> {
    if tools.is_empty() {
        return None;
    }
    Some(Arc::new(JobTasks::new(jobs.clone(), Arc::downgrade(registry), tools.to_vec())))
}

/// The names of `[automation] task_tools` that are no tool of the gate's now (a typo, or a tool
/// an MCP server or a WASM install adds later), for a warning when the gate is built.
fn unknown_task_tools(registry: &Registry, tools: &[String]) -> Vec<String> {
    tools.iter().filter(|t| registry.resolve(t).is_none_or(|found| found.tool.spec().name != **t)).cloned().collect()
}

/// One warning per name of `[automation] task_tools` that is no tool now, each with the tools
/// the gate has, so a typo is seen against the names it could have been.
pub(crate) fn unknown_task_tools_warnings(registry: &Registry, tools: &[String]) -> Vec<String> {
    let unknown = unknown_task_tools(registry, tools);
    if unknown.is_empty() {
        return Vec::new();
    }
    let mut known: Vec<String> = registry.all().iter().map(|t| t.tool.spec().name.clone()).collect();
    known.sort();
    let known = known.join(", ");
    unknown
        .iter()
        .map(|name| {
            // The name comes from the operator's file, but it is shown quoted and cut all the same.
            let shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
            format!(
                "[automation] task_tools names `{shown}`, which is no tool of this gate now; its calls run as \
                 tasks only once a tool of that name exists (a bridged MCP server's, an installed WASM tool). \
                 The tools now: {known}"
            )
        })
        .collect()
}
