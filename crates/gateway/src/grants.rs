//! Grants: which tools a principal may use through the gateway, and their administration.
//!
//! A grant ([`ToolGrant`] in the store) gives a user, a group or an agent toolgate's own tools
//! (`server: None`) or one bridged server's, narrowed by `tool_allow` (names or `*` patterns;
//! empty: all of them) and `tool_deny` (deny wins), `enabled`, an expiry, a mode (allow, ask:
//! each call waits for a person's approval, or deny) and an optional argument rule in the
//! policy's syntax (`exec(git *)`: the grant covers only the calls it matches). [`Access`] is
//! what one caller may use, built from the store on every request, so a new or revoked grant
//! applies to the next request:
//!
//! - a user has its own grants, its groups' grants, and `[gateway] default_tools` (toolgate's
//!   own tools every principal has without a grant; a bridged server's tools always need one);
//! - an agent acts within its owner's access: with grants of its own it has only what both
//!   allow (a narrower grant narrows it, a wider one does not widen it); without any, its
//!   owner's;
//! - a deny (a `tool_deny` entry, or a grant in mode deny) of any of them wins; then ask over
//!   allow: a call that an `ask` grant covers asks, whatever `allow` grant covers it too;
//! - a tool some grant names is decided by the grants alone: `default_tools` gives only tools
//!   no grant names, so an argument rule is not undone by the default;
//! - argument rules need the call's touches, known to the gate: [`Access::decide`] (listing)
//!   counts a rule's tools as given, [`Access::decide_call`] (each call, sub-agents' too)
//!   checks the rule;
//! - `request_access` is always there: it is how a caller asks for the rest.

use std::sync::Arc;

use toolgate_core::Touches;
use toolgate_policy::ArgumentRule;
use toolgate_store::{GrantMode, GrantStore, IdentityStore, PrincipalKind, ToolGrant};

use crate::GatewayError;
use crate::admin::now_ms;

/// The tool every caller keeps, whatever its grants: it files a request for the others.
pub const REQUEST_ACCESS: &str = "request_access";

/// The admin-only `gateway` tool.
pub const ADMIN_TOOL: &str = "gateway";

/// The gateway's own tools, served by the gateway's gate whichever gate serves a user's others.
pub const HOME_TOOLS: &[&str] = &[REQUEST_ACCESS, ADMIN_TOOL];

/// The longest tool list a grant takes.
const MAX_PATTERNS: usize = 64;

/// Checks a tool name or `*` pattern: 1 to 128 characters of ASCII letters, digits and `_ - .
/// *` (what tool names are made of), so nothing else reaches a pattern, a page or a log.
pub fn check_pattern(pattern: &str) -> Result<(), GatewayError> {
    let ok = !pattern.is_empty()
        && pattern.len() <= 128
        && pattern.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'));
    if ok {
        Ok(())
    } else {
        Err(GatewayError::BadGrant(format!(
            "`{}` is not a tool name or pattern (1 to 128 of letters, digits, _ - . and *)",
            pattern.chars().take(80).collect::<String>().escape_debug()
        )))
    }
}

/// Checks a bridged server's name (as `[mcp.servers.NAME]` has it).
pub fn check_server(name: &str) -> Result<(), GatewayError> {
    let ok = (1..=32).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(GatewayError::BadGrant(format!(
            "`{}` is not an MCP server name (1 to 32 of letters, digits, _ and -, no `__`)",
            name.chars().take(80).collect::<String>().escape_debug()
        )))
    }
}

/// `*` matches any run of characters; everything else is literal.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A tool as grants see it: the server it comes from (`None`: toolgate's own) and its name
/// there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolRef<'a> {
    /// The bridged server (from the tool's group `mcp:NAME`), if any.
    pub server: Option<&'a str>,
    /// Its name on that server (for a bridged tool, the part after `mcp__NAME__`), or its
    /// toolgate name.
    pub name: &'a str,
}

impl<'a> ToolRef<'a> {
    /// The tool called `name` in group `group`.
    pub fn of(name: &'a str, group: &'a str) -> Self {
        match group.strip_prefix("mcp:") {
            Some(server) => {
                let local =
                    name.strip_prefix("mcp__").and_then(|r| r.strip_prefix(server)).and_then(|r| r.strip_prefix("__"));
                ToolRef { server: Some(server), name: local.unwrap_or(name) }
            }
            None => ToolRef { server: None, name },
        }
    }
}

