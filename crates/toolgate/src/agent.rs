//! The agent runtime (`toolgate-agent`) inside the gate: `[providers]`, `[agents]`,
//! `[[agent_links]]` and `[teams]` build a [`Runtime`], whose tools (`subagents`, `delegate`,
//! `sessions_*`, `team_*`) are registered in the gate's registry; [`Gate`] is the runtime's
//! [`ToolCaller`], so every tool call an agent makes runs through [`Gate::call`] with the
//! agent's (sub-agent-narrowed) context.
//!
//! The gate owns the registry that holds the agent tools and the tools hold the runtime, so the
//! runtime reaches the gate through a `Weak` set by [`Gate::bind_agents`] once the gate is in an
//! `Arc`: no reference cycle. [`GateBuilder::build_shared`](crate::GateBuilder::build_shared)
//! builds the `Arc` and binds it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = toolgate::config::Config::default(); // with [providers] and [agents]
//! let gate = toolgate::Gate::builder(".").config(config).build_shared()?;
//! if let Some(rt) = gate.agents() {
//!     let out = rt.run(toolgate::agent::RunSpec::new("coder", "List the TODOs"), &gate.context()).await?;
//!     println!("{}", out.answer);
//! }
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::{Arc, Weak};

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_store::{SessionStore, Store};

pub use toolgate_agent::*;

use crate::config::Config;
use crate::{Gate, GateError};

#[async_trait::async_trait]
impl ToolCaller for Gate {
    fn context(&self) -> CallContext {
        Gate::context(self)
    }

    fn tools(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        self.visible_tools(ctx)
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        Gate::call(self, ctx, name, params).await
    }

    fn orders_turns(&self) -> bool {
        true
    }

    fn refused(&self, ctx: &CallContext, name: &str, arguments: &str, error: &ToolError) {
        self.record_refused(ctx, name, arguments, error);
    }

    fn scrub(&self, ctx: &CallContext, text: &str) -> String {
        self.scrub_agent_text(ctx, text)
    }

    fn session_calls(&self, query: &toolgate_store::SessionQuery<'_>) -> Vec<toolgate_store::SessionCalls> {
        let Some(audit) = self.audit_log() else { return Vec::new() };
        audit.audit_sessions(query).unwrap_or_else(|e| {
            tracing::warn!("reading sessions from the audit log: {e}");
            Vec::new()
        })
    }
}

impl Gate {
    /// The agent runtime, when `[agents]` are configured.
    pub fn agents(&self) -> Option<&Arc<Runtime>> {
        self.services().agents.as_ref()
    }

    /// Connects the agent runtime to this gate (a `Weak`, so no cycle). Call it once the gate is
    /// in an `Arc`; the agent tools answer "not connected" until then.
    pub fn bind_agents(self: &Arc<Self>) {
        if let Some(rt) = &self.services().agents {
            let weak: Weak<dyn ToolCaller> = Arc::downgrade(self) as Weak<dyn ToolCaller>;
            rt.bind(weak);
        }
    }
}

/// The `[agents]` part of `config`.
pub(crate) fn agents_config(config: &Config) -> AgentsConfig {
    AgentsConfig {
        providers: config.providers.clone(),
        agents: config.agents.clone(),
        agent_links: config.agent_links.clone(),
        teams: config.teams.clone(),
        agents_defaults: config.agents_defaults.clone(),
    }
}

/// Checks `[agents_defaults] research_tools` against the registered tools: `sessions_spawn`'s
/// description names that set, so a name that is no tool would be a promise the sub-agent is not
/// given. Tools of a configured MCP server (`mcp__SERVER__...`, or its own prefix) are registered
/// once it connects and pass on their prefix.
pub(crate) fn check_research_tools(config: &Config, tools: &[&ToolSpec]) -> Result<(), GateError> {
    if config.agents.is_empty() {
        return Ok(());
    }
    for t in &config.agents_defaults.research_tools {
        let known = tools.iter().any(|s| &s.name == t)
            || config.mcp.servers.iter().any(|(name, server)| {
                let prefix = server.tool_name(name, "");
                !prefix.is_empty() && t.len() > prefix.len() && t.starts_with(&prefix)
            });
        if !known {
            let hint = if t.contains('*') || t.starts_with("group:") {
                "exact tool names only, no `*` or `group:`".to_owned()
            } else {
                "see `toolgate tools list` for the names".to_owned()
            };
            return Err(GateError::Agents(format!(
                "[agents_defaults] research_tools: `{}` is not a tool ({hint}); the default is [\"read\", \"grep\", \"glob\", \"ls\"]",
                t.chars().take(100).collect::<String>()
            )));
        }
    }
    Ok(())
}

/// The runtime for `config`, also with no agent configured: the session tools describe any
/// caller's session (an MCP client's, a CLI call's), and spawning or delegating says what
/// config to add. Sessions go to `store`, or to an in-memory database when the gate keeps no
/// state on disk.
pub(crate) fn build_runtime(
    config: &Config,
    store: Option<Arc<dyn SessionStore>>,
    workspace: &Path,
) -> Option<Arc<Runtime>> {
    let cfg = agents_config(config);
    for problem in cfg.problems() {
        tracing::warn!("agents: {problem}");
    }
    let store = match store {
        Some(s) => s,
        None => match Store::open(Path::new(":memory:")) {
            Ok(s) => Arc::new(s) as Arc<dyn SessionStore>,
            Err(e) => {
                tracing::warn!("agents: no session store: {e}");
                return None;
            }
        },
    };
    Some(Runtime::new(cfg, store, workspace.to_path_buf()))
}
