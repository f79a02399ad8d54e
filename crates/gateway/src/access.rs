//! Access requests: a user (or an agent, through the `request_access` tool) asks for a tool or
//! a bridged server with a reason; an approver approves (optionally narrowing the tools and
//! setting an expiry), which writes the grant in the same transaction, or rejects. A pending
//! request asked again is the same request.
//!
//! Who may decide: a gateway admin, or an admin of a group the requester is in; never the
//! requester (nor an agent, nor for its owner). The request is for the user the call acts for:
//! an agent's request is filed for its owning user, naming the agent in the reason.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, Tool, ToolError, ToolOutput, ToolSpec, async_trait};
use toolgate_store::{AccessDecision, AccessRequest, AccessStatus, GrantMode, PrincipalKind, ToolGrant};

use crate::admin::now_ms;
use crate::grants::{Grants, check_pattern, check_server};
use crate::{GatewayError, check_name};

/// The longest reason kept.
const MAX_REASON: usize = 500;

/// What an approval may narrow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowing {
    /// Only these tools (names or patterns) instead of what was asked.
    pub tools: Option<Vec<String>>,
    /// Until then.
    pub expires_ms: Option<i64>,
}

/// A reason as stored and shown: control characters become spaces, at most 500 characters.
fn clean_reason(reason: &str) -> Result<String, GatewayError> {
    let cleaned: String =
        reason.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_REASON).collect::<String>();
    let cleaned = cleaned.trim().to_owned();
    if cleaned.is_empty() {
        return Err(GatewayError::BadScope("say why you need it: the reason is what the approver reads".to_owned()));
    }
    Ok(cleaned)
}

impl Grants {
    /// Files a request of `user` (asked by its `agent`, when the call names one of its agents)
    /// for `tool` of toolgate's own tools or of `server`. Returns the request and whether it
    /// is new (a pending one for the same thing is returned as it is).
    pub fn request(
        &self,
        user: &str,
        agent: Option<&str>,
        server: Option<&str>,
        tool: Option<&str>,
        reason: &str,
    ) -> Result<(AccessRequest, bool), GatewayError> {
        check_name(user)?;
        match self.identity().principal_get(user)? {
            Some(p) if !p.disabled => {}
            _ => return Err(GatewayError::Missing { kind: "user", name: user.to_owned() }),
        }
        if let Some(server) = server {
            check_server(server)?;
        }
        match tool {
            Some(tool) => {
                check_pattern(tool)?;
                // Asked for by a model: a pattern here would become, once approved as asked, a
                // grant of every tool it matches.
                if tool.contains('*') {
                    return Err(GatewayError::BadScope(format!(
                        "name one tool, not a pattern (`{tool}`): an admin may still grant a pattern"
                    )));
                }
            }
            None if server.is_none() => {
                return Err(GatewayError::BadScope("name a `tool`, a `server`, or both".to_owned()));
            }
            None => {}
        }
        let mut reason = clean_reason(reason)?;
        let agent = agent.filter(|a| {
            *a != user
                && self
                    .identity()
                    .principal_get(a)
                    .ok()
                    .flatten()
                    .is_some_and(|p| p.kind == PrincipalKind::Agent && p.owner.as_deref() == Some(user))
        });
        if let Some(agent) = agent {
            reason = format!("[asked by agent {agent}] {reason}");
        }
        let request = AccessRequest {
            id: 0,
            requester: user.to_owned(),
            user: user.to_owned(),
            server: server.map(str::to_owned),
            tool: tool.map(str::to_owned),
            reason,
            status: AccessStatus::Pending,
            created_ms: now_ms(),
            decided_by: None,
            decided_ms: None,
            message: None,
            grant_id: None,
            notify_error: None,
            notify_failed_ms: None,
        };
        let (id, new) = self.store().access_request(&request)?;
        let stored = self.store().access_get(id)?.ok_or(GatewayError::NoRequest(id))?;
        Ok((stored, new))
    }

    /// Requests with `status` (all when `None`), of `requester` (everyone's when `None`),
    /// newest first.
    pub fn requests(
        &self,
        status: Option<AccessStatus>,
        requester: Option<&str>,
    ) -> Result<Vec<AccessRequest>, GatewayError> {
        let who = requester.map(|r| vec![r.to_owned()]);
        Ok(self.store().access_requests(status, who.as_deref())?)
    }

