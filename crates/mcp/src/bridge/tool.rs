//! A bridged server's tool as a toolgate [`Tool`]: the gate's pipeline runs around it like
//! around any built-in, and `execute` forwards the call to the server's live connection.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Map, Value};
use toolgate_core::{CallContext, CallSafety, Content, Tool, ToolError, ToolOutput, ToolSpec, Touches};

use super::link::{ServerLink, Stored};
use super::mapping::{self, BridgedSpec, clean_text, remote_error, requirement};
use super::oauth::login_required_message;
use super::overrides::ServerOverrides;

/// The longest per-call deadline `timeout_secs` may set (a day).
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// How long a call waits for the connection of a user who has just signed in.
const SIGNED_IN_WAIT: Duration = Duration::from_secs(30);

/// One tool of a bridged server, registered as `mcp__NAME__tool`.
#[derive(Debug)]
pub(crate) struct BridgedTool {
    link: Arc<ServerLink>,
    bridged: BridgedSpec,
    /// The host of an HTTP server, for policy's `domain:` rules.
    hosts: Vec<String>,
}

impl BridgedTool {
    pub(crate) fn new(link: Arc<ServerLink>, bridged: BridgedSpec) -> Self {
        let hosts = link
            .config
            .url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase()))
            .into_iter()
            .collect();
        BridgedTool { link, bridged, hosts }
    }

    /// A failure of the request itself (not a tool error result).
    fn request_error(&self, link: &ServerLink, error: ServiceError) -> ToolError {
        let server = &link.name;
        // The token stopped working mid-session: the user signs in again, as themself.
        if error.to_string().contains(&login_required_message(server))
            && let Some(error) = link.sign_in_needed()
        {
            return error;
        }
        match error {
            ServiceError::McpError(e) => {
                remote_error(server, &format!("error {} calling `{}`: {}", e.code.0, self.bridged.remote, e.message))
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => ToolError::failed(format!(
                "MCP server `{server}` closed its connection during the call; toolgate reconnects by itself, \
                 try again in a few seconds"
            )),
            ServiceError::Cancelled { .. } => ToolError::Cancelled,
            other => ToolError::failed(format!(
                "the call to MCP server `{server}` failed: {}",
                clean_text(&other.to_string(), 300)
            )),
        }
    }
}

impl BridgedTool {
    /// The result with what the sandbox blocked said at its end, by path or host and with the
    /// config line that allows it. It stays inside the server's own (untrusted) text: the
    /// evidence and the path come from the server's messages.
    fn explained(&self, link: &ServerLink, result: Result<ToolOutput, ToolError>) -> Result<ToolOutput, ToolError> {
        let text = match &result {
            Ok(output) => output.text_content(),
            Err(ToolError::ExternalService { message, .. }) => message.clone(),
            Err(_) => return result,
        };
        let denials = link.explain_denials(&text);
        if denials.is_empty() {
            return result;
        }
        let note = denials.join("\n");
        match result {
            Ok(mut output) => {
                output.content.push(Content::Text { text: note });
                Ok(output)
            }
            Err(ToolError::ExternalService { service, message }) => {
                Err(ToolError::ExternalService { service, message: format!("{message}\n{note}") })
            }
            Err(other) => Err(other),
        }
    }
}

#[async_trait::async_trait]
impl Tool for BridgedTool {
    fn spec(&self) -> &ToolSpec {
        &self.bridged.spec
    }

    fn safety(&self, _params: &Value) -> CallSafety {
        let timeout = self
            .link
            .config
            .timeout_secs
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_TIMEOUT_SECS)));
        CallSafety {
            approval: requirement(self.bridged.approval.as_deref()),
            approval_reason: self.bridged.approval.clone().map(Cow::Owned),
            timeout,
            touches: Touches { hosts: self.hosts.clone(), ..Touches::default() },
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        // A team gateway caller whose grant overrides this server's settings: a connection of
        // its own (docs/gateway.md, "Grants").
        let settings = match &ctx.grants {
            Some(grants) => grants.server_settings(&self.bridged.spec)?,
            None => None,
        };
        let Some(settings) = settings else { return self.call(&self.link, ctx, params, None).await };
        let server = &self.link.name;
        let overrides = ServerOverrides::parse(&settings.settings).map_err(|e| {
            ToolError::failed(format!(
                "grant {} of this gateway sets settings of MCP server `{server}` toolgate refuses ({e}); ask an \
                 admin to fix the grant",
                settings.grant
            ))
        })?;
        let deadline = overrides.timeout_secs.map(|s| Duration::from_secs_f64(s.min(MAX_TIMEOUT_SECS)));
        if !overrides.needs_own_connection() {
            return self.call(&self.link, ctx, params, deadline).await;
        }
        // A reload took the server out (or changed it): none of its connections takes calls.
        self.link.peer_allowed()?;
        let Some(variants) = &self.link.variants else {
            return Err(ToolError::failed(format!(
                "MCP server `{server}` cannot take a grant's settings here (a bug: its connections were set up \
                 without them)"
            )));
        };
        let link = variants.link(&self.link, &overrides, settings.grant).await?;
        self.call(&link, ctx, params, deadline).await
    }
}

