//! [`Runtime`]: configured agents, their model clients, sessions in the store, and the
//! sub-agents and delegations running in the background.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_core::CallContext;
use toolgate_store::{SessionFilter, SessionRecord, SessionStore};

use crate::caller::ToolCaller;
use crate::config::{AgentConfig, AgentType, AgentsConfig};
use crate::model::{self, Message, ModelClient, ToolDef};
use crate::runner::{Drive, EventSink, RunOutcome, RunStatus, from_record, to_record};
use crate::{AgentError, now_ms};

mod announce;
mod handoff;
mod review;
mod teams;

pub use announce::MAX_QUEUED;
pub(crate) use announce::{Inbox, as_message as announce_message, settle as announce_settle};

pub use review::{Verdict, verdict};

/// Limits on sub-agents (seed 000 §6).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Sub-agents running at once, over the whole runtime (default 8).
    pub max_concurrent: usize,
    /// How deep sub-agents nest (default 1: a sub-agent cannot spawn).
    pub max_depth: u32,
    /// Sub-agents one session may have running at once (default 5).
    pub max_children: usize,
    /// Model turns of a sub-agent (default 20).
    pub max_subagent_iterations: u32,
    /// Finished sessions are archived after this long idle (default 60 min).
    pub archive_after: Duration,
    /// How long a steer waits after cancelling before it respawns (default 500 ms).
    pub steer_settle: Duration,
    /// Announcements that arrive within this of each other reach the model as one message
    /// (default 100 ms; seed 000 §6's debounced announce queue).
    pub announce_debounce: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrent: 8,
            max_depth: 1,
            max_children: 5,
            max_subagent_iterations: 20,
            archive_after: Duration::from_secs(3600),
            steer_settle: Duration::from_millis(500),
            announce_debounce: Duration::from_millis(100),
        }
    }
}

/// What kind of session a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// A top-level run (`toolgate agent run`).
    Run,
    /// A sub-agent (`subagents`).
    Subagent,
    /// A read-only research sub-agent (`sessions_spawn`).
    Spawn,
    /// A delegation to a linked agent (`delegate`, `evaluate_loop`, a quality gate's reviewer).
    Delegation,
    /// A conversation handed over by another agent (`handoff`).
    Handoff,
    /// A team member started for the board's pending tasks (`runtime/teams.rs`).
    Team,
}

impl SessionKind {
    fn as_str(self) -> &'static str {
        match self {
            SessionKind::Run => "run",
            SessionKind::Subagent => "subagent",
            SessionKind::Spawn => "spawn",
            SessionKind::Delegation => "delegation",
            SessionKind::Handoff => "handoff",
            SessionKind::Team => "team",
        }
    }
}

/// What a caller is told when it asks for an agent and none is configured: the config to add.
const NO_AGENTS: &str = "none. Sub-agents and delegation need a model: add one to toolgate.toml, for example\n\
[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"   # any OpenAI-compatible endpoint\n\n\
[agents.main]\ndescription = \"Does the work\"\nprovider = \"local\"\nmodel = \"qwen2.5-coder\"\n\n\
(docs/agents.md, \"Configuring\")";

/// The most of a background run's result an announcement carries; the rest is in its session.
pub const ANNOUNCE_MAX_CHARS: usize = 20_000;

/// Delegation targets listed in `DELEGATION.md`; with more, the agent searches them.
pub const DELEGATION_INLINE_MAX: usize = 15;

/// The read-only tools a `sessions_spawn` research sub-agent gets by default (`[agents_defaults]
/// research_tools`): seed 002 §8's set without the memory tools, which seed 000 §6 denies
/// sub-agents (the safer of the two).
pub const RESEARCH_TOOLS: &[&str] = &["read", "grep", "glob", "ls"];

/// A run to start.
#[derive(Clone)]
pub struct RunSpec {
    /// The agent (an `[agents.NAME]`).
    pub agent: String,
    /// Its task: the first user message.
    pub task: String,
    /// What kind of session.
    pub kind: SessionKind,
    /// A label for listings.
    pub label: Option<String>,
    /// Only these tools are offered (besides what policy hides); `None`: the agent's own list.
    pub only_tools: Option<Vec<String>>,
    /// At most this many model turns, below the agent's own `max_iterations` (a job's
    /// `lightweight` run: one answer).
    pub max_turns: Option<u32>,
    /// Live transcript.
    pub events: Option<EventSink>,
    /// Quality gates do not run on this run's delegations, nor on anything it starts (seed 000
    /// §11's skip-hooks flag: set for an evaluator's own run and `evaluate_loop`'s rounds, so a
    /// gate cannot trigger itself).
    pub skip_gates: bool,
    /// The caller this run's tool calls go through instead of the runtime's (a background
    /// job's wrapper around the gate, which adds the job's credentials to its commands after
    /// the model wrote them); runs this one starts use the runtime's.
    pub tool_caller: Option<Arc<dyn ToolCaller>>,
    /// Started by the runtime itself (a quality gate's reviewer): the spawn limits and links,
    /// which bound what a model may start, do not apply.
    pub(crate) internal: bool,
}

impl std::fmt::Debug for RunSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSpec").field("agent", &self.agent).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl RunSpec {
    /// A top-level run of `agent` on `task`.
    pub fn new(agent: impl Into<String>, task: impl Into<String>) -> Self {
        RunSpec {
            agent: agent.into(),
            task: task.into(),
            kind: SessionKind::Run,
            label: None,
            only_tools: None,
            max_turns: None,
            events: None,
            skip_gates: false,
            tool_caller: None,
            internal: false,
        }
    }
}

