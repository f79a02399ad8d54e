//! The gateway's web page at `/`: sign-in, and for every user their grants, API keys and
//! access requests; for admins also the approvals inbox (live updates over server-sent
//! events), everyone's access requests to decide, grants, keys, users and workspaces, and the
//! audit search with JSONL and CSV export.
//!
//! Server-rendered HTML, one small script (`/static/page.js`, live updates only) and one style
//! sheet, both served from here: the Content-Security-Policy allows nothing else (no inline
//! script or style), and every value is escaped (`render::esc`), since tool parameters, reasons
//! and names come from models and users. Every POST carries the session's CSRF token.
//!
//! - `render.rs`: the HTML; `assets.rs`: the CSS and the script; `audit.rs`: the audit filter
//!   and the exports; `api.rs`: `/api/access`, the access requests as JSON, and `/api/grants`.
//!
//! A user who is not an admin sees their own audit rows (the calls made as them, by them or
//! their agents) and exports them; never anyone else's.

mod api;
mod assets;
mod audit;
mod render;
mod upstream;

pub use upstream::{UpstreamKind, UpstreamServer, UpstreamSignIns};

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderValue, Response, header};
use toolgate_mcp::{Authenticator, HttpBody, HttpRoute, Mount, RouteAuth, RouteRequest, reply};
use toolgate_store::{AccessRequest, AccessStatus, AuditRecord, IdentityStore, PrincipalKind};

use sha2::Digest as _;

use crate::signin::{Session, SignIn, random_token, same_text};
use crate::{Admin, GrantInput, Grants, KeyScope, Narrowing, split_list};
use audit::AuditFilter;

/// A tool call waiting for a person's decision, as the inbox shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    /// The inbox entry's number.
    pub id: String,
    /// Who asked.
    pub user: String,
    /// The agent that asked.
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// The parameters (JSON, sensitive values redacted): attacker-controlled text.
    pub params: String,
    /// What will run (the normalized command, path or host), when the tool names one.
    pub subject: Option<String>,
    /// Why approval is asked (the policy trace).
    pub reason: String,
}

/// An approver's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    AllowOnce,
    /// Run it and later calls with the same subject.
    AllowAlways,
    /// Do not run it.
    Deny,
}

/// What the page shows that lives outside this crate: the audit log and the approvals queue
/// (implemented by the binary over the gate's).
pub trait PageData: Send + Sync + Debug {
    /// The latest `limit` audit rows (every user's), newest first.
    fn audit(&self, limit: usize) -> Result<Vec<AuditRecord>, String>;
    /// The calls waiting for a decision.
    fn pending(&self) -> Vec<PendingCall>;
    /// Decides entry `id` as `by`: what was recorded, or why nothing was (decided already,
    /// expired, self-approval).
    fn decide(&self, id: &str, decision: Decision, by: &str) -> Result<String, String>;
    /// Access request `request` was just decided here (on the page or over `/api/access`):
    /// tell its requester beyond the page (a webhook). Default: nothing more.
    fn access_decided(&self, request: &AccessRequest) {
        let _ = request;
    }
}

/// How many audit rows the search reads (newest first).
const AUDIT_WINDOW: usize = 20_000;
/// How many rows the page shows (the exports have them all).
const AUDIT_SHOWN: usize = 500;

/// The page, mounted at `/` ([`Page::mount`]).
#[derive(Debug, Clone)]
pub struct Page(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    signin: Arc<SignIn>,
    identity: Arc<dyn IdentityStore>,
    grants: Grants,
    data: Arc<dyn PageData>,
    /// `Secure` cookies (the gateway is reached over https).
    secure: bool,
    /// Users' sign-ins to bridged servers ([`Page::sign_in_upstream`]), when there are any.
    upstream: std::sync::OnceLock<upstream::Upstream>,
}

/// `/.well-known/oauth-protected-resource` (RFC 9728), naming the OIDC provider as the
/// authorization server of `resource` (the `/mcp` URL). Only with OIDC: an API key cannot be
/// obtained by OAuth.
pub fn protected_resource_mount(resource: &str, issuer: &str) -> Mount {
    let body = serde_json::json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolgate gateway",
    });
    Mount::new("/.well-known/oauth-protected-resource", RouteAuth::Own, Arc::new(Metadata(body)))
}

