//! Asking the client something from inside a fixture: before 2026-07-28 with a server-to-client
//! request while the call waits; on 2026-07-28 with an `InputRequiredResult` whose answers come
//! back in the retried call's `inputResponses` (SEP-2322), with `requestState` handles kept here.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, InputRequest, InputRequests, InputResponses,
    ListRootsResult, ServerRequest,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

/// How long a server-to-client request may wait for the client's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The most `requestState` handles kept at once; older ones are forgotten (their calls must
/// start over).
const MAX_STATES: usize = 1024;

/// One question for the client: the `inputRequests` key and the request (`method` + `params`).
pub(super) struct Question {
    pub(super) key: &'static str,
    pub(super) request: Value,
}

impl Question {
    /// An `elicitation/create` form with `message` and `schema`.
    pub(super) fn elicit(key: &'static str, message: &str, schema: Value) -> Question {
        let request =
            json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}});
        Question { key, request }
    }

    /// A `sampling/createMessage` with one user message.
    pub(super) fn sample(key: &'static str, text: &str, max_tokens: u32) -> Question {
        let request = json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        }});
        Question { key, request }
    }

    /// A `roots/list`.
    pub(super) fn roots(key: &'static str) -> Question {
        Question { key, request: json!({"method": "roots/list", "params": {}}) }
    }

    fn method(&self) -> &str {
        self.request["method"].as_str().unwrap_or_default()
    }

    /// Whether `answer` has the shape of this question's result.
    fn accepts(&self, answer: &Value) -> bool {
        let answer = answer.clone();
        match self.method() {
            "elicitation/create" => serde_json::from_value::<ElicitResult>(answer).is_ok(),
            "sampling/createMessage" => serde_json::from_value::<CreateMessageResult>(answer).is_ok(),
            "roots/list" => serde_json::from_value::<ListRootsResult>(answer).is_ok(),
            _ => false,
        }
    }
}

/// What asking produced.
pub(super) enum Asked {
    /// Every question answered, by key.
    Answers(BTreeMap<String, Value>),
    /// 2026-07-28: the questions still open, to send back in an `InputRequiredResult`.
    Pending(InputRequests),
}

/// Asks `questions`. On 2026-07-28, answers already in `responses` (and of the right shape) are
/// taken and only the rest are asked again; extra keys are ignored.
pub(super) async fn ask(
    context: &RequestContext<RoleServer>,
    modern: bool,
    responses: Option<&InputResponses>,
    questions: Vec<Question>,
) -> Result<Asked, McpError> {
    let mut answers = BTreeMap::new();
    if !modern {
        for question in questions {
            let answer = request(context, &question.request).await?;
            answers.insert(question.key.to_owned(), answer);
        }
        return Ok(Asked::Answers(answers));
    }
    let mut pending = InputRequests::new();
    for question in questions {
        match responses.and_then(|r| r.get(question.key)).filter(|a| question.accepts(a)) {
            Some(answer) => {
                answers.insert(question.key.to_owned(), answer.clone());
            }
            None => {
                let request = serde_json::from_value::<InputRequest>(question.request)
                    .map_err(|e| McpError::internal_error(format!("fixture input request: {e}"), None))?;
                pending.insert(question.key.to_owned(), request);
            }
        }
    }
    Ok(if pending.is_empty() { Asked::Answers(answers) } else { Asked::Pending(pending) })
}

/// Sends one server-to-client request (protocols before 2026-07-28) and returns the result.
async fn request(context: &RequestContext<RoleServer>, request: &Value) -> Result<Value, McpError> {
    let request: ServerRequest = serde_json::from_value(request.clone())
        .map_err(|e| McpError::internal_error(format!("fixture request: {e}"), None))?;
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, context.peer.send_request(request))
        .await
        .map_err(|_| McpError::internal_error("the client did not answer within 60 s", None))?
        .map_err(|e| McpError::internal_error(format!("the client's answer failed: {e}"), None))?;
    serde_json::to_value(answer).map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// Refuses a call that needs a client capability the request did not declare (`-32021`, HTTP
/// 400 on 2026-07-28), naming it as `{capability: {}}`.
pub(super) fn require(context: &RequestContext<RoleServer>, capability: &str) -> Result<(), McpError> {
    let declared = context
        .client_capabilities()
        .and_then(|c| serde_json::to_value(c).ok())
        .is_some_and(|c| c.get(capability).is_some_and(|v| !v.is_null()));
    if declared {
        return Ok(());
    }
    let required: ClientCapabilities =
        serde_json::from_value(json!({ capability: {} })).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Err(McpError::missing_required_client_capability(required))
}

/// Whether the request declared `capability`.
pub(super) fn declared(context: &RequestContext<RoleServer>, capability: &str) -> bool {
    require(context, capability).is_ok()
}

/// `requestState` handles: random, single use, each tied to one tool and one round, so a
/// tampered, replayed or foreign state is refused. The state never carries data itself.
#[derive(Debug, Default)]
pub(super) struct States {
    issued: Mutex<HashMap<String, (String, u8)>>,
}

impl States {
    /// A new handle for `tool` at `round`.
    pub(super) fn issue(&self, tool: &str, round: u8) -> Result<String, McpError> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| McpError::internal_error(format!("cannot make a request state: {e}"), None))?;
        let handle: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        if issued.len() >= MAX_STATES {
            issued.clear();
        }
        issued.insert(handle.clone(), (tool.to_owned(), round));
        Ok(handle)
    }

    /// The round a call's `requestState` stands for: `None` without one (round 0), an error
    /// (`-32602`) when it was not issued here for `tool`. Each handle is good once.
    pub(super) fn redeem(&self, tool: &str, state: Option<&str>) -> Result<u8, McpError> {
        let Some(state) = state else { return Ok(0) };
        let found = self.issued.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
        match found {
            Some((issued_for, round)) if issued_for == tool => Ok(round),
            _ => Err(McpError::invalid_params(
                "requestState failed its integrity check (unknown, reused or tampered with): start the call again \
                 without requestState",
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_single_use_and_bound_to_their_tool() {
        let states = States::default();
        let a = states.issue("t", 1).unwrap_or_default();
        assert_eq!(states.redeem("t", None).ok(), Some(0));
        assert!(states.redeem("t", Some(&format!("{a}-TAMPERED"))).is_err());
        assert!(states.redeem("other", Some(&a)).is_err(), "bound to its tool (and now spent)");
        let b = states.issue("t", 2).unwrap_or_default();
        assert_eq!(states.redeem("t", Some(&b)).ok(), Some(2));
        assert!(states.redeem("t", Some(&b)).is_err(), "single use");
    }

    #[test]
    fn answers_are_checked_against_the_question() {
        let q = Question::elicit("k", "m", json!({"type": "object"}));
        assert!(q.accepts(&json!({"action": "accept", "content": {"a": 1}})));
        assert!(!q.accepts(&json!(12345)));
        let r = Question::roots("r");
        assert!(r.accepts(&json!({"roots": [{"uri": "file:///x"}]})));
        assert!(!r.accepts(&json!({"action": "accept"})));
    }
}
