//! Wiring the memory tools: the store for this workspace, its embedder, and the interceptor
//! that re-indexes notes the file tools write.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toolgate_store::memory::{Embedder, LocalMemory, MemoryIndex, MemoryStore};
use toolgate_tools::fs::WriteObserver;
use toolgate_tools::memory::{EmbeddingsProvider, MemoryConfig, MemoryInterceptor};

use crate::GateError;

/// The memory store for `workspace` (local mode), or `None` when `[memory] enabled = false`.
/// The index lives in `state_db` (in memory when the gate keeps no state on disk).
pub(crate) fn open(
    config: &MemoryConfig,
    workspace: &Path,
    state_db: Option<&Path>,
) -> Result<Option<Arc<dyn MemoryStore>>, GateError> {
    if !config.enabled {
        return Ok(None);
    }
    let index = MemoryIndex::open(state_db).map_err(|e| GateError::Memory(e.to_string()))?;
    let local = LocalMemory::new(workspace, index, embedder(config))
        .max_note_bytes(config.max_note_bytes)
        .rescan_interval(Duration::from_millis(config.rescan_interval_ms));
    Ok(Some(Arc::new(local)))
}

/// The embedder `[memory.embeddings]` asks for.
pub fn embedder(config: &MemoryConfig) -> Option<Arc<dyn Embedder>> {
    let e = &config.embeddings;
    match e.provider {
        EmbeddingsProvider::None => None,
        EmbeddingsProvider::Local => {
            let name = if e.model.is_empty() { toolgate_embed::DEFAULT_MODEL } else { e.model.as_str() };
            let dir = e.models_dir.clone().or_else(toolgate_embed::default_models_dir).unwrap_or_default();
            Some(match toolgate_embed::LazyModel::new(dir, name) {
                Ok(m) => Arc::new(m) as Arc<dyn Embedder>,
                Err(err) => Arc::new(toolgate_embed::Unavailable::new(format!("local:{name}"), err.to_string())),
            })
        }
        EmbeddingsProvider::Openai => Some(match crate::embeddings::OpenAiEmbedder::new(e) {
            Ok(embedder) => Arc::new(embedder) as Arc<dyn Embedder>,
            Err(why) => Arc::new(toolgate_embed::Unavailable::new(format!("openai:{}", e.model), why)),
        }),
    }
}

/// The file tools' observer for `memory`.
pub(crate) fn interceptor(memory: &Option<Arc<dyn MemoryStore>>) -> Option<Arc<dyn WriteObserver>> {
    memory.as_ref().map(|m| Arc::new(MemoryInterceptor::new(m.clone())) as Arc<dyn WriteObserver>)
}
