//! Tool families: the one way a group of tools joins a gate (ARCHITECTURE.md, "Adding a tool
//! family").
//!
//! A family is a value implementing [`Family`]: from the shared [`Services`] (built once per
//! gate) and its configuration section it makes its tools, and optionally the JSON endpoints a
//! long-lived `toolgate serve --http` mounts beside `/mcp` and the background tasks it runs
//! until shutdown. `builtin()` is the table of toolgate's own families, in registration
//! order; [`GateBuilder::family`](crate::GateBuilder::family) adds an embedder's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolgate_core::Tool;
pub use toolgate_mcp::{ApiHandler, HttpRoute, Mount, RouteAuth, RouteRequest};
use toolgate_tools::custom::{NoSecrets, SecretSource};

use crate::GateError;
use crate::services::Services;

/// Background work of a family: runs until the shutdown token it was given is cancelled.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A group of tools with what it needs, built from the gate's [`Services`].
///
/// Every method has a default, so a family implements only what it brings.
pub trait Family: Send + Sync + std::fmt::Debug {
    /// Its name: the tool group of its tools and the path its endpoints are mounted under
    /// (`/api/NAME/...`).
    fn name(&self) -> &'static str;

    /// Its tools, made from the shared services and its part of the configuration
    /// (`services.config`). The built-in families' names are protected: no other tool can
    /// take them.
    fn tools(&self, services: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let _ = services;
        Ok(Vec::new())
    }

    /// JSON endpoints served under `/api/NAME/` by `toolgate serve --http`, behind the same
    /// bearer token and Host/Origin checks as `/mcp` (webhooks, a page's API, health).
    fn routes(&self, services: &Services) -> Option<Arc<dyn ApiHandler>> {
        let _ = services;
        None
    }

    /// Whole-request endpoints a `toolgate serve --http` mounts beside `/mcp` at their own
    /// prefixes: pages, webhook receivers, live streams (server-sent events). A
    /// [`RouteAuth::Own`] mount authenticates its requests itself.
    fn mounts(&self, services: &Services) -> Vec<Mount> {
        let _ = services;
        Vec::new()
    }

    /// Work a long-lived `toolgate serve` runs in the background (a scheduler, a listener,
    /// retention), each task ending when `shutdown` is cancelled.
    fn tasks(&self, services: &Services, shutdown: &CancellationToken) -> Vec<Task> {
        let _ = (services, shutdown);
        Vec::new()
    }

    /// The port that keeps MCP tasks (`io.modelcontextprotocol/tasks`: a long call answered
    /// with a task handle, then `tasks/get`, `tasks/cancel`), if this family keeps them; the
    /// first family that offers one serves them (the automation family, over its jobs).
    fn mcp_tasks(&self, services: &Services) -> Option<Arc<dyn toolgate_mcp::TaskHost>> {
        let _ = services;
        None
    }
}

/// The JSON endpoints a server mounts beside `/mcp`: each family's under `/api/NAME/`, and
/// `rest` (the approvals API) for every path no family claims.
#[derive(Debug)]
pub struct Mounted {
    families: Vec<(&'static str, Arc<dyn ApiHandler>)>,
    rest: Option<Arc<dyn ApiHandler>>,
}

impl Mounted {
    /// `families` as [`Gate::routes`](crate::Gate::routes) gives them, then `rest`.
    pub fn new(families: Vec<(&'static str, Arc<dyn ApiHandler>)>, rest: Option<Arc<dyn ApiHandler>>) -> Self {
        Mounted { families, rest }
    }
}

impl ApiHandler for Mounted {
    fn handle(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, serde_json::Value)> {
        self.handle_as(None, method, path, body)
    }

