//! A thin DevTools-protocol client over Chromium's `--remote-debugging-pipe`: JSON messages
//! ended by a NUL byte, our commands on the browser's fd 3, its answers and events on fd 4.
//!
//! A pipe, not a port: no other local process (and no page, through the proxy) can connect to
//! the browser's debugging endpoint, and no WebSocket code is needed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::error::BrowserError;

/// The largest message read from the browser (a full-page screenshot is the biggest); a larger
/// one is skipped, and the command waiting for it times out.
const MAX_MESSAGE: usize = 96 * 1024 * 1024;

/// Receives the events of one attached target (or of the browser, for `None`).
pub(crate) trait EventSink: Send + Sync {
    /// One event; may answer with a command to send (a paused request to continue or fail).
    fn event(&self, method: &str, params: &Value) -> Option<(String, Value)>;
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>;

/// The connection to one browser process.
pub(crate) struct Cdp {
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    next_id: AtomicU64,
    pending: Arc<Pending>,
    sinks: Arc<Mutex<HashMap<String, Arc<dyn EventSink>>>>,
    /// Cancelled when the browser's end of the pipe closes.
    pub(crate) closed: CancellationToken,
}

impl std::fmt::Debug for Cdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cdp").field("closed", &self.closed.is_cancelled()).finish_non_exhaustive()
    }
}

impl Cdp {
    /// Starts reading `reader` on a task; `browser_sink` gets the events without a session.
    pub(crate) fn new(
        writer: impl AsyncWrite + Send + Unpin + 'static,
        reader: impl AsyncRead + Send + Unpin + 'static,
        browser_sink: Arc<dyn EventSink>,
    ) -> Arc<Cdp> {
        let cdp = Arc::new(Cdp {
            writer: tokio::sync::Mutex::new(Box::new(writer)),
            next_id: AtomicU64::new(1),
            pending: Arc::new(Mutex::new(HashMap::new())),
            sinks: Arc::new(Mutex::new(HashMap::new())),
            closed: CancellationToken::new(),
        });
        let weak = Arc::downgrade(&cdp);
        let (pending, sinks, closed) = (Arc::clone(&cdp.pending), Arc::clone(&cdp.sinks), cdp.closed.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(256 * 1024, reader);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match read_message(&mut reader, &mut buf).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                let Ok(msg) = serde_json::from_slice::<Value>(&buf) else { continue };
                if let Some(id) = msg["id"].as_u64() {
                    let waiter = pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                    if let Some(waiter) = waiter {
                        let result = match msg.get("error") {
                            Some(err) => Err(err["message"].as_str().unwrap_or("unknown error").to_owned()),
                            None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                        };
                        let _ = waiter.send(result);
                    }
                    continue;
                }
                let Some(method) = msg["method"].as_str() else { continue };
                let session = msg["sessionId"].as_str().unwrap_or_default();
                let sink = if session.is_empty() {
                    Some(Arc::clone(&browser_sink))
                } else {
                    sinks.lock().unwrap_or_else(PoisonError::into_inner).get(session).cloned()
                };
                let Some(sink) = sink else { continue };
                if let Some((reply, params)) = sink.event(method, &msg["params"])
                    && let Some(cdp) = weak.upgrade()
                {
                    let session = (!session.is_empty()).then(|| session.to_owned());
                    tokio::spawn(async move {
                        let _ = cdp.send(session.as_deref(), &reply, params, Duration::from_secs(10)).await;
                    });
                }
            }
            closed.cancel();
            // Every command still waiting fails now rather than at its deadline.
            pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
        });
        cdp
    }

    /// Routes the events of `session` to `sink` (until [`Cdp::unroute`]).
    pub(crate) fn route(&self, session: &str, sink: Arc<dyn EventSink>) {
        self.sinks.lock().unwrap_or_else(PoisonError::into_inner).insert(session.to_owned(), sink);
    }

    pub(crate) fn unroute(&self, session: &str) {
        self.sinks.lock().unwrap_or_else(PoisonError::into_inner).remove(session);
    }

    /// Sends one command and waits for its answer, at most `timeout`.
    pub(crate) async fn send(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, BrowserError> {
        if self.closed.is_cancelled() {
            return Err(BrowserError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            msg["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| BrowserError::protocol(method, e.to_string()))?;
        bytes.push(0);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id, tx);
        let written = {
            let mut writer = self.writer.lock().await;
            match writer.write_all(&bytes).await {
                Ok(()) => writer.flush().await,
                Err(e) => Err(e),
            }
        };
        if written.is_err() {
            self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
            return Err(BrowserError::Closed);
        }
        let answer = tokio::select! {
            answer = tokio::time::timeout(timeout, rx) => answer,
            () = self.closed.cancelled() => return Err(BrowserError::Closed),
        };
        match answer {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(message))) => Err(BrowserError::protocol(method, message)),
            Ok(Err(_)) => Err(BrowserError::Closed),
            Err(_) => {
                self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                Err(BrowserError::Timeout {
                    what: format!("the browser's answer to {method}"),
                    secs: timeout.as_secs(),
                })
            }
        }
    }
}

/// Reads one NUL-ended message into `buf`. `Ok(false)`: a message over [`MAX_MESSAGE`] was
/// skipped; `Err`: the pipe closed.
async fn read_message(reader: &mut (impl AsyncBufReadExt + Unpin), buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut skipping = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let (used, done) = match memchr_zero(chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !skipping {
            let body = if done { &chunk[..used - 1] } else { chunk };
            if buf.len() + body.len() > MAX_MESSAGE {
                skipping = true;
                buf.clear();
            } else {
                buf.extend_from_slice(body);
            }
        }
        reader.consume(used);
        if done {
            return Ok(!skipping);
        }
    }
}

fn memchr_zero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == 0)
}
