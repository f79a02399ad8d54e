//! Routine runs as jobs: [`RunSink`] for the jobs engine ([`crate::jobs::Jobs`]).
//!
//! A run is a job owned by the routine's owner, in the session `routine:NAME` with the agent
//! name `routine` (so the events of its tool calls trigger no routine), and origin
//! `routine:NAME` (what `list_jobs` and `routine_history` show). `full_job` and `lightweight`
//! are `sandbox` jobs (an agent run); a `tool` action calling `exec` is a `command` job. A
//! `tool` action calling another tool is one call through the gate as the owner, recorded on
//! the fire (`call:ID`), until the jobs engine has a mode for one tool call.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::Identity;

use super::scheduler::{RoutineRun, RunSink};
use super::spec::ActionType;
use crate::jobs::{JobMode, JobOwner, JobRequest, Jobs};
use crate::text::clip;

/// The jobs engine as the routines' [`RunSink`].
#[derive(Debug, Clone)]
pub struct JobsSink {
    jobs: Jobs,
    agents: Option<Arc<toolgate_agent::Runtime>>,
}

impl JobsSink {
    /// Runs routines as jobs of `jobs`; `agents` reaches the gate for single tool calls.
    pub fn new(jobs: Jobs, agents: Option<Arc<toolgate_agent::Runtime>>) -> Self {
        JobsSink { jobs, agents }
    }
}

#[async_trait::async_trait]
impl RunSink for JobsSink {
    async fn start(&self, run: RoutineRun) -> Result<String, String> {
        let owner =
            JobOwner { user: run.owner.clone(), agent: "routine".into(), session: format!("routine:{}", run.routine) };
        let title = format!("routine {} ({})", run.routine, run.trigger);
        let origin = Some(format!("routine:{}", run.routine));
        let req = match (run.action, &run.tool) {
            (ActionType::Tool, Some((tool, params))) if tool == "exec" => {
                let Some(command) = params.get("command").and_then(Value::as_str) else {
                    return Err("the routine's `exec` call has no `command` parameter".into());
                };
                JobRequest {
                    title,
                    description: command.to_owned(),
                    mode: JobMode::Command,
                    project_dir: params.get("workdir").and_then(Value::as_str).map(str::to_owned),
                    origin,
                    ..JobRequest::default()
                }
            }
            (ActionType::Tool, Some((tool, params))) => return self.call(&run, &owner, tool, params.clone()),
            (ActionType::Tool, None) => return Err("the routine has no tool to call".into()),
            (ActionType::Lightweight, _) => JobRequest {
                title,
                description: format!(
                    "Answer in one reply, from the text below and the attached files only; do not call tools.\n\n{}",
                    run.prompt
                ),
                mode: JobMode::Sandbox,
                origin,
                agent: run.agent.clone(),
                ..JobRequest::default()
            },
            (ActionType::FullJob, _) => JobRequest {
                title,
                description: run.prompt.clone(),
                mode: JobMode::Sandbox,
                origin,
                agent: run.agent.clone(),
                ..JobRequest::default()
            },
        };
        self.jobs.submit(&owner, req).map_err(|e| e.to_string())
    }

    fn is_active(&self, id: &str) -> Option<bool> {
        if id.starts_with("call:") {
            return Some(false);
        }
        let job = self.jobs.store().job(id).ok()??;
        Some(matches!(job.state.as_str(), "queued" | "running"))
    }

    fn title(&self, id: &str) -> Option<String> {
        Some(self.jobs.store().job(id).ok()??.title)
    }

    fn describe(&self, id: &str) -> Option<Value> {
        let job = self.jobs.store().job(id).ok()??;
        Some(json!({
            "state": job.state,
            "result": job.result.map(|r| clip(&r, 2_000)),
            "error": job.error,
            "started_ms": job.started_ms,
            "finished_ms": job.finished_ms,
        }))
    }
}

impl JobsSink {
    /// One tool call through the gate as the owner, in the background; its outcome goes to the
    /// log (the fire records its id).
    fn call(&self, run: &RoutineRun, owner: &JobOwner, tool: &str, params: Value) -> Result<String, String> {
        let caller = self
            .agents
            .as_ref()
            .and_then(|rt| rt.tool_caller())
            .ok_or("this gate cannot call tools for routines (no runtime bound to it)")?;
        let mut ctx = caller.context();
        ctx.identity =
            Identity { user: owner.user.clone(), agent: owner.agent.clone(), session: owner.session.clone() };
        let id = format!("call:{}", uuid::Uuid::new_v4().simple());
        let (tool, routine, call_id) = (tool.to_owned(), run.routine.clone(), id.clone());
        tokio::spawn(async move {
            match caller.call(&ctx, &tool, params).await {
                Ok(_) => tracing::info!(routine = %routine, call = %call_id, tool = %tool, "routine tool call done"),
                Err(e) => {
                    tracing::warn!(routine = %routine, call = %call_id, tool = %tool, error = %e, "routine tool call failed")
                }
            }
        });
        Ok(id)
    }
}
