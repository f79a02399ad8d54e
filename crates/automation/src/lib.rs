//! toolgate's `automation` tool family (ARCHITECTURE.md, "Adding a tool family"): background
//! jobs (`jobs`), routines and their scheduler with the `cron` tool (`routines`), message
//! channels (`message`) and `build_software` (`build`). Every job and routine makes its tool
//! calls through the gate with its owner's identity, so scheduled and background work gets the
//! same policy, approvals and sandbox as an interactive call.

use std::sync::Arc;

use toolgate_core::Tool;

pub mod build;
pub mod jobs;
pub mod message;
pub mod routines;

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[automation]` configuration section.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// The gate's agent runtime, bound to the gate: the agents it runs make their tool calls
    /// through the whole pipeline.
    pub agents: Option<Arc<toolgate_agent::Runtime>>,
    /// Background jobs (none without a state database): the job tools, and what every routine
    /// run is submitted to.
    pub jobs: Option<jobs::Jobs>,
    /// Routines and their scheduler (none without a state database).
    pub routines: Option<Arc<routines::Routines>>,
}

/// The family's tools.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let mut tools = jobs::tools(setup);
    tools.extend(routines::tools(setup));
    tools.extend(message::tools(setup));
    tools.extend(build::tools(setup));
    tools
}