    fn handle_as(
        &self,
        caller: Option<&toolgate_mcp::Caller>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Option<(u16, serde_json::Value)> {
        let claimed = self.families.iter().find(|(name, _)| {
            path.strip_prefix("/api/")
                .and_then(|p| p.strip_prefix(name))
                .is_some_and(|r| r.is_empty() || r.starts_with('/'))
        });
        match claimed {
            Some((_, api)) => api.handle_as(caller, method, path, body),
            None => self.rest.as_ref()?.handle_as(caller, method, path, body),
        }
    }
}

/// toolgate's own families, in registration order. A new family is one line here
/// (ARCHITECTURE.md, "Adding a tool family").
pub(crate) fn builtin() -> Vec<Arc<dyn Family>> {
    vec![
        Arc::new(Basic),
        Arc::new(Files),
        Arc::new(Runtime),
        Arc::new(Skills),
        Arc::new(Memory),
        Arc::new(Web),
        Arc::new(Agents),
        Arc::new(Extensions),
        Arc::new(Automation::default()),
        Arc::new(Browser::default()),
        Arc::new(Media),
        Arc::new(crate::gateway_family::Gateway),
        Arc::new(Nodes),
    ]
}

/// `nodes` (`toolgate_nodes`): on a team gateway, or once a node is paired
/// (`toolgate nodes add`); a single-user workspace without pairings does not list it.
#[derive(Debug)]
struct Nodes;

impl Family for Nodes {
    fn name(&self) -> &'static str {
        "nodes"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let Some(stores) = &s.stores else { return Ok(Vec::new()) };
        let pairings = toolgate_nodes::Pairings::new(Arc::clone(&stores.secrets));
        let paired = stores.secrets.secret_keys(toolgate_nodes::PAIRING_PREFIX).is_ok_and(|names| !names.is_empty());
        if !(s.config.gateway.enabled || paired) {
            return Ok(Vec::new());
        }
        Ok(vec![Arc::new(toolgate_nodes::NodesTool::new(pairings))])
    }
}

/// `echo`, `time`, `json` (`toolgate_tools::basic`).
#[derive(Debug)]
struct Basic;

impl Family for Basic {
    fn name(&self) -> &'static str {
        "basic"
    }

    fn tools(&self, _: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(toolgate_tools::basic::tools())
    }
}

/// The file tools (`toolgate_tools::fs`), observed by memory when it is on; with a state
/// database their path locks are in it, shared with every process on the workspace.
#[derive(Debug)]
struct Files;

impl Family for Files {
    fn name(&self) -> &'static str {
        "fs"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // Memory's hook, wrapped to publish `file` events too.
        let inner = s.memory.as_ref().map(|m| m.hook.clone());
        let observer: Option<Arc<dyn toolgate_tools::fs::WriteObserver>> =
            Some(Arc::new(crate::events::FileEvents { inner, events: s.events.clone() }));
        let locks = s.stores.as_ref().map(|st| Arc::clone(&st.locks));
        toolgate_tools::fs::tools_shared(s.config.fs.clone(), observer, locks).map_err(|e| GateError::Fs(e.to_string()))
    }
}

/// `exec`, `process`, `execute_code` (`toolgate_tools::runtime`), on the shared runner.
#[derive(Debug)]
struct Runtime;

impl Family for Runtime {
    fn name(&self) -> &'static str {
        "runtime"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // A toolgate killed with SIGKILL leaves its sandbox's temporary folder: remove those
        // of dead processes (one read of the temporary directory). A one-shot call leaves it to
        // its first sandbox, which sweeps once per process before it makes its own folder (a
        // call that runs no command does not read `/tmp`: 0.25-0.45 ms with 700 entries).
        if !s.one_shot {
            toolgate_tools::runtime::Sandbox::sweep_stale_temp_dirs();
        }
        // With a shared store, each background process is recorded with the node that runs
        // it: a `process` call reaching another node goes there (`node::sharing`).
        if let Some((store, forwarder)) = crate::node::sharing(&s.config, "background processes") {
            if let Some(forwarder) = forwarder {
                s.runner.forward_with(forwarder);
            }
            s.runner.share_across_nodes(store);
        }
        Ok(toolgate_tools::runtime::tools(&s.runner))
    }
}