#[derive(Debug)]
struct Metadata(serde_json::Value);

impl HttpRoute for Metadata {
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, Response<HttpBody>> {
        let response =
            if req.method == http::Method::GET { reply::json(200, &self.0) } else { reply::text(405, "use GET") };
        Box::pin(async move { response })
    }
}

impl Page {
    /// The page over `signin`, the grants (and their identity store) and `data`; `secure`:
    /// the gateway is served over https (cookies get `Secure`).
    pub fn new(signin: Arc<SignIn>, grants: Grants, data: Arc<dyn PageData>, secure: bool) -> Self {
        let identity = Arc::clone(grants.identity());
        Page(Arc::new(Inner { signin, identity, grants, data, secure, upstream: std::sync::OnceLock::new() }))
    }

    /// Lets each user sign in to the bridged servers `signins` lists from the page, the
    /// authorization servers sending the browser back to `public` + `/upstream/callback`
    /// (`public`: the gateway's URL as people reach it). The first call wins.
    pub fn sign_in_upstream(&self, signins: Arc<dyn UpstreamSignIns>, public: &str) {
        let callback = format!("{}{}", public.trim_end_matches('/'), upstream::CALLBACK);
        let _ = self.0.upstream.set(upstream::Upstream { signins, callback });
    }

    /// The page at `/` (everything the other mounts, `/mcp` and `/api/` do not serve).
    pub fn mount(&self) -> Mount {
        Mount::new("/", RouteAuth::Own, Arc::new(self.clone()))
    }

    /// `/api/access` (`api.rs`), authenticating API keys and provider tokens with
    /// `authenticator`, and the page's session cookie with its CSRF token.
    pub fn api_mount(&self, authenticator: Arc<dyn Authenticator>) -> Mount {
        Mount::new("/api/access", RouteAuth::Own, Arc::new(AccessApi { page: self.clone(), authenticator }))
    }

    /// `/api/grants` (`api.rs`), authenticated as [`Page::api_mount`] is: grants for scripts,
    /// an admin's only.
    pub fn grants_api_mount(&self, authenticator: Arc<dyn Authenticator>) -> Mount {
        Mount::new("/api/grants", RouteAuth::Own, Arc::new(AccessApi { page: self.clone(), authenticator }))
    }
}

/// The route of [`Page::api_mount`] and [`Page::grants_api_mount`].
#[derive(Debug)]
struct AccessApi {
    page: Page,
    authenticator: Arc<dyn Authenticator>,
}

impl HttpRoute for AccessApi {
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, Response<HttpBody>> {
        let mut response = self.page.0.api(&req, self.authenticator.as_ref());
        secure_headers(&mut response);
        Box::pin(async move { response })
    }
}

impl HttpRoute for Page {
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, Response<HttpBody>> {
        let inner = Arc::clone(&self.0);
        Box::pin(async move {
            let mut response = inner.route(req).await;
            secure_headers(&mut response);
            response
        })
    }
}

/// The headers every answer of the page carries.
fn secure_headers(response: &mut Response<HttpBody>) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // The callback URL carries a code; nothing leaves with a Referer.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

const SESSION_COOKIE: &str = "tg_session";
const SIGNIN_COOKIE: &str = "tg_signin";
const FORM_COOKIE: &str = "tg_form";

/// One cookie of the request.
fn cookie<'a>(req: &'a RouteRequest, name: &str) -> Option<&'a str> {
    req.headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(
        |pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        },
    )
}

/// The form fields (or query) as pairs.
fn fields(text: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text).into_owned().collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
}

