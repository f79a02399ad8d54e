//! Asking the client's user, through MCP form elicitation, whether a call may run.
//!
//! The server puts the requesting client in a task-local slot while a `tools/call` runs, so
//! an approval channel deep in the call pipeline (the `toolgate` crate's `Approver`) can reach
//! the right client without knowing MCP: it calls [`ask_client`].

use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::json;

tokio::task_local! {
    /// The client that sent the `tools/call` being served, when it can be asked (it declared
    /// form elicitation and speaks a protocol that allows server-to-client requests).
    static CLIENT: Peer<RoleServer>;
}

/// What the client's user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this call and later ones with the same subject.
    AllowAlways,
    /// Do not run it.
    Deny {
        /// Why, when the client said.
        message: Option<String>,
    },
}

const ALLOW_ONCE: &str = "allow once";
const ALLOW_ALWAYS: &str = "allow always";
const DENY: &str = "deny";

/// Asks the user of the MCP client whose call is running on this task, through form
/// elicitation, with `message` as the question.
///
/// `None` when nobody can be asked: not inside an MCP `tools/call`, the client did not declare
/// form elicitation, or the request uses protocol 2026-07-28 (which forbids server-to-client
/// requests; rmcp 3.9.0 offers only the multi-round-trip `InputRequiredResult` there). The
/// caller then refuses the call with instructions instead of running it.
pub async fn ask_client(message: &str, timeout: Duration) -> Option<ClientAnswer> {
    let peer = CLIENT.try_with(Clone::clone).ok()?;
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "Run this tool call?",
                "enum": [ALLOW_ONCE, ALLOW_ALWAYS, DENY],
            }
        },
        "required": ["decision"],
    }))
    .ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    };
    let result = match peer.create_elicitation_with_timeout(params, Some(timeout)).await {
        Ok(result) => result,
        Err(e) => {
            tracing::warn!("the MCP client could not be asked for approval: {e}");
            return None;
        }
    };
    Some(match result.action {
        ElicitationAction::Accept => {
            let decision = result.content.as_ref().and_then(|c| c.get("decision")).and_then(|d| d.as_str());
            match decision {
                Some(ALLOW_ONCE) => ClientAnswer::AllowOnce,
                Some(ALLOW_ALWAYS) => ClientAnswer::AllowAlways,
                _ => ClientAnswer::Deny { message: Some("the user chose not to allow it".to_owned()) },
            }
        }
        ElicitationAction::Decline => ClientAnswer::Deny { message: Some("the user declined".to_owned()) },
        _ => ClientAnswer::Deny { message: Some("the user dismissed the question".to_owned()) },
    })
}

/// Runs `fut` with `peer` reachable by [`ask_client`], when that client can be asked.
pub(crate) async fn with_client<F: Future>(peer: Option<Peer<RoleServer>>, fut: F) -> F::Output {
    match peer.filter(|p| p.supported_elicitation_modes().contains(&ElicitationMode::Form)) {
        Some(peer) => CLIENT.scope(peer, fut).await,
        None => fut.await,
    }
}
