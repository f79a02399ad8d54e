//! Stage 11: ask a person when the call needs it.
//!
//! The tool says per call whether approval is needed ([`toolgate_core::CallSafety::approval`]);
//! the mode adjusts that (`untrusted` asks for every call that is not read-only, by the tool's
//! annotation or the call's own [`toolgate_core::CallSafety::read_only`]; `never` asks nothing).
//! When a person must be asked and no [`Approver`] is attached (no terminal, no client that can
//! ask), the call is refused with a message saying what needed approval and how to grant it.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_core::{ApprovalRequirement, CallSafety, Identity, ToolError, ToolSpec};
use toolgate_store::{Grant, GrantStore};

use crate::config::ApprovalMode;

/// What a person is asked to approve.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// The call id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The parameters, sensitive values redacted.
    pub params: Value,
    /// The normalized thing that will run (for `exec`, the commands after unwrapping).
    pub subject: Option<String>,
    /// Why approval is asked.
    pub reason: String,
    /// Who is asking.
    pub identity: Identity,
    /// The SHA-256 (hex) of the exact parameters, secrets included (never shown): a decision
    /// applies to these parameters only. Set by the approval stage.
    pub digest: String,
    /// The policy revision in force ([`crate::Gate::policy_revision`]); a decision made under
    /// another revision does not apply.
    pub policy_revision: String,
    /// The batch the call belongs to (one model turn's calls that wait together), if known.
    pub batch: Option<String>,
    /// How long the gate waits for the answer (`[approval] timeout_secs`); a channel that
    /// waits longer is cut off with "no answer". Set by the approval stage.
    #[serde(skip)]
    pub wait: Duration,
    /// The approvals inbox entry whose decision answered, set by the inbox when one did (the
    /// call's audit trace names it).
    #[serde(skip)]
    pub entry: Arc<std::sync::OnceLock<i64>>,
    /// Who decided, set by the approvals inbox with [`ApprovalRequest::entry`]: what a forwarded
    /// call tells the node it goes to (only an inbox decision travels).
    #[serde(skip)]
    pub decided_by: Arc<std::sync::OnceLock<String>>,
}

impl fmt::Display for ApprovalRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "agent `{}` (user {}) wants to run `{}`", self.identity.agent, self.identity.user, self.tool)?;
        writeln!(f, "  why: {}", self.reason)?;
        match &self.subject {
            Some(subject) => writeln!(f, "  what: {subject}"),
            None => writeln!(f, "  parameters: {}", self.params),
        }
    }
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this call and every later call with the same subject, for this user and agent.
    AllowAlways,
    /// Do not run it; the message reaches the model.
    Deny {
        /// Why, in the person's words.
        message: Option<String>,
    },
    /// Nobody has decided yet, and the call cannot wait longer: it is refused with "waiting
    /// for approval N", and a retry with the same arguments resumes from the decision.
    Waiting {
        /// The inbox entry.
        approval: i64,
        /// Where a person decides it, when the server has a page for it.
        url: Option<String>,
        /// When it expires (Unix ms).
        expires_ms: i64,
    },
}

/// A channel that can ask a person: a terminal prompt, an MCP client's elicitation, a web page.
#[async_trait::async_trait]
pub trait Approver: Send + Sync + fmt::Debug {
    /// Asks. `None` means this channel cannot ask anyone right now (the call is then refused
    /// with instructions, never run).
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer>;
}

/// The approval stage's state: the mode, the channel, and the "allow always" grants.
///
/// Grants live in the state database when there is one (they survive restarts and are listed
/// and revoked with `toolgate approvals`), otherwise in memory for the gate's lifetime.
#[derive(Debug)]
pub(crate) struct ApprovalStage {
    mode: ApprovalMode,
    timeout: Duration,
    approver: Option<Arc<dyn Approver>>,
    store: Option<Arc<dyn GrantStore>>,
    in_memory: Mutex<HashSet<(String, String, String, String)>>,
}

impl ApprovalStage {
    pub(crate) fn new(
        mode: ApprovalMode,
        timeout: Duration,
        approver: Option<Arc<dyn Approver>>,
        store: Option<Arc<dyn GrantStore>>,
    ) -> Self {
        ApprovalStage { mode, timeout, approver, store, in_memory: Mutex::new(HashSet::new()) }
    }

    /// What the mode makes of the tool's own requirement.
    fn requirement(&self, spec: &ToolSpec, safety: &CallSafety) -> ApprovalRequirement {
        match self.mode {
            ApprovalMode::Never => ApprovalRequirement::Never,
            ApprovalMode::OnRequest => safety.approval,
            ApprovalMode::Untrusted if spec.annotations.read_only || safety.read_only => safety.approval,
            ApprovalMode::Untrusted => safety.approval.max(ApprovalRequirement::UnlessAutoApproved),
        }
    }

