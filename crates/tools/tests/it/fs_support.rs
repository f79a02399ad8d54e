//! A temporary workspace with every fs tool, for the fs integration tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{CallContext, Identity, Tool, ToolError, ToolOutput};
use toolgate_tools::fs::{FsConfig, tools};

/// A workspace in a temporary folder with the fs tools.
pub struct Ws {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub tools: HashMap<String, Arc<dyn Tool>>,
}

impl Ws {
    pub fn new() -> Ws {
        Ws::with_config(FsConfig::default())
    }

    pub fn with_config(config: FsConfig) -> Ws {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap_or_else(|e| panic!("mkdir: {e}"));
        let root = root.canonicalize().unwrap_or_else(|e| panic!("canonicalize: {e}"));
        let tools =
            tools(config).unwrap_or_else(|e| panic!("{e}")).into_iter().map(|t| (t.spec().name.clone(), t)).collect();
        Ws { _dir: dir, root, tools }
    }

    /// The folder holding the workspace (outside it), for canaries.
    pub fn outside(&self) -> PathBuf {
        self.root.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    pub fn ctx(&self) -> CallContext {
        CallContext::new(self.root.clone())
    }

    pub fn ctx_as(&self, agent: &str, session: &str) -> CallContext {
        self.ctx().with_identity(Identity {
            user: "local".to_owned(),
            agent: agent.to_owned(),
            session: session.to_owned(),
        })
    }

    pub fn tool(&self, name: &str) -> &Arc<dyn Tool> {
        self.tools.get(name).unwrap_or_else(|| panic!("no tool {name}"))
    }

    pub async fn call(&self, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        self.tool(name).execute(&self.ctx(), params).await
    }

    pub async fn call_ctx(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        self.tool(name).execute(ctx, params).await
    }

    /// Text of a successful call; panics with the error otherwise.
    pub async fn ok(&self, name: &str, params: Value) -> String {
        match self.call(name, params.clone()).await {
            Ok(out) => out.text_content(),
            Err(e) => panic!("{name}({params}) failed: {e}"),
        }
    }

    /// The error of a call that must fail.
    pub async fn err(&self, name: &str, params: Value) -> ToolError {
        match self.call(name, params.clone()).await {
            Ok(out) => panic!("{name}({params}) should have failed, got: {}", out.text_content()),
            Err(e) => e,
        }
    }

    pub fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
        }
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    }

    pub fn get(&self, rel: &str) -> Vec<u8> {
        let p = self.root.join(rel);
        std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    }

    pub fn get_str(&self, rel: &str) -> String {
        String::from_utf8(self.get(rel)).unwrap_or_else(|e| panic!("utf8: {e}"))
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).symlink_metadata().is_ok()
    }
}
