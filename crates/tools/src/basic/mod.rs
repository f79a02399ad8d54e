//! `echo`, `time` and `json`: tools that compute from their parameters alone (seed 004 §4.1–4.3).
//!
//! They touch nothing outside the call, so they prove the whole pipeline end to end and give
//! the benchmarks a tool whose own cost is negligible.

mod echo;
mod json;
mod time;

use std::sync::Arc;

use toolgate_core::Tool;

pub use echo::Echo;
pub use json::Json;
pub use time::Time;

/// All basic tools.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(Echo::new()), Arc::new(Time::new()), Arc::new(Json::new())]
}
