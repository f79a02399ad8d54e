//! The bound on Streamable HTTP sessions. A client before 2026-07-28 gets a session
//! (`Mcp-Session-Id`) after `initialize` and should end it with `DELETE`; one that leaves
//! without it (killed, a dropped connection, a client that never closes) leaves its session
//! behind, with the task that serves it. So each session ends after
//! [`HttpConfig::session_idle`](crate::HttpConfig::session_idle) without a request or a message
//! for it, and at most [`HttpConfig::max_sessions`](crate::HttpConfig::max_sessions) are kept:
//! a new session beyond that ends the oldest, whose client gets `404` and starts a new one (as
//! the specification asks of a client whose session is gone).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

impl Sessions {
    /// Sessions that end after `idle` without activity, at most `max` of them (at least one).
    pub(crate) fn new(idle: Duration, max: usize) -> Sessions {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(idle);
        Sessions { manager: Arc::new(manager), max: max.max(1), opened: Mutex::new(VecDeque::new()) }
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
