//! Stage 4, the loop breaker: a caller that makes the very same call (same tool, same parameters) more
//! than `repeats` times in a row, each time getting the very same result, gets an error telling it
//! to change approach, instead of the same result again. Models stuck in a loop burn tokens and
//! time this way; the audit log shows the refusal.
//!
//! A repeated call whose result changed is progress, not a loop: polling a job's status, a
//! routine's history or a page while it loads goes on for as long as the answer moves.
//!
//! A caller is (user, agent, session). Only the last call of each caller is remembered, as a
//! fingerprint of the tool name and the validated parameters with object keys sorted, and of the
//! result it got.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};

/// `[loop_breaker]`: refusing a call repeated too many times in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopBreakerConfig {
    /// On by default.
    pub enabled: bool,
    /// How many identical calls in a row with identical results run; the next identical one is
    /// refused (default 3).
    pub repeats: u32,
    /// Tools never refused for repeating (default `echo`, which only returns its input, and
    /// `process`, which is polled while a command runs).
    pub exempt: Vec<String>,
}

impl Default for LoopBreakerConfig {
    fn default() -> Self {
        LoopBreakerConfig { enabled: true, repeats: 3, exempt: vec!["echo".into(), "process".into()] }
    }
}

/// Callers remembered at most; past this the memory starts over (a loop is then seen late,
/// never wrongly).
const MAX_CALLERS: usize = 10_000;

/// (user, agent, session).
type Caller = (String, String, String);

/// The stage.
#[derive(Debug)]
pub(crate) struct LoopBreaker {
    config: LoopBreakerConfig,
    /// Caller → its run of identical calls.
    last: Mutex<HashMap<Caller, Streak>>,
}

/// A caller's latest run of identical calls.
#[derive(Debug)]
struct Streak {
    /// Fingerprint of the call (tool and parameters).
    call: u64,
    /// Fingerprint of the last result it got, once one came back.
    result: Option<u64>,
    /// How many times in a row it was made with the same result.
    count: u32,
}

impl LoopBreaker {
    pub(crate) fn new(config: LoopBreakerConfig) -> Self {
        LoopBreaker { config, last: Mutex::new(HashMap::new()) }
    }

    /// [`LoopBreaker::check`], noting a repeat or the refusal in `trace` (and so in the audit log).
    pub(crate) fn stage(
        &self,
        ctx: &CallContext,
        tool: &str,
        params: &Value,
        trace: &mut Vec<String>,
    ) -> Result<(), ToolError> {
        match self.check(ctx, tool, params) {
            Ok(None) => Ok(()),
            Ok(Some(n)) => {
                trace.push(format!("loop breaker: identical call {n} in a row"));
                Ok(())
            }
            Err(e) => {
                trace
                    .push(format!("loop breaker: refused, more than {} identical calls in a row", self.config.repeats));
                Err(e)
            }
        }
    }

    /// Records the call; refuses it when it is one identical call too many. `Ok(Some(n))` when
    /// it is the `n`th identical call in a row (n ≥ 2), for the trace.
    pub(crate) fn check(&self, ctx: &CallContext, tool: &str, params: &Value) -> Result<Option<u32>, ToolError> {
        if !self.config.enabled || self.config.repeats == 0 || self.config.exempt.iter().any(|t| t == tool) {
            return Ok(None);
        }
        let fingerprint = fingerprint(tool, params);
        let caller = (ctx.identity.user.clone(), ctx.identity.agent.clone(), ctx.identity.session.clone());
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.len() >= MAX_CALLERS && !last.contains_key(&caller) {
            last.clear();
        }
        let entry = last.entry(caller).or_insert(Streak { call: fingerprint, result: None, count: 0 });
        if entry.call == fingerprint {
            entry.count = entry.count.saturating_add(1);
        } else {
            *entry = Streak { call: fingerprint, result: None, count: 1 };
        }
        let n = entry.count;
        if n > self.config.repeats {
            return Err(ToolError::Denied {
                tool: tool.to_owned(),
                reason: format!(
                    "{LOOP_DETECTED}: this exact call (same tool, same parameters) was already made {} times in a \
                     row with the same result, and repeating it will not change the result. Change approach: use \
                     different parameters or another tool, or tell the user what is blocking you",
                    self.config.repeats
                ),
            });
        }
        Ok((n >= 2).then_some(n))
    }

