//! [`Granted`]: grants enforced on what a gateway serves. It wraps the server's handler (the
//! gateway's gate, or its per-user gates) and, for each request, reads the caller's grants
//! (`toolgate_gateway::Grants`, compiled and cached under the store's revisions, read once per
//! request): `tools/list` shows only granted tools, and a call of any other is refused with what
//! to do (`request_access`). A call let through takes its compiled grants down to the gate,
//! which checks them again with the call's touches without reading them again. A key's own
//! tool scope is checked before, by the MCP server: a call needs both. The gateway's own tools
//! (`request_access`, `gateway`) run on the gateway's gate (`home`), which keeps the grants and
//! requests, whichever gate serves the user's other tools; a call refused here is a row of that
//! gate's audit log.

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_mcp::CallHandler;
use toolgate_store::PrincipalKind;

use toolgate_gateway::{ADMIN_TOOL, Access, CachedGrants, Decided, Grants, HOME_TOOLS, REQUEST_ACCESS, ToolRef};

use crate::Gate;

/// A handler whose tools are limited by grants (or, without grants, the handler as it is).
pub struct Granted {
    inner: Arc<dyn CallHandler>,
    home: Arc<Gate>,
    grants: Option<Grants>,
    /// Each caller's compiled grants, kept under the store's revisions.
    cache: Option<Arc<CachedGrants>>,
}

impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted").field("grants", &self.grants).finish_non_exhaustive()
    }
}

impl Granted {
    /// `inner`'s tools limited by `grants`, the gateway's own tools from `home`; with `None`,
    /// `inner` unchanged (not a gateway, or not over HTTP).
    pub fn new(inner: Arc<dyn CallHandler>, home: Arc<Gate>, grants: Option<Grants>) -> Self {
        let cache = grants.clone().map(|g| Arc::new(CachedGrants::new(g)));
        Granted { inner, home, grants, cache }
    }

    /// Whether the caller is a person who administers the gateway (not an agent, not a
    /// sub-agent).
    fn is_admin(grants: &Grants, ctx: &CallContext) -> bool {
        let agent = &ctx.identity.agent;
        let as_agent =
            grants.identity().principal_get(agent).ok().flatten().is_some_and(|p| p.kind == PrincipalKind::Agent);
        !as_agent
            && ctx.subagent_depth == 0
            && grants
                .identity()
                .principal_get(&ctx.identity.user)
                .ok()
                .flatten()
                .is_some_and(|p| p.kind == PrincipalKind::User && p.admin && !p.disabled)
    }

    /// `ctx` moved onto the home gate's workspace, the caller's identity kept.
    fn home_context(&self, ctx: &CallContext) -> CallContext {
        let mut moved = ctx.clone();
        moved.workspace = CallHandler::context(&*self.home).workspace;
        moved
    }

    fn home_tools(&self, grants: &Grants, ctx: &CallContext) -> Vec<ToolSpec> {
        let admin = Self::is_admin(grants, ctx);
        self.home
            .visible_tools(&self.home_context(ctx))
            .into_iter()
            .filter(|s| s.name == REQUEST_ACCESS || (s.name == ADMIN_TOOL && admin))
            .collect()
    }
}

fn access(grants: &CachedGrants, ctx: &CallContext) -> Result<Arc<Access>, ToolError> {
    grants.access(&ctx.identity.user, Some(ctx.identity.agent.as_str())).map_err(|e| {
        tracing::error!("cannot read the grants of {}: {e}", ctx.identity.user);
        ToolError::failed("cannot read your grants now; retry")
    })
}

/// Whether `ctx`'s caller, whose grants are `access`, may call `name` of `inner`: only a name
/// the caller's list has (an alias or another spelling would otherwise reach a tool the grants
/// refuse), granted.
fn check(
    inner: &dyn CallHandler,
    home: &Gate,
    access: &Access,
    ctx: &CallContext,
    name: &str,
) -> Result<(), ToolError> {
    let group = match inner.find(ctx, name) {
        Some(spec) => spec.group,
        // A configured bridged server's tool the caller's gate has not listed yet (its
        // connection, made with the caller's own sign-in, is starting, or waits for that
        // sign-in): decided by the server's grant; the caller's gate then says which.
        None => match home.bridged_server_of(name) {
            Some(server) => format!("mcp:{server}"),
            None => return Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None }),
        },
    };
    match access.decide(ToolRef::of(name, &group)) {
        d if d.allowed() => Ok(()),
        d => Err(not_granted(name, d)),
    }
}

