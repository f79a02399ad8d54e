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
mod text;

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[automation]` configuration section.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// The gate's agent runtime, bound to the gate: the agents it runs make their tool calls
    /// through the whole pipeline.
    pub agents: Option<Arc<toolgate_agent::Runtime>>,
    /// The message channels (`[automation.channels]`).
    pub channels: message::Channels,
    /// Channel credentials by secret name, from the store's secrets.
    pub secrets: Option<Arc<dyn toolgate_tools::custom::SecretSource>>,
    /// Where `message` keeps what it could not deliver (none without a state database).
    pub outbox: Option<Arc<dyn toolgate_store::OutboxStore>>,
    /// The gate's leak detector: `message` refuses text it finds a credential in.
    pub detector: Arc<toolgate_guard::leak::LeakDetector>,
    /// Background jobs (none without a state database): the job tools, and what every routine
    /// run is submitted to.
    pub jobs: Option<jobs::Jobs>,
    /// Routines and their scheduler (none without a state database).
    pub routines: Option<Arc<routines::Routines>>,
}

impl Setup {
    /// [`Setup::default`] with `detector` (the gate's), without building a detector of its own
    /// first (the default's, about a millisecond of every gate's build, was thrown away).
    pub fn with_detector(detector: Arc<toolgate_guard::leak::LeakDetector>) -> Setup {
        Setup {
            agents: None,
            channels: message::Channels::default(),
            secrets: None,
            outbox: None,
            detector,
            jobs: None,
            routines: None,
        }
    }
}

/// The `[automation]` configuration section.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AutomationConfig {
    /// The message channels, by name (`[automation.channels.NAME]`).
    pub channels: message::Channels,
    /// Background jobs (`[automation.jobs]`).
    pub jobs: jobs::JobsConfig,
    /// The routine scheduler (`[automation.routines]`).
    pub routines: routines::RoutinesSettings,
    /// The tools an MCP client that accepts tasks gets back as a task (a one-call job), by the
    /// names `tools/list` shows; default [`jobs::DEFAULT_TASK_TOOLS`]. Empty: every call is
    /// answered in place and the server declares no tasks.
    pub task_tools: Vec<String>,
}

impl Default for AutomationConfig {
    fn default() -> Self {
        AutomationConfig {
            channels: message::Channels::default(),
            jobs: jobs::JobsConfig::default(),
            routines: routines::RoutinesSettings::default(),
            task_tools: jobs::DEFAULT_TASK_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        }
    }
}

/// The family's tools.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let mut tools = jobs::tools(setup);
    tools.extend(routines::tools(setup));
    tools.extend(message::tools(setup));
    tools.extend(build::tools(setup));
    tools
}
