//! Background jobs: [`Jobs`] (submit, get, list, cancel, wait, prompt, and a broadcast of
//! finished jobs) and the six tools `create_job`, `list_jobs`, `job_status`, `cancel_job`,
//! `job_events`, `job_prompt` (seed 004 §4.8).
//!
//! A job is a record in the store ([`toolgate_store::JobStore`]) with an owner (user and the
//! session that created it), a mode, and a state that only moves forward (`queued → running →
//! completed | failed | cancelled`). Every tool call a job makes goes through the gate (the agent
//! runtime's [`ToolCaller`]) with its owner's identity, so a background job gets exactly the
//! policy, approvals, sandbox and audit of an interactive call. A long-lived server
//! ([`Jobs::serve`]) runs the jobs it creates and claims the ones a short-lived process (the
//! CLI) left queued without a lease; a process that runs a job holds its lease, renewed by one
//! heartbeat for all its jobs; a job whose lease lapsed (its process died) is ended as
//! `failed: interrupted` by the next sweep ([`sweep_interrupted`]) and never run again.
//!
//! Layout: `mod.rs` (the API and its types), `run.rs` (running one job in its mode),
//! `tools.rs` (the six tools).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use toolgate_agent::{Runtime, ToolCaller};
use toolgate_core::{CallContext, CallGrants, Identity};
use toolgate_store::{JobEvent, JobFilter, JobRecord, JobStore, StoreError};
use toolgate_tools::custom::SecretSource;

pub(crate) use crate::text::clip;

mod credentials;
mod run;
mod tasks;
mod tools;

pub use tasks::{CallOutcome, DEFAULT_TASK_TOOLS, TOOL_MODE};
pub(crate) use tools::tools;

/// How often a server looks for queued jobs to claim.
pub const CLAIM_EVERY: Duration = Duration::from_millis(250);

/// How long `wait` blocks at most (seed 004 §4.8: `execution_timeout` is 660 s).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(660);

/// The longest title, description, prompt and project path a job takes.
pub const MAX_TITLE: usize = 200;
/// See [`MAX_TITLE`].
pub const MAX_DESCRIPTION: usize = 100_000;
/// Credentials one job may name.
pub const MAX_CREDENTIALS: usize = 16;

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobMode {
    /// A background agent session on the agent runtime; its tool calls go through the gate.
    #[default]
    Sandbox,
    /// One command line, run by the gate's `exec` tool (in the sandbox).
    Command,
    /// The `claude` CLI (Claude Code) run with the description as its prompt, through `exec`.
    ClaudeCode,
    /// One model answer on the agent runtime, with no tools offered (a routine's `lightweight`
    /// action).
    Lightweight,
    /// One tool call through the gate: `description` is `{"tool": NAME, "params": {...}}` (a
    /// routine's `tool` action).
    Tool,
}

impl JobMode {
    /// Its name in parameters and records.
    pub fn as_str(self) -> &'static str {
        match self {
            JobMode::Sandbox => "sandbox",
            JobMode::Command => "command",
            JobMode::ClaudeCode => "claude_code",
            JobMode::Lightweight => "lightweight",
            JobMode::Tool => "tool",
        }
    }

    /// The mode named `s`.
    pub fn parse(s: &str) -> Option<JobMode> {
        match s {
            "sandbox" => Some(JobMode::Sandbox),
            "command" => Some(JobMode::Command),
            "claude_code" => Some(JobMode::ClaudeCode),
            "lightweight" => Some(JobMode::Lightweight),
            "tool" => Some(JobMode::Tool),
            _ => None,
        }
    }
}

/// One credential a job's commands get: the secret `secret` (from the secrets store, as
/// `toolgate tools secret NAME` stores it) in the environment variable `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The secret's name.
    pub secret: String,
    /// The variable it is given in.
    pub env: String,
}

/// What a job's record keeps so that a process that did not create it can run it
/// ([`JobRecord::spec`], table `job_specs`): names only, never a secret's value.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct StoredSpec {
    /// The agent name the owner's calls carry.
    #[serde(default)]
    owner_agent: String,
    /// The agent of a `sandbox` or `lightweight` job, when the request named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    /// Each credential's secret and variable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    credentials: Vec<(String, String)>,
}

