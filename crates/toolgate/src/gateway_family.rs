//! The team gateway's family (group `gateway`, and `automation` for the `gateway` tool): with
//! `[gateway] enabled`, `request_access` (`toolgate_gateway::RequestAccess`) and `gateway`, the
//! administration tool of seed 000 §2: `status`, `config_get` (the configuration in force,
//! secrets redacted), `config_validate` and `config_apply` (a TOML patch of `toolgate.toml`,
//! validated whole, approval always, then reloaded) and `reload` (the files again, through
//! [`crate::reload::ConfigControl`]). With `[store] url`, `config_apply` stores the patch in the
//! configuration every node shares instead of the file (`crate::shared_config`).
//!
//! Only the gateway's own gate has them: a user's gate (`per_user.rs`) is built with `[gateway]
//! enabled` off, and `toolgate_gateway::Granted` runs these two tools on the gateway's gate. The
//! `gateway` tool checks its caller itself too: a person who is an admin of the gateway, never
//! an agent or a sub-agent (the seed denies it to sub-agents at every depth).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, async_trait,
};
use toolgate_store::{AccessStatus, GrantStore, IdentityStore, PrincipalKind};

use crate::GateError;
use crate::family::Family;
use crate::services::Services;
use crate::shared_config::{self, SharedConfig};

/// `request_access` and `gateway`, when `[gateway] enabled` and the state database is open.
#[derive(Debug)]
pub(crate) struct Gateway;

impl Family for Gateway {
    fn name(&self) -> &'static str {
        "gateway"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let (true, Some(stores)) = (s.config.gateway.enabled, &s.stores) else { return Ok(Vec::new()) };
        let grants = toolgate_gateway::Grants::new(
            Arc::clone(&stores.grants),
            Arc::clone(&stores.identity),
            default_tools(&s.config.gateway),
        );
        let admin = AdminTool {
            spec: admin_spec(),
            grants: Arc::clone(&stores.grants),
            identity: Arc::clone(&stores.identity),
            workspace: s.workspace.clone(),
            control: Arc::clone(&s.config_control),
            started: Instant::now(),
        };
        Ok(vec![toolgate_gateway::RequestAccess::tool(grants), Arc::new(admin)])
    }
}

/// `[gateway] default_tools`, `["*"]` when unset.
pub fn default_tools(config: &toolgate_gateway::GatewayConfig) -> Vec<String> {
    config.default_tools.clone().unwrap_or_else(|| vec!["*".to_owned()])
}

fn admin_spec() -> ToolSpec {
    ToolSpec::new(
        toolgate_gateway::ADMIN_TOOL,
        "Administer this toolgate gateway (admins only). Actions: `status` (version, uptime, users, \
         pending access requests), `config_get` (the configuration, secrets redacted), \
         `config_validate` (check a TOML `patch` of toolgate.toml without applying it), \
         `config_apply` (apply a TOML `patch` to toolgate.toml: always asks a person, refused whole \
         when invalid, then reloaded), `reload` (load the configuration files again and put them in \
         force; says what changed, or why nothing did).",
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["status", "config_get", "config_validate", "config_apply", "reload"]},
                "patch": {"type": "string", "description": "TOML to merge into toolgate.toml", "maxLength": 65536}
            },
            "required": ["action"],
            "additionalProperties": false
        }),
    )
    .group("automation")
    .annotations(Annotations::LOCAL_WRITE)
    .trusted_output()
}

#[derive(Debug)]
struct AdminTool {
    spec: ToolSpec,
    grants: Arc<dyn GrantStore>,
    identity: Arc<dyn IdentityStore>,
    workspace: std::path::PathBuf,
    control: Arc<crate::reload::ConfigControl>,
    started: Instant,
}

impl AdminTool {
    /// Refuses anyone but a gateway admin acting as themself at the top level.
    fn check_caller(&self, ctx: &CallContext) -> Result<(), ToolError> {
        let denied = |reason: &str| Err(ToolError::Denied { tool: self.spec.name.clone(), reason: reason.to_owned() });
        if ctx.subagent_depth > 0 {
            return denied("sub-agents may not administer the gateway");
        }
        let principal = |name: &str| self.identity.principal_get(name).ok().flatten();
        if principal(&ctx.identity.agent).is_some_and(|p| p.kind == PrincipalKind::Agent) {
            return denied("agents may not administer the gateway, whoever owns them");
        }
        match principal(&ctx.identity.user) {
            Some(p) if p.kind == PrincipalKind::User && p.admin && !p.disabled => Ok(()),
            _ => denied("only a gateway admin may use it (`toolgate admin user add NAME --admin`)"),
        }
    }

