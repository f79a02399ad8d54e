//! The gate's own events, for whoever listens (the automation family's `event` routines): a
//! tool call finished, an approval was decided, a file was written through the file tools.
//! Jobs announce their own ends (`toolgate_automation::jobs::Jobs::subscribe`) and message
//! adapters their inbound messages.
//!
//! One broadcast channel per gate. Publishing costs nothing when no one listens (the event is
//! not even built), and a slow listener loses the oldest events, never slows a call.

use std::sync::Arc;

use tokio::sync::broadcast;
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_tools::fs::{FileRedirect, WriteObserver};

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateEvent {
    /// `tool`, `approval`, `file` or `message` (a channel received one).
    pub channel: &'static str,
    /// The tool's name (`tool`, `approval`), the workspace-relative path (`file`) or
    /// `CHANNEL:sender` (`message`).
    pub subject: String,
    /// The outcome (`ok`, an error kind), the decision (`allowed once`, `denied`), or the tool
    /// that wrote the file.
    pub detail: String,
    /// The caller's user.
    pub user: String,
    /// The caller's session.
    pub session: String,
    /// A `tool` event's decision trace (the pipeline's stages: policy verdicts, approval), as
    /// the audit row keeps it; empty for other events.
    pub trace: Vec<String>,
}

/// The gate's event channel.
#[derive(Debug, Clone)]
pub struct Events(broadcast::Sender<GateEvent>);

impl Default for Events {
    fn default() -> Self {
        Events(broadcast::channel(1024).0)
    }
}

impl Events {
    /// Every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<GateEvent> {
        self.0.subscribe()
    }

    /// Whether anyone listens.
    pub fn wanted(&self) -> bool {
        self.0.receiver_count() > 0
    }

    /// Sends `event` to the listeners.
    pub fn publish(&self, event: GateEvent) {
        let _ = self.0.send(event);
    }

    /// The events of one finished call: `tool` always, `approval` when a person decided.
    pub(crate) fn after_call(
        &self,
        ctx: &CallContext,
        tool: &str,
        trace: &[String],
        result: &Result<ToolOutput, ToolError>,
    ) {
        if !self.wanted() {
            return;
        }
        let event = |channel, detail: &str| GateEvent {
            channel,
            subject: tool.to_owned(),
            detail: detail.to_owned(),
            user: ctx.identity.user.clone(),
            session: ctx.identity.session.clone(),
            trace: if channel == "tool" { trace.to_vec() } else { Vec::new() },
        };
        let decided = trace.iter().find_map(|t| match t.as_str() {
            "approval: allowed once" => Some("allowed once"),
            "approval: allowed always" => Some("allowed always"),
            _ => None,
        });
        let decided = decided.or(match result {
            Err(ToolError::ApprovalDenied { .. }) => Some("denied"),
            _ => None,
        });
        if let Some(decision) = decided {
            self.publish(event("approval", decision));
        }
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) => e.kind(),
        };
        self.publish(event("tool", outcome));
    }
}

/// The file tools' write observer that also publishes `file` events, around the one they had
/// (memory's), which keeps serving its redirects.
#[derive(Debug)]
pub(crate) struct FileEvents {
    pub(crate) inner: Option<Arc<dyn WriteObserver>>,
    pub(crate) events: Events,
}

impl WriteObserver for FileEvents {
    fn written(&self, ctx: &CallContext, rel: &str) {
        if let Some(inner) = &self.inner {
            inner.written(ctx, rel);
        }
        if self.events.wanted() {
            self.events.publish(GateEvent {
                channel: "file",
                subject: rel.to_owned(),
                detail: "written".to_owned(),
                user: ctx.identity.user.clone(),
                session: ctx.identity.session.clone(),
                trace: Vec::new(),
            });
        }
    }

    fn redirect(&self) -> Option<Arc<dyn FileRedirect>> {
        self.inner.as_ref().and_then(|i| i.redirect())
    }
}
