//! [`PerUserGates`]: a team gateway's per-user workspaces. Each user (the [`Caller`] a request's
//! API key names, set on the call's identity by the MCP server) gets a workspace of its own under
//! the gateway's `[gateway] workspaces` folder, with a gate of its own on it: its own files,
//! sandbox, processes, memory, sessions, locks and audit log (the state database in that
//! workspace's `.toolgate/`). Every user's gate is built from the gateway's configuration, never
//! from a `toolgate.toml` inside the user's workspace, which the user's own tools can write.
//!
//! [`Caller`]: toolgate_mcp::Caller

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_mcp::CallHandler;
use toolgate_mcp::bridge::oauth::SecretVault;
use toolgate_store::GrantStore;

use crate::config::Config;
use crate::{Approver, Gate};

/// One gate per user, each on `ROOT/USER`, made on the user's first request.
#[derive(Debug)]
pub struct PerUserGates {
    /// Shared with the MCP tasks port ([`PerUserTasks`]), which finds each user's gate too.
    users: Arc<Users>,
}

#[derive(Debug)]
struct Users {
    root: PathBuf,
    /// The gateway's configuration in force ([`PerUserGates::reload`] replaces it).
    config: std::sync::RwLock<Config>,
    approver: Option<Arc<dyn Approver>>,
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    /// Ends every user gate's background tasks (its routine scheduler, event routines, job
    /// sweeps) with the server.
    shutdown: CancellationToken,
    /// The gateway's vault of upstream sign-ins: each user's gate connects its bridged servers
    /// with that user's own (`docs/gateway.md`, "Upstream sign-ins").
    upstream: OnceLock<Arc<dyn SecretVault>>,
    /// The gateway's grant store: each user's "allow always" decisions are kept there.
    grants: OnceLock<Arc<dyn GrantStore>>,
    /// The gateway's grants: each user's routines fire under that user's, as they are then.
    routine_grants: OnceLock<toolgate_gateway::Grants>,
}

impl PerUserGates {
    /// Users' workspaces under `root` (made `0700` when missing), each gate built with
    /// `config`, asking `approver`, its background tasks running until `shutdown`.
    pub fn new(
        root: impl Into<PathBuf>,
        config: Config,
        approver: Option<Arc<dyn Approver>>,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        let root = root.into();
        private_dir(&root)?;
        let root = root.canonicalize()?;
        let users = Users {
            root,
            config: std::sync::RwLock::new(config),
            approver,
            gates: Mutex::new(HashMap::new()),
            shutdown,
            upstream: OnceLock::new(),
            grants: OnceLock::new(),
            routine_grants: OnceLock::new(),
        };
        Ok(PerUserGates { users: Arc::new(users) })
    }

    /// The folder the users' workspaces are in.
    pub fn root(&self) -> &Path {
        &self.users.root
    }

    /// Keeps upstream sign-ins in `vault` (the gateway's; its users' own workspaces, which their
    /// tools can write, never hold them). Set once, before the first request.
    pub fn set_upstream_vault(&self, vault: Arc<dyn SecretVault>) {
        let _ = self.users.upstream.set(vault);
    }

    /// Keeps every user's "allow always" decisions in `grants` (the gateway's store: one grant
    /// store, which the users' tools cannot reach); a user's decisions kept in their own
    /// workspace database by an earlier version move there when their gate is first built. Set
    /// once, before the first request.
    pub fn set_approval_grants(&self, grants: Arc<dyn GrantStore>) {
        let _ = self.users.grants.set(grants);
    }

    /// Holds every user's routines to `grants` (the gateway's): a routine in a user's workspace
    /// fires only under that user's grants as they are then, whatever its row in the user's
    /// own database says. Set once, before the first request.
    pub fn hold_routines_to(&self, grants: toolgate_gateway::Grants) {
        let _ = self.users.routine_grants.set(grants);
    }

    /// `user`'s gate, built (with its workspace) on first use.
    pub fn gate_for(&self, user: &str) -> Result<Arc<Gate>, ToolError> {
        self.users.gate_for(user)
    }

    /// Puts the gateway's reloaded `config` in force on every user's gate (and on the gates
    /// made from now on), as [`Gate::reload`] does on the gateway's own. A gate that refuses it
    /// keeps its configuration (logged; the gateway's own reload already checked the same).
    pub fn reload(&self, config: &Config) {
        *self.users.config.write().unwrap_or_else(std::sync::PoisonError::into_inner) = config.clone();
        let gates: Vec<(String, Arc<Gate>)> = {
            let gates = self.users.gates.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            gates.iter().map(|(user, gate)| (user.clone(), Arc::clone(gate))).collect()
        };
        for (user, gate) in gates {
            if let Err(e) = gate.reload(&user_config(config, &user)) {
                tracing::warn!("{user}'s gate keeps its configuration: {e}");
            }
        }
    }
}