/// What a caller refused a tool is told: the tool exists, and how to ask for it.
fn not_granted(tool: &str, decided: Decided) -> ToolError {
    let reason = match decided {
        Decided::Denied(id) => format!("grant {id} of this gateway refuses it; ask an admin if you need it"),
        _ => format!(
            "you have no grant for it on this gateway. Ask for it: call `{REQUEST_ACCESS}` with \
             {{\"tool\": \"{tool}\", \"reason\": \"why you need it\"}}; it works on your next call once an admin approves"
        ),
    };
    ToolError::Denied { tool: tool.to_owned(), reason }
}

#[async_trait::async_trait]
impl CallHandler for Granted {
    fn context(&self) -> CallContext {
        self.inner.context()
    }

    fn list(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        let (Some(grants), Some(cache)) = (&self.grants, &self.cache) else { return self.inner.list(ctx) };
        let Ok(access) = access(cache, ctx) else { return self.home_tools(grants, ctx) };
        let mut tools: Vec<ToolSpec> = self
            .inner
            .list(ctx)
            .into_iter()
            .filter(|s| !HOME_TOOLS.contains(&s.name.as_str()))
            .filter(|s| access.decide(ToolRef::of(&s.name, &s.group)).allowed())
            .collect();
        tools.extend(self.home_tools(grants, ctx));
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let (Some(grants), Some(cache)) = (&self.grants, &self.cache) else {
            return self.inner.call(ctx, name, params).await;
        };
        if HOME_TOOLS.contains(&name) {
            if name == ADMIN_TOOL && !Self::is_admin(grants, ctx) {
                return Err(ToolError::Denied {
                    tool: name.to_owned(),
                    reason: "only a gateway admin (a person, not an agent or a sub-agent) may use it".to_owned(),
                });
            }
            return CallHandler::call(&*self.home, &self.home_context(ctx), name, params).await;
        }
        let checked = access(cache, ctx).and_then(|access| {
            check(self.inner.as_ref(), &self.home, &access, ctx, name)?;
            Ok(access)
        });
        let access = match checked {
            Ok(access) => access,
            Err(refused) => {
                // Refused before any gate: the gateway's audit log has the row.
                let why = "gateway grants: refused before the gate";
                self.home.record_refused_by(ctx, name, &params.to_string(), &refused, why);
                return Err(refused);
            }
        };
        // The gate checks the call again with its touches (argument rules, mode ask), with the
        // grants just read, and every call of a sub-agent it starts.
        let ctx = with_grants(ctx, cache, Some(access));
        self.inner.call(&ctx, name, params).await
    }

    fn tool_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.tool_changes()
    }

    // A grant written for the caller (an approved access request, a revoked grant) changes
    // what they may list: their sessions are told.
    fn caller_changes(&self, caller: &toolgate_mcp::Caller) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.grants.as_ref().map(|_| toolgate_gateway::grant_changes(&caller.user))
    }

    // MCP tasks, grant-checked like plain calls.
    fn tasks(&self) -> Option<Arc<dyn toolgate_mcp::TaskHost>> {
        let tasks = self.inner.tasks()?;
        let tasks = match &self.cache {
            Some(cache) => {
                Arc::new(TasksWithGrants { tasks, grants: Arc::clone(cache) }) as Arc<dyn toolgate_mcp::TaskHost>
            }
            None => tasks,
        };
        let Some(cache) = &self.cache else { return Some(tasks) };
        Some(Arc::new(GrantedTasks {
            tasks,
            inner: Arc::clone(&self.inner),
            home: Arc::clone(&self.home),
            grants: Arc::clone(cache),
        }))
    }

    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

/// The inner handler's MCP tasks behind the same grants: a tool the caller is not granted never
/// runs as a task (its plain call is then refused with what to request), and starting one
/// checks again.
struct GrantedTasks {
    tasks: Arc<dyn toolgate_mcp::TaskHost>,
    inner: Arc<dyn CallHandler>,
    home: Arc<Gate>,
    grants: Arc<CachedGrants>,
}

impl GrantedTasks {
    fn checked(&self, ctx: &CallContext, tool: &str) -> Result<(), ToolError> {
        let access = access(&self.grants, ctx)?;
        check(self.inner.as_ref(), &self.home, &access, ctx, tool)
    }
}