/// Where a job submitted with [`Jobs::submit`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// In this process (a long-lived server, or a caller that waits for it).
    Here,
    /// Queued for a long-lived `toolgate serve` on the workspace; these announce themselves,
    /// and none may be running (`runners` empty: it waits until one starts).
    Queued {
        /// The servers running jobs on this workspace now.
        runners: Vec<String>,
    },
}

/// Who a job belongs to and acts as.
#[derive(Debug, Clone)]
pub struct JobOwner {
    /// The user: every tool call of the job is made as this user.
    pub user: String,
    /// The agent name its calls carry.
    pub agent: String,
    /// The session that created it: only it may read the job's events and prompt it.
    pub session: String,
    /// The team gateway's grants the creating call was admitted under: every call the job
    /// makes is checked against them, as its creator's own calls are (a job is never a way
    /// around them). In memory only: such a job runs in the server that admitted the call.
    pub grants: Option<Arc<dyn CallGrants>>,
}

impl JobOwner {
    /// The owner a call with `ctx` creates jobs as (with the gateway grants it carries).
    pub fn of(ctx: &CallContext) -> Self {
        JobOwner {
            user: ctx.identity.user.clone(),
            agent: ctx.identity.agent.clone(),
            session: ctx.identity.session.clone(),
            grants: ctx.grants.clone(),
        }
    }
}

/// A job to start.
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    /// A short title.
    pub title: String,
    /// What to do: the agent's task (`sandbox`), the command line (`command`), the prompt
    /// (`claude_code`).
    pub description: String,
    /// How it runs.
    pub mode: JobMode,
    /// Its working directory, relative to the workspace root (confined to it).
    pub project_dir: Option<String>,
    /// Secrets its commands get in their environment.
    pub credentials: Vec<Credential>,
    /// What started it besides a person (`routine:NAME`), kept on the record.
    pub origin: Option<String>,
    /// The agent that runs a `sandbox` job (default: `JobsConfig::agent`, else the only one).
    pub agent: Option<String>,
}

/// A job that ended, as [`Jobs::subscribe`] announces it.
#[derive(Debug, Clone)]
pub struct JobFinished {
    /// The job.
    pub id: String,
    /// Its owner's user.
    pub user: String,
    /// Its origin (`routine:NAME`), if any.
    pub origin: Option<String>,
    /// `completed`, `failed` or `cancelled`.
    pub state: String,
    /// Its result.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// Settings of the jobs (`[automation.jobs]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct JobsConfig {
    /// Seconds a lease lasts unless renewed (default 30); the heartbeat renews it every third
    /// of this, and a job whose lease lapsed is ended as `failed: interrupted`.
    pub lease_secs: u64,
    /// The agent `sandbox` jobs run when a request names none.
    pub agent: Option<String>,
    /// The `claude` executable for `claude_code` jobs (default: `claude` on `PATH`).
    pub claude_bin: Option<PathBuf>,
    /// Jobs one process runs at once; more wait `queued`.
    pub max_running: usize,
    /// This process is one-shot (the CLI's `toolgate call`): a job nobody waits for is left
    /// queued for a `toolgate serve` on the workspace instead of dying with the process. Set by
    /// the program, never read from the file.
    #[serde(skip)]
    pub one_shot: bool,
    /// This is a team gateway's own gate, shared by its users (no per-user workspaces): its
    /// secrets store is the admin's, so a job of a caller the gateway admitted under grants may
    /// not name its secrets. Set by the program, never read from the file.
    #[serde(skip)]
    pub shared_gateway: bool,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            lease_secs: 30,
            agent: None,
            claude_bin: None,
            max_running: 4,
            one_shot: false,
            shared_gateway: false,
        }
    }
}

impl JobsConfig {
    /// The lease as a duration (at least 1 s).
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs.max(1))
    }
}

