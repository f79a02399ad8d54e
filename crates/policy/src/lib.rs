//! Which tools a caller may see and use.
//!
//! `toolgate-policy` turns the `[tools]` section of `toolgate.toml` ([`PolicyConfig`]) into a
//! compiled [`Policy`] that answers two questions, each with a [`Trace`] of the steps it took:
//!
//! - [`Policy::visible`]: may this caller see this tool at all? The layered pipeline of
//!   profiles, allow lists, deny lists, `alsoAllow`, the subagent lists and the parent's policy.
//! - [`Policy::decide`]: what about this call? Hidden tools are denied; then argument rules
//!   (`exec(cargo test:*)`, `read(secrets/**)`, `web_fetch(domain:example.com)`) are checked
//!   deny → ask → allow against the call's [`Touches`](toolgate_core::Touches), giving a
//!   [`Verdict`]: `Deny`, `Ask`, `Allow` (pre-approved) or `ToolDefault` (the tool's own
//!   approval requirement applies).
//!
//! With no profile configured the profile is `full`: every tool is visible, and approvals and
//! the sandbox are what protect a default setup. The precedence is written out in
//! `docs/policy.md`.
//!
//! **Architecture Invariant:** this crate is a pure function of config and request: no I/O, no
//! clock, no global state. Tools describe their calls with `toolgate-core`'s `Touches` (the shell
//! analysis behind `exec`'s argv lives in `toolgate-guard`); the `toolgate` crate's call
//! pipeline asks this crate, then runs approvals.
//!
//! # Layout
//!
//! - `config`: [`PolicyConfig`] and its sections, as written in `toolgate.toml`.
//! - `names`: tool names, aliases, wildcards and groups (what `group:fs` matches).
//! - `rules`: argument rules and how they match commands, paths and hosts.
//! - `grant_rule`: [`ArgumentRule`], a gateway grant's argument rule, matched like policy's.
//! - `policy`: [`Policy`]: compiling the config, the visibility pipeline, call decisions.
//! - `caller`, `decision`, `trace`: [`Caller`] and [`ToolRef`] in; [`Visibility`],
//!   [`Decision`] and [`Trace`] out.
//! - `error`: [`PolicyError`] (refused config) and [`PolicyWarning`] (accepted, probably wrong).
//!
//! # Example
//!
//! ```
//! use toolgate_core::Touches;
//! use toolgate_policy::{Caller, Policy, PolicyConfig, ToolRef, Verdict};
//!
//! let config = PolicyConfig {
//!     allow: vec!["group:fs".into(), "exec(cargo test:*)".into()],
//!     deny: vec!["read(secrets/**)".into()],
//!     ..PolicyConfig::default()
//! };
//! let policy = Policy::new(config)?;
//! let main = Caller::main();
//!
//! let exec = ToolRef::new("exec", "runtime");
//! let touches = Touches { commands: vec![vec!["cargo".into(), "test".into()]], ..Touches::default() };
//! assert_eq!(policy.decide(exec, &touches, &main).verdict, Verdict::Allow);
//!
//! // `cargo test && rm -rf x`: the allow rule must match every simple command.
//! let touches = Touches {
//!     commands: vec![vec!["cargo".into(), "test".into()], vec!["rm".into(), "-rf".into(), "x".into()]],
//!     ..Touches::default()
//! };
//! assert_eq!(policy.decide(exec, &touches, &main).verdict, Verdict::ToolDefault);
//!
//! let read = ToolRef::new("read", "fs");
//! let touches = Touches { reads: vec!["secrets/api.key".into()], ..Touches::default() };
//! let decision = policy.decide(read, &touches, &main);
//! assert_eq!(decision.verdict, Verdict::Deny);
//! println!("{decision}"); // the verdict, the reason and one line per step
//!
//! // Not in the allow list: hidden, so every call is denied.
//! assert!(!policy.visible(ToolRef::new("web_fetch", "web"), &main).visible);
//! # Ok::<(), toolgate_policy::PolicyError>(())
//! ```

#![deny(missing_docs)]

mod allowance;
mod caller;
mod config;
mod decision;
mod error;
mod grant_rule;
mod names;
mod policy;
mod rules;
mod trace;

pub use allowance::ToolAllowance;
pub use caller::{Caller, Parent, ToolRef};
pub use config::{
    AgentPolicy, ChannelPolicy, DEFAULT_LEAF_DENY, DEFAULT_SUBAGENT_DENY, PolicyConfig, Profile, ProviderPolicy,
    SubagentPolicy,
};
pub use decision::{Decision, Verdict, Visibility};
pub use error::{PolicyError, PolicyWarning, WarningKind};
pub use grant_rule::ArgumentRule;
pub use policy::Policy;
pub use trace::{Effect, Stage, Trace, TraceStep};
