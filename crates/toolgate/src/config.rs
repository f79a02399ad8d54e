//! Configuration: `toolgate.toml` in the workspace, the user's config file, `TOOLGATE__*`
//! environment variables and command-line flags, each layer overriding the one before.
//!
//! Every layer is checked on its own first, so an unknown or mistyped key is reported with the
//! file (or variable) it came from. `docs/config.md` documents every key with an example.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};
use toolgate_core::Limits;
use toolgate_policy::PolicyConfig;
use toolgate_tools::custom::CustomToolDef;
use toolgate_tools::fs::FsConfig;
use toolgate_tools::runtime::RuntimeConfig;

pub use crate::pipeline::cache::CacheConfig;
pub use crate::pipeline::hooks::{CommandHookConfig, HooksConfig};
pub use crate::pipeline::loop_breaker::LoopBreakerConfig;
pub use crate::pipeline::rate::{RateLimitConfig, Window};

/// toolgate's whole configuration. Every field has a default, so an empty file is valid.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Who the caller is when nobody says otherwise.
    pub identity: IdentityConfig,
    /// Deadlines, output caps and concurrency.
    pub gate: GateConfig,
    /// Size limits on parameters.
    pub limits: Limits,
    /// Which tools are visible and allowed: profiles, allow/deny lists, argument rules
    /// (`docs/policy.md`); `[[tools.custom]]` user-defined tools (`docs/extensions.md`).
    pub tools: ToolsConfig,
    /// The file tools: write safety, denied paths, instruction files, caps (`docs/fs-tools.md`).
    pub fs: FsConfig,
    /// The runtime tools: sandbox mode, network, limits, timeouts, output cap (`docs/runtime.md`).
    pub runtime: RuntimeConfig,
    /// The web tools: private exceptions, domains, proxy, caps, search (`docs/web.md`).
    pub web: toolgate_tools::web::WebConfig,
    /// The memory tools: note caps, rescans, embeddings (`docs/memory.md`).
    pub memory: toolgate_tools::memory::MemoryConfig,
    /// When to ask a person.
    pub approval: ApprovalConfig,
    /// Calls per minute and hour, per user and tool.
    pub rate_limits: RateLimitConfig,
    /// Commands run before and after matching calls.
    pub hooks: HooksConfig,
    /// The audit log.
    pub audit: AuditConfig,
    /// External MCP servers whose tools the gate takes in (`[mcp.servers.NAME]`, `docs/mcp.md`).
    pub mcp: toolgate_mcp::bridge::McpConfig,
    /// Model endpoints for agents (`[providers.NAME]`, `docs/agents.md`).
    pub providers: std::collections::BTreeMap<String, toolgate_agent::ProviderConfig>,
    /// Agents (`[agents.NAME]`, `docs/agents.md`).
    pub agents: std::collections::BTreeMap<String, toolgate_agent::AgentConfig>,
    /// Delegation links in full form (`[[agent_links]]`, `docs/agents.md`).
    pub agent_links: Vec<toolgate_agent::AgentLink>,
    /// Teams of agents (`[teams.NAME]`, `docs/agents.md`).
    pub teams: std::collections::BTreeMap<String, toolgate_agent::TeamConfig>,
    /// Settings for every agent: the research sub-agent's tools (`[agents_defaults]`, `docs/agents.md`).
    pub agents_defaults: toolgate_agent::AgentsDefaults,
    /// The result cache for read-only tools (`docs/extensions.md`).
    pub cache: CacheConfig,
    /// Refusing a call repeated too many times in a row (`docs/extensions.md`).
    pub loop_breaker: LoopBreakerConfig,
    /// Jobs, routines and message channels (`[automation.channels.NAME]`, `docs/automation.md`).
    pub automation: toolgate_automation::AutomationConfig,
    /// Serving as a team gateway: API keys, per-user workspaces (`docs/gateway.md`).
    pub gateway: toolgate_gateway::GatewayConfig,
    /// The media tools: caps, image, transcription and speech providers (`docs/media.md`).
    pub media: toolgate_media::MediaConfig,
    /// The browser family: the canvas's scripts and public address (`docs/browser.md`).
    pub browser: toolgate_browser::BrowserSettings,
    /// Where shared state lives: a PostgreSQL database for several nodes (`docs/gateway.md`).
    pub store: StoreConfig,
    /// This node's name and address among several nodes on one store (`docs/gateway.md`).
    pub node: NodeConfig,
    /// Traces of every call over OTLP, off unless an endpoint is set (`docs/operations.md`).
    pub telemetry: crate::telemetry::TelemetryConfig,
}

