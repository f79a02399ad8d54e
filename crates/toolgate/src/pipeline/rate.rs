//! Stage 7: sliding-window rate limits per (user, tool), per minute and per hour, and an
//! optional hourly action budget per agent.
//!
//! Each key keeps the instants of its calls in the last hour, so both windows are exact
//! sliding windows. Time comes from `tokio::time::Instant`, which tests can pause and advance.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use toolgate_core::{RateClass, RateWindow, ToolError};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// `[rate_limits]`: limits per rate class, per tool, and a per-agent budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Whether limits apply at all (default true).
    pub enabled: bool,
    /// Overrides per rate class: `exec`, `http`, `file_write`, `memory_write`, `message`,
    /// `default` (defaults from IronClaw: 30/300, 30/500, 20/200, 20/200, 10/100, 60/1000).
    pub classes: BTreeMap<String, Window>,
    /// Overrides per tool name; they beat the class limits.
    pub tools: BTreeMap<String, Window>,
    /// Most calls one agent may make per hour, across all tools (off when unset).
    pub agent_budget_per_hour: Option<u32>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig { enabled: true, classes: BTreeMap::new(), tools: BTreeMap::new(), agent_budget_per_hour: None }
    }
}

/// Calls allowed per minute and per hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Calls in any 60 seconds.
    pub per_minute: u32,
    /// Calls in any 3600 seconds.
    pub per_hour: u32,
}

/// The rate-limit state of a gate.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    config: RateLimitConfig,
    calls: Mutex<HashMap<(String, String), VecDeque<Instant>>>,
    budgets: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    pub(crate) fn new(config: RateLimitConfig) -> Result<Self, String> {
        for name in config.classes.keys() {
            if !["exec", "http", "file_write", "memory_write", "message", "default"].contains(&name.as_str()) {
                return Err(format!(
                    "[rate_limits.classes] has an unknown class `{name}`; use exec, http, file_write, memory_write, \
                     message or default"
                ));
            }
        }
        Ok(RateLimiter { config, calls: Mutex::default(), budgets: Mutex::default() })
    }

    fn window(&self, tool: &str, class: RateClass) -> Window {
        if let Some(w) = self.config.tools.get(tool) {
            return *w;
        }
        if let Some(w) = self.config.classes.get(class.as_str()) {
            return *w;
        }
        let (per_minute, per_hour) = class.default_limits();
        Window { per_minute, per_hour }
    }

    /// Counts a call, or refuses it with the window that is full and when to retry.
    pub(crate) fn check(&self, user: &str, agent: &str, tool: &str, class: RateClass) -> Result<(), ToolError> {
        if !self.config.enabled {
            return Ok(());
        }
        let now = Instant::now();
        if let Some(budget) = self.config.agent_budget_per_hour {
            let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
            let times = budgets.entry(agent.to_owned()).or_default();
            prune(times, now);
            if times.len() >= budget as usize {
                let retry_after = retry(times.front().copied(), now, HOUR);
                return Err(ToolError::RateLimited {
                    tool: format!("{tool}` (agent `{agent}`'s hourly action budget"),
                    window: RateWindow::Hour,
                    limit: budget,
                    retry_after,
                });
            }
            times.push_back(now);
        }
        let window = self.window(tool, class);
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let times = match calls.get_mut(&(user.to_owned(), tool.to_owned())) {
            Some(times) => times,
            None => calls.entry((user.to_owned(), tool.to_owned())).or_default(),
        };
        prune(times, now);
        // Instants are in call order, so the minute window starts at a binary-searched index.
        let minute_start = times.partition_point(|t| now.duration_since(*t) >= MINUTE);
        let in_minute = times.len() - minute_start;
        if in_minute >= window.per_minute as usize {
            let oldest_in_minute = times.get(minute_start).copied();
            return Err(ToolError::RateLimited {
                tool: tool.to_owned(),
                window: RateWindow::Minute,
                limit: window.per_minute,
                retry_after: retry(oldest_in_minute, now, MINUTE),
            });
        }
        if times.len() >= window.per_hour as usize {
            return Err(ToolError::RateLimited {
                tool: tool.to_owned(),
                window: RateWindow::Hour,
                limit: window.per_hour,
                retry_after: retry(times.front().copied(), now, HOUR),
            });
        }
        times.push_back(now);
        Ok(())
    }
}

fn prune(times: &mut VecDeque<Instant>, now: Instant) {
    while times.front().is_some_and(|t| now.duration_since(*t) >= HOUR) {
        times.pop_front();
    }
}

fn retry(oldest: Option<Instant>, now: Instant, span: Duration) -> Duration {
    oldest.map_or(span, |t| (t + span).saturating_duration_since(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(config: RateLimitConfig) -> RateLimiter {
        RateLimiter::new(config).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn minute_window_slides() {
        let r = limiter(RateLimitConfig::default());
        for _ in 0..30 {
            r.check("ann", "main", "exec", RateClass::Exec).unwrap();
        }
        let err = r.check("ann", "main", "exec", RateClass::Exec).unwrap_err();
        assert_eq!(err.to_string(), "rate limit for `exec` reached: at most 30 calls per minute; retry in 60s");
        assert!(r.check("bob", "main", "exec", RateClass::Exec).is_ok(), "per user");
        assert!(r.check("ann", "main", "read", RateClass::Default).is_ok(), "per tool");
        tokio::time::advance(Duration::from_secs(45)).await;
        let err = r.check("ann", "main", "exec", RateClass::Exec).unwrap_err();
        assert!(err.to_string().ends_with("retry in 15s"), "{err}");
        tokio::time::advance(Duration::from_secs(15)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_ok(), "the window slid");
    }

    #[tokio::test(start_paused = true)]
    async fn hour_window_and_overrides() {
        let mut config = RateLimitConfig::default();
        config.tools.insert("exec".into(), Window { per_minute: 100, per_hour: 5 });
        let r = limiter(config);
        for i in 0..5 {
            r.check("ann", "main", "exec", RateClass::Exec).unwrap();
            tokio::time::advance(Duration::from_secs(60 * (i + 1))).await;
        }
        let err = r.check("ann", "main", "exec", RateClass::Exec).unwrap_err();
        assert!(err.to_string().contains("at most 5 calls per hour"), "{err}");
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn agent_budget() {
        let config = RateLimitConfig { agent_budget_per_hour: Some(3), ..RateLimitConfig::default() };
        let r = limiter(config);
        for tool in ["read", "grep", "ls"] {
            r.check("ann", "coder", tool, RateClass::Default).unwrap();
        }
        let err = r.check("ann", "coder", "glob", RateClass::Default).unwrap_err();
        assert!(err.to_string().contains("hourly action budget"), "{err}");
        assert!(r.check("ann", "reviewer", "glob", RateClass::Default).is_ok(), "per agent");
    }

    #[test]
    fn unknown_classes_are_refused() {
        let mut config = RateLimitConfig::default();
        config.classes.insert("shell".into(), Window { per_minute: 1, per_hour: 1 });
        assert!(RateLimiter::new(config).unwrap_err().contains("unknown class `shell`"));
    }

    #[tokio::test(start_paused = true)]
    async fn disabled_means_unlimited() {
        let r = limiter(RateLimitConfig { enabled: false, ..RateLimitConfig::default() });
        for _ in 0..1000 {
            r.check("ann", "main", "exec", RateClass::Exec).unwrap();
        }
    }
}
