//! `lock_paths` and `unlock_paths`: advisory locks between agents sharing a workspace.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches};

use super::locks::LockError;
use super::params;
use super::state::FsState;

/// The `lock_paths` tool.
#[derive(Debug)]
pub struct LockPathsTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl LockPathsTool {
    /// A `lock_paths` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            "lock_paths",
            format!(
                "Lock files or folders (globs, e.g. `src/db/**`, `Cargo.toml`) so other agents working in the same \
                 workspace cannot write them until you unlock them or the lock expires (`ttl_ms`, default {} s, \
                 at most {} s). Returns a token for `unlock_paths`. Locks are advisory and bind only toolgate's \
                 writing tools.",
                state.config.lock_default_ttl_ms / 1000,
                state.config.lock_max_ttl_ms / 1000
            ),
            json!({
                "type": "object",
                "properties": {
                    "globs": { "type": "array", "items": { "type": "string" }, "minItems": 1, "description": "Workspace-relative paths or globs to lock." },
                    "ttl_ms": { "type": "integer", "minimum": 1, "description": "How long the lock lasts, in milliseconds." }
                },
                "required": ["globs"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::LOCAL_WRITE);
        LockPathsTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for LockPathsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let globs = strings(params, "globs");
        CallSafety { touches: Touches { reads: globs, ..Touches::default() }, ..CallSafety::default() }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let globs = strings(&params, "globs");
        if globs.is_empty() {
            return Err(ToolError::invalid("lock_paths", "/globs", "give at least one path or glob to lock"));
        }
        let mut normalized = Vec::new();
        for (i, g) in globs.iter().enumerate() {
            let rel = super::confine::normalize(&ctx.workspace, g)
                .map_err(|e| ToolError::invalid("lock_paths", format!("/globs/{i}"), format!("`{g}`: {e}")))?;
            normalized.push(if rel.as_str().is_empty() { "**".to_owned() } else { rel.as_str().to_owned() });
        }
        let cfg = &self.state.config;
        let ttl_ms = params::opt_u64("lock_paths", &params, "ttl_ms")?.unwrap_or(cfg.lock_default_ttl_ms);
        let ttl = Duration::from_millis(ttl_ms.clamp(1, cfg.lock_max_ttl_ms));
        let result = self.state.locks().acquire(&ctx.workspace, &ctx.identity, normalized, ttl);
        match result {
            Ok(lock) => Ok(ToolOutput::text(format!(
                "Locked `{}` for {} s. Token: {} (pass it to `unlock_paths` when done).",
                lock.globs.join("`, `"),
                ttl.as_secs(),
                lock.token
            ))
            .with_meta(json!({ "token": lock.token, "globs": lock.globs, "ttl_ms": ttl.as_millis() as u64 }))),
            Err(LockError::BadGlob(why)) => Err(ToolError::invalid("lock_paths", "/globs", why)),
            Err(LockError::Conflict(why, other)) => {
                Err(ToolError::failed(format!("{why}: {}; wait until then, or lock other paths", other.describe())))
            }
            Err(LockError::Store(e)) => Err(ToolError::failed(format!(
                "cannot take the lock: the state database, where locks are shared with other toolgate processes, \
                 failed ({e}); nothing was locked, retry the call"
            ))),
        }
    }
}

/// The `unlock_paths` tool.
#[derive(Debug)]
pub struct UnlockPathsTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl UnlockPathsTool {
    /// An `unlock_paths` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            "unlock_paths",
            "Release locks taken with `lock_paths`, by their tokens.",
            json!({
                "type": "object",
                "properties": {
                    "tokens": { "type": "array", "items": { "type": "string" }, "minItems": 1, "description": "Tokens returned by `lock_paths`." }
                },
                "required": ["tokens"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations { idempotent: true, ..Annotations::LOCAL_WRITE });
        UnlockPathsTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for UnlockPathsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let tokens = strings(&params, "tokens");
        let (released, missing) = self.state.locks().release(&ctx.identity, &tokens).map_err(|e| {
            ToolError::failed(format!(
                "cannot release the locks: the state database, where locks are shared with other toolgate \
                 processes, failed ({e}); retry the call (a lock not released lapses at its expiry)"
            ))
        })?;
        let mut text = format!("Released {} lock{}.", released.len(), if released.len() == 1 { "" } else { "s" });
        if !missing.is_empty() {
            text.push_str(&format!(" Not found, expired or held by another agent: {}.", missing.join(", ")));
        }
        Ok(ToolOutput::text(text).with_meta(json!({ "released": released, "not_found": missing })))
    }
}

fn strings(params: &Value, name: &str) -> Vec<String> {
    params
        .get(name)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}
