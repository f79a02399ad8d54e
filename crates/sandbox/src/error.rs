//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Why a sandbox could not be built or a command could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The policy needs something this machine cannot enforce, and the policy does not allow
    /// running unconfined. The command was not run.
    #[error(
        "the sandbox cannot be enforced on this machine: {what}; the command was not run \
         (run `toolgate sandbox status` to see what is available, or set \
         `allow_unsandboxed_fallback` to run commands unconfined)"
    )]
    Unenforceable {
        /// What is missing.
        what: String,
    },
    /// The policy itself is unusable (for example the workspace does not exist).
    #[error("invalid sandbox policy: {what}")]
    InvalidPolicy {
        /// What is wrong and how to fix it.
        what: String,
    },
    /// The program could not be found or executed.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program as given.
        program: PathBuf,
        /// The OS error (from `execve` or the search in `PATH`).
        source: io::Error,
    },
    /// A step of the sandbox setup failed in the child; the command was not run.
    #[error("sandbox setup failed while {step}: {source}; the command was not run")]
    Setup {
        /// The step that failed (for example "applying the Landlock ruleset").
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// An I/O error in the parent (pipes, the log file, waiting for the child).
    #[error("{context}: {source}")]
    Io {
        /// What the parent was doing.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}

impl SandboxError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        SandboxError::Io { context: context.into(), source }
    }
}