/// A live grant and its argument rule, compiled.
#[derive(Debug, Clone)]
struct Live {
    grant: ToolGrant,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    None,
    Some(Box<ArgumentRule>),
    /// A stored rule that no longer parses (written by another version, or by hand): the
    /// grant gives nothing, and in mode deny refuses everything it covers (failing closed).
    Broken,
}

impl Live {
    fn new(grant: ToolGrant) -> Self {
        let rule = match grant.arg_rule.as_deref().map(ArgumentRule::parse) {
            None => Rule::None,
            Some(Ok(rule)) => Rule::Some(Box::new(rule)),
            Some(Err(e)) => {
                tracing::warn!(grant = grant.id, "the grant's argument rule does not parse; it gives nothing: {e}");
                Rule::Broken
            }
        };
        Live { grant, rule }
    }
}

/// One set of grants (a principal's, with its groups'), live ones only.
#[derive(Debug, Clone, Default)]
struct Set {
    grants: Vec<Live>,
    /// Patterns of toolgate's own tools given without a grant.
    default: Vec<String>,
}

impl Set {
    fn covers(grant: &ToolGrant, tool: ToolRef<'_>) -> bool {
        grant.server.as_deref() == tool.server
            && (grant.tool_allow.is_empty() || grant.tool_allow.iter().any(|p| glob(p, tool.name)))
    }

    /// Whether `live` gives this call: its tools cover it and its rule, if any, is about the
    /// tool and (with the call's touches) matches it. A rule only narrows.
    fn gives(live: &Live, tool: ToolRef<'_>, touches: Option<&Touches>) -> bool {
        live.grant.mode != GrantMode::Deny
            && Self::covers(&live.grant, tool)
            && match (&live.rule, touches) {
                (Rule::None, _) => true,
                (Rule::Broken, _) => false,
                (Rule::Some(rule), None) => rule.about(policy_ref(tool)),
                (Rule::Some(rule), Some(touches)) => rule.admits(policy_ref(tool), touches),
            }
    }

    fn denies(&self, tool: ToolRef<'_>, touches: Option<&Touches>) -> Option<&ToolGrant> {
        let found = self.grants.iter().find(|live| {
            let g = &live.grant;
            g.server.as_deref() == tool.server
                && (g.tool_deny.iter().any(|p| glob(p, tool.name))
                    || (g.mode == GrantMode::Deny
                        && Self::covers(g, tool)
                        && match (&live.rule, touches) {
                            (Rule::None | Rule::Broken, _) => true,
                            // Listing: a rule refuses some calls of the tool, not the tool.
                            (Rule::Some(_), None) => false,
                            (Rule::Some(rule), Some(touches)) => rule.refuses(policy_ref(tool), touches),
                        }))
        });
        found.map(|l| &l.grant)
    }

    fn allows(&self, tool: ToolRef<'_>, touches: Option<&Touches>) -> Option<Decided> {
        if let Some(g) = self.denies(tool, touches) {
            return Some(Decided::Denied(g.id));
        }
        let mut given = self.grants.iter().filter(|l| Self::gives(l, tool, touches)).map(|l| &l.grant);
        let first = given.next();
        if let Some(ask) = first.into_iter().chain(given).find(|g| g.mode == GrantMode::Ask) {
            return Some(Decided::Ask(ask.id));
        }
        if let Some(g) = first {
            return Some(Decided::Granted(g.id));
        }
        // A grant that names the tool under a rule this call does not match: refused, not left
        // to the default (which would undo the rule).
        if let Some(l) = self.grants.iter().find(|l| {
            l.grant.mode != GrantMode::Deny
                && Self::covers(&l.grant, tool)
                && matches!(&l.rule, Rule::Some(r) if r.about(policy_ref(tool)))
        }) {
            return Some(Decided::Narrowed(l.grant.id));
        }
        (tool.server.is_none() && self.default.iter().any(|p| glob(p, tool.name))).then_some(Decided::Default)
    }

    fn find(&self, id: i64) -> Option<&ToolGrant> {
        self.grants.iter().map(|l| &l.grant).find(|g| g.id == id)
    }
}