    fn status(&self) -> Result<Value, ToolError> {
        let store = |e: toolgate_store::StoreError| ToolError::failed(format!("cannot read the gateway's state: {e}"));
        let principals = self.identity.principals(None).map_err(store)?;
        let count = |kind| principals.iter().filter(|p| p.kind == kind).count();
        let pending = self.grants.access_requests(Some(AccessStatus::Pending), None).map_err(store)?.len();
        Ok(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_secs": self.started.elapsed().as_secs(),
            "users": count(PrincipalKind::User),
            "groups": count(PrincipalKind::Group),
            "agents": count(PrincipalKind::Agent),
            "pending_access_requests": pending,
            "grants": self.grants.tool_grants(None).map_err(store)?.len(),
            "nodes": 1,
        }))
    }

    /// The file the server reads its configuration from (the workspace's `toolgate.toml` unless
    /// it was started with `--config FILE`).
    fn config_file(&self) -> std::path::PathBuf {
        self.control.file().map_or_else(|| self.workspace.join("toolgate.toml"), std::path::Path::to_owned)
    }

    /// Loads the files again: what changed, or an error that says the old configuration stays.
    fn reload(&self) -> Result<Value, String> {
        let r = self.control.reload()?;
        Ok(json!({
            "tools": r.tools,
            "removed_tools": r.removed,
            "mcp_started": r.mcp_started,
            "mcp_stopped": r.mcp_stopped,
        }))
    }

    /// The workspace file with `patch` merged in, checked whole; the new text.
    fn patched(&self, patch: &str) -> Result<String, ToolError> {
        let bad = |m: String| ToolError::invalid("gateway", "/patch", m);
        crate::config::Config::check_layer(patch).map_err(|e| bad(format!("the patch is not valid: {e}")))?;
        let current = match std::fs::read_to_string(self.config_file()) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(ToolError::failed(format!("cannot read toolgate.toml: {e}"))),
        };
        let mut base: toml::Table =
            toml::from_str(&current).map_err(|e| ToolError::failed(format!("toolgate.toml is not valid TOML: {e}")))?;
        let over: toml::Table = toml::from_str(patch).map_err(|e| bad(format!("the patch is not TOML: {e}")))?;
        merge(&mut base, over);
        let text = toml::to_string(&base).map_err(|e| ToolError::failed(e.to_string()))?;
        crate::config::Config::check_layer(&text)
            .map_err(|e| bad(format!("toolgate.toml with this patch is not valid, nothing was changed: {e}")))?;
        Ok(text)
    }
}

impl AdminTool {
    /// With `[store] url`: `stored`, the shared sections read from the database (`None`: nothing
    /// stored, so this node's file's), with `patch` merged in, checked as a reload checks them on
    /// this node. A patch of any other section is refused: those stay each node's own.
    fn shared_patched(
        &self,
        shared: &SharedConfig,
        stored: Option<toml::Table>,
        patch: &str,
    ) -> Result<toml::Table, ToolError> {
        let bad = |m: String| ToolError::invalid("gateway", "/patch", m);
        let (over, others) = shared_config::split(patch).map_err(|e| bad(format!("the patch is {e}")))?;
        if !others.is_empty() {
            return Err(bad(format!(
                "with [store] url, config_apply changes the configuration every node shares ({}); {} stay in each \
                 node's own toolgate.toml: edit that file on each node",
                shared_config::SHARED_NAMES,
                others.join(", ")
            )));
        }
        let mut base = match stored {
            Some(stored) => stored,
            None => match std::fs::read_to_string(self.config_file()) {
                Ok(text) => {
                    shared_config::split(&text).map_err(|e| ToolError::failed(format!("toolgate.toml is {e}")))?.0
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => toml::Table::new(),
                Err(e) => return Err(ToolError::failed(format!("cannot read toolgate.toml: {e}"))),
            },
        };
        merge(&mut base, over);
        let invalid =
            |e: String| bad(format!("the shared configuration with this patch is not valid, nothing was changed: {e}"));
        let config = shared.load_over(&base).map_err(invalid)?;
        self.control.check(&config).map_err(invalid)?;
        Ok(base)
    }

    /// `config_apply` with `[store] url`: stored in the database, reloaded here, and by every
    /// other node when it hears of it.
    fn apply_shared(&self, shared: &SharedConfig, patch: &str, by: &str) -> Result<ToolOutput, ToolError> {
        // Merged over the sections stored, and stored only if they are still those (else
        // merged again over the newer ones): two admins applying at once both keep theirs.
        let revision = shared
            .put_over(by, |stored| self.shared_patched(shared, stored, patch).map_err(Refused::Patch))
            .map_err(|e| match e {
                Refused::Patch(e) => e,
                Refused::Store(e) => ToolError::failed(format!("not stored, nothing was changed: {e}")),
            })?;
        let (text, reloaded) = match self.reload() {
            Ok(r) => (
                format!(
                    "stored as the configuration every node shares (revision {revision}) and reloaded on this node; \
                     the other nodes put it in force as they hear of it"
                ),
                r,
            ),
            Err(e) => (
                format!(
                    "stored as the shared configuration (revision {revision}), but not reloaded on this node ({e}); \
                     its previous configuration stays in force"
                ),
                Value::Null,
            ),
        };
        Ok(ToolOutput::text(text.clone())
            .with_structured(json!({"applied": text, "revision": revision, "reloaded": reloaded, "needs_restart": []})))
    }
}

/// Why `config_apply` stored nothing: its patch is refused (as it is), or storing failed.
enum Refused {
    Patch(ToolError),
    Store(String),
}

impl From<String> for Refused {
    fn from(e: String) -> Self {
        Refused::Store(e)
    }
}

/// The sections of `patch` that a reload does not put in force (`reload.rs`: `[tools]`,
/// `[mcp]`, `[gate] dialect` and the custom and skill tools do), as `[name]`.
fn needs_restart(patch: &str) -> Vec<String> {
    let Ok(table) = toml::from_str::<toml::Table>(patch) else { return Vec::new() };
    let mut out = Vec::new();
    for (key, value) in &table {
        match key.as_str() {
            "tools" | "mcp" => {}
            "gate" => {
                let keys = value.as_table().into_iter().flat_map(|t| t.keys());
                out.extend(keys.filter(|k| *k != "dialect").map(|k| format!("[gate] {k}")));
            }
            other => out.push(format!("[{other}]")),
        }
    }
    out
}

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => drop(base.insert(key, value)),
        }
    }
}