/// `[store]`: with `url`, the state that several `toolgate serve` nodes share (users, keys,
/// grants, access requests, the approvals inbox) is kept in that PostgreSQL database; the rest
/// stays in each workspace's `.toolgate/state.db`. Without it, everything is in that file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:password@host:port/database` (libpq's parameters, such as
    /// `sslmode=require`); a password is better given in `TOOLGATE__STORE__URL` than in a file.
    pub url: Option<String>,
    /// Set by the gateway for its per-user gates, never read from a file: the user's audit log
    /// goes to this shared database (the team's calls in one place, every node's) while the
    /// rest of the user's state stays in the user's workspace.
    #[serde(skip)]
    pub audit_url: Option<String>,
}

/// `[node]`: this `toolgate serve` among several on one shared store. What is local to a node
/// (its background processes) is recorded with its name and URL, so a call about it reaching
/// another node is told where it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Unique among the nodes; default: the host name and the port it listens on.
    pub name: Option<String>,
    /// Where the other nodes and the callers reach this node's MCP endpoint
    /// (`https://node-a.internal:8080/mcp`); default: the address it listens on.
    pub url: Option<String>,
}

impl Config {
    /// Checks that `text` loads as one configuration layer on its own: known keys, right types
    /// (what every in-place edit of `toolgate.toml` is checked with before it is written; an
    /// MCP server entry may be completed by another layer). The error is the parser's message.
    pub fn check_layer(text: &str) -> Result<(), String> {
        toml::from_str::<Config>(text).map(drop).map_err(|e| e.to_string().trim().to_owned())
    }
}

/// The `[tools]` table: the tool policy (`docs/policy.md`) plus `[[tools.custom]]`, the
/// custom tool definitions. It dereferences to the [`PolicyConfig`], so `config.tools.deny`
/// reads as before.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolsConfig {
    /// Which tools are visible and allowed.
    pub policy: PolicyConfig,
    /// `[[tools.custom]]`: user-defined shell-template tools (`docs/extensions.md`).
    pub custom: Vec<CustomToolDef>,
}

impl Deref for ToolsConfig {
    type Target = PolicyConfig;
    fn deref(&self) -> &PolicyConfig {
        &self.policy
    }
}

impl DerefMut for ToolsConfig {
    fn deref_mut(&mut self) -> &mut PolicyConfig {
        &mut self.policy
    }
}

impl Serialize for ToolsConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Flat<'a> {
            #[serde(flatten)]
            policy: &'a PolicyConfig,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            custom: &'a [CustomToolDef],
        }
        Flat { policy: &self.policy, custom: &self.custom }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolsConfig {
    /// `custom` is taken out first; the rest must be a valid policy, whose unknown keys are
    /// still reported (`#[serde(flatten)]` would silently drop them).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(d)?;
        let custom = match table.remove("custom") {
            None => Vec::new(),
            Some(value) => Vec::<CustomToolDef>::deserialize(value)
                .map_err(|e| D::Error::custom(format!("[[tools.custom]]: {e}")))?,
        };
        let policy = PolicyConfig::deserialize(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(format!("[tools]: {e}")))?;
        Ok(ToolsConfig { policy, custom })
    }
}

/// `[identity]`: defaults for the caller's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityConfig {
    /// The user (default `local`).
    pub user: String,
    /// The agent (default `main`).
    pub agent: String,
    /// The model provider, when known (`openai`, `anthropic`, `gemini`, ...).
    pub provider: Option<String>,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig { user: "local".into(), agent: "main".into(), provider: None }
    }
}

/// `[gate]`: how calls run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// Default deadline of a call, in seconds, when the tool sets none (default 30).
    pub timeout_secs: f64,
    /// Longest text a call returns, in bytes; the middle of longer output is cut (default 100,000).
    pub max_output_bytes: usize,
    /// Calls one agent may have running at once (default 10).
    pub max_in_flight: usize,
    /// Calls one agent may have waiting for a slot (default 100); more are refused.
    pub max_queued: usize,
    /// The tool language callers speak (`docs/dialects.md`): `toolgate` (the default), `goclaw`,
    /// `linggen`, `gomini`, `openclaw` or `ironclaw`. An agent's own `dialect` wins for its calls.
    pub dialect: String,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            timeout_secs: 30.0,
            max_output_bytes: 100_000,
            max_in_flight: 10,
            max_queued: 100,
            dialect: toolgate_dialect::DEFAULT.to_owned(),
        }
    }
}

