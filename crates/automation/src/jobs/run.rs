//! Running one job: checking a request before anything is stored (`prepare`), then the job in
//! its mode (`run`), every tool call through the gate as the job's owner, and `prompt`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_agent::{Event, EventSink, RunSpec, RunStatus, ToolCaller};
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_store::{JobRecord, JobStore};

use super::credentials::CredentialCaller;
use super::{
    Credential, DecisionStream, Inner, JobError, JobFinished, JobMode, JobOwner, JobRequest, MAX_CREDENTIALS,
    MAX_DESCRIPTION, MAX_TITLE, clip, confine_dir, job_context, now_ms,
};

/// Agent sessions of jobs remembered for their calls' decision traces.
const MAX_TRACKED_SESSIONS: usize = 4_096;

/// The most of one event's text kept in the log.
const EVENT_MAX_CHARS: usize = 4_000;

/// What `prepare` resolved: kept in memory only (credential values never reach the store).
pub(crate) struct Prepared {
    /// The working directory, relative to the workspace root.
    pub project_dir: String,
    /// Credential variables and their values.
    env: Vec<(String, String)>,
    /// The agent of a `sandbox` job.
    agent: Option<String>,
    /// The `claude` executable of a `claude_code` job.
    claude: Option<PathBuf>,
    /// The tool and parameters of a `tool` job.
    tool: Option<(String, Value)>,
}

/// Variables a credential may not set: they change what runs, not what it may reach.
const RESERVED_ENV: &[&str] = &["PATH", "HOME", "SHELL", "BASH_ENV", "ENV", "IFS", "PWD", "TMPDIR"];

