//! Which session an MCP request belongs to, so that per-session state (read-before-write, file
//! locks, the loop breaker, a skill's scope, the audit's `session`) is not shared between two
//! clients of one server.
//!
//! - Streamable HTTP with a session (before 2026-07-28): its `Mcp-Session-Id`.
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
    if let Some(session) = of_headers(&parts.headers) {
        ctx.identity.session = session;
    }
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
    if let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        // Issued by this server (a UUID), but read from the request: kept to a safe alphabet.
        let id: String = id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(64).collect();
        if !id.is_empty() {
            return Some(format!("mcp-{id}"));
        }
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
        let a = of_headers(&headers(&[("mcp-session-id", "1b2c-3d"), ("authorization", "Bearer t")]));
        assert_eq!(a.as_deref(), Some("mcp-1b2c-3d"));
        let hostile = of_headers(&headers(&[("mcp-session-id", "../x y;z")]));
        assert_eq!(hostile.as_deref(), Some("mcp-xyz"));
        let k1 = of_headers(&headers(&[("authorization", "Bearer one")])).unwrap();
        let k2 = of_headers(&headers(&[("authorization", "Bearer two")])).unwrap();
        assert!(k1.starts_with("mcp-key-") && k1 != k2 && !k1.contains("one"), "{k1} {k2}");
        assert_eq!(of_headers(&headers(&[("authorization", "Bearer one")])).unwrap(), k1, "stable");
        assert_eq!(of_headers(&http::HeaderMap::new()), None, "stdio or no credential: the handler's");
    }
}
