//! `[mcp.servers.NAME]`: how to reach one external MCP server and which of its tools to take.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The prefix of a bridged tool's name when the server sets none: `mcp__NAME__tool`, the form
/// Claude Code uses.
pub const DEFAULT_PREFIX: &str = "mcp__";

/// `[mcp]`: the external MCP servers whose tools the gate takes in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (`[mcp.servers.github]`). A name is letters, digits, `_` or `-`.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One external MCP server: either a command (stdio) or a URL (Streamable HTTP or legacy SSE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Whether the gate connects to it (default true).
    pub enabled: bool,
    /// stdio: the program to start.
    pub command: Option<String>,
    /// stdio: its arguments.
    pub args: Vec<String>,
    /// stdio: the child's whole environment. Nothing else from toolgate's environment is passed
    /// on (not even `PATH`, unless listed). A value `${NAME}` is taken from toolgate's own
    /// environment, so a secret need not be written in the file.
    pub env: BTreeMap<String, String>,
    /// stdio: the child's working directory (default: the workspace).
    pub cwd: Option<PathBuf>,
    /// HTTP: the server's endpoint (`https://host/mcp`, or `https://host/sse` for legacy SSE).
    pub url: Option<String>,
    /// HTTP: which protocol the URL speaks. Default: `http` (Streamable HTTP), or `sse` when the
    /// URL's path ends in `/sse`.
    pub transport: Option<HttpTransport>,
    /// HTTP: extra request headers (`Authorization = "Bearer ${TOKEN}"`); `${NAME}` expands as in
    /// `env`.
    pub headers: BTreeMap<String, String>,
    /// HTTP: OAuth 2.1 settings. Without this table the bridge still follows a server's 401
    /// challenge when `toolgate mcp login NAME` has stored a token.
    pub oauth: Option<OAuthConfig>,
    /// Which of the server's tools to take in.
    pub tools: ToolFilter,
    /// The prefix of every tool name from this server; the default `mcp__` gives
    /// `mcp__NAME__tool`. Setting it replaces `mcp__NAME__`, e.g. `prefix = "gh_"` gives
    /// `gh_create_issue`.
    pub prefix: Option<String>,
    /// Deadline of one call to this server, in seconds (default: the gate's).
    pub timeout_secs: Option<f64>,
    /// stdio: the sandbox the server runs in (`[mcp.servers.NAME.sandbox]`).
    pub sandbox: ServerSandbox,
    /// In a team gateway (`[gateway] enabled`): `true` makes one server-wide credential (an
    /// admin's `toolgate mcp login NAME`, or `headers`) serve every user. Default `false`: each
    /// user signs in for themself (`toolgate mcp login NAME --user USER`), each user's calls go
    /// over a connection of their own with their own token, and a user without one is told to
    /// sign in, never given anyone else's. Outside a gateway it changes nothing.
    pub shared: bool,
    /// HTTP, in a team gateway: the request header that carries each user's own key for this
    /// server (`"Authorization"`, `"X-Api-Key"`), stored by `toolgate mcp login NAME --user USER
    /// --key`. Each user's connection sends that user's key; a user without one is told to
    /// store it, never given anyone else's.
    pub user_key_header: Option<String>,
    /// What comes before the key in that header (`"Bearer "`); default nothing.
    pub user_key_prefix: Option<String>,
}

/// `[mcp.servers.NAME.sandbox]`: what a stdio server may read, write and reach. By default it
/// runs in toolgate's sandbox (the one `exec` uses): it reads the system, its own installation
/// and the workspace, writes only `.toolgate/mcp/NAME/` and a private temporary folder, and has
/// no network (a launcher, `npx` or `uvx`, reaches its package registry through toolgate's
/// proxy). See `docs/mcp.md`, "Servers in the sandbox".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSandbox {
    /// `false` runs the server unconfined, as a program of the user's (logged when it starts).
    pub enabled: bool,
    /// More readable paths (`~`, `${VAR}` and workspace-relative paths allowed).
    pub read: Vec<String>,
    /// More writable paths (the same forms).
    pub write: Vec<String>,
    /// `off`, `proxy` or `host`; unset: `off`, or `proxy` to its registries for a launcher.
    pub network: Option<ServerNetwork>,
    /// With `network = "proxy"`: the hosts it may reach (`api.github.com`, `*.npmjs.org`,
    /// `host:port`, `127.0.0.1:8080` for that exact private address and port).
    pub allow_hosts: Vec<String>,
}