/// The `skill_*` tools (`toolgate_tools::skills`).
#[derive(Debug)]
struct Skills;

impl Family for Skills {
    fn name(&self) -> &'static str {
        "skills"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let cache = s.stores.as_ref().map(|st| Arc::clone(&st.embeddings));
        Ok(toolgate_tools::skills::tools(&s.fetcher, s.embedder.clone(), cache))
    }
}

/// The `memory_*` tools, when `[memory]` is on.
#[derive(Debug)]
struct Memory;

impl Family for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(s.memory.iter().flat_map(|m| toolgate_tools::memory::tools(m.store.clone())).collect())
    }
}

/// `web_fetch`, `http`, `web_search`, `html_to_markdown`, on the shared fetcher.
#[derive(Debug)]
struct Web;

impl Family for Web {
    fn name(&self) -> &'static str {
        "web"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // Search API keys: the environment first, then the store's secrets.
        let secrets: Arc<dyn SecretSource> = match &s.stores {
            Some(st) => Arc::new(crate::extensions::StoreSecrets(Arc::clone(&st.secrets))),
            None => Arc::new(NoSecrets),
        };
        Ok(toolgate_tools::web::tools(&s.config.web, &s.fetcher, Arc::clone(&s.detector), secrets))
    }
}

/// The agent tools, when `[agents]` exist (`toolgate_agent::tools`); `delegate_search` ranks by
/// meaning with the gate's embedder, its agent vectors kept beside the skills'.
#[derive(Debug)]
struct Agents;

impl Family for Agents {
    fn name(&self) -> &'static str {
        "sessions"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        if let (Some(rt), Some(embedder)) = (&s.agents, &s.embedder) {
            rt.set_embedder(Arc::clone(embedder), s.stores.as_ref().map(|st| Arc::clone(&st.embeddings)));
        }
        Ok(s.agents.iter().flat_map(toolgate_agent::tools).collect())
    }
}

/// `tool_list|search|install|auth|activate|remove` (`toolgate_extensions`), made from narrow
/// values of the services and [`ConfigOnDisk`], their port to the configuration.
#[derive(Debug)]
struct Extensions;

impl Family for Extensions {
    fn name(&self) -> &'static str {
        "extensions"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let setup = toolgate_extensions::Setup {
            workspace: s.workspace.clone(),
            host: Arc::new(ConfigOnDisk { workspace: s.workspace.clone() }),
            started: config_view(&s.config),
            approval_never: s.config.approval.mode == crate::config::ApprovalMode::Never,
            // Weak: the registry holds these tools (a strong reference would keep every tool
            // alive after the gate is gone).
            registry: Arc::downgrade(&s.registry),
            bridge: std::sync::Weak::clone(&s.bridge),
            secrets: s.stores.as_ref().map(|st| Arc::clone(&st.secrets)),
            wasm_failed: Arc::clone(&s.wasm_failed),
            wasm_host: Arc::clone(&s.wasm_host),
        };
        Ok(toolgate_extensions::tools(&setup))
    }
}

/// Jobs, routines, `cron`, `message`, `build_software` (`toolgate_automation`).
#[derive(Debug, Default)]
struct Automation {
    /// The routines service its tools were made with, for its scheduler task and its
    /// `/hooks/` route (one per gate: the table is made per gate).
    routines: std::sync::OnceLock<Arc<toolgate_automation::routines::Routines>>,
    /// The jobs engine the routines run on (its finished jobs are `job` events).
    jobs: std::sync::OnceLock<toolgate_automation::jobs::Jobs>,
}

