//! Stage 7: sliding-window rate limits per (user, tool), per minute and per hour, and an
//! optional hourly action budget per agent.
//!
//! Each window is counted in slots of a 60th of it (a second for the minute, a minute for the
//! hour), so a key's memory is the same whatever its limits (two rings of 61 counters, about
//! half a kilobyte), where keeping every call's instant held up to `per_hour` of them. A slot
//! is counted until all of it has left the window, so the slots a window touches hold at least
//! the calls of the last 60 seconds (hour), and a call is refused once they hold the limit: no
//! 60 seconds, no hour, ever hold more calls than the limit. The price is that a call is
//! counted up to one slot (a second, a minute) longer than an exact window would count it,
//! and the retry time says so. Keys whose last hour is empty carry nothing and are swept as
//! the map grows; at most [`MAX_KEYS`] are kept. Time comes from `tokio::time::Instant`, which
//! tests can pause and advance.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use toolgate_core::{RateClass, RateWindow, ToolError};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// Slots per window: a window touches these and the slot it starts in, whose older calls
/// have left it while its later ones have not (so a slot is counted until it has left whole).
const SLOTS: usize = 60;

/// Slots kept per window.
const RING: usize = SLOTS + 1;

/// The most (user, tool) keys, and separately agents, kept at once. A key with calls in its
/// last hour is dropped only beyond this, the least recently used first (its count is then
/// forgotten); an idle key costs nothing to drop.
pub(crate) const MAX_KEYS: usize = 65_536;

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

/// The calls of one window in its last [`RING`] slots of `span / SLOTS` each: constant memory
/// whatever the limit.
#[derive(Debug, Clone)]
struct Slots {
    /// Calls per slot, the slot numbered `n` at `n % RING`.
    counts: [u32; RING],
    /// The number of the newest slot counted (slot `n` is `[n, n + 1)` slot widths after the
    /// limiter's epoch).
    head: u64,
    /// The sum of `counts`.
    total: u64,
}

impl Slots {
    const fn new() -> Self {
        Slots { counts: [0; RING], head: 0, total: 0 }
    }

    /// Moves the window to slot `now` (never back): slots that left it are emptied.
    fn advance(&mut self, now: u64) {
        if now <= self.head {
            return;
        }
        if now - self.head >= RING as u64 {
            self.counts = [0; RING];
            self.total = 0;
        } else {
            for n in self.head + 1..=now {
                let slot = &mut self.counts[(n % RING as u64) as usize];
                self.total -= u64::from(*slot);
                *slot = 0;
            }
        }
        self.head = now;
    }

    fn add(&mut self) {
        let slot = &mut self.counts[(self.head % RING as u64) as usize];
        *slot = slot.saturating_add(1);
        self.total += 1;
    }

    /// After [`Slots::advance`]: the slot from which the window holds fewer than `limit`
    /// calls (the oldest slots leave first; slot `n` has left once slot `n + RING` begins).
    fn free_from(&self, limit: u32) -> u64 {
        let mut left = self.total;
        let oldest = (self.head + 1).saturating_sub(RING as u64);
        for n in oldest..=self.head {
            left -= u64::from(self.counts[(n % RING as u64) as usize]);
            if left < u64::from(limit) {
                return n + RING as u64;
            }
        }
        // A limit of 0: never; the caller is told a whole window and a slot.
        self.head + RING as u64
    }

    fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// What one (user, tool) key has called.
#[derive(Debug, Clone)]
struct Usage {
    minute: Slots,
    hour: Slots,
}

/// A clock in slots of a limiter: when slot `n` of a window `span` long begins.
#[derive(Debug)]
struct Clock {
    epoch: Instant,
}

impl Clock {
    /// The slot `now` is in (the spans are whole minutes: slots are whole seconds).
    fn slot(&self, now: Instant, span: Duration) -> u64 {
        now.saturating_duration_since(self.epoch).as_secs() / (span.as_secs() / SLOTS as u64)
    }