/// Why a job operation failed. The text is what a model or user reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// A request or an id was not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// No job with this id (or not one the caller may see).
    #[error("no job `{0}`: list yours with list_jobs")]
    NotFound(String),
    /// A short id names several jobs.
    #[error("the id prefix `{prefix}` matches {} jobs: {}; give more characters", .ids.len(), .ids.join(", "))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// The jobs it matches.
        ids: Vec<String>,
    },
    /// The mode cannot run here (no agent, no gate, no `claude`).
    #[error("{0}")]
    Unavailable(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One call's decision as the gate reports it: the caller's session, the tool, the outcome
/// (`ok`, `denied`, ...) and the pipeline's trace (policy verdicts, approval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDecision {
    /// The session that made the call (`job:ID`, or a job's agent session).
    pub session: String,
    /// The tool.
    pub tool: String,
    /// How it ended.
    pub outcome: String,
    /// The pipeline's stages, as the audit row keeps them.
    pub trace: Vec<String>,
}

impl CallDecision {
    /// A decision of `session`'s call of `tool`.
    pub fn new(session: &str, tool: &str, outcome: &str, trace: &[String]) -> Self {
        CallDecision {
            session: session.to_owned(),
            tool: tool.to_owned(),
            outcome: outcome.to_owned(),
            trace: trace.to_vec(),
        }
    }
}

/// A subscription to the gate's call decisions, from the moment it was opened.
#[async_trait::async_trait]
pub trait DecisionStream: Send {
    /// The next decision; `None` once the gate is gone.
    async fn next(&mut self) -> Option<CallDecision>;
    /// A decision already waiting, without waiting.
    fn try_next(&mut self) -> Option<CallDecision>;
}

/// Opens a [`DecisionStream`] (the facade subscribes to the gate's events).
pub type DecisionFeed = Arc<dyn Fn() -> Box<dyn DecisionStream> + Send + Sync>;

/// What [`Jobs`] is built from.
#[derive(Clone)]
pub struct JobsSetup {
    /// The state database's jobs.
    pub store: Arc<dyn JobStore>,
    /// The agent runtime: runs `sandbox` jobs, and its tool caller (the gate) runs the others'
    /// commands.
    pub agents: Option<Arc<Runtime>>,
    /// Where credentials' values come from.
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// The workspace root (canonical).
    pub workspace: PathBuf,
    /// Settings.
    pub config: JobsConfig,
}

impl std::fmt::Debug for JobsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobsSetup").field("workspace", &self.workspace).finish_non_exhaustive()
    }
}

/// A job running in this process.
struct Live {
    cancel: CancellationToken,
    /// Set once it ended.
    done: watch::Receiver<bool>,
    /// `job_prompt` with `done: true` closed its input.
    input_closed: bool,
}

pub(crate) struct Inner {
    setup: JobsSetup,
    /// This process's name on the leases it holds.
    lease_owner: String,
    live: Mutex<HashMap<String, Live>>,
    /// Lets at most `max_running` jobs run at once; the rest wait queued.
    slots: Arc<tokio::sync::Semaphore>,
    finished: broadcast::Sender<JobFinished>,
    /// Whether the heartbeat task is running.
    beating: Mutex<bool>,
    /// The agent sessions of `sandbox` and `lightweight` jobs running here, and their job.
    sessions: Mutex<HashMap<String, String>>,
    /// A long-lived server runs [`Jobs::serve`]: jobs submitted here run here, and queued jobs
    /// of short-lived processes are claimed.
    served: AtomicBool,
    /// The gate's decisions, for jobs run where no server forwards them ([`Jobs::set_decisions`]).
    decisions: std::sync::OnceLock<DecisionFeed>,
}

/// The jobs of one gate: cheap to clone. Jobs run on the Tokio runtime of the caller that
/// submits them, and stop (cancelled) when the process ends; their records stay.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("lease_owner", &self.inner.lease_owner).finish_non_exhaustive()
    }
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Ends every job whose lease lapsed (its process died) as `failed: interrupted`, with an
/// event; returns their ids. `toolgate serve` runs it at start and then periodically.
pub fn sweep_interrupted(store: &dyn JobStore) -> Result<Vec<String>, StoreError> {
    let ids = store.jobs_interrupt_expired(now_ms())?;
    if !ids.is_empty() {
        tracing::warn!(jobs = ?ids, "jobs interrupted (their process stopped) marked failed");
    }
    Ok(ids)
}