/// The policy crate's view of a tool, for argument rules: its name, and a group that names
/// its server (`mcp:NAME`) when it has one.
fn policy_ref(tool: ToolRef<'_>) -> toolgate_policy::ToolRef<'_> {
    // The group only matters to group names, which grant rules do not take.
    toolgate_policy::ToolRef::new(tool.name, "")
}

/// Why a tool is or is not available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Grant `N` gives it.
    Granted(i64),
    /// Grant `N` (mode ask) gives it once a person approves the call.
    Ask(i64),
    /// Grant `N` gives the tool only for calls its argument rule matches, and this one does
    /// not.
    Narrowed(i64),
    /// `[gateway] default_tools` gives it.
    Default,
    /// Grant `N` refuses it.
    Denied(i64),
    /// Nothing gives it: request access.
    NotGranted,
}

impl Decided {
    /// Whether the tool may be listed and called.
    pub fn allowed(self) -> bool {
        matches!(self, Decided::Granted(_) | Decided::Ask(_) | Decided::Default)
    }
}

/// What one caller (a user, or an agent acting for one) may use.
#[derive(Debug, Clone)]
pub struct Access {
    owner: Set,
    /// An agent's own grants, when it has any: they narrow the owner's.
    agent: Option<Set>,
    /// The principal the owner's set is for (the user, or an agent's owner): its own grants
    /// in `owner` are more specific than its groups'.
    owner_name: String,
}

impl Access {
    /// Whether `tool` may be listed and called, and which grant decided. A grant's argument
    /// rule is not checked here (the call's touches are not known yet): the gate checks each
    /// call with [`Access::decide_call`].
    pub fn decide(&self, tool: ToolRef<'_>) -> Decided {
        self.decided(tool, None)
    }

    /// Whether this call of `tool`, touching `touches`, may run, and which grant decided:
    /// [`Access::decide`] with argument rules checked.
    pub fn decide_call(&self, tool: ToolRef<'_>, touches: &Touches) -> Decided {
        self.decided(tool, Some(touches))
    }

    fn decided(&self, tool: ToolRef<'_>, touches: Option<&Touches>) -> Decided {
        if tool.server.is_none() && tool.name == REQUEST_ACCESS {
            return Decided::Default;
        }
        let owner = self.owner.allows(tool, touches);
        let Some(agent) = &self.agent else { return owner.unwrap_or(Decided::NotGranted) };
        match (owner, agent.allows(tool, touches)) {
            (Some(Decided::Denied(id)), _) | (_, Some(Decided::Denied(id))) => Decided::Denied(id),
            (Some(Decided::Narrowed(id)), _) | (_, Some(Decided::Narrowed(id))) => Decided::Narrowed(id),
            (None | Some(Decided::NotGranted), _) | (_, None | Some(Decided::NotGranted)) => Decided::NotGranted,
            (Some(Decided::Ask(id)), _) | (_, Some(Decided::Ask(id))) => Decided::Ask(id),
            (Some(_), Some(by)) => by,
        }
    }

    /// The settings of `tool`'s bridged server that this caller's grants override
    /// (`config_overrides`), with the grant they come from; `None`: the server's own.
    ///
    /// They come from the most specific level whose grants giving the tool set any: the agent's
    /// own grants, else its user's (or owner's) own, else the groups'. Two grants of that level
    /// with different settings are a conflict: `Err` names them, and the call is refused (no
    /// guess about which an admin meant).
    pub fn server_settings(&self, tool: ToolRef<'_>) -> Result<Option<(i64, &serde_json::Value)>, String> {
        if tool.server.is_none() {
            return Ok(None);
        }
        let setting = |live: &&Live| {
            Set::gives(live, tool, None) && live.grant.config_overrides.as_object().is_some_and(|o| !o.is_empty())
        };
        let agent = self.agent.iter().flat_map(|a| a.grants.iter()).filter(setting).collect::<Vec<_>>();
        let (own, groups): (Vec<&Live>, Vec<&Live>) =
            self.owner.grants.iter().filter(setting).partition(|l| l.grant.subject == self.owner_name);
        let Some(level) = [agent, own, groups].into_iter().find(|level| !level.is_empty()) else { return Ok(None) };
        let first = &level[0].grant;
        if let Some(other) = level.iter().map(|l| &l.grant).find(|g| g.config_overrides != first.config_overrides) {
            return Err(format!(
                "grants {} (to `{}`) and {} (to `{}`) of this gateway set different settings of MCP server `{}` \
                 for this call, and neither is more specific; ask an admin to keep one of them",
                first.id,
                first.subject,
                other.id,
                other.subject,
                tool.server.unwrap_or_default()
            ));
        }
        Ok(Some((first.id, &first.config_overrides)))
    }

