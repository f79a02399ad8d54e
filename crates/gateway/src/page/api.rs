//! `/api/access`: access requests as JSON, beside `/api/approvals`, for scripts and for the
//! page. A request authenticates as the rest of `/api/` does in gateway mode — an API key
//! (`Authorization: Bearer tg_...`, or the OIDC provider's access token) — or with the page's
//! session cookie, whose POSTs must carry the session's CSRF token in `X-CSRF-Token` (a page
//! of another site can make the browser send the cookie, never read the token).
//!
//! - `GET /api/access`: `{"requests": [...]}`, newest first: the caller's own, and those the
//!   caller may decide (everyone's for an admin, their groups' members' for a group admin);
//!   `?status=pending|approved|rejected` narrows them. Each says `may_decide`.
//! - `GET /api/access/{id}`: one of those.
//! - `POST /api/access` `{"tool"?, "server"?, "reason"}`: files a request (201; 200 with
//!   `"new": false` when the same one is pending already).
//! - `POST /api/access/{id}/approve` `{"tools"?: [...], "expires"?: "30d", "message"?}`: the
//!   grant is written in the same transaction; `tools` may only narrow what was asked.
//! - `POST /api/access/{id}/reject` `{"message"?}`.
//!
//! - `GET /api/grants`: `{"grants": [...]}`, every grant; `POST /api/grants` `{"to", "server"?,
//!   "tools"?, "deny_tools"?, "mode"?, "args"?, "expires"?, "note"?}`: a grant, read and checked
//!   as `toolgate admin grant add` does, granted by the caller (201 `{"grant"}`). An admin's
//!   only (`403` for anyone else); a bad field `400` with what is wrong.
//!
//! Who may decide is the grants' rule (an admin, or an admin of the requester's group; never
//! the requester, never an agent).

use std::net::IpAddr;

use http::{Response, header};
use serde_json::{Value, json};
use toolgate_mcp::{Authenticator, HttpBody, RouteRequest, reply};
use toolgate_store::{AccessRequest, AccessStatus};

use super::{Inner, SESSION_COOKIE, audit, cookie};
use crate::signin::same_text;
use crate::{GatewayError, GrantInput, Narrowing, shown_request};

/// Who sent an API request, as the decisions need it.
struct Asker {
    /// The user the request acts for (an agent's owner).
    user: String,
    /// Who decides: the agent itself for an agent's key (agents never decide).
    by: String,
    /// A gateway admin.
    admin: bool,
}

fn error(status: u16, message: impl Into<String>) -> Response<HttpBody> {
    reply::json(status, &json!({"error": message.into()}))
}

fn refused(e: &GatewayError) -> Response<HttpBody> {
    let status = match e {
        GatewayError::NotApprover(_) => 403,
        GatewayError::NoRequest(_) => 404,
        GatewayError::Decided(_) => 409,
        GatewayError::Store(_) | GatewayError::Random(_) => 500,
        _ => 400,
    };
    error(status, e.to_string())
}

impl Inner {
    /// Who `req` comes from: its bearer credential, or its session cookie (and then, for a
    /// POST, its CSRF header); or the refusal's status and message.
    fn asker(
        &self,
        req: &RouteRequest,
        authenticator: &dyn Authenticator,
        peer: IpAddr,
    ) -> Result<Asker, (u16, String)> {
        if let Some(authorization) = req.headers.get(header::AUTHORIZATION) {
            let caller = authenticator
                .authenticate(Some(authorization.as_bytes()), peer)
                .map_err(|refusal| (refusal.status, refusal.message))?;
            let by = caller.agent.clone().unwrap_or_else(|| caller.user.clone());
            return Ok(Asker { user: caller.user, by, admin: caller.admin });
        }
        let Some(session) = cookie(req, SESSION_COOKIE).and_then(|token| self.signin.session(token)) else {
            return Err((
                401,
                "send an API key (`Authorization: Bearer tg_...`; `toolgate admin key create --user NAME`) \
                 or sign in to the page first"
                    .to_owned(),
            ));
        };
        if req.method == http::Method::POST {
            let sent = req.headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !same_text(sent, &session.csrf) {
                return Err((
                    403,
                    "with the page's session cookie, a POST needs the session's CSRF token in `X-CSRF-Token`"
                        .to_owned(),
                ));
            }
        }
        Ok(Asker { user: session.user.clone(), by: session.user, admin: session.admin })
    }

    /// Whether `asker` may see `request`: their own, or one they may decide.
    fn visible(&self, asker: &Asker, request: &AccessRequest) -> (bool, bool) {
        let may_decide = self.grants.may_decide(Some(&asker.by), request).is_ok();
        (request.user == asker.user || request.requester == asker.user || may_decide, may_decide)
    }