/// Values under names that hold secrets are replaced, at any depth.
fn redact(value: &mut Value) {
    const SECRET: &[&str] = &["secret", "token", "password", "key", "authorization", "credential", "env", "headers"];
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let lower = k.to_ascii_lowercase();
                if SECRET.iter().any(|s| lower.contains(s)) && !v.is_null() && *v != json!(false) {
                    *v = json!("[redacted]");
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

#[async_trait]
impl Tool for AdminTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        let read_only = matches!(action, "status" | "config_get" | "config_validate");
        let mut safety = CallSafety { read_only, ..CallSafety::default() };
        if action == "config_apply" {
            safety.approval = ApprovalRequirement::Always;
            safety.approval_reason = Some("a change of the gateway's configuration".into());
            safety.approval_subject = params.get("patch").and_then(Value::as_str).map(str::to_owned);
        }
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        self.check_caller(ctx)?;
        let patch = || {
            params
                .get("patch")
                .and_then(Value::as_str)
                .ok_or_else(|| ToolError::invalid("gateway", "/patch", "this action needs `patch`: TOML to merge"))
        };
        match params.get("action").and_then(Value::as_str).unwrap_or_default() {
            "status" => {
                let status = self.status()?;
                Ok(ToolOutput::text(status.to_string()).with_structured(status))
            }
            "config_get" => {
                let mut config =
                    serde_json::to_value(&*self.control.current()).map_err(|e| ToolError::failed(e.to_string()))?;
                redact(&mut config);
                Ok(ToolOutput::text(config.to_string()).with_structured(json!({"config": config})))
            }
            "config_validate" if let Some(shared) = self.control.shared() => {
                self.shared_patched(shared, shared.sections().map_err(ToolError::failed)?, patch()?)?;
                Ok(ToolOutput::text("the patch is valid; `config_apply` stores it for every node"))
            }
            "config_apply" if let Some(shared) = self.control.shared() => {
                self.apply_shared(shared, patch()?, &ctx.identity.user)
            }
            "config_validate" => {
                self.patched(patch()?)?;
                Ok(ToolOutput::text("the patch is valid; `config_apply` applies it"))
            }
            "config_apply" => {
                let patch = patch()?;
                let text = self.patched(patch)?;
                let path = self.config_file();
                let tmp = path.with_extension("toml.tmp");
                std::fs::write(&tmp, text)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| ToolError::failed(format!("cannot write {}: {e}", path.display())))?;
                let restart = needs_restart(patch);
                let restart_note = if restart.is_empty() {
                    String::new()
                } else {
                    format!("; {} take effect at the next restart", restart.join(", "))
                };
                let (text, reloaded) = match self.reload() {
                    Ok(r) => (format!("applied to {} and reloaded{restart_note}", path.display()), r),
                    Err(e) => (
                        format!(
                            "written to {}, but not reloaded ({e}); the previous configuration stays in force",
                            path.display()
                        ),
                        Value::Null,
                    ),
                };
                Ok(ToolOutput::text(text.clone())
                    .with_structured(json!({"applied": text, "reloaded": reloaded, "needs_restart": restart})))
            }
            "reload" => {
                let reloaded = self.reload().map_err(|e| {
                    ToolError::failed(format!("not reloaded, the previous configuration stays in force: {e}"))
                })?;
                Ok(ToolOutput::text(format!("reloaded: {reloaded}")).with_structured(reloaded))
            }
            other => Err(ToolError::invalid("gateway", "/action", format!("unknown action `{other}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use toolgate_core::Identity;
    use toolgate_store::Store;

    use super::*;

    fn tool(dir: &std::path::Path) -> AdminTool {
        let store = Arc::new(Store::open(&dir.join(".toolgate/state.db")).unwrap());
        let admin = toolgate_gateway::Admin::new(store.clone());
        admin.user_add("lee", true, &[]).unwrap();
        admin.user_add("bob", false, &[]).unwrap();
        admin.agent_add("lee-ci", "lee").unwrap();
        AdminTool {
            spec: admin_spec(),
            grants: store.clone(),
            identity: store,
            workspace: dir.to_owned(),
            control: Arc::new(crate::reload::ConfigControl::new(Arc::default())),
            started: Instant::now(),
        }
    }

    fn as_(dir: &std::path::Path, user: &str, agent: &str) -> CallContext {
        let identity = Identity { user: user.into(), agent: agent.into(), ..Identity::default() };
        CallContext::new(dir.to_owned()).with_identity(identity)
    }

    #[tokio::test]
    async fn only_an_admin_in_person_at_the_top_level() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path());
        let status = json!({"action": "status"});
        let ok = t.execute(&as_(dir.path(), "lee", "main"), status.clone()).await.unwrap();
        assert_eq!(ok.structured.as_ref().unwrap()["users"], 2, "{ok:?}");
        for (user, agent, depth) in [("bob", "main", 0), ("lee", "lee-ci", 0), ("lee", "main", 1), ("ghost", "main", 0)]
        {
            let ctx = as_(dir.path(), user, agent).with_depth(depth);
            let e = t.execute(&ctx, status.clone()).await.unwrap_err();
            assert!(matches!(e, ToolError::Denied { .. }), "{user}/{agent}/{depth}: {e}");
        }
    }

    #[tokio::test]
    async fn a_config_patch_is_checked_whole_and_an_invalid_one_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path());
        let lee = as_(dir.path(), "lee", "main");
        std::fs::write(dir.path().join("toolgate.toml"), "[gateway]\nenabled = true\n").unwrap();
        assert_eq!(t.safety(&json!({"action": "config_apply"})).approval, ApprovalRequirement::Always);
        for bad in ["[nope]\nx = 1", "[gateway]\nenabled = \"yes\"", "not toml ["] {
            let e = t.execute(&lee, json!({"action": "config_apply", "patch": bad})).await.unwrap_err();
            assert!(matches!(e, ToolError::InvalidParams { .. }), "{bad}: {e}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("toolgate.toml")).unwrap(), "[gateway]\nenabled = true\n");
        let patch = json!({"action": "config_apply", "patch": "[gateway]\ndefault_tools = [\"echo\"]"});
        let out = t.execute(&lee, patch).await.unwrap();
        let text = std::fs::read_to_string(dir.path().join("toolgate.toml")).unwrap();
        assert!(text.contains("enabled = true") && text.contains("default_tools"), "merged: {text}");
        // A gate no server follows cannot reload: the answer says the file is written, not in force.
        let out = out.structured.unwrap();
        assert!(out["applied"].as_str().unwrap().contains("not reloaded"), "{out}");
        assert_eq!(out["needs_restart"], json!(["[gateway]"]), "{out}");
        let e = t.execute(&lee, json!({"action": "reload"})).await.unwrap_err();
        assert!(e.to_string().contains("previous configuration stays"), "{e}");
    }

    #[test]
    fn a_patch_names_what_a_reload_does_not_put_in_force() {
        assert!(needs_restart("[tools]\ndeny = [\"x\"]\n[mcp.servers.a]\ncommand = \"a\"").is_empty());
        assert_eq!(needs_restart("[gate]\ndialect = \"codex\"\nmax_output_bytes = 9"), ["[gate] max_output_bytes"]);
        assert_eq!(needs_restart("[web]\nx = 1\n[approval]\nmode = \"never\""), ["[approval]", "[web]"]);
    }

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let mut v = json!({"mcp": {"servers": {"gh": {"env": {"GH_TOKEN": "x"}, "headers": {"a": "b"}, "url": "u"}}},
                           "web": {"search": {"api_key": "k"}}, "gateway": {"enabled": true}});
        redact(&mut v);
        let text = v.to_string();
        assert!(!text.contains("\"x\"") && !text.contains("\"k\"") && !text.contains("\"b\""), "{text}");
        assert!(text.contains("\"url\":\"u\"") && text.contains("\"enabled\":true"));
    }
}
