//! Runs processes for toolgate under Landlock, seccomp, namespaces and rlimits.
//!
//! A [`Sandbox`] is built from a [`SandboxPolicy`]: a [`SandboxMode`] (`read-only`,
//! `workspace-write`, `full-access`), a [`Network`] switch, the workspace, and
//! [`ResourceLimits`]. [`Sandbox::new`] checks what this machine can enforce ([`status`]) and
//! prepares the Landlock ruleset and the seccomp program once; [`Sandbox::run`] then starts a
//! [`CommandSpec`] in a fresh child (own session and process group; user, mount, PID and IPC
//! namespaces where available; rlimits; `no_new_privs`; Landlock; seccomp; an environment
//! allowlist from [`toolgate_guard::env`]), captures stdout and stderr interleaved through one
//! pipe, kills the whole process tree on timeout or cancellation, and returns a [`RunResult`]
//! that says how the command ended, how it was actually sandboxed ([`Enforcement`]) and what was
//! blocked ([`Denial`], from real signals only). [`Sandbox::spawn`] starts background processes
//! ([`RunningProcess`]).
//!
//! When the policy cannot be enforced, [`Sandbox::new`] fails with
//! [`SandboxError::Unenforceable`] unless the policy allows falling back, in which case every
//! result says the command ran unconfined.
//!
//! `toolgate-tools` (the `exec` and `process` tools) is the main user; `toolgate` prints
//! [`status`] for `toolgate sandbox status`. See `docs/sandbox.md` for what each mode allows.
//!
//! # Layout
//!
//! - `policy`: modes, network, limits (serde for the config).
//! - `status`: what the machine can enforce.
//! - `rules`: the Landlock ruleset; `seccomp`: the BPF filter.
//! - `child`: the code between `clone3` and `execve` (the only place with raw `unsafe` setup).
//! - `sandbox`: [`Sandbox`], preparing a spawn; `process`: [`RunningProcess`], waiting, killing.
//! - `output`: the capped capture; `denial`: what was blocked; `enforcement`: how it ran.
//! - `spawner`: the long-lived thread that makes every clone (so `PR_SET_PDEATHSIG` means
//!   "toolgate died"); `tmpdirs`: private temporary folders named by owner, stale ones swept.
//! - `contain`: [`contain`], for processes started outside the sandbox (hooks, bridged MCP
//!   servers): they and what they start die with toolgate too.
//! - `netns`: [`NetNamespace`], a network namespace whose only way out is a listener toolgate
//!   made inside it (the browser's Chromium behind its vetting proxy).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use toolgate_sandbox::{CommandSpec, Sandbox, SandboxPolicy};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() -> Result<(), toolgate_sandbox::SandboxError> {
//! let sandbox = Sandbox::new(SandboxPolicy::workspace_write("/home/me/project"))?;
//! let spec = CommandSpec::shell("cargo --version; touch /etc/owned", "/home/me/project")
//!     .timeout(Duration::from_secs(30));
//! let result = sandbox.run(spec, CancellationToken::new()).await?;
//! println!("{} ({})", result.exit, result.enforcement);
//! println!("{}", result.output.text());
//! for denial in &result.denials {
//!     println!("{denial}"); // blocked by the sandbox: writing /etc/owned is not allowed (...)
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
// The only crate of the workspace allowed to use `unsafe`: fork/exec, Landlock, seccomp and
// namespaces are system calls. Every block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

mod child;
mod command;
mod contain;
mod denial;
mod enforcement;
mod error;
mod netns;
mod output;
mod policy;
mod process;
mod process_token;
mod rules;
mod sandbox;
mod seccomp;
mod spawner;
mod status;
mod tmpdirs;

pub use command::{CommandSpec, ExitStatusKind, RunResult};
pub use contain::contain;
pub use denial::{Denial, DenialKind};
pub use enforcement::Enforcement;
pub use error::SandboxError;
pub use netns::NetNamespace;
pub use output::CapturedOutput;
pub use policy::{Network, ResourceLimits, SandboxMode, SandboxPolicy, default_read_only_subpaths};
pub use process::{KILL_GRACE, RunningProcess};
pub use sandbox::{Sandbox, ServerProcess};
pub use status::{Namespaces, SandboxStatus, status};