    /// Whether `by` may decide `request`: `Ok` or why not. `None` for `by` is the machine's
    /// operator (`toolgate admin` on the gateway's workspace), who may decide every request.
    pub(crate) fn may_decide(&self, by: Option<&str>, request: &AccessRequest) -> Result<(), GatewayError> {
        let Some(by) = by else { return Ok(()) };
        let refuse =
            |why: &str| Err(GatewayError::NotApprover(format!("{by} may not decide request {}: {why}", request.id)));
        if by == request.requester || by == request.user {
            return refuse("nobody approves their own request");
        }
        let Some(approver) = self.identity().principal_get(by)?.filter(|p| !p.disabled) else {
            return refuse("not an enabled user of this gateway");
        };
        if approver.kind != PrincipalKind::User {
            return refuse("only a person (an admin, or an admin of the requester's group) decides");
        }
        if approver.admin {
            return Ok(());
        }
        let theirs: Vec<String> = self.identity().memberships(&request.user)?.into_iter().map(|m| m.group).collect();
        let admin_of_theirs =
            self.identity().memberships(by)?.iter().any(|m| m.group_admin && theirs.contains(&m.group));
        if admin_of_theirs {
            Ok(())
        } else {
            refuse("only a gateway admin or an admin of the requester's group decides")
        }
    }

    /// Approves request `id` as `by` (`None`: the machine's operator), narrowed by `narrow`:
    /// the grant is written in the same transaction. Deciding a decided request is an error
    /// that says how it was decided.
    pub fn approve(
        &self,
        id: i64,
        by: Option<&str>,
        narrow: &Narrowing,
        message: Option<&str>,
    ) -> Result<AccessRequest, GatewayError> {
        let request = self.pending(id)?;
        self.may_decide(by, &request)?;
        let tools = match &narrow.tools {
            Some(tools) => {
                narrows(&request, tools)?;
                tools.clone()
            }
            None => request.tool.iter().cloned().collect(),
        };
        if narrow.expires_ms.is_some_and(|at| at <= now_ms()) {
            return Err(GatewayError::BadScope(
                "the grant's expiry is in the past; give a duration such as 30d".into(),
            ));
        }
        let by_name = by.unwrap_or("operator").to_owned();
        let grant = ToolGrant {
            id: 0,
            subject: request.user.clone(),
            server: request.server.clone(),
            tool_allow: tools,
            tool_deny: Vec::new(),
            enabled: true,
            config_overrides: json!({}),
            mode: GrantMode::Allow,
            arg_rule: None,
            expires_ms: narrow.expires_ms,
            granted_by: by_name.clone(),
            request: Some(id),
            note: format!("access request {id}"),
            created_ms: now_ms(),
        };
        crate::grants::check(self.identity().as_ref(), &grant)?;
        self.decide(AccessDecision {
            id,
            grant: Some(grant),
            by: by_name,
            at_ms: now_ms(),
            message: message.map(str::to_owned),
        })
    }

    /// Rejects request `id` as `by`.
    pub fn reject(&self, id: i64, by: Option<&str>, message: Option<&str>) -> Result<AccessRequest, GatewayError> {
        let request = self.pending(id)?;
        self.may_decide(by, &request)?;
        let by = by.unwrap_or("operator").to_owned();
        self.decide(AccessDecision { id, grant: None, by, at_ms: now_ms(), message: message.map(str::to_owned) })
    }

    /// Records that the requester of decided request `id` could not be told of the decision
    /// (`error`: why their webhook failed, kept to 500 characters): kept on the request, so the
    /// page, `/api/access` and `request_access {"status": true}` show it. The request as it
    /// now stands.
    pub fn notify_failed(&self, id: i64, error: &str) -> Result<AccessRequest, GatewayError> {
        let error: String = error.chars().map(|c| if c.is_control() { ' ' } else { c }).take(500).collect();
        let at = now_ms();
        if !self.store().access_notify_failed(id, &error, at)? {
            return Err(GatewayError::NoRequest(id));
        }
        let request = self.store().access_get(id)?.ok_or(GatewayError::NoRequest(id))?;
        if let Some(audit) = self.audit() {
            let by = request.decided_by.as_deref().unwrap_or("someone");
            let decision =
                format!("access request {id} {} by {by}; the requester's webhook failed", request.status.as_str());
            audit.record(request_row(&request, NOTIFY_FAILED_TOOL, at, "notify_failed", decision, Some(error)));
        }
        Ok(request)
    }