impl GateConfig {
    /// The default deadline as a `Duration` (at least 1 ms).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_secs.clamp(0.001, 86_400.0))
    }
}

/// `[approval]`: when a person is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalConfig {
    /// `untrusted`, `on-request` (default) or `never`.
    pub mode: ApprovalMode,
    /// How long to wait for an answer before treating silence as "deny" (default 120 s).
    pub timeout_secs: u64,
    /// The approvals inbox of `toolgate serve --http`: how long an entry can be decided before
    /// it expires (a denial; default 3600 s).
    pub expires_secs: u64,
    /// How long a call waits in the inbox before it is told "waiting for approval N" (a retry
    /// with the same arguments resumes; default 600 s, bounded by `timeout_secs`).
    pub wait_secs: u64,
    /// Refuse a decision by the user the call is made for (default false).
    pub no_self_approval: bool,
    /// A URL that is sent each new inbox entry as JSON (`POST`); when it fails, the entry is
    /// denied after `notify_fallback_secs` unless someone decided it.
    pub notify_url: Option<String>,
    /// See `notify_url` (default 300 s; 0: wait for the expiry instead).
    pub notify_fallback_secs: u64,
    /// Where an entry can be decided, shown to clients (`{id}` is replaced by its number).
    pub inbox_url: Option<String>,
    /// How often the key that seals `requestState`s is replaced (default 7 days).
    pub key_rotation_days: u64,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            mode: ApprovalMode::OnRequest,
            timeout_secs: 120,
            expires_secs: 3600,
            wait_secs: 600,
            no_self_approval: false,
            notify_url: None,
            notify_fallback_secs: 300,
            inbox_url: None,
            key_rotation_days: 7,
        }
    }
}

/// Approval modes, after Codex.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Only known-safe read-only calls run without asking.
    Untrusted,
    /// Ask when a tool, a rule or the command classifier says so.
    #[default]
    OnRequest,
    /// Never ask: such calls run, still confined by the sandbox.
    Never,
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "untrusted" => Ok(ApprovalMode::Untrusted),
            "on-request" => Ok(ApprovalMode::OnRequest),
            "never" => Ok(ApprovalMode::Never),
            other => Err(format!("unknown approval mode `{other}`; use untrusted, on-request or never")),
        }
    }
}

/// `[audit]`: the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Record every call in `.toolgate/state.db` (default true).
    pub enabled: bool,
    /// Rows that started more than this many days ago are pruned from the start of the hash
    /// chain, which records it (default 90; 0 keeps everything). `docs/audit.md`.
    pub retention_days: u32,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig { enabled: true, retention_days: 90 }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A config file exists but cannot be read.
    #[error("cannot read config file {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (in the message, so not the error's source: a chain printer would say it twice).
        cause: std::io::Error,
    },
    /// A layer is not valid: bad TOML, an unknown key, a wrong type.
    #[error("invalid configuration in {origin}: {message}")]
    Invalid {
        /// The file, environment variable or flag the layer came from.
        origin: String,
        /// What is wrong (TOML's own message names the key and position).
        message: String,
    },
}

/// Where configuration comes from, lowest precedence first.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    /// The user's config file (default `$XDG_CONFIG_HOME/toolgate/config.toml`).
    pub user_file: Option<PathBuf>,
    /// The workspace's `toolgate.toml`, or the file given with `--config`.
    pub workspace_file: Option<PathBuf>,
    /// Environment variables, as (name, value) pairs; only `TOOLGATE__*` ones are read.
    pub env: Vec<(String, String)>,
    /// Flags from the command line, as dotted keys (`tools.profile`) and TOML values.
    pub flags: Vec<(String, Value)>,
}

