//! The legacy HTTP+SSE client transport (protocol 2024-11-05) on rmcp's [`Transport`] trait,
//! which rmcp 3.9.0 does not provide.
//!
//! The protocol: the client opens `GET <url>` with `Accept: text/event-stream`; the server's
//! first event is `event: endpoint`, whose data is the URI (usually relative, with a session id)
//! where the client `POST`s each JSON-RPC message; every server → client message arrives as an
//! `event: message` on the GET stream.
//!
//! [`SseClientTransport::connect`] opens the stream and waits (bounded) for the `endpoint`
//! event; a spawned reader task then turns the stream into messages for
//! [`Transport::receive`]. The task stops when the transport is closed or dropped.
//!
//! Everything the server sends is hostile:
//!
//! - the `endpoint` must resolve to the same scheme, host and port as the SSE URL, so a server
//!   cannot make toolgate POST (with the configured headers) to another host;
//! - one event may hold at most [`SseOptions::max_event_bytes`]; a larger one ends the stream
//!   instead of growing memory;
//! - data that is not a JSON-RPC message is logged and skipped; comments, `id:`/`retry:` lines
//!   and unknown event types are ignored;
//! - server text that reaches an error message is cut short and has its control characters
//!   escaped.
//!
//! There is no resumption (`Last-Event-ID`): when the stream ends, [`Transport::receive`]
//! returns `None` and the bridge's supervisor reconnects with a new session.
//!
//! ```no_run
//! use rmcp::ServiceExt;
//! use toolgate_mcp::bridge::sse::SseClientTransport;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let _ = rustls::crypto::ring::default_provider().install_default(); // reqwest has no default
//! let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
//! let url = url::Url::parse("http://127.0.0.1:3001/sse")?;
//! let transport = SseClientTransport::connect(url, client, http::HeaderMap::new()).await?;
//! let client = ().serve(transport).await?;
//! let tools = client.list_all_tools().await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use url::Url;

/// How long [`SseClientTransport::connect`] waits for the response and the `endpoint` event
/// by default.
pub const DEFAULT_ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest SSE event accepted by default (16 MiB), comments excluded.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// How much of a failed response's body is read, and how many characters of it an error shows.
const EXCERPT_BYTES: usize = 4 * 1024;
const EXCERPT_CHARS: usize = 300;

/// How long a failed response's body may take to arrive before the error is reported without it.
const EXCERPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Messages read ahead of [`Transport::receive`]; when full, the reader stops reading the stream
/// (backpressure instead of an unbounded queue). rmcp drains it promptly, and it is small because
/// each message may be as large as the event limit.
const INBOUND_CAPACITY: usize = 8;

/// Knobs of [`SseClientTransport::connect_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseOptions {
    /// How long to wait for the GET's response and then the `endpoint` event.
    pub endpoint_timeout: Duration,
    /// The largest event accepted, in bytes; a larger one ends the stream.
    pub max_event_bytes: usize,
}

impl Default for SseOptions {
    fn default() -> Self {
        SseOptions { endpoint_timeout: DEFAULT_ENDPOINT_TIMEOUT, max_event_bytes: DEFAULT_MAX_EVENT_BYTES }
    }
}