impl Family for Automation {
    fn name(&self) -> &'static str {
        "automation"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let mut setup = toolgate_automation::Setup::with_detector(Arc::clone(&s.detector));
        setup.agents = s.agents.clone();
        setup.channels = s.config.automation.channels.clone();
        if let Some(st) = &s.stores {
            setup.secrets = Some(Arc::new(crate::extensions::StoreSecrets(Arc::clone(&st.secrets))));
            setup.outbox = Some(Arc::clone(&st.outbox));
            setup.jobs = Some(toolgate_automation::jobs::Jobs::new(toolgate_automation::jobs::JobsSetup {
                store: Arc::clone(&st.jobs),
                agents: s.agents.clone(),
                secrets: setup.secrets.clone(),
                workspace: s.workspace.clone(),
                config: {
                    let mut jobs = s.config.automation.jobs.clone();
                    // Only a gateway's own gate has it on (a per-user gate turns it off).
                    jobs.shared_gateway = s.config.gateway.enabled;
                    jobs
                },
            }));
            // A job run where no server forwards the gate's events (the CLI's `wait`) reads
            // its calls' decisions itself.
            if let Some(jobs) = &setup.jobs {
                let events = s.events.clone();
                jobs.set_decisions(Arc::new(move || Box::new(GateDecisions(events.subscribe()))));
            }
        }
        // Routines: every run a job of the same engine; context paths confined by the file
        // tools' rules; a model counts as configured when an agent is.
        if let (Some(st), Some(jobs)) = (&s.stores, &setup.jobs) {
            use toolgate_automation::routines::{JobsSink, Routines, RoutinesSetup};
            let files = toolgate_tools::fs::FsState::new_shared(s.config.fs.clone())
                .map_err(|e| GateError::Fs(e.to_string()))?;
            let model = s.agents.as_ref().is_some_and(|rt| !rt.config().agents.is_empty());
            let sink = Arc::new(JobsSink::new(jobs.clone(), s.agents.clone()));
            let routines = self.routines.get_or_init(|| {
                let setup = RoutinesSetup::new(
                    s.workspace.clone(),
                    Arc::clone(&st.routines),
                    Arc::clone(&st.secrets),
                    files,
                    sink,
                    model,
                )
                .with_config(s.config.automation.routines.config())
                // A gateway caller's routine fires under its principal's grants as they are then.
                .with_grants(Arc::clone(&s.routine_grants));
                Routines::new(setup)
            });
            setup.routines = Some(Arc::clone(routines));
            let _ = self.jobs.set(jobs.clone());
        }
        Ok(toolgate_automation::tools(&setup))
    }

    /// MCP tasks are one-call jobs of the caller (`crate::tasks`).
    fn mcp_tasks(&self, s: &Services) -> Option<Arc<dyn toolgate_mcp::TaskHost>> {
        let tools = &s.config.automation.task_tools;
        self.jobs.get().and_then(|jobs| crate::tasks::host(jobs, &s.registry, tools))
    }

    /// `/hooks/NAME`: webhook routines, each request checked by its HMAC signature (not the
    /// bearer token, which a sender does not have).
    /// `/hooks/messages/CHANNEL` (the same route): messages the channels receive, verified as
    /// each service documents, published as `message` events.
    fn mounts(&self, s: &Services) -> Vec<Mount> {
        let Some(routines) = self.routines.get() else { return Vec::new() };
        routines.set_http(true);
        let secrets: Option<Arc<dyn SecretSource>> =
            s.stores.as_ref().map(|st| Arc::new(crate::extensions::StoreSecrets(Arc::clone(&st.secrets))) as _);
        let inbound = toolgate_automation::message::inbound::Inbound::new(
            s.config.automation.channels.clone(),
            secrets,
            routines,
        );
        let hooks = Hooks {
            routines: Arc::clone(routines),
            inbound: Arc::new(inbound),
            events: s.events.clone(),
            detector: Arc::clone(&s.detector),
            audit: Arc::clone(&s.audit),
        };
        vec![Mount::new("/hooks", RouteAuth::Own, Arc::new(hooks))]
    }

    /// Jobs: this server runs them and claims queued ones; those of a server that died (their
    /// lease lapsed) end as `failed: interrupted`: at start, then every lease.
    fn tasks(&self, s: &Services, shutdown: &CancellationToken) -> Vec<Task> {
        let Some(st) = &s.stores else { return Vec::new() };
        // Said once, when a server starts: a name that is no tool yet may be a bridged server's.
        for warning in crate::tasks::unknown_task_tools_warnings(&s.registry, &s.config.automation.task_tools) {
            tracing::warn!("{warning}");
        }
        let period = s.config.automation.jobs.lease();
        // A server runs its jobs and claims those the CLI left queued (`Jobs::serve`).
        let mut tasks: Vec<Task> = match self.jobs.get() {
            Some(jobs) => vec![Box::pin(jobs.clone().serve(shutdown.clone()))],
            None => vec![Box::pin(toolgate_automation::jobs::sweeper(Arc::clone(&st.jobs), period, shutdown.clone()))],
        };
        // The routines' scheduler: fires only while this process holds the workspace's lease;
        // and the gate's events (and finished jobs) to the `event` routines.
        if let Some(routines) = self.routines.get() {
            tasks.push(Box::pin(Arc::clone(routines).run(shutdown.clone())));
            let jobs = self.jobs.get().map(|j| j.subscribe());
            let events = s.events.subscribe();
            let calls = self.jobs.get().cloned();
            tasks.push(Box::pin(forward_events(Arc::clone(routines), events, jobs, calls, shutdown.clone())));
        }
        tasks
    }
}

