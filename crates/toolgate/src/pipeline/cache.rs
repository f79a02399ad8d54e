//! Stage 12, the result cache: a read-only, idempotent tool called again with the same parameters by the
//! same caller, before anything was written through the gate and within a short TTL, gets its
//! previous (already shaped) result without running again.
//!
//! Entries are keyed by (user, agent, workspace, tool, parameters with sorted keys) and tagged
//! with the gate's write generation: every call of a tool that is not read-only bumps it before
//! it runs and again when it ends, so no result computed before or during a write is served
//! after it. Changes made outside the gate (an editor, a build) are not seen until the TTL
//! passes, which is why the cache is off by default.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};

use super::loop_breaker::hash_value;

/// `[cache]`: the result cache for read-only tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Off by default: changes made outside the gate are not seen until the TTL passes.
    pub enabled: bool,
    /// How long a result is served, in milliseconds (default 2,000).
    pub ttl_ms: u64,
    /// Most results kept (default 1,000); the oldest go first.
    pub max_entries: usize,
    /// Read-only tools never cached (default `time`, whose result changes by itself).
    pub exempt: Vec<String>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { enabled: false, ttl_ms: 2_000, max_entries: 1_000, exempt: vec!["time".into()] }
    }
}

/// What [`ResultCache::before`] decided for one call.
#[derive(Debug)]
pub(crate) enum Ticket {
    /// Not cacheable, not a write: nothing to do afterwards.
    Skip,
    /// A write: the generation was bumped; [`ResultCache::after`] bumps it again.
    Write,
    /// A cacheable call that missed: store its result if nothing was written meanwhile.
    Miss { key: u64, generation: u64 },
    /// The cached result.
    Hit(ToolOutput),
}

struct Entry {
    generation: u64,
    stored: Instant,
    output: ToolOutput,
}

/// The stage.
pub(crate) struct ResultCache {
    config: CacheConfig,
    generation: AtomicU64,
    entries: Mutex<HashMap<u64, Entry>>,
}

impl std::fmt::Debug for ResultCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultCache").field("config", &self.config).finish_non_exhaustive()
    }
}

impl ResultCache {
    pub(crate) fn new(config: CacheConfig) -> Self {
        ResultCache { config, generation: AtomicU64::new(0), entries: Mutex::new(HashMap::new()) }
    }

    fn cacheable(&self, spec: &ToolSpec) -> bool {
        self.config.enabled
            && spec.annotations.read_only
            && spec.annotations.idempotent
            && !self.config.exempt.contains(&spec.name)
    }

    /// Looks the call up, or marks a write. Runs just before the tool would execute (after
    /// policy and approval, so a cached result is never a way around them).
    /// A hit is noted in `trace` (and so in the audit log).
    pub(crate) fn before(&self, ctx: &CallContext, spec: &ToolSpec, params: &Value, trace: &mut Vec<String>) -> Ticket {
        let ticket = self.lookup(ctx, spec, params);
        if matches!(ticket, Ticket::Hit(_)) {
            trace.push("cache: hit (the same call's result from moments ago; nothing was written since)".to_owned());
        }
        ticket
    }

    fn lookup(&self, ctx: &CallContext, spec: &ToolSpec, params: &Value) -> Ticket {
        if !spec.annotations.read_only {
            self.generation.fetch_add(1, Ordering::AcqRel);
            return Ticket::Write;
        }
        if !self.cacheable(spec) {
            return Ticket::Skip;
        }
        let key = key(ctx, spec, params);
        let generation = self.generation.load(Ordering::Acquire);
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get(&key)
            && e.generation == generation
            && e.stored.elapsed() < Duration::from_millis(self.config.ttl_ms)
        {
            return Ticket::Hit(e.output.clone());
        }
        Ticket::Miss { key, generation }
    }

    /// Runs `execute` unless `ticket` is a hit, and does what [`ResultCache::after`] does with
    /// its result. `execute` is a future, so on a hit the tool never starts.
    pub(crate) async fn around<F>(&self, ticket: Ticket, execute: F) -> Result<ToolOutput, ToolError>
    where
        F: std::future::Future<Output = Result<ToolOutput, ToolError>>,
    {
        if let Ticket::Hit(out) = ticket {
            return Ok(out);
        }
        let result = execute.await;
        self.after(ticket, result.as_ref().ok());
        result
    }

    /// After the call: stores a fresh result, or ends a write.
    pub(crate) fn after(&self, ticket: Ticket, output: Option<&ToolOutput>) {
        match ticket {
            Ticket::Write => {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            Ticket::Miss { key, generation } => {
                let Some(output) = output else { return };
                if self.generation.load(Ordering::Acquire) != generation {
                    return;
                }
                let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                let ttl = Duration::from_millis(self.config.ttl_ms);
                if entries.len() >= self.config.max_entries {
                    entries.retain(|_, e| e.generation == generation && e.stored.elapsed() < ttl);
                }
                if entries.len() >= self.config.max_entries
                    && let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.stored).map(|(k, _)| *k)
                {
                    entries.remove(&oldest);
                }
                if self.config.max_entries > 0 {
                    entries.insert(key, Entry { generation, stored: Instant::now(), output: output.clone() });
                }
            }
            Ticket::Skip | Ticket::Hit(_) => {}
        }
    }
}

fn key(ctx: &CallContext, spec: &ToolSpec, params: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ctx.identity.user.hash(&mut h);
    ctx.identity.agent.hash(&mut h);
    ctx.workspace.hash(&mut h);
    spec.name.hash(&mut h);
    hash_value(params, &mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::Annotations;

    #[test]
    fn hits_until_a_write_or_the_ttl() {
        let cache = ResultCache::new(CacheConfig { enabled: true, ..CacheConfig::default() });
        let ctx = CallContext::new(std::env::temp_dir());
        let read = ToolSpec::new("read", "", json!({"type": "object"})).annotations(Annotations::READ_ONLY);
        let write = ToolSpec::new("write", "", json!({"type": "object"}));
        let p = json!({"path": "a"});
        let t = cache.lookup(&ctx, &read, &p);
        assert!(matches!(t, Ticket::Miss { .. }));
        cache.after(t, Some(&ToolOutput::text("one")));
        assert!(matches!(cache.lookup(&ctx, &read, &p), Ticket::Hit(o) if o.text_content() == "one"));
        let w = cache.lookup(&ctx, &write, &json!({}));
        assert!(matches!(w, Ticket::Write));
        // A read that started during the write is not stored.
        let during = cache.lookup(&ctx, &read, &p);
        cache.after(w, None);
        cache.after(during, Some(&ToolOutput::text("stale")));
        assert!(matches!(cache.lookup(&ctx, &read, &p), Ticket::Miss { .. }));
        let time = ToolSpec::new("time", "", json!({"type": "object"})).annotations(Annotations::PURE);
        assert!(matches!(cache.lookup(&ctx, &time, &json!({})), Ticket::Skip));
    }

    #[test]
    fn off_by_default() {
        let cache = ResultCache::new(CacheConfig::default());
        let ctx = CallContext::new(std::env::temp_dir());
        let read = ToolSpec::new("read", "", json!({"type": "object"})).annotations(Annotations::READ_ONLY);
        assert!(matches!(cache.lookup(&ctx, &read, &json!({})), Ticket::Skip));
    }
}
