//! What a tool may do beyond computing: the capability file (`NAME.capabilities.json`), its
//! validation, and the limits a tool runs under. Nothing is granted by default.
//!
//! ```json
//! {
//!   "workspace": { "read": ["docs/", "data/prices.json"] },
//!   "http": { "allow": [{ "host": "api.example.com", "path_prefix": "/v1/", "methods": ["GET"] }],
//!             "credentials": [{ "secret": "EXAMPLE_TOKEN", "host": "api.example.com",
//!                               "location": { "bearer": {} } }] },
//!   "secrets": { "exists": ["EXAMPLE_*"] },
//!   "tools": { "aliases": { "search": "grep" } },
//!   "limits": { "memory_mb": 10, "fuel": 1000000000, "timeout_secs": 10, "instances": 10,
//!               "tables": 10, "component_mb": 10 }
//! }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::WasmError;

/// Everything a tool is granted. The default grants nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Reading workspace files under some prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceCapability>,
    /// Outbound HTTP to allowlisted endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpCapability>,
    /// Asking whether secrets exist (never their values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretsCapability>,
    /// Calling other tools by alias.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsCapability>,
    /// Resource limits, each bounded by the runtime's maxima.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// `workspace.read`: workspace-relative prefixes (`docs/`) or files (`data/x.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCapability {
    /// Paths the tool may read: a prefix ending in `/`, an exact file, or `./` for the whole
    /// workspace (still never `.toolgate/` nor denied paths).
    pub read: Vec<String>,
}

/// `http`: endpoints and the credentials the host adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpCapability {
    /// Endpoints the tool may call.
    pub allow: Vec<EndpointPattern>,
    /// Secrets the host injects into matching requests.
    #[serde(default)]
    pub credentials: Vec<CredentialMapping>,
    /// Allow plain `http://` (default: HTTPS only).
    #[serde(default)]
    pub allow_insecure: bool,
}

/// One allowed endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointPattern {
    /// An exact host name, or `*.example.com` for its subdomains. Never `*`, never an IP.
    pub host: String,
    /// A path prefix (`/v1/`); none allows every path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Allowed methods (upper case); empty allows every method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
}

/// A secret the host adds to requests to `host`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialMapping {
    /// The secret's name in toolgate's encrypted store.
    pub secret: String,
    /// The host (exact, or `*.example.com`) whose requests get it.
    pub host: String,
    /// Where it goes.
    pub location: CredentialLocation,
}

/// Where an injected credential goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CredentialLocation {
    /// `Authorization: Bearer <secret>`.
    Bearer {},
    /// `Authorization: Basic base64(username:secret)`.
    Basic {
        /// The user name.
        username: String,
    },
    /// A header, with an optional value prefix.
    Header {
        /// The header name.
        name: String,
        /// Text before the secret (`Token `).
        #[serde(default)]
        prefix: String,
    },
    /// A query parameter.
    Query {
        /// The parameter name.
        name: String,
    },
}

/// `secrets.exists`: names or `PREFIX*` globs the tool may ask about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsCapability {
    /// Allowed names; a trailing `*` matches a prefix (never `*` alone).
    pub exists: Vec<String>,
}

/// `tools.aliases`: alias the guest uses -> real tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsCapability {
    /// Alias -> tool. The guest never learns the real names.
    pub aliases: BTreeMap<String, String>,
}

/// Per-tool limits; unset ones take the runtime's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Linear memory in MiB (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u32>,
    /// Fuel per call (default 1e9, about a second of work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Wall-clock deadline per call in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u32>,
    /// Core instances per call (default 10; a componentize-py component links about a dozen
    /// modules, a WAT tool one or two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// Tables per call (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<u32>,
    /// The largest component file accepted, in MiB (default 10; an interpreter needs more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_mb: Option<u32>,
}

impl Capabilities {
    /// No capabilities at all.
    pub fn none() -> Self {
        Capabilities::default()
    }

    /// Parses a capability file's JSON text and validates it.
    pub fn from_json(text: &str) -> Result<Self, WasmError> {
        let caps: Capabilities = serde_json::from_str(text)
            .map_err(|e| WasmError::BadCapabilities { detail: format!("not a valid capability file: {e}") })?;
        caps.validate()?;
        Ok(caps)
    }

