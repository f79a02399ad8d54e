//! The bound on Streamable HTTP sessions. A client before 2026-07-28 gets a session
//! (`Mcp-Session-Id`) after `initialize` and should end it with `DELETE`; one that leaves
//! without it (killed, a dropped connection, a client that never closes) leaves its session
//! behind, with the task that serves it. So each session ends after
//! [`HttpConfig::session_idle`](crate::HttpConfig::session_idle) without a request or a message
//! for it, and at most [`HttpConfig::max_sessions`](crate::HttpConfig::max_sessions) are kept:
//! a new session beyond that ends the oldest, whose client gets `404` and starts a new one (as
//! the specification asks of a client whose session is gone).
//!
//! A client of a session that closes a call's stream and does not resume it (a `GET` with
//! `Last-Event-ID`, which the stream's priming event invites [`RESUME_RETRY`] later) within
//! [`GONE_GRACE`] is gone: its call is cancelled as its `notifications/cancelled` would cancel
//! it (its process killed, its audit row `cancelled`), instead of running to its end for no one
//! and holding its agent's slot ([`ClientGone`], read by the server's `call_tool`).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// The sessions of one HTTP server, oldest first.
#[derive(Debug)]
pub(crate) struct Sessions {
    manager: Arc<LocalSessionManager>,
    max: usize,
    /// The sessions this server opened, in the order it opened them (ended ones are dropped
    /// from it as new ones come).
    opened: Mutex<VecDeque<SessionId>>,
    /// The sessions whose client resumed a stream lately, and when.
    resumed: Mutex<HashMap<String, Instant>>,
}

/// How long after its client closed a call's stream the call is cancelled, unless the client
/// resumed the session's streams meanwhile.
pub(crate) const GONE_GRACE: Duration = Duration::from_secs(2);

/// How long a client waits before it resumes a stream that broke (the `retry` of each call
/// stream's priming event; rmcp's default is 3 s, longer than [`GONE_GRACE`] allows).
pub(crate) const RESUME_RETRY: Duration = Duration::from_millis(500);

impl Sessions {
    /// Sessions that end after `idle` without activity, at most `max` of them (at least one).
    pub(crate) fn new(idle: Duration, max: usize) -> Sessions {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(idle);
        manager.session_config.sse_retry = Some(RESUME_RETRY);
        Sessions {
            manager: Arc::new(manager),
            max: max.max(1),
            opened: Mutex::new(VecDeque::new()),
            resumed: Mutex::new(HashMap::new()),
        }
    }

    /// The client of session `id` resumes a stream (`GET` with `Last-Event-ID`).
    pub(crate) fn resumed(&self, id: &str) {
        let now = Instant::now();
        let mut resumed = self.resumed.lock().unwrap_or_else(|e| e.into_inner());
        resumed.retain(|_, at| now.duration_since(*at) < GONE_GRACE * 2);
        resumed.insert(id.to_owned(), now);
    }

    fn resumed_since(&self, id: &str, since: Instant) -> bool {
        self.resumed.lock().unwrap_or_else(|e| e.into_inner()).get(id).is_some_and(|at| *at >= since)
    }

    /// The session manager rmcp's service keeps its sessions in.
    pub(crate) fn manager(&self) -> Arc<LocalSessionManager> {
        Arc::clone(&self.manager)
    }

    /// A response opened session `id`: counts it, and ends the oldest sessions beyond the cap.
    pub(crate) async fn opened(&self, id: &str) {
        let evicted: Vec<SessionId> = {
            let live = self.manager.sessions.read().await;
            let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            opened.retain(|s| live.contains_key(s));
            if let Some((id, _)) = live.get_key_value(id) {
                opened.push_back(Arc::clone(id));
            }
            let excess = live.len().saturating_sub(self.max).min(opened.len());
            opened.drain(..excess).collect()
        };
        for id in evicted {
            tracing::info!("MCP HTTP: more than {} sessions open: ending the oldest", self.max);
            if let Err(e) = self.manager.close_session(&id).await {
                tracing::debug!("ending an MCP HTTP session: {e}");
            }
        }
    }
}

/// Cancelled when the client of a session's call has gone: it closed the call's stream before
/// the answer and did not resume within [`GONE_GRACE`]. Put in the request's extensions, which
/// rmcp hands to the call as `http::request::Parts`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientGone(pub(crate) CancellationToken);

/// The [`ClientGone`] of the call `context` serves, if it came over HTTP in a session.
pub(crate) fn client_gone(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Option<CancellationToken> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<ClientGone>().map(|gone| gone.0.clone())
}

/// A call's stream (server-sent events) that tells its [`ClientGone`] when it is dropped
/// before its end: the connection closed under it.
pub(crate) struct Watched {
    inner: crate::http::HttpBody,
    ended: bool,
    departure: Option<(ClientGone, Arc<Sessions>, String)>,
}

impl Watched {
    pub(crate) fn new(
        inner: crate::http::HttpBody,
        gone: ClientGone,
        sessions: Arc<Sessions>,
        session: String,
    ) -> Self {
        Watched { inner, ended: false, departure: Some((gone, sessions, session)) }
    }
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.ended || http_body::Body::is_end_stream(&self.inner) {
            return;
        }
        let Some((gone, sessions, session)) = self.departure.take() else { return };
        let left = Instant::now();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(async move {
                tokio::time::sleep(GONE_GRACE).await;
                if !sessions.resumed_since(&session, left) {
                    tracing::debug!("MCP HTTP: a client left its call without resuming it: cancelling the call");
                    gone.0.cancel();
                }
            })),
            Err(_) => gone.0.cancel(),
        }
    }
}
