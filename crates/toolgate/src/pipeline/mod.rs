//! The call pipeline, one module per stage. **This is the one place the order is written**
//! (ARCHITECTURE.md, the crate docs and `Gate::call` point here); each module's first line
//! names its stage number from this list, and `Gate::call` (`gate.rs`) runs them in this order:
//!
//! ```text
//!  1 resolve        the caller's dialect to toolgate's names, then the tool    dialect.rs
//!                   by name or alias, or a "did you mean" error               resolve.rs
//!  2 policy         visibility: a hidden tool reveals nothing, not its schema  policy.rs
//!  3 validate       aliases, limits, coercions, the JSON Schema                validate.rs
//!  4 loop breaker   the same call repeated too often in a row is refused       loop_breaker.rs
//!  5 skill scope    a caller following a skill is held to its allowed-tools    skill_scope.rs
//!  6 policy         argument rules on what the call touches (allow/ask/deny)   policy.rs
//!  7 rate limits    per user and tool, per minute and per hour                 rate.rs
//!  8 concurrency    per agent, in flight and queued (a call of an agent's      limits.rs
//!                   model turn takes its slot after 11, once its turn comes)
//!  9 pre-hooks      configured commands and library hooks: allow/ask/deny      hooks.rs
//! 10 inspect        tools that look before approval (installs)                 (the tool)
//! 11 approval       a person, a grant, or the mode; a turn's calls then wait   approval.rs
//!                   for the ones before them (`TurnSlot`); the "started" row
//! 12 cache          a read-only call's fresh result                            cache.rs
//! 13 execute        deadline, cancellation, panic containment                  execute.rs
//! 14 output         truncate, sanitize, redact, neutralize, wrap               output.rs
//! 15 post-hooks     after every call, success or error (and skill scope's       hooks.rs
//!                   after-step)
//! 16 audit          the call's row, completed                                  audit.rs
//! ```

pub(crate) mod approval;
pub(crate) mod audit;
pub mod cache;
pub(crate) mod dialect;
pub(crate) mod execute;
pub(crate) mod hooks;
pub(crate) mod limits;
pub mod loop_breaker;
pub(crate) mod output;
pub(crate) mod policy;
pub(crate) mod rate;
pub(crate) mod resolve;
pub(crate) mod skill_scope;
pub(crate) mod validate;