impl std::fmt::Debug for GrantedTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantedTasks").field("tasks", &self.tasks).finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl toolgate_mcp::TaskHost for GrantedTasks {
    // Asked of every call: the grants are read only for a tool that would run as a task.
    fn runs_as_task(&self, ctx: &CallContext, tool: &str) -> bool {
        self.tasks.runs_as_task(ctx, tool) && self.checked(ctx, tool).is_ok()
    }

    async fn start(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<toolgate_mcp::TaskState, ToolError> {
        self.checked(ctx, tool)?;
        self.tasks.start(ctx, tool, params).await
    }

    async fn get(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        self.tasks.get(ctx, id).await
    }

    async fn cancel(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        self.tasks.cancel(ctx, id).await
    }
}

/// `ctx` carrying the caller's grants for the gate ([`CallContext::grants`]); `admitted`: the
/// grants the gateway just checked this call with, which the gate's check of it reuses.
fn with_grants(ctx: &CallContext, grants: &Arc<CachedGrants>, admitted: Option<Arc<Access>>) -> CallContext {
    let mut ctx = ctx.clone();
    let caller = CallerGrants {
        grants: Arc::clone(grants),
        user: ctx.identity.user.clone(),
        agent: ctx.identity.agent.clone(),
        admitted: std::sync::Mutex::new(admitted),
    };
    ctx.grants = Some(Arc::new(caller));
    ctx
}

/// The caller's grants as the gate checks them on each call, once its touches are known. They
/// are those of the user and agent the gateway admitted, whichever sub-agent makes the call
/// (a sub-agent never has more than its parent), current for every call: the call the gateway
/// let through is checked with the grants read for its request (`admitted`, used once), every
/// later call made with this context (a sub-agent's) reads them again, so a grant revoked while
/// a sub-agent runs applies to its next call.
#[derive(Debug)]
struct CallerGrants {
    grants: Arc<CachedGrants>,
    user: String,
    agent: String,
    admitted: std::sync::Mutex<Option<Arc<Access>>>,
}

impl CallerGrants {
    /// The grants of the admitted call the first time, read again (the store's revisions, and
    /// a compile if they moved) every time after.
    fn access(&self) -> Result<Arc<Access>, ToolError> {
        let admitted = self.admitted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match admitted {
            Some(access) => Ok(access),
            None => self.grants.access(&self.user, Some(self.agent.as_str())).map_err(|e| {
                tracing::error!("cannot read the grants of {}: {e}", self.user);
                ToolError::failed("cannot read your grants now; retry")
            }),
        }
    }
}

impl toolgate_core::CallGrants for CallerGrants {
    fn check(
        &self,
        ctx: &CallContext,
        spec: &ToolSpec,
        touches: &toolgate_core::Touches,
    ) -> Result<toolgate_core::GrantedCall, ToolError> {
        let tool = spec.name.as_str();
        if tool == ADMIN_TOOL && (ctx.subagent_depth > 0 || !ctx.ancestors.is_empty()) {
            return Err(ToolError::Denied {
                tool: tool.to_owned(),
                reason: "the `gateway` tool is never a sub-agent's, at any depth".to_owned(),
            });
        }
        let access = self.access()?;
        let granted = |trace: String, ask: Option<String>| Ok(toolgate_core::GrantedCall { trace, ask });
        match access.decide_call(ToolRef::of(tool, &spec.group), touches) {
            Decided::Granted(id) => granted(format!("gateway grant {id}: allow"), None),
            Decided::Default => granted("gateway: default_tools".to_owned(), None),
            Decided::Ask(id) => granted(
                format!("gateway grant {id}: ask"),
                Some(format!("grant {id} of this gateway gives `{tool}` once a person approves each call")),
            ),
            Decided::Narrowed(id) => {
                let rule = access.rule_of(id).unwrap_or("its argument rule");
                Err(ToolError::Denied {
                    tool: tool.to_owned(),
                    reason: format!(
                        "grant {id} of this gateway gives `{tool}` only for calls matching `{rule}`, and this call \
                         does not match. To do this, ask for more: call `{REQUEST_ACCESS}` with {{\"tool\": \
                         \"{tool}\", \"reason\": \"what you need to run and why\"}}"
                    ),
                })
            }
            d => Err(not_granted(tool, d)),
        }
    }

    // Read from the cache (not the admitted grants, which the call's check has used): a grant
    // changed since the check applies to the settings too.
    fn server_settings(&self, spec: &ToolSpec) -> Result<Option<toolgate_core::GrantSettings>, ToolError> {
        let access = self.grants.access(&self.user, Some(self.agent.as_str())).map_err(|e| {
            tracing::error!("cannot read the grants of {}: {e}", self.user);
            ToolError::failed("cannot read your grants now; retry")
        })?;
        match access.server_settings(ToolRef::of(&spec.name, &spec.group)) {
            Ok(found) => {
                Ok(found.map(|(grant, settings)| toolgate_core::GrantSettings { grant, settings: settings.clone() }))
            }
            Err(conflict) => Err(ToolError::Denied { tool: spec.name.clone(), reason: conflict }),
        }
    }

