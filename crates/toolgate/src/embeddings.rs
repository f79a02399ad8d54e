//! `[memory.embeddings] provider = "openai"`: any OpenAI-compatible `/v1/embeddings` endpoint
//! (OpenAI, llama.cpp's server, vLLM, Ollama, LM Studio), batched, with the answer checked.
//!
//! The endpoint is the user's own configuration, not a tool call's target, so it is reached like
//! the agent runtime's model endpoints (a plain client: no proxy from the environment, no
//! redirects), and may be on loopback. The key comes from the environment variable the config
//! names, never from the config text.
//!
//! [`Embedder::embed`] is synchronous (the memory index calls it from blocking threads): the
//! embedder keeps a one-worker Tokio runtime and an HTTP client of its own, both made on the
//! first call (so a search keeps its connection and does not load the root certificates again),
//! and each call drives its requests from a short-lived scoped thread, so it works from any
//! thread, inside a runtime or not.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_store::memory::{EmbedError, Embedder};
use toolgate_tools::memory::EmbeddingsConfig;

/// Longest answer accepted (a batch of 64 vectors of 3,072 floats is about 4 MB of JSON).
const MAX_ANSWER: usize = 64 << 20;

/// An OpenAI-compatible embeddings endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    id: String,
    endpoint: String,
    model: String,
    key: Option<String>,
    dims: usize,
    batch: usize,
    timeout: Duration,
    http: OnceLock<Result<Http, String>>,
}

/// The embedder's runtime and the client built on it.
#[derive(Debug)]
struct Http {
    runtime: Option<tokio::runtime::Runtime>,
    client: reqwest::Client,
}

impl Drop for Http {
    fn drop(&mut self) {
        // The embedder may be dropped inside an async context, where a blocking shutdown panics.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl OpenAiEmbedder {
    /// The embedder `config` describes, or why it cannot be made (a missing `model` or `dims`,
    /// an unset key variable).
    pub fn new(config: &EmbeddingsConfig) -> Result<OpenAiEmbedder, String> {
        if config.model.is_empty() {
            return Err("set [memory.embeddings] model (e.g. \"text-embedding-3-small\")".into());
        }
        let dims = config.dims.filter(|d| *d > 0).ok_or(
            "set [memory.embeddings] dims to the model's vector length (e.g. 1536 for text-embedding-3-small)",
        )?;
        let base = config.url.trim_end_matches('/');
        let parsed = url::Url::parse(base).map_err(|e| format!("[memory.embeddings] url `{base}`: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || !parsed.username().is_empty() || parsed.password().is_some()
        {
            return Err(format!("[memory.embeddings] url `{base}` must be http(s) without a user name or password"));
        }
        let key = match &config.api_key_env {
            None => None,
            Some(var) => Some(std::env::var(var).map_err(|_| {
                format!("[memory.embeddings] api_key_env names `{var}`, which is not set in the environment")
            })?),
        };
        Ok(OpenAiEmbedder {
            id: format!("openai:{base}#{}", config.model),
            endpoint: format!("{base}/embeddings"),
            model: config.model.clone(),
            key,
            dims,
            batch: config.batch_size.clamp(1, 2048),
            timeout: Duration::from_secs(config.timeout_secs.clamp(1, 600)),
            http: OnceLock::new(),
        })
    }

    fn http(&self) -> Result<&Http, EmbedError> {
        let made = self.http.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("toolgate-embeddings")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the embeddings client: {e}"))?;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10).min(self.timeout))
                .timeout(self.timeout)
                .build()
                .map_err(|e| format!("embeddings client: {e}"))?;
            Ok(Http { runtime: Some(runtime), client })
        });
        made.as_ref().map_err(|e| EmbedError(e.clone()))
    }

    async fn request(&self, client: &reqwest::Client, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let fail = |what: String| EmbedError(format!("embeddings endpoint {}: {what}", self.endpoint));
        let body = json!({"model": self.model, "input": texts}).to_string();
        let mut req = client.post(&self.endpoint).header("content-type", "application/json").body(body);
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| fail(e.without_url().to_string()))?;
        let status = resp.status();
        let body = read_capped(resp).await.map_err(fail)?;
        if !status.is_success() {
            let excerpt: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(fail(format!("HTTP {status}: {excerpt}")));
        }
        let answer: Value = serde_json::from_slice(&body).map_err(|e| fail(format!("the answer is not JSON: {e}")))?;
        self.vectors(&answer, texts.len()).map_err(fail)
    }

    /// The answer's vectors in input order, each checked for length and finiteness.
    fn vectors(&self, answer: &Value, count: usize) -> Result<Vec<Vec<f32>>, String> {
        let data = answer.get("data").and_then(Value::as_array).ok_or("the answer has no `data` array")?;
        if data.len() != count {
            return Err(format!("asked for {count} vectors, got {}", data.len()));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; count];
        for (position, item) in data.iter().enumerate() {
            let index = item.get("index").and_then(Value::as_u64).map_or(position, |i| i as usize);
            let slot = out.get_mut(index).ok_or(format!("vector index {index} is out of range"))?;
            let numbers = item.get("embedding").and_then(Value::as_array).ok_or("a `data` item has no `embedding`")?;
            let vector: Vec<f32> = numbers.iter().filter_map(Value::as_f64).map(|x| x as f32).collect();
            if vector.len() != self.dims || numbers.len() != self.dims {
                return Err(format!(
                    "a vector has {} numbers but [memory.embeddings] dims is {}",
                    numbers.len(),
                    self.dims
                ));
            }
            if vector.iter().any(|x| !x.is_finite()) {
                return Err("a vector holds a number that is not finite".into());
            }
            *slot = Some(vector);
        }
        out.into_iter().map(|v| v.ok_or_else(|| "two vectors have the same index".to_owned())).collect()
    }
}

async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.without_url().to_string())? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let http = self.http()?;
        let Some(runtime) = &http.runtime else { return Err(EmbedError("the embeddings client is stopped".into())) };
        // A scoped thread: `block_on` must not run on a thread that is driving a runtime.
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    runtime.block_on(async {
                        let mut out = Vec::with_capacity(texts.len());
                        for batch in texts.chunks(self.batch) {
                            out.extend(self.request(&http.client, batch).await?);
                        }
                        Ok(out)
                    })
                })
                .join()
                .unwrap_or_else(|_| Err(EmbedError("the embeddings client panicked".into())))
        })
    }
}