    /// The argument rule of grant `id`, when it is one of this caller's and has one.
    pub fn rule_of(&self, id: i64) -> Option<&str> {
        let grant = self.owner.find(id).or_else(|| self.agent.as_ref().and_then(|a| a.find(id)))?;
        grant.arg_rule.as_deref()
    }
}

/// Reads grants and principals to build each caller's [`Access`].
#[derive(Debug, Clone)]
pub struct Grants {
    grants: Arc<dyn GrantStore>,
    identity: Arc<dyn IdentityStore>,
    default: Vec<String>,
    /// Where access-request decisions are audited ([`Grants::audited_in`]).
    audit: Option<Arc<dyn toolgate_store::AuditStore>>,
}

impl Grants {
    /// Grants from `grants`, principals from `identity`; `default` is `[gateway]
    /// default_tools`.
    pub fn new(grants: Arc<dyn GrantStore>, identity: Arc<dyn IdentityStore>, default: Vec<String>) -> Self {
        Grants { grants, identity, default, audit: None }
    }

    /// These grants, with every access-request decision they make written to `audit` (the
    /// gateway's audit log): who decided what, and the grant it made.
    #[must_use]
    pub fn audited_in(mut self, audit: Arc<dyn toolgate_store::AuditStore>) -> Self {
        self.audit = Some(audit);
        self
    }

    pub(crate) fn audit(&self) -> Option<&Arc<dyn toolgate_store::AuditStore>> {
        self.audit.as_ref()
    }

    /// The store of grants and requests.
    pub fn store(&self) -> &Arc<dyn GrantStore> {
        &self.grants
    }

    /// The principals.
    pub fn identity(&self) -> &Arc<dyn IdentityStore> {
        &self.identity
    }

    fn live(&self, subjects: &[String]) -> Result<Vec<Live>, GatewayError> {
        let now = now_ms();
        let mut grants = self.grants.tool_grants(Some(subjects))?;
        grants.retain(|g| g.enabled && g.expires_ms.is_none_or(|at| now < at));
        Ok(grants.into_iter().map(Live::new).collect())
    }

    /// `name` and the groups it is in (a user's), or `name` alone.
    fn with_groups(&self, name: &str) -> Result<Vec<String>, GatewayError> {
        let mut subjects = vec![name.to_owned()];
        subjects.extend(self.identity.memberships(name)?.into_iter().map(|m| m.group));
        Ok(subjects)
    }

    /// What `user` (acting as `agent`, when the call names one) may use. An `agent` that is
    /// not an agent principal of `user` (or of one of its groups) is not one: its name does
    /// not narrow or widen anything.
    pub fn access(&self, user: &str, agent: Option<&str>) -> Result<Access, GatewayError> {
        // A group's agent is its own user (`KeyAuthenticator`): its owner's grants are the
        // group's.
        let me = self.identity.principal_get(user)?;
        let (owner_subjects, agent_name): (Vec<String>, _) = match me {
            Some(p) if p.kind == PrincipalKind::Agent => {
                (p.owner.as_deref().map(|o| self.with_groups(o)).transpose()?.unwrap_or_default(), Some(p.name))
            }
            _ => (self.with_groups(user)?, agent.map(str::to_owned)),
        };
        let owner = Set { grants: self.live(&owner_subjects)?, default: self.default.clone() };
        let agent = match agent_name {
            Some(name) => match self.identity.principal_get(&name)? {
                Some(p)
                    if p.kind == PrincipalKind::Agent
                        && p.owner.as_ref().is_some_and(|o| owner_subjects.contains(o) || o == user) =>
                {
                    let own = self.live(std::slice::from_ref(&name))?;
                    (!own.is_empty()).then_some(Set { grants: own, default: Vec::new() })
                }
                _ => None,
            },
            None => None,
        };
        let owner_name = owner_subjects.first().cloned().unwrap_or_default();
        Ok(Access { owner, agent, owner_name })
    }

    /// Checks `grant` and adds it; returns its id. `by` is who grants it.
    pub fn add(&self, grant: &ToolGrant) -> Result<i64, GatewayError> {
        check(self.identity.as_ref(), grant)?;
        let id = self.grants.tool_grant_add(grant)?;
        self.changed(&grant.subject);
        Ok(id)
    }