/// What a long-lived server runs for the jobs: [`sweep_interrupted`] at once (a job of a
/// server that was killed is ended before anyone asks), then every `period` until `shutdown`.
pub async fn sweeper(store: Arc<dyn JobStore>, period: Duration, shutdown: CancellationToken) {
    loop {
        if let Err(e) = sweep_interrupted(&*store) {
            tracing::warn!("interrupted jobs not swept: {e}");
        }
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

impl Jobs {
    /// The jobs of `setup`'s store, run by this process.
    pub fn new(setup: JobsSetup) -> Jobs {
        let (finished, _) = broadcast::channel(256);
        let max = setup.config.max_running.max(1);
        Jobs {
            inner: Arc::new(Inner {
                lease_owner: format!("pid{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
                setup,
                live: Mutex::new(HashMap::new()),
                slots: Arc::new(tokio::sync::Semaphore::new(max)),
                finished,
                beating: Mutex::new(false),
                sessions: Mutex::new(HashMap::new()),
                served: AtomicBool::new(false),
                decisions: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The store the jobs are kept in.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.inner.setup.store
    }

    /// Every job that ends from now on (in this process), as it ends.
    pub fn subscribe(&self) -> broadcast::Receiver<JobFinished> {
        self.inner.finished.subscribe()
    }

    /// Validates `req` and stores the job as `queued`; returns its id and where it runs. It
    /// starts here in the background, unless this process is one-shot
    /// ([`JobsConfig::one_shot`], the CLI) and runs no [`Jobs::serve`]: then it is left without
    /// a lease for a server to claim, since it would end with this process. Must be called
    /// inside a Tokio runtime.
    pub fn submit(&self, owner: &JobOwner, req: JobRequest) -> Result<(String, Placement), JobError> {
        // A job under gateway grants runs here: a server claiming it from the store would not
        // have them.
        if !self.inner.setup.config.one_shot || self.inner.served.load(Ordering::Acquire) || owner.grants.is_some() {
            return self.submit_here(owner, req).map(|id| (id, Placement::Here));
        }
        let prepared = run::prepare(&self.inner, owner, &req)?;
        let record = self.record(owner, &req, &prepared, false);
        self.inner.setup.store.job_create(&record)?;
        Ok((record.id, Placement::Queued { runners: self.runners() }))
    }

    /// Validates `req`, stores the job as `queued` and starts it in this process in the
    /// background (a caller that waits for it); returns its id. Must be called inside a Tokio
    /// runtime.
    pub fn submit_here(&self, owner: &JobOwner, req: JobRequest) -> Result<String, JobError> {
        let prepared = run::prepare(&self.inner, owner, &req)?;
        let record = self.record(owner, &req, &prepared, true);
        self.inner.setup.store.job_create(&record)?;
        let id = record.id.clone();
        self.start(record, owner.clone(), prepared);
        Ok(id)
    }

    /// The servers that run jobs on this workspace now (none: a queued job waits).
    pub fn runners(&self) -> Vec<String> {
        self.inner.setup.store.jobs_runners(now_ms()).unwrap_or_else(|e| {
            tracing::warn!("job runners not read: {e}");
            Vec::new()
        })
    }

    /// Records a call's decision trace (the gate's stages: policy verdicts, approval) and
    /// outcome in the event log of the job that made it: its session is `job:ID` (commands,
    /// tool calls) or the agent session of a job running here. Other calls are ignored.
    pub fn call_decided(&self, session: &str, tool: &str, outcome: &str, trace: &[String]) {
        self.inner.call_decided(&CallDecision::new(session, tool, outcome, trace), None);
    }

    /// Where a process that runs no [`Jobs::serve`] (the CLI's `toolgate call create_job` with
    /// `wait`, a library caller) gets the gate's decisions from: each job it runs subscribes for
    /// its own run and writes its calls' `decision` events before it ends. A server's forwarding
    /// task does that for the jobs it runs. Set once; later calls are ignored.
    pub fn set_decisions(&self, feed: DecisionFeed) {
        let _ = self.inner.decisions.set(feed);
    }

    /// Whether job `id` runs in this process.
    pub fn runs_here(&self, id: &str) -> bool {
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner()).contains_key(id)
    }

    /// A new job's record, with this process's lease when it runs it here.
    fn record(&self, owner: &JobOwner, req: &JobRequest, prepared: &run::Prepared, here: bool) -> JobRecord {
        let inner = &self.inner;
        let now = now_ms();
        let spec = StoredSpec {
            owner_agent: owner.agent.clone(),
            agent: req.agent.clone(),
            credentials: req.credentials.iter().map(|c| (c.secret.clone(), c.env.clone())).collect(),
        };
        JobRecord {
            id: uuid::Uuid::new_v4().to_string(),
            user: owner.user.clone(),
            session: owner.session.clone(),
            title: req.title.clone(),
            description: req.description.clone(),
            mode: req.mode.as_str().to_owned(),
            project_dir: prepared.project_dir.clone(),
            credentials: req.credentials.iter().map(|c| c.secret.clone()).collect(),
            origin: req.origin.clone(),
            state: "queued".to_owned(),
            created_ms: now,
            lease_owner: here.then(|| inner.lease_owner.clone()),
            lease_until_ms: here.then(|| now + inner.setup.config.lease().as_millis() as i64),
            spec: serde_json::to_string(&spec).unwrap_or_else(|_| "{}".to_owned()),
            ..JobRecord::default()
        }
    }

    /// Runs `record` (leased to this process) in the background.
    fn start(&self, record: JobRecord, owner: JobOwner, prepared: run::Prepared) {
        let inner = &self.inner;
        let id = record.id.clone();
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        inner
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), Live { cancel: cancel.clone(), done: done_rx, input_closed: false });
        Inner::ensure_heartbeat(&self.inner);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            run::run(&inner, record, owner, prepared, cancel).await;
            inner.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            let _ = done_tx.send(true);
        });
    }

    /// Runs a job this process claimed: its request rebuilt from the record, checked again (a
    /// secret removed meanwhile fails it with the reason).
    fn start_claimed(&self, record: JobRecord) {
        let spec: StoredSpec = serde_json::from_str(&record.spec).unwrap_or_default();
        let owner = JobOwner {
            user: record.user.clone(),
            agent: if spec.owner_agent.is_empty() { "main".to_owned() } else { spec.owner_agent.clone() },
            session: record.session.clone(),
            // Queued by a one-shot CLI, which no gateway admits.
            grants: None,
        };
        let prepared = JobMode::parse(&record.mode)
            .ok_or_else(|| JobError::Invalid(format!("unknown mode `{}`", clip(&record.mode, 40))))
            .and_then(|mode| {
                let req = JobRequest {
                    title: record.title.clone(),
                    description: record.description.clone(),
                    mode,
                    project_dir: Some(record.project_dir.clone()),
                    credentials: spec
                        .credentials
                        .iter()
                        .map(|(secret, env)| Credential { secret: secret.clone(), env: env.clone() })
                        .collect(),
                    origin: record.origin.clone(),
                    agent: spec.agent.clone(),
                };
                run::prepare(&self.inner, &owner, &req)
            });
        match prepared {
            Ok(prepared) => self.start(record, owner, prepared),
            Err(e) => {
                let error = format!("could not start in this server: {e}");
                if let Err(e) = self.inner.setup.store.job_finish(&record.id, "failed", None, Some(&error), now_ms()) {
                    tracing::warn!(job = record.id, "job end not saved: {e}");
                }
                run::announce(&self.inner, &record.id);
            }
        }
    }

    /// What a long-lived server runs for the jobs until `shutdown`: from now on jobs submitted
    /// here run here; it announces itself as a job runner, claims the jobs short-lived
    /// processes left queued (as many as it has free slots, every `CLAIM_EVERY`), and sweeps
    /// the interrupted ones ([`sweep_interrupted`]) at once and every lease period.
    pub async fn serve(self, shutdown: CancellationToken) {
        self.inner.served.store(true, Ordering::Release);
        let store = Arc::clone(&self.inner.setup.store);
        let lease = self.inner.setup.config.lease();
        let runner = self.inner.lease_owner.clone();
        let mut next_sweep = tokio::time::Instant::now();
        let mut next_beat = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_beat {
                let until = now_ms() + lease.as_millis() as i64;
                if let Err(e) = store.jobs_runner_beat(&runner, until, now_ms()) {
                    tracing::warn!("job runner not announced: {e}");
                }
                next_beat = now + (lease / 3).max(Duration::from_millis(100));
            }
            if now >= next_sweep {
                if let Err(e) = sweep_interrupted(&*store) {
                    tracing::warn!("interrupted jobs not swept: {e}");
                }
                next_sweep = now + lease;
            }
            let free = self.inner.slots.available_permits();
            let until = now_ms() + lease.as_millis() as i64;
            match store.jobs_claim(&runner, now_ms(), until, free) {
                Ok(claimed) => {
                    for record in claimed {
                        tracing::info!(job = record.id, "claimed a queued job");
                        self.start_claimed(record);
                    }
                }
                Err(e) => tracing::warn!("queued jobs not claimed: {e}"),
            }
            tokio::select! {
                () = tokio::time::sleep(CLAIM_EVERY) => {}
                () = shutdown.cancelled() => break,
            }
        }
        self.inner.served.store(false, Ordering::Release);
        if let Err(e) = store.jobs_runner_gone(&runner) {
            tracing::warn!("job runner not removed: {e}");
        }
    }

    /// The job `id_or_prefix` (a full id or 4+ characters of one) if `user` owns it.
    pub fn get(&self, user: &str, id_or_prefix: &str) -> Result<JobRecord, JobError> {
        let p = id_or_prefix.trim();
        if p.chars().count() < 4 {
            return Err(JobError::Invalid(format!(
                "job id `{}` is too short: give the full id or at least 4 characters of it",
                clip(p, 40)
            )));
        }
        if p.len() > 64 {
            return Err(JobError::NotFound(clip(p, 40)));
        }
        if let Some(j) = self.inner.setup.store.job(p)?.filter(|j| j.user == user) {
            return Ok(j);
        }
        // Another user's job is "not found": its existence is not revealed.
        let mut matches: Vec<JobRecord> =
            self.inner.setup.store.jobs_by_prefix(p, 50)?.into_iter().filter(|j| j.user == user).collect();
        match matches.len() {
            0 => Err(JobError::NotFound(clip(p, 40))),
            1 => Ok(matches.remove(0)),
            _ => Err(JobError::Ambiguous {
                prefix: p.to_owned(),
                ids: matches.iter().map(|j| format!("{} ({})", j.id, clip(&j.title, 60))).collect(),
            }),
        }
    }

    /// `user`'s jobs in `states` (empty: all), newest first.
    pub fn list(&self, user: &str, states: &[&str], limit: usize) -> Result<Vec<JobRecord>, JobError> {
        Ok(self.inner.setup.store.jobs_list(&JobFilter { user: Some(user), states, origin: None, limit })?)
    }

    /// The jobs started by `origin` (`routine:NAME`), newest first, of any user.
    pub fn list_by_origin(&self, origin: &str, limit: usize) -> Result<Vec<JobRecord>, JobError> {
        Ok(self.inner.setup.store.jobs_list(&JobFilter { origin: Some(origin), limit, ..JobFilter::default() })?)
    }

    /// Cancels `user`'s job: a queued one never starts, a running one here is stopped (an
    /// agent ends its turn, a command is killed). Returns the job as it is afterwards.
    pub async fn cancel(&self, user: &str, id_or_prefix: &str) -> Result<JobRecord, JobError> {
        let job = self.get(user, id_or_prefix)?;
        if job.is_finished() {
            return Err(JobError::Invalid(format!(
                "job `{}` already ended ({}); nothing to cancel",
                job.id,
                describe_state(&job)
            )));
        }
        let live = {
            let live = self.inner.live.lock().unwrap_or_else(|e| e.into_inner());
            live.get(&job.id).map(|l| (l.cancel.clone(), l.done.clone()))
        };
        let reason = format!("cancelled by {user}");
        match live {
            Some((cancel, mut done)) => {
                // Ended here first, so the runner's own end (cancelled) is the one kept even if
                // the kill takes a moment.
                self.inner.setup.store.job_finish(&job.id, "cancelled", None, Some(&reason), now_ms())?;
                cancel.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(10), done.wait_for(|d| *d)).await;
            }
            // Held by another process (another `toolgate serve` on this workspace): the record
            // is ended; that process stops it at its next heartbeat.
            None => {
                self.inner.setup.store.job_finish(&job.id, "cancelled", None, Some(&reason), now_ms())?;
            }
        }
        Ok(self.inner.setup.store.job(&job.id)?.unwrap_or(job))
    }

    /// Waits until job `id` ends or `timeout` passes (at most [`WAIT_TIMEOUT`]), or `cancel`
    /// fires; returns the job as it is then.
    pub async fn wait(&self, id: &str, timeout: Duration, cancel: &CancellationToken) -> Result<JobRecord, JobError> {
        let timeout = timeout.min(WAIT_TIMEOUT);
        let done = self.inner.live.lock().unwrap_or_else(|e| e.into_inner()).get(id).map(|l| l.done.clone());
        let deadline = tokio::time::Instant::now() + timeout;
        match done {
            Some(mut done) => {
                tokio::select! {
                    _ = done.wait_for(|d| *d) => {}
                    () = tokio::time::sleep_until(deadline) => {}
                    () = cancel.cancelled() => {}
                }
            }
            // Run by another process: poll the record.
            None => loop {
                let job = self.inner.setup.store.job(id)?.ok_or_else(|| JobError::NotFound(clip(id, 40)))?;
                if job.is_finished() || tokio::time::Instant::now() >= deadline || cancel.is_cancelled() {
                    return Ok(job);
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    () = cancel.cancelled() => {}
                }
            },
        }
        self.inner.setup.store.job(id)?.ok_or_else(|| JobError::NotFound(clip(id, 40)))
    }

    /// `id`'s events (after `seq` `after`, or the last `limit` when `after < 0`).
    pub fn events(&self, id: &str, after: i64, limit: usize) -> Result<Vec<JobEvent>, JobError> {
        Ok(self.inner.setup.store.job_events(id, after, limit)?)
    }

    /// Sends `content` into job `job`'s input: a running `sandbox` job's agent reads it before
    /// its next model turn. `done` closes the input (later prompts are refused).
    pub async fn prompt(&self, job: &JobRecord, content: &str, done: bool) -> Result<String, JobError> {
        run::prompt(&self.inner, job, content, done).await
    }
}