/// Why the SSE transport could not connect, send, or keep reading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// The GET request failed before a response (connection refused, DNS, TLS, ...).
    #[error("cannot open the SSE stream at {url}: {}; check the URL and that the server is running", chain(source))]
    Connect {
        /// The SSE URL.
        url: Url,
        /// What the HTTP client reported.
        #[source]
        source: reqwest::Error,
    },
    /// The GET response did not arrive in time.
    #[error("the server at {url} did not answer the SSE request within {timeout:?}; check that it is an MCP server")]
    NoResponse {
        /// The SSE URL.
        url: Url,
        /// How long the transport waited.
        timeout: Duration,
    },
    /// The GET answered with a status other than 2xx.
    #[error("the SSE request to {url} failed with HTTP {status}: {body}")]
    Status {
        /// The SSE URL.
        url: Url,
        /// The response's status.
        status: StatusCode,
        /// The start of the response's body, control characters escaped.
        body: String,
    },
    /// The GET answered with something other than an event stream.
    #[error(
        "{url} answered with content type `{content_type}`, not `text/event-stream`: it is not a legacy HTTP+SSE MCP endpoint (for a Streamable HTTP server use the streamable HTTP transport)"
    )]
    ContentType {
        /// The SSE URL.
        url: Url,
        /// The content type received (escaped, cut short), or `none`.
        content_type: String,
    },
    /// The stream stayed open but sent no `endpoint` event in time.
    #[error(
        "the server at {url} sent no `endpoint` event within {timeout:?}; a legacy HTTP+SSE MCP server sends one first (for a Streamable HTTP server use the streamable HTTP transport)"
    )]
    NoEndpoint {
        /// The SSE URL.
        url: Url,
        /// How long the transport waited.
        timeout: Duration,
    },
    /// The `endpoint` event's data is not a URI.
    #[error("the server at {url} sent an `endpoint` event that is not a URI (`{endpoint}`): {source}")]
    InvalidEndpoint {
        /// The SSE URL.
        url: Url,
        /// The event's data (escaped, cut short).
        endpoint: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// The `endpoint` points at another origin: refused, so a server cannot redirect messages
    /// (and the configured headers) to another host.
    #[error(
        "the server at {url} asked for messages to be posted to {endpoint}, which is not the same scheme, host and port; refused (a server may only receive messages on its own origin)"
    )]
    CrossOriginEndpoint {
        /// The SSE URL.
        url: Url,
        /// The resolved endpoint (cut short).
        endpoint: String,
    },
    /// The stream ended (the server closed it).
    #[error("the server at {url} closed the SSE stream")]
    StreamClosed {
        /// The SSE URL.
        url: Url,
    },
    /// Reading the stream failed.
    #[error("reading the SSE stream from {url} failed: {}", chain(source))]
    Stream {
        /// The SSE URL.
        url: Url,
        /// What the HTTP client reported.
        #[source]
        source: reqwest::Error,
    },
    /// The server sent an event larger than the limit.
    #[error("the server at {url} sent an SSE event larger than {max_bytes} bytes; the stream was dropped")]
    EventTooLarge {
        /// The SSE URL.
        url: Url,
        /// The limit ([`SseOptions::max_event_bytes`]).
        max_bytes: usize,
    },
    /// A message could not be encoded as JSON.
    #[error("cannot encode the message as JSON: {source}")]
    Encode {
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The POST of a message failed before a response.
    #[error("cannot post the message to {endpoint}: {}", chain(source))]
    Post {
        /// The message endpoint.
        endpoint: Url,
        /// What the HTTP client reported.
        #[source]
        source: reqwest::Error,
    },
    /// The POST of a message answered with a status other than 2xx.
    #[error("posting the message to {endpoint} failed with HTTP {status}: {body}")]
    PostStatus {
        /// The message endpoint.
        endpoint: Url,
        /// The response's status.
        status: StatusCode,
        /// The start of the response's body, control characters escaped.
        body: String,
    },
    /// The transport was closed; reconnect to send again.
    #[error("the SSE transport is closed; reconnect to the server")]
    Closed,
}

/// An MCP client transport over legacy HTTP+SSE: messages go out as POSTs to the server's
/// `endpoint`, and come in on the GET event stream, read by a task this value owns.
pub struct SseClientTransport {
    /// What `send` needs, shared with its `'static` futures.
    poster: Arc<Poster>,
    /// Messages from the reader task; it ends (and this yields `None`) when the stream does.
    inbound: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    /// The task reading the GET stream, aborted on close and on drop.
    reader: AbortOnDrop,
    /// Set by `close`: `receive` returns `None` and `send` fails from then on.
    closed: bool,
}