    pub(super) fn api(&self, req: &RouteRequest, authenticator: &dyn Authenticator) -> Response<HttpBody> {
        let asker = match self.asker(req, authenticator, req.peer.ip()) {
            Ok(asker) => asker,
            Err((status, message)) => return error(status, message),
        };
        if req.uri.path().starts_with("/api/grants") {
            return self.grants_api(req, &asker);
        }
        let rest = req.uri.path().strip_prefix("/api/access").unwrap_or_default().trim_end_matches('/');
        let body: Value = if req.body.is_empty() {
            json!({})
        } else {
            match serde_json::from_slice(&req.body) {
                Ok(v @ Value::Object(_)) => v,
                _ => return error(400, "the body must be a JSON object"),
            }
        };
        let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        match (req.method.as_str(), rest) {
            ("GET", "") => {
                let query = super::fields(req.uri.query().unwrap_or_default().as_bytes());
                let status = match super::field(&query, "status") {
                    "" => None,
                    word => match AccessStatus::parse(word) {
                        Some(s) => Some(s),
                        None => return error(400, format!("unknown status `{word}`: pending, approved or rejected")),
                    },
                };
                let all = match self.grants.requests(status, (!asker.admin).then_some(asker.user.as_str())) {
                    Ok(all) if asker.admin => all,
                    // A group admin sees their members' requests too.
                    Ok(_) => match self.grants.requests(status, None) {
                        Ok(all) => all,
                        Err(e) => return refused(&e),
                    },
                    Err(e) => return refused(&e),
                };
                let rows: Vec<Value> = all
                    .iter()
                    .filter_map(|r| {
                        let (visible, may_decide) = self.visible(&asker, r);
                        visible.then(|| with_may_decide(r, may_decide))
                    })
                    .take(500)
                    .collect();
                reply::json(200, &json!({"requests": rows}))
            }
            ("GET", id) => {
                let Some(request) = self.request_of(id) else {
                    return error(404, format!("no access request `{}` of yours", id.trim_start_matches('/')));
                };
                match self.visible(&asker, &request) {
                    (true, may_decide) => reply::json(200, &json!({"request": with_may_decide(&request, may_decide)})),
                    // Someone else's is "not found", as one that never existed.
                    (false, _) => error(404, format!("no access request `{}` of yours", request.id)),
                }
            }
            ("POST", "") => {
                let agent = (asker.by != asker.user).then_some(asker.by.as_str());
                let reason = body.get("reason").and_then(Value::as_str).unwrap_or_default();
                match self.grants.request(&asker.user, agent, text("server"), text("tool"), reason) {
                    Ok((request, new)) => reply::json(
                        if new { 201 } else { 200 },
                        &json!({"request": shown_request(&request), "new": new}),
                    ),
                    Err(e) => refused(&e),
                }
            }
            ("POST", action) => {
                let (id, approve) = match action.trim_start_matches('/').rsplit_once('/') {
                    Some((id, "approve")) => (id, true),
                    Some((id, "reject")) => (id, false),
                    _ => return error(404, "use POST /api/access, /api/access/ID/approve or /api/access/ID/reject"),
                };
                let Ok(id) = id.parse::<i64>() else { return error(400, format!("`{id}` is not a request number")) };
                let message = text("message");
                let done = if approve {
                    let tools = match body.get("tools") {
                        None | Some(Value::Null) => None,
                        Some(Value::Array(list)) => {
                            let names: Option<Vec<String>> =
                                list.iter().map(|t| t.as_str().map(|s| s.trim().to_owned())).collect();
                            match names {
                                Some(names) => Some(names),
                                None => return error(400, "`tools` must be a list of tool names"),
                            }
                        }
                        Some(_) => return error(400, "`tools` must be a list of tool names"),
                    };
                    let expires_ms = match text("expires") {
                        None => None,
                        Some(word) => match audit::duration_ms(word) {
                            Some(ms) => Some(crate::admin::now_ms().saturating_add(ms)),
                            None => return error(400, format!("`{word}` is not a duration (30d, 12h, 90m)")),
                        },
                    };
                    self.grants.approve(id, Some(&asker.by), &Narrowing { tools, expires_ms }, message)
                } else {
                    self.grants.reject(id, Some(&asker.by), message)
                };
                match done {
                    Ok(request) => {
                        self.data.access_decided(&request);
                        reply::json(200, &json!({"request": shown_request(&request)}))
                    }
                    Err(e) => refused(&e),
                }
            }
            _ => error(405, "use GET or POST"),
        }
    }

    /// `/api/grants`: an admin's (never an agent's: agents are never admins) list and new
    /// grants, read and checked by the same code as `toolgate admin grant add`.
    fn grants_api(&self, req: &RouteRequest, asker: &Asker) -> Response<HttpBody> {
        if !asker.admin {
            return error(403, "only the gateway's admins may list or add grants; `request_access` asks for one");
        }
        let rest = req.uri.path().strip_prefix("/api/grants").unwrap_or_default().trim_end_matches('/');
        match (req.method.as_str(), rest) {
            ("GET", "") => match self.grants.list(None) {
                Ok(all) => reply::json(200, &json!({"grants": all})),
                Err(e) => refused(&e),
            },
            ("POST", "") => {
                let input: GrantInput = match serde_json::from_slice(&req.body) {
                    Ok(input) => input,
                    Err(e) => {
                        return error(
                            400,
                            format!(
                                "the body must be a JSON object of a grant ({{\"to\", \"server\"?, \"tools\"?, \
                                 \"deny_tools\"?, \"mode\"?, \"args\"?, \"expires\"?, \"note\"?}}): {e}"
                            ),
                        );
                    }
                };
                let added = input
                    .grant(&asker.by, crate::admin::now_ms())
                    .and_then(|grant| self.grants.add(&grant))
                    .and_then(|id| self.grants.store().tool_grant_get(id).map_err(GatewayError::from));
                match added {
                    Ok(Some(grant)) => {
                        tracing::info!(grant = grant.id, by = %asker.by, subject = %grant.subject, "grant added over the API");
                        reply::json(201, &json!({"grant": grant}))
                    }
                    // Revoked by someone else in the instant between.
                    Ok(None) => error(409, "the grant was removed as it was added"),
                    Err(e) => refused(&e),
                }
            }
            _ => error(405, "use GET or POST /api/grants"),
        }
    }

    fn request_of(&self, id: &str) -> Option<AccessRequest> {
        let id = id.trim_start_matches('/').parse::<i64>().ok()?;
        self.grants.store().access_get(id).ok().flatten()
    }
}

fn with_may_decide(request: &AccessRequest, may_decide: bool) -> Value {
    let mut shown = shown_request(request);
    shown["may_decide"] = json!(may_decide && request.status == AccessStatus::Pending);
    shown
}
