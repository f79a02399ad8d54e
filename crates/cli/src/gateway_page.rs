//! `toolgate serve --http` in gateway mode: `/mcp`'s authenticator (API keys, and the OIDC
//! provider's access tokens when `[gateway.oidc]` is set), the web page at `/`, and RFC 9728
//! protected-resource metadata (with OIDC only), `/api/access` (access requests as JSON) and
//! `/api/grants` (an admin's grants). The page reads the gate's approvals queue and every
//! workspace's audit log through [`PageSource`], which also posts each access decision to
//! `notify_url` for the requester.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::approvals::{PendingApprovals, WebhookNotifier};
use toolgate::family::Mount;
use toolgate::gateway::{
    Decision, GatewayAuthenticator, GatewayConfig, Grants, Oidc, Page, PageData, PendingCall, SignIn,
};
use toolgate::mcp::{ApiHandler, Authenticator, Caller};
use toolgate::store::{AccessRequest, AuditRecord, AuditStore, IdentityStore, Store};

/// What gateway mode needs from the gate, gathered before the server binds its address.
#[derive(Debug)]
pub(crate) struct GatewayWiring {
    identity: Arc<dyn IdentityStore>,
    grants: Grants,
    config: GatewayConfig,
    data: Arc<PageSource>,
    /// Users' own sign-ins to bridged servers, from the page (with per-user workspaces only:
    /// without them no user's credential is used).
    upstream: Option<Arc<dyn toolgate::gateway::UpstreamSignIns>>,
}

/// How `serve` authenticates and what it mounts, once its address is known.
pub(crate) struct GatewayHttp {
    pub(crate) authenticator: Arc<dyn Authenticator>,
    pub(crate) mounts: Vec<Mount>,
    pub(crate) resource_metadata: Option<String>,
}

impl GatewayWiring {
    /// `None` unless `[gateway] enabled`.
    pub(crate) fn new(gate: &Gate, pending: Arc<PendingApprovals>) -> anyhow::Result<Option<GatewayWiring>> {
        let config = &gate.services().config;
        if !config.gateway.enabled {
            return Ok(None);
        }
        let stores = gate.services().stores.as_ref().context(
            "[gateway] enabled needs the state database, which holds the users and keys; \
             it could not be opened (see the messages above)",
        )?;
        let workspaces = vec![gate.workspace().to_owned()];
        let users = config.gateway.workspaces.as_ref().map(|dir| gate.workspace().join(dir));
        // Requesters are told of decisions where approvers are told of calls, unless the
        // gateway names a place of its own.
        let notify = match config.gateway.notify_url.as_ref().or(config.approval.notify_url.as_ref()) {
            Some(url) => {
                match reqwest::Url::parse(url) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                    _ => anyhow::bail!(
                        "[gateway] notify_url = {url:?} is not an http(s) URL; write e.g. https://host/path"
                    ),
                }
                Some(Arc::new(WebhookNotifier::new(url).map_err(|e| anyhow::anyhow!(e))?))
            }
            None => None,
        };
        // The page files requests and decides them as the `request_access` tool and `toolgate
        // admin access` do (the default tools do not matter here: nothing is checked).
        let audit = gate.audit_log().cloned();
        let mut grants = Grants::new(Arc::clone(&stores.grants), Arc::clone(&stores.identity), Vec::new());
        if let Some(audit) = &audit {
            grants = grants.audited_in(Arc::clone(audit));
        }
        // With `[store] url` the calls are in the shared log (every node's, per workspace).
        let shared = config.store.url.is_some().then(|| config.store.clone());
        let data = Arc::new(PageSource { workspaces, users, shared, pending, notify, grants: grants.clone() });
        let upstream = match (&config.gateway.workspaces, gate.mcp_vault()) {
            (Some(_), Some(vault)) => {
                let signins =
                    super::upstream_signin::PageSignIns::new(Arc::clone(&gate.services().config_control), vault);
                Some(Arc::new(signins) as Arc<dyn toolgate::gateway::UpstreamSignIns>)
            }
            _ => None,
        };
        Ok(Some(GatewayWiring {
            identity: Arc::clone(&stores.identity),
            grants,
            config: config.gateway.clone(),
            data,
            upstream,
        }))
    }

    /// Discovers the OIDC provider (when configured) and builds the authenticator and mounts
    /// for a server listening on `local`.
    pub(crate) async fn http(self, local: SocketAddr, shutdown: &CancellationToken) -> anyhow::Result<GatewayHttp> {
        let public = self.config.url.clone().unwrap_or_else(|| format!("http://{local}"));
        let public = public.trim_end_matches('/').to_owned();
        let oidc = match &self.config.oidc {
            Some(oidc) => {
                let oidc = Oidc::discover(oidc, &public).await.context("cannot set up [gateway.oidc]")?;
                Some(Arc::new(oidc))
            }
            None => None,
        };
        if let Some(oidc) = &oidc {
            // The provider's keys are read again every 10 minutes (key rotation).
            let oidc = Arc::clone(oidc);
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(600)) => {}
                    }
                    if let Err(e) = oidc.refresh_keys().await {
                        tracing::warn!("{e}");
                    }
                }
            });
        }
        let authenticator: Arc<dyn Authenticator> =
            Arc::new(GatewayAuthenticator::new(Arc::clone(&self.identity), oidc.clone()));
        let signin = Arc::new(SignIn::new(Arc::clone(&self.identity), oidc.clone()));
        let page = Page::new(signin, self.grants, self.data, public.starts_with("https://"));
        if let Some(upstream) = self.upstream {
            page.sign_in_upstream(upstream, &public);
        }
        let mut mounts = vec![
            page.mount(),
            page.api_mount(Arc::clone(&authenticator)),
            page.grants_api_mount(Arc::clone(&authenticator)),
        ];
        let mut resource_metadata = None;
        if let Some(oidc) = &oidc {
            mounts.push(toolgate::gateway::protected_resource_mount(&format!("{public}/mcp"), oidc.issuer()));
            resource_metadata = Some(format!("{public}/.well-known/oauth-protected-resource"));
        }
        eprintln!("toolgate: the gateway's page is at {public}/");
        Ok(GatewayHttp { authenticator, mounts, resource_metadata })
    }
}