/// `user`'s gate's configuration: the gateway's, with the user's own tool policy
/// (`[gateway.policy.USER]`) in place of `[tools]`'s when there is one. A user's gate is no
/// gateway: the gateway's own tools (`request_access`, `gateway`) run on the gateway's gate,
/// which keeps the grants (`gateway_family.rs`). Nor does it open the gateway's shared
/// database (`[store] url`): its state is the user's own workspace's, out of other users'
/// reach (secrets above all), and what it shares with the gateway (the approvals inbox, the
/// "allow always" grants, upstream sign-ins) is handed to it by the gateway.
fn user_config(gateway: &Config, user: &str) -> Config {
    let mut config = gateway.clone();
    if let Some(policy) = gateway.gateway.policy.get(user) {
        config.tools.policy = policy.clone();
    }
    config.gateway.enabled = false;
    // The user's state stays in the user's workspace; the audit log is the team's.
    config.store = crate::config::StoreConfig { url: None, audit_url: gateway.store.url.clone() };
    config
}

impl Users {
    fn gate_for(&self, user: &str) -> Result<Arc<Gate>, ToolError> {
        // The name became a folder: only names the gateway accepts for principals (no `/`,
        // no `..`, no hidden folder) ever reach here, but a handler must not trust that.
        toolgate_gateway::check_name(user).map_err(|e| ToolError::failed(e.to_string()))?;
        let mut gates = self.gates.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(gate) = gates.get(user) {
            return Ok(Arc::clone(gate));
        }
        let workspace = self.root.join(user);
        private_dir(&workspace).map_err(|e| ToolError::failed(format!("cannot make {user}'s workspace: {e}")))?;
        let config = user_config(&self.config.read().unwrap_or_else(std::sync::PoisonError::into_inner), user);
        let mut builder = Gate::builder(&workspace).config(config);
        if let Some(approver) = &self.approver {
            builder = builder.approver(Arc::clone(approver));
        }
        if let Some(vault) = self.upstream.get() {
            builder = builder.gateway_user(user, Arc::clone(vault));
        }
        if let Some(grants) = self.grants.get() {
            builder = builder.approval_grants(Arc::clone(grants));
        }
        let gate =
            builder.build_shared().map_err(|e| ToolError::failed(format!("cannot open {user}'s workspace: {e}")))?;
        if let Some(grants) = self.grants.get() {
            move_approval_grants(user, &gate, grants.as_ref());
        }
        if let Some(grants) = self.routine_grants.get() {
            gate.hold_routines_to(Arc::new(crate::granted::PrincipalGrants::of_user(grants.clone(), user)));
        }
        // A user's routines fire and its jobs are swept like the gateway's own (the tasks end
        // with `shutdown`; their handles are not needed).
        drop(gate.start_tasks(&self.shutdown));
        // The user's bridged servers, connected as the user (a call waits for the first attempt).
        gate.start_mcp();
        gates.insert(user.to_owned(), Arc::clone(&gate));
        Ok(gate)
    }
}

impl PerUserGates {
    /// `ctx` moved into `gate`'s workspace: the caller's identity, cancellation, progress and
    /// client stay; the workspace every path is confined to is the user's.
    fn in_workspace(gate: &Gate, ctx: &CallContext) -> CallContext {
        let mut moved = ctx.clone();
        moved.workspace = gate.context().workspace;
        moved
    }
}

/// Moves the "allow always" decisions an earlier version kept in `user`'s own workspace database
/// into the gateway's store (each added there before it is removed here, so a failure loses
/// none: the next start tries again).
fn move_approval_grants(user: &str, gate: &Gate, gateway: &dyn GrantStore) {
    let Some(stores) = gate.services().stores.as_ref() else { return };
    let own = match stores.grants.grants() {
        Ok(own) => own,
        Err(e) => {
            tracing::warn!("cannot read {user}'s \"allow always\" decisions to move them to the gateway: {e}");
            return;
        }
    };
    for grant in own {
        let moved = gateway.grant_add(&grant).and_then(|()| stores.grants.grant_revoke(grant.id));
        if let Err(e) = moved {
            tracing::warn!("cannot move {user}'s \"allow always\" decision {} to the gateway: {e}", grant.id);
        }
    }
}

/// `dir`, made `0700` when missing (and made so when it exists): one user's files are not
/// readable by other local accounts.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[async_trait::async_trait]
impl CallHandler for PerUserGates {
    fn context(&self) -> CallContext {
        // Replaced per call by the user's workspace; the root is no one's workspace.
        CallContext::new(self.users.root.clone())
    }

    fn list(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        match self.gate_for(&ctx.identity.user) {
            Ok(gate) => gate.visible_tools(&Self::in_workspace(&gate, ctx)),
            Err(e) => {
                tracing::warn!("no tools for {}: {e}", ctx.identity.user);
                Vec::new()
            }
        }
    }

    fn find(&self, ctx: &CallContext, name: &str) -> Option<ToolSpec> {
        let gate = self.gate_for(&ctx.identity.user).ok()?;
        gate.visible_tool(&Self::in_workspace(&gate, ctx), name)
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let gate = self.gate_for(&ctx.identity.user)?;
        CallHandler::call(&*gate, &Self::in_workspace(&gate, ctx), name, params).await
    }

