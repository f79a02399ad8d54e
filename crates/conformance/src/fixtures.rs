//! Fixtures for the official MCP conformance suite (`@modelcontextprotocol/conformance`): the
//! tools, resources, prompts, completions and logging its server scenarios call by name
//! (`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...).
//!
//! [`Fixtures`] is a [`toolgate_mcp::ExtraFeatures`]: `toolgate-conformance serve` gives it to
//! the MCP server beside a gate's tools. The fixtures bypass the call pipeline (they touch
//! nothing but the client). `toolgate serve` has none of this: its server declares and answers
//! tools only.
//!
//! - `tools.rs`: the fixture tools;
//! - `catalog.rs`: resources, the resource template, prompts, completions;
//! - `ask.rs`: asking the client (sampling, elicitation, roots) in both protocol eras.

// Logging, sampling and roots are deprecated (SEP-2577) but still in the protocol the suite checks.
#![allow(deprecated)]

mod ask;
mod catalog;
mod tools;

use std::collections::HashSet;
use std::sync::Mutex;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde_json::json;
use tokio::sync::broadcast;
use toolgate_mcp::ExtraFeatures;

/// A 1x1 PNG, base64.
const IMAGE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// Eight samples of 8 kHz silence as a WAV file, base64.
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Log levels, least severe first (rmcp's `LoggingLevel` is not ordered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl Level {
    const ALL: [(Level, &'static str); 8] = [
        (Level::Debug, "debug"),
        (Level::Info, "info"),
        (Level::Notice, "notice"),
        (Level::Warning, "warning"),
        (Level::Error, "error"),
        (Level::Critical, "critical"),
        (Level::Alert, "alert"),
        (Level::Emergency, "emergency"),
    ];

    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(l, _)| *l == self).map_or("info", |(_, n)| n)
    }

    /// The level of an rmcp `LoggingLevel` (through its wire name).
    fn of(level: &impl serde::Serialize) -> Option<Level> {
        let name = serde_json::to_value(level).ok()?;
        Self::ALL.iter().find(|(_, n)| name == *n).map(|(l, _)| *l)
    }
}

/// A change the fixtures announce on 2026-07-28 `subscriptions/listen` streams.
#[derive(Debug, Clone, Copy)]
enum Change {
    Tools,
    Prompts,
}

/// The fixtures' state: the log level set with `logging/setLevel` (one for all sessions: the
/// suite runs one scenario at a time), resource subscriptions, `requestState` handles, and the
/// list changes the trigger tools announce to open listen streams.
#[derive(Debug)]
pub(crate) struct Fixtures {
    log_level: Mutex<Option<Level>>,
    subscriptions: Mutex<HashSet<String>>,
    states: ask::States,
    changes: broadcast::Sender<Change>,
}

impl Default for Fixtures {
    fn default() -> Self {
        Fixtures {
            log_level: Mutex::default(),
            subscriptions: Mutex::default(),
            states: ask::States::default(),
            changes: broadcast::channel(16).0,
        }
    }
}

