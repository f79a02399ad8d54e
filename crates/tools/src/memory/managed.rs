//! Managed mode's routing of the file tools: `read`, `write`, `edit` and `multi_edit` of
//! `MEMORY.md`, `memory/**` and the seven context files go to the store, per user and agent.
//!
//! Context files follow the agent's type (GoClaw's rules): an `open` agent keeps all seven per
//! user, falling back to the agent-level template; a `predefined` agent keeps only `USER.md` per
//! user, reads the others from its template, and refuses to write them. The template is the
//! agent's row stored for user `""`, else the file of that name at the workspace root (the
//! operator's copy). `BOOTSTRAP.md` written empty is deleted for that user (first-run setup done)
//! and does not fall back to the template afterwards.

use std::collections::HashSet;
use std::sync::Arc;

use toolgate_core::{CallContext, ToolError};
use toolgate_store::memory::{ManagedMemory, MemoryError, MemoryStore, Scope, Stored, WriteMode, paths};

use crate::fs::{FileRedirect, WriteObserver};

/// The context files agents load into their prompts, routed per user in managed mode.
pub const CONTEXT_FILES: &[&str] =
    &["SOUL.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md", "HEARTBEAT.md", "USER.md", "BOOTSTRAP.md"];

/// The one context file a predefined agent keeps per user.
const PER_USER_ALWAYS: &str = "USER.md";
/// Written empty = deleted.
const BOOTSTRAP: &str = "BOOTSTRAP.md";
/// Largest template read from the workspace, in bytes.
const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

/// The canonical context-file name `rel` names (at the workspace root, any letter case).
pub fn context_file(rel: &str) -> Option<&'static str> {
    if rel.contains('/') {
        return None;
    }
    CONTEXT_FILES.iter().copied().find(|f| f.eq_ignore_ascii_case(rel))
}

/// Serves memory notes and context files from a [`ManagedMemory`] for the file tools.
#[derive(Debug)]
pub struct ManagedFiles {
    store: Arc<ManagedMemory>,
    /// Agents configured with `type = "predefined"`; every other agent is open.
    predefined: HashSet<String>,
}

impl ManagedFiles {
    /// Routing over `store`; `predefined` names the agents of type `predefined`.
    pub fn new(store: Arc<ManagedMemory>, predefined: impl IntoIterator<Item = String>) -> Self {
        ManagedFiles { store, predefined: predefined.into_iter().collect() }
    }

    fn per_user(&self, agent: &str, name: &str) -> bool {
        name == PER_USER_ALWAYS || !self.predefined.contains(agent)
    }

    /// The agent-level template: the stored row for user `""`, else the workspace's file.
    fn template(&self, ctx: &CallContext, name: &str) -> Result<String, ToolError> {
        match self.store.context_file(&ctx.identity.agent, "", name).map_err(|e| store_error("read", name, e))? {
            Some(Stored::Text(t)) => return Ok(t),
            Some(Stored::Deleted) => return Err(not_found(name, &ctx.identity.agent)),
            None => {}
        }
        // The operator's file at the workspace root; a link is never followed (it could point
        // anywhere).
        let path = ctx.workspace.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() && m.len() <= MAX_TEMPLATE_BYTES => {
                let bytes = std::fs::read(&path)
                    .map_err(|e| ToolError::failed(format!("reading the template `{name}` failed: {e}")))?;
                String::from_utf8(bytes)
                    .map_err(|_| ToolError::failed(format!("the template `{name}` is not UTF-8 text")))
            }
            _ => Err(not_found(name, &ctx.identity.agent)),
        }
    }
}

fn scope(ctx: &CallContext) -> Scope {
    Scope { user: ctx.identity.user.clone(), agent: ctx.identity.agent.clone() }
}

fn not_found(name: &str, agent: &str) -> ToolError {
    ToolError::NotFound {
        what: format!("file `{name}`"),
        hint: Some(format!(
            "`{name}` is kept per user in the memory store (managed mode) and agent `{agent}` has none yet; \
             create it with `write`"
        )),
    }
}