    /// Tells the MCP sessions of whoever grants of `subject` concern that their tools changed.
    pub(crate) fn changed(&self, subject: &str) {
        let is_user =
            self.identity.principal_get(subject).ok().flatten().is_some_and(|p| p.kind == PrincipalKind::User);
        crate::changes::granted(Some(subject), is_user);
    }

    /// Every grant, or those given to `subject`.
    pub fn list(&self, subject: Option<&str>) -> Result<Vec<ToolGrant>, GatewayError> {
        let subjects = subject.map(|s| vec![s.to_owned()]);
        Ok(self.grants.tool_grants(subjects.as_deref())?)
    }

    /// Removes grant `id`; it no longer applies from the next request.
    pub fn revoke(&self, id: i64) -> Result<(), GatewayError> {
        let Some(grant) = self.grants.tool_grant_get(id)? else { return Err(GatewayError::NoGrant(id)) };
        if !self.grants.grant_revoke(id)? {
            return Err(GatewayError::NoGrant(id));
        }
        self.changed(&grant.subject);
        Ok(())
    }

    /// Turns grant `id` on or off.
    pub fn enable(&self, id: i64, enabled: bool) -> Result<(), GatewayError> {
        if !self.grants.tool_grant_enable(id, enabled)? {
            return Err(GatewayError::NoGrant(id));
        }
        let subject = self.grants.tool_grant_get(id)?.map(|g| g.subject);
        match subject {
            Some(subject) => self.changed(&subject),
            None => crate::changes::granted(None, false),
        }
        Ok(())
    }
}