impl BridgedTool {
    /// The call over `link`'s connection (the server's plain one, or one with a grant's
    /// settings), within `deadline` when the grant sets one.
    async fn call(
        &self,
        link: &Arc<ServerLink>,
        ctx: &CallContext,
        params: Value,
        deadline: Option<Duration>,
    ) -> Result<ToolOutput, ToolError> {
        // A per-user server: a connection opened with its user's token serves only while that
        // user is signed in (a sign-out, from another process too, applies from the next call).
        if link.with_token.load(std::sync::atomic::Ordering::Acquire) {
            match link.stored_credential().await {
                Some(Stored::Missing) if let Some(error) = link.sign_in_needed() => {
                    link.kick.notify_one();
                    return Err(error);
                }
                // Its user stored another key since it was opened: connect again with it (a
                // connection with overrides has done so already, `Variants::link`).
                Some(Stored::Replaced) => link.reconnect_now(SIGNED_IN_WAIT).await,
                _ => {}
            }
        }
        let peer = match link.peer() {
            Ok(peer) => peer,
            // Down for want of its user's sign-in: connect now if they have signed in since.
            Err(e) if link.needs_sign_in() => {
                if link.user_signed_in().await != Some(true) {
                    return Err(link.sign_in_needed().unwrap_or(e));
                }
                link.reconnect_now(SIGNED_IN_WAIT).await;
                link.peer()?
            }
            Err(e) => return Err(e),
        };
        let arguments = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(ToolError::invalid(&self.bridged.spec.name, "", "expected an object of parameters")),
        };
        let params = CallToolRequestParams::new(self.bridged.remote.clone()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // While traces are exported, the server's work joins this call's trace (`_meta`'s
        // `traceparent`, SEP-414: the one place every transport carries it).
        let mut options = PeerRequestOptions::no_options();
        if let Some(trace) = toolgate_core::trace::current() {
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.set_traceparent(trace.traceparent());
            if let Some(state) = trace.tracestate() {
                meta.set_tracestate(state);
            }
            options.meta = Some(meta);
        }
        // rmcp puts a fresh progress token on every request; progress with it goes to this call.
        let handle = peer.send_request_with_option(request, options).await.map_err(|e| self.request_error(link, e))?;
        let _progress = link.route_progress(handle.progress_token.clone(), ctx.progress.clone());
        // From here on, a call that stops waiting (cancelled, timed out: the gate drops this
        // future) tells the server with `notifications/cancelled`.
        let mut abandon = AbandonGuard { peer: peer.clone(), id: Some(handle.id.clone()) };
        let expired = async {
            match deadline {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        let response = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            () = expired => {
                let after = deadline.unwrap_or_default();
                return Err(ToolError::Timeout { tool: self.bridged.spec.name.clone(), after });
            }
            response = handle.await_response() => response,
        };
        abandon.id = None;
        // Progress notifications that came before the result are handled in tasks of their own;
        // give them a turn so the last reports are not dropped with the route.
        tokio::task::yield_now().await;
        match response.map_err(|e| self.request_error(link, e))? {
            ServerResult::CallToolResult(result) => self.explained(link, mapping::result(&link.name, result)),
            ServerResult::CreateTaskResult(_) | ServerResult::InputRequiredResult(_) => {
                Err(ToolError::failed(format!(
                    "MCP server `{}` answered `{}` with a task or a request for input, which toolgate's bridge does \
                 not support",
                    link.name, self.bridged.remote
                )))
            }
            _ => Err(ToolError::failed(format!(
                "MCP server `{}` answered `{}` with something that is not a tool result",
                link.name, self.bridged.remote
            ))),
        }
    }
}

/// Sends `notifications/cancelled` for a request nobody waits for any more.
struct AbandonGuard {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let reason = Some("cancelled by toolgate (the caller stopped waiting)".to_owned());
            let _ = peer.notify_cancelled(CancelledNotificationParam::new(Some(id), reason)).await;
        });
    }
}
