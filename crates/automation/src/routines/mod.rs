//! Routines, their scheduler, and the `cron` tool (issue 27, item 2; seed 004 §4.9, seed 002 §5).
//!
//! A routine is a stored definition ([`RoutineSpec`]) that fires on a trigger: a cron schedule
//! in an explicit IANA zone, an event of the gate, a signed webhook, or by hand. Every fire is
//! claimed in the store under the key (routine, scheduled instant) before anything runs, so one
//! fire never runs twice, across restarts and across several servers on one workspace; then it
//! becomes a job through the [`RunSink`] (the jobs engine), which makes every tool call through
//! the gate as the routine's owner, or, for a `cron` entry made from an agent session, a turn of
//! that session with the prompt as its user message.
//!
//! # Layout
//!
//! - `schedule`: cron patterns (croner, POSIX weekdays) in a zone; DST.
//! - `spec`: the definition and its checks (triggers, actions, context paths, prompt paths).
//! - `scheduler`: [`Routines`], the service: create/update/list, fire (overlap, cooldown, the
//!   global cap), the scheduler's tick and loop (lease, catch-up).
//! - `settings`: [`RoutinesSettings`], `[automation.routines]` (the scheduler lease).
//! - `triggers`: event matching.
//! - `webhook`: HMAC-SHA256 signatures, timestamps and replays.
//! - `jobs_sink`: [`JobsSink`], runs as jobs of the jobs engine, or as turns of the agent
//!   session a `cron` entry was made from.
//! - `tools`: `routine_create|list|update|delete|history|run` and `cron`.

mod jobs_sink;
pub mod schedule;
mod scheduler;
mod settings;
pub mod spec;
mod tools;
pub mod triggers;
pub mod webhook;

use std::sync::Arc;

use toolgate_core::Tool;

pub use jobs_sink::JobsSink;
pub use scheduler::{
    Clock, FireOutcome, ManualClock, RoutineError, RoutineRun, Routines, RoutinesConfig, RoutinesSetup, RunSink,
    Started, SystemClock, TickReport, TurnFuture,
};
pub use settings::{MAX_LEASE_SECS, MIN_LEASE_SECS, RoutinesSettings};
pub use spec::{ActionType, CatchUp, RoutineSpec, Trigger};
pub use triggers::Event;

use crate::Setup;

/// This module's tools: none without a state database (routines are stored).
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    match &setup.routines {
        Some(routines) => tools::tools(routines),
        None => Vec::new(),
    }
}