/// Whether this request speaks 2026-07-28 (per-request `_meta`, no server-to-client requests).
pub(crate) fn modern(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl Fixtures {
    /// Announces that a list changed (the trigger tools), to every open listen stream.
    fn announce(&self, change: Change) {
        // No receiver just means no stream is open.
        let _ = self.changes.send(change);
    }

    /// Sends a log message at `level`, when the client wants it: on 2026-07-28 only if the
    /// request's `_meta` set a `logLevel` at or below it; before, unless `logging/setLevel`
    /// asked for a higher one.
    async fn log(&self, context: &RequestContext<RoleServer>, level: Level, message: &str) {
        let wanted = if modern(context) {
            context.meta.log_level().and_then(|l| Level::of(&l)).is_some_and(|min| level >= min)
        } else {
            self.log_level.lock().unwrap_or_else(|e| e.into_inner()).is_none_or(|min| level >= min)
        };
        if !wanted {
            return;
        }
        let note = json!({"level": level.name(), "logger": "toolgate-conformance", "data": message});
        if let Ok(note) = serde_json::from_value(note) {
            let _ = context.peer.notify_logging_message(note).await;
        }
    }
}

#[async_trait::async_trait]
impl ExtraFeatures for Fixtures {
    /// Tools and prompts (with list changes), resources (with subscribe), completions and
    /// logging.
    fn capabilities(&self) -> ServerCapabilities {
        serde_json::from_value(json!({
            "tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {"listChanged": true},
            "completions": {}, "logging": {},
        }))
        .unwrap_or_default()
    }

    /// The fixture tools, listed after the gate's.
    fn tools(&self) -> Vec<Tool> {
        tools::TOOLS.clone()
    }

    /// The fixture tool called `name` (rmcp checks `Mcp-Param-*` headers against its schema).
    fn tool(&self, name: &str) -> Option<Tool> {
        tools::TOOLS.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        self.call(request, context).await
    }

    async fn list_resources(&self) -> Result<ListResourcesResult, McpError> {
        catalog::resources()
    }

    async fn list_resource_templates(&self) -> Result<ListResourceTemplatesResult, McpError> {
        catalog::templates()
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        catalog::read(&request.uri).map(Into::into)
    }

    /// `resources/subscribe` (before 2026-07-28).
    async fn subscribe(&self, request: SubscribeRequestParams) -> Result<(), McpError> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).insert(request.uri);
        Ok(())
    }

    /// `resources/unsubscribe` (before 2026-07-28).
    async fn unsubscribe(&self, request: UnsubscribeRequestParams) -> Result<(), McpError> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(&self) -> Result<ListPromptsResult, McpError> {
        catalog::prompts()
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.prompt(&request, &context).await
    }

    async fn complete(&self, request: CompleteRequestParams) -> Result<CompleteResult, McpError> {
        catalog::complete(&request)
    }

    /// `logging/setLevel` (before 2026-07-28; afterwards each request carries its level).
    async fn set_level(&self, request: SetLevelRequestParams) -> Result<(), McpError> {
        let level = Level::of(&request.level).ok_or_else(|| McpError::invalid_params("unknown log level", None))?;
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
        Ok(())
    }

    /// Every filter is accepted: the trigger tools announce tool and prompt list changes.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// Serves one 2026-07-28 `subscriptions/listen` stream until the client closes it: every
    /// announced change the client asked for (the sink drops the others) goes out on it.
    async fn listen(&self, subscription: SubscriptionContext) {
        let mut changes = self.changes.subscribe();
        loop {
            let change = tokio::select! {
                () = subscription.cancelled() => return,
                change = changes.recv() => change,
            };
            let sent = match change {
                Ok(Change::Tools) => subscription.sink().notify_tool_list_changed().await,
                Ok(Change::Prompts) => subscription.sink().notify_prompt_list_changed().await,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if let Err(e) = sent {
                tracing::debug!("conformance listen stream: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_by_severity_and_read_rmcp_names() {
        assert!(Level::Debug < Level::Info && Level::Error < Level::Emergency);
        assert_eq!(Level::of(&"warning"), Some(Level::Warning));
        assert_eq!(Level::of(&"loud"), None);
        assert_eq!(Level::Notice.name(), "notice");
    }

    #[test]
    fn capabilities_declare_what_the_fixtures_serve() {
        let caps = serde_json::to_value(Fixtures::default().capabilities()).unwrap_or_default();
        for key in ["tools", "resources", "prompts", "completions", "logging"] {
            assert!(caps.get(key).is_some(), "{key} in {caps}");
        }
        assert_eq!(caps["resources"]["subscribe"], true);
    }

    #[test]
    fn every_fixture_tool_has_a_description_and_an_object_schema() {
        let fixtures = Fixtures::default();
        assert!(fixtures.tools().len() > 20);
        for tool in fixtures.tools() {
            assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()), "{}", tool.name);
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        }
        assert!(ExtraFeatures::tool(&fixtures, "test_simple_text").is_some());
        assert!(ExtraFeatures::tool(&fixtures, "echo").is_none());
    }
}
