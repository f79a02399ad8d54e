//! Asking the client's user, through MCP form elicitation, whether a call may run.
//!
//! The server puts the requesting client in a task-local slot while a `tools/call` runs, so
//! an approval channel deep in the call pipeline (the `toolgate` crate's `Approver`) can reach
//! the right client without knowing MCP: it calls [`ask_client`].
//!
//! Two protocol eras, two ways to ask:
//!
//! - before 2026-07-28: a server-to-client `elicitation/create` request, answered while the
//!   call waits;
//! - 2026-07-28 (no server-to-client requests): the call ends with an `InputRequiredResult`
//!   carrying the elicitation; the client asks its user and retries the call with the answer
//!   in `inputResponses`, where [`ask_client`] finds it on the second run.
//!
//! When the decision is someone else's (a team's approvals inbox), a 2026-07-28 client that
//! declared URL elicitation is sent the inbox entry's address instead ([`defer_to_url`]) with an
//! opaque `requestState` the server sealed; the retried call brings it back
//! ([`echoed_request_state`]) and resumes from the decision.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::json;

/// The `inputRequests` key toolgate uses for its approval question.
pub(crate) const APPROVAL_KEY: &str = "toolgate_approval";

/// The `inputRequests` key of the URL that points at an inbox entry (its answer carries no
/// decision: the decision is in the inbox).
pub(crate) const INBOX_KEY: &str = "toolgate_inbox";

/// How the running call can reach its client's user.
#[derive(Clone)]
pub(crate) enum Channel {
    /// Ask with a server-to-client request (protocols before 2026-07-28).
    Request(Peer<RoleServer>),
    /// Ask through an input-required round trip (2026-07-28).
    Inline(Arc<InlineRound>),
}

/// One run of a 2026-07-28 call: the answer the client sent, and the question to send back.
#[derive(Debug, Default)]
pub(crate) struct InlineRound {
    answer: Mutex<Option<ClientAnswer>>,
    question: Mutex<Option<String>>,
    /// The client declared URL elicitation.
    url_mode: bool,
    /// The `requestState` the retried request echoed.
    echoed_state: Option<String>,
    /// The inbox entry to point the client at: message, URL, sealed state.
    deferred: Mutex<Option<(String, String, String)>>,
}

impl InlineRound {
    /// A round for a request whose `inputResponses` may carry an earlier answer.
    pub(crate) fn from_responses(responses: Option<&InputResponses>) -> Self {
        let answer = responses
            .and_then(|r| r.get(APPROVAL_KEY))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
            .map(|r| answer_of(&r));
        InlineRound { answer: Mutex::new(answer), ..Default::default() }
    }

    /// The same round, for a client that declared URL elicitation (`url_mode`) and echoed
    /// `state`.
    pub(crate) fn with_url(mut self, url_mode: bool, state: Option<String>) -> Self {
        self.url_mode = url_mode;
        self.echoed_state = state;
        self
    }

    /// The `InputRequiredResult` to end the call with, when an approval was asked and not
    /// answered in this round.
    pub(crate) fn input_required(&self) -> Option<InputRequiredResult> {
        if let Some((message, url, state)) = lock(&self.deferred).take() {
            let mut requests = InputRequests::new();
            let params =
                ElicitRequestParams::UrlElicitationParams { meta: None, message, url, elicitation_id: String::new() };
            requests.insert(INBOX_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)));
            return Some(InputRequiredResult::new(Some(requests), Some(state)));
        }
        let question = lock(&self.question).take()?;
        let mut requests = InputRequests::new();
        requests.insert(APPROVAL_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(form(question)?)));
        Some(InputRequiredResult::from_input_requests(requests))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

tokio::task_local! {
    /// The client that sent the `tools/call` being served, when it can be asked.
    static CLIENT: Channel;
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

fn form(message: String) -> Option<ElicitRequestParams> {
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
    Some(ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema })
}

fn answer_of(result: &ElicitResult) -> ClientAnswer {
    match result.action {
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
    }
}

/// Asks the user of the MCP client whose call is running on this task, through form
/// elicitation, with `message` as the question.
///
/// `None` when nobody can be asked now: not inside an MCP `tools/call`, or the client did not
/// declare form elicitation. On 2026-07-28 the first run of a call also gets `None` (the
/// question goes back to the client in an `InputRequiredResult`, and the retried call gets the
/// answer). The caller then refuses the call instead of running it.
pub async fn ask_client(message: &str, timeout: Duration) -> Option<ClientAnswer> {
    match CLIENT.try_with(Clone::clone).ok()? {
        Channel::Inline(round) => {
            if let Some(answer) = lock(&round.answer).take() {
                return Some(answer);
            }
            *lock(&round.question) = Some(message.to_owned());
            None
        }
        Channel::Request(peer) => {
            match peer.create_elicitation_with_timeout(form(message.to_owned())?, Some(timeout)).await {
                Ok(result) => Some(answer_of(&result)),
                Err(e) => {
                    tracing::warn!("the MCP client could not be asked for approval: {e}");
                    None
                }
            }
        }
    }
}

/// The `requestState` the client echoed with this call (2026-07-28), if any. Untrusted: the
/// server that sealed it opens it and checks what it is bound to.
pub fn echoed_request_state() -> Option<String> {
    match CLIENT.try_with(Clone::clone).ok()? {
        Channel::Inline(round) => round.echoed_state.clone(),
        Channel::Request(_) => None,
    }
}

/// Ends the running call with a URL-mode elicitation pointing the client's user at `url`
/// (where someone decides), carrying `state` for the retry. `false` when the client cannot be
/// sent one (not a 2026-07-28 client that declared URL elicitation): the call then says in its
/// error what it waits for.
pub fn defer_to_url(message: &str, url: &str, state: &str) -> bool {
    match CLIENT.try_with(Clone::clone) {
        Ok(Channel::Inline(round)) if round.url_mode => {
            *lock(&round.deferred) = Some((message.to_owned(), url.to_owned(), state.to_owned()));
            true
        }
        _ => false,
    }
}

/// Whether a legacy client declared form elicitation.
pub(crate) fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes().contains(&ElicitationMode::Form)
}

/// Runs `fut` with `channel` reachable by [`ask_client`].
pub(crate) async fn with_channel<F: Future>(channel: Option<Channel>, fut: F) -> F::Output {
    match channel {
        Some(channel) => CLIENT.scope(channel, fut).await,
        None => fut.await,
    }
}