    fn listed(&self, ctx: &CallContext, tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
        let Ok(access) = self.grants.access(&self.user, Some(self.agent.as_str())) else { return Vec::new() };
        let sub = ctx.subagent_depth > 0 || !ctx.ancestors.is_empty();
        tools
            .into_iter()
            .filter(|s| !(sub && s.name == ADMIN_TOOL))
            .filter(|s| access.decide(ToolRef::of(&s.name, &s.group)).allowed())
            .collect()
    }
}

/// The gateway's grants of a principal as they are now, for runs made later on its behalf (a
/// routine's fires, `toolgate_automation`'s port): the principal is checked at each fire and
/// again before each call the run makes (a user or agent disabled since, or a user gone, runs
/// nothing), and the grants are read for every call, as a request's are.
#[derive(Debug, Clone)]
pub struct PrincipalGrants {
    grants: Arc<CachedGrants>,
    /// The one user whose runs this gate makes (a per-user workspace): a routine stored there
    /// for anyone else runs nothing, whatever its row says.
    only: Option<String>,
}

impl PrincipalGrants {
    /// `grants` (the gateway's) for the runs of the gateway's own gate.
    pub fn new(grants: Grants) -> Self {
        PrincipalGrants { grants: Arc::new(CachedGrants::new(grants)), only: None }
    }

    /// `grants` for the runs of `user`'s own gate (a per-user workspace): every routine there is
    /// held to `user`'s grants, even one whose row names no principal.
    pub fn of_user(grants: Grants, user: &str) -> Self {
        PrincipalGrants { grants: Arc::new(CachedGrants::new(grants)), only: Some(user.to_owned()) }
    }

    /// Why `user` acting as `agent` may make no call now, if so.
    fn inactive(&self, user: &str, agent: &str) -> Option<String> {
        if let Some(only) = &self.only
            && only != user
        {
            return Some(format!("this workspace is `{only}`'s, and it runs nothing for anyone else"));
        }
        let identity = self.grants.grants().identity();
        let get = |name: &str| identity.principal_get(name).map_err(|e| format!("cannot read `{name}`: {e}"));
        let me = match get(user) {
            Ok(Some(p)) => p,
            Ok(None) => return Some(format!("`{user}` is no longer a principal of this gateway")),
            Err(e) => return Some(e),
        };
        if me.disabled {
            return Some(format!("`{user}` is disabled on this gateway"));
        }
        // An agent acting as its own user (a group's agent): its owning user must be enabled too.
        if me.kind == PrincipalKind::Agent
            && let Some(owner) = &me.owner
        {
            match get(owner) {
                Ok(Some(o)) if o.kind == PrincipalKind::User && o.disabled => {
                    return Some(format!("`{owner}`, who owns the agent `{user}`, is disabled on this gateway"));
                }
                Ok(_) => {}
                Err(e) => return Some(e),
            }
        }
        if agent != user {
            match get(agent) {
                Ok(Some(a)) if a.kind == PrincipalKind::Agent && a.disabled => {
                    return Some(format!("the agent `{agent}` is disabled on this gateway"));
                }
                Ok(_) => {}
                Err(e) => return Some(e),
            }
        }
        None
    }
}

impl toolgate_core::PrincipalGrants for PrincipalGrants {
    fn grants_of(&self, user: &str, agent: &str) -> Result<Arc<dyn toolgate_core::CallGrants>, String> {
        if let Some(why) = self.inactive(user, agent) {
            return Err(why);
        }
        let caller = CallerGrants {
            grants: Arc::clone(&self.grants),
            user: user.to_owned(),
            agent: agent.to_owned(),
            admitted: std::sync::Mutex::new(None),
        };
        Ok(Arc::new(LaterGrants { caller, principals: Arc::new(self.clone()) }))
    }

    fn every_routine(&self) -> bool {
        self.only.is_some()
    }
}

/// A principal's grants for a run made later on its behalf: [`CallerGrants`], and before each
/// call the principal checked again (a run that outlives a user's disabling stops there).
#[derive(Debug)]
struct LaterGrants {
    caller: CallerGrants,
    principals: Arc<PrincipalGrants>,
}