fn store_error(tool: &str, rel: &str, e: MemoryError) -> ToolError {
    match e {
        MemoryError::NotFound { .. } => ToolError::NotFound {
            what: format!("memory note `{rel}`"),
            hint: Some("notes are kept per user in the memory store (managed mode); create it with `write`".into()),
        },
        MemoryError::InvalidPath { .. } => ToolError::invalid(tool, "/path", e.to_string()),
        MemoryError::TooLarge { .. } => ToolError::invalid(tool, "/content", e.to_string()),
        other => ToolError::failed(other.to_string()),
    }
}

impl FileRedirect for ManagedFiles {
    fn claims(&self, _ctx: &CallContext, rel: &str) -> bool {
        paths::is_memory_path(rel) || context_file(rel).is_some()
    }

    fn read(&self, ctx: &CallContext, rel: &str) -> Result<String, ToolError> {
        let Some(name) = context_file(rel) else {
            return self.store.read(&scope(ctx), rel).map_err(|e| store_error("read", rel, e));
        };
        let (agent, user) = (&ctx.identity.agent, &ctx.identity.user);
        if self.per_user(agent, name) {
            match self.store.context_file(agent, user, name).map_err(|e| store_error("read", name, e))? {
                Some(Stored::Text(t)) => return Ok(t),
                Some(Stored::Deleted) => return Err(not_found(name, agent)),
                None => {}
            }
        }
        self.template(ctx, name)
    }

    fn write(&self, ctx: &CallContext, rel: &str, content: &str) -> Result<String, ToolError> {
        let (agent, user) = (&ctx.identity.agent, &ctx.identity.user);
        let Some(name) = context_file(rel) else {
            let written = self
                .store
                .write(&scope(ctx), rel, content, WriteMode::Replace)
                .map_err(|e| store_error("write", rel, e))?;
            let verb = if written.created { "Created" } else { "Overwrote" };
            return Ok(format!(
                "{verb} `{}` in the memory store for user `{user}` of agent `{agent}` ({} bytes, {} chunks indexed).",
                written.path, written.bytes, written.chunks
            ));
        };
        if !self.per_user(agent, name) {
            return Err(ToolError::Denied {
                tool: "write".into(),
                reason: format!(
                    "agent `{agent}` is predefined: its `{name}` is set by the operator and cannot be changed; \
                     only `{PER_USER_ALWAYS}` is kept per user (write what you learn about the user there)"
                ),
            });
        }
        if name == BOOTSTRAP && content.trim().is_empty() {
            self.store.set_context_file(agent, user, name, None).map_err(|e| store_error("write", name, e))?;
            return Ok(format!("Deleted `{name}` for user `{user}` of agent `{agent}` (first-run setup is done)."));
        }
        let created =
            self.store.set_context_file(agent, user, name, Some(content)).map_err(|e| store_error("write", name, e))?;
        let verb = if created { "Created" } else { "Overwrote" };
        Ok(format!(
            "{verb} `{name}` for user `{user}` of agent `{agent}` in the memory store ({} bytes).",
            content.len()
        ))
    }
}

/// The file tools' hook in managed mode: it routes (see [`ManagedFiles`]); nothing written to
/// disk needs re-indexing.
#[derive(Debug)]
pub struct ManagedInterceptor {
    files: Arc<ManagedFiles>,
}

impl ManagedInterceptor {
    /// A hook routing through `files`.
    pub fn new(files: Arc<ManagedFiles>) -> Self {
        ManagedInterceptor { files }
    }
}

impl WriteObserver for ManagedInterceptor {
    fn written(&self, _ctx: &CallContext, _rel: &str) {}

    fn redirect(&self) -> Option<Arc<dyn FileRedirect>> {
        Some(self.files.clone())
    }
}
