//! `[memory]`: the memory tools and their index.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Configuration of the `memory` tool group (the `[memory]` table of `toolgate.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Register the memory tools (default true).
    pub enabled: bool,
    /// Where notes live: `local` (default; Markdown files in the workspace) or `managed` (the
    /// state database, per user and agent, with the context files routed there too).
    pub mode: MemoryMode,
    /// Largest note indexed or written, in bytes (default 1 MiB).
    pub max_note_bytes: u64,
    /// How often a search compares the notes on disk with the index, in milliseconds (default
    /// 2000; 0 = before every search). Writes through toolgate are indexed at once.
    pub rescan_interval_ms: u64,
    /// How long a search waits for its query's vector from the local model before it answers
    /// by words alone, in milliseconds (default 25; 0 = wait for it). The vector is cached
    /// either way, so the same query asked again is searched by meaning too.
    pub query_budget_ms: u64,
    /// How notes are embedded for search by meaning.
    pub embeddings: EmbeddingsConfig,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: true,
            mode: MemoryMode::Local,
            max_note_bytes: 1 << 20,
            rescan_interval_ms: 2000,
            query_budget_ms: 25,
            embeddings: EmbeddingsConfig::default(),
        }
    }
}

/// `[memory] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryMode {
    /// One user: `MEMORY.md` and `memory/**` are files in the workspace (the default).
    #[default]
    Local,
    /// Many users: notes and context files live in the store per (user, agent); the file tools'
    /// `read`/`write`/`edit` of those paths are routed there (`docs/memory.md`).
    Managed,
}

/// Which embedder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingsProvider {
    /// A model installed with `toolgate models install NAME`, run in process (the default).
    #[default]
    Local,
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    Openai,
    /// No vectors: full-text search only.
    None,
}

/// `[memory.embeddings]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// `local` (default), `openai` or `none`.
    pub provider: EmbeddingsProvider,
    /// The model: for `local`, an installed model's name (default `all-minilm-l6-v2`); for
    /// `openai`, the model name sent to the endpoint.
    pub model: String,
    /// Where local models are installed (default: `$XDG_CACHE_HOME/toolgate/models`, else
    /// `~/.cache/toolgate/models`; `TOOLGATE_MODELS_DIR` overrides).
    pub models_dir: Option<PathBuf>,
    /// For `openai`: the endpoint's base URL (`https://api.openai.com/v1`); `/embeddings` is
    /// appended.
    pub url: String,
    /// For `openai`: the environment variable holding the API key (none: no key sent).
    pub api_key_env: Option<String>,
    /// For `openai`: the vector length the model returns (checked on every answer).
    pub dims: Option<usize>,
    /// For `openai`: texts per request (default 64).
    pub batch_size: usize,
    /// For `openai`: request timeout in seconds (default 30).
    pub timeout_secs: u64,
}

impl Default for EmbeddingsConfig {
    fn default() -> Self {
        EmbeddingsConfig {
            provider: EmbeddingsProvider::Local,
            model: String::new(),
            models_dir: None,
            url: "https://api.openai.com/v1".into(),
            api_key_env: None,
            dims: None,
            batch_size: 64,
            timeout_secs: 30,
        }
    }
}