    /// Checks every grant: no wildcards that mean "everything", no IP addresses or local
    /// names, no path escapes, no alias to a WASM tool (no recursion through tools).
    pub fn validate(&self) -> Result<(), WasmError> {
        let bad = |detail: String| Err(WasmError::BadCapabilities { detail });
        if let Some(ws) = &self.workspace {
            for p in &ws.read {
                if let Err(why) = check_read_prefix(p) {
                    return bad(format!("workspace.read `{p}`: {why}"));
                }
            }
        }
        if let Some(http) = &self.http {
            if http.allow.is_empty() {
                return bad("http.allow is empty; list the endpoints the tool may call".into());
            }
            for e in &http.allow {
                if let Err(why) = check_host_pattern(&e.host) {
                    return bad(format!("http.allow host `{}`: {why}", e.host));
                }
                if let Some(prefix) = &e.path_prefix
                    && (!prefix.starts_with('/') || prefix.contains("..") || prefix.contains('%'))
                {
                    return bad(format!(
                        "http.allow path_prefix `{prefix}` must start with `/` and contain no `..` or `%`"
                    ));
                }
                for m in &e.methods {
                    if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase()) {
                        return bad(format!("http.allow method `{m}` must be an upper-case method such as GET"));
                    }
                }
            }
            for c in &http.credentials {
                if let Err(why) = check_host_pattern(&c.host) {
                    return bad(format!("http.credentials host `{}`: {why}", c.host));
                }
                if !valid_secret_name(&c.secret) {
                    return bad(format!("http.credentials secret `{}` is not a secret name", c.secret));
                }
                if !http.allow.iter().any(|e| e.host == c.host) {
                    return bad(format!("http.credentials host `{}` is not in http.allow", c.host));
                }
            }
        }
        if let Some(secrets) = &self.secrets {
            for s in &secrets.exists {
                let stem = s.strip_suffix('*').unwrap_or(s);
                if stem.is_empty() || !valid_secret_name(stem) {
                    return bad(format!("secrets.exists `{s}`: name a secret or a prefix such as `OPENAI_*`"));
                }
            }
        }
        if let Some(tools) = &self.tools {
            for (alias, target) in &tools.aliases {
                if alias.is_empty() || target.is_empty() || alias.contains('*') || target.contains('*') {
                    return bad(format!("tools.aliases `{alias}` -> `{target}`: name one alias and one tool"));
                }
                if target.starts_with(crate::TOOL_PREFIX) {
                    return bad(format!("tools.aliases `{alias}` -> `{target}`: a WASM tool cannot call WASM tools"));
                }
            }
        }
        let l = self.limits;
        if l.memory_mb == Some(0)
            || l.fuel == Some(0)
            || l.timeout_secs == Some(0)
            || l.instances == Some(0)
            || l.tables == Some(0)
            || l.component_mb == Some(0)
        {
            return bad("limits must be positive".into());
        }
        Ok(())
    }

    /// Whether the tool may ask about the secret `name`.
    pub fn secret_allowed(&self, name: &str) -> bool {
        self.secrets.as_ref().is_some_and(|s| {
            s.exists.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => p == name,
            })
        })
    }

    /// Whether the workspace-relative, normalized `path` is under a granted prefix.
    pub fn read_allowed(&self, path: &str) -> bool {
        self.workspace.as_ref().is_some_and(|w| {
            w.read.iter().any(|p| {
                if p == "./" {
                    return true;
                }
                match p.strip_suffix('/') {
                    Some(dir) => path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/')),
                    None => path == p,
                }
            })
        })
    }

    /// One line per grant, for `toolgate wasm inspect|list` and approvals.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(w) = &self.workspace {
            out.push(format!("workspace read: {}", w.read.join(", ")));
        }
        if let Some(h) = &self.http {
            for e in &h.allow {
                let methods = if e.methods.is_empty() { "any method".to_owned() } else { e.methods.join("|") };
                out.push(format!("http: {}{} ({methods})", e.host, e.path_prefix.as_deref().unwrap_or("/")));
            }
            for c in &h.credentials {
                out.push(format!("http credential: secret `{}` injected for {}", c.secret, c.host));
            }
        }
        if let Some(s) = &self.secrets {
            out.push(format!("secret existence: {}", s.exists.join(", ")));
        }
        if let Some(t) = &self.tools {
            for (a, r) in &t.aliases {
                out.push(format!("tool: `{a}` calls `{r}`"));
            }
        }
        let l = self.limits;
        let limits: Vec<String> = [
            l.memory_mb.map(|m| format!("memory {m} MB")),
            l.fuel.map(|f| format!("fuel {f}")),
            l.timeout_secs.map(|t| format!("timeout {t} s")),
            l.instances.map(|n| format!("{n} instances")),
            l.tables.map(|n| format!("{n} tables")),
            l.component_mb.map(|m| format!("component {m} MB")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !limits.is_empty() {
            out.push(format!("limits: {}", limits.join(", ")));
        }
        out
    }
}