impl ConfigSources {
    /// The standard sources for `workspace`: the user file, `toolgate.toml` (or `config_file`
    /// when given, which must then exist), and this process's environment.
    pub fn standard(workspace: &Path, config_file: Option<&Path>) -> ConfigSources {
        let user_file = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|dir| dir.join("toolgate/config.toml"));
        let workspace_file = Some(config_file.map_or_else(|| workspace.join("toolgate.toml"), Path::to_owned));
        ConfigSources { user_file, workspace_file, env: std::env::vars().collect(), flags: Vec::new() }
    }

    /// Loads and merges every layer. A missing user or workspace file is skipped, except a file
    /// named with `--config` (`required_file`), which must exist.
    pub fn load(&self, required_file: Option<&Path>) -> Result<Config, ConfigError> {
        self.load_with_shared(required_file, None)
    }

    /// [`ConfigSources::load`] with the sections several nodes share (`[store] url`,
    /// `crate::shared_config`) on top of every layer: each section `shared` holds replaces the
    /// same section of the files whole.
    pub fn load_with_shared(
        &self,
        required_file: Option<&Path>,
        shared: Option<&Table>,
    ) -> Result<Config, ConfigError> {
        let mut merged = Table::new();
        for path in self.user_file.iter().chain(&self.workspace_file) {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && required_file != Some(path.as_path()) => {
                    continue;
                }
                Err(cause) => return Err(ConfigError::Read { path: path.clone(), cause }),
            };
            let origin = path.display().to_string();
            let layer: Table = toml::from_str(&text)
                .map_err(|e| ConfigError::Invalid { origin: origin.clone(), message: e.to_string() })?;
            check_layer(&layer, &origin)?;
            merge(&mut merged, layer);
        }
        for (name, value) in &self.env {
            let Some(rest) = name.strip_prefix("TOOLGATE__") else { continue };
            let keys: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            let layer = nested(&keys, parse_value(value));
            check_layer(&layer, &format!("environment variable {name}"))?;
            merge(&mut merged, layer);
        }
        for (key, value) in &self.flags {
            let keys: Vec<String> = key.split('.').map(str::to_owned).collect();
            let layer = nested(&keys, value.clone());
            check_layer(&layer, &format!("command-line flag for `{key}`"))?;
            merge(&mut merged, layer);
        }
        if let Some(shared) = shared {
            check_layer(shared, "the shared configuration in the database")?;
            crate::shared_config::overlay(&mut merged, shared);
        }
        let config = Config::deserialize(Value::Table(merged))
            .map_err(|e| ConfigError::Invalid { origin: "the merged configuration".into(), message: e.to_string() })?;
        // A server entry is whole only once every layer is in (a flag may add its `url`).
        if let Some(message) = config.mcp.servers.iter().find_map(|(name, server)| server.problem(name)) {
            return Err(ConfigError::Invalid { origin: "the merged configuration".into(), message });
        }
        Ok(config)
    }
}

fn check_layer(layer: &Table, origin: &str) -> Result<(), ConfigError> {
    Config::deserialize(Value::Table(layer.clone()))
        .map(drop)
        .map_err(|e| ConfigError::Invalid { origin: origin.to_owned(), message: e.to_string().trim().to_owned() })
}

/// Deep merge: tables merge key by key; anything else in `over` replaces what `base` had.
/// Arrays of tables that add up across layers instead of replacing: a user's custom tools and
/// hooks stay when a workspace adds its own. An entry with the `name` of an earlier one replaces
/// it in place.
const ADDITIVE: &[&str] = &["tools.custom", "hooks.pre_tool_use", "hooks.post_tool_use"];

fn merge(base: &mut Table, over: Table) {
    merge_at(base, over, "");
}

