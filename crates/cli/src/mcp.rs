//! `toolgate mcp list|add|remove|login|tools`: the external MCP servers the gate bridges in.
//!
//! `add` and `remove` edit the config file in place through [`toolgate_extensions::config_edit`] (shared
//! with the `tool_install` / `tool_remove` tools), so the user's comments and layout survive;
//! the new file is checked, written next to the old one, synced and renamed over it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use toolgate::Gate;
use toolgate::config::Config;
use toolgate::core::ApprovalRequirement;
use toolgate::mcp_vault::StoreVault;
use toolgate_extensions::config_edit;
use toolgate_mcp::bridge::oauth::{self, SecretVault};
use toolgate_mcp::bridge::{
    HttpTransport, ServerConfig, ServerNetwork, ServerSandbox, ServerState, ToolFilter, valid_server_name,
};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the configured MCP servers.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Add a server to toolgate.toml: `add NAME --url URL`, or `add NAME -- COMMAND [ARGS...]`.
    Add(Box<AddArgs>),
    /// Remove a server from the config file (and forget its OAuth tokens).
    Remove {
        /// The server's name.
        name: String,
        /// Edit the user's config file instead of the workspace's.
        #[arg(long)]
        user: bool,
    },
    /// Sign in to an HTTP server with OAuth 2.1: prints a URL to open, waits for the redirect.
    Login {
        /// The server's name.
        name: String,
        /// Print the URL only; don't try to open a browser.
        #[arg(long)]
        no_browser: bool,
        /// In a team gateway: sign in as this user (a user of `toolgate admin user add`); the
        /// sign-in is theirs alone and only their calls use it.
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// With `--user`, for a server with `user_key_header`: store the user's own key for it,
        /// read from stdin (never from the command line; not shown as typed).
        #[arg(long, requires = "user")]
        key: bool,
    },
    /// Forget the OAuth tokens stored for a server.
    Logout {
        /// The server's name.
        name: String,
        /// In a team gateway: forget this user's own sign-in (no one else's is touched).
        #[arg(long, value_name = "USER")]
        user: Option<String>,
    },
    /// Connect to one server and list its tools as the gate would take them in.
    Tools {
        /// The server's name.
        name: String,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// The server's name: its tools become `mcp__NAME__tool`.
    name: String,
    /// An HTTP endpoint (Streamable HTTP, or legacy SSE when the path ends in `/sse`).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    url: Option<String>,
    /// Force the HTTP protocol: `http` (Streamable HTTP) or `sse` (legacy HTTP+SSE).
    #[arg(long, value_name = "T", requires = "url", value_parser = ["http", "sse"])]
    transport: Option<String>,
    /// An HTTP header, `NAME: VALUE` (repeatable); `${VAR}` is expanded when connecting.
    #[arg(long = "header", short = 'H', value_name = "HEADER", requires = "url")]
    headers: Vec<String>,
    /// An environment variable for a stdio server, `NAME=VALUE` (repeatable). The server gets
    /// only these; `${VAR}` takes a value from toolgate's environment when connecting.
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Take only these of the server's tools (repeatable; `get_*` matches a prefix).
    #[arg(long, value_name = "TOOL")]
    allow: Vec<String>,
    /// Never take these tools (repeatable; deny wins over allow).
    #[arg(long, value_name = "TOOL")]
    deny: Vec<String>,
    /// Name tools `PREFIXtool` instead of `mcp__NAME__tool`.
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// A stdio server may also read this path (repeatable; `~`, `${VAR}` and workspace-relative
    /// paths allowed).
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    allow_read: Vec<String>,
    /// A stdio server may also write this path (repeatable).
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    allow_write: Vec<String>,
    /// A stdio server may reach this host through toolgate's proxy (repeatable; `host`,
    /// `host:port`, `*.domain`, or `IP:port`; sets `sandbox.network = "proxy"`).
    #[arg(long, value_name = "HOST", conflicts_with_all = ["url", "allow_network"])]
    allow_host: Vec<String>,
    /// A stdio server may use the host's network, unfiltered (`sandbox.network = "host"`).
    #[arg(long, conflicts_with = "url")]
    allow_network: bool,
    /// Run a stdio server outside the sandbox (`sandbox.enabled = false`; logged at every start).
    #[arg(long, conflicts_with_all = ["url", "allow_read", "allow_write", "allow_network", "allow_host"])]
    no_sandbox: bool,
    /// Add it switched off (`enabled = false`).
    #[arg(long)]
    disabled: bool,
    /// Replace an existing entry of the same name.
    #[arg(long)]
    force: bool,
    /// Edit the user's config file instead of the workspace's.
    #[arg(long)]
    user: bool,
    /// A stdio server: the command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub(crate) async fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::List { json } => list(global, json),
        Command::Add(args) => add(global, *args),
        Command::Remove { name, user } => remove(global, &name, user),
        Command::Login { name, user: Some(user), key: true, .. } => store_key(global, &name, &user),
        Command::Login { name, no_browser, user, .. } => login(global, &name, no_browser, user.as_deref()).await,
        Command::Logout { name, user } => logout(global, &name, user.as_deref()),
        Command::Tools { name, json } => tools(global, &name, json).await,
    }
}

