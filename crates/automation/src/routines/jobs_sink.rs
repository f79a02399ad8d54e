//! Routine runs as jobs: [`RunSink`] for the jobs engine ([`crate::jobs::Jobs`]).
//!
//! A run is a job owned by the routine's owner, in the session `routine:NAME` with the agent
//! name `routine` (so the events of its tool calls trigger no routine), and origin
//! `routine:NAME` (what `list_jobs` and `routine_history` show). `full_job` and `lightweight`
//! are jobs: `full_job` a `sandbox` job (an agent run with tools), `lightweight` a
//! `lightweight` job (one model answer, no tools offered); a `tool` action calling `exec` is a
//! `command` job, calling another tool a `tool` job (one call through the gate as the owner).
//! Every run is a job record with its state, events and result (older fires may name a bare
//! `call:ID`, from before tool actions were jobs).
//!
//! A routine that records an agent session (made by `cron add` from one) is no job: its prompt
//! is appended to that session as a user message and the session runs on for one turn on the
//! agent runtime ([`toolgate_agent::Runtime::send`]), so its tool calls go through the gate as
//! the session's user, its owner (under the grants of the gateway principal the routine acts
//! for, when it acts for one); the fire records the turn's answer (`turn:ID`). A session
//! running in this process at that moment takes the prompt before its next model turn instead.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_agent::RunStatus;

use super::scheduler::{RoutineRun, RunSink, Started};
use super::spec::ActionType;
use crate::jobs::{JobMode, JobOwner, JobRequest, Jobs};
use crate::text::clip;

/// The jobs engine as the routines' [`RunSink`].
#[derive(Debug, Clone)]
pub struct JobsSink {
    jobs: Jobs,
    agents: Option<Arc<toolgate_agent::Runtime>>,
    /// Session turns running now (`turn:ID`): a routine's next fire waits for its last one.
    turns: Arc<Mutex<HashSet<String>>>,
}

impl JobsSink {
    /// Runs routines as jobs of `jobs`; `agents` reaches the gate for single tool calls and
    /// runs the turns of agent sessions.
    pub fn new(jobs: Jobs, agents: Option<Arc<toolgate_agent::Runtime>>) -> Self {
        JobsSink { jobs, agents, turns: Arc::default() }
    }
}

/// Takes a turn off the running set however it ends (answered, failed, or dropped at shutdown).
struct Running {
    turns: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.turns.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

#[async_trait::async_trait]
impl RunSink for JobsSink {
    async fn start(&self, run: RoutineRun) -> Result<Started, String> {
        if let Some(session) = &run.session {
            return self.turn(&run, session);
        }
        self.start_job(&run).map(Started::Job)
    }

    fn agent_session(&self, user: &str, session: &str) -> bool {
        let Some(rt) = &self.agents else { return false };
        matches!(rt.store().session(session), Ok(Some(r)) if r.user == user && !rt.config().agents.is_empty())
    }

    fn is_active(&self, id: &str) -> Option<bool> {
        if id.starts_with("turn:") {
            return Some(self.turns.lock().unwrap_or_else(|e| e.into_inner()).contains(id));
        }
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
        if id.starts_with("turn:") {
            // A turn's end is on its fire (status and detail); only a live one is known here.
            let live = self.turns.lock().unwrap_or_else(|e| e.into_inner()).contains(id);
            return live.then(|| json!({"state": "running"}));
        }
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
    /// The prompt as a user message of the routine's agent session, and one turn of it.
    fn turn(&self, run: &RoutineRun, session: &str) -> Result<Started, String> {
        let rt = self
            .agents
            .clone()
            .filter(|rt| rt.tool_caller().is_some())
            .ok_or("this gate has no agent runtime to continue the session in")?;
        // The session must still be there and still be the owner's: the turn acts as its user.
        match rt.store().session(session) {
            Ok(Some(r)) if r.user == run.owner => {}
            Ok(_) => {
                return Err(format!(
                    "the agent session `{}` this cron entry injects into no longer exists; remove the entry \
                     (`cron remove`) and add it again from a live session",
                    clip(session, 80)
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
        let id = format!("turn:{}", uuid::Uuid::new_v4().simple());
        self.turns.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone());
        let running = Running { turns: Arc::clone(&self.turns), id: id.clone() };
        let message = format!("[cron {}] {}", run.routine, run.prompt);
        let session = session.to_owned();
        let grants = run.grants.clone();
        let done = Box::pin(async move {
            let _running = running;
            // Running here now: the loop takes the message before its next model turn (under the
            // grants that run was started with).
            match rt.send_queued(&session, &message).await {
                Ok(Some(to)) => {
                    return Ok(format!("queued into the running session `{to}`; its model reads it next turn"));
                }
                Ok(None) => {}
                Err(e) => return Err(e.to_string()),
            }
            let outcome = rt.send_under(&session, &message, None, grants).await.map_err(|e| e.to_string())?;
            match outcome.status {
                RunStatus::Done => Ok(outcome.answer),
                _ => Err(outcome.for_model()),
            }
        });
        Ok(Started::Turn { id, done })
    }

    /// A new job for the run.
    fn start_job(&self, run: &RoutineRun) -> Result<String, String> {
        let owner = JobOwner {
            user: run.owner.clone(),
            agent: "routine".into(),
            session: format!("routine:{}", run.routine),
            // The principal's grants as they are at this fire (a gateway caller's routine):
            // every call of the job is checked against them.
            grants: run.grants.clone(),
        };
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
            (ActionType::Tool, Some((tool, params))) => JobRequest {
                title,
                description: json!({"tool": tool, "params": params}).to_string(),
                mode: JobMode::Tool,
                origin,
                ..JobRequest::default()
            },
            (ActionType::Tool, None) => return Err("the routine has no tool to call".into()),
            (ActionType::Lightweight, _) => JobRequest {
                title,
                description: format!(
                    "Answer in one reply, from the text below and the attached files only (no tools are offered).\n\n{}",
                    run.prompt
                ),
                mode: JobMode::Lightweight,
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
        self.jobs.submit(&owner, req).map(|(id, _)| id).map_err(|e| e.to_string())
    }
}