    /// How long a call may wait for its answer (`[approval] timeout_secs`).
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Returns the trace line for the audit log, or the error that stops the call.
    /// `approved_elsewhere`: the call was forwarded here by the node whose gate had a person
    /// approve it (its one-call key says so, for these parameters): it is not asked again.
    pub(crate) async fn check(
        &self,
        spec: &ToolSpec,
        safety: &CallSafety,
        params: &Value,
        approved_elsewhere: bool,
        request: impl FnOnce(String) -> ApprovalRequest,
    ) -> Result<&'static str, ToolError> {
        let requirement = self.requirement(spec, safety);
        if requirement == ApprovalRequirement::Never {
            return Ok("approval: not needed");
        }
        if approved_elsewhere {
            return Ok(APPROVED_ELSEWHERE);
        }
        let reason = safety.approval_reason.as_deref().map_or_else(
            || match self.mode {
                ApprovalMode::Untrusted => {
                    "approval mode `untrusted` asks before any call that is not read-only".to_owned()
                }
                _ => format!("`{}` asks for approval before it runs", spec.name),
            },
            str::to_owned,
        );
        let mut request = request(reason);
        request.digest = params_digest(params);
        request.wait = self.timeout;
        let key = (
            request.identity.user.clone(),
            request.identity.agent.clone(),
            request.tool.clone(),
            toolgate_store::approval_grant_subject(request.subject.as_deref(), &request.digest),
        );
        if requirement == ApprovalRequirement::UnlessAutoApproved && self.granted(&key) {
            return Ok("approval: allowed always earlier");
        }
        let how = "run it from `toolgate call` on a terminal to be asked, or change `[approval] mode` in toolgate.toml";
        let Some(approver) = &self.approver else {
            return Err(ToolError::NeedsApproval { tool: spec.name.clone(), reason: request.reason, how: how.into() });
        };
        let answer = match tokio::time::timeout(self.timeout, approver.ask(&request)).await {
            Ok(Some(answer)) => answer,
            Ok(None) => {
                return Err(ToolError::NeedsApproval {
                    tool: spec.name.clone(),
                    reason: request.reason,
                    how: how.into(),
                });
            }
            Err(_) => ApprovalAnswer::Deny { message: Some(format!("no answer within {} s", self.timeout.as_secs())) },
        };
        match answer {
            ApprovalAnswer::AllowOnce => Ok("approval: allowed once"),
            ApprovalAnswer::AllowAlways => {
                let shown = request.subject.clone().unwrap_or_else(|| request.params.to_string());
                self.grant(key, shown);
                Ok("approval: allowed always")
            }
            ApprovalAnswer::Deny { message } => Err(ToolError::ApprovalDenied { tool: spec.name.clone(), message }),
            ApprovalAnswer::Waiting { approval, url, expires_ms } => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                let left = (expires_ms - now).max(0) / 1000;
                let at = url.map(|u| format!(" ({u})")).unwrap_or_default();
                Err(ToolError::NeedsApproval {
                    tool: spec.name.clone(),
                    reason: format!("waiting for approval {approval}: {}", request.reason),
                    how: format!(
                        "A person decides it in the approvals inbox{at} (`toolgate approvals pending`, GET /api/approvals); \
                         call again with exactly the same arguments once it is decided; it expires in {left} s"
                    ),
                })
            }
        }
    }

    fn granted(&self, key: &(String, String, String, String)) -> bool {
        if let Some(store) = &self.store {
            match store.grant_exists(&key.0, &key.1, &key.2, &key.3) {
                Ok(found) => return found,
                // Failing closed: an unreadable grant means asking again, never running unasked.
                Err(e) => tracing::error!(error = %e, "cannot read approval grants; asking again"),
            }
        }
        self.in_memory.lock().unwrap_or_else(|e| e.into_inner()).contains(key)
    }

    fn grant(&self, key: (String, String, String, String), shown: String) {
        if let Some(store) = &self.store {
            let created_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            let grant = Grant {
                id: 0,
                user: key.0.clone(),
                agent: key.1.clone(),
                tool: key.2.clone(),
                subject: key.3.clone(),
                shown,
                created_ms,
            };
            if let Err(e) = store.grant_add(&grant) {
                tracing::error!(error = %e, "cannot save an approval grant; it holds until the gate stops");
            }
        }
        self.in_memory.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
    }
}

/// The trace line of a call approved on the node that forwarded it (the next line says how).
pub(crate) const APPROVED_ELSEWHERE: &str = "approval: approved on the node that forwarded the call";

/// The SHA-256 (hex) of the exact parameters (`serde_json` writes object keys in order).
pub(crate) fn params_digest(params: &Value) -> String {
    Sha256::digest(params.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
