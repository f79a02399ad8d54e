//! The memory tools (group `memory`): notes an agent keeps about a user across sessions.
//!
//! | tool | does |
//! |---|---|
//! | `memory_search` | find notes by words and meaning (hybrid full-text + vectors, fused with RRF) |
//! | `memory_write` | write or append a note atomically; indexed before it returns |
//! | `memory_read` | a whole note |
//! | `memory_get` | some lines of a note (after a search hit) |
//! | `memory_tree` | the notes and folders |
//!
//! They work on any [`MemoryStore`] (local Markdown files in the workspace, or the managed
//! store), so they do not know where notes live. Paths are confined to `MEMORY.md` and
//! `memory/`; identity files are never written. Every store call blocks (SQLite, the embedding
//! model), so it runs off the async runtime.

mod config;
mod managed;
mod tools;

use std::sync::Arc;

use toolgate_core::Tool;
use toolgate_store::memory::MemoryStore;

pub use config::{EmbeddingsConfig, EmbeddingsProvider, MemoryConfig, MemoryMode};
pub use managed::{CONTEXT_FILES, ManagedFiles, ManagedInterceptor, context_file};
pub use tools::{MemoryGetTool, MemoryReadTool, MemorySearchTool, MemoryTreeTool, MemoryWriteTool};

/// Every memory tool over `store`.
pub fn tools(store: Arc<dyn MemoryStore>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemorySearchTool::new(store.clone())),
        Arc::new(MemoryWriteTool::new(store.clone())),
        Arc::new(MemoryReadTool::new(store.clone())),
        Arc::new(MemoryGetTool::new(store.clone())),
        Arc::new(MemoryTreeTool::new(store)),
    ]
}

/// Re-indexes memory notes that the file tools wrote (local mode): `write`, `edit`,
/// `multi_edit` and `apply_patch` on `MEMORY.md` or `memory/**` reach the index at once.
#[derive(Debug)]
pub struct MemoryInterceptor {
    store: Arc<dyn MemoryStore>,
}

impl MemoryInterceptor {
    /// An interceptor feeding `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        MemoryInterceptor { store }
    }
}

impl crate::fs::WriteObserver for MemoryInterceptor {
    fn written(&self, ctx: &toolgate_core::CallContext, rel: &str) {
        if !toolgate_store::memory::paths::is_memory_path(rel) {
            return;
        }
        let scope =
            toolgate_store::memory::Scope { user: ctx.identity.user.clone(), agent: ctx.identity.agent.clone() };
        if let Err(e) = self.store.reindex(&scope, rel) {
            // The note is written; the next search's scan indexes it.
            tracing::warn!("memory: re-indexing `{rel}` after a file write failed: {e}");
        }
    }
}