fn valid_secret_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn check_read_prefix(p: &str) -> Result<(), &'static str> {
    if p == "./" {
        return Ok(());
    }
    if p.is_empty() || p == "*" || p.contains('*') {
        return Err("wildcards are not allowed; name a directory (`docs/`) or `./` for the whole workspace");
    }
    if p.starts_with('/') || p.contains('\\') || p.contains('\0') || p.as_bytes().get(1) == Some(&b':') {
        return Err("use a workspace-relative path");
    }
    if p.split('/').any(|c| c == ".." || c == ".") {
        return Err("`..` and `.` components are not allowed");
    }
    if p.split('/').next() == Some(".toolgate") {
        return Err("`.toolgate/` is toolgate's own state and never readable by tools");
    }
    Ok(())
}

/// A host pattern must be a DNS name (or `*.` + one with at least two labels), never `*`, an IP
/// address or a local name: the grant is about a service on the internet.
fn check_host_pattern(host: &str) -> Result<(), &'static str> {
    let name = host.strip_prefix("*.").unwrap_or(host);
    if name.is_empty() || name.contains('*') {
        return Err("`*` alone is never allowed; name the host (`api.example.com` or `*.example.com`)");
    }
    if name.parse::<std::net::IpAddr>().is_ok() || name.starts_with('[') {
        return Err("IP addresses are not allowed; name the host (private and loopback addresses are refused anyway)");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') {
        return Err("a host is lower-case letters, digits, `-` and `.`, without scheme, port or path");
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.iter().any(|l| l.is_empty()) {
        return Err("empty label");
    }
    if labels.len() < 2 || (host.starts_with("*.") && labels.len() < 2) {
        return Err("a public host name has at least two labels (`example.com`)");
    }
    let last = labels.last().copied().unwrap_or_default();
    if matches!(last, "localhost" | "local" | "internal" | "lan" | "home" | "corp" | "intranet" | "localdomain")
        || name == "localhost"
        || last.bytes().all(|b| b.is_ascii_digit())
    {
        return Err("local and private names are not allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_everything_wildcards_and_private_addresses() {
        for text in [
            r#"{"http": {"allow": [{"host": "*"}]}}"#,
            r#"{"http": {"allow": [{"host": "*.com"}]}}"#,
            r#"{"http": {"allow": [{"host": "127.0.0.1"}]}}"#,
            r#"{"http": {"allow": [{"host": "10.0.0.1"}]}}"#,
            r#"{"http": {"allow": [{"host": "[::1]"}]}}"#,
            r#"{"http": {"allow": [{"host": "localhost"}]}}"#,
            r#"{"http": {"allow": [{"host": "metadata.google.internal"}]}}"#,
            r#"{"http": {"allow": [{"host": "user@example.com"}]}}"#,
            r#"{"http": {"allow": []}}"#,
            r#"{"secrets": {"exists": ["*"]}}"#,
            r#"{"workspace": {"read": ["*"]}}"#,
            r#"{"workspace": {"read": ["../"]}}"#,
            r#"{"workspace": {"read": ["/etc/"]}}"#,
            r#"{"workspace": {"read": [".toolgate/"]}}"#,
            r#"{"tools": {"aliases": {"me": "wasm__other"}}}"#,
            r#"{"tools": {"aliases": {"all": "*"}}}"#,
            r#"{"limits": {"memory_mb": 0}}"#,
            r#"{"limits": {"instances": 0}}"#,
            r#"{"limits": {"component_mb": 0}}"#,
            r#"{"network": true}"#,
        ] {
            assert!(Capabilities::from_json(text).is_err(), "accepted {text}");
        }
    }

    #[test]
    fn accepts_precise_grants() {
        let caps = Capabilities::from_json(
            r#"{"workspace": {"read": ["docs/", "data/x.json"]},
                "http": {"allow": [{"host": "api.example.com", "path_prefix": "/v1/", "methods": ["GET"]},
                                   {"host": "*.example.org"}],
                         "credentials": [{"secret": "TOKEN", "host": "api.example.com", "location": {"bearer": {}}}]},
                "secrets": {"exists": ["OPENAI_*", "EXACT"]},
                "tools": {"aliases": {"search": "grep"}}}"#,
        )
        .unwrap();
        assert!(caps.read_allowed("docs/a/b.md"));
        assert!(caps.read_allowed("data/x.json"));
        assert!(!caps.read_allowed("docsx/a"));
        assert!(!caps.read_allowed("data/x.json.bak"));
        assert!(caps.secret_allowed("OPENAI_KEY"));
        assert!(caps.secret_allowed("EXACT"));
        assert!(!caps.secret_allowed("EXACT2"));
        assert!(!Capabilities::none().secret_allowed("X"));
        assert!(!Capabilities::none().read_allowed("a"));
    }
}
