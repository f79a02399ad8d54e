//! Stage 4, the loop breaker: a caller that makes the very same call (same tool, same parameters) more
//! than `repeats` times in a row gets an error telling it to change approach, instead of the
//! same result again. Models stuck in a loop burn tokens and time this way; the audit log shows
//! the refusal.
//!
//! A caller is (user, agent, session). Only the last call of each caller is remembered, as a
//! fingerprint of the tool name and the validated parameters with object keys sorted.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::{CallContext, ToolError};

/// `[loop_breaker]`: refusing a call repeated too many times in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopBreakerConfig {
    /// On by default.
    pub enabled: bool,
    /// How many identical calls in a row run; the next identical one is refused (default 3).
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
    /// Caller → (fingerprint of its last call, how many times in a row it was made).
    last: Mutex<HashMap<Caller, (u64, u32)>>,
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
        let entry = last.entry(caller).or_insert((fingerprint, 0));
        if entry.0 == fingerprint {
            entry.1 = entry.1.saturating_add(1);
        } else {
            *entry = (fingerprint, 1);
        }
        let n = entry.1;
        if n > self.config.repeats {
            return Err(ToolError::Denied {
                tool: tool.to_owned(),
                reason: format!(
                    "loop detected: this exact call (same tool, same parameters) was already made {} times in a row, \
                     and repeating it will not change the result. Change approach: use different parameters or \
                     another tool, or tell the user what is blocking you",
                    self.config.repeats
                ),
            });
        }
        Ok((n >= 2).then_some(n))
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