/// Checks `req` and resolves what the job needs, before anything is stored: a bad request is
/// refused with what was wrong, not left as a failed job.
pub(crate) fn prepare(inner: &Inner, owner: &JobOwner, req: &JobRequest) -> Result<Prepared, JobError> {
    let title = req.title.trim();
    if title.is_empty() || title.chars().count() > MAX_TITLE {
        return Err(JobError::Invalid(format!("title: give 1 to {MAX_TITLE} characters")));
    }
    if req.description.trim().is_empty() || req.description.chars().count() > MAX_DESCRIPTION {
        return Err(JobError::Invalid(format!(
            "description: give 1 to {MAX_DESCRIPTION} characters saying what the job does"
        )));
    }
    let project_dir = confine_dir(&inner.setup.workspace, req.project_dir.as_deref().unwrap_or(""))?;
    let env = credentials(inner, owner, &req.credentials)?;
    let mut prepared = Prepared { project_dir, env, agent: None, claude: None, tool: None };
    match req.mode {
        JobMode::Sandbox | JobMode::Lightweight => {
            // A sandbox job's agent gets them in its `exec` calls' `env`, added after the model
            // wrote the call (`credentials.rs`); a lightweight one calls no tools.
            if req.mode == JobMode::Lightweight && !prepared.env.is_empty() {
                return Err(JobError::Invalid(
                    "credentials go to `sandbox`, `command` and `claude_code` jobs: a `lightweight` job calls no \
                     tools"
                        .to_owned(),
                ));
            }
            let rt = inner.setup.agents.as_ref().filter(|rt| rt.tool_caller().is_some()).ok_or_else(no_agent)?;
            let names: Vec<&String> = rt.config().agents.keys().collect();
            let agent = match (&req.agent, &inner.setup.config.agent) {
                (Some(a), _) | (None, Some(a)) => a.clone(),
                (None, None) if names.len() == 1 => names[0].clone(),
                (None, None) if names.is_empty() => return Err(no_agent()),
                (None, None) => {
                    return Err(JobError::Unavailable(format!(
                        "several agents are configured ({}): set which runs jobs with [automation.jobs] agent = \"NAME\"",
                        names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    )));
                }
            };
            if !rt.config().agents.contains_key(&agent) {
                return Err(JobError::Unavailable(format!(
                    "no agent `{}` is configured; configured: {}",
                    clip(&agent, 60),
                    names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
            prepared.agent = Some(agent);
        }
        JobMode::Command => {
            caller(inner)?;
        }
        JobMode::Tool => {
            caller(inner)?;
            if !prepared.env.is_empty() {
                return Err(JobError::Invalid(
                    "credentials go to `command` and `claude_code` jobs only; a `tool` job's parameters are its own"
                        .to_owned(),
                ));
            }
            prepared.tool = Some(tool_call(&req.description)?);
        }
        JobMode::ClaudeCode => {
            caller(inner)?;
            prepared.claude = Some(claude_bin(inner)?);
        }
    }
    Ok(prepared)
}

/// A `tool` job's description: `{"tool": NAME, "params": {...}}`.
fn tool_call(description: &str) -> Result<(String, Value), JobError> {
    let bad = || {
        JobError::Invalid(
            "a `tool` job's description is {\"tool\": NAME, \"params\": {...}}: the tool to call and its parameters"
                .to_owned(),
        )
    };
    let v: Value = serde_json::from_str(description).map_err(|_| bad())?;
    let tool = v.get("tool").and_then(Value::as_str).filter(|t| !t.is_empty() && t.len() <= 128).ok_or_else(bad)?;
    let params = v.get("params").cloned().unwrap_or_else(|| json!({}));
    if !params.is_object() {
        return Err(bad());
    }
    Ok((tool.to_owned(), params))
}

fn no_agent() -> JobError {
    JobError::Unavailable(
        "`sandbox` jobs run an agent, and none is configured: add a model and an agent to toolgate.toml, for example\n\
         [providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\n\n[agents.main]\ndescription = \"Does the work\"\n\
         provider = \"local\"\nmodel = \"qwen2.5-coder\"\n\n(or use mode `command` for one command line)"
            .to_owned(),
    )
}

/// The gate, through the agent runtime's tool caller.
fn caller(inner: &Inner) -> Result<Arc<dyn ToolCaller>, JobError> {
    inner.setup.agents.as_ref().and_then(|rt| rt.tool_caller()).ok_or_else(|| {
        JobError::Unavailable("jobs need the gate's agent runtime, which this gate does not have".to_owned())
    })
}

/// The `claude` executable: configured, else on `PATH`.
fn claude_bin(inner: &Inner) -> Result<PathBuf, JobError> {
    let missing = || {
        JobError::Unavailable(
            "`claude_code` jobs run the `claude` CLI (Claude Code), which is not installed here: install it \
             (npm install -g @anthropic-ai/claude-code) or set [automation.jobs] claude_bin = \"/path/to/claude\"; \
             or use mode `sandbox` (an agent of toolgate's own) or `command`"
                .to_owned(),
        )
    };
    if let Some(p) = &inner.setup.config.claude_bin {
        return p.is_file().then(|| p.clone()).ok_or_else(missing);
    }
    let path = std::env::var_os("PATH").ok_or_else(missing)?;
    std::env::split_paths(&path).map(|d| d.join("claude")).find(|p| p.is_file()).ok_or_else(missing)
}

/// Each credential's variable and value, from the secrets store.
fn credentials(inner: &Inner, owner: &JobOwner, creds: &[Credential]) -> Result<Vec<(String, String)>, JobError> {
    if creds.is_empty() {
        return Ok(Vec::new());
    }
    if creds.len() > MAX_CREDENTIALS {
        return Err(JobError::Invalid(format!("credentials: at most {MAX_CREDENTIALS}")));
    }
    let secrets = inner.setup.secrets.as_ref().ok_or_else(|| {
        JobError::Unavailable("credentials come from the secrets store, and this gate keeps no state database".into())
    })?;
    let mut out: Vec<(String, String)> = Vec::new();
    for c in creds {
        if !toolgate_tools::custom::valid_secret_name(&c.secret) {
            return Err(JobError::Invalid(format!(
                "credentials: `{}` is not a secret name (1 to 128 of a-z, A-Z, 0-9, `_`, `-`, `.`)",
                clip(&c.secret, 60)
            )));
        }
        let valid_env = !c.env.is_empty()
            && c.env.len() <= 128
            && c.env
                .chars()
                .enumerate()
                .all(|(i, ch)| ch == '_' || ch.is_ascii_alphabetic() || (i > 0 && ch.is_ascii_digit()));
        if !valid_env || RESERVED_ENV.contains(&c.env.as_str()) || c.env.starts_with("LD_") {
            return Err(JobError::Invalid(format!(
                "credentials: `{}` cannot be the variable of a credential (a name of A-Z, 0-9, `_`, not PATH, HOME, LD_*)",
                clip(&c.env, 60)
            )));
        }
        // A team gateway's own store holds its admin's secrets, not its users': nobody gave them
        // to a caller the gateway admitted. A per-user workspace's store is that user's own.
        if owner.grants.is_some() && inner.setup.config.shared_gateway {
            return Err(JobError::Invalid(format!(
                "credentials: `{}` would come from this team gateway's own secrets store, which is its admin's and \
                 not given to its users, so a job of `{}` cannot name it. Per-user workspaces give each user a store \
                 of their own: the admin sets [gateway] workspaces = \"users\" and stores the secret in yours with \
                 `printf %s \"$VALUE\" | toolgate --workspace users/{} tools secret {}`",
                c.secret,
                clip(&owner.user, 64),
                clip(&owner.user, 64),
                c.secret,
            )));
        }
        if out.iter().any(|(k, _)| *k == c.env) {
            return Err(JobError::Invalid(format!("credentials: the variable `{}` is given twice", c.env)));
        }
        let value = secrets
            .secret(&c.secret)
            .map_err(|e| JobError::Unavailable(format!("credentials: secret `{}`: {e}", c.secret)))?
            .ok_or_else(|| {
                JobError::Invalid(format!(
                    "credentials: no secret `{}` is stored; store it with `printf %s \"$VALUE\" | toolgate tools secret {}`",
                    c.secret, c.secret
                ))
            })?;
        out.push((c.env.clone(), value));
    }
    Ok(out)
}

/// Writes the job's events, with credential values and anything the leak detector finds
/// redacted, each cut to [`EVENT_MAX_CHARS`].
#[derive(Clone)]
struct Log {
    store: Arc<dyn JobStore>,
    job: String,
    caller: Option<Arc<dyn ToolCaller>>,
    ctx: Option<CallContext>,
    secrets: Arc<Vec<(String, String)>>,
}

impl Log {
    /// `text` with every credential value and what the gate's leak detector finds redacted.
    fn redact(&self, text: &str) -> String {
        let text = super::credentials::redact(&self.secrets, text);
        match (&self.caller, &self.ctx) {
            (Some(caller), Some(ctx)) => caller.scrub(ctx, &text),
            _ => text,
        }
    }

    fn write(&self, kind: &str, text: &str) {
        let text = self.redact(&clip(text, EVENT_MAX_CHARS));
        if let Err(e) = self.store.job_event(&self.job, kind, &text, now_ms()) {
            tracing::warn!(job = self.job, "job event not saved: {e}");
        }
    }
}

/// Runs the job to its end and records how it ended.
pub(crate) async fn run(
    inner: &Arc<Inner>,
    record: JobRecord,
    owner: JobOwner,
    prepared: Prepared,
    cancel: CancellationToken,
) {
    let store = inner.setup.store.clone();
    let id = record.id.clone();
    // Waits queued for a slot (or its cancellation).
    let permit = tokio::select! {
        p = inner.slots.clone().acquire_owned() => p.ok(),
        () = cancel.cancelled() => None,
    };
    if permit.is_none() {
        announce(inner, &id);
        return;
    }
    match store.job_start(&id, &inner.lease_owner, now_ms()) {
        Ok(true) => {}
        // Cancelled first, or its lease lapsed: it is not run.
        Ok(false) => return announce(inner, &id),
        Err(e) => {
            let _ = store.job_finish(&id, "failed", None, Some(&format!("could not start: {e}")), now_ms());
            return announce(inner, &id);
        }
    }
    let decisions = Decisions::open(inner, &id);
    let caller = inner.setup.agents.as_ref().and_then(|rt| rt.tool_caller());
    let ctx = caller.as_ref().map(|c| job_context(&**c, &owner, &id, &cancel));
    let log = Log {
        store: store.clone(),
        job: id.clone(),
        caller: caller.clone(),
        ctx: ctx.clone(),
        secrets: Arc::new(prepared.env.clone()),
    };
    let ended = match (record.mode.as_str(), caller, ctx) {
        (_, None, _) | (_, _, None) => Err("the gate is gone (the server is stopping)".to_owned()),
        ("sandbox", Some(_), Some(ctx)) => run_agent(inner, &record, &prepared, &ctx, &cancel, &log, false).await,
        ("lightweight", Some(_), Some(ctx)) => run_agent(inner, &record, &prepared, &ctx, &cancel, &log, true).await,
        ("tool", Some(caller), Some(ctx)) => match &prepared.tool {
            Some((tool, params)) => run_tool(&*caller, &ctx, tool, params.clone(), &log).await,
            None => Err("the job names no tool".to_owned()),
        },
        ("claude_code", Some(caller), Some(ctx)) => {
            let bin = prepared.claude.clone().unwrap_or_else(|| PathBuf::from("claude"));
            let line =
                format!("{} -p {} --output-format text", quote(&bin.to_string_lossy()), quote(&record.description));
            run_exec(&*caller, &ctx, &line, &prepared, &log).await
        }
        (_, Some(caller), Some(ctx)) => run_exec(&*caller, &ctx, &record.description, &prepared, &log).await,
    };
    // Its calls' decisions are in its log before its end is.
    if let Some(d) = decisions {
        d.close(inner).await;
    }
    let now = now_ms();
    // A result or error is kept and shown like an event: without credential values.
    let ended = ended.map(|r| log.redact(&r)).map_err(|e| log.redact(&e));
    let written = match ended {
        _ if cancel.is_cancelled() => store.job_finish(&id, "cancelled", None, Some("cancelled"), now),
        Ok(result) => store.job_finish(&id, "completed", Some(&result), None, now),
        Err(error) => store.job_finish(&id, "failed", None, Some(&error), now),
    };
    if let Err(e) = written {
        tracing::warn!(job = id, "job end not saved: {e}");
    }
    drop(permit);
    announce(inner, &id);
}

/// A job's own forwarding of the gate's decisions, where no server's task forwards them (the
/// process runs no [`super::Jobs::serve`]): subscribed before the job's first call, so none is
/// missed, and drained before the job's end is written.
struct Decisions {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Box<dyn DecisionStream>>,
    job: String,
}

impl Decisions {
    fn open(inner: &Arc<Inner>, job: &str) -> Option<Decisions> {
        if inner.served.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let mut stream = (inner.decisions.get()?)();
        let stop = CancellationToken::new();
        let (until, forward, id) = (stop.clone(), Arc::clone(inner), job.to_owned());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    d = stream.next() => match d {
                        Some(d) => forward.call_decided(&d, Some(&id)),
                        None => break,
                    },
                    () = until.cancelled() => break,
                }
            }
            stream
        });
        Some(Decisions { stop, task, job: job.to_owned() })
    }

    /// Stops the forwarding and writes what is still waiting: the gate publishes a call's
    /// decision before the call returns, so every call the job made is in by now.
    async fn close(self, inner: &Inner) {
        self.stop.cancel();
        if let Ok(mut stream) = self.task.await {
            while let Some(d) = stream.try_next() {
                inner.call_decided(&d, Some(&self.job));
            }
        }
    }
}

