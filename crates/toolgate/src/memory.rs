//! Wiring the memory tools: the store for this workspace (local files or the managed store), its
//! embedder, and the file tools' hook (re-indexing in local mode, routing in managed mode).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toolgate_store::memory::{Embedder, LocalMemory, ManagedMemory, MemoryIndex, MemoryStore};
use toolgate_tools::fs::WriteObserver;
use toolgate_tools::memory::{
    EmbeddingsProvider, ManagedFiles, ManagedInterceptor, MemoryConfig, MemoryInterceptor, MemoryMode,
};

use crate::GateError;
use crate::config::Config;

/// The memory tools' store and the file tools' hook for it.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    /// What the memory tools talk to.
    pub(crate) store: Arc<dyn MemoryStore>,
    /// Local mode: re-indexes notes the file tools write; managed mode: routes the file tools'
    /// reads and writes of notes and context files to the store.
    pub(crate) hook: Arc<dyn WriteObserver>,
}

/// The memory store for `workspace`, or `None` when `[memory] enabled = false`. The index lives
/// in `state_db` (in memory when the gate keeps no state on disk), or with `[store] url` in the
/// shared PostgreSQL database under the workspace's path, so every node reads and searches the
/// same notes (`toolgate-postgres`'s `memory.rs`); `embedder` is
/// [`embedder`]`(&config.memory)`. `config.agents` gives each agent's type, which decides its
/// context-file routing in managed mode.
pub(crate) fn open(
    config: &Config,
    workspace: &Path,
    state_db: Option<&Path>,
    embedder: Option<Arc<dyn Embedder>>,
) -> Result<Option<Memory>, GateError> {
    let memory = &config.memory;
    if !memory.enabled {
        return Ok(None);
    }
    let index = match (&config.store.url, state_db) {
        (Some(url), Some(_)) => crate::state::shared(url)
            .map_err(|e| GateError::Memory(e.to_string()))?
            .memory_index(&workspace.to_string_lossy()),
        _ => MemoryIndex::open(state_db).map_err(|e| GateError::Memory(e.to_string()))?,
    };
    Ok(Some(match memory.mode {
        MemoryMode::Local => {
            let local = LocalMemory::new(workspace, index, embedder)
                .max_note_bytes(memory.max_note_bytes)
                .rescan_interval(Duration::from_millis(memory.rescan_interval_ms));
            let store: Arc<dyn MemoryStore> = Arc::new(local);
            Memory { hook: Arc::new(MemoryInterceptor::new(store.clone())), store }
        }
        MemoryMode::Managed => {
            let managed = Arc::new(ManagedMemory::new(index, embedder).max_note_bytes(memory.max_note_bytes));
            let predefined = config
                .agents
                .iter()
                .filter(|(_, a)| a.kind == toolgate_agent::config::AgentType::Predefined)
                .map(|(name, _)| name.clone());
            let files = Arc::new(ManagedFiles::new(managed.clone(), predefined));
            Memory { store: managed, hook: Arc::new(ManagedInterceptor::new(files)) }
        }
    }))
}

/// The embedder `[memory.embeddings]` asks for (memory search and `skill_search` share it).
pub fn embedder(config: &MemoryConfig) -> Option<Arc<dyn Embedder>> {
    let e = &config.embeddings;
    match e.provider {
        EmbeddingsProvider::None => None,
        EmbeddingsProvider::Local => {
            let name = if e.model.is_empty() { toolgate_embed::DEFAULT_MODEL } else { e.model.as_str() };
            let dir = e.models_dir.clone().or_else(toolgate_embed::default_models_dir).unwrap_or_default();
            let budget = (config.query_budget_ms > 0).then(|| Duration::from_millis(config.query_budget_ms));
            Some(match toolgate_embed::LazyModel::new(dir, name) {
                Ok(m) => Arc::new(m.with_query_budget(budget)) as Arc<dyn Embedder>,
                Err(err) => Arc::new(toolgate_embed::Unavailable::new(format!("local:{name}"), err.to_string())),
            })
        }
        EmbeddingsProvider::Openai => Some(match crate::embeddings::OpenAiEmbedder::new(e) {
            Ok(embedder) => Arc::new(embedder) as Arc<dyn Embedder>,
            Err(why) => Arc::new(toolgate_embed::Unavailable::new(format!("openai:{}", e.model), why)),
        }),
    }
}
