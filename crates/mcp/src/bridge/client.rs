//! The MCP client side of one bridged connection: what toolgate says about itself in the
//! handshake, and what it does with the server's notifications.

use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion};
#[allow(deprecated, reason = "servers before 2026-07-28 still send log notifications")]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::NotificationContext;

use super::link::ServerLink;
use super::mapping::clean_text;

/// Longest log message from a server that reaches toolgate's log.
const MAX_LOG_CHARS: usize = 1000;

/// Handles one connection's server-to-client traffic for a [`ServerLink`].
///
/// toolgate declares no client capabilities: a bridged server gets no sampling, roots or
/// elicitation (its requests for them are refused), so it cannot reach the model or the user
/// around the gate.
#[derive(Debug, Clone)]
pub(crate) struct BridgeClient {
    link: Arc<ServerLink>,
}

impl BridgeClient {
    pub(crate) fn new(link: Arc<ServerLink>) -> Self {
        BridgeClient { link }
    }
}

impl ClientHandler for BridgeClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        info.title = Some("toolgate MCP bridge".to_owned());
        // The newest version with the `initialize` handshake: a session with `ping` for
        // health checks and unsolicited `tools/list_changed` notifications.
        ClientConfig::new(ClientCapabilities::default(), info)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.link.progress(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.link.list_changed.notify_one();
    }

    #[allow(deprecated, reason = "servers before 2026-07-28 still send log notifications")]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let text = match &params.data {
            serde_json::Value::String(s) => clean_text(s, MAX_LOG_CHARS),
            other => clean_text(&other.to_string(), MAX_LOG_CHARS),
        };
        let server = self.link.name.as_str();
        match params.level {
            LoggingLevel::Debug | LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::debug!(server, "MCP server log: {text}");
            }
            _ => tracing::info!(server, level = ?params.level, "MCP server log: {text}"),
        }
    }
}