/// Tells subscribers how job `id` ended.
pub(super) fn announce(inner: &Inner, id: &str) {
    if let Ok(Some(j)) = inner.setup.store.job(id) {
        let _ = inner.finished.send(JobFinished {
            id: j.id,
            user: j.user,
            origin: j.origin,
            state: j.state,
            result: j.result,
            error: j.error,
        });
    }
}

/// A `sandbox` job: the agent's run, its turns and tool calls written to the log as they happen.
async fn run_agent(
    inner: &Inner,
    record: &JobRecord,
    prepared: &Prepared,
    ctx: &CallContext,
    cancel: &CancellationToken,
    log: &Log,
    lightweight: bool,
) -> Result<String, String> {
    let rt = inner.setup.agents.as_ref().ok_or("no agent runtime")?;
    let agent = prepared.agent.clone().ok_or("no agent")?;
    let session = uuid::Uuid::new_v4().to_string();
    if let Err(e) = inner.setup.store.job_set_session(&record.id, &session) {
        tracing::warn!(job = record.id, "job session not saved: {e}");
    }
    // Its calls' decision traces reach the job's log by this session (`Jobs::call_decided`).
    // Kept after the run: the gate's events are forwarded by another task and may come later;
    // bounded, the oldest sessions' last events are what a full map loses.
    {
        let mut sessions = inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_TRACKED_SESSIONS {
            sessions.clear();
        }
        sessions.insert(session.clone(), record.id.clone());
    }
    let mut task = format!("# Background job: {}\n\n{}", record.title, record.description);
    if !prepared.project_dir.is_empty() {
        task.push_str(&format!("\n\nWork in the folder `{}` (relative to the workspace root).", prepared.project_dir));
    }
    let sink_log = log.clone();
    // A lightweight run is one model answer with no tools offered; a model that asks for one
    // anyway (the gate's caller refuses a tool it was not offered) ends the run there.
    let run_cancel = cancel.child_token();
    let asked_for_tools = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stop, asked) = (run_cancel.clone(), Arc::clone(&asked_for_tools));
    let sink: EventSink = Arc::new(move |e: &Event<'_>| match e {
        Event::Assistant { text, calls, .. } => {
            if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
                sink_log.write("model", t);
            }
            for c in calls.iter() {
                sink_log.write("tool_call", &format!("{} {}", c.name, c.arguments));
            }
            if lightweight && !calls.is_empty() {
                asked.store(true, std::sync::atomic::Ordering::Release);
                stop.cancel();
            }
        }
        Event::ToolResult { call, is_error, content, .. } => {
            let head = if *is_error { "error" } else { "ok" };
            sink_log.write("tool_result", &format!("{} {head}: {content}", call.name));
        }
        _ => {}
    });
    let mut spec = RunSpec::new(agent, task);
    spec.label = Some(clip(&record.title, 80));
    spec.events = Some(sink);
    if !prepared.env.is_empty() {
        let gate = rt.tool_caller().ok_or("the gate is gone (the server is stopping)")?;
        spec.tool_caller = Some(Arc::new(CredentialCaller::new(gate, Arc::clone(&log.secrets))));
    }
    if lightweight {
        spec.only_tools = Some(Vec::new());
        spec.max_turns = Some(1);
    }
    let mut ctx = ctx.clone();
    ctx.cancel = run_cancel.clone();
    let outcome = rt.run_until(spec, &ctx, session, &run_cancel).await.map_err(|e| e.to_string())?;
    if asked_for_tools.load(std::sync::atomic::Ordering::Acquire) && !cancel.is_cancelled() {
        return Err("the model asked to call tools in a lightweight run, which offers none: nothing was called and \
                    the run ended after its one answer"
            .to_owned());
    }
    match outcome.status {
        RunStatus::Done => Ok(outcome.answer),
        RunStatus::Cancelled => Err("cancelled".to_owned()),
        status => Err(format!(
            "the agent stopped ({}){}",
            status.as_str(),
            outcome.error.map(|e| format!(": {e}")).unwrap_or_default()
        )),
    }
}