/// The gate's `tool` events as the decisions of the calls jobs make.
struct GateDecisions(tokio::sync::broadcast::Receiver<crate::events::GateEvent>);

impl GateDecisions {
    fn decision(e: &crate::events::GateEvent) -> Option<toolgate_automation::jobs::CallDecision> {
        (e.channel == "tool")
            .then(|| toolgate_automation::jobs::CallDecision::new(&e.session, &e.subject, &e.detail, &e.trace))
    }
}

#[async_trait::async_trait]
impl toolgate_automation::jobs::DecisionStream for GateDecisions {
    async fn next(&mut self) -> Option<toolgate_automation::jobs::CallDecision> {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match self.0.recv().await {
                Ok(e) => match Self::decision(&e) {
                    Some(d) => return Some(d),
                    None => continue,
                },
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    }

    fn try_next(&mut self) -> Option<toolgate_automation::jobs::CallDecision> {
        use tokio::sync::broadcast::error::TryRecvError;
        loop {
            match self.0.try_recv() {
                Ok(e) => match Self::decision(&e) {
                    Some(d) => return Some(d),
                    None => continue,
                },
                Err(TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    }
}

/// Hands the gate's events and finished jobs to the `event` routines until `shutdown`, and each
/// call's decision trace to the job that made it (`calls`).
async fn forward_events(
    routines: Arc<toolgate_automation::routines::Routines>,
    mut events: tokio::sync::broadcast::Receiver<crate::events::GateEvent>,
    jobs: Option<tokio::sync::broadcast::Receiver<toolgate_automation::jobs::JobFinished>>,
    calls: Option<toolgate_automation::jobs::Jobs>,
    shutdown: CancellationToken,
) {
    use tokio::sync::broadcast::error::RecvError;
    use toolgate_automation::routines::Event;
    let mut jobs = jobs;
    loop {
        let job_next = async {
            match jobs.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            e = events.recv() => match e {
                Ok(e) => {
                    if e.channel == "tool" && let Some(calls) = &calls {
                        calls.call_decided(&e.session, &e.subject, &e.detail, &e.trace);
                    }
                    Event { channel: e.channel, subject: e.subject, detail: e.detail, session: e.session }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "routines: gate events came faster than routines could match them");
                    continue;
                }
                Err(RecvError::Closed) => return,
            },
            j = job_next => match j {
                Ok(j) => Event {
                    channel: "job",
                    subject: routines.job_title(&j.id).unwrap_or_else(|| j.id.clone()),
                    detail: j.state.clone(),
                    session: j.origin.clone().unwrap_or_default(),
                },
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => { jobs = None; continue }
            },
        };
        routines.on_event(&event).await;
    }
}

/// The webhook route of the routines: the raw body and the signature headers, handed to
/// [`toolgate_automation::routines::Routines::webhook`]; under `/hooks/messages/`, to the
/// channels' receiving side, whose accepted messages become `message` events.
#[derive(Debug)]
struct Hooks {
    routines: Arc<toolgate_automation::routines::Routines>,
    inbound: Arc<toolgate_automation::message::inbound::Inbound>,
    events: crate::events::Events,
    detector: Arc<toolgate_guard::leak::LeakDetector>,
    /// The gate's audit log: one row per verified inbound message (accepted, dropped, over the
    /// rate).
    audit: Arc<std::sync::OnceLock<Arc<dyn toolgate_store::AuditStore>>>,
}

/// The audit row of a verified inbound message: not a call (tool
/// [`toolgate_automation::message::inbound::AUDIT_TOOL`]), in the session `inbound:CHANNEL`,
/// with no user (the sender is none of the gate's users) and never the text.
fn inbound_row(a: &toolgate_automation::message::inbound::InboundAudit) -> toolgate_store::AuditRecord {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    toolgate_store::AuditRecord {
        id: format!("inbound-{}", toolgate_guard::random::hex_id(12)),
        ts_ms: i64::try_from(now.as_millis()).unwrap_or(i64::MAX),
        session: format!("inbound:{}", a.channel),
        tool: toolgate_automation::message::inbound::AUDIT_TOOL.to_owned(),
        params: serde_json::json!({"channel": a.channel, "sender": a.sender, "chars": a.chars}).to_string(),
        decision: a.decision.clone(),
        outcome: a.outcome.to_owned(),
        subject: Some(a.subject()),
        ..toolgate_store::AuditRecord::default()
    }
}

impl HttpRoute for Hooks {
    fn serve(
        &self,
        req: RouteRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = http::Response<toolgate_mcp::HttpBody>> + Send + 'static>> {
        use toolgate_automation::routines::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER};
        let routines = Arc::clone(&self.routines);
        let (inbound, events, detector) = (Arc::clone(&self.inbound), self.events.clone(), Arc::clone(&self.detector));
        let audit = self.audit.get().cloned();
        Box::pin(async move {
            let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            if req.uri.path().starts_with(toolgate_automation::message::inbound::PATH) {
                let reply = inbound.receive(req.method.as_str(), req.uri.path(), &header, &req.body);
                if let Some(m) = &reply.message {
                    events.publish(crate::events::GateEvent {
                        channel: "message",
                        subject: m.subject(),
                        detail: m.detail(&detector),
                        user: String::new(),
                        session: format!("inbound:{}", m.channel),
                        trace: Vec::new(),
                    });
                }
                if let (Some(a), Some(log)) = (&reply.audit, &audit) {
                    log.record(inbound_row(a));
                }
                let mut response = toolgate_mcp::reply::json(reply.status, &reply.body);
                if let Some(secs) = reply.retry_after_secs {
                    response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
                }
                return response;
            }
            let (ts, sig) = (header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER));
            let (status, body) =
                routines.webhook(req.method.as_str(), req.uri.path(), ts.as_deref(), sig.as_deref(), &req.body).await;
            toolgate_mcp::reply::json(status, &body)
        })
    }
}

/// `browser`, `capture_screenshot`, `canvas` (`toolgate_browser`); the canvas pages at
/// `/canvas` (`canvas.rs`), one set of boards per gate shared by the tool and the pages.
#[derive(Debug, Default)]
struct Browser {
    canvas: std::sync::OnceLock<Arc<toolgate_browser::canvas::Canvas>>,
    /// The gate's browsers: Chromium starts on first use, behind the web tools' URL policy
    /// (`s.fetcher`), and is killed when the gate goes.
    browsers: std::sync::OnceLock<toolgate_browser::Browsers>,
}

impl Browser {
    fn canvas(&self, s: &Services) -> Arc<toolgate_browser::canvas::Canvas> {
        let canvas = self.canvas.get_or_init(|| {
            let settings = &s.config.browser;
            let config =
                toolgate_browser::canvas::CanvasConfig::new(settings.canvas_scripts, settings.canvas_url.clone());
            toolgate_browser::canvas::Canvas::new(config)
        });
        Arc::clone(canvas)
    }
}

impl Family for Browser {
    fn name(&self) -> &'static str {
        "browser"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let mut setup = toolgate_browser::Setup::default();
        setup.canvas = self.canvas(s);
        setup.browsers = Some(
            self.browsers
                .get_or_init(|| {
                    let profiles = s.workspace.join(".toolgate").join("browser");
                    let browsers = toolgate_browser::Browsers::new(toolgate_browser::BrowserConfig::new(
                        profiles,
                        s.fetcher.clone(),
                    ));
                    // With a shared store, each session is recorded with the node that holds
                    // it: a `browser` call naming it that reaches another node goes there.
                    if let Some((store, forwarder)) = crate::node::sharing(&s.config, "browser sessions") {
                        if let Some(forwarder) = forwarder {
                            browsers.forward_with(forwarder);
                        }
                        browsers.share_across_nodes(store);
                    }
                    browsers
                })
                .clone(),
        );
        Ok(toolgate_browser::tools(&setup))
    }