    /// Notes what the tool returned for the caller's call, as it returned it (before the output
    /// stage, whose wrapping differs on every call): when it differs from what the same call got
    /// last time, the run starts over at this call.
    ///
    /// Concurrent calls of one caller may note each other's results; that can only start a run
    /// over (a loop seen later), never lengthen one.
    pub(crate) fn observe(&self, ctx: &CallContext, tool: &str, result: Result<&ToolOutput, &ToolError>) {
        if !self.config.enabled || self.config.repeats == 0 || self.config.exempt.iter().any(|t| t == tool) {
            return;
        }
        let seen = result_fingerprint(result);
        let caller = (ctx.identity.user.clone(), ctx.identity.agent.clone(), ctx.identity.session.clone());
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(streak) = last.get_mut(&caller) {
            if streak.result.is_some_and(|before| before != seen) {
                streak.count = 1;
            }
            streak.result = Some(seen);
        }
    }
}

/// How a loop refusal starts (the agent runtime looks for it).
const LOOP_DETECTED: &str = "loop detected";

/// A hash of what the caller got back: the content the model reads, or the error.
fn result_fingerprint(result: Result<&ToolOutput, &ToolError>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match result {
        Ok(out) => {
            0u8.hash(&mut h);
            // Serialized straight into the hasher: no copy of a large result is made.
            let _ = serde_json::to_writer(HashWriter(&mut h), &out.content);
        }
        Err(e) => (1u8, e.to_string()).hash(&mut h),
    }
    h.finish()
}

/// Feeds written bytes to a hasher.
struct HashWriter<'a, H: Hasher>(&'a mut H);

impl<H: Hasher> std::io::Write for HashWriter<'_, H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A hash of the tool name and the parameters, object keys in sorted order.
fn fingerprint(tool: &str, params: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tool.hash(&mut h);
    hash_value(params, &mut h);
    h.finish()
}

pub(crate) fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            for item in items {
                hash_value(item, h);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(h);
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                hash_value(&map[k], h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_call_after_n_identical_ones_is_refused_until_something_changes() {
        let b = LoopBreaker::new(LoopBreakerConfig::default());
        let ctx = CallContext::new(std::env::temp_dir());
        for _ in 0..3 {
            assert!(b.check(&ctx, "read", &json!({"path": "a", "limit": 5})).is_ok());
        }
        // Key order does not make a call different.
        let err = b.check(&ctx, "read", &json!({"limit": 5, "path": "a"})).unwrap_err();
        assert!(err.to_string().contains("loop detected"), "{err}");
        assert!(b.check(&ctx, "read", &json!({"path": "a", "limit": 5})).is_err(), "still a loop");
        assert!(b.check(&ctx, "read", &json!({"path": "b"})).is_ok());
        assert!(b.check(&ctx, "read", &json!({"path": "a", "limit": 5})).is_ok(), "broken by another call");
        for _ in 0..10 {
            assert!(b.check(&ctx, "echo", &json!({"message": "x"})).is_ok(), "exempt");
        }
    }

    #[test]
    fn a_repeated_call_whose_result_changes_is_not_a_loop() {
        let b = LoopBreaker::new(LoopBreakerConfig::default());
        let ctx = CallContext::new(std::env::temp_dir());
        let status = json!({"id": "job-1"});
        // A job's status polled while it runs: the answer moves, so the polling goes on.
        for state in ["queued", "running", "running 10%", "running 20%", "running 30%", "completed"] {
            assert!(b.check(&ctx, "job_status", &status).is_ok(), "{state}");
            b.observe(&ctx, "job_status", Ok(&ToolOutput::text(state)));
        }
        // Once the answer stops moving, the same call three times more is the limit.
        for _ in 0..2 {
            assert!(b.check(&ctx, "job_status", &status).is_ok());
            b.observe(&ctx, "job_status", Ok(&ToolOutput::text("completed")));
        }
        let err = b.check(&ctx, "job_status", &status).unwrap_err();
        assert!(err.to_string().contains("same result"), "{err}");
        assert!(b.check(&ctx, "job_status", &status).is_err(), "still a loop");
    }

    #[test]
    fn the_same_error_every_time_is_a_loop() {
        let b = LoopBreaker::new(LoopBreakerConfig::default());
        let ctx = CallContext::new(std::env::temp_dir());
        let failed = ToolError::NotFound { what: "file `gone`".into(), hint: None };
        for _ in 0..3 {
            assert!(b.check(&ctx, "read", &json!({"path": "gone"})).is_ok());
            b.observe(&ctx, "read", Err(&failed));
        }
        assert!(b.check(&ctx, "read", &json!({"path": "gone"})).is_err());
    }

    #[test]
    fn callers_are_counted_apart() {
        let b = LoopBreaker::new(LoopBreakerConfig { repeats: 1, ..LoopBreakerConfig::default() });
        let mut a = CallContext::new(std::env::temp_dir());
        a.identity.session = "s1".into();
        let mut c = a.clone();
        c.identity.session = "s2".into();
        assert!(b.check(&a, "ls", &json!({})).is_ok());
        assert!(b.check(&c, "ls", &json!({})).is_ok());
        assert!(b.check(&a, "ls", &json!({})).is_err());
    }
}