/// A `command` or `claude_code` job: one `exec` call through the gate, with the credentials in
/// its `env` (which exec treats as secrets: redacted in audit rows and approval requests).
async fn run_exec(
    caller: &dyn ToolCaller,
    ctx: &CallContext,
    command: &str,
    prepared: &Prepared,
    log: &Log,
) -> Result<String, String> {
    let mut params = json!({ "command": command });
    if !prepared.project_dir.is_empty() {
        params["workdir"] = json!(prepared.project_dir);
    }
    if !prepared.env.is_empty() {
        let env: serde_json::Map<String, Value> =
            prepared.env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        params["env"] = Value::Object(env);
    }
    log.write("tool_call", &format!("exec {}", clip(command, 2_000)));
    match caller.call(ctx, "exec", params).await {
        Ok(out) => {
            let text = out.text_content();
            log.write("output", &text);
            match exit_code(&out) {
                Some(0) | None => Ok(text),
                Some(code) => Err(format!("the command exited with code {code}:\n{}", clip(&text, 4_000))),
            }
        }
        Err(ToolError::Cancelled) => Err("cancelled".to_owned()),
        Err(e) => {
            let text = e.to_string();
            log.write("tool_result", &format!("exec error: {text}"));
            Err(text)
        }
    }
}

/// A `tool` job: one call through the gate as the job's owner.
async fn run_tool(
    caller: &dyn ToolCaller,
    ctx: &CallContext,
    tool: &str,
    params: Value,
    log: &Log,
) -> Result<String, String> {
    log.write("tool_call", &format!("{tool} {}", clip(&params.to_string(), 2_000)));
    match caller.call(ctx, tool, params).await {
        Ok(out) => {
            let text = out.text_content();
            log.write("output", &text);
            Ok(text)
        }
        Err(ToolError::Cancelled) => Err("cancelled".to_owned()),
        Err(e) => {
            let text = e.to_string();
            log.write("tool_result", &format!("{tool} error: {text}"));
            Err(text)
        }
    }
}