fn list(global: &GlobalArgs, json: bool) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let vault = existing_vault(global)?;
    let signed_in = |name: &str| vault.as_ref().is_some_and(|v| oauth::is_logged_in(name, v).unwrap_or(false));
    // In a team gateway, the users signed in to each per-user server (names only, no secret).
    let user_keys: Vec<String> = match &vault {
        Some(v) if config.gateway.enabled => {
            toolgate::store::SecretStore::secret_keys(v.store().as_ref(), oauth::USER_VAULT_PREFIX)?
        }
        _ => Vec::new(),
    };
    // A server with `user_key_header` lists the users who stored a key, another the users who
    // signed in.
    let users_of = |name: &str, server: &ServerConfig| -> Option<Vec<&str>> {
        let parse = if server.user_key_header.is_some() {
            oauth::parse_user_key_vault_key
        } else {
            oauth::parse_user_vault_key
        };
        (config.gateway.enabled && !server.shared)
            .then(|| user_keys.iter().filter_map(|k| parse(k).filter(|(_, s)| *s == name).map(|(u, _)| u)).collect())
    };
    if config.mcp.servers.is_empty() && !json {
        outln!("no MCP servers configured; add one with `toolgate mcp add NAME --url URL` or `-- COMMAND ARGS`");
    }
    for (name, server) in &config.mcp.servers {
        if json {
            let line = serde_json::json!({
                "name": name,
                "enabled": server.enabled,
                "transport": transport_name(server),
                "target": target(server),
                "tools": {"allow": server.tools.allow, "deny": server.tools.deny},
                "prefix": server.tool_name(name, ""),
                "signed_in": signed_in(name),
                "shared": server.shared,
                "users_signed_in": users_of(name, server).filter(|_| server.user_key_header.is_none()),
                "users_with_key": users_of(name, server).filter(|_| server.user_key_header.is_some()),
                "sandbox": server.command.is_some().then(|| serde_json::json!({
                    "enabled": server.sandbox.enabled,
                    "read": server.sandbox.read,
                    "write": server.sandbox.write,
                    "network": server.sandbox.network.map(|n| n.to_string()),
                    "allow_hosts": server.sandbox.allow_hosts,
                })),
            });
            outln!("{line}");
        } else {
            let state = if server.enabled { "" } else { "  (disabled)" };
            let oauth = match users_of(name, server) {
                Some(users) if server.user_key_header.is_some() && users.is_empty() => {
                    "  (per-user keys; nobody stored one)".to_owned()
                }
                Some(users) if server.user_key_header.is_some() => {
                    format!("  (per-user keys; stored by: {})", users.join(", "))
                }
                Some(users) if users.is_empty() => "  (per user; nobody signed in)".to_owned(),
                Some(users) => format!("  (per user; signed in: {})", users.join(", ")),
                None if signed_in(name) => "  (signed in)".to_owned(),
                None => String::new(),
            };
            outln!("{name:<16} {:<6} {}{state}{oauth}", transport_name(server), target(server));
            let ToolFilter { allow, deny } = &server.tools;
            if !allow.is_empty() {
                outln!("{:<16} allow: {}", "", allow.join(", "));
            }
            if !deny.is_empty() {
                outln!("{:<16} deny: {}", "", deny.join(", "));
            }
            if server.command.is_some() {
                outln!("{:<16} {}", "", server.sandbox.describe(name));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn transport_name(server: &ServerConfig) -> &'static str {
    match (&server.command, server.http_transport()) {
        (Some(_), _) => "stdio",
        (None, HttpTransport::Http) => "http",
        (None, HttpTransport::Sse) => "sse",
    }
}

fn target(server: &ServerConfig) -> String {
    match (&server.command, &server.url) {
        (Some(command), _) => std::iter::once(command.as_str())
            .chain(server.args.iter().map(String::as_str))
            .map(shell_word)
            .collect::<Vec<_>>()
            .join(" "),
        (None, Some(url)) => url.clone(),
        (None, None) => String::new(),
    }
}

/// A word quoted for display when it has spaces or shell metacharacters.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:@+,%".contains(&b)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn add(global: &GlobalArgs, args: AddArgs) -> anyhow::Result<ExitCode> {
    let name = args.name.clone();
    if !valid_server_name(&name) {
        bail!(
            "`{name}` cannot name an MCP server: use 1-32 letters, digits, `_` or `-` (it becomes part of tool names)"
        );
    }
    let mut server = ServerConfig { enabled: !args.disabled, prefix: args.prefix, ..ServerConfig::default() };
    server.tools = ToolFilter { allow: args.allow, deny: args.deny };
    match (args.url, args.command.split_first()) {
        (Some(url), None) => {
            server.url = Some(url);
            server.transport = match args.transport.as_deref() {
                Some("sse") => Some(HttpTransport::Sse),
                Some(_) => Some(HttpTransport::Http),
                None => None,
            };
            for header in &args.headers {
                let Some((key, value)) = header.split_once(':') else {
                    bail!("header `{header}` is not `NAME: VALUE`");
                };
                server.headers.insert(key.trim().to_owned(), value.trim().to_owned());
            }
        }
        (None, Some((command, rest))) => {
            server.command = Some(command.clone());
            server.args = rest.to_vec();
        }
        (Some(_), Some(_)) => bail!("give either `--url URL` or `-- COMMAND ARGS`, not both"),
        (None, None) => bail!("say how to reach `{name}`: `--url URL`, or `-- COMMAND ARGS` for a stdio server"),
    }
    server.sandbox = ServerSandbox {
        enabled: !args.no_sandbox,
        read: args.allow_read,
        write: args.allow_write,
        network: if args.allow_network {
            Some(ServerNetwork::Host)
        } else if !args.allow_host.is_empty() {
            Some(ServerNetwork::Proxy)
        } else {
            None
        },
        allow_hosts: args.allow_host,
    };
    for pair in &args.env {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("environment entry `{pair}` is not `NAME=VALUE`");
        };
        if key.is_empty() {
            bail!("environment entry `{pair}` has no name");
        }
        server.env.insert(key.to_owned(), value.to_owned());
    }
    if let Some(problem) = server.problem(&name) {
        bail!("{problem}");
    }
    let path = config_path(global, args.user)?;
    let mut doc = config_edit::read_document(&path)?;
    let servers = config_edit::servers_table(&mut doc, &path)?;
    if servers.contains_key(&name) && !args.force {
        bail!("{} already has an MCP server `{name}`; pass `--force` to replace it", path.display());
    }
    servers.insert(&name, toml_edit::Item::Table(config_edit::server_table(&server).map_err(anyhow::Error::msg)?));
    config_edit::write_document(&path, &doc, &Config::check_layer)?;
    outln!("added MCP server `{name}` to {}", path.display());
    outln!("its tools will appear as `{}*`; see them with `toolgate mcp tools {name}`", server.tool_name(&name, ""));
    if server.url.is_some() {
        outln!("if it needs OAuth, sign in with `toolgate mcp login {name}`");
    }
    Ok(ExitCode::SUCCESS)
}