/// What a grant must be before it is stored: a subject that exists, valid patterns, a server
/// name that can be one, a known mode, an object of overrides, an expiry in the future.
pub(crate) fn check(identity: &dyn IdentityStore, grant: &ToolGrant) -> Result<(), GatewayError> {
    crate::check_name(&grant.subject)?;
    if identity.principal_get(&grant.subject)?.is_none() {
        return Err(GatewayError::Missing { kind: "user, group or agent", name: grant.subject.clone() });
    }
    if let Some(server) = &grant.server {
        check_server(server)?;
    }
    if grant.tool_allow.len() > MAX_PATTERNS || grant.tool_deny.len() > MAX_PATTERNS {
        return Err(GatewayError::BadGrant(format!("a grant names at most {MAX_PATTERNS} tools in each list")));
    }
    for pattern in grant.tool_allow.iter().chain(&grant.tool_deny) {
        check_pattern(pattern)?;
    }
    if let Some(text) = &grant.arg_rule {
        let rule = ArgumentRule::parse(text).map_err(GatewayError::BadGrant)?;
        // A rule only narrows the grant's tools: one about none of the tools it names covers
        // nothing, which is a mistake to say now rather than a grant that silently gives nothing.
        let names: Vec<&str> = grant.tool_allow.iter().filter(|p| !p.contains('*')).map(String::as_str).collect();
        if !names.is_empty() && !names.iter().any(|n| rule.about(toolgate_policy::ToolRef::new(n, ""))) {
            return Err(GatewayError::BadGrant(format!(
                "the argument rule `{}` is about none of the grant's tools ({}): a rule narrows the tools it \
                 names, e.g. `--tool exec --args 'exec(git *)'`",
                rule.as_str(),
                names.join(", ")
            )));
        }
    }
    if !(grant.config_overrides.is_object() || grant.config_overrides.is_null()) {
        return Err(GatewayError::BadGrant("config overrides are a JSON object of the server's settings".to_owned()));
    }
    if grant.config_overrides.as_object().is_some_and(|o| !o.is_empty()) && grant.server.is_none() {
        return Err(GatewayError::BadGrant(
            "config overrides are for a grant on a bridged server (--server)".to_owned(),
        ));
    }
    // Only settings that do not change which server it is (`toolgate_mcp::bridge::ServerOverrides`).
    toolgate_mcp::bridge::ServerOverrides::parse(&grant.config_overrides)
        .map_err(|e| GatewayError::BadGrant(format!("--server-config: {e}")))?;
    if grant.expires_ms.is_some_and(|at| at <= now_ms()) {
        return Err(GatewayError::BadGrant("the expiry is in the past".to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use toolgate_store::Store;

    use super::*;
    use crate::Admin;

    pub(crate) fn grant(subject: &str, server: Option<&str>, allow: &[&str], deny: &[&str]) -> ToolGrant {
        ToolGrant {
            id: 0,
            subject: subject.into(),
            server: server.map(str::to_owned),
            tool_allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            tool_deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            enabled: true,
            config_overrides: serde_json::json!({}),
            mode: GrantMode::Allow,
            arg_rule: None,
            expires_ms: None,
            granted_by: "root".into(),
            request: None,
            note: String::new(),
            created_ms: 1,
        }
    }

    fn setup(default: &[&str]) -> (tempfile::TempDir, Grants) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
        let admin = Admin::new(store.clone());
        admin.user_add("ann", false, &["ops".to_owned()]).unwrap();
        admin.user_add("bob", false, &[]).unwrap();
        admin.agent_add("ann-ci", "ann").unwrap();
        admin.agent_add("ops-bot", "ops").unwrap();
        let grants = Grants::new(store.clone(), store, default.iter().map(|s| (*s).to_owned()).collect());
        (dir, grants)
    }

    const fn own(name: &str) -> ToolRef<'_> {
        ToolRef { server: None, name }
    }

    #[test]
    fn server_settings_come_from_the_most_specific_grant_and_a_conflict_is_refused() {
        let (_dir, grants) = setup(&[]);
        let gh = |name| ToolRef { server: Some("github"), name };
        let with = |subject: &str, settings: serde_json::Value| {
            let mut g = grant(subject, Some("github"), &[], &[]);
            g.config_overrides = settings;
            grants.add(&g).unwrap()
        };
        assert_eq!(grants.access("ann", None).unwrap().server_settings(gh("x")), Ok(None));
        let group = with("ops", serde_json::json!({"env": {"MODE": "ops"}}));
        let ann = grants.access("ann", None).unwrap();
        assert_eq!(ann.server_settings(gh("x")).unwrap().map(|(id, _)| id), Some(group), "the group's");
        assert_eq!(ann.server_settings(own("read")), Ok(None), "toolgate's own tools have none");
        let mine = with("ann", serde_json::json!({"env": {"MODE": "ann"}}));
        let ann = grants.access("ann", None).unwrap();
        assert_eq!(ann.server_settings(gh("x")).unwrap().map(|(id, _)| id), Some(mine), "the user's own wins");
        let ci = with("ann-ci", serde_json::json!({"env": {"MODE": "ci"}}));
        let agent = grants.access("ann", Some("ann-ci")).unwrap();
        assert_eq!(agent.server_settings(gh("x")).unwrap().map(|(id, _)| id), Some(ci), "the agent's own wins");
        let other = with("ann", serde_json::json!({"env": {"MODE": "other"}}));
        let err = grants.access("ann", None).unwrap().server_settings(gh("x")).unwrap_err();
        assert!(err.contains(&format!("grants {mine} (to `ann`) and {other} (to `ann`)")), "{err}");
        assert!(grants.access("ann", Some("ann-ci")).unwrap().server_settings(gh("x")).is_ok(), "the agent's level");
        let err = grants.add(&{
            let mut g = grant("ann", Some("github"), &[], &[]);
            g.config_overrides = serde_json::json!({"command": "/bin/sh"});
            g
        });
        assert!(err.unwrap_err().to_string().contains("`command` cannot be overridden"));
    }

    #[test]
    fn users_have_their_groups_grants_and_deny_wins() {
        let (_dir, grants) = setup(&[]);
        grants.add(&grant("ops", None, &["read", "memory_*"], &[])).unwrap();
        grants.add(&grant("ops", Some("github"), &[], &["delete_*"])).unwrap();
        // A grant in mode deny (a deny list alone, with an empty allow list, would give
        // every other tool).
        let mut no_write = grant("ann", None, &["memory_write"], &[]);
        no_write.mode = GrantMode::Deny;
        let deny = grants.add(&no_write).unwrap();
        let ann = grants.access("ann", None).unwrap();
        assert!(ann.decide(own("read")).allowed() && ann.decide(own("memory_search")).allowed());
        assert_eq!(ann.decide(own("memory_write")), Decided::Denied(deny), "deny wins");
        assert_eq!(ann.decide(own("exec")), Decided::NotGranted);
        let gh = |name| ToolRef { server: Some("github"), name };
        assert!(ann.decide(gh("search_code")).allowed(), "an empty allow list is the whole server");
        assert!(!ann.decide(gh("delete_repo")).allowed());
        assert!(!ann.decide(ToolRef { server: Some("gitlab"), name: "search_code" }).allowed(), "per server");
        let bob = grants.access("bob", None).unwrap();
        assert_eq!(bob.decide(own("read")), Decided::NotGranted, "no grant, no tool");
        assert!(bob.decide(own(REQUEST_ACCESS)).allowed(), "asking is always possible");
    }

    #[test]
    fn default_tools_are_toolgates_own_only_and_a_deny_grant_beats_them() {
        let (_dir, grants) = setup(&["*"]);
        let bob = grants.access("bob", None).unwrap();
        assert_eq!(bob.decide(own("exec")), Decided::Default);
        assert_eq!(bob.decide(ToolRef { server: Some("github"), name: "x" }), Decided::NotGranted);
        let id = grants.add(&grant("bob", None, &["exec"], &[])).map(|_| ()).and_then(|()| {
            let mut g = grant("bob", None, &["exec"], &[]);
            g.mode = GrantMode::Deny;
            grants.add(&g)
        });
        let bob = grants.access("bob", None).unwrap();
        assert_eq!(bob.decide(own("exec")), Decided::Denied(id.unwrap()));
    }

    #[test]
    fn an_agent_is_narrowed_by_its_grants_never_widened() {
        let (_dir, grants) = setup(&[]);
        grants.add(&grant("ann", None, &["read", "write"], &[])).unwrap();
        let ci = grants.access("ann", Some("ann-ci")).unwrap();
        assert!(ci.decide(own("write")).allowed(), "without grants of its own: its owner's");
        grants.add(&grant("ann-ci", None, &["read", "exec"], &[])).unwrap();
        let ci = grants.access("ann", Some("ann-ci")).unwrap();
        assert!(ci.decide(own("read")).allowed());
        assert!(!ci.decide(own("write")).allowed(), "narrower than its owner");
        assert!(!ci.decide(own("exec")).allowed(), "never wider than its owner");
        assert!(grants.access("ann", None).unwrap().decide(own("write")).allowed(), "the owner keeps hers");
        // An agent name that is not the caller's agent changes nothing.
        assert!(grants.access("bob", Some("ann-ci")).unwrap().decide(own("read")) == Decided::NotGranted);
        // A group's agent is its own user, within the group's grants.
        grants.add(&grant("ops", None, &["time"], &[])).unwrap();
        assert!(grants.access("ops-bot", Some("ops-bot")).unwrap().decide(own("time")).allowed());
        assert!(!grants.access("ops-bot", Some("ops-bot")).unwrap().decide(own("read")).allowed());
    }

    #[test]
    fn disabled_expired_and_revoked_grants_do_not_apply() {
        let (_dir, grants) = setup(&[]);
        let id = grants.add(&grant("bob", None, &["read"], &[])).unwrap();
        assert!(grants.access("bob", None).unwrap().decide(own("read")).allowed());
        grants.enable(id, false).unwrap();
        assert!(!grants.access("bob", None).unwrap().decide(own("read")).allowed());
        grants.enable(id, true).unwrap();
        grants.revoke(id).unwrap();
        assert!(!grants.access("bob", None).unwrap().decide(own("read")).allowed());
        assert!(matches!(grants.revoke(id), Err(GatewayError::NoGrant(_))));
        let mut soon = grant("bob", None, &["read"], &[]);
        soon.expires_ms = Some(now_ms() + 50);
        grants.add(&soon).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(!grants.access("bob", None).unwrap().decide(own("read")).allowed(), "expired");
    }

    #[test]
    fn bad_grants_are_refused_with_what_is_wrong() {
        let (_dir, grants) = setup(&[]);
        for (bad, why) in [
            (grant("nobody", None, &[], &[]), "there is no"),
            (grant("../etc", None, &[], &[]), "cannot be a name"),
            (grant("bob", None, &["re ad"], &[]), "not a tool name"),
            (grant("bob", None, &["<script>"], &[]), "not a tool name"),
            (grant("bob", Some("a__b"), &[], &[]), "not an MCP server"),
            (grant("bob", None, &[], &["x\ny"]), "not a tool name"),
        ] {
            let e = grants.add(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        for (rule, why) in [
            ("exec(git *", "must end with"),
            ("exec", "not an argument rule"),
            ("exec(g*t)", "only allowed at the end"),
            ("read(src/**)", "about none of the grant's tools"),
        ] {
            let mut bad = grant("bob", None, &["exec"], &[]);
            bad.arg_rule = Some(rule.to_owned());
            let e = grants.add(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{rule}: {e}");
        }
        assert!(grants.list(None).unwrap().is_empty(), "nothing stored");
    }

    fn exec(argv: &[&str]) -> Touches {
        Touches { commands: vec![argv.iter().map(|s| (*s).to_owned()).collect()], ..Touches::default() }
    }

    #[test]
    fn ask_grants_and_argument_rules() {
        // `default_tools = ["*"]`: a tool a grant names is still decided by the grants.
        let (_dir, grants) = setup(&["*"]);
        let mut git = grant("ann", None, &["exec"], &[]);
        git.arg_rule = Some("exec(git *)".into());
        let git = grants.add(&git).unwrap();
        let mut ask = grant("ops", None, &["write"], &[]);
        ask.mode = GrantMode::Ask;
        let ask = grants.add(&ask).unwrap();
        grants.add(&grant("ann", None, &["write"], &[])).unwrap();
        let ann = grants.access("ann", None).unwrap();
        assert_eq!(ann.decide(own("exec")), Decided::Granted(git), "listed: the rule is checked per call");
        assert_eq!(ann.decide_call(own("exec"), &exec(&["git", "status"])), Decided::Granted(git));
        assert_eq!(ann.decide_call(own("exec"), &exec(&["rm", "-rf", "x"])), Decided::Narrowed(git));
        assert_eq!(ann.rule_of(git), Some("exec(git *)"));
        assert_eq!(ann.decide(own("write")), Decided::Ask(ask), "ask wins over allow");
        assert_eq!(ann.decide_call(own("read"), &Touches::default()), Decided::Default);
        // A deny grant with a rule refuses the calls it matches, loosely, and no others.
        let mut no_push = grant("ann", None, &["exec"], &[]);
        no_push.mode = GrantMode::Deny;
        no_push.arg_rule = Some("exec(git push)".into());
        let no_push = grants.add(&no_push).unwrap();
        let ann = grants.access("ann", None).unwrap();
        assert_eq!(ann.decide_call(own("exec"), &exec(&["git", "push", "--force"])), Decided::Denied(no_push));
        assert_eq!(ann.decide_call(own("exec"), &exec(&["git", "status"])), Decided::Granted(git));
        assert!(ann.decide(own("exec")).allowed(), "a conditional deny does not hide the tool");
        // A rule naming a wildcard does not widen the grant's tools.
        let mut wide = grant("bob", None, &["time"], &[]);
        wide.arg_rule = Some("*(cmd:*)".into());
        let wide = grants.add(&wide).unwrap();
        let (_dir2, strict) = setup(&[]);
        let _ = strict;
        let bob = grants.access("bob", None).unwrap();
        assert_eq!(bob.decide_call(own("exec"), &exec(&["ls"])), Decided::Default, "only `time` is granted");
        assert!(matches!(bob.decide(own("time")), Decided::Granted(id) if id == wide));
    }

    #[test]
    fn an_agent_with_an_ask_grant_asks() {
        let (_dir, grants) = setup(&[]);
        grants.add(&grant("ann", None, &["exec", "read"], &[])).unwrap();
        let mut ask = grant("ann-ci", None, &["exec"], &[]);
        ask.mode = GrantMode::Ask;
        let ask = grants.add(&ask).unwrap();
        let ci = grants.access("ann", Some("ann-ci")).unwrap();
        assert_eq!(ci.decide_call(own("exec"), &exec(&["ls"])), Decided::Ask(ask));
        assert_eq!(ci.decide(own("read")), Decided::NotGranted, "narrower than its owner");
    }

    #[test]
    fn tool_refs_from_groups() {
        assert_eq!(ToolRef::of("mcp__gh__search", "mcp:gh"), ToolRef { server: Some("gh"), name: "search" });
        assert_eq!(ToolRef::of("gh_search", "mcp:gh"), ToolRef { server: Some("gh"), name: "gh_search" });
        assert_eq!(ToolRef::of("read", "fs"), own("read"));
        assert!(glob("a*b*c", "axbyc") && !glob("a*b", "ab c") && glob("*", "") && !glob("read", "reader"));
    }
}