fn exit_code(out: &ToolOutput) -> Option<i64> {
    out.meta.as_ref().and_then(|m| m.get("exit_code")).and_then(Value::as_i64)
}

/// `s` as one single-quoted shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `job_prompt`: `content` into a running `sandbox` job's agent session.
pub(crate) async fn prompt(inner: &Inner, job: &JobRecord, content: &str, done: bool) -> Result<String, JobError> {
    if job.is_finished() {
        return Err(JobError::Invalid(format!(
            "job `{}` already ended ({}); it takes no more input",
            job.id, job.state
        )));
    }
    if job.mode != "sandbox" {
        return Err(JobError::Invalid(format!(
            "job `{}` runs a {} non-interactively and takes no input; cancel it and create another instead",
            job.id,
            if job.mode == "command" { "command" } else { "`claude -p` prompt" }
        )));
    }
    if content.trim().is_empty() {
        return Err(JobError::Invalid("content: give the text to send".to_owned()));
    }
    {
        let live = inner.live.lock().unwrap_or_else(|e| e.into_inner());
        match live.get(&job.id) {
            None => {
                return Err(JobError::Unavailable(format!(
                    "job `{}` runs in another toolgate process; prompt it through that server",
                    job.id
                )));
            }
            Some(l) if l.input_closed => {
                return Err(JobError::Invalid(format!(
                    "job `{}`'s input was closed (a prompt with done: true); it takes no more input",
                    job.id
                )));
            }
            Some(_) => {}
        }
    }
    let rt = inner.setup.agents.as_ref().ok_or_else(|| JobError::Unavailable("no agent runtime".into()))?;
    let session =
        inner.setup.store.job(&job.id)?.and_then(|j| j.agent_session).ok_or_else(|| {
            JobError::Unavailable(format!("job `{}` has not started its agent yet; try again", job.id))
        })?;
    let queued = rt.send_queued(&session, content).await.map_err(|e| JobError::Invalid(e.to_string()))?;
    if queued.is_none() {
        return Err(JobError::Unavailable(format!(
            "job `{}`'s agent is not running a turn now (it is finishing); read job_status",
            job.id
        )));
    }
    let _ = inner.setup.store.job_event(&job.id, "prompt", &clip(content, EVENT_MAX_CHARS), now_ms());
    if done {
        if let Some(l) = inner.live.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&job.id) {
            l.input_closed = true;
        }
        let _ = inner.setup.store.job_event(&job.id, "input", "closed", now_ms());
    }
    Ok(if done {
        "queued for the job's agent (read before its next model turn); its input is now closed".to_owned()
    } else {
        "queued for the job's agent (read before its next model turn)".to_owned()
    })
}