    fn pending(&self, id: i64) -> Result<AccessRequest, GatewayError> {
        let request = self.store().access_get(id)?.ok_or(GatewayError::NoRequest(id))?;
        if request.status != AccessStatus::Pending {
            return Err(decided_already(&request));
        }
        Ok(request)
    }

    fn decide(&self, decision: AccessDecision) -> Result<AccessRequest, GatewayError> {
        let wanted = if decision.grant.is_some() { AccessStatus::Approved } else { AccessStatus::Rejected };
        let decided = self.store().access_decide(&decision)?.ok_or(GatewayError::NoRequest(decision.id))?;
        // Another approver may have decided between the read and the transaction.
        if decided.decided_by.as_deref() != Some(decision.by.as_str()) || decided.status != wanted {
            return Err(decided_already(&decided));
        }
        if decided.status == AccessStatus::Approved {
            self.changed(&decided.user);
        }
        if let Some(audit) = self.audit() {
            let by = decided.decided_by.as_deref().unwrap_or("someone");
            let made = decided.grant_id.map(|g| format!(", grant {g}")).unwrap_or_default();
            let decision = format!("access request {} {} by {by}{made}", decided.id, decided.status.as_str());
            let why = decided.message.clone().filter(|_| decided.status == AccessStatus::Rejected);
            let at = decided.decided_ms.unwrap_or_else(now_ms);
            audit.record(request_row(&decided, ACCESS_DECIDED_TOOL, at, decided.status.as_str(), decision, why));
        }
        Ok(decided)
    }
}

/// The tool name of an access decision's audit row.
pub const ACCESS_DECIDED_TOOL: &str = "access_decide";

/// The tool name of the row of a decision its requester could not be told of.
pub const NOTIFY_FAILED_TOOL: &str = "access_notify";

/// An audit row about `request` (`tool`: its decision, or a failed notification of it): on
/// its requester's user, so it is among their own rows on the page too.
fn request_row(
    request: &AccessRequest,
    tool: &str,
    at: i64,
    outcome: &str,
    decision: String,
    error: Option<String>,
) -> toolgate_store::AuditRecord {
    toolgate_store::AuditRecord {
        id: format!("access-{}-{tool}-{at}", request.id),
        ts_ms: at,
        user: request.user.clone(),
        agent: if request.requester == request.user { String::new() } else { request.requester.clone() },
        session: "gateway".to_owned(),
        tool: tool.to_owned(),
        params:
            json!({"request": request.id, "server": request.server, "tool": request.tool, "reason": request.reason})
                .to_string(),
        decision,
        outcome: outcome.to_owned(),
        error,
        subject: Some(format!("access request {}", request.id)),
        ..toolgate_store::AuditRecord::default()
    }
}

/// Whether `tools` narrow what `request` asked for (an approval never grants more): each is
/// the asked tool, or a tool name that the asked pattern covers. A request for a whole server
/// may be narrowed to any of its tools.
fn narrows(request: &AccessRequest, tools: &[String]) -> Result<(), GatewayError> {
    if tools.is_empty() {
        return Err(GatewayError::BadScope("narrow to at least one tool, or approve what was asked".into()));
    }
    for tool in tools {
        check_pattern(tool)?;
        let within = match &request.tool {
            None => request.server.is_some(),
            Some(asked) => tool == asked || (!tool.contains('*') && crate::grants::glob(asked, tool)),
        };
        if !within {
            return Err(GatewayError::BadScope(format!(
                "`{tool}` is not within what request {} asked for ({}): an approval may narrow a request, not widen it",
                request.id,
                what(request)
            )));
        }
    }
    Ok(())
}

fn decided_already(request: &AccessRequest) -> GatewayError {
    GatewayError::Decided(format!(
        "request {} was {} by {} already",
        request.id,
        request.status.as_str(),
        request.decided_by.as_deref().unwrap_or("someone")
    ))
}