/// A run the runtime tracks (sub-agents and delegations).
struct Task {
    agent: String,
    /// The session that started it.
    parent: String,
    /// The agent that started it.
    from_agent: String,
    kind: SessionKind,
    spec: RunSpec,
    parent_ctx: CallContext,
    cancel: CancellationToken,
    done: watch::Receiver<Option<RunOutcome>>,
    started: Instant,
    /// When it ended (archiving counts from here).
    ended: Arc<OnceLock<Instant>>,
    /// Quality gates are skipped for it and what it starts.
    skip_gates: bool,
}

/// What `subagents list` and `delegate list` show of a task.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskInfo {
    /// The session id (the task's id).
    pub id: String,
    /// The agent running it.
    pub agent: String,
    /// `running`, or how it ended.
    pub status: String,
    /// Its label.
    pub label: Option<String>,
    /// Seconds since it started.
    pub age_secs: u64,
    /// Its answer, when done.
    pub result: Option<String>,
}

/// The agent runtime. Build it with [`Runtime::new`], bind the gate with [`Runtime::bind`],
/// and register [`crate::tools`] in the gate.
pub struct Runtime {
    cfg: AgentsConfig,
    store: Arc<dyn SessionStore>,
    base_dir: PathBuf,
    limits: Limits,
    /// Late-bound: the gate owns the registry that holds the agent tools, which hold this
    /// runtime, so a strong reference back would be a cycle.
    caller: OnceLock<Weak<dyn ToolCaller>>,
    clients: Mutex<HashMap<String, Arc<dyn ModelClient>>>,
    /// A library user's own agent loop ([`Runtime::set_runner`]).
    runner: Mutex<Option<Arc<dyn crate::AgentRunner>>>,
    tasks: Mutex<HashMap<String, Task>>,
    /// Handoffs made during a run, by the session that made them: started when that run ends.
    handoffs: Mutex<HashMap<String, handoff::Pending>>,
    /// Teams' running members, budgets and deliveries to leads (`runtime/teams.rs`).
    teams: teams::Teams,
    /// Announcements and queued messages for sessions, taken before their next model turn.
    inbox: Arc<Inbox>,
    /// A lock per session being continued, so two continuations never run at once.
    continuing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Parent of every run's token: [`Runtime::shutdown`] stops them all.
    shutdown: CancellationToken,
    /// `delegate_search`'s vectors of the agents, once [`Runtime::set_embedder`] gave a model.
    vectors: OnceLock<crate::search::AgentVectors>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("agents", &self.cfg.agents.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime for `cfg`, keeping sessions, team boards and handoffs in `store`; `base_dir`
    /// resolves `system_prompt_file`s (the workspace).
    pub fn new(cfg: AgentsConfig, store: Arc<dyn SessionStore>, base_dir: PathBuf) -> Arc<Runtime> {
        // Every gate has a runtime (the session tools); only one that can run agents pays for
        // the sweep at start (`toolgate call` is the usual runtime without agents).
        if !cfg.agents.is_empty()
            && let Err(e) = store.sessions_fail_orphans(now_ms())
        {
            tracing::warn!("agent sessions: {e}");
        }
        let limits = Limits {
            archive_after: Duration::from_secs(cfg.agents_defaults.archive_after_minutes.saturating_mul(60)),
            ..Limits::default()
        };
        Arc::new(Runtime {
            cfg,
            store,
            base_dir,
            limits,
            caller: OnceLock::new(),
            clients: Mutex::new(HashMap::new()),
            runner: Mutex::new(None),
            tasks: Mutex::new(HashMap::new()),
            handoffs: Mutex::new(HashMap::new()),
            teams: teams::Teams::default(),
            inbox: Arc::default(),
            continuing: Mutex::default(),
            shutdown: CancellationToken::new(),
            vectors: OnceLock::new(),
        })
    }

    /// Connects the runtime to the tool caller (the gate). Later calls are ignored.
    pub fn bind(&self, caller: Weak<dyn ToolCaller>) {
        let _ = self.caller.set(caller);
    }

    /// Lets `delegate_search` rank by meaning too, with `embedder` (the gate gives the memory
    /// tools' model); agent vectors are kept in `cache` when given. Later calls are ignored.
    pub fn set_embedder(
        &self,
        embedder: Arc<dyn toolgate_store::memory::Embedder>,
        cache: Option<Arc<dyn toolgate_store::EmbeddingCache>>,
    ) {
        let _ = self.vectors.set(crate::search::AgentVectors::new(embedder, cache));
    }

    pub(crate) fn vectors(&self) -> Option<&crate::search::AgentVectors> {
        self.vectors.get()
    }

    /// Uses `client` for every agent of `provider` instead of building one from config (tests,
    /// benchmarks, or a model the library user reaches their own way).
    pub fn set_client(&self, provider: &str, client: Arc<dyn ModelClient>) {
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).insert(provider.to_owned(), client);
    }

    /// Runs every agent with `runner` (your own loop) instead of toolgate's: the runtime keeps
    /// the sessions, limits, links, narrowing, gates and handoffs, and the runner's tool calls go
    /// through the gate (see [`crate::AgentRunner`]). Agents still need an `[agents.NAME]` entry.
    pub fn set_runner(&self, runner: Arc<dyn crate::AgentRunner>) {
        *self.runner.lock().unwrap_or_else(|e| e.into_inner()) = Some(runner);
    }