impl Inner {
    /// Writes `d` as a `decision` event of the job that made the call: its session is `job:ID`
    /// or the agent session of a job running here; other calls are ignored, and so are other
    /// jobs' calls when `only` names one.
    fn call_decided(&self, d: &CallDecision, only: Option<&str>) {
        let job = match d.session.strip_prefix("job:") {
            Some(id) => id.to_owned(),
            None => match self.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(&d.session) {
                Some(id) => id.clone(),
                None => return,
            },
        };
        if only.is_some_and(|only| only != job) {
            return;
        }
        // The event may come after the job ended (it is forwarded by another task): the job
        // only has to exist. A `job:ID` session's calls are made by this process's jobs.
        if !matches!(self.setup.store.job(&job), Ok(Some(_))) {
            return;
        }
        let steps = if d.trace.is_empty() { "no trace".to_owned() } else { d.trace.join("; ") };
        let text = clip(&format!("{}: {steps} -> {}", d.tool, d.outcome), 4_000);
        if let Err(e) = self.setup.store.job_event(&job, "decision", &text, now_ms()) {
            tracing::warn!(job, "job decision not saved: {e}");
        }
    }

    /// Starts the heartbeat that renews this process's leases, unless it runs; it ends when
    /// no job runs here (or the jobs are dropped).
    fn ensure_heartbeat(this: &Arc<Inner>) {
        let mut beating = this.beating.lock().unwrap_or_else(|e| e.into_inner());
        if *beating {
            return;
        }
        *beating = true;
        let weak: Weak<Inner> = Arc::downgrade(this);
        let period = (this.setup.config.lease() / 3).max(Duration::from_millis(50));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(inner) = weak.upgrade() else { return };
                let live: Vec<String> = inner.live.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
                if live.is_empty() {
                    let mut beating = inner.beating.lock().unwrap_or_else(|e| e.into_inner());
                    // Checked again under the flag's lock: a job submitted meanwhile saw it set.
                    if inner.live.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                        *beating = false;
                        return;
                    }
                    continue;
                }
                let until = now_ms() + inner.setup.config.lease().as_millis() as i64;
                match inner.setup.store.jobs_renew(&inner.lease_owner, until) {
                    Ok(held) => {
                        // A job no longer held here was cancelled or ended elsewhere: stop it.
                        let live = inner.live.lock().unwrap_or_else(|e| e.into_inner());
                        for (id, l) in live.iter() {
                            if !held.contains(id) {
                                l.cancel.cancel();
                            }
                        }
                    }
                    Err(e) => tracing::warn!("job leases not renewed: {e}"),
                }
            }
        });
    }
}