/// `request_access {tool?, server?, reason}`: asks an admin for a tool or a bridged server, or
/// (`{"status": true}`) shows the caller's requests and where they stand.
#[derive(Debug)]
pub struct RequestAccess {
    spec: ToolSpec,
    grants: Grants,
}

impl RequestAccess {
    /// The tool, filing requests in `grants`' store.
    pub fn tool(grants: Grants) -> Arc<dyn Tool> {
        let spec = ToolSpec::new(
            crate::grants::REQUEST_ACCESS,
            "Ask the gateway's admins for access to a tool or an MCP server you are not granted \
             (a call of it was refused as not granted). Give `tool` (its name) and/or `server`, and \
             a `reason`. The request waits for an admin; once approved, the tool works on your next \
             call. With `status: true`, lists your requests and where they stand.",
            json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "description": "The tool's name (or a `*` pattern)", "maxLength": 128},
                    "server": {"type": "string", "description": "A bridged MCP server's name", "maxLength": 32},
                    "reason": {"type": "string", "description": "Why you need it (the admin reads this)", "maxLength": 2000},
                    "status": {"type": "boolean", "description": "Show your requests instead of filing one"}
                },
                "additionalProperties": false
            }),
        )
        .group("gateway")
        .annotations(Annotations::LOCAL_WRITE)
        .trusted_output();
        Arc::new(RequestAccess { spec, grants })
    }
}