/// The page's view of the approvals queue and the audit logs (the gateway's, and each user's
/// when users have workspaces of their own).
#[derive(Debug)]
pub(crate) struct PageSource {
    /// The gateway's workspace (the per-user ones are found under `users`).
    workspaces: Vec<PathBuf>,
    users: Option<PathBuf>,
    /// `[store]` when it names a shared database: the logs are read there, not from the files.
    shared: Option<toolgate::config::StoreConfig>,
    pending: Arc<PendingApprovals>,
    /// Where access decisions are posted for their requesters.
    notify: Option<Arc<WebhookNotifier>>,
    /// Where a failed post is recorded on its request (and audited, in the gateway's log).
    grants: Grants,
}

impl PageData for PageSource {
    fn audit(&self, limit: usize) -> Result<Vec<AuditRecord>, String> {
        let mut workspaces = self.workspaces.clone();
        if let Some(root) = &self.users
            && let Ok(entries) = std::fs::read_dir(root)
        {
            workspaces.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        let mut rows = Vec::new();
        for ws in &workspaces {
            let failed = |e: toolgate::store::StoreError| format!("{}: {e}", ws.display());
            if let Some(store) = &self.shared {
                if let Some(log) = toolgate::state::shared_audit_reader(store, ws).map_err(failed)? {
                    rows.extend(log.audit_tail(limit).map_err(failed)?);
                }
                continue;
            }
            let path = ws.join(".toolgate/state.db");
            if path.is_file() {
                rows.extend(Store::open(&path).and_then(|s| s.audit_tail(limit)).map_err(failed)?);
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.ts_ms));
        rows.truncate(limit);
        Ok(rows)
    }

    // The inbox goes through the approvals API's JSON (`GET/POST /api/approvals`), as any
    // client would: the page stays out of the queue's internals, which the durable inbox
    // replaces (issue 28 item 6).
    fn pending(&self) -> Vec<PendingCall> {
        let Some((200, body)) = self.pending.handle_api("GET", "/api/approvals", b"") else {
            return Vec::new();
        };
        let text = |v: &Value| match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        body["pending"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|r| PendingCall {
                        id: text(&r["id"]),
                        user: text(&r["identity"]["user"]),
                        agent: text(&r["identity"]["agent"]),
                        tool: text(&r["tool"]),
                        params: text(&r["params"]),
                        subject: Some(text(&r["subject"])).filter(|s| !s.is_empty()),
                        reason: text(&r["reason"]),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    // In the background: the decision stands whether or not the requester's channel answers.
    // A failure is logged, stored on the request (the page, `/api/access` and `request_access
    // {"status": true}` show it) and audited.
    fn access_decided(&self, request: &AccessRequest) {
        let Some(notify) = self.notify.clone() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let event =
            serde_json::json!({"event": "access_decided", "request": toolgate::gateway::shown_request(request)});
        let (grants, request) = (self.grants.clone(), request.clone());
        runtime.spawn(async move {
            let Err(e) = notify.post(&event).await else { return };
            let id = request.id;
            let e: String = e.chars().take(500).collect();
            tracing::warn!(request = id, "could not tell the requester of access request {id}'s decision: {e}");
            // The store's write and its audit row (these grants are audited) off the async workers.
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(stored) = grants.notify_failed(id, &e) {
                    tracing::error!(request = id, "could not record the failed notification on the request: {stored}");
                }
            })
            .await;
        });
    }

    fn decide(&self, id: &str, decision: Decision, by: &str) -> Result<String, String> {
        let (decision, message) = match decision {
            Decision::AllowOnce => ("allow_once", None),
            Decision::AllowAlways => ("allow_always", None),
            Decision::Deny => ("deny", Some(format!("denied by {by} on the gateway's page"))),
        };
        let body = serde_json::json!({"decision": decision, "message": message}).to_string();
        // As `by`: a queue that records deciders records the page's user.
        let caller = Caller::new(by);
        let path = format!("/api/approvals/{id}");
        match ApiHandler::handle_as(self.pending.as_ref(), Some(&caller), "POST", &path, body.as_bytes()) {
            Some((200, _)) => {
                tracing::info!(approval = id, by, decision, "decided on the gateway's page");
                Ok(format!("approval {id} decided: {decision}"))
            }
            Some((_, answer)) => Err(answer["error"].as_str().unwrap_or("the approval was not decided").to_owned()),
            None => Err("the approvals API did not answer".to_owned()),
        }
    }
}
