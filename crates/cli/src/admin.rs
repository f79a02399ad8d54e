//! `toolgate admin user|group|agent|key ...`: who may use this workspace's team gateway
//! (`docs/gateway.md`).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use toolgate::gateway::{Admin, KeyScope};
use toolgate::store::{IdentityStore, PrincipalKind};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Users: people (and service accounts) with keys of their own.
    #[command(subcommand)]
    User(UserCommand),
    /// Groups of users.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Agents: programs acting for a user or a group, with keys of their own.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// API keys for MCP clients and agents.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Grants: which tools (toolgate's own, or a bridged server's) a user, group or agent may use.
    #[command(subcommand)]
    Grant(super::admin_grants::GrantCommand),
    /// Access requests: approve (the grant is made) or reject.
    #[command(subcommand)]
    Access(super::admin_grants::AccessCommand),
    /// Local sign-in passwords for the gateway's page (argon2id; one machine, no OIDC needed).
    #[command(subcommand)]
    Password(PasswordCommand),
    /// The configuration several nodes share in the database (`[store] url`): show it, push a
    /// file's shared sections (replacing it whole), or clear it (back to each node's files).
    #[command(subcommand)]
    Config(super::admin_config::ConfigCommand),
    /// Move this (stopped) node's state into the PostgreSQL database several nodes will share:
    /// users, keys, grants, secrets, routines, custom tools, the outbox, the audit log with its
    /// hash chain, approvals, access requests, agent sessions, teams, jobs and memory
    /// (docs/gateway.md, "Moving a node's state"). The target must be a database no node has
    /// used yet.
    Migrate {
        /// `sqlite:PATH`: a workspace folder, or its `.toolgate/state.db`.
        #[arg(long)]
        from: String,
        /// `postgres://user@host/database` (the `[store] url` the nodes will use).
        #[arg(long)]
        to: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum PasswordCommand {
    /// Set user NAME's page password, read from stdin (one line, at least 12 characters);
    /// only admins may sign in to the page.
    Set { name: String },
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum UserCommand {
    /// Add a user.
    Add {
        /// Its name (letters, digits, `. _ - @`).
        name: String,
        /// Put it in this group (made when missing); repeatable.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Let it administer the gateway.
        #[arg(long)]
        admin: bool,
    },
    /// List the users.
    List,
    /// Refuse a user's keys until enabled again.
    Disable { name: String },
    /// Accept a disabled user's keys again.
    Enable { name: String },
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum GroupCommand {
    /// Add a group.
    Add { name: String },
    /// List the groups.
    List,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// Add an agent owned by a user or a group.
    Add {
        name: String,
        /// Its owner.
        #[arg(long)]
        owner: String,
    },
    /// List the agents.
    List,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeyCommand {
    /// Make an API key; it is printed once and kept only as a digest.
    Create {
        /// The user it acts as.
        #[arg(long, conflicts_with = "agent", required_unless_present = "agent")]
        user: Option<String>,
        /// The agent it acts as (instead of a user).
        #[arg(long)]
        agent: Option<String>,
        /// How long it works: `30d`, `12h`, `90m`; default: until revoked.
        #[arg(long)]
        expires: Option<String>,
        /// The only tools it may list and call (names or `*` patterns); repeatable.
        #[arg(long = "tool")]
        tools: Vec<String>,
        /// The only addresses it may be used from (`10.0.0.0/8`, `127.0.0.1`); repeatable.
        #[arg(long = "from")]
        sources: Vec<String>,
        /// What it is for, shown in `key list`.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// List the keys (never their secrets).
    List {
        /// Only this user's or agent's.
        #[arg(long)]
        user: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by its id: the next request with it is refused.
    Revoke { id: String },
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    // Before the state is opened: the workspace's own `[store]` is not the target yet.
    if let Command::Migrate { from, to } = &command {
        return migrate(from, to);
    }
    if let Command::Config(c) = &command {
        return super::admin_config::run(global, c);
    }
    let (db, stores) = global.state()?;
    let store: Arc<dyn IdentityStore> = Arc::clone(&stores.identity);
    let admin = Admin::new(Arc::clone(&store));
    match command {
        Command::Migrate { from, to } => return migrate(&from, &to),
        Command::Config(c) => return super::admin_config::run(global, &c),
        Command::Grant(c) => return super::admin_grants::grant(&stores, c),
        Command::Access(c) => return super::admin_grants::access(&db, &stores, c),
        Command::Password(PasswordCommand::Set { name }) => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                eprintln!("toolgate: type the new password for {name} and press Enter (it is shown as typed):");
            }
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).context("cannot read the password from stdin")?;
            let password = line.trim_end_matches(['\n', '\r']);
            toolgate::gateway::set_password(store.as_ref(), &name, password)?;
            outln!("set the page password of {name}");
        }
        Command::User(UserCommand::Add { name, groups, admin: is_admin }) => {
            admin.user_add(&name, is_admin, &groups)?;
            let groups = if groups.is_empty() { String::new() } else { format!(" in {}", groups.join(", ")) };
            outln!("added user {name}{groups}; make its key with `toolgate admin key create --user {name}`");
        }
        Command::User(UserCommand::List) => list(&admin, PrincipalKind::User)?,
        Command::User(UserCommand::Disable { name }) => {
            admin.set_disabled(&name, true)?;
            outln!("disabled {name}: its keys are refused from the next request");
        }
        Command::User(UserCommand::Enable { name }) => {
            admin.set_disabled(&name, false)?;
            outln!("enabled {name}");
        }
        Command::Group(GroupCommand::Add { name }) => {
            admin.group_add(&name)?;
            outln!("added group {name}");
        }
        Command::Group(GroupCommand::List) => list(&admin, PrincipalKind::Group)?,
        Command::Agent(AgentCommand::Add { name, owner }) => {
            admin.agent_add(&name, &owner)?;
            outln!("added agent {name} for {owner}; make its key with `toolgate admin key create --agent {name}`");
        }
        Command::Agent(AgentCommand::List) => list(&admin, PrincipalKind::Agent)?,
        Command::Key(KeyCommand::Create { user, agent, expires, tools, sources, note }) => {
            let principal = user.or(agent).context("name the key's --user or --agent")?;
            let expires_ms = expires.as_deref().map(duration_ms).transpose()?.map(|ms| now_ms() + ms);
            let scope = KeyScope { tools, sources, ..KeyScope::default() };
            let key = admin.key_create(&principal, &scope, expires_ms, &note, &local_admin())?;
            eprintln!("toolgate: API key {} for {principal}; it is shown only this once:", key.record.id);
            outln!("{}", key.text.reveal());
        }
        Command::Key(KeyCommand::List { user, json }) => {
            let keys = admin.keys(user.as_deref())?;
            if keys.is_empty() && !json {
                outln!("no API keys (`toolgate admin key create --user NAME` makes one)");
            }
            let now = now_ms();
            for k in keys {
                let state = match (k.revoked_ms, k.expires_ms) {
                    (Some(_), _) => "revoked",
                    (None, Some(at)) if at <= now => "expired",
                    _ => "active",
                };
                if json {
                    let mut row = serde_json::json!({
                        "id": k.id, "principal": k.principal, "state": state, "scope": k.scope,
                        "created_ms": k.created_ms, "created_by": k.created_by, "expires_ms": k.expires_ms,
                        "revoked_ms": k.revoked_ms, "last_used_ms": k.last_used_ms, "note": k.note,
                    });
                    if let Some(o) = row.as_object_mut() {
                        o.retain(|_, v| !v.is_null());
                    }
                    outln!("{row}");
                } else {
                    outln!("{}  {:<16} {:<8} {}", k.id, k.principal, state, k.note);
                }
            }
        }
        Command::Key(KeyCommand::Revoke { id }) => {
            admin.key_revoke(&id)?;
            outln!("revoked key {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list(admin: &Admin, kind: PrincipalKind) -> anyhow::Result<()> {
    for p in admin.list(Some(kind))? {
        let mut notes = Vec::new();
        if p.admin {
            notes.push("admin".to_owned());
        }
        if p.disabled {
            notes.push("disabled".to_owned());
        }
        if let Some(owner) = &p.owner {
            notes.push(format!("owner {owner}"));
        }
        if kind == PrincipalKind::User {
            let groups: Vec<String> = admin.groups_of(&p.name)?.into_iter().map(|m| m.group).collect();
            if !groups.is_empty() {
                notes.push(format!("groups {}", groups.join(",")));
            }
        }
        outln!("{}  {}", p.name, notes.join("  "));
    }
    Ok(())
}

/// Who runs `toolgate admin` on this machine: the local account (recorded as a key's maker).
pub(crate) fn local_admin() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .map_or_else(|| "local-admin".to_owned(), |u| format!("local:{u}"))
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `30d`, `12h`, `90m`, `45s` in milliseconds.
pub(crate) fn duration_ms(text: &str) -> anyhow::Result<i64> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: i64 = number.parse().ok().filter(|n| *n > 0).with_context(|| {
        format!("`{text}` is not a duration: write a positive number and a unit, like `30d`, `12h` or `90m`")
    })?;
    let unit_ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        "s" => 1_000,
        _ => bail!("`{text}` is not a duration: the unit is d, h, m or s (`30d`, `12h`, `90m`)"),
    };
    n.checked_mul(unit_ms).context("that duration is too long")
}

/// `toolgate admin migrate --from sqlite:PATH --to postgres://...`.
fn migrate(from: &str, to: &str) -> anyhow::Result<ExitCode> {
    let Some(path) = from.strip_prefix("sqlite:") else {
        bail!("--from {from:?}: expected sqlite:PATH (a workspace folder, or its .toolgate/state.db)");
    };
    let path = std::fs::canonicalize(path).with_context(|| format!("--from: {path} does not exist"))?;
    let (db, workspace) = if path.is_dir() {
        (path.join(".toolgate/state.db"), path)
    } else {
        // `WS/.toolgate/state.db`: the workspace is two folders up.
        let workspace = path.parent().and_then(std::path::Path::parent).map(std::path::Path::to_path_buf);
        (path.clone(), workspace.with_context(|| format!("--from: {} is not in a workspace", path.display()))?)
    };
    let moved = toolgate::migrate::to_postgres(&db, &workspace, to)?;
    outln!("moved {moved} from {} into the shared database", db.display());
    for (what, why) in toolgate::migrate::NOT_MOVED {
        outln!("not moved: {what} ({why})");
    }
    outln!(
        "now give every node `[store] url` for that database (and {} if secrets were moved), with the workspace at {}",
        toolgate::store::SECRET_KEY_ENV,
        workspace.display()
    );
    Ok(ExitCode::SUCCESS)
}