impl fmt::Debug for SseClientTransport {
    // Not derived: the headers may hold credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("endpoint", &self.poster.endpoint.as_str())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// The HTTP client, the validated endpoint and the headers of every POST.
struct Poster {
    client: reqwest::Client,
    endpoint: Url,
    /// The configured headers plus `Content-Type: application/json`.
    headers: HeaderMap,
}

/// Aborts the reader task when the transport goes away, so no task outlives it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SseClientTransport {
    /// Opens the SSE stream at `url` (sending `headers` with it and with every POST) and waits
    /// up to [`DEFAULT_ENDPOINT_TIMEOUT`] for the `endpoint` event.
    ///
    /// The endpoint is checked to be on the SSE URL's origin, but HTTP redirects are the
    /// `client`'s business: build it with [`reqwest::redirect::Policy::none()`] (or a
    /// same-origin policy) so a redirect cannot carry the messages and `headers` elsewhere.
    /// Timeouts on each POST are the `client`'s too.
    ///
    /// # Errors
    ///
    /// An [`SseError`] saying what failed: the request, its status or content type, a missing,
    /// invalid or cross-origin `endpoint`, or the stream ending first.
    pub async fn connect(url: Url, client: reqwest::Client, headers: HeaderMap) -> Result<Self, SseError> {
        Self::connect_with(url, client, headers, SseOptions::default()).await
    }

    /// [`connect`](Self::connect) with explicit [`SseOptions`].
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub async fn connect_with(
        url: Url,
        client: reqwest::Client,
        headers: HeaderMap,
        options: SseOptions,
    ) -> Result<Self, SseError> {
        let deadline = tokio::time::Instant::now() + options.endpoint_timeout;
        // `insert`, not reqwest's `header()`, which would add a second `Accept` to the caller's.
        let mut get_headers = headers.clone();
        get_headers.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        get_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let request = client.get(url.clone()).headers(get_headers);
        let response = match tokio::time::timeout_at(deadline, request.send()).await {
            Err(_) => return Err(SseError::NoResponse { url, timeout: options.endpoint_timeout }),
            Ok(Err(source)) => return Err(SseError::Connect { url, source }),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return Err(SseError::Status { url, status, body: body_excerpt(response).await });
        }
        let content_type = response.headers().get(header::CONTENT_TYPE);
        if !content_type.is_some_and(is_event_stream) {
            let content_type =
                content_type.map_or_else(|| "none".to_owned(), |v| excerpt(&String::from_utf8_lossy(v.as_bytes())));
            return Err(SseError::ContentType { url, content_type });
        }

        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let (inbound_tx, inbound) = mpsc::channel(INBOUND_CAPACITY);
        let reader = AbortOnDrop(tokio::spawn(read_stream(
            response.bytes_stream(),
            url.clone(),
            options.max_event_bytes,
            endpoint_tx,
            inbound_tx,
        )));
        let endpoint = match tokio::time::timeout_at(deadline, endpoint_rx).await {
            Err(_) => return Err(SseError::NoEndpoint { url, timeout: options.endpoint_timeout }),
            // The reader always answers before it ends; a dropped sender means it panicked.
            Ok(Err(_)) => return Err(SseError::StreamClosed { url }),
            Ok(Ok(Err(error))) => return Err(error),
            Ok(Ok(Ok(data))) => resolve_endpoint(&url, &data)?,
        };
        tracing::debug!(%url, %endpoint, "legacy SSE transport connected");
        let mut headers = headers;
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(SseClientTransport {
            poster: Arc::new(Poster { client, endpoint, headers }),
            inbound,
            reader,
            closed: false,
        })
    }