fn remove(global: &GlobalArgs, name: &str, user: bool) -> anyhow::Result<ExitCode> {
    let path = config_path(global, user)?;
    let mut doc = config_edit::read_document(&path)?;
    if !config_edit::remove_server(&mut doc, &path, name)? {
        eprintln!("error: {} has no MCP server `{name}`; `toolgate mcp list` shows them", path.display());
        return Ok(ExitCode::from(1));
    }
    config_edit::write_document(&path, &doc, &Config::check_layer)?;
    outln!("removed MCP server `{name}` from {}", path.display());
    if let Some(vault) = existing_vault(global)?
        && oauth::logout(name, &vault)?
    {
        outln!("and forgot its OAuth tokens");
    }
    Ok(ExitCode::SUCCESS)
}

/// The file `add`/`remove` edit: `--config`, else the workspace's `toolgate.toml`, or with
/// `--user` the user's config file.
fn config_path(global: &GlobalArgs, user: bool) -> anyhow::Result<PathBuf> {
    if user {
        let sources = toolgate::config::ConfigSources::standard(&global.workspace()?, None);
        return sources
            .user_file
            .context("cannot locate the user config file: neither XDG_CONFIG_HOME nor HOME is set");
    }
    match &global.config {
        Some(file) => Ok(file.clone()),
        None => Ok(global.workspace()?.join("toolgate.toml")),
    }
}