    fn mounts(&self, s: &Services) -> Vec<Mount> {
        vec![crate::canvas::mount(self.canvas(s))]
    }
}

/// `image`, `tts` (`toolgate_media`).
#[derive(Debug)]
struct Media;

impl Family for Media {
    fn name(&self) -> &'static str {
        "media"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // The file tools' confinement and rules (and, with a state database, their write lock
        // across processes); keys from the store's secrets; programs under `[runtime.sandbox]`'s
        // limits and fallback.
        let fs =
            toolgate_tools::fs::FsState::new_shared(s.config.fs.clone()).map_err(|e| GateError::Fs(e.to_string()))?;
        if let Some(st) = &s.stores {
            fs.share_across_processes(Arc::clone(&st.locks));
        }
        let secrets: Arc<dyn SecretSource> = match &s.stores {
            Some(st) => Arc::new(crate::extensions::StoreSecrets(Arc::clone(&st.secrets))),
            None => Arc::new(NoSecrets),
        };
        let setup = toolgate_media::Setup::new(s.config.media.clone(), fs, s.fetcher.clone())
            .with_secrets(secrets)
            .with_sandbox(s.runner.config().sandbox.policy(&s.workspace));
        Ok(toolgate_media::tools(&setup))
    }
}

/// The extension tools' port ([`toolgate_extensions::ExtensionHost`]): the workspace's layered
/// configuration as it is on disk now, and [`Config::check_layer`](crate::config::Config::check_layer).
#[derive(Debug)]
struct ConfigOnDisk {
    workspace: std::path::PathBuf,
}

impl toolgate_extensions::ExtensionHost for ConfigOnDisk {
    fn config_on_disk(&self) -> Result<toolgate_extensions::ConfigView, String> {
        crate::config::ConfigSources::standard(&self.workspace, None)
            .load(None)
            .map(|config| config_view(&config))
            .map_err(|e| e.to_string())
    }

    fn check_layer(&self, text: &str) -> Result<(), String> {
        crate::config::Config::check_layer(text)
    }
}

/// What the extension tools read of a configuration.
fn config_view(config: &crate::config::Config) -> toolgate_extensions::ConfigView {
    toolgate_extensions::ConfigView {
        mcp_servers: config.mcp.servers.clone(),
        disabled_custom_tools: config.tools.custom.iter().filter(|d| !d.enabled).map(|d| d.name.clone()).collect(),
    }
}