    /// Where messages are posted: the server's `endpoint`, resolved against the SSE URL.
    pub fn endpoint(&self) -> &Url {
        &self.poster.endpoint
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let poster = Arc::clone(&self.poster);
        let closed = self.closed;
        let body = serde_json::to_vec(&item);
        async move {
            if closed {
                return Err(SseError::Closed);
            }
            let body = body.map_err(|source| SseError::Encode { source })?;
            poster.post(body).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        if self.closed {
            return None;
        }
        self.inbound.recv().await
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.closed = true;
        self.reader.0.abort();
        self.inbound.close();
        Ok(())
    }
}

impl Poster {
    /// POSTs one JSON-RPC message; any 2xx is success (the answer comes on the stream).
    async fn post(&self, body: Vec<u8>) -> Result<(), SseError> {
        let response = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|source| SseError::Post { endpoint: self.endpoint.clone(), source })?;
        let status = response.status();
        if !status.is_success() {
            return Err(SseError::PostStatus {
                endpoint: self.endpoint.clone(),
                status,
                body: body_excerpt(response).await,
            });
        }
        // Read the short acknowledgement so the connection can be reused.
        let _ = read_prefix(response).await;
        Ok(())
    }
}

/// The reader task: parses the stream, hands the first `endpoint` to `connect` and every
/// message to `inbound`, and ends (closing `inbound`) when the stream ends or fails.
async fn read_stream(
    stream: impl Stream<Item = reqwest::Result<Bytes>> + Send,
    url: Url,
    max_event_bytes: usize,
    endpoint_tx: oneshot::Sender<Result<String, SseError>>,
    inbound: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) {
    let mut stream = std::pin::pin!(stream);
    let mut endpoint_tx = Some(endpoint_tx);
    let mut parser = EventParser::new(max_event_bytes);
    let mut events = Vec::new();
    let end = loop {
        let chunk = match stream.next().await {
            None => break SseError::StreamClosed { url },
            Some(Err(source)) => break SseError::Stream { url, source },
            Some(Ok(chunk)) => chunk,
        };
        let fed = parser.feed(&chunk, &mut events);
        for event in events.drain(..) {
            match event.kind.as_str() {
                "endpoint" => match endpoint_tx.take() {
                    Some(tx) => {
                        let _ = tx.send(Ok(event.data));
                    }
                    None => tracing::debug!(%url, "ignoring a second `endpoint` event"),
                },
                "message" => match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                    Ok(message) => {
                        if inbound.send(message).await.is_err() {
                            return; // the transport is gone
                        }
                    }
                    Err(error) => tracing::warn!(
                        %url,
                        bytes = event.data.len(),
                        %error,
                        "skipping an SSE message that is not a JSON-RPC message"
                    ),
                },
                other => tracing::debug!(%url, event = %excerpt(other), "ignoring an SSE event of unknown type"),
            }
        }
        if fed.is_err() {
            break SseError::EventTooLarge { url, max_bytes: max_event_bytes };
        }
    };
    match endpoint_tx {
        Some(tx) => {
            let _ = tx.send(Err(end));
        }
        None => tracing::info!(error = %end, "legacy SSE stream ended"),
    }
}

/// Resolves the `endpoint` event's data against the SSE URL, refusing another origin.
fn resolve_endpoint(url: &Url, data: &str) -> Result<Url, SseError> {
    let mut endpoint = url.join(data.trim()).map_err(|source| SseError::InvalidEndpoint {
        url: url.clone(),
        endpoint: excerpt(data),
        source,
    })?;
    // `origin()` is scheme + host + port (default ports filled in); opaque origins never match.
    if endpoint.origin() != url.origin() || !matches!(endpoint.scheme(), "http" | "https") {
        return Err(SseError::CrossOriginEndpoint { url: url.clone(), endpoint: excerpt(endpoint.as_str()) });
    }
    endpoint.set_fragment(None);
    Ok(endpoint)
}

