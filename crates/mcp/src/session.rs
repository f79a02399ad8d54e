//! Which session an MCP request belongs to, so that per-session state (read-before-write, file
//! locks, the loop breaker, a skill's scope, the audit's `session`) is not shared between two
//! clients of one server.
//!
//! - Streamable HTTP with a session (before 2026-07-28): its `Mcp-Session-Id`, hashed (the id
//!   is shown to other callers; the header would let them act as this session).
//! - Streamable HTTP without one (2026-07-28 stateless requests): the caller's credential, as
//!   a hash of its `Authorization` header: clients that share a credential share this state, so
//!   give each agent its own.
//! - stdio: the process is the session (each client starts its own server): `mcp-stdio-<pid>-<n>`,
//!   unless the handler's context names a session of its own, so two servers on one workspace
//!   (two coding agents) do not share read-before-write, locks or the loop breaker.

use rmcp::service::{RequestContext, RoleServer};
use toolgate_core::CallContext;

/// Sets `ctx`'s session from the request, when the transport names one.
pub(crate) fn apply(ctx: &mut CallContext, request: &RequestContext<RoleServer>) {
    let Some(parts) = request.extensions.get::<http::request::Parts>() else {
        if ctx.identity.session == toolgate_core::Identity::default().session {
            ctx.identity.session = this_process().to_owned();
        }
        return;
    };
    // A stateless request with no credential (a server without a token) has nothing that tells
    // its client from another's: all such requests are one session, not the CLI's.
    ctx.identity.session = of_headers(&parts.headers).unwrap_or_else(|| "mcp-anonymous".to_owned());
    // A caller known one by one (a gateway's API key) is the user of its calls, never the
    // server's configured identity.
    if let Some(caller) = caller(request) {
        ctx.identity.user.clone_from(&caller.user);
        if let Some(agent) = &caller.agent {
            ctx.identity.agent.clone_from(agent);
        }
        // Only a key a node made for one forwarded call says so; never the request itself.
        ctx.forwarded_by.clone_from(&caller.forwarded_by);
        ctx.forwarded_approval = caller.forwarded_by.as_ref().and(caller.forwarded_approval.clone());
    }
}

/// The authenticated caller of an HTTP request, when the server has an authenticator.
pub(crate) fn caller(request: &RequestContext<RoleServer>) -> Option<&crate::Caller> {
    request.extensions.get::<http::request::Parts>()?.extensions.get::<crate::Caller>()
}

/// The session of a stdio server: its pid and start time (a later process with the same pid
/// gets another id).
fn this_process() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        format!("mcp-stdio-{}-{:x}", std::process::id(), now.as_micros())
    })
}

/// The session the headers of an HTTP request name, if any.
fn of_headers(headers: &http::HeaderMap) -> Option<String> {
    if let Some(id) = headers.get("mcp-session-id").map(http::HeaderValue::as_bytes).filter(|id| !id.is_empty()) {
        // A hash, never the header itself: the session id is shown to other callers (lock
        // holders, `sessions_list`), and the header is what lets a request act as that session.
        let hash = blake3::hash(id).to_hex();
        return Some(format!("mcp-{}", &hash[..16]));
    }
    let credential = headers.get(http::header::AUTHORIZATION)?.as_bytes();
    let hash = blake3::hash(credential).to_hex();
    Some(format!("mcp-key-{}", &hash[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn the_session_header_names_the_session_else_the_credential() {
        let a = of_headers(&headers(&[("mcp-session-id", "1b2c-3d"), ("authorization", "Bearer t")])).unwrap();
        assert!(a.starts_with("mcp-") && a.len() == 20 && !a.contains("1b2c"), "a hash of the header: {a}");
        let b = of_headers(&headers(&[("mcp-session-id", "1b2c-3e")])).unwrap();
        assert_ne!(a, b);
        let hostile = of_headers(&headers(&[("mcp-session-id", "../x y;z")])).unwrap();
        assert!(hostile[4..].chars().all(|c| c.is_ascii_hexdigit()), "{hostile}");
        let k1 = of_headers(&headers(&[("authorization", "Bearer one")])).unwrap();
        let k2 = of_headers(&headers(&[("authorization", "Bearer two")])).unwrap();
        assert!(k1.starts_with("mcp-key-") && k1 != k2 && !k1.contains("one"), "{k1} {k2}");
        assert_eq!(of_headers(&headers(&[("authorization", "Bearer one")])).unwrap(), k1, "stable");
        assert_eq!(of_headers(&http::HeaderMap::new()), None, "stdio or no credential: the handler's");
    }
}
