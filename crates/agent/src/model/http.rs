//! One HTTP exchange with a model endpoint: timeouts, retries with backoff on 429, 5xx and
//! connection errors (honouring `Retry-After`), and error text a person can act on.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::AgentError;

/// Longest error body quoted in an error.
const ERROR_EXCERPT: usize = 500;
/// Longest reply body accepted (a model reply is a few KB; this bounds a hostile server).
pub(crate) const MAX_BODY: usize = 32 << 20;

/// A reqwest client for model endpoints: no proxy from the environment, no redirects (an API
/// that redirects a POST is misconfigured), rustls with ring.
pub(crate) fn client(provider: &str, timeout: Duration) -> Result<reqwest::Client, AgentError> {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10).min(timeout))
        .timeout(timeout)
        .build()
        .map_err(|e| AgentError::Provider { provider: provider.to_owned(), message: format!("HTTP client: {e}") })
}

/// POSTs `body` to `url` and returns the response once its status is a success, retrying up to
/// `retries` times on 429, 5xx and connection errors.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    body: &serde_json::Value,
    retries: u32,
) -> Result<reqwest::Response, AgentError> {
    let body = serde_json::to_vec(body).map_err(|e| AgentError::Invalid(format!("request body: {e}")))?;
    let mut attempt = 0u32;
    loop {
        let sent = client.post(url).headers(headers.clone()).body(body.clone()).send().await;
        let (message, status, wait) = match sent {
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status();
                let wait = retry_after(resp.headers());
                let text = read_capped(resp, ERROR_EXCERPT).await;
                let retryable = status.as_u16() == 429 || status.is_server_error();
                let message = format!("HTTP {status}: {text}");
                if !retryable {
                    return Err(AgentError::Model { endpoint: url.to_owned(), message, status: Some(status.as_u16()) });
                }
                (message, Some(status.as_u16()), wait)
            }
            Err(e) if e.is_timeout() => {
                return Err(AgentError::Model {
                    endpoint: url.to_owned(),
                    message: "no answer before the timeout (providers.NAME.timeout_secs)".to_owned(),
                    status: None,
                });
            }
            Err(e) => (format!("{e}"), None, None),
        };
        if attempt >= retries {
            let message = format!("{message} (after {} attempts)", attempt + 1);
            return Err(AgentError::Model { endpoint: url.to_owned(), message, status });
        }
        let backoff = Duration::from_millis(250u64 << attempt.min(6)).min(Duration::from_secs(8));
        let wait = wait.unwrap_or(backoff).min(Duration::from_secs(30));
        tracing::debug!(url, attempt, ?wait, "model request failed, retrying: {message}");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}

/// Up to `cap` bytes of the body as text (lossy), for error messages.
pub(crate) async fn read_capped(mut resp: reqwest::Response, cap: usize) -> String {
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        out.extend_from_slice(&chunk);
        if out.len() >= cap {
            out.truncate(cap);
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The whole body, refusing more than [`MAX_BODY`] bytes.
pub(crate) async fn read_body(mut resp: reqwest::Response, url: &str) -> Result<Vec<u8>, AgentError> {
    let mut out = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                out.extend_from_slice(&chunk);
                if out.len() > MAX_BODY {
                    return Err(AgentError::Model {
                        endpoint: url.to_owned(),
                        message: format!("the reply is larger than {MAX_BODY} bytes"),
                        status: None,
                    });
                }
            }
            Ok(None) => return Ok(out),
            Err(e) => {
                let message = if e.is_timeout() {
                    "the reply did not finish before the timeout".to_owned()
                } else {
                    e.to_string()
                };
                return Err(AgentError::Model { endpoint: url.to_owned(), message, status: None });
            }
        }
    }
}

/// Splits a server-sent-event stream into its `data:` payloads as bytes arrive.
#[derive(Debug, Default)]
pub(crate) struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// Feeds bytes; returns the `data:` payloads of every complete line.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(data) = line.strip_prefix("data:") {
                out.push(data.trim_start().to_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_lines_split_across_chunks() {
        let mut sse = SseLines::default();
        assert!(sse.feed(b"event: x\ndata: {\"a\"").is_empty());
        assert_eq!(sse.feed(b":1}\r\n\ndata: [DONE]\n"), vec!["{\"a\":1}".to_owned(), "[DONE]".to_owned()]);
    }
}
