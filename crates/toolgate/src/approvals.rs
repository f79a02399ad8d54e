//! Approval channels beyond the terminal: a queue of pending requests that a person answers
//! over the HTTP API (`GET /api/approvals`, `POST /api/approvals/{id}`), and a chain that tries
//! channels in order (the MCP client's elicitation first, then the queue).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::{ApprovalAnswer, ApprovalRequest, Approver};

/// Approval requests waiting for a person, each resolved independently by its id.
#[derive(Debug, Default)]
pub struct PendingApprovals {
    waiting: Mutex<BTreeMap<String, (ApprovalRequest, oneshot::Sender<ApprovalAnswer>)>>,
}

impl PendingApprovals {
    /// An empty queue, shared between the gate (which asks) and the HTTP API (which answers).
    pub fn new() -> Arc<Self> {
        Arc::new(PendingApprovals::default())
    }

    /// The requests waiting now, oldest call id first.
    pub fn list(&self) -> Vec<ApprovalRequest> {
        self.lock().values().map(|(request, _)| request.clone()).collect()
    }

    /// Answers the request `id`; returns whether it was waiting.
    pub fn answer(&self, id: &str, answer: ApprovalAnswer) -> bool {
        match self.lock().remove(id) {
            Some((_, tx)) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Handles one request of the approvals API: `GET /api/approvals` lists what is pending;
    /// `POST /api/approvals/{id}` with `{"decision": "allow_once" | "allow_always" | "deny",
    /// "message": "..."}` answers one. Returns the HTTP status and a JSON body, or `None` when
    /// the path is not part of this API.
    pub fn handle_api(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        let rest = path.strip_prefix("/api/approvals")?;
        match (method, rest.trim_end_matches('/')) {
            ("GET", "") => Some((200, json!({"pending": self.list()}))),
            ("POST", id) if id.starts_with('/') && id.len() > 1 => {
                let id = &id[1..];
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Body {
                    decision: String,
                    #[serde(default)]
                    message: Option<String>,
                }
                let body: Body = match serde_json::from_slice(body) {
                    Ok(body) => body,
                    Err(e) => {
                        return Some((
                            400,
                            json!({"error": format!("invalid body: {e}; send {{\"decision\": \"allow_once\" | \"allow_always\" | \"deny\"}}")}),
                        ));
                    }
                };
                let answer = match body.decision.as_str() {
                    "allow_once" | "allow" => ApprovalAnswer::AllowOnce,
                    "allow_always" | "always" => ApprovalAnswer::AllowAlways,
                    "deny" => ApprovalAnswer::Deny { message: body.message },
                    other => {
                        return Some((
                            400,
                            json!({"error": format!("unknown decision `{other}`; use allow_once, allow_always or deny")}),
                        ));
                    }
                };
                if self.answer(id, answer) {
                    Some((200, json!({"answered": id})))
                } else {
                    Some((
                        404,
                        json!({"error": format!("no pending approval `{id}`; it may have been answered or timed out")}),
                    ))
                }
            }
            _ => Some((405, json!({"error": "use GET /api/approvals or POST /api/approvals/{id}"}))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (ApprovalRequest, oneshot::Sender<ApprovalAnswer>)>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes a request from the queue however the wait ends (answered, timed out, cancelled).
struct Withdraw<'a>(&'a PendingApprovals, String);

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

#[async_trait::async_trait]
impl Approver for PendingApprovals {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(request.id.clone(), (request.clone(), tx));
        let _withdraw = Withdraw(self, request.id.clone());
        // The gate's approval timeout bounds this wait; silence becomes a "deny" there.
        rx.await.ok()
    }
}

/// Tries each channel in order; the first that can ask answers.
#[derive(Debug)]
pub struct FirstAvailable(pub Vec<Arc<dyn Approver>>);

#[async_trait::async_trait]
impl Approver for FirstAvailable {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        for approver in &self.0 {
            if let Some(answer) = approver.ask(request).await {
                return Some(answer);
            }
        }
        None
    }
}