/// The vault of the workspace's state database, when that database exists (listing and
/// logging out never create state).
fn existing_vault(global: &GlobalArgs) -> anyhow::Result<Option<StoreVault>> {
    let db = global.workspace()?.join(".toolgate/state.db");
    if !db.exists() {
        return Ok(None);
    }
    Ok(Some(StoreVault::open(&db).context("cannot open the state database")?))
}

/// The configured server `name`, or an error listing the ones there are.
fn configured(config: &Config, name: &str) -> anyhow::Result<ServerConfig> {
    match config.mcp.servers.get(name) {
        Some(server) => Ok(server.clone()),
        None => {
            let known: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
            if known.is_empty() {
                bail!("no MCP server `{name}` is configured (none is); add it with `toolgate mcp add {name} --url URL`")
            }
            bail!("no MCP server `{name}` is configured; configured: {}", known.join(", "))
        }
    }
}

async fn login(global: &GlobalArgs, name: &str, no_browser: bool, user: Option<&str>) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let server = configured(&config, name)?;
    if server.url.is_none() {
        bail!("`{name}` is a stdio server; OAuth sign-in applies to servers reached by `url`");
    }
    if server.user_key_header.is_some() {
        bail!(
            "[mcp.servers.{name}] takes each user's own key (`user_key_header`), not an OAuth sign-in: run \
             `toolgate mcp login {name} --user USER --key` with the key on stdin"
        );
    }
    let db = global.workspace()?.join(".toolgate/state.db");
    let store: Arc<dyn SecretVault> = Arc::new(StoreVault::open(&db).context("cannot open the state database")?);
    let vault = signin_vault(&config, &db, name, &server, store, user)?;
    oauth::install_crypto_provider();
    let on_url = |url: &str| {
        eprintln!("toolgate: to sign in to `{name}`, open this URL in a browser:\n\n  {url}\n");
        if !no_browser && open_browser(url) {
            eprintln!("toolgate: (opened it in your browser)");
        }
        eprintln!("toolgate: waiting for the browser to come back (up to 5 minutes; Ctrl-C cancels)...");
    };
    let outcome = oauth::login(name, &server, vault, on_url).await?;
    let how = match outcome.registration {
        oauth::Registration::PreRegistered => "the configured client ID",
        oauth::Registration::MetadataDocument => "a client ID metadata document",
        _ => "dynamic client registration",
    };
    match user {
        Some(user) => {
            outln!("signed in to `{name}` as {user} (client registered by {how}); only {user}'s calls use it")
        }
        None => outln!("signed in to `{name}` (client registered by {how})"),
    }
    if !outcome.scopes.is_empty() {
        outln!("scopes: {}", outcome.scopes.join(" "));
    }
    match (outcome.expires_in, outcome.refreshable) {
        (Some(ttl), true) => outln!("the access token lasts {} s and is refreshed automatically", ttl.as_secs()),
        (Some(ttl), false) => outln!("the access token lasts {} s; sign in again when it expires", ttl.as_secs()),
        (None, _) => {}
    }
    outln!("tokens are stored encrypted in {}", db.display());
    Ok(ExitCode::SUCCESS)
}

