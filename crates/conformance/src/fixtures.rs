//! Fixtures for the official MCP conformance suite (`@modelcontextprotocol/conformance`): the
//! tools, resources, prompts, completions and logging its server scenarios call by name
//! (`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...).
//!
//! Served only when the handler asks for them ([`CallHandler::conformance_fixtures`], which
//! [`WithConformanceFixtures`] turns on; `toolgate serve --conformance`), never in normal use:
//! they bypass the call pipeline (they touch nothing but the client). Without them the server
//! declares and answers tools only.
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
use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ProtocolVersion, ReadResourceResult, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};

use crate::CallHandler;

/// A 1x1 PNG, base64.
const IMAGE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// Eight samples of 8 kHz silence as a WAV file, base64.
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Serves `H` plus the conformance suite's fixtures. For the conformance suite only, never in
/// normal use.
#[derive(Debug)]
pub struct WithConformanceFixtures<H>(pub Arc<H>);

#[async_trait::async_trait]
impl<H: CallHandler> CallHandler for WithConformanceFixtures<H> {
    fn context(&self) -> CallContext {
        self.0.context()
    }

    fn list(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        self.0.list(ctx)
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        self.0.call(ctx, name, params).await
    }

    fn shutdown(&self) {
        self.0.shutdown();
    }

    fn conformance_fixtures(&self) -> bool {
        true
    }
}

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
    /// What a server with the fixtures declares: tools and prompts (with list changes),
    /// resources (with subscribe), completions and logging.
    pub(crate) fn capabilities() -> ServerCapabilities {
        serde_json::from_value(json!({
            "tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {"listChanged": true},
            "completions": {}, "logging": {},
        }))
        .unwrap_or_default()
    }

    /// Announces that a list changed (the trigger tools), to every open listen stream.
    fn announce(&self, change: Change) {
        // No receiver just means no stream is open.
        let _ = self.changes.send(change);
    }

    /// Serves one 2026-07-28 `subscriptions/listen` stream until the client closes it: every
    /// announced change the client asked for (the sink drops the others) goes out on it.
    pub(crate) async fn listen(&self, subscription: SubscriptionContext) {
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

    /// The fixture tools, listed after the handler's own.
    pub(crate) fn tools() -> &'static [Tool] {
        &tools::TOOLS
    }

    /// The fixture tool called `name` (rmcp checks `Mcp-Param-*` headers against its schema).
    pub(crate) fn tool(name: &str) -> Option<Tool> {
        tools::TOOLS.iter().find(|t| t.name == name).cloned()
    }

    /// `logging/setLevel` (before 2026-07-28; afterwards each request carries its level).
    pub(crate) fn set_level(&self, level: &impl serde::Serialize) -> Result<(), McpError> {
        let level = Level::of(level).ok_or_else(|| McpError::invalid_params("unknown log level", None))?;
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
        Ok(())
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

    /// `resources/subscribe` (before 2026-07-28).
    pub(crate) fn subscribe(&self, uri: &str) {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).insert(uri.to_owned());
    }

    /// `resources/unsubscribe` (before 2026-07-28).
    pub(crate) fn unsubscribe(&self, uri: &str) {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).remove(uri);
    }

    /// `resources/list`.
    pub(crate) fn resources() -> Result<ListResourcesResult, McpError> {
        catalog::resources()
    }

    /// `resources/templates/list`.
    pub(crate) fn templates() -> Result<ListResourceTemplatesResult, McpError> {
        catalog::templates()
    }

    /// `resources/read`.
    pub(crate) fn read(uri: &str) -> Result<ReadResourceResult, McpError> {
        catalog::read(uri)
    }

    /// `prompts/list`.
    pub(crate) fn prompts() -> Result<ListPromptsResult, McpError> {
        catalog::prompts()
    }

    /// `completion/complete`.
    pub(crate) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, McpError> {
        catalog::complete(request)
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
        let caps = serde_json::to_value(Fixtures::capabilities()).unwrap_or_default();
        for key in ["tools", "resources", "prompts", "completions", "logging"] {
            assert!(caps.get(key).is_some(), "{key} in {caps}");
        }
        assert_eq!(caps["resources"]["subscribe"], true);
    }

    #[test]
    fn every_fixture_tool_has_a_description_and_an_object_schema() {
        assert!(Fixtures::tools().len() > 20);
        for tool in Fixtures::tools() {
            assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()), "{}", tool.name);
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        }
        assert!(Fixtures::tool("test_simple_text").is_some());
        assert!(Fixtures::tool("echo").is_none());
    }
}