fn redirect(to: &str) -> Response<HttpBody> {
    let mut response = reply::text(303, "");
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

impl Inner {
    fn set_cookie(&self, response: &mut Response<HttpBody>, name: &str, value: &str, max_age: Option<u64>) {
        let secure = if self.secure { "; Secure" } else { "" };
        let age = max_age.map(|s| format!("; Max-Age={s}")).unwrap_or_default();
        // Lax, not Strict: the provider's redirect back to /signin/callback is a cross-site
        // navigation that must carry the sign-in cookie. Every POST checks a CSRF token too.
        let text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax{secure}{age}");
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }

    fn session(&self, req: &RouteRequest) -> Option<(String, Session)> {
        let token = cookie(req, SESSION_COOKIE)?;
        self.signin.session(token).map(|s| (token.to_owned(), s))
    }

    async fn route(&self, req: RouteRequest) -> Response<HttpBody> {
        let path = req.uri.path().to_owned();
        let method = req.method.clone();
        match (method.as_str(), path.as_str()) {
            ("GET", "/static/page.css") => return static_asset("text/css; charset=utf-8", assets::CSS),
            ("GET", "/static/page.js") => return static_asset("text/javascript; charset=utf-8", assets::JS),
            ("GET", "/favicon.ico") => return reply::text(404, "no icon"),
            ("GET", "/signin") => return self.signin_page(None),
            ("POST", "/signin/password") => return self.password(&req),
            ("GET", "/signin/oidc") => return self.begin_oidc(),
            ("GET", "/signin/callback") => return self.callback(&req).await,
            _ => {}
        }
        let known = matches!(
            path.as_str(),
            "/" | "/audit.jsonl"
                | "/audit.csv"
                | "/inbox"
                | "/events"
                | "/requests"
                | "/signout"
                | "/users"
                | "/keys"
                | "/access"
                | "/grants"
        ) || ["/keys/", "/users/", "/approvals/", "/access/", "/grants/", "/upstream/"]
            .iter()
            .any(|p| path.starts_with(p));
        if !known {
            return reply::text(404, "no such page");
        }
        let Some((token, session)) = self.session(&req) else {
            return match method.as_str() {
                "GET" if path == "/" => redirect("/signin"),
                _ => reply::text(401, "sign in first: open / in a browser"),
            };
        };
        if method == http::Method::POST {
            let form = fields(&req.body);
            // Every POST carries this session's token (a page of another site cannot read it).
            if !same_text(field(&form, "csrf"), &session.csrf) {
                return reply::text(403, "the form's CSRF token is missing or wrong; reload the page and try again");
            }
            if let Some(rest) = path.strip_prefix("/upstream/") {
                return self.upstream_post(rest, &form, &session).await;
            }
            return self.post(&path, &form, &token, &session);
        }
        let query = fields(req.uri.query().unwrap_or_default().as_bytes());
        if path == upstream::CALLBACK {
            return self.upstream_callback(&query, &session).await;
        }
        // The approvals inbox is for admins; the audit views show a user their own rows.
        if !session.admin && path == "/inbox" {
            return reply::text(403, "this page is for the gateway's admins");
        }
        match path.as_str() {
            "/" => self.dashboard(&session, &query, None),
            "/audit.jsonl" | "/audit.csv" => self.export(&path, &query, &session),
            "/inbox" => reply::html(200, render::inbox(&self.data.pending(), &session.csrf)),
            "/requests" => match self.requests_of(&session) {
                Ok(requests) => {
                    let mut view = render::View::empty(&session);
                    view.requests = requests;
                    reply::html(200, render::access_rows(&view))
                }
                Err(e) => reply::text(503, format!("cannot read the access requests: {e}")),
            },
            "/events" => self.events(&session),
            _ => reply::text(404, "no such page"),
        }
    }

    fn signin_page(&self, error: Option<&str>) -> Response<HttpBody> {
        let form = match random_token() {
            Ok(t) => t,
            Err(e) => return reply::text(500, e.to_string()),
        };
        let issuer = self.signin.oidc().map(|o| o.issuer().to_owned());
        let mut response =
            reply::html(if error.is_some() { 401 } else { 200 }, render::signin(issuer.as_deref(), &form, error));
        // Double-submit: the password form's token must match this cookie.
        self.set_cookie(&mut response, FORM_COOKIE, &form, Some(600));
        response
    }

    fn password(&self, req: &RouteRequest) -> Response<HttpBody> {
        let form = fields(&req.body);
        if !cookie(req, FORM_COOKIE).is_some_and(|c| same_text(c, field(&form, "csrf"))) {
            return reply::text(
                403,
                "the form's CSRF token is missing or wrong; reload the sign-in page and try again",
            );
        }
        let user = match self.signin.check_password(field(&form, "user"), field(&form, "password"), req.peer.ip()) {
            Ok(user) => user,
            Err(e) => return self.signin_page(Some(&e)),
        };
        self.start_session(&user)
    }

    fn start_session(&self, user: &str) -> Response<HttpBody> {
        if let Err(e) = self.signin.may_sign_in(user) {
            return self.signin_page(Some(&e));
        }
        match self.signin.open_session(user) {
            Ok(token) => {
                let mut response = redirect("/");
                self.set_cookie(&mut response, SESSION_COOKIE, &token, None);
                self.set_cookie(&mut response, SIGNIN_COOKIE, "", Some(0));
                response
            }
            Err(e) => self.signin_page(Some(&e.to_string())),
        }
    }

    fn begin_oidc(&self) -> Response<HttpBody> {
        match self.signin.begin_oidc() {
            Ok((url, state)) => {
                let mut response = redirect(&url);
                self.set_cookie(&mut response, SIGNIN_COOKIE, &state, Some(600));
                response
            }
            Err(e) => self.signin_page(Some(&e)),
        }
    }

    async fn callback(&self, req: &RouteRequest) -> Response<HttpBody> {
        let query = fields(req.uri.query().unwrap_or_default().as_bytes());
        if !field(&query, "error").is_empty() {
            let why = format!(
                "the provider refused the sign-in: {} {}",
                field(&query, "error"),
                field(&query, "error_description")
            );
            return self.signin_page(Some(&why));
        }
        let state = field(&query, "state");
        let code = field(&query, "code");
        if state.is_empty() || code.is_empty() {
            return self.signin_page(Some("the provider's answer has no code or state; start again"));
        }
        match self.signin.finish_oidc(state, cookie(req, SIGNIN_COOKIE), code).await {
            Ok(user) => self.start_session(&user),
            Err(e) => self.signin_page(Some(&e)),
        }
    }

    fn post(&self, path: &str, form: &[(String, String)], token: &str, session: &Session) -> Response<HttpBody> {
        let admin = Admin::new(Arc::clone(&self.identity));
        let back = |notice: Result<String, String>| self.dashboard(session, &[], Some(notice));
        let refuse = || back(Err("only the gateway's admins may do that".to_owned()));
        let me = session.user.as_str();
        match path {
            "/signout" => {
                self.signin.close_session(token);
                let mut response = redirect("/signin");
                self.set_cookie(&mut response, SESSION_COOKIE, "", Some(0));
                response
            }
            "/users" if !session.admin => refuse(),
            "/users" => {
                let name = field(form, "name");
                let groups: Vec<String> = field(form, "group")
                    .split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_owned)
                    .collect();
                let result = admin
                    .user_add(name, field(form, "admin") == "on", &groups)
                    .map(|_| format!("user {name} added"))
                    .map_err(|e| e.to_string());
                back(result)
            }
            "/keys" => {
                // A user makes keys for themselves and their agents; an admin for anyone.
                let user = match field(form, "user") {
                    "" => me,
                    user => user,
                };
                if !session.admin && !self.owns(me, user) {
                    return back(Err(format!("you may make keys for yourself and your agents, not for {user}")));
                }
                let expires = match field(form, "expires") {
                    "" => None,
                    text => match audit::duration_ms(text) {
                        Some(ms) => Some(crate::admin::now_ms().saturating_add(ms)),
                        None => return back(Err(format!("`{text}` is not a duration (30d, 12h, 90m)"))),
                    },
                };
                match admin.key_create(user, &KeyScope::default(), expires, field(form, "note"), me) {
                    Ok(new) => self.dashboard_with_key(session, &new.record.id, new.text.reveal()),
                    Err(e) => back(Err(e.to_string())),
                }
            }
            "/grants" if !session.admin => refuse(),
            "/grants" => self.add_grant(session, form),
            "/access" => {
                let optional = |name: &str| Some(field(form, name).trim()).filter(|v| !v.is_empty());
                back(
                    self.grants
                        .request(me, None, optional("server"), optional("tool"), field(form, "reason"))
                        .map(|(r, new)| {
                            if new {
                                format!("access request {} sent to the admins", r.id)
                            } else {
                                format!("you asked for this already: request {} is {}", r.id, r.status.as_str())
                            }
                        })
                        .map_err(|e| e.to_string()),
                )
            }
            _ => {
                if let Some(id) = path.strip_prefix("/keys/").and_then(|r| r.strip_suffix("/revoke")) {
                    let owner = admin
                        .keys(None)
                        .ok()
                        .and_then(|keys| keys.into_iter().find(|k| k.id == id))
                        .map(|k| k.principal);
                    // Someone else's key is "not found" to a user, as one that never existed.
                    if !session.admin && !owner.as_deref().is_some_and(|o| self.owns(me, o)) {
                        return back(Err(format!("no key `{id}` of yours")));
                    }
                    return back(admin.key_revoke(id).map(|()| format!("key {id} revoked")).map_err(|e| e.to_string()));
                }
                if let Some(rest) = path.strip_prefix("/access/") {
                    let (id, approve) = match rest.rsplit_once('/') {
                        Some((id, "approve")) => (id, true),
                        Some((id, "reject")) => (id, false),
                        _ => return reply::text(404, "no such action"),
                    };
                    let Ok(id) = id.parse::<i64>() else { return back(Err(format!("`{id}` is not a request number"))) };
                    let message = Some(field(form, "message").trim()).filter(|m| !m.is_empty());
                    // Who may decide is the grants' rule (an admin, or an admin of the
                    // requester's group; never the requester).
                    let done = if approve {
                        let expires = match field(form, "expires") {
                            "" => None,
                            text => match audit::duration_ms(text) {
                                Some(ms) => Some(crate::admin::now_ms().saturating_add(ms)),
                                None => return back(Err(format!("`{text}` is not a duration (30d, 12h, 90m)"))),
                            },
                        };
                        // Only these tools (comma-separated), within what was asked.
                        let tools: Vec<String> = field(form, "tools")
                            .split(',')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(str::to_owned)
                            .collect();
                        let tools = (!tools.is_empty()).then_some(tools);
                        self.grants.approve(id, Some(me), &Narrowing { tools, expires_ms: expires }, message)
                    } else {
                        self.grants.reject(id, Some(me), message)
                    };
                    if let Ok(request) = &done {
                        self.data.access_decided(request);
                    }
                    return back(
                        done.map(|r| match r.grant_id {
                            Some(grant) => format!("request {id} approved: grant {grant}"),
                            None => format!("request {id} rejected"),
                        })
                        .map_err(|e| e.to_string()),
                    );
                }
                if !session.admin {
                    return refuse();
                }
                if let Some(rest) = path.strip_prefix("/grants/") {
                    let Some((id, action)) = rest.rsplit_once('/') else { return reply::text(404, "no such action") };
                    let Ok(id) = id.parse::<i64>() else { return back(Err(format!("`{id}` is not a grant number"))) };
                    let done = match action {
                        "revoke" => self.grants.revoke(id).map(|()| format!("grant {id} revoked")),
                        "enable" => self.grants.enable(id, true).map(|()| format!("grant {id} enabled")),
                        "disable" => self.grants.enable(id, false).map(|()| format!("grant {id} disabled")),
                        _ => return reply::text(404, "no such action"),
                    };
                    return back(done.map_err(|e| e.to_string()));
                }
                if let Some(rest) = path.strip_prefix("/users/") {
                    let (name, disabled) = match rest.rsplit_once('/') {
                        Some((name, "disable")) => (name, true),
                        Some((name, "enable")) => (name, false),
                        _ => return reply::text(404, "no such action"),
                    };
                    if disabled && name == me {
                        return back(Err("you cannot disable yourself".to_owned()));
                    }
                    let done = if disabled { "disabled" } else { "enabled" };
                    return back(
                        admin
                            .set_disabled(name, disabled)
                            .map(|()| format!("{name} {done}"))
                            .map_err(|e| e.to_string()),
                    );
                }
                if let Some(id) = path.strip_prefix("/approvals/") {
                    let decision = match field(form, "decision") {
                        "allow_once" => Decision::AllowOnce,
                        "allow_always" => Decision::AllowAlways,
                        "deny" => Decision::Deny,
                        other => return back(Err(format!("unknown decision `{other}`"))),
                    };
                    return back(self.data.decide(id, decision, me));
                }
                reply::text(404, "no such action")
            }
        }
    }

    /// The grant form's POST (admins only): the words read and the grant checked as `toolgate
    /// admin grant add` does ([`GrantInput`], [`Grants::add`]), granted by the signed-in admin.
    /// A refusal shows the form again with what was typed and what is wrong; nothing is stored.
    fn add_grant(&self, session: &Session, form: &[(String, String)]) -> Response<HttpBody> {
        let optional = |name: &str| Some(field(form, name).to_owned()).filter(|v| !v.trim().is_empty());
        let input = GrantInput {
            to: field(form, "to").to_owned(),
            server: optional("server"),
            tools: split_list(field(form, "tools")),
            deny_tools: split_list(field(form, "deny_tools")),
            mode: optional("mode"),
            args: optional("args"),
            expires: optional("expires"),
            server_config: None,
            note: field(form, "note").to_owned(),
            disabled: false,
        };
        let added = input
            .grant(&session.user, crate::admin::now_ms())
            .and_then(|grant| self.grants.add(&grant).map(|id| (id, grant)));
        match added {
            Ok((id, grant)) => {
                tracing::info!(grant = id, by = %session.user, subject = %grant.subject, "grant added on the page");
                self.dashboard(session, &[], Some(Ok(format!("grant {id} added for {}", grant.subject))))
            }
            Err(e) => {
                let mut page = self.view(session, &[], Some(Err(e.to_string())));
                page.grant_form = form.iter().filter(|(k, _)| k != "csrf").cloned().collect();
                reply::html(200, render::dashboard(&page))
            }
        }
    }

    /// Whether `principal` is `user` or one of `user`'s agents.
    fn owns(&self, user: &str, principal: &str) -> bool {
        principal == user
            || self
                .identity
                .principal_get(principal)
                .ok()
                .flatten()
                .is_some_and(|p| p.kind == PrincipalKind::Agent && p.owner.as_deref() == Some(user))
    }

    fn dashboard_with_key(&self, session: &Session, id: &str, text: &str) -> Response<HttpBody> {
        let notice = Ok(format!("key {id} created"));
        let mut page = self.view(session, &[], Some(notice));
        page.new_key = Some((id.to_owned(), text.to_owned()));
        reply::html(200, render::dashboard(&page))
    }

    fn dashboard(
        &self,
        session: &Session,
        query: &[(String, String)],
        notice: Option<Result<String, String>>,
    ) -> Response<HttpBody> {
        reply::html(200, render::dashboard(&self.view(session, query, notice)))
    }

    fn view(
        &self,
        session: &Session,
        query: &[(String, String)],
        notice: Option<Result<String, String>>,
    ) -> render::View {
        let admin = Admin::new(Arc::clone(&self.identity));
        let me = session.user.as_str();
        let mut errors = Vec::new();
        let mut keep = |what: &str, e: String| errors.push(format!("cannot read {what}: {e}"));
        // A user sees their own (and their agents' and groups') things; an admin everyone's.
        let mine: Vec<String> = {
            let mut names = vec![me.to_owned()];
            let principals = admin.list(None).unwrap_or_default();
            names.extend(
                principals
                    .iter()
                    .filter(|p| p.kind == PrincipalKind::Agent && p.owner.as_deref() == Some(me))
                    .map(|p| p.name.clone()),
            );
            names.extend(admin.groups_of(me).unwrap_or_default().into_iter().map(|m| m.group));
            names
        };
        let grants = match self.grants.list(None) {
            Ok(all) if session.admin => all,
            Ok(all) => all.into_iter().filter(|g| mine.contains(&g.subject)).collect(),
            Err(e) => {
                keep("the grants", e.to_string());
                Vec::new()
            }
        };
        let keys = match admin.keys(None) {
            Ok(all) if session.admin => all,
            Ok(all) => all.into_iter().filter(|k| mine.contains(&k.principal)).collect(),
            Err(e) => {
                keep("the keys", e.to_string());
                Vec::new()
            }
        };
        let requests = match self.requests_of(session) {
            Ok(requests) => requests,
            Err(e) => {
                keep("the access requests", e);
                Vec::new()
            }
        };
        let filter = AuditFilter::from_query(query);
        let (audit, audit_error) = match self.audit_of(session, &filter) {
            Ok(rows) => (rows.into_iter().take(AUDIT_SHOWN).collect(), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let (pending, principals) = if session.admin {
            (self.data.pending(), admin.list(None).unwrap_or_default())
        } else {
            (Vec::new(), Vec::new())
        };
        render::View {
            user: session.user.clone(),
            admin: session.admin,
            csrf: session.csrf.clone(),
            principals,
            keys,
            grants,
            requests,
            pending,
            audit,
            audit_error,
            errors,
            filter,
            notice,
            new_key: None,
            grant_form: Vec::new(),
            upstream: self.upstream.get().map(|u| u.signins.servers(&session.user)).unwrap_or_default(),
            now_ms: crate::admin::now_ms(),
        }
    }

    /// Admins see what waits for a decision and the latest decided; users their own.
    fn requests_of(&self, session: &Session) -> Result<Vec<AccessRequest>, String> {
        let mut all =
            self.grants.requests(None, (!session.admin).then_some(session.user.as_str())).map_err(|e| e.to_string())?;
        all.sort_by_key(|r| (r.status != AccessStatus::Pending, -r.created_ms));
        all.truncate(100);
        Ok(all)
    }

    /// The audit rows `filter` selects that `session` may see: an admin every row, a user the
    /// calls made as them (by them or their agents), compared exactly, before any filter.
    fn audit_of(&self, session: &Session, filter: &AuditFilter) -> Result<Vec<AuditRecord>, String> {
        let mut rows = self.data.audit(AUDIT_WINDOW)?;
        if !session.admin {
            rows.retain(|r| r.user == session.user);
        }
        Ok(filter.apply(rows))
    }

    fn export(&self, path: &str, query: &[(String, String)], session: &Session) -> Response<HttpBody> {
        let filter = AuditFilter::from_query(query);
        let rows = match self.audit_of(session, &filter) {
            Ok(rows) => rows,
            Err(e) => return reply::text(503, format!("cannot read the audit log: {e}")),
        };
        let (content_type, body, name) = if path.ends_with(".csv") {
            ("text/csv; charset=utf-8", audit::csv(&rows), "audit.csv")
        } else {
            ("application/jsonl; charset=utf-8", audit::jsonl(&rows), "audit.jsonl")
        };
        let mut response = reply::bytes(200, content_type, body);
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
        response
    }

    /// Server-sent events, whenever what the session's page shows live changes (checked twice
    /// a second), until the browser leaves: `{"pending": N, "requests": "..."}`, the number of
    /// waiting calls (admins; 0 for others) and a fingerprint of the access requests the page
    /// lists (a user's own: a decision reaches the requester's open page, whoever made it).
    fn events(&self, session: &Session) -> Response<HttpBody> {
        type Seen = (BTreeSet<String>, String);
        let data = Arc::clone(&self.data);
        let grants = self.grants.clone();
        let (admin, user) = (session.admin, session.user.clone());
        let state = (data, grants, None::<Seen>);
        let stream = futures::stream::unfold(state, move |(data, grants, last)| {
            let user = user.clone();
            async move {
                loop {
                    let pending: BTreeSet<String> =
                        if admin { data.pending().into_iter().map(|p| p.id).collect() } else { BTreeSet::new() };
                    let requests = grants
                        .requests(None, (!admin).then_some(user.as_str()))
                        .map(|all| {
                            // A failed notification shows too: the requester may not know yet.
                            let row = |r: &AccessRequest| {
                                format!("{}:{}:{}", r.id, r.status.as_str(), r.notify_failed_ms.unwrap_or(0))
                            };
                            all.iter().map(row).collect::<Vec<_>>().join(",")
                        })
                        .unwrap_or_default();
                    let requests = format!("{:x}", sha2::Sha256::digest(requests.as_bytes()));
                    let now = (pending, requests);
                    if last.as_ref() != Some(&now) {
                        let event = serde_json::json!({"pending": now.0.len(), "requests": now.1}).to_string();
                        return Some((event, (data, grants, Some(now))));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        });
        reply::sse(stream)
    }
}

fn static_asset(content_type: &'static str, body: &'static str) -> Response<HttpBody> {
    let mut response = reply::bytes(200, content_type, body);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}