fn merge_at(base: &mut Table, over: Table, path: &str) {
    for (key, value) in over {
        let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge_at(b, o, &here),
            (Some(Value::Array(b)), Value::Array(o)) if ADDITIVE.contains(&here.as_str()) => {
                for item in o {
                    let same = item.get("name").and_then(|n| b.iter().position(|e| e.get("name") == Some(n)));
                    match same {
                        Some(i) => b[i] = item,
                        None => b.push(item),
                    }
                }
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn nested(keys: &[String], value: Value) -> Table {
    let mut table = Table::new();
    match keys {
        [] => {}
        [last] => {
            table.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            table.insert(first.clone(), Value::Table(nested(rest, value)));
        }
    }
    table
}

/// An environment value as TOML (`30`, `true`, `["a", "b"]`), or else as a plain string.
fn parse_value(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn layers_override_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let user =
            write(dir.path(), "user.toml", "[gate]\ntimeout_secs = 5\nmax_in_flight = 3\n[identity]\nuser = \"ann\"\n");
        let ws = write(dir.path(), "toolgate.toml", "[gate]\ntimeout_secs = 7\n[tools]\nprofile = \"coding\"\n");
        let sources = ConfigSources {
            user_file: Some(user),
            workspace_file: Some(ws),
            env: vec![("TOOLGATE__TOOLS__PROFILE".into(), "minimal".into()), ("OTHER".into(), "x".into())],
            flags: vec![("identity.agent".into(), Value::String("reviewer".into()))],
        };
        let config = sources.load(None).unwrap();
        assert_eq!(config.gate.timeout_secs, 7.0, "workspace beats user");
        assert_eq!(config.gate.max_in_flight, 3, "user value kept where nothing overrides it");
        assert_eq!(config.tools.profile, Some(toolgate_policy::Profile::Minimal), "environment beats files");
        assert_eq!(config.identity.user, "ann");
        assert_eq!(config.identity.agent, "reviewer", "flags last");
    }

    /// Custom tools and hooks from the user file stay when the workspace file adds its own; a
    /// workspace tool of the same name replaces the user's. Other lists still replace.
    #[test]
    fn custom_tools_and_hooks_add_up_across_layers() {
        let dir = tempfile::tempdir().unwrap();
        let tool = |name: &str, command: &str| {
            format!(
                "[[tools.custom]]\nname = \"{name}\"\ndescription = \"d\"\n\
                 parameters = {{ type = \"object\", properties = {{}} }}\ncommand = \"{command}\"\n"
            )
        };
        let hook = |command: &str| format!("[[hooks.pre_tool_use]]\nmatcher = \"*\"\ncommand = \"{command}\"\n");
        let user = format!(
            "{}{}{}[tools]\ndeny = [\"exec\"]\n",
            tool("mine", "echo a"),
            tool("both", "echo user"),
            hook("h1")
        );
        let ws = format!(
            "{}{}{}[tools]\ndeny = [\"grep\"]\n",
            tool("both", "echo workspace"),
            tool("theirs", "echo b"),
            hook("h2")
        );
        let sources = ConfigSources {
            user_file: Some(write(dir.path(), "user.toml", &user)),
            workspace_file: Some(write(dir.path(), "toolgate.toml", &ws)),
            ..ConfigSources::default()
        };
        let config = sources.load(None).unwrap();
        let tools: Vec<(&str, &str)> =
            config.tools.custom.iter().map(|d| (d.name.as_str(), d.command.as_str())).collect();
        assert_eq!(tools, [("mine", "echo a"), ("both", "echo workspace"), ("theirs", "echo b")]);
        let hooks: Vec<&str> = config.hooks.pre_tool_use.iter().map(|h| h.command.as_str()).collect();
        assert_eq!(hooks, ["h1", "h2"]);
        assert_eq!(config.tools.deny, ["grep"], "other lists replace");
    }

    #[test]
    fn unknown_keys_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ws = write(dir.path(), "toolgate.toml", "[gate]\ntimeout_sec = 5\n");
        let sources = ConfigSources { workspace_file: Some(ws.clone()), ..ConfigSources::default() };
        let err = sources.load(None).unwrap_err().to_string();
        assert!(err.contains(&ws.display().to_string()), "{err}");
        assert!(err.contains("timeout_sec"), "{err}");
        let sources =
            ConfigSources { env: vec![("TOOLGATE__GATE__NOPE".into(), "1".into())], ..ConfigSources::default() };
        let err = sources.load(None).unwrap_err().to_string();
        assert!(err.contains("TOOLGATE__GATE__NOPE") && err.contains("nope"), "{err}");
    }

    #[test]
    fn mcp_servers_are_checked_once_merged() {
        let dir = tempfile::tempdir().unwrap();
        let ws = write(dir.path(), "toolgate.toml", "[mcp.servers.gh]\nurl = \"https://example.com/mcp\"\n");
        let sources = ConfigSources { workspace_file: Some(ws), ..ConfigSources::default() };
        let config = sources.load(None).unwrap();
        assert_eq!(config.mcp.servers["gh"].url.as_deref(), Some("https://example.com/mcp"));
        let ws = write(dir.path(), "toolgate.toml", "[mcp.servers.gh]\nenabled = true\n");
        let sources = ConfigSources { workspace_file: Some(ws), ..ConfigSources::default() };
        let err = sources.load(None).unwrap_err().to_string();
        assert!(err.contains("[mcp.servers.gh] needs `command`"), "{err}");
    }

    #[test]
    fn bad_toml_and_missing_required_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ws = write(dir.path(), "toolgate.toml", "[gate\n");
        let sources = ConfigSources { workspace_file: Some(ws), ..ConfigSources::default() };
        assert!(matches!(sources.load(None), Err(ConfigError::Invalid { .. })));
        let missing = dir.path().join("nope.toml");
        let sources = ConfigSources { workspace_file: Some(missing.clone()), ..ConfigSources::default() };
        assert!(sources.load(None).is_ok(), "a missing optional file is skipped");
        assert!(matches!(sources.load(Some(&missing)), Err(ConfigError::Read { .. })));
    }
}
