//! What a call carries besides its parameters.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Who is calling: the person, the agent acting for them, and the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// The person (or service account) on whose behalf the agent acts.
    pub user: String,
    /// The agent making the call (`main`, or a sub-agent's name).
    pub agent: String,
    /// The conversation or session the call belongs to.
    pub session: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity { user: "local".to_owned(), agent: "main".to_owned(), session: "default".to_owned() }
    }
}

/// Everything a tool may know about the call it is running.
///
/// Cheap to clone: the workspace path and the progress sink are shared.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// Who is calling.
    pub identity: Identity,
    /// The workspace root every path is confined to. Always absolute and canonical.
    pub workspace: Arc<Path>,
    /// The model provider (`openai`, `anthropic`, ...), when known; policy may depend on it.
    pub provider: Option<String>,
    /// 0 for the main agent, 1 for its sub-agents, and so on.
    pub subagent_depth: u32,
    /// The agents above this one, outermost first (`["main"]` for a sub-agent of `main`).
    /// Policy intersects a sub-agent's tools with every ancestor's: it never gains a tool its
    /// parent lacks.
    pub ancestors: Vec<String>,
    /// Tools the sub-agent deny list lets through for this caller: a `sessions_spawn` research
    /// sub-agent's configured set (`[agents_defaults] research_tools`), which may name memory
    /// tools the list denies every other sub-agent. Set only by the agent runtime, never from a
    /// request; [`CallContext::subagent`] clears it, so a child never inherits it.
    pub subagent_deny_exempt: Vec<String>,
    /// Unique id of this call (also the audit record's id).
    pub call_id: String,
    /// Cancelled when the caller gives up, the call times out, or the gate shuts down.
    pub cancel: CancellationToken,
    /// Where the tool reports progress on long work.
    pub progress: ProgressSink,
    /// What the tool wants kept in the call's audit row besides its parameters (the web tools:
    /// the HTTP status and the final URL after redirects). The gate gives every call a fresh
    /// one and reads it when the call ends, success or error.
    pub audit: AuditNote,
    /// The approval subject ([`crate::CallSafety::approval_subject`]) the gate's approval stage
    /// decided on for this call: what a person approved, when one was asked. A tool whose
    /// subject describes what it will do (an install's exact bytes and grants) recomputes it in
    /// `execute` and refuses when it differs, so a file changed after the approval request
    /// changes nothing. `None` outside the gate or when the tool gave no subject.
    pub approval_subject: Option<String>,
    /// The client of the call, when one is connected and can be sent notes (the MCP server
    /// sets it; `message` to an `mcp` channel uses it).
    pub client: ClientChannel,
    /// The batch this call belongs to: one model turn's calls (the agent runtime sets it), so
    /// approvals they wait for are shown and decided together, each call on its own.
    pub batch: Option<String>,
    /// The grants a team gateway admitted the call under: the gate checks every call made with
    /// this context against them, once the call's touches are known. A sub-agent's context is
    /// a copy of its parent's, so it is held to the same grants, never more. Set by the
    /// gateway, never from a request; `None` outside a gateway.
    pub grants: Option<Arc<dyn CallGrants>>,
    /// The call's place among its model turn's calls (the agent runtime sets it with
    /// [`CallContext::batch`]): the gate waits for it after the approval stage, so a turn's
    /// approvals are asked together and its calls still run in order. The gate clears it
    /// before the tool runs, so the calls the tool makes (a sub-agent's) never wait on it.
    pub turn: Option<crate::TurnSlot>,
    /// The W3C trace context the call continues (`traceparent`, `tracestate`), when traces
    /// are exported and the request carried a valid one (a Streamable HTTP header, or `_meta`
    /// per SEP-414): the call's span becomes its child. Set by a transport, never from a
    /// tool's parameters; the gate takes it, so the calls a tool makes are children of the
    /// tool's own span instead.
    pub trace_parent: Option<Arc<crate::trace::TraceHeaders>>,
    /// The node that forwarded this call here over the node link (a call about a background
    /// process or browser session this node holds, that reached that node): set by the
    /// transport from the one-call key that node made for it, whose scope says so, never from
    /// a request's parameters. Such a call was already read in its caller's dialect on that
    /// node: here it is read canonically, and it is never forwarded again.
    pub forwarded_by: Option<String>,
    /// With [`CallContext::forwarded_by`]: the approval the forwarding node's gate gave this
    /// call (a person's, after that node's own policy), from the same one-call key, never from a
    /// request. The approval stage takes it instead of asking again when the call's parameters
    /// are the ones approved ([`ForwardedApproval::digest`]); this node's `deny` still refuses.
    pub forwarded_approval: Option<ForwardedApproval>,
    /// How this node's approval stage let the call through when a person approved it in the
    /// approvals inbox (`allowed once, approval 12, by bob`; an answer of the caller's own client
    /// or terminal leaves it unset): set by the gate after that stage, cleared at the start of
    /// every call (a call a tool makes starts without it), never from a request. What a call
    /// that is forwarded to another node carries there ([`ForwardedApproval`]).
    pub approved: Option<String>,
    /// When the gate's execute stage gives up on this call (its timeout, from when the tool
    /// started): set by the gate before the tool runs. A tool that waits on something else for
    /// the call (the node link) waits no longer.
    pub deadline: Option<std::time::Instant>,
}