impl ServerSandbox {
    /// The profile in one line, for `toolgate mcp list`.
    pub fn describe(&self, server: &str) -> String {
        if !self.enabled {
            return format!("NOT sandboxed ([mcp.servers.{server}.sandbox] enabled = false)");
        }
        let more = |paths: &[String]| {
            if paths.is_empty() { String::new() } else { format!(", {}", paths.join(", ")) }
        };
        let network = match self.network {
            None => "network off (a launcher: proxy to its registry)".to_owned(),
            Some(ServerNetwork::Proxy) => {
                format!("network through toolgate's proxy to {}", self.allow_hosts.join(", "))
            }
            Some(other) => format!("network {other}"),
        };
        format!(
            "sandboxed: reads the workspace, its installation{}; writes .toolgate/mcp/{server}/{}; {network}",
            more(&self.read),
            more(&self.write),
        )
    }

    /// What is wrong with this table, if anything.
    fn problem(&self, server: &str) -> Option<String> {
        if !self.allow_hosts.is_empty() && self.network != Some(ServerNetwork::Proxy) {
            return Some(format!(
                "[mcp.servers.{server}.sandbox] `allow_hosts` needs `network = \"proxy\"` (the hosts are reached through toolgate's proxy)"
            ));
        }
        toolgate_fetch::proxy::AllowHosts::parse(&self.allow_hosts, "")
            .err()
            .map(|e| format!("[mcp.servers.{server}.sandbox] allow_hosts: {e}"))
    }
}

impl Default for ServerSandbox {
    fn default() -> Self {
        ServerSandbox { enabled: true, read: Vec::new(), write: Vec::new(), network: None, allow_hosts: Vec::new() }
    }
}

/// How a sandboxed server reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerNetwork {
    /// No network: only UNIX sockets of its own.
    Off,
    /// A network namespace of its own whose only way out is toolgate's vetting proxy, to
    /// `allow_hosts` only (announced with `HTTP_PROXY` and friends).
    Proxy,
    /// The host's network, unfiltered: the explicit escape hatch (logged when it starts).
    Host,
}

impl std::fmt::Display for ServerNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerNetwork::Off => "off",
            ServerNetwork::Proxy => "proxy",
            ServerNetwork::Host => "host",
        })
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            enabled: true,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            transport: None,
            headers: BTreeMap::new(),
            oauth: None,
            tools: ToolFilter::default(),
            prefix: None,
            timeout_secs: None,
            sandbox: ServerSandbox::default(),
            shared: false,
            user_key_header: None,
            user_key_prefix: None,
        }
    }
}

/// The two HTTP protocols a server may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpTransport {
    /// Streamable HTTP (2025-03-26 and later).
    Http,
    /// The legacy HTTP+SSE transport (2024-11-05): `GET` an event stream, `POST` to the
    /// endpoint it names.
    Sse,
}

/// `[mcp.servers.NAME.tools]`: `allow` and `deny` lists of the server's own tool names (before
/// the prefix); `*` at the end of an entry matches any rest. Deny wins; an empty `allow` takes
/// every tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolFilter {
    /// Only these tools (empty: all).
    pub allow: Vec<String>,
    /// Never these tools.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether the server's tool `name` is taken in.
    pub fn admits(&self, name: &str) -> bool {
        let matches = |entry: &String| match entry.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => entry == name,
        };
        !self.deny.iter().any(matches) && (self.allow.is_empty() || self.allow.iter().any(matches))
    }
}

/// `[mcp.servers.NAME.oauth]`: OAuth 2.1 (authorization code + PKCE S256) for an HTTP server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// A pre-registered client ID. Without one, toolgate uses `client_metadata_url` when the
    /// authorization server supports client ID metadata documents, else dynamic client
    /// registration.
    pub client_id: Option<String>,
    /// The pre-registered client's secret (`${NAME}` expands); public clients have none.
    pub client_secret: Option<String>,
    /// An HTTPS URL of a client ID metadata document that names toolgate.
    pub client_metadata_url: Option<String>,
    /// Scopes to request (default: what the server's metadata advertises).
    pub scopes: Vec<String>,
    /// The loopback port `toolgate mcp login` listens on for the redirect (default: any free port).
    pub redirect_port: Option<u16>,
}

