//! Who an HTTP request comes from when the server knows its callers one by one (a team
//! gateway's API keys) instead of by one shared bearer token: an [`Authenticator`] turns the
//! request's credential into a [`Caller`], which names the user (and agent) of every call the
//! request makes and narrows the tools it may list and call.

use std::net::IpAddr;

/// The principal behind an authenticated HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    /// The user the calls are made for (an agent's owner, for an agent's key).
    pub user: String,
    /// The agent, when an agent's key was used.
    pub agent: Option<String>,
    /// The id of the key that authenticated the request (for the audit log), if a key did.
    pub key: Option<String>,
    /// The tools it may list and call: names or `*` patterns; empty means every tool the
    /// policy lets the user see.
    pub tools: Vec<String>,
    /// May use the server's administrative endpoints (`/api/`: the approvals API).
    pub admin: bool,
    /// The node whose node link made this request's key to forward one call here (the key's
    /// scope says so; no request can): its calls carry it as `CallContext::forwarded_by`.
    pub forwarded_by: Option<String>,
    /// With `forwarded_by`: the approval that node's gate gave the call (the key's scope says
    /// so; no request can): its calls carry it as `CallContext::forwarded_approval`.
    pub forwarded_approval: Option<toolgate_core::ForwardedApproval>,
}

impl Caller {
    /// A caller for `user`, with every tool the policy allows.
    pub fn new(user: impl Into<String>) -> Self {
        Caller {
            user: user.into(),
            agent: None,
            key: None,
            tools: Vec::new(),
            admin: false,
            forwarded_by: None,
            forwarded_approval: None,
        }
    }

    /// The same caller acting as `agent`.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The same caller, authenticated by key `id`.
    pub fn key(mut self, id: impl Into<String>) -> Self {
        self.key = Some(id.into());
        self
    }

    /// The same caller, limited to `tools` (names or `*` patterns).
    pub fn tools(mut self, tools: Vec<String>) -> Self {
        self.tools = tools;
        self
    }

    /// The same caller, allowed (or not) on the administrative endpoints.
    pub fn admin(mut self, admin: bool) -> Self {
        self.admin = admin;
        self
    }

    /// The same caller, carrying a call forwarded by node `node` (or not).
    pub fn forwarded_by(mut self, node: Option<String>) -> Self {
        self.forwarded_by = node;
        self
    }

    /// The same caller, carrying the approval the forwarding node gave its call (or none).
    pub fn forwarded_approval(mut self, approval: Option<toolgate_core::ForwardedApproval>) -> Self {
        self.forwarded_approval = approval;
        self
    }

    /// Whether its scope lets it reach `tool`.
    pub fn may_use(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|pattern| glob_match(pattern, tool))
    }
}

/// Why a request is refused, as the HTTP answer says it: 401 for a missing or invalid
/// credential (the message says how to get one), 403 for a valid one used where it may not be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 or 403.
    pub status: u16,
    /// What was wrong and what to do, for the client's user.
    pub message: String,
}

/// Establishes who sent a request. Set on [`HttpConfig::authenticator`](crate::HttpConfig),
/// it replaces the shared bearer token for `/mcp`, `/api/` and bearer-authenticated mounts.
pub trait Authenticator: Send + Sync + std::fmt::Debug {
    /// The caller `authorization` (the raw `Authorization` header, if any) names, coming from
    /// `peer`; or why not.
    fn authenticate(&self, authorization: Option<&[u8]>, peer: IpAddr) -> Result<Caller, Refusal>;
}

/// `*` matches any run of characters (tool names have no path structure); everything else is
/// literal.
fn glob_match(pattern: &str, name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names() {
        let c = Caller::new("ann").tools(vec!["read".into(), "memory_*".into(), "*_status".into(), "a*b*c".into()]);
        for yes in ["read", "memory_search", "memory_", "job_status", "abc", "a-b-c", "axbyc"] {
            assert!(c.may_use(yes), "{yes}");
        }
        for no in ["reader", "xread", "write", "memory", "status", "ab", "acb", "abcx"] {
            assert!(!c.may_use(no), "{no}");
        }
        assert!(Caller::new("ann").may_use("anything"), "no list: every tool");
    }
}
