//! Why an agent operation failed.

use toolgate_store::StoreError;

/// Why a model request, an agent run or an agent tool failed. `Display` is written for whoever
/// reads it next (a model, through the agent tools, or a person, through the CLI): it says what
/// was wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// No `[agents.NAME]` with this name.
    #[error("no agent named `{name}` is configured; configured agents: {known}")]
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The configured names, comma-separated (or `none`).
        known: String,
    },
    /// An agent names a provider that is not configured, or a provider is unusable.
    #[error("provider `{provider}`: {message}")]
    Provider {
        /// The provider's name.
        provider: String,
        /// What is wrong.
        message: String,
    },
    /// The model endpoint failed (after retries where they apply).
    #[error("model request to {endpoint} failed: {message}")]
    Model {
        /// The URL asked.
        endpoint: String,
        /// What went wrong (status and body excerpt, or the transport error).
        message: String,
        /// The HTTP status, when there was one.
        status: Option<u16>,
    },
    /// A limit on sub-agents or delegation was reached.
    #[error("{0}")]
    Limit(String),
    /// The request does not make sense (missing field, unknown id, finished task).
    #[error("{0}")]
    Invalid(String),
    /// The runtime was used before a gate was bound to it, or after the gate was dropped.
    #[error(
        "the agent runtime is not connected to a gate (call `Gate::bind_agents` after wrapping the gate in an Arc)"
    )]
    Unbound,
    /// The run was cancelled.
    #[error("the agent run was cancelled")]
    Cancelled,
    /// The session store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