impl ServerConfig {
    /// What is wrong with this entry, if anything, for an error that names the server.
    pub fn problem(&self, name: &str) -> Option<String> {
        if !valid_server_name(name) {
            return Some(format!(
                "MCP server name `{name}` is not usable: use 1-32 letters, digits, `_` or `-`, without `__` (it becomes part of tool names)"
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Some(format!("[mcp.servers.{name}] sets both `command` and `url`; keep one")),
            (None, None) => Some(format!(
                "[mcp.servers.{name}] needs `command` (a program speaking MCP over stdio) or `url` (an HTTP endpoint)"
            )),
            (Some(command), None) if command.trim().is_empty() => {
                Some(format!("[mcp.servers.{name}] has an empty `command`"))
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Some(format!("[mcp.servers.{name}] `url` must start with http:// or https://, got `{url}`"))
            }
            _ if self.command.is_some() && (!self.headers.is_empty() || self.oauth.is_some()) => {
                Some(format!("[mcp.servers.{name}] `headers` and `oauth` apply to `url` servers, not `command`"))
            }
            _ if self.url.is_some() && self.sandbox != ServerSandbox::default() => Some(format!(
                "[mcp.servers.{name}.sandbox] applies to `command` servers; an HTTP server runs elsewhere"
            )),
            _ => self.user_key_problem(name).or_else(|| self.sandbox.problem(name)),
        }
    }

    /// What is wrong with `user_key_header` and `user_key_prefix`, if anything.
    fn user_key_problem(&self, name: &str) -> Option<String> {
        let Some(header) = &self.user_key_header else {
            return self.user_key_prefix.is_some().then(|| {
                format!("[mcp.servers.{name}] `user_key_prefix` goes with `user_key_header` (the header it is put in)")
            });
        };
        let at = format!("[mcp.servers.{name}] `user_key_header`");
        if self.command.is_some() {
            return Some(format!("{at} applies to `url` servers (a stdio server gets no HTTP headers)"));
        }
        if http::HeaderName::try_from(header.as_str()).is_err() {
            return Some(format!("{at}: `{}` is not an HTTP header name", header.escape_debug()));
        }
        if self.shared {
            return Some(format!(
                "{at} (each user's own key) and `shared = true` (one credential for every user) contradict; keep one"
            ));
        }
        if self.oauth.is_some() {
            return Some(format!(
                "{at} (a key of each user's) and [mcp.servers.{name}.oauth] (OAuth sign-ins) contradict; keep one"
            ));
        }
        if self.headers.keys().any(|h| h.eq_ignore_ascii_case(header)) {
            return Some(format!("{at}: `headers` sets `{header}` too; keep one"));
        }
        let prefix = self.user_key_prefix.as_deref().unwrap_or_default();
        if prefix.len() > 64 || !prefix.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            return Some(format!(
                "[mcp.servers.{name}] `user_key_prefix` is at most 64 visible ASCII characters and spaces (`Bearer `)"
            ));
        }
        None
    }

    /// In a team gateway, what is wrong with this entry, if anything: a credential in `headers`
    /// is the same for every user, so it needs `shared = true` said explicitly.
    pub fn gateway_problem(&self, name: &str) -> Option<String> {
        if self.shared {
            return None;
        }
        let credential = self.headers.keys().find(|key| {
            let key = key.to_ascii_lowercase();
            ["auth", "key", "token", "secret", "cookie", "session", "password"].iter().any(|w| key.contains(w))
        })?;
        Some(format!(
            "[mcp.servers.{name}] sends `{credential}` from `headers`, one credential for every user of the gateway; \
             set `shared = true` in [mcp.servers.{name}] if that is meant, or remove it so each user signs in with \
             `toolgate mcp login {name} --user USER`"
        ))
    }

    /// The HTTP protocol to use for `url`.
    pub fn http_transport(&self) -> HttpTransport {
        self.transport.unwrap_or_else(|| {
            let path = self.url.as_deref().unwrap_or_default().split(['?', '#']).next().unwrap_or_default();
            if path.trim_end_matches('/').ends_with("/sse") { HttpTransport::Sse } else { HttpTransport::Http }
        })
    }

    /// The name a server's tool gets in the gate: `mcp__NAME__tool` by default.
    pub fn tool_name(&self, server: &str, tool: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}{tool}"),
            None => format!("{DEFAULT_PREFIX}{server}__{tool}"),
        }
    }
}

/// A server name: it becomes part of tool names and of the `group:mcp:NAME` policy group. No
/// `__`, the separator in `mcp__NAME__tool`: servers `a` (tool `b__c`) and `a__b` (tool `c`)
/// would both claim `mcp__a__b__c`, and `mcp__a__b__*` in a policy would reach server `a`.
pub fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
}