/// A person's approval of a call, given on the node that forwarded the call here
/// ([`CallContext::forwarded_approval`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardedApproval {
    /// How it was approved there (`allowed once, approval 12, by bob`), for the audit row.
    pub decided: String,
    /// SHA-256 (hex) of the call's parameters as that node sent them (`serde_json`'s text, as `toolgate`'s
    /// approval stage digests parameters): it answers for this call only.
    pub digest: String,
}

/// A team gateway's grants on a caller, checked by the gate for each call ([`CallContext::grants`]).
pub trait CallGrants: Send + Sync + fmt::Debug {
    /// What the grants say about this call of `spec`, which touches `touches`: `Err` refuses it
    /// (the error says what to request), `Ok` lets it go on.
    fn check(
        &self,
        ctx: &CallContext,
        spec: &crate::ToolSpec,
        touches: &crate::Touches,
    ) -> Result<GrantedCall, crate::ToolError>;

    /// The tools of `tools` the grants give (an argument rule's tool counts as given: its
    /// calls are checked one by one): what a sub-agent is offered.
    fn listed(&self, ctx: &CallContext, tools: Vec<crate::ToolSpec>) -> Vec<crate::ToolSpec>;

    /// The settings of a bridged server that the grants override for a call of its tool
    /// `spec` (a grant's `config_overrides`), with the grant they come from; `None`: the
    /// server's own. `Err` refuses the call (grants that conflict).
    fn server_settings(&self, spec: &crate::ToolSpec) -> Result<Option<GrantSettings>, crate::ToolError> {
        let _ = spec;
        Ok(None)
    }
}

/// A bridged server's settings as a caller's grant overrides them ([`CallGrants::server_settings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GrantSettings {
    /// The grant they come from.
    pub grant: i64,
    /// Its `config_overrides`: a JSON object of the server's settings.
    pub settings: serde_json::Value,
}

/// A team gateway principal's grants as they are NOW: what a run made later on a caller's
/// behalf (a routine's fire, possibly after a restart) is held to, resolved each time it runs
/// rather than kept from when it was made, so a revoked grant or a disabled user applies.
/// Implemented by the facade over the gateway's grant store; the automation family holds it as
/// a port and never depends on the gateway.
pub trait PrincipalGrants: Send + Sync + fmt::Debug {
    /// The grants of gateway user `user` acting as `agent`, read for every call made with them.
    /// `Err` says why nothing may run for them (the principal no longer exists or is disabled,
    /// or the grants cannot be read), for the person reading the run's history.
    fn grants_of(&self, user: &str, agent: &str) -> Result<Arc<dyn CallGrants>, String>;

    /// Whether every routine of this gate acts under its owner's grants, even one stored
    /// without a principal (a per-user workspace, whose database its user's tools may reach,
    /// holds nobody else's routines).
    fn every_routine(&self) -> bool {
        false
    }
}

/// A call the grants let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedCall {
    /// What decided, for the call's audit trace (`gateway grant 12: allow`).
    pub trace: String,
    /// Why a person must approve the call first (a grant in mode ask), if one must.
    pub ask: Option<String>,
}