    /// MCP tasks in each user's own gate (its jobs, in its workspace's state database), unless
    /// `[automation] task_tools` is empty.
    fn tasks(&self) -> Option<Arc<dyn toolgate_mcp::TaskHost>> {
        let config = self.users.config.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if config.automation.task_tools.is_empty() {
            return None;
        }
        drop(config);
        Some(Arc::new(PerUserTasks { users: Arc::clone(&self.users) }))
    }

    fn shutdown(&self) {
        let gates: Vec<Arc<Gate>> =
            self.users.gates.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
        for gate in gates {
            gate.shutdown();
        }
    }
}

/// The MCP tasks of a per-user gateway: each request goes to the caller's own gate's tasks, in
/// its workspace, so a user's tasks are jobs of that user's state database, which no other user's
/// gate reads.
#[derive(Debug)]
struct PerUserTasks {
    users: Arc<Users>,
}

impl PerUserTasks {
    /// The caller's gate's tasks and `ctx` moved into its workspace.
    fn host(&self, ctx: &CallContext) -> Option<(Arc<dyn toolgate_mcp::TaskHost>, CallContext)> {
        let gate = self.users.gate_for(&ctx.identity.user).ok()?;
        let host = CallHandler::tasks(&*gate)?;
        Some((host, PerUserGates::in_workspace(&gate, ctx)))
    }

    fn unavailable() -> toolgate_mcp::TaskError {
        toolgate_mcp::TaskError::Invalid("tasks are not available in your workspace".to_owned())
    }
}

#[async_trait::async_trait]
impl toolgate_mcp::TaskHost for PerUserTasks {
    fn runs_as_task(&self, ctx: &CallContext, tool: &str) -> bool {
        self.host(ctx).is_some_and(|(host, ctx)| host.runs_as_task(&ctx, tool))
    }

    async fn start(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<toolgate_mcp::TaskState, ToolError> {
        let (host, ctx) =
            self.host(ctx).ok_or_else(|| ToolError::failed("tasks are not available in your workspace"))?;
        host.start(&ctx, tool, params).await
    }

    async fn get(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        let (host, ctx) = self.host(ctx).ok_or_else(Self::unavailable)?;
        host.get(&ctx, id).await
    }

    async fn cancel(&self, ctx: &CallContext, id: &str) -> Result<toolgate_mcp::TaskState, toolgate_mcp::TaskError> {
        let (host, ctx) = self.host(ctx).ok_or_else(Self::unavailable)?;
        host.cancel(&ctx, id).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use toolgate_store::{Grant, Store};

    use super::*;

    #[test]
    fn a_users_gate_is_no_gateway_and_keeps_its_state_in_its_own_workspace() {
        let mut gateway = Config::default();
        gateway.gateway.enabled = true;
        gateway.store.url = Some("postgres://toolgate@db/toolgate".into());
        let user = user_config(&gateway, "ann");
        assert!(!user.gateway.enabled);
        assert_eq!(user.store.url, None, "users' secrets must not share one namespace in the gateway's database");
        assert_eq!(user.store.audit_url, gateway.store.url, "the user's calls go to the team's audit log");
    }

    fn always(user: &str, subject: &str) -> Grant {
        Grant {
            id: 0,
            user: user.into(),
            agent: "main".into(),
            tool: "exec".into(),
            subject: format!("subject:{subject}"),
            shown: subject.into(),
            created_ms: 1,
        }
    }

    /// One grant store: a user's "allow always" decisions live in the gateway's, and those an
    /// earlier version kept in the user's own workspace database move there (the user's tools
    /// can write their workspace; the gateway's database is out of their reach).
    #[tokio::test]
    async fn a_users_allow_always_decisions_move_to_the_gateways_store() {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("ann/.toolgate");
        std::fs::create_dir_all(&own).unwrap();
        Store::open(&own.join("state.db")).unwrap().grant_add(&always("ann", "git status")).unwrap();
        let gateway_dir = tempfile::tempdir().unwrap();
        let gateway = Arc::new(Store::open(&gateway_dir.path().join("state.db")).unwrap());
        let users = PerUserGates::new(root.path(), Config::default(), None, CancellationToken::new()).unwrap();
        users.set_approval_grants(gateway.clone());

        let gate = users.gate_for("ann").unwrap();
        let moved = gateway.grants().unwrap();
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!((moved[0].user.as_str(), moved[0].subject.as_str()), ("ann", "subject:git status"));
        let left = gate.services().stores.as_ref().unwrap().grants.grants().unwrap();
        assert!(left.is_empty(), "nothing stays in ann's own database: {left:?}");
        // Built again (a restart): nothing moves twice.
        drop(gate);
        let again = PerUserGates::new(root.path(), Config::default(), None, CancellationToken::new()).unwrap();
        again.set_approval_grants(gateway.clone());
        again.gate_for("ann").unwrap();
        assert_eq!(gateway.grants().unwrap().len(), 1);
    }
}