/// Expands `${NAME}` in a config value from toolgate's environment. An unset variable is an
/// error naming it, so a missing secret is not silently sent as an empty string.
pub fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // Not the value itself: it may hold a secret written in the file.
            return Err("a `${` without its closing `}`".to_owned());
        };
        let var = &after[..end];
        match std::env::var(var) {
            Ok(v) => out.push_str(&v),
            Err(_) => return Err(format!("environment variable `{var}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_deny_wins_and_wildcards_match_a_prefix() {
        let f = ToolFilter { allow: vec!["get_*".into(), "echo".into()], deny: vec!["get_secret".into()] };
        assert!(f.admits("echo"));
        assert!(f.admits("get_sum"));
        assert!(!f.admits("get_secret"));
        assert!(!f.admits("echoes"));
        assert!(ToolFilter::default().admits("anything"));
        assert!(!ToolFilter { allow: vec![], deny: vec!["*".into()] }.admits("x"));
    }

    #[test]
    fn transport_and_names() {
        let mut s = ServerConfig { url: Some("http://127.0.0.1:3001/sse".into()), ..Default::default() };
        assert_eq!(s.http_transport(), HttpTransport::Sse);
        s.url = Some("http://127.0.0.1:3001/mcp".into());
        assert_eq!(s.http_transport(), HttpTransport::Http);
        assert_eq!(s.tool_name("everything", "echo"), "mcp__everything__echo");
        s.prefix = Some("ev_".into());
        assert_eq!(s.tool_name("everything", "echo"), "ev_echo");
        assert!(s.problem("everything").is_none());
        assert!(s.problem("bad name").is_some());
        assert!(s.problem("a__b").is_some(), "`__` would make tool names ambiguous");
        assert!(s.problem("a_b-c").is_none());
        assert!(ServerConfig::default().problem("x").unwrap().contains("needs `command`"));
        let mut stdio = ServerConfig { command: Some("srv".into()), ..Default::default() };
        stdio.sandbox.allow_hosts = vec!["api.github.com".into()];
        assert!(stdio.problem("x").unwrap().contains("needs `network = \"proxy\"`"));
        stdio.sandbox.network = Some(ServerNetwork::Proxy);
        assert!(stdio.problem("x").is_none());
        stdio.sandbox.allow_hosts = vec!["10.0.0.1".into()];
        assert!(stdio.problem("x").unwrap().contains("needs its port"));
    }

    #[test]
    fn a_gateway_refuses_a_header_credential_unless_the_server_is_shared() {
        let mut s = ServerConfig { url: Some("https://mcp.example.com/mcp".into()), ..Default::default() };
        assert!(s.gateway_problem("gh").is_none(), "no headers: each user signs in");
        s.headers.insert("X-Client".into(), "toolgate".into());
        assert!(s.gateway_problem("gh").is_none(), "not a credential");
        for name in ["Authorization", "X-API-Key", "x-access-token", "Cookie"] {
            let mut keyed = s.clone();
            keyed.headers.insert(name.into(), "s3cr3t-value".into());
            let problem = keyed.gateway_problem("gh").unwrap_or_default();
            assert!(problem.contains(name) && problem.contains("shared = true"), "{name}: {problem}");
            assert!(!problem.contains("s3cr3t"), "the value is never quoted: {problem}");
            keyed.shared = true;
            assert!(keyed.gateway_problem("gh").is_none(), "{name}: said explicitly");
        }
    }

    #[test]
    fn a_user_key_header_is_checked() {
        let s = ServerConfig {
            url: Some("https://mcp.example.com/mcp".into()),
            user_key_header: Some("Authorization".into()),
            user_key_prefix: Some("Bearer ".into()),
            ..Default::default()
        };
        assert!(s.problem("k").is_none() && s.gateway_problem("k").is_none());
        let with = |edit: &dyn Fn(&mut ServerConfig)| {
            let mut bad = s.clone();
            edit(&mut bad);
            bad.problem("k").unwrap_or_default()
        };
        assert!(with(&|b| b.shared = true).contains("`shared = true`"));
        assert!(with(&|b| b.user_key_header = Some("Bad Header".into())).contains("not an HTTP header name"));
        assert!(with(&|b| b.user_key_prefix = Some("Bearer\n".into())).contains("user_key_prefix"));
        assert!(with(&|b| b.oauth = Some(OAuthConfig::default())).contains("contradict"));
        assert!(
            with(&|b| {
                b.headers.insert("authorization".into(), "x".into());
            })
            .contains("`headers` sets")
        );
        assert!(with(&|b| b.user_key_header = None).contains("goes with `user_key_header`"));
        let stdio =
            ServerConfig { command: Some("srv".into()), user_key_header: Some("X-Key".into()), ..Default::default() };
        assert!(stdio.problem("k").unwrap_or_default().contains("applies to `url` servers"));
    }

    #[test]
    fn env_expansion_names_a_missing_variable() {
        assert_eq!(expand_env("plain").unwrap(), "plain");
        let err = expand_env("Bearer ${TOOLGATE_TEST_SURELY_UNSET_VAR}").unwrap_err();
        assert!(err.contains("TOOLGATE_TEST_SURELY_UNSET_VAR"), "{err}");
        assert!(expand_env("${PATH}").unwrap().contains('/'));
        let err = expand_env("Bearer sk_live_secret ${X").unwrap_err();
        assert!(!err.contains("sk_live_secret"), "the value is not quoted: {err}");
    }
}
