//! The job tools (seed 004 §4.8): `create_job`, `list_jobs`, `job_status`, `cancel_job`
//! (approval), `job_events` (owner session only), `job_prompt` (approval, owner session only).
//!
//! Every tool acts for the user its context names: another user's job is "not found".

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate_core::{Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_store::JobRecord;

use super::{
    Credential, JobError, JobMode, JobOwner, JobRequest, Jobs, MAX_CREDENTIALS, MAX_DESCRIPTION, MAX_TITLE, Placement,
    WAIT_TIMEOUT, describe_state,
};
use crate::Setup;

/// The tool group of the job tools.
pub const GROUP: &str = "automation";

#[derive(Debug, Clone, Copy)]
enum Kind {
    Create,
    List,
    Status,
    Cancel,
    Events,
    Prompt,
}

#[derive(Debug)]
struct JobTool {
    spec: ToolSpec,
    kind: Kind,
    jobs: Jobs,
}

/// The job tools, when the gate has jobs (a state database and the agent runtime).
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let Some(jobs) = &setup.jobs else { return Vec::new() };
    let t = |kind: Kind, spec: ToolSpec| {
        Arc::new(JobTool { spec: spec.group(GROUP), kind, jobs: jobs.clone() }) as Arc<dyn Tool>
    };
    let id = || json!({"type": "string", "minLength": 1, "maxLength": 64, "description": "the job id: the full id or at least 4 characters of it"});
    vec![
        t(Kind::Create, ToolSpec::new("create_job", "Start a background job: `sandbox` (default) runs an agent on the task in `description`, its tool calls checked like yours; `command` runs `description` as one sandboxed command line; `claude_code` runs the Claude Code CLI on it. Returns the job id at once, or with `wait` the result (at most 660 s; the job goes on if it takes longer). `credentials` names stored secrets the job's commands get in their environment (a sandbox job's agent: in every `exec` it makes; never their values, which are redacted from what comes back).", json!({
            "type": "object", "additionalProperties": false, "required": ["title", "description"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE},
                "description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION, "description": "the task (sandbox), the command line (command) or the prompt (claude_code)"},
                "wait": {"type": "boolean", "default": false, "description": "wait for the job to end (at most 660 s)"},
                "mode": {"type": "string", "enum": ["sandbox", "command", "claude_code"], "default": "sandbox"},
                "project_dir": {"type": "string", "maxLength": 4096, "description": "working folder, relative to the workspace root"},
                "credentials": {"type": "array", "maxItems": MAX_CREDENTIALS, "description": "secrets for the job's commands (`exec` calls): a secret's name (given as the variable of that name in upper case, `-` and `.` as `_`), or {secret, env}", "items": {
                    "anyOf": [
                        {"type": "string", "minLength": 1, "maxLength": 128},
                        {"type": "object", "additionalProperties": false, "required": ["secret"], "properties": {
                            "secret": {"type": "string", "minLength": 1, "maxLength": 128},
                            "env": {"type": "string", "minLength": 1, "maxLength": 128},
                        }},
                    ],
                }},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::List, ToolSpec::new("list_jobs", "List your jobs, newest first: active (queued or running), completed, failed (failed or cancelled) or all.", json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "filter": {"type": "string", "enum": ["active", "completed", "failed", "all"], "default": "all"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
            },
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::Status, ToolSpec::new("job_status", "A job's state, timing and result (or why it failed).", json!({
            "type": "object", "additionalProperties": false, "required": ["job_id"],
            "properties": {"job_id": id()},
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::Cancel, ToolSpec::new("cancel_job", "Cancel a queued or running job of yours (needs approval).", json!({
            "type": "object", "additionalProperties": false, "required": ["job_id"],
            "properties": {"job_id": id()},
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::Events, ToolSpec::new("job_events", "A job's event log: state changes, model turns, tool calls with their outcome, output. Only the session that created the job can read it.", json!({
            "type": "object", "additionalProperties": false, "required": ["job_id"],
            "properties": {
                "job_id": id(),
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50, "description": "the last this many events"},
            },
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::Prompt, ToolSpec::new("job_prompt", "Send a message to a running `sandbox` job's agent, read before its next model turn; `done: true` closes its input. Needs approval; only the session that created the job.", json!({
            "type": "object", "additionalProperties": false, "required": ["job_id", "content"],
            "properties": {
                "job_id": id(),
                "content": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION},
                "done": {"type": "boolean", "default": false},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
    ]
}

/// What a job looks like in results. A running job says how long it has run: polling it is
/// progress, and the loop breaker only stops polls whose answers stopped changing.
pub(crate) fn job_json(j: &JobRecord) -> Value {
    let running_ms = match (j.started_ms, j.finished_ms) {
        (Some(started), None) => Some((super::now_ms() - started).max(0)),
        _ => None,
    };
    json!({
        "job_id": j.id, "title": j.title, "mode": j.mode, "state": j.state, "status": describe_state(j),
        "project_dir": j.project_dir, "credentials": j.credentials, "origin": j.origin,
        "result": j.result, "error": j.error, "agent_session": j.agent_session,
        "created_ms": j.created_ms, "started_ms": j.started_ms, "finished_ms": j.finished_ms,
        "running_ms": running_ms,
    })
}

fn err(e: JobError) -> ToolError {
    match e {
        JobError::NotFound(id) => {
            ToolError::NotFound { what: format!("job `{id}`"), hint: Some("list your jobs with list_jobs".to_owned()) }
        }
        other => ToolError::failed(other.to_string()),
    }
}

/// The job id parameter (the schema bounds it).
fn job_id(p: &Value) -> &str {
    p["job_id"].as_str().unwrap_or_default()
}

/// The `credentials` parameter: a name, or `{secret, env}`.
fn credentials(p: &Value) -> Result<Vec<Credential>, ToolError> {
    let Some(items) = p.get("credentials").and_then(Value::as_array) else { return Ok(Vec::new()) };
    items
        .iter()
        .map(|c| match c {
            Value::String(s) => Ok(Credential { secret: s.clone(), env: env_name(s) }),
            Value::Object(o) => {
                let secret = o.get("secret").and_then(Value::as_str).unwrap_or_default().to_owned();
                let env = o.get("env").and_then(Value::as_str).map_or_else(|| env_name(&secret), str::to_owned);
                Ok(Credential { secret, env })
            }
            _ => Err(ToolError::invalid(
                "create_job",
                "/credentials",
                "each credential is a secret's name or {secret, env}",
            )),
        })
        .collect()
}

/// A secret's name as a variable: upper case, `-` and `.` as `_`.
fn env_name(secret: &str) -> String {
    secret.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
}

/// The caller must be the session that created `job`.
fn owner_session(ctx: &CallContext, job: &JobRecord, what: &str) -> Result<(), ToolError> {
    if job.session == ctx.identity.session {
        return Ok(());
    }
    Err(ToolError::failed(format!(
        "only the session that created job `{}` can {what}; job_status shows its state and result to you",
        job.id
    )))
}

#[async_trait]
impl Tool for JobTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, p: &Value) -> CallSafety {
        match self.kind {
            Kind::Create if p["wait"] == true => {
                CallSafety { timeout: Some(WAIT_TIMEOUT + Duration::from_secs(15)), ..CallSafety::default() }
            }
            // Both are inspected first: a job that is not the caller's, or has ended, is refused
            // before a person is asked, and the request names the job.
            Kind::Cancel => CallSafety {
                approval_subject: Some(format!("cancel_job {}", job_id(p))),
                inspect: true,
                ..CallSafety::needs_approval(ApprovalRequirement::UnlessAutoApproved, Cow::Borrowed("cancels a job"))
            },
            Kind::Prompt => CallSafety {
                timeout: Some(Duration::from_secs(30)),
                inspect: true,
                ..CallSafety::needs_approval(
                    ApprovalRequirement::UnlessAutoApproved,
                    Cow::Borrowed("sends a message into a running job's agent"),
                )
            },
            Kind::List | Kind::Status | Kind::Events => CallSafety { read_only: true, ..CallSafety::default() },
            _ => CallSafety::default(),
        }
    }

    async fn inspect(&self, ctx: &CallContext, p: &Value) -> Result<Vec<String>, ToolError> {
        let job = self.jobs.get(&ctx.identity.user, job_id(p)).map_err(err)?;
        if matches!(self.kind, Kind::Prompt) {
            owner_session(ctx, &job, "prompt it")?;
        }
        if job.is_finished() {
            return Err(ToolError::failed(format!(
                "job `{}` already ended ({}); there is nothing to {}",
                job.id,
                describe_state(&job),
                if matches!(self.kind, Kind::Cancel) { "cancel" } else { "prompt" }
            )));
        }
        Ok(vec![format!("job `{}` ({}, {}): {}", job.id, job.mode, job.state, super::clip(&job.title, 100))])
    }

    async fn execute(&self, ctx: &CallContext, p: Value) -> Result<ToolOutput, ToolError> {
        let user = ctx.identity.user.as_str();
        let jobs = &self.jobs;
        match self.kind {
            Kind::Create => {
                let mode = match p["mode"].as_str() {
                    None => JobMode::Sandbox,
                    Some(m) => JobMode::parse(m)
                        .filter(|m| matches!(m, JobMode::Sandbox | JobMode::Command | JobMode::ClaudeCode))
                        .ok_or_else(|| {
                            ToolError::invalid("create_job", "/mode", "mode is one of sandbox, command, claude_code")
                        })?,
                };
                let req = JobRequest {
                    title: p["title"].as_str().unwrap_or_default().to_owned(),
                    description: p["description"].as_str().unwrap_or_default().to_owned(),
                    mode,
                    project_dir: p["project_dir"].as_str().map(str::to_owned),
                    credentials: credentials(&p)?,
                    origin: None,
                    agent: None,
                };
                let owner = JobOwner::of(ctx);
                if p["wait"] == true {
                    // The caller waits: run it here, whatever kind of process this is.
                    let id = jobs.submit_here(&owner, req).map_err(err)?;
                    let job = jobs.wait(&id, WAIT_TIMEOUT, &ctx.cancel).await.map_err(err)?;
                    let mut v = job_json(&job);
                    if !job.is_finished() {
                        v["note"] = json!("still running after the wait; follow it with job_status");
                    }
                    return Ok(ToolOutput::json(v));
                }
                let (id, placement) = jobs.submit(&owner, req).map_err(err)?;
                let job = jobs.get(user, &id).map_err(err)?;
                let mut v = job_json(&job);
                match placement {
                    Placement::Here => {
                        v["runs_in"] = json!("this server");
                        v["note"] = json!("started in the background; follow it with job_status or job_events");
                    }
                    Placement::Queued { runners } if !runners.is_empty() => {
                        v["runs_in"] = json!("a toolgate server on this workspace");
                        v["note"] = json!(format!(
                            "queued for the toolgate server running on this workspace ({} running), which picks it up \
                             within a second; follow it with job_status or job_events",
                            runners.len()
                        ));
                    }
                    Placement::Queued { .. } => {
                        v["runs_in"] = Value::Null;
                        v["note"] = json!(
                            "queued, but no toolgate server runs on this workspace to run it: it starts when one does \
                             (`toolgate serve` in this workspace), or cancel it and create it again with wait: true \
                             to run it in this process"
                        );
                    }
                }
                Ok(ToolOutput::json(v))
            }
            Kind::List => {
                let filter = p["filter"].as_str().unwrap_or("all");
                let states: &[&str] = match filter {
                    "active" => &["queued", "running"],
                    "completed" => &["completed"],
                    "failed" => &["failed", "cancelled"],
                    _ => &[],
                };
                let limit = p["limit"].as_u64().unwrap_or(50).clamp(1, 500) as usize;
                let list = jobs.list(user, states, limit).map_err(err)?;
                Ok(ToolOutput::json(json!({
                    "filter": filter,
                    "jobs": list.iter().map(|j| json!({
                        "job_id": j.id, "title": j.title, "mode": j.mode, "state": j.state,
                        "status": describe_state(j), "created_ms": j.created_ms, "finished_ms": j.finished_ms,
                    })).collect::<Vec<_>>(),
                })))
            }
            Kind::Status => Ok(ToolOutput::json(job_json(&jobs.get(user, job_id(&p)).map_err(err)?))),
            Kind::Cancel => {
                let job = jobs.cancel(user, job_id(&p)).await.map_err(err)?;
                Ok(ToolOutput::json(job_json(&job)))
            }
            Kind::Events => {
                let job = jobs.get(user, job_id(&p)).map_err(err)?;
                owner_session(ctx, &job, "read its events")?;
                let limit = p["limit"].as_u64().unwrap_or(50).clamp(1, 500) as usize;
                let events = jobs.events(&job.id, -1, limit).map_err(err)?;
                Ok(ToolOutput::json(json!({
                    "job_id": job.id, "state": job.state,
                    "events": events.iter().map(|e| json!({"seq": e.seq, "ts_ms": e.ts_ms, "kind": e.kind, "text": e.text})).collect::<Vec<_>>(),
                })))
            }
            Kind::Prompt => {
                let job = jobs.get(user, job_id(&p)).map_err(err)?;
                owner_session(ctx, &job, "prompt it")?;
                let content = p["content"].as_str().unwrap_or_default();
                let note = jobs.prompt(&job, content, p["done"] == true).await.map_err(err)?;
                Ok(ToolOutput::json(json!({"job_id": job.id, "status": "queued", "note": note})))
            }
        }
    }
}