    fn own_runner(&self) -> Option<Arc<dyn crate::AgentRunner>> {
        self.runner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The configuration.
    pub fn config(&self) -> &AgentsConfig {
        &self.cfg
    }

    /// The session store.
    pub fn store(&self) -> &dyn SessionStore {
        &*self.store
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Cancels every run; the runtime still accepts new ones.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The tool caller the runtime is bound to (the gate), for a family outside this crate that
    /// calls tools itself with the same pipeline and its owner's context (a background job,
    /// `build_software`'s build commands). `None` before [`Runtime::bind`] or once the gate is
    /// gone.
    pub fn tool_caller(&self) -> Option<Arc<dyn ToolCaller>> {
        self.caller.get().and_then(Weak::upgrade)
    }

    pub(crate) fn caller(&self) -> Result<Arc<dyn ToolCaller>, AgentError> {
        self.caller.get().and_then(Weak::upgrade).ok_or(AgentError::Unbound)
    }

    pub(crate) fn agent(&self, name: &str) -> Result<&AgentConfig, AgentError> {
        self.cfg.agents.get(name).ok_or_else(|| AgentError::UnknownAgent {
            name: name.chars().take(100).collect(),
            known: if self.cfg.agents.is_empty() {
                NO_AGENTS.to_owned()
            } else {
                self.cfg.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        })
    }

    fn client(&self, provider: &str) -> Result<Arc<dyn ModelClient>, AgentError> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(provider) {
            return Ok(c.clone());
        }
        let cfg = self.cfg.providers.get(provider).ok_or_else(|| AgentError::Provider {
            provider: provider.to_owned(),
            message: "not configured: add a [providers.NAME] table".to_owned(),
        })?;
        let client = model::client_for(provider, cfg)?;
        clients.insert(provider.to_owned(), client.clone());
        Ok(client)
    }

    fn system_prompt(&self, name: &str, a: &AgentConfig) -> Result<Option<String>, AgentError> {
        if let Some(file) = &a.system_prompt_file {
            let path = self.base_dir.join(file);
            return std::fs::read_to_string(&path).map(Some).map_err(|e| {
                AgentError::Invalid(format!("[agents.{name}] system_prompt_file {}: {e}", path.display()))
            });
        }
        Ok(a.system_prompt.clone())
    }

    /// What the runtime adds to an agent's system prompt (seed 000 §7, §8): `DELEGATION.md`, the
    /// agents it may delegate to (inline up to [`DELEGATION_INLINE_MAX`], else a pointer to
    /// `delegate_search`), and for a team's lead only, `TEAM.md`. Each only when the agent is
    /// offered the tool it describes.
    fn briefing(&self, name: &str, user: &str, tools: &[ToolDef]) -> Option<String> {
        use std::fmt::Write as _;
        let offered = |t: &str| tools.iter().any(|d| d.name == t);
        let describe = |s: &mut String, agent: &str| {
            let d = self.cfg.agents.get(agent).map_or("", |a| a.description.as_str());
            let _ = writeln!(s, "- `{agent}`: {}", clip_text(d, 300));
        };
        let mut out = String::new();
        let targets = self.cfg.targets(name, user);
        if offered("delegate") && !targets.is_empty() {
            out.push_str(
                "# DELEGATION.md\n\nYou can hand a task to another agent with the `delegate` tool (action \
                 `delegate`, `agent`, `task`; mode `sync` waits for its answer, `async` returns an id).\n",
            );
            if targets.len() <= DELEGATION_INLINE_MAX || !offered("delegate_search") {
                for t in targets.iter().take(DELEGATION_INLINE_MAX) {
                    describe(&mut out, t);
                }
                if targets.len() > DELEGATION_INLINE_MAX {
                    let _ = writeln!(out, "- and {} more", targets.len() - DELEGATION_INLINE_MAX);
                }
            } else {
                let _ = writeln!(
                    out,
                    "You can delegate to {} agents: find the right one with `delegate_search` (query: what the task needs).",
                    targets.len()
                );
            }
        }
        if offered("team_tasks") {
            for (team, t) in self.cfg.teams.iter().filter(|(_, t)| t.lead == name) {
                if !out.is_empty() {
                    out.push('\n');
                }
                let _ = writeln!(out, "# TEAM.md\n\nYou lead team `{team}`. Its members:");
                for m in &t.members {
                    describe(&mut out, m);
                }
                out.push_str(
                    "Plan the work as tasks on the board (`team_tasks` create, `blocked_by` for order): posting a task \
                     starts members to claim it. Each result comes back to you as a `teammate:` message; combine them \
                     into your answer. Message members with `team_message`; `team_tasks` list shows the board.\n",
                );
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Runs `spec` to the end in the caller's task, as the agent `parent_ctx` names for a
    /// top-level run or as a child of it otherwise.
    pub async fn run(&self, spec: RunSpec, parent_ctx: &CallContext) -> Result<RunOutcome, AgentError> {
        let cancel = self.shutdown.child_token();
        let (drive, messages) = self.prepare(&spec, parent_ctx, cancel, None)?;
        let outcome = drive.run(messages).await;
        self.finish(&outcome);
        Ok(self.follow_handoffs(outcome, spec.events.clone()).await)
    }

    /// [`Runtime::run`] for a caller that tracks the run itself (a background job): the
    /// session gets the id `session` (so the caller can queue messages to it while it runs),
    /// and `cancel` stops it (it ends `cancelled`), as does the runtime's shutdown.
    pub async fn run_until(
        &self,
        spec: RunSpec,
        parent_ctx: &CallContext,
        session: String,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, AgentError> {
        let token = self.shutdown.child_token();
        let (drive, messages) = self.prepare(&spec, parent_ctx, token.clone(), Some(session))?;
        let run = drive.run(messages);
        tokio::pin!(run);
        // On `cancel`, the run is told through its own token and still ends properly (its
        // session stored as cancelled).
        let outcome = tokio::select! {
            o = &mut run => o,
            () = cancel.cancelled() => {
                token.cancel();
                run.await
            }
        };
        self.finish(&outcome);
        Ok(self.follow_handoffs(outcome, spec.events.clone()).await)
    }

    /// Queues `message` for `session` when its loop is running here (`sessions_send` to a
    /// running session: its model reads it before its next turn); returns the session it was
    /// queued for, or `None` when that session is not running (continue it with
    /// [`Runtime::send`]). A conversation that was handed off goes to the agent it was handed to.
    pub async fn send_queued(&self, session: &str, message: &str) -> Result<Option<String>, AgentError> {
        let target = match self.store.handoff_route(session)? {
            Some(route) if self.store.session(&route.to_session)?.is_some() => route.to_session,
            _ => session.to_owned(),
        };
        // A session is stored as running a moment before its loop begins: give it 2 s.
        for _ in 0..40 {
            if self.queue_message(&target, message)? {
                return Ok(Some(target));
            }
            match self.store.session(&target)? {
                Some(r) if r.status == "running" => tokio::time::sleep(Duration::from_millis(50)).await,
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Continues a finished session with a new user message (`sessions_send`, `toolgate agent
    /// send`). A conversation that was handed off goes to the agent it was handed to.
    pub async fn send(
        &self,
        session: &str,
        message: &str,
        events: Option<EventSink>,
    ) -> Result<RunOutcome, AgentError> {
        self.send_under(session, message, events, None).await
    }

    /// [`Runtime::send`] with every call of the turn held to `grants` (a team gateway caller's,
    /// [`CallContext::grants`]): the caller who continues a session, or the principal a
    /// routine acts for. A session keeps no grants of its own across turns, so a turn started
    /// on a gateway caller's behalf must be given theirs.
    pub async fn send_under(
        &self,
        session: &str,
        message: &str,
        events: Option<EventSink>,
        grants: Option<Arc<dyn toolgate_core::CallGrants>>,
    ) -> Result<RunOutcome, AgentError> {
        // A route whose session is gone (the process died before starting it) is ignored.
        let routed = match self.store.handoff_route(session)? {
            Some(route) => self.store.session(&route.to_session)?,
            None => None,
        };
        let record = match routed {
            Some(r) => Some(r),
            None => self.store.session(session)?,
        };
        let record = record.ok_or_else(|| {
            AgentError::Invalid(format!("no session `{}`; list them with sessions_list", clip(session)))
        })?;
        let outcome =
            self.continue_session(&record, message, self.shutdown.child_token(), events.clone(), grants).await?;
        Ok(self.follow_handoffs(outcome, events).await)
    }

    /// The context a stored session runs in (its agent, user and depth, and the ancestors its
    /// policy is intersected with, rebuilt from its chain of parent sessions) and the tools it is
    /// limited to: a continued session never gets more than it had.
    fn session_ctx(&self, record: &SessionRecord) -> Result<(CallContext, Option<Vec<String>>), AgentError> {
        let mut ctx = self.caller()?.context();
        ctx.identity.agent.clone_from(&record.agent);
        ctx.identity.session.clone_from(&record.id);
        ctx.identity.user.clone_from(&record.user);
        ctx.subagent_depth = record.depth;
        let mut ancestors = Vec::new();
        let mut cur = record.clone();
        // Sessions nest a few levels at most; the bound guards against a corrupt chain.
        for _ in 0..32 {
            let Some(parent) = cur.parent.as_deref().map(|p| self.store.session(p)).transpose()?.flatten() else {
                break;
            };
            if matches!(cur.kind.as_str(), "subagent" | "spawn") {
                ancestors.push(parent.agent.clone());
            }
            cur = parent;
        }
        ancestors.reverse();
        ctx.ancestors = ancestors;
        // The tools its first run was limited to, kept with the session; a research spawn stored
        // before they were kept gets the research tools, as it had.
        let spawn = record.kind == "spawn";
        let only = record.only_tools.clone().or_else(|| spawn.then(|| self.cfg.agents_defaults.research_tools.clone()));
        if spawn && let Some(set) = &only {
            ctx.subagent_deny_exempt.clone_from(set);
        }
        Ok((ctx, only))
    }

    /// Runs a stored session on with one more user message.
    async fn continue_session(
        &self,
        record: &SessionRecord,
        message: &str,
        cancel: CancellationToken,
        events: Option<EventSink>,
        grants: Option<Arc<dyn toolgate_core::CallGrants>>,
    ) -> Result<RunOutcome, AgentError> {
        // One continuation of a session at a time in this process (`sessions_send`, a team
        // result for an idle lead, `toolgate agent send` may race): a second waits for the
        // first to end and then reads the session as it left it.
        let turn_lock = {
            let mut locks = self.continuing.lock().unwrap_or_else(|e| e.into_inner());
            locks.retain(|_, l| Arc::strong_count(l) > 1);
            locks.entry(record.id.clone()).or_default().clone()
        };
        let _turn = turn_lock.lock().await;
        let record = &self.store.session(&record.id)?.unwrap_or_else(|| record.clone());
        if record.status == "running" {
            // Running here, it would have taken the message as queued (`send_queued`).
            return Err(AgentError::Invalid(format!(
                "session `{}` is running in another toolgate process; send to it there, or wait for it to end",
                record.id
            )));
        }
        let a = self.agent(&record.agent)?.clone();
        let caller = self.caller()?;
        let (mut ctx, only) = self.session_ctx(record)?;
        ctx.cancel = cancel;
        if grants.is_some() {
            ctx.grants = grants;
        }
        let mut messages: Vec<Message> = self.store.session_messages(&record.id, 0)?.iter().map(from_record).collect();
        let user = Message::User { content: message.to_owned() };
        self.store.session_append(&record.id, &to_record(&user))?;
        messages.push(user);
        self.store.session_finish(&record.id, "running", None, None, now_ms())?;
        let tools = offered(&*caller, &ctx, &a, only.as_deref());
        let mut max_iterations = a.max_iterations.max(1);
        if record.depth > 0 {
            max_iterations = max_iterations.min(self.limits.max_subagent_iterations);
        }
        let drive = Drive {
            client: self.client(&a.provider)?,
            caller,
            store: &*self.store,
            agent: record.agent.clone(),
            model: a.model.clone(),
            price: self.price(&a),
            max_iterations,
            tools,
            session: record.id.clone(),
            ctx,
            events,
            runner: self.own_runner(),
            inbox: self.inbox.clone(),
            debounce: self.limits.announce_debounce,
            turn: Default::default(),
        };
        let outcome = drive.run(messages).await;
        self.finish(&outcome);
        Ok(outcome)
    }

    fn price(&self, a: &AgentConfig) -> crate::config::Price {
        self.cfg.providers.get(&a.provider).and_then(|p| p.prices.get(&a.model)).copied().unwrap_or_default()
    }

    /// Creates the session and everything the loop needs.
    fn prepare(
        &self,
        spec: &RunSpec,
        parent_ctx: &CallContext,
        cancel: CancellationToken,
        id: Option<String>,
    ) -> Result<(Drive<'_>, Vec<Message>), AgentError> {
        let a = self.agent(&spec.agent)?.clone();
        let client = self.client(&a.provider)?;
        let caller = match &spec.tool_caller {
            Some(c) => Arc::clone(c),
            None => self.caller()?,
        };
        let id = id.unwrap_or_else(new_id);
        let parent_session = parent_ctx.identity.session.clone();
        let mut ctx = match spec.kind {
            SessionKind::Run | SessionKind::Handoff => {
                let mut c = parent_ctx.clone();
                c.identity.agent.clone_from(&spec.agent);
                c
            }
            SessionKind::Subagent | SessionKind::Spawn => parent_ctx.clone().subagent(spec.agent.clone()),
            // A delegate runs under its own name, at the delegating agent's depth, still
            // intersected with the delegating agent's ancestors.
            SessionKind::Delegation | SessionKind::Team => {
                let mut c = parent_ctx.clone();
                c.identity.agent.clone_from(&spec.agent);
                c
            }
        };
        ctx.identity.session = id.clone();
        ctx.cancel = cancel;
        // Only a research sub-agent's configured set passes the sub-agent deny list, and only for
        // it: a run or delegate started from one does not inherit it.
        ctx.subagent_deny_exempt =
            if spec.kind == SessionKind::Spawn { self.cfg.agents_defaults.research_tools.clone() } else { Vec::new() };
        let mut max_iterations = a.max_iterations.max(1);
        if matches!(spec.kind, SessionKind::Subagent | SessionKind::Spawn) {
            max_iterations = max_iterations.min(self.limits.max_subagent_iterations);
        }
        if let Some(turns) = spec.max_turns {
            max_iterations = max_iterations.min(turns.max(1));
        }
        let tools = offered(&*caller, &ctx, &a, spec.only_tools.as_deref());
        let mut messages = Vec::new();
        let briefing = self.briefing(&spec.agent, &ctx.identity.user, &tools);
        let system = match (self.system_prompt(&spec.agent, &a)?, briefing) {
            (Some(p), Some(b)) => Some(format!("{p}\n\n{b}")),
            (p, b) => p.or(b),
        };
        if let Some(system) = system {
            messages.push(Message::System { content: system });
        }
        // A task is one agent's message to another (a delegation, a sub-agent's task, a steer, a
        // reviewer's prompt): it passes the leak detector before the child or the store sees it.
        let task = caller.scrub(parent_ctx, &spec.task);
        messages.push(Message::User { content: task.clone() });
        self.store.session_create(&SessionRecord {
            id: id.clone(),
            agent: spec.agent.clone(),
            user: ctx.identity.user.clone(),
            parent: (spec.kind != SessionKind::Run).then_some(parent_session),
            kind: spec.kind.as_str().to_owned(),
            label: spec.label.clone(),
            status: "running".to_owned(),
            depth: ctx.subagent_depth,
            task,
            created_ms: now_ms(),
            only_tools: spec.only_tools.clone(),
            ..SessionRecord::default()
        })?;
        let records: Vec<_> = messages.iter().map(to_record).collect();
        self.store.session_append_turn(&id, &records, None, now_ms())?;
        let drive = Drive {
            client,
            caller,
            store: &*self.store,
            agent: spec.agent.clone(),
            model: a.model.clone(),
            price: self.price(&a),
            max_iterations,
            tools,
            session: id,
            ctx,
            events: spec.events.clone(),
            runner: self.own_runner(),
            inbox: self.inbox.clone(),
            debounce: self.limits.announce_debounce,
            turn: Default::default(),
        };
        Ok((drive, messages))
    }

    /// Tells session `parent` that its background run ended: a `[subagent:ID]` or
    /// `[delegate:ID]` announcement with the status, duration and result.
    fn announce_finished(&self, user: &str, parent: &str, o: &RunOutcome, took: Duration) {
        let kind = match self.store.session(&o.session) {
            Ok(Some(r)) if r.kind == "delegation" => "delegate",
            _ => "subagent",
        };
        let text = format!(
            "[{kind}:{}] `{}` finished ({}) after {:.1} s:\n{}",
            o.session,
            o.agent,
            o.status.as_str(),
            took.as_secs_f64(),
            clip_text(&o.for_model(), ANNOUNCE_MAX_CHARS)
        );
        self.announce_for(Some(user), parent, text);
    }

    /// Delivers `text` to `session` before its next model turn: queued when it is running,
    /// appended to its transcript when it is an idle agent session, kept for `sessions_history`
    /// otherwise (an MCP client's session). Scrubbed of secrets first.
    pub(crate) fn announce(&self, session: &str, text: String) {
        self.announce_for(None, session, text);
    }

    /// [`Runtime::announce`], with the user the session belongs to when the caller knows it:
    /// an announcement kept in memory for a session the runtime does not store is readable only
    /// by that user's caller of that session (without a user, by nobody: it is dropped).
    pub(crate) fn announce_for(&self, user: Option<&str>, session: &str, text: String) {
        let item = announce::Inbound { text: self.scrub(&text), message: false, at: Instant::now(), ts_ms: now_ms() };
        if let announce::Delivery::NotRunning(item) = self.inbox.push(session, item) {
            self.store_inbound(user, session, item);
        }
    }

    /// Queues a `sessions_send` message for a running session.
    fn queue_message(&self, session: &str, message: &str) -> Result<bool, AgentError> {
        let item = announce::Inbound { text: message.to_owned(), message: true, at: Instant::now(), ts_ms: now_ms() };
        match self.inbox.push(session, item) {
            announce::Delivery::Queued => Ok(true),
            announce::Delivery::NotRunning(_) => Ok(false),
            announce::Delivery::Full => Err(AgentError::Limit(format!(
                "session `{}` already has {MAX_QUEUED} messages waiting for its next turn; wait for it to take them \
                 (session_status) and send again",
                clip(session)
            ))),
        }
    }

    /// An item for a session that is not running: into its transcript when the runtime keeps
    /// it, else kept in memory for `sessions_history`.
    fn store_inbound(&self, user: Option<&str>, session: &str, item: announce::Inbound) {
        match self.store.session(session) {
            Ok(Some(_)) => {
                let record = toolgate_store::MessageRecord {
                    role: "user".into(),
                    content: item.text,
                    ts_ms: item.ts_ms,
                    ..Default::default()
                };
                if let Err(e) = self.store.session_append(session, &record) {
                    tracing::warn!(session, "announcement not saved: {e}");
                }
            }
            Ok(None) => match user {
                Some(user) => self.inbox.keep(user, session, item),
                None => tracing::warn!(session, "announcement for a session of no known user dropped"),
            },
            Err(e) => tracing::warn!(session, "announcement not saved: {e}"),
        }
    }

    /// Announcements kept for a session the runtime does not store, oldest first: `(ts_ms, text)`.
    pub fn kept_announcements(&self, user: &str, session: &str) -> Vec<(i64, String)> {
        self.inbox.kept(user, session).into_iter().map(|i| (i.ts_ms, i.text)).collect()
    }

    /// Secrets redacted by the gate's leak detector (model text and agent-to-agent messages);
    /// a redaction is audited as the gate's own context ([`Runtime::scrub_as`] names the writer).
    pub(crate) fn scrub(&self, text: &str) -> String {
        match self.caller() {
            Ok(c) => c.scrub(&c.context(), text),
            Err(_) => text.to_owned(),
        }
    }

    /// [`Runtime::scrub`] of what the caller of `ctx` wrote, audited as that caller.
    pub(crate) fn scrub_as(&self, ctx: &CallContext, text: &str) -> String {
        match self.caller() {
            Ok(c) => c.scrub(ctx, text),
            Err(_) => text.to_owned(),
        }
    }

    fn finish(&self, o: &RunOutcome) {
        let result = (!o.answer.is_empty()).then_some(o.answer.as_str());
        if let Err(e) = self.store.session_finish(&o.session, o.status.as_str(), result, o.error.as_deref(), now_ms()) {
            tracing::warn!(session = o.session, "agent session not saved: {e}");
        }
    }

    /// Checks the sub-agent limits for a child of `parent_ctx`.
    fn check_spawn(
        &self,
        tasks: &HashMap<String, Task>,
        spec: &RunSpec,
        parent_ctx: &CallContext,
    ) -> Result<(), AgentError> {
        let a = self.agent(&spec.agent)?;
        if spec.kind != SessionKind::Delegation && a.kind == AgentType::Predefined {
            return Err(AgentError::Invalid(format!(
                "agent `{}` is predefined: it cannot be spawned as a sub-agent; delegate to it if you have a link",
                spec.agent
            )));
        }
        if spec.kind != SessionKind::Delegation && parent_ctx.subagent_depth >= self.limits.max_depth {
            return Err(AgentError::Limit(format!(
                "sub-agents cannot spawn sub-agents (depth limit {}); do the work yourself or report back",
                self.limits.max_depth
            )));
        }
        let running: Vec<&Task> = tasks.values().filter(|t| t.done.borrow().is_none()).collect();
        let sub = |t: &&&Task| t.kind != SessionKind::Delegation;
        if spec.kind != SessionKind::Delegation {
            let n = running.iter().filter(sub).count();
            if n >= self.limits.max_concurrent {
                return Err(AgentError::Limit(format!(
                    "too many sub-agents running ({n}/{}); wait for one to finish (subagents list) or cancel one",
                    self.limits.max_concurrent
                )));
            }
            let mine = running.iter().filter(sub).filter(|t| t.parent == parent_ctx.identity.session).count();
            if mine >= self.limits.max_children {
                return Err(AgentError::Limit(format!(
                    "you already have {mine}/{} sub-agents running; wait for one (subagents list) or cancel one",
                    self.limits.max_children
                )));
            }
        } else {
            let from = &parent_ctx.identity.agent;
            let user = &parent_ctx.identity.user;
            let link = self.cfg.link(from, &spec.agent, user).ok_or_else(|| {
                let targets = self.cfg.targets(from, user);
                AgentError::Invalid(format!(
                    "agent `{from}` has no delegation link to `{}`; {}",
                    clip(&spec.agent),
                    if targets.is_empty() {
                        "you cannot delegate: handle it yourself".to_owned()
                    } else {
                        format!("you can delegate to: {}", targets.join(", "))
                    }
                ))
            })?;
            let to_target: Vec<&&Task> =
                running.iter().filter(|t| t.kind == SessionKind::Delegation && t.agent == spec.agent).collect();
            let load = to_target.len();
            if load >= a.max_delegation_load as usize {
                return Err(AgentError::Limit(format!(
                    "Agent at capacity ({load}/{}). Try a different agent or handle it yourself.",
                    a.max_delegation_load
                )));
            }
            let on_link = to_target.iter().filter(|t| &t.from_agent == from).count();
            if on_link >= link.max_concurrent as usize {
                return Err(AgentError::Limit(format!(
                    "Link from `{from}` to `{}` at capacity ({on_link}/{}). Wait for one of your delegations to finish, try a different agent or handle it yourself.",
                    spec.agent, link.max_concurrent
                )));
            }
        }
        Ok(())
    }

    /// Starts `spec` as a child of `parent_ctx` in the background; returns its session id.
    /// Limits are checked first; cancelling the task reaches its model request and its tool calls.
    pub fn spawn(self: &Arc<Self>, spec: RunSpec, parent_ctx: &CallContext) -> Result<String, AgentError> {
        self.archive();
        let (id, fut) = self.start(spec, parent_ctx)?;
        let rt = self.clone();
        let (user, parent) = (parent_ctx.identity.user.clone(), parent_ctx.identity.session.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = fut.await;
            // A run started in the background reports back by itself (seed 000 §6, §7).
            rt.announce_finished(&user, &parent, &outcome, started.elapsed());
        });
        Ok(id)
    }

    /// Runs `spec` as a child of `parent_ctx` and waits for it (limits apply as for [`Runtime::spawn`]).
    pub async fn run_child(
        self: &Arc<Self>,
        spec: RunSpec,
        parent_ctx: &CallContext,
    ) -> Result<RunOutcome, AgentError> {
        self.archive();
        let (id, fut) = self.start(spec, parent_ctx)?;
        // The child runs as a task of its own, so a caller that gives up (its call cancelled,
        // or its future dropped) cancels it through its token and it still ends properly: its
        // session finished, its task marked done, its queue handed to the transcript.
        let mut child = tokio::spawn(fut);
        let _guard = CancelOnDrop(self.task_token(&id));
        let cancel = parent_ctx.cancel.clone();
        tokio::select! {
            o = &mut child => o.map_err(|e| AgentError::Invalid(format!("the run of `{id}` failed: {e}"))),
            () = cancel.cancelled() => Err(AgentError::Cancelled),
        }
    }

    fn task_token(&self, id: &str) -> Option<CancellationToken> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).get(id).map(|t| t.cancel.clone())
    }

    /// Registers the task and returns the future that runs it.
    fn start(
        self: &Arc<Self>,
        spec: RunSpec,
        parent_ctx: &CallContext,
    ) -> Result<(String, impl std::future::Future<Output = RunOutcome> + Send + 'static), AgentError> {
        let cancel = self.shutdown.child_token();
        let id = new_id();
        // Fail early (unknown provider, unbound) before registering.
        self.prepare_check(&spec)?;
        let (tx, rx) = watch::channel(None);
        let ended: Arc<OnceLock<Instant>> = Arc::default();
        // Check and register under one lock, so concurrent spawns cannot pass a limit together.
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if !spec.internal {
            self.check_spawn(&tasks, &spec, parent_ctx)?;
        }
        let skip_gates = spec.skip_gates || tasks.get(&parent_ctx.identity.session).is_some_and(|t| t.skip_gates);
        tasks.insert(
            id.clone(),
            Task {
                agent: spec.agent.clone(),
                parent: parent_ctx.identity.session.clone(),
                from_agent: parent_ctx.identity.agent.clone(),
                kind: spec.kind,
                spec: spec.clone(),
                parent_ctx: parent_ctx.clone(),
                cancel: cancel.clone(),
                done: rx,
                started: Instant::now(),
                ended: ended.clone(),
                skip_gates,
            },
        );
        drop(tasks);
        let rt = self.clone();
        let parent_ctx = parent_ctx.clone();
        let task_id = id.clone();
        let ended_at = ended;
        let fut = async move {
            let outcome = match rt.prepare(&spec, &parent_ctx, cancel.clone(), Some(task_id.clone())) {
                Ok((drive, messages)) => {
                    let outcome = drive.run(messages).await;
                    if spec.kind == SessionKind::Delegation && !skip_gates {
                        rt.finish(&outcome);
                        rt.apply_gates(&spec, &parent_ctx, outcome, &cancel).await
                    } else {
                        outcome
                    }
                }
                Err(e) => RunOutcome {
                    error: Some(e.to_string()),
                    ..RunOutcome::empty(&task_id, &spec.agent, RunStatus::Failed)
                },
            };
            rt.finish(&outcome);
            let _ = ended_at.set(Instant::now());
            let _ = tx.send(Some(outcome.clone()));
            outcome
        };
        Ok((id, fut))
    }

    fn prepare_check(&self, spec: &RunSpec) -> Result<(), AgentError> {
        let a = self.agent(&spec.agent)?;
        self.client(&a.provider)?;
        self.caller()?;
        Ok(())
    }

    /// Waits for a task to end (at most `timeout`); `None` if it is unknown or still running.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Option<RunOutcome> {
        let mut rx = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).get(id).map(|t| t.done.clone())?;
        let _ = tokio::time::timeout(timeout, rx.wait_for(Option::is_some)).await;
        rx.borrow().clone()
    }

    /// Tasks started by session `parent` of `kind`s, newest first.
    pub fn list(&self, parent: &str, delegations: bool) -> Vec<TaskInfo> {
        self.archive();
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(Instant, TaskInfo)> = tasks
            .iter()
            .filter(|(_, t)| t.parent == parent && (t.kind == SessionKind::Delegation) == delegations)
            .map(|(id, t)| (t.started, info(id, t)))
            .collect();
        out.sort_by_key(|(started, _)| std::cmp::Reverse(*started));
        out.into_iter().map(|(_, i)| i).collect()
    }

    /// Cancels `id` (`all`: every running task of `parent`; `last`: its newest), if it belongs
    /// to session `parent`. Returns the ids cancelled.
    pub fn cancel(&self, parent: &str, id: &str, delegations: bool) -> Result<Vec<String>, AgentError> {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine: Vec<(&String, &Task)> = tasks
            .iter()
            .filter(|(_, t)| t.parent == parent && (t.kind == SessionKind::Delegation) == delegations)
            .collect();
        mine.sort_by_key(|(_, t)| std::cmp::Reverse(t.started));
        let running = |t: &Task| t.done.borrow().is_none();
        let chosen: Vec<(&String, &Task)> = match id {
            "all" => mine.into_iter().filter(|(_, t)| running(t)).collect(),
            "last" => mine.into_iter().take(1).collect(),
            _ => mine.into_iter().filter(|(tid, _)| tid.as_str() == id).collect(),
        };
        if chosen.is_empty() {
            return Err(AgentError::Invalid(if id == "all" || id == "last" {
                "you have no such tasks; list them first".to_owned()
            } else {
                format!("no task `{}` of yours; list them first", clip(id))
            }));
        }
        let mut out = Vec::new();
        for (tid, t) in chosen {
            if !running(t) {
                if id != "all" {
                    return Err(finished_error(tid, t));
                }
                continue;
            }
            t.cancel.cancel();
            out.push(tid.clone());
        }
        Ok(out)
    }

    /// Steers a running sub-agent: cancels it, waits the settle time, and starts it again
    /// with `message` added to its task. Returns the new task's id.
    pub async fn steer(self: &Arc<Self>, parent: &str, id: &str, message: &str) -> Result<String, AgentError> {
        let (spec, parent_ctx, mut done) = {
            let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            let t = tasks
                .get(id)
                .filter(|t| t.parent == parent && t.kind != SessionKind::Delegation)
                .ok_or_else(|| AgentError::Invalid(format!("no sub-agent `{}` of yours; list them first", clip(id))))?;
            if t.done.borrow().is_some() {
                return Err(finished_error(id, t));
            }
            t.cancel.cancel();
            (t.spec.clone(), t.parent_ctx.clone(), t.done.clone())
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), done.wait_for(Option::is_some)).await;
        tokio::time::sleep(self.limits.steer_settle).await;
        let mut spec = spec;
        spec.task = format!("{}\n\nUpdate from the agent that started you: {message}", spec.task);
        self.spawn(spec, &parent_ctx)
    }

    /// Archives sessions idle past the limit and forgets finished tasks as old.
    fn archive(&self) {
        let cutoff = now_ms() - self.limits.archive_after.as_millis() as i64;
        if let Err(e) = self.store.sessions_archive_idle(cutoff) {
            tracing::warn!("archiving agent sessions: {e}");
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|_, t| t.ended.get().is_none_or(|at| at.elapsed() < self.limits.archive_after));
    }

    /// Recent sessions (for `sessions_list` and the CLI).
    pub fn sessions(&self, filter: &SessionFilter<'_>) -> Result<Vec<SessionRecord>, AgentError> {
        self.archive();
        Ok(self.store.sessions(filter)?)
    }
}

/// Cancels a task when a synchronous wait is abandoned.
struct CancelOnDrop(Option<CancellationToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.cancel();
        }
    }
}

fn info(id: &str, t: &Task) -> TaskInfo {
    let done = t.done.borrow();
    TaskInfo {
        id: id.to_owned(),
        agent: t.agent.clone(),
        status: done.as_ref().map_or("running", |o| o.status.as_str()).to_owned(),
        label: t.spec.label.clone(),
        age_secs: t.started.elapsed().as_secs(),
        result: done.as_ref().map(RunOutcome::for_model),
    }
}

fn finished_error(id: &str, t: &Task) -> AgentError {
    let status = t.done.borrow().as_ref().map_or("done", |o| o.status.as_str());
    AgentError::Invalid(format!(
        "task `{id}` already finished ({status}); nothing to cancel or steer: read its result with list, or spawn a new one"
    ))
}

/// The tools offered to the model: what the caller's policy lets the agent see, narrowed to the
/// agent's `tools` list and to `only`.
fn offered(caller: &dyn ToolCaller, ctx: &CallContext, a: &AgentConfig, only: Option<&[String]>) -> Vec<ToolDef> {
    caller
        .tools(ctx)
        .into_iter()
        .filter(|s| a.tools.is_empty() || a.tools.iter().any(|t| lists(t, &s.name, &s.group)))
        .filter(|s| only.is_none_or(|o| o.iter().any(|t| t == &s.name)))
        .map(|s| ToolDef { name: s.name, description: s.description, parameters: s.input_schema })
        .collect()
}

/// Whether an entry of an agent's `tools` names a tool: its name, `*` (every tool its policy
/// lets it see), a name prefix ending in `*` (`mcp__github__*`) or `group:NAME`.
fn lists(entry: &str, name: &str, group: &str) -> bool {
    if let Some(wanted) = entry.strip_prefix("group:") {
        return group == wanted || (wanted == "mcp" && group.starts_with("mcp:"));
    }
    match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    }
}

fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

pub(crate) fn clip(s: &str) -> String {
    s.chars().take(100).collect()
}

/// `s` cut to `max` characters, marked when cut.
pub(crate) fn clip_text(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_owned() } else { format!("{}...", s.chars().take(max).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::lists;

    #[test]
    fn an_agents_tools_entry_is_a_name_a_wildcard_or_a_group() {
        assert!(lists("*", "read", "fs"), "`*`: every tool its policy shows");
        assert!(lists("read", "read", "fs") && !lists("read", "ready", "fs"));
        assert!(lists("mcp__github__*", "mcp__github__issue", "mcp:github"));
        assert!(!lists("mcp__github__*", "mcp__gitlab__issue", "mcp:gitlab"));
        assert!(lists("group:fs", "edit", "fs") && !lists("group:fs", "exec", "runtime"));
        assert!(lists("group:mcp", "mcp__github__issue", "mcp:github"));
    }
}
