//! Jobs of one tool call (mode `tool`): what an MCP client's task runs on
//! (`io.modelcontextprotocol/tasks`). The call goes through the gate as the job's owner, like
//! every job's calls, and its whole result (content, structured copy, facts for programs, or the
//! tool's error) is kept on the record, so the task's result is the one a plain call gives.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{ToolError, ToolOutput};
use toolgate_store::JobRecord;

use super::{Inner, JobError, JobOwner, Jobs, Live, clip, job_context, now_ms, run};

/// The mode of a one-call job, on its record.
pub const TOOL_MODE: &str = "tool";

/// The tools run as MCP tasks unless `[automation] task_tools` says otherwise: those that run
/// commands, agents or builds for minutes.
pub const DEFAULT_TASK_TOOLS: &[&str] = &["exec", "execute_code", "create_job", "build_software", "delegate"];

/// How a one-call job's call ended, read back from its record.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool's result.
    Output(ToolOutput),
    /// The tool's error: its kind ([`ToolError::kind`]) and text.
    Error {
        /// `denied`, `timeout`, ...
        kind: String,
        /// What the model reads.
        message: String,
    },
}

/// Parameter names whose values are never written to a record's description (`exec`'s `env`
/// holds credentials; the others are the usual names of secrets).
const SECRET_KEYS: &[&str] = &["env", "headers", "password", "token", "secret", "api_key", "authorization"];

impl Jobs {
    /// Stores a job that makes one call, `tool(params)`, as `owner`, and starts it in the
    /// background; returns its id. The record's description shows the call with the values of
    /// secret-looking parameters left out; the parameters themselves stay in memory.
    pub fn submit_call(&self, owner: &JobOwner, tool: &str, params: Value) -> Result<String, JobError> {
        let inner = &self.inner;
        if tool.trim().is_empty() || tool.len() > 128 {
            return Err(JobError::Invalid("tool: give the name of the tool to call".to_owned()));
        }
        if !params.is_object() {
            return Err(JobError::Invalid("params: give the call's parameters as a JSON object".to_owned()));
        }
        let caller = inner.setup.agents.as_ref().and_then(|rt| rt.tool_caller()).ok_or_else(|| {
            JobError::Unavailable("this gate cannot run calls in the background (no tool caller is bound)".to_owned())
        })?;
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let record = JobRecord {
            id: id.clone(),
            user: owner.user.clone(),
            session: owner.session.clone(),
            title: clip(&format!("{tool} (MCP task)"), super::MAX_TITLE),
            description: describe(tool, &params),
            mode: TOOL_MODE.to_owned(),
            origin: Some("mcp-task".to_owned()),
            state: "queued".to_owned(),
            created_ms: now,
            lease_owner: Some(inner.lease_owner.clone()),
            lease_until_ms: Some(now + inner.setup.config.lease().as_millis() as i64),
            ..JobRecord::default()
        };
        inner.setup.store.job_create(&record)?;
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        inner
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), Live { cancel: cancel.clone(), done: done_rx, input_closed: false });
        Inner::ensure_heartbeat(inner);
        let inner = Arc::clone(inner);
        let (owner, tool, job) = (owner.clone(), tool.to_owned(), id.clone());
        tokio::spawn(async move {
            run_call(&inner, &job, &owner, caller, &tool, params, &cancel).await;
            inner.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&job);
            let _ = done_tx.send(true);
            run::announce(&inner, &job);
        });
        Ok(id)
    }

    /// How a one-call job's call ended, once it did (`None` for other jobs, a job still running,
    /// or one that ended without an answer: cancelled, interrupted).
    pub fn call_outcome(job: &JobRecord) -> Option<CallOutcome> {
        if job.mode != TOOL_MODE || !job.is_finished() {
            return None;
        }
        let kept: Value = serde_json::from_str(job.result.as_deref()?).ok()?;
        if let Some(output) = kept.get("output") {
            return serde_json::from_value(output.clone()).ok().map(CallOutcome::Output);
        }
        let error = kept.get("error")?;
        Some(CallOutcome::Error {
            kind: error.get("kind")?.as_str()?.to_owned(),
            message: error.get("message")?.as_str()?.to_owned(),
        })
    }
}

