//! A workspace with the runtime tools, and helpers to look at processes.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;
use toolgate_core::{CallContext, CallSafety, Tool, ToolError, ToolOutput};
use toolgate_tools::runtime::{ProcessRunner, RuntimeConfig, tools};

/// A workspace, a folder outside it with a canary, and the three tools.
pub struct Fixture {
    pub ws: TempDir,
    pub outside: TempDir,
    pub tools: Vec<Arc<dyn Tool>>,
    pub ctx: CallContext,
}

pub const CANARY: &str = "CANARY-7f3a9c\n";

impl Fixture {
    pub fn new() -> Self {
        Self::with_config(|_| {})
    }

    pub fn with_config(edit: impl FnOnce(&mut RuntimeConfig)) -> Self {
        let ws = tempfile::Builder::new().prefix("tg-rt-ws-").tempdir().unwrap();
        let outside = tempfile::Builder::new().prefix("tg-rt-outside-").tempdir().unwrap();
        std::fs::write(outside.path().join("canary"), CANARY).unwrap();
        let mut config = RuntimeConfig::default();
        edit(&mut config);
        let tools = tools(&ProcessRunner::new(config).unwrap());
        let ctx = CallContext::new(ws.path().canonicalize().unwrap());
        Fixture { ws, outside, tools, ctx }
    }

    pub fn ws(&self) -> PathBuf {
        self.ws.path().canonicalize().unwrap()
    }

    pub fn outside(&self) -> PathBuf {
        self.outside.path().canonicalize().unwrap()
    }

    pub fn canary(&self) -> PathBuf {
        self.outside().join("canary")
    }

    /// The canary is unchanged and nothing else appeared beside it.
    pub fn assert_canary_intact(&self) {
        assert_eq!(std::fs::read_to_string(self.canary()).unwrap(), CANARY);
        let names: Vec<_> = std::fs::read_dir(self.outside()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "something was created outside the workspace: {names:?}");
    }

    pub fn tool(&self, name: &str) -> &Arc<dyn Tool> {
        self.tools.iter().find(|t| t.spec().name == name).unwrap()
    }

    pub async fn exec(&self, params: Value) -> Result<ToolOutput, ToolError> {
        self.tool("exec").execute(&self.ctx, params).await
    }

    pub fn exec_safety(&self, params: Value) -> CallSafety {
        self.tool("exec").safety(&params)
    }

    pub async fn process(&self, params: Value) -> Result<ToolOutput, ToolError> {
        self.tool("process").execute(&self.ctx, params).await
    }

    pub async fn code(&self, params: Value) -> Result<ToolOutput, ToolError> {
        self.tool("execute_code").execute(&self.ctx, params).await
    }

    /// The host pids of the running background processes.
    pub async fn background_pids(&self) -> Vec<u32> {
        let list = self.process(serde_json::json!({ "action": "list" })).await.unwrap();
        list.meta.unwrap()["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["running"] == true)
            .map(|p| p["pid"].as_u64().unwrap() as u32)
            .collect()
    }
}

/// Host pids of processes whose command line contains `token`.
pub fn processes_with(token: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(token) {
            // Zombies have an empty cmdline, so anything found here is alive.
            out.push(pid);
        }
    }
    out
}

/// Waits up to 5 s for processes with `token` to be gone.
pub fn wait_gone(token: &str) -> Vec<u32> {
    let t = Instant::now();
    loop {
        let left = processes_with(token);
        if left.is_empty() || t.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// None of these pids is alive (or a zombie) within 5 s: killed sandboxes are reaped by the
/// spawner thread, shortly after they die.
pub fn assert_all_gone(pids: &[u32]) {
    let t = Instant::now();
    for pid in pids {
        loop {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            if status.is_empty() {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "process {pid} is still there:\n{status}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