/// Tries `xdg-open` (Linux desktops) or `open` (macOS); says whether one started.
fn open_browser(url: &str) -> bool {
    ["xdg-open", "open"].iter().any(|program| {
        std::process::Command::new(program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .is_ok()
    })
}

fn logout(global: &GlobalArgs, name: &str, user: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut forgot_key = false;
    let forgot = match (existing_vault(global)?, user) {
        (Some(vault), Some(user)) => {
            let db = global.workspace()?.join(".toolgate/state.db");
            known_user(&db, user)?;
            let mine = oauth::UserVault::new(Arc::new(vault), user);
            forgot_key = mine.delete(&oauth::key_vault_key(name))?;
            oauth::logout(name, &mine)?
        }
        (Some(vault), None) => oauth::logout(name, &vault)?,
        (None, _) => false,
    };
    let whose = user.map(|u| format!(" for {u}")).unwrap_or_default();
    if forgot_key {
        outln!("forgot the key of `{name}`{whose}; calls that sent it stop from the next one");
    }
    if forgot_key && !forgot {
        return Ok(ExitCode::SUCCESS);
    }
    if forgot {
        outln!("forgot the OAuth tokens of `{name}`{whose}; calls that used them stop from the next one");
    } else {
        outln!("no OAuth tokens were stored for `{name}`{whose}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The most bytes of a stored key.
const MAX_KEY_BYTES: usize = 4096;

/// `toolgate mcp login NAME --user USER --key`: stores USER's own key for a server with
/// `user_key_header`, read from stdin, encrypted in the gateway's state database
/// (`mcp.user.USER.key.NAME`). The key is never printed, logged or taken from the command line.
fn store_key(global: &GlobalArgs, name: &str, user: &str) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let server = configured(&config, name)?;
    if !config.gateway.enabled {
        bail!(
            "`--key` stores a user's own key in a team gateway ([gateway] enabled = true); outside one, put the key in the server's `headers`"
        );
    }
    if server.user_key_header.is_none() {
        bail!(
            "[mcp.servers.{name}] takes no per-user key: set `user_key_header = \"Authorization\"` (the header it \
             goes in; and `user_key_prefix = \"Bearer \"` if the server wants one) in its entry first"
        );
    }
    let db = global.workspace()?.join(".toolgate/state.db");
    known_user(&db, user)?;
    let key = read_key(name, user)?;
    let store: Arc<dyn SecretVault> = Arc::new(StoreVault::open(&db).context("cannot open the state database")?);
    oauth::UserVault::new(store, user).put(&oauth::key_vault_key(name), key.as_bytes())?;
    outln!(
        "stored {user}'s key for `{name}` (encrypted in {}); only {user}'s calls send it, from their next call",
        db.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// One line of stdin, the key: not echoed on a terminal, checked to be something a header can
/// carry. The error never quotes it.
fn read_key(name: &str, user: &str) -> anyhow::Result<String> {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    let _quiet = if stdin.is_terminal() {
        eprintln!("toolgate: paste {user}'s key for `{name}` and press Enter (it is not shown):");
        Some(NoEcho::on(&stdin)?)
    } else {
        None
    };
    let mut line = String::new();
    stdin.read_line(&mut line).context("cannot read the key from stdin")?;
    let key = line.trim_end_matches(['\n', '\r']);
    if key.is_empty() {
        bail!("no key on stdin: give it as one line (`toolgate mcp login {name} --user {user} --key < key.txt`)");
    }
    check_key(key).map_err(|e| anyhow::anyhow!(e))?;
    Ok(key.to_owned())
}

/// Whether `key` is one a header can carry; the error never quotes it (the page's key form
/// checks with this too).
pub(crate) fn check_key(key: &str) -> Result<(), String> {
    if key.len() > MAX_KEY_BYTES || !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(format!(
            "the key is not one a header can carry: at most {MAX_KEY_BYTES} visible ASCII characters on one line"
        ));
    }
    Ok(())
}

/// A terminal's echo turned off until dropped (by `stty`, on the terminal that is stdin).
struct NoEcho;

impl NoEcho {
    fn on(_stdin: &std::io::Stdin) -> anyhow::Result<NoEcho> {
        let off = std::process::Command::new("stty").arg("-echo").stdin(std::process::Stdio::inherit()).status();
        match off {
            Ok(status) if status.success() => Ok(NoEcho),
            _ => {
                bail!("cannot turn the terminal's echo off (`stty -echo`); give the key on stdin from a file or a pipe")
            }
        }
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        let _ = std::process::Command::new("stty").arg("echo").stdin(std::process::Stdio::inherit()).status();
        eprintln!();
    }
}

/// Where `toolgate mcp login NAME [--user USER]` keeps the sign-in: in a team gateway, a server
/// that is not `shared` is signed in to per user (`--user` needed), a shared one server-wide;
/// outside a gateway, server-wide (`--user` refused: there are no users).
fn signin_vault(
    config: &Config,
    db: &std::path::Path,
    name: &str,
    server: &ServerConfig,
    store: Arc<dyn SecretVault>,
    user: Option<&str>,
) -> anyhow::Result<Arc<dyn SecretVault>> {
    match (config.gateway.enabled, server.shared, user) {
        (false, _, Some(_)) => {
            bail!("`--user` is for a team gateway ([gateway] enabled = true); without one, sign in without it")
        }
        (true, true, Some(_)) => bail!(
            "[mcp.servers.{name}] is `shared`: one sign-in serves every user; run `toolgate mcp login {name}` without `--user`"
        ),
        (true, false, None) => bail!(
            "in this gateway each user signs in to `{name}` for themself: run `toolgate mcp login {name} --user USER` (or set `shared = true` in [mcp.servers.{name}] for one sign-in that serves every user)"
        ),
        (true, false, Some(user)) => {
            known_user(db, user)?;
            Ok(Arc::new(oauth::UserVault::new(store, user)))
        }
        (_, _, None) => Ok(store),
    }
}

/// Refuses a name that is not an enabled user of the gateway.
fn known_user(db: &std::path::Path, user: &str) -> anyhow::Result<()> {
    use toolgate::store::{IdentityStore, PrincipalKind, Store};
    let store = Store::open(db).context("cannot open the state database")?;
    match store.principal_get(user)? {
        Some(p) if p.kind == PrincipalKind::User && !p.disabled => Ok(()),
        Some(p) if p.kind == PrincipalKind::User => {
            bail!("user `{user}` is disabled; `toolgate admin user enable {user}` first")
        }
        Some(_) => bail!("`{user}` is not a user (an agent or a group signs in through its user)"),
        None => bail!("there is no user `{user}`; add one with `toolgate admin user add {user}`"),
    }
}

/// How long `toolgate mcp tools` waits for the server's first connection.
const TOOLS_WAIT: Duration = Duration::from_secs(40);

async fn tools(global: &GlobalArgs, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let mut config = global.load_config()?;
    let mut server = configured(&config, name)?;
    // Show the tools even of a server switched off, and of no other server.
    server.enabled = true;
    config.mcp.servers = [(name.to_owned(), server)].into_iter().collect();
    let gate = Gate::builder(global.workspace()?).config(config).build()?;
    let connected = gate.connect_mcp(TOOLS_WAIT).await;
    let status = gate.mcp_status().into_iter().find(|s| s.name == name);
    gate.shutdown();
    let Some(status) = status else { bail!("the bridge did not start `{name}`") };
    match &status.state {
        ServerState::Connected => {}
        ServerState::Unavailable { error } | ServerState::Reconnecting { error, .. } => {
            eprintln!("error: MCP server `{name}` is not reachable: {error}");
            return Ok(ExitCode::from(1));
        }
        other => {
            let why =
                if connected { format!("{other:?}") } else { format!("no answer within {} s", TOOLS_WAIT.as_secs()) };
            eprintln!("error: MCP server `{name}` did not connect: {why}");
            return Ok(ExitCode::from(1));
        }
    }
    let ctx = gate.context();
    let visible: Vec<String> = gate.visible_tools(&ctx).into_iter().map(|s| s.name).collect();
    if status.tools.is_empty() && !json {
        outln!("`{name}` offers no tools (after its `tools.allow` / `tools.deny`)");
    }
    let width = status.tools.iter().map(String::len).max().unwrap_or(0);
    for tool in &status.tools {
        let Some(found) = gate.registry().resolve(tool) else { continue };
        let spec = found.tool.spec();
        let approval = !matches!(found.tool.safety(&serde_json::json!({})).approval, ApprovalRequirement::Never);
        let shown = visible.contains(tool);
        if json {
            let line = serde_json::json!({
                "name": tool,
                "visible": shown,
                "approval": approval,
                "read_only": spec.annotations.read_only,
                "description": spec.description,
            });
            outln!("{line}");
        } else {
            let mut notes = Vec::new();
            if approval {
                notes.push("asks for approval");
            }
            if !shown {
                notes.push("hidden by policy");
            }
            let notes = if notes.is_empty() { String::new() } else { format!("  [{}]", notes.join(", ")) };
            outln!("{tool:<width$}  {}{notes}", super::tools::first_sentence(&spec.description, 80));
        }
    }
    Ok(ExitCode::SUCCESS)
}