impl CallContext {
    /// A context for `workspace` with the default identity and a fresh call id.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        CallContext {
            identity: Identity::default(),
            workspace: Arc::from(workspace.into().into_boxed_path()),
            provider: None,
            subagent_depth: 0,
            ancestors: Vec::new(),
            subagent_deny_exempt: Vec::new(),
            call_id: String::new(),
            cancel: CancellationToken::new(),
            progress: ProgressSink::none(),
            audit: AuditNote::default(),
            approval_subject: None,
            client: ClientChannel::default(),
            batch: None,
            grants: None,
            turn: None,
            trace_parent: None,
            forwarded_by: None,
            forwarded_approval: None,
            approved: None,
            deadline: None,
        }
    }

    /// Replaces the identity.
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    /// Replaces the provider.
    pub fn with_provider(mut self, provider: Option<String>) -> Self {
        self.provider = provider;
        self
    }

    /// Replaces the sub-agent depth.
    pub fn with_depth(mut self, depth: u32) -> Self {
        self.subagent_depth = depth;
        self
    }

    /// Makes this the context of a sub-agent `agent` of the current caller: the current agent
    /// joins the ancestors and the depth grows by one.
    pub fn subagent(mut self, agent: impl Into<String>) -> Self {
        let parent = std::mem::replace(&mut self.identity.agent, agent.into());
        self.ancestors.push(parent);
        self.subagent_depth += 1;
        self.subagent_deny_exempt.clear();
        self.turn = None;
        self.forwarded_by = None;
        self.forwarded_approval = None;
        self.approved = None;
        self
    }

    /// Replaces the progress sink.
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = progress;
        self
    }
}

/// A note for the person behind the call's client: what `message` sends to an `mcp` channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientNote {
    /// Who it is from, for the client's display (`toolgate.message`).
    pub logger: String,
    /// What it says, as JSON (`{"to", "content"}`).
    pub data: serde_json::Value,
}

/// Delivers [`ClientNote`]s to the client of one call. The MCP server sets one on each call it
/// serves (a logging notification, `notifications/message`, on that call's own stream); a call
/// with no connected client (the CLI, a background job) has none.
#[async_trait::async_trait]
pub trait ClientNotifier: Send + Sync {
    /// Sends `note`; the error says why it could not go.
    async fn notify(&self, note: ClientNote) -> Result<(), String>;
}

/// The call's [`ClientNotifier`], if a client is connected.
#[derive(Clone, Default)]
pub struct ClientChannel(Option<Arc<dyn ClientNotifier>>);

impl ClientChannel {
    /// A channel through `notifier`.
    pub fn new(notifier: Arc<dyn ClientNotifier>) -> Self {
        ClientChannel(Some(notifier))
    }

    /// The notifier, when a client is connected.
    pub fn get(&self) -> Option<&Arc<dyn ClientNotifier>> {
        self.0.as_ref()
    }
}

impl fmt::Debug for ClientChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "ClientChannel(connected)" } else { "ClientChannel(none)" })
    }
}

/// One progress report: `progress` out of `total` (when known), with an optional message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Work done so far, in the tool's own unit; increases with every report.
    pub progress: f64,
    /// Total work, when known.
    pub total: Option<f64>,
    /// What is happening now.
    pub message: Option<String>,
}

/// Receives progress reports. The MCP server forwards them as progress notifications.
#[derive(Clone, Default)]
pub struct ProgressSink(Option<Arc<dyn Fn(Progress) + Send + Sync>>);

impl ProgressSink {
    /// A sink that drops every report.
    pub fn none() -> Self {
        ProgressSink(None)
    }

    /// A sink that calls `f` for every report. `f` must be quick and must not block.
    pub fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        ProgressSink(Some(Arc::new(f)))
    }

    /// Reports progress.
    pub fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(f) = &self.0 {
            f(Progress { progress, total, message });
        }
    }

    /// Whether anyone listens (lets a tool skip building messages nobody reads).
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "ProgressSink(active)" } else { "ProgressSink(none)" })
    }
}

/// A line a tool adds to its call's audit record ([`CallContext::audit`]): facts only known
/// while the call runs, such as where a request ended up. Shared by the clones of one context;
/// the last [`set`](AuditNote::set) wins.
#[derive(Clone, Default)]
pub struct AuditNote(Arc<Mutex<Option<String>>>);

impl AuditNote {
    /// Records `text` (replacing what was recorded before in this call).
    pub fn set(&self, text: impl Into<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(text.into());
    }

    /// What was recorded, if anything.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl fmt::Debug for AuditNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AuditNote").field(&self.get()).finish()
    }
}