#[async_trait]
impl Tool for RequestAccess {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let user = ctx.identity.user.as_str();
        let text = |key: &str| params.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        let fail = |e: GatewayError| ToolError::invalid("request_access", "", e.to_string());
        if params.get("status").and_then(Value::as_bool) == Some(true) {
            let mine = self.grants.requests(None, Some(user)).map_err(fail)?;
            let rows: Vec<Value> = mine.iter().take(50).map(shown).collect();
            let text = if rows.is_empty() {
                "you have no access requests".to_owned()
            } else {
                mine.iter()
                    .take(50)
                    .map(|r| {
                        let failed = r
                            .notify_error
                            .as_deref()
                            .map(|e| format!(" (your webhook could not be told of this decision: {e})"))
                            .unwrap_or_default();
                        format!(
                            "#{} {} {}: {}{failed}",
                            r.id,
                            what(r),
                            r.status.as_str(),
                            r.message.as_deref().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            return Ok(ToolOutput::text(text).with_structured(json!({"requests": rows})));
        }
        let agent = Some(ctx.identity.agent.as_str()).filter(|a| !a.is_empty());
        let (request, new) = self
            .grants
            .request(user, agent, text("server"), text("tool"), text("reason").unwrap_or_default())
            .map_err(fail)?;
        let said = if new {
            format!(
                "access request #{} for {} filed; an admin decides. Call request_access with \
                 {{\"status\": true}} to see where it stands, and retry the tool once it is approved",
                request.id,
                what(&request)
            )
        } else {
            format!("access request #{} for {} is pending already; an admin decides", request.id, what(&request))
        };
        Ok(ToolOutput::text(said).with_structured(shown(&request)))
    }
}

fn what(r: &AccessRequest) -> String {
    match (&r.server, &r.tool) {
        (Some(s), Some(t)) => format!("tool `{t}` of server `{s}`"),
        (Some(s), None) => format!("server `{s}`"),
        (None, Some(t)) => format!("tool `{t}`"),
        (None, None) => "nothing".to_owned(),
    }
}

/// A request as its requester sees it.
pub fn shown(r: &AccessRequest) -> Value {
    json!({
        "id": r.id, "user": r.user, "server": r.server, "tool": r.tool, "reason": r.reason,
        "status": r.status.as_str(), "created_ms": r.created_ms, "decided_by": r.decided_by,
        "decided_ms": r.decided_ms, "message": r.message, "grant": r.grant_id,
        "notify_error": r.notify_error, "notify_failed_ms": r.notify_failed_ms,
    })
}

#[cfg(test)]
mod tests {
    use toolgate_store::{Membership, Store};

    use super::*;
    use crate::Admin;
    use crate::grants::ToolRef;

    fn setup() -> (tempfile::TempDir, Grants, Admin) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        let admin = Admin::new(store.clone());
        admin.user_add("lee", true, &[]).unwrap();
        admin.user_add("bob", false, &["dev".to_owned()]).unwrap();
        admin.user_add("kim", false, &["dev".to_owned()]).unwrap();
        admin.user_add("zoe", false, &["ops".to_owned()]).unwrap();
        admin.agent_add("bob-ci", "bob").unwrap();
        (dir, Grants::new(store.clone(), store, Vec::new()), admin)
    }

    const READ: ToolRef<'static> = ToolRef { server: None, name: "read" };

    #[test]
    fn a_request_approved_is_a_grant_and_a_duplicate_is_one_request() {
        let (_dir, grants, _) = setup();
        let (r, new) = grants.request("bob", None, None, Some("read"), "to read the docs").unwrap();
        assert!(new);
        let (again, new) = grants.request("bob", Some("bob-ci"), None, Some("read"), "again").unwrap();
        assert!(!new && again.id == r.id, "one pending request");
        assert!(!grants.access("bob", None).unwrap().decide(READ).allowed());
        let approved = grants.approve(r.id, Some("lee"), &Narrowing::default(), Some("ok")).unwrap();
        assert_eq!(approved.status, AccessStatus::Approved);
        assert!(grants.access("bob", None).unwrap().decide(READ).allowed(), "granted at once");
        let e = grants.reject(r.id, Some("lee"), None).unwrap_err().to_string();
        assert!(e.contains("approved by lee already"), "{e}");
    }

    #[test]
    fn nobody_approves_their_own_request_or_one_outside_their_groups() {
        let (_dir, grants, admin) = setup();
        let (r, _) = grants.request("bob", None, None, Some("read"), "please").unwrap();
        for by in ["bob", "bob-ci", "zoe", "kim", "nobody", "dev"] {
            let e = grants.approve(r.id, Some(by), &Narrowing::default(), None).unwrap_err();
            assert!(matches!(e, GatewayError::NotApprover(_)), "{by}: {e}");
        }
        // An admin of bob's group may; still not for his own request.
        admin.groups_of("kim").unwrap();
        let store = grants.identity().clone();
        store.membership_set(&Membership { user: "kim".into(), group: "dev".into(), group_admin: true }).unwrap();
        let (own, _) = grants.request("kim", None, None, Some("exec"), "mine").unwrap();
        assert!(matches!(
            grants.approve(own.id, Some("kim"), &Narrowing::default(), None),
            Err(GatewayError::NotApprover(_))
        ));
        let narrowed = Narrowing { tools: Some(vec!["read".into()]), expires_ms: Some(now_ms() + 60_000) };
        let ok = grants.approve(r.id, Some("kim"), &narrowed, None).unwrap();
        let grant = grants.store().tool_grant_get(ok.grant_id.unwrap()).unwrap().unwrap();
        assert_eq!((grant.granted_by.as_str(), grant.request, grant.expires_ms.is_some()), ("kim", Some(r.id), true));
        assert!(grants.list(Some("bob")).unwrap().len() == 1);
    }

    #[test]
    fn odd_requests_are_refused_or_kept_harmless() {
        let (_dir, grants, _) = setup();
        for (server, tool, reason) in [
            (None, Some("../../etc/passwd"), "x"),
            (None, Some("<script>alert(1)</script>"), "x"),
            (Some("a b"), None, "x"),
            (None, None, "x"),
            (None, Some("read"), " \n\t "),
        ] {
            assert!(grants.request("bob", None, server, tool, reason).is_err(), "{server:?} {tool:?} {reason:?}");
        }
        assert!(grants.request("../bob", None, None, Some("read"), "x").is_err());
        assert!(grants.request("ghost", None, None, Some("read"), "x").is_err());
        let long = format!("line\u{1b}[31m\nnext{}", "x".repeat(900));
        let (r, _) = grants.request("bob", None, None, Some("read"), &long).unwrap();
        assert!(r.reason.chars().all(|c| !c.is_control()) && r.reason.chars().count() <= MAX_REASON, "{:?}", r.reason);
        // An agent's name in the reason only when it is the user's own agent.
        let (r, _) = grants.request("bob", Some("bob-ci"), None, Some("exec"), "ci").unwrap();
        assert!(r.reason.starts_with("[asked by agent bob-ci]"), "{}", r.reason);
        let (r, _) = grants.request("bob", Some("main"), None, Some("write"), "w").unwrap();
        assert_eq!(r.reason, "w");
    }
}