/// Runs the call and records how it ended; a cancellation (`cancel_job`, `tasks/cancel`, the
/// server stopping) drops the call, which kills its processes.
async fn run_call(
    inner: &Inner,
    id: &str,
    owner: &JobOwner,
    caller: Arc<dyn toolgate_agent::ToolCaller>,
    tool: &str,
    params: Value,
    cancel: &CancellationToken,
) {
    let store = &inner.setup.store;
    let permit = tokio::select! {
        p = inner.slots.clone().acquire_owned() => p.ok(),
        () = cancel.cancelled() => None,
    };
    if permit.is_none() {
        return;
    }
    match store.job_start(id, &inner.lease_owner, now_ms()) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            let _ = store.job_finish(id, "failed", None, Some(&format!("could not start: {e}")), now_ms());
            return;
        }
    }
    let ctx = job_context(&*caller, owner, id, cancel);
    let _ = store.job_event(id, "tool_call", &clip(&describe(tool, &params), 4_000), now_ms());
    let result = tokio::select! {
        r = caller.call(&ctx, tool, params) => r,
        () = cancel.cancelled() => Err(ToolError::Cancelled),
    };
    // The output passed the gate's output stage (leaks redacted) like a plain call's.
    let written = match result {
        _ if cancel.is_cancelled() => store.job_finish(id, "cancelled", None, Some("cancelled"), now_ms()),
        Ok(output) => {
            let _ = store.job_event(id, "output", &clip(&output.text_content(), 4_000), now_ms());
            let kept = json!({ "output": output }).to_string();
            store.job_finish(id, "completed", Some(&kept), None, now_ms())
        }
        Err(e) => {
            let message = e.to_string();
            let kept = json!({ "error": { "kind": e.kind(), "message": message } }).to_string();
            store.job_finish(id, "failed", Some(&kept), Some(&message), now_ms())
        }
    };
    if let Err(e) = written {
        tracing::warn!(job = id, "job end not saved: {e}");
    }
}

/// `tool {params}` for the record, secret-looking values left out, at most 2,000 characters.
fn describe(tool: &str, params: &Value) -> String {
    let mut shown = params.clone();
    if let Some(map) = shown.as_object_mut() {
        for (key, value) in map.iter_mut() {
            let k = key.to_ascii_lowercase();
            if SECRET_KEYS.iter().any(|s| k.contains(s)) {
                *value = Value::String("[not kept]".to_owned());
            }
        }
    }
    clip(&format!("{tool} {shown}"), 2_000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn descriptions_leave_secret_values_out() {
        let d = describe("exec", &json!({"command": "make", "env": {"TOKEN": "s3cr3t"}, "API_KEY": "k"}));
        assert!(d.starts_with("exec ") && d.contains("make"), "{d}");
        assert!(!d.contains("s3cr3t") && !d.contains("\"k\""), "{d}");
    }

    #[test]
    fn outcomes_read_back_from_records() {
        let mut job = JobRecord { mode: TOOL_MODE.into(), state: "completed".into(), ..JobRecord::default() };
        let out = ToolOutput::text("hi").with_meta(json!({"exit_code": 0}));
        job.result = Some(json!({ "output": out }).to_string());
        assert_eq!(Jobs::call_outcome(&job), Some(CallOutcome::Output(out)));
        job.state = "failed".into();
        job.result = Some(json!({"error": {"kind": "denied", "message": "no"}}).to_string());
        assert_eq!(Jobs::call_outcome(&job), Some(CallOutcome::Error { kind: "denied".into(), message: "no".into() }));
        job.result = None;
        assert_eq!(Jobs::call_outcome(&job), None, "interrupted: no answer");
        job.mode = "command".into();
        job.result = Some("plain".into());
        assert_eq!(Jobs::call_outcome(&job), None);
    }
}
