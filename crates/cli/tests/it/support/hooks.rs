//! Hooks for tests that change the workspace between the gate's checks and the tool's run.
#![allow(clippy::unwrap_used, dead_code)] // tests fail loudly on purpose; each test binary uses a part

/// Writes `content` to `path` when a call reaches the hooks: after the gate decided whether to
/// ask anyone, before the tool runs.
#[derive(Debug)]
pub struct WritesBeforeRunning(pub std::path::PathBuf, pub &'static str);

#[toolgate::core::async_trait]
impl toolgate::Hook for WritesBeforeRunning {
    async fn before(
        &self,
        _ctx: &toolgate::core::CallContext,
        _tool: &str,
        _params: &serde_json::Value,
    ) -> toolgate::HookVerdict {
        std::fs::write(&self.0, self.1).unwrap();
        toolgate::HookVerdict::Continue
    }
}