/// A job's state in words: `failed: interrupted`, `completed`.
pub(crate) fn describe_state(job: &JobRecord) -> String {
    match &job.error {
        Some(e) if job.state != "completed" => format!("{}: {}", job.state, clip(e, 300)),
        _ => job.state.clone(),
    }
}

/// The context a job's tool calls run in: the gate's base context as the owner (under the
/// owner's gateway grants, if any), in a session of the job's own (`job:ID`), cancelled with
/// the job.
pub(crate) fn job_context(
    caller: &dyn ToolCaller,
    owner: &JobOwner,
    id: &str,
    cancel: &CancellationToken,
) -> CallContext {
    let mut ctx = caller.context().with_identity(Identity {
        user: owner.user.clone(),
        agent: owner.agent.clone(),
        session: format!("job:{id}"),
    });
    ctx.cancel = cancel.clone();
    ctx.grants = owner.grants.clone();
    ctx
}

/// `dir` (relative to `workspace`) confined like every path: inside the workspace, not in
/// `.toolgate/`, an existing folder. Returns it relative to the root (`""` for the root).
pub(crate) fn confine_dir(workspace: &Path, dir: &str) -> Result<String, JobError> {
    let d = dir.trim();
    if d.is_empty() || d == "." {
        return Ok(String::new());
    }
    if d.contains('\0') {
        return Err(JobError::Invalid("project_dir contains a NUL byte".to_owned()));
    }
    let real = workspace.join(d).canonicalize().map_err(|e| {
        JobError::Invalid(format!(
            "project_dir `{}`: {e}; give an existing folder inside the workspace, relative to its root",
            clip(d, 200)
        ))
    })?;
    let rel = real.strip_prefix(workspace).map_err(|_| {
        JobError::Invalid(format!(
            "project_dir `{}` is outside the workspace; jobs work inside it (give a path relative to its root)",
            clip(d, 200)
        ))
    })?;
    if rel.starts_with(".toolgate") {
        return Err(JobError::Invalid("project_dir: `.toolgate/` is toolgate's own state; use another folder".into()));
    }
    if !real.is_dir() {
        return Err(JobError::Invalid(format!("project_dir `{}` is not a folder", clip(d, 200))));
    }
    rel.to_str()
        .map(str::to_owned)
        .ok_or_else(|| JobError::Invalid("project_dir is not valid UTF-8 after resolving links".to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn project_dirs_are_confined_like_every_path() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::create_dir_all(ws.join(".toolgate/x")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("out")).unwrap();
        std::os::unix::fs::symlink(ws.join("a/b"), ws.join("inside")).unwrap();
        std::os::unix::fs::symlink(ws.join("gone"), ws.join("dangling")).unwrap();
        assert_eq!(confine_dir(&ws, "").unwrap(), "");
        assert_eq!(confine_dir(&ws, ".").unwrap(), "");
        assert_eq!(confine_dir(&ws, "a/b").unwrap(), "a/b");
        assert_eq!(confine_dir(&ws, "a/../a/b/").unwrap(), "a/b");
        // A link is judged by where it points.
        assert_eq!(confine_dir(&ws, "inside").unwrap(), "a/b");
        for bad in
            ["out", "../", "/etc", "a/../../", "dangling", ".toolgate", ".toolgate/x", "a/b/../../.toolgate", "nul\0"]
        {
            assert!(confine_dir(&ws, bad).is_err(), "{bad:?} was accepted");
        }
        let e = confine_dir(&ws, "out").unwrap_err().to_string();
        assert!(e.contains("outside the workspace"), "{e}");
    }

    #[test]
    fn states_read_as_words() {
        let mut j = JobRecord { state: "failed".into(), error: Some("interrupted".into()), ..JobRecord::default() };
        assert_eq!(describe_state(&j), "failed: interrupted");
        j.state = "completed".into();
        assert_eq!(describe_state(&j), "completed");
        assert_eq!(JobMode::parse("claude_code"), Some(JobMode::ClaudeCode));
        assert_eq!(JobMode::parse("Sandbox"), None);
    }
}