    /// How long from `now` until slot `n` begins.
    fn until(&self, n: u64, now: Instant, span: Duration) -> Duration {
        let width = span / SLOTS as u32;
        let at = self.epoch + width * u32::try_from(n).unwrap_or(u32::MAX);
        at.saturating_duration_since(now)
    }
}

/// Keys of one kind, bounded: idle keys are swept as the map grows, and beyond [`MAX_KEYS`]
/// the least recently used go.
#[derive(Debug)]
struct Keys<K, V> {
    map: HashMap<K, (V, u64)>,
    /// The size at which idle keys are swept next.
    sweep_at: usize,
    max: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Keys<K, V> {
    fn new(max: usize) -> Self {
        Keys { map: HashMap::new(), sweep_at: 1024.min(max), max }
    }

    /// The value of `key` (made with `new` if absent), its last use set to `now` (seconds).
    fn get(&mut self, key: K, now: u64, new: impl FnOnce() -> V, idle: impl Fn(&V, u64) -> bool) -> &mut V {
        if self.map.len() >= self.sweep_at && !self.map.contains_key(&key) {
            self.map.retain(|_, (v, _)| !idle(v, now));
            if self.map.len() >= self.max {
                self.forget_least_recent();
            }
            self.sweep_at = (self.map.len() * 2).clamp(1024.min(self.max), self.max);
        }
        let entry = self.map.entry(key).or_insert_with(|| (new(), now));
        entry.1 = now;
        &mut entry.0
    }

    /// Every key is live and there are too many: the least recently used quarter goes (at
    /// least one), their counts forgotten.
    fn forget_least_recent(&mut self) {
        let mut used: Vec<u64> = self.map.values().map(|(_, at)| *at).collect();
        let cut = used.len() / 4;
        let (_, cutoff, _) = used.select_nth_unstable(cut);
        let cutoff = *cutoff;
        // Exactly `cut + 1` go: those used before the cutoff, then as many used at it.
        let before = self.map.values().filter(|(_, at)| *at < cutoff).count();
        let mut ties = (cut + 1).saturating_sub(before);
        self.map.retain(|_, (_, at)| {
            if *at < cutoff {
                return false;
            }
            if *at == cutoff && ties > 0 {
                ties -= 1;
                return false;
            }
            true
        });
        tracing::warn!(
            "rate limits: more than {} keys have calls in the last hour; the counts of the {} used least recently \
             were forgotten",
            self.max,
            cut + 1
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The rate-limit state of a gate.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    config: RateLimitConfig,
    clock: Clock,
    calls: Mutex<Keys<(String, String), Usage>>,
    budgets: Mutex<Keys<String, Slots>>,
}

impl RateLimiter {
    pub(crate) fn new(config: RateLimitConfig) -> Result<Self, String> {
        Self::with_max_keys(config, MAX_KEYS)
    }

    fn with_max_keys(config: RateLimitConfig, max: usize) -> Result<Self, String> {
        for name in config.classes.keys() {
            if !["exec", "http", "file_write", "memory_write", "message", "default"].contains(&name.as_str()) {
                return Err(format!(
                    "[rate_limits.classes] has an unknown class `{name}`; use exec, http, file_write, memory_write, \
                     message or default"
                ));
            }
        }
        Ok(RateLimiter {
            config,
            clock: Clock { epoch: Instant::now() },
            calls: Mutex::new(Keys::new(max)),
            budgets: Mutex::new(Keys::new(max)),
        })
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
        let second = self.clock.slot(now, MINUTE);
        let minute = self.clock.slot(now, HOUR);
        // An hour-window key is idle once its newest slot has left the window.
        let idle_hour = |s: &Slots, second: u64| s.is_empty() || s.head + RING as u64 <= second / 60;
        if let Some(budget) = self.config.agent_budget_per_hour {
            let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
            let slots = budgets.get(agent.to_owned(), second, Slots::new, idle_hour);
            slots.advance(minute);
            if slots.total >= u64::from(budget) {
                let n = slots.free_from(budget);
                return Err(ToolError::RateLimited {
                    tool: format!("{tool}` (agent `{agent}`'s hourly action budget"),
                    window: RateWindow::Hour,
                    limit: budget,
                    retry_after: self.clock.until(n, now, HOUR),
                });
            }
            slots.add();
        }
        let window = self.window(tool, class);
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let usage = calls.get(
            (user.to_owned(), tool.to_owned()),
            second,
            || Usage { minute: Slots::new(), hour: Slots::new() },
            |u, second| idle_hour(&u.hour, second),
        );
        usage.minute.advance(second);
        usage.hour.advance(minute);
        // With both windows full, the one that frees later is named: its retry time is the one
        // that holds.
        let minute_full = (usage.minute.total >= u64::from(window.per_minute)).then(|| {
            let free = self.clock.until(usage.minute.free_from(window.per_minute), now, MINUTE);
            (free, RateWindow::Minute, window.per_minute)
        });
        let hour_full = (usage.hour.total >= u64::from(window.per_hour)).then(|| {
            let free = self.clock.until(usage.hour.free_from(window.per_hour), now, HOUR);
            (free, RateWindow::Hour, window.per_hour)
        });
        if let Some((retry_after, window, limit)) = minute_full.into_iter().chain(hour_full).max_by_key(|f| f.0) {
            return Err(ToolError::RateLimited { tool: tool.to_owned(), window, limit, retry_after });
        }
        usage.minute.add();
        usage.hour.add();
        Ok(())
    }
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
        // Counted by the second: the second the calls were made in leaves whole, at 61 s.
        assert_eq!(err.to_string(), "rate limit for `exec` reached: at most 30 calls per minute; retry in 61s");
        assert!(r.check("bob", "main", "exec", RateClass::Exec).is_ok(), "per user");
        assert!(r.check("ann", "main", "read", RateClass::Default).is_ok(), "per tool");
        tokio::time::advance(Duration::from_secs(45)).await;
        let err = r.check("ann", "main", "exec", RateClass::Exec).unwrap_err();
        assert!(err.to_string().ends_with("retry in 16s"), "{err}");
        tokio::time::advance(Duration::from_millis(15_999)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_err(), "not a moment before it said");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_ok(), "the window slid");
    }

    /// At the edge, against an exact log of the calls let through: calls at uneven instants
    /// (several per second, gaps, bursts) never put more than the limit in any 60 seconds or
    /// any hour, every refusal is of a window that is full to within one slot, and the retry
    /// time it gives is right: refused a moment before it, let through at it.
    #[tokio::test(start_paused = true)]
    async fn no_window_ever_holds_more_than_the_limit() {
        let mut config = RateLimitConfig::default();
        config.tools.insert("exec".into(), Window { per_minute: 7, per_hour: 40 });
        let r = limiter(config);
        let start = Instant::now();
        let mut passed: Vec<Duration> = Vec::new();
        let mut refused = 0;
        // A fixed pseudo-random walk: steps of 0.05 s to 97 s.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let step = match (seed >> 33) % 10 {
                0 => Duration::from_secs(97),
                1..=3 => Duration::from_millis(50),
                _ => Duration::from_millis(250 + (seed >> 40) % 9000),
            };
            tokio::time::advance(step).await;
            let now = start.elapsed();
            let in_last = |passed: &[Duration], span: Duration| passed.iter().filter(|t| now - **t < span).count();
            match r.check("ann", "main", "exec", RateClass::Exec) {
                Ok(()) => {
                    passed.push(now);
                    let (minute, hour) = (in_last(&passed, MINUTE), in_last(&passed, HOUR));
                    assert!(minute <= 7, "{minute} calls in the 60 s before {now:?}");
                    assert!(hour <= 40, "{hour} calls in the hour before {now:?}");
                }
                Err(ToolError::RateLimited { window, retry_after, .. }) => {
                    refused += 1;
                    // Full within one slot: an exact window a slot longer holds the limit.
                    let (span, limit) = match window {
                        RateWindow::Minute => (MINUTE + Duration::from_secs(1), 7),
                        RateWindow::Hour => (HOUR + MINUTE, 40),
                    };
                    let held = in_last(&passed, span);
                    assert!(held >= limit, "refused at {now:?} with {held} in the window");
                    assert!(retry_after > Duration::ZERO && retry_after <= span, "{retry_after:?}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(
            passed.len() > 100 && refused > 100,
            "both edges were reached: {} passed, {refused} refused",
            passed.len()
        );
        // The retry time, exactly: refused just before it, let through at it.
        let Err(ToolError::RateLimited { retry_after, .. }) = (loop {
            match r.check("ann", "main", "exec", RateClass::Exec) {
                Ok(()) => tokio::time::advance(Duration::from_millis(10)).await,
                refused => break refused,
            }
        }) else {
            panic!("a refusal")
        };
        tokio::time::advance(retry_after - Duration::from_millis(1)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_err());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(r.check("ann", "main", "exec", RateClass::Exec).is_ok());
    }

    /// A limit of 100,000 an hour, reached: the key's state is the same two rings as for a
    /// limit of 10, and idle keys are swept, beyond a bound the least recently used go.
    #[tokio::test(start_paused = true)]
    async fn memory_does_not_grow_with_the_limit_and_keys_are_bounded() {
        assert!(std::mem::size_of::<Usage>() <= 544, "{} bytes per key", std::mem::size_of::<Usage>());
        let mut config = RateLimitConfig::default();
        config.tools.insert("exec".into(), Window { per_minute: 100_000, per_hour: 100_000 });
        let r = RateLimiter::with_max_keys(config, 64).unwrap();
        for _ in 0..100_000 {
            r.check("ann", "main", "exec", RateClass::Exec).unwrap();
        }
        let err = r.check("ann", "main", "exec", RateClass::Exec).unwrap_err();
        assert!(err.to_string().contains("at most 100000 calls per hour; retry in 3660s"), "{err}");
        assert_eq!(r.calls.lock().unwrap().len(), 1);
        // Many users: never more than the bound; idle ones are swept first.
        for u in 0..200 {
            r.check(&format!("u{u}"), "main", "read", RateClass::Default).unwrap();
        }
        assert!(r.calls.lock().unwrap().len() <= 64, "{}", r.calls.lock().unwrap().len());
        // An hour later they are all idle: the new keys sweep them out, and no new one goes.
        tokio::time::advance(HOUR + 2 * MINUTE).await;
        for u in 0..64 {
            r.check(&format!("x{u}"), "main", "read", RateClass::Default).unwrap();
        }
        let calls = r.calls.lock().unwrap();
        assert!(calls.map.keys().all(|(user, _)| user.starts_with('x')), "idle keys left");
        drop(calls);
        assert_eq!(r.calls.lock().unwrap().len(), 64, "every new key kept");
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