impl toolgate_core::CallGrants for LaterGrants {
    fn check(
        &self,
        ctx: &CallContext,
        spec: &ToolSpec,
        touches: &toolgate_core::Touches,
    ) -> Result<toolgate_core::GrantedCall, ToolError> {
        if let Some(why) = self.principals.inactive(&self.caller.user, &self.caller.agent) {
            return Err(ToolError::Denied { tool: spec.name.clone(), reason: format!("gateway grants: {why}") });
        }
        toolgate_core::CallGrants::check(&self.caller, ctx, spec, touches)
    }

    fn listed(&self, ctx: &CallContext, tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
        if self.principals.inactive(&self.caller.user, &self.caller.agent).is_some() {
            return Vec::new();
        }
        toolgate_core::CallGrants::listed(&self.caller, ctx, tools)
    }

    fn server_settings(&self, spec: &ToolSpec) -> Result<Option<toolgate_core::GrantSettings>, ToolError> {
        toolgate_core::CallGrants::server_settings(&self.caller, spec)
    }
}

/// MCP tasks started with the caller's grants in their context, so the gate checks them as it
/// does a plain call's.
struct TasksWithGrants {
    tasks: Arc<dyn toolgate_mcp::TaskHost>,
    grants: Arc<CachedGrants>,
}

impl std::fmt::Debug for TasksWithGrants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TasksWithGrants").field("tasks", &self.tasks).finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl toolgate_mcp::TaskHost for TasksWithGrants {
    fn runs_as_task(&self, ctx: &CallContext, tool: &str) -> bool {
        self.tasks.runs_as_task(ctx, tool)
    }

    async fn start(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<toolgate_mcp::TaskState, ToolError> {
        self.tasks.start(&with_grants(ctx, &self.grants, None), tool, params).await
    }

    async fn get(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        self.tasks.get(ctx, id).await
    }

    async fn cancel(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        self.tasks.cancel(ctx, id).await
    }
}

#[cfg(test)]
mod tests {
    use toolgate_core::{Identity, Touches};
    use toolgate_gateway::Admin;
    use toolgate_store::{GrantStore, Store, ToolGrant};

    use super::*;

    /// Through serde, so the test does not name every field (the grant grows).
    fn grant(subject: &str, tool: &str) -> ToolGrant {
        serde_json::from_value(serde_json::json!({
            "id": 0, "subject": subject, "server": null, "tool_allow": [tool], "tool_deny": [],
            "enabled": true, "config_overrides": {}, "mode": "allow", "expires_ms": null,
            "granted_by": "root", "request": null, "note": "", "created_ms": 1
        }))
        .unwrap()
    }

    /// The grants read when the gateway let a call through decide that call at the gate too
    /// (no second read); a grant revoked meanwhile, by another process on the same store,
    /// refuses the next call made with the same context (a sub-agent's) and the next request.
    #[test]
    fn the_grants_read_for_a_call_decide_that_call_only_and_a_revoked_grant_refuses_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let server = Arc::new(Store::open(&path).unwrap());
        let other = Arc::new(Store::open(&path).unwrap());
        Admin::new(other.clone()).user_add("ann", false, &[]).unwrap();
        let id = other.tool_grant_add(&grant("ann", "echo")).unwrap();
        let cache = Arc::new(CachedGrants::new(Grants::new(server.clone(), server, Vec::new())));
        let ctx = CallContext::new(dir.path()).with_identity(Identity {
            user: "ann".to_owned(),
            agent: "main".to_owned(),
            session: "s".to_owned(),
        });
        let echo = ToolSpec::new("echo", "Echoes", serde_json::json!({"type": "object"}));
        let touches = Touches::default();

        let admitted = access(&cache, &ctx).unwrap();
        let call = with_grants(&ctx, &cache, Some(admitted));
        other.grant_revoke(id).unwrap();
        let grants = call.grants.as_ref().unwrap();
        let checked = grants.check(&call, &echo, &touches).unwrap();
        assert_eq!(checked.trace, format!("gateway grant {id}: allow"), "the admitted call, as admitted");
        for next in
            [grants.check(&call, &echo, &touches), grants.check(&call.clone().subagent("helper"), &echo, &touches)]
        {
            let refused = next.unwrap_err().to_string();
            assert!(refused.contains("no grant"), "revoked before this call: {refused}");
        }
        let request = access(&cache, &ctx).unwrap();
        assert!(!request.decide(ToolRef::of("echo", "")).allowed(), "the next request");
    }
}
