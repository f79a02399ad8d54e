//! toolgate's agent runtime: model clients, the agent loop, sessions, sub-agents, delegation
//! and teams.
//!
//! The main type is [`Runtime`]: it holds the configured agents ([`AgentsConfig`]: providers,
//! agents, links, teams), builds a [`ModelClient`] per provider (OpenAI-compatible Chat
//! Completions or the Anthropic Messages API), keeps every session in the store
//! (`toolgate-store`: sessions, messages, usage, cost), and tracks the sub-agents and
//! delegations running in the background. It never runs a tool itself: every call an agent
//! makes goes through a [`ToolCaller`], which the `toolgate` crate implements for its `Gate`,
//! so policy (with the sub-agent's narrowed context), approvals, limits and audit apply to
//! agents exactly as to any other caller. [`tools()`] are the agent tools (`subagents`,
//! `delegate`, `sessions_*`, `team_*`), registered in the gate like any tool.
//!
//! # Layout
//!
//! - `config`: `[providers]`, `[agents]`, `[[agent_links]]`, `[teams]`.
//! - `model/`: the conversation types and the two HTTP clients (retries, timeouts, streaming).
//! - `runner`: the loop (iteration limit, malformed and unknown calls, endless repeats).
//! - `own_runner`: [`AgentRunner`], a library user's own loop in place of toolgate's.
//! - `runtime`: sessions, sub-agent limits, spawn/run/cancel/steer, delegation capacity.
//! - `search`: `delegate_search`'s ranking (BM25 fused with the embedder's vectors).
//! - `tools`: the agent tools.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(caller: std::sync::Arc<dyn toolgate_agent::ToolCaller>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolgate_agent::{AgentsConfig, RunSpec, Runtime};
//!
//! let cfg: AgentsConfig = toml_like_config();
//! # fn toml_like_config() -> AgentsConfig { AgentsConfig::default() }
//! let store = Arc::new(toolgate_store::Store::open(std::path::Path::new(".toolgate/state.db"))?);
//! let rt = Runtime::new(cfg, store, ".".into());
//! rt.bind(Arc::downgrade(&caller));
//! let outcome = rt.run(RunSpec::new("coder", "Which files mention TODO?"), &caller.context()).await?;
//! println!("{}", outcome.answer);
//! # Ok(()) }
//! ```
//!
//! Sibling crates: `toolgate-core` (the `Tool` vocabulary), `toolgate-store` (the sessions),
//! and the `toolgate` facade, which wires the runtime into the `Gate`.

#![deny(missing_docs)]

mod caller;
pub mod config;
mod error;
pub mod model;
mod own_runner;
mod runner;
mod runtime;
mod search;
mod tools;
mod turn_calls;

pub use caller::ToolCaller;
pub use config::{AgentConfig, AgentLink, AgentsConfig, AgentsDefaults, ProviderConfig, QualityGate, TeamConfig};
pub use error::AgentError;
pub use model::{Message, ModelClient, ModelReply, ModelRequest, ToolCall, ToolDef, Usage};
pub use own_runner::{AgentRunner, RunReply, RunRequest};
pub use runner::{Event, EventSink, LOOP_STOP, MAX_ARGUMENTS, RunOutcome, RunStatus};
pub use runtime::{
    ANNOUNCE_MAX_CHARS, DELEGATION_INLINE_MAX, Limits, MAX_QUEUED, RESEARCH_TOOLS, RunSpec, Runtime, SessionKind,
    TaskInfo, Verdict, verdict,
};
pub use tools::{GROUP, tools};

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