/// Whether a `Content-Type` is `text/event-stream` (parameters allowed).
fn is_event_stream(value: &HeaderValue) -> bool {
    let value = String::from_utf8_lossy(value.as_bytes());
    value.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Reads at most [`EXCERPT_BYTES`] of a body, waiting at most [`EXCERPT_TIMEOUT`].
async fn read_prefix(response: reqwest::Response) -> Vec<u8> {
    let mut stream = std::pin::pin!(response.bytes_stream());
    let mut body = Vec::new();
    let read = async {
        while body.len() < EXCERPT_BYTES {
            match stream.next().await {
                Some(Ok(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(EXCERPT_BYTES - body.len())]),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(EXCERPT_TIMEOUT, read).await;
    body
}

/// The start of a failed response's body, safe to show.
async fn body_excerpt(response: reqwest::Response) -> String {
    let body = read_prefix(response).await;
    let text = excerpt(String::from_utf8_lossy(&body).trim());
    if text.is_empty() { "(empty body)".to_owned() } else { text }
}

/// Server text made safe for an error message or a log line: at most [`EXCERPT_CHARS`]
/// characters, control and bidirectional-override characters escaped.
fn excerpt(text: &str) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == EXCERPT_CHARS {
            out.push('…');
            break;
        }
        let invisible =
            matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if c.is_control() || invisible {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// An error and its sources, `: `-separated (reqwest puts the useful part in the sources).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One dispatched SSE event.
#[derive(Debug, PartialEq, Eq)]
struct Event {
    /// The event type (`message` when the server named none).
    kind: String,
    /// The data lines joined with `\n`.
    data: String,
}

/// The event being built is larger than the limit.
#[derive(Debug, PartialEq, Eq)]
struct TooLarge;

/// An SSE parser (the WHATWG "event stream interpretation") that holds at most `max` bytes of
/// one event: the unfinished line plus the event's type and data so far.
#[derive(Debug)]
struct EventParser {
    max: usize,
    /// The current line, until its CR, LF or CRLF arrives.
    line: Vec<u8>,
    /// The last chunk ended with CR: a LF starting the next one belongs to it.
    skip_lf: bool,
    /// No line has been completed yet (a leading byte-order mark is dropped from the first).
    first_line: bool,
    kind: String,
    data: String,
}

impl EventParser {
    fn new(max: usize) -> Self {
        EventParser {
            max,
            line: Vec::new(),
            skip_lf: false,
            first_line: true,
            kind: String::new(),
            data: String::new(),
        }
    }

    /// Parses a chunk, pushing every event it completes onto `out`.
    fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if self.skip_lf && !chunk.is_empty() {
            self.skip_lf = false;
            chunk = chunk.strip_prefix(b"\n").unwrap_or(chunk);
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.extend_line(&chunk[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out)?;
            self.line = line;
            self.line.clear();
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.skip_lf = true,
                    Some(_) => {}
                }
            }
        }
        self.extend_line(chunk)
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + bytes.len() + self.kind.len() + self.data.len() > self.max {
            return Err(TooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, mut line: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // a comment: keep-alives
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => self.kind = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
            }
            // `id` and `retry` serve resumption, which this transport does not do (the bridge
            // reconnects with a new session); unknown fields are ignored, as the spec says.
            _ => {}
        }
        if self.kind.len() + self.data.len() > self.max { Err(TooLarge) } else { Ok(()) }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let kind = std::mem::take(&mut self.kind);
        let mut data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return; // no data line: nothing to dispatch
        }
        data.pop(); // the `\n` after the last data line
        out.push(Event { kind: if kind.is_empty() { "message".to_owned() } else { kind }, data });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(max: usize, chunks: &[&[u8]]) -> (Vec<Event>, Result<(), TooLarge>) {
        let mut parser = EventParser::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            if let Err(e) = parser.feed(chunk, &mut out) {
                return (out, Err(e));
            }
        }
        (out, Ok(()))
    }

    fn ev(kind: &str, data: &str) -> Event {
        Event { kind: kind.to_owned(), data: data.to_owned() }
    }

    #[test]
    fn events_lines_and_fields() {
        let input = b"\xEF\xBB\xBFevent: endpoint\ndata: /message?sessionId=1\n\n: keep-alive\n\nid: 7\nretry: 1000\ndata: {\"a\":\ndata:1}\nfoo: bar\nnocolon\n\nevent: only-type\n\ndata\n\n";
        let (events, end) = parse_chunks(1024, &[input]);
        assert_eq!(end, Ok(()));
        assert_eq!(
            events,
            vec![ev("endpoint", "/message?sessionId=1"), ev("message", "{\"a\":\n1}"), ev("message", "")]
        );
    }

    #[test]
    fn every_split_and_line_ending_gives_the_same_events() {
        for ending in ["\n", "\r", "\r\n"] {
            let text =
                format!("event: message{ending}data: héllo{ending}data:  two{ending}{ending}data: x{ending}{ending}");
            let bytes = text.as_bytes();
            for split in 0..=bytes.len() {
                let (events, end) = parse_chunks(1024, &[&bytes[..split], &bytes[split..]]);
                assert_eq!(end, Ok(()), "{ending:?} split at {split}");
                assert_eq!(
                    events,
                    vec![ev("message", "héllo\n two"), ev("message", "x")],
                    "{ending:?} split at {split}"
                );
            }
        }
    }

    #[test]
    fn an_event_over_the_limit_fails_whether_in_one_line_or_many() {
        let long_line = format!("data: {}\n\n", "x".repeat(100));
        assert_eq!(parse_chunks(64, &[long_line.as_bytes()]).1, Err(TooLarge));
        let many = "data: 0123456789\n".repeat(10);
        assert_eq!(parse_chunks(64, &[many.as_bytes()]).1, Err(TooLarge));
        // A line with no end yet counts too: memory is bounded while it arrives.
        let (_, end) = parse_chunks(64, &[b"data: ", &[b'x'; 40], &[b'x'; 40]]);
        assert_eq!(end, Err(TooLarge));
        // Limits are per event: many small events pass.
        let small = "data: 0123456789\n\n".repeat(100);
        let (events, end) = parse_chunks(64, &[small.as_bytes()]);
        assert_eq!((events.len(), end), (100, Ok(())));
    }

    #[test]
    fn endpoints_must_stay_on_the_sse_origin() {
        let url = Url::parse("http://127.0.0.1:3001/sse?x=1").unwrap();
        let ok = |data: &str| resolve_endpoint(&url, data).map(|u| u.to_string()).unwrap();
        assert_eq!(ok("/message?sessionId=a"), "http://127.0.0.1:3001/message?sessionId=a");
        assert_eq!(ok("message?sessionId=a#frag"), "http://127.0.0.1:3001/message?sessionId=a");
        assert_eq!(ok(" http://127.0.0.1:3001/m \n"), "http://127.0.0.1:3001/m");
        for hostile in [
            "http://evil.example/m",
            "//evil.example/m",
            "http://127.0.0.1:3002/m",
            "https://127.0.0.1:3001/m",
            "http://localhost:3001/m",
            "data:text/plain,hi",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(resolve_endpoint(&url, hostile), Err(SseError::CrossOriginEndpoint { .. })),
                "{hostile} was accepted"
            );
        }
        let default_port = Url::parse("https://example.com/sse").unwrap();
        assert!(resolve_endpoint(&default_port, "https://example.com:443/m").is_ok());
        assert!(matches!(resolve_endpoint(&url, "http://[::1"), Err(SseError::InvalidEndpoint { .. })));
    }

    #[test]
    fn excerpts_escape_and_cut() {
        assert_eq!(excerpt("a\u{1b}[31mb\u{202e}c"), "a\\u{1b}[31mb\\u{202e}c");
        let long = excerpt(&"y".repeat(1000));
        assert_eq!(long.chars().count(), EXCERPT_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}
