//! `toolgate admin grant ...` and `toolgate admin access ...`: which tools each user, group and
//! agent of the team gateway may use, and the requests for more (`docs/gateway.md`, "Grants").
//! Run on the gateway's machine by its operator, who may decide every request.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use toolgate::gateway::{GrantInput, Grants, Narrowing};
use toolgate::store::{AccessRequest, AccessStatus, Store, Stores, ToolGrant};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum GrantCommand {
    /// Give a user, group or agent tools (toolgate's own, or with --server a bridged server's).
    Add {
        /// Who gets it: a user, a group or an agent.
        #[arg(long = "to")]
        subject: String,
        /// A bridged MCP server (`[mcp.servers.NAME]`); without it, toolgate's own tools.
        #[arg(long)]
        server: Option<String>,
        /// A tool (or `*` pattern) it covers; repeatable; none: every tool (of the server).
        #[arg(long = "tool")]
        tools: Vec<String>,
        /// A tool it never covers; repeatable; deny wins over every grant.
        #[arg(long = "deny-tool")]
        deny: Vec<String>,
        /// `allow` (default), `ask` (each call waits for a person's approval in the inbox) or
        /// `deny` (refuses the calls it covers, whatever else allows them).
        #[arg(long, default_value = "allow")]
        mode: String,
        /// An argument rule in the policy's syntax (`exec(git *)`, `read(src/**)`,
        /// `web_fetch(domain:example.com)`): the grant covers only calls it matches (with
        /// `--mode deny`: refuses only those).
        #[arg(long = "args")]
        arg_rule: Option<String>,
        /// How long it lasts: `30d`, `12h`, `90m`; default: until revoked.
        #[arg(long)]
        expires: Option<String>,
        /// The server's settings for this grant's agent, a JSON object (with --server).
        #[arg(long = "server-config")]
        config_overrides: Option<String>,
        /// Why, shown in `grant list`.
        #[arg(long, default_value = "")]
        note: String,
        /// Add it turned off.
        #[arg(long)]
        disabled: bool,
    },
    /// List the grants.
    List {
        /// Only those given to this user, group or agent.
        #[arg(long = "to")]
        subject: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove a grant: from the next request on, it does not apply.
    Revoke { id: i64 },
    /// Turn a grant on again.
    Enable { id: i64 },
    /// Turn a grant off without removing it.
    Disable { id: i64 },
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum AccessCommand {
    /// List access requests (pending ones unless --all).
    List {
        /// Every request, decided ones too.
        #[arg(long)]
        all: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Approve a request: its grant is made in the same transaction.
    Approve {
        id: i64,
        /// Grant only these tools instead of what was asked; repeatable.
        #[arg(long = "tool")]
        tools: Vec<String>,
        /// For this long only: `30d`, `12h`, `90m`.
        #[arg(long)]
        expires: Option<String>,
        /// A word for the requester.
        #[arg(long)]
        message: Option<String>,
    },
    /// Reject a request.
    Reject {
        id: i64,
        /// Why, for the requester.
        #[arg(long)]
        message: Option<String>,
    },
}

fn open(stores: &Stores) -> Grants {
    // `default_tools` plays no part in administration.
    Grants::new(Arc::clone(&stores.grants), Arc::clone(&stores.identity), Vec::new())
}

fn expiry(expires: Option<&str>) -> anyhow::Result<Option<i64>> {
    expires.map(|e| super::admin::duration_ms(e).map(|ms| super::admin::now_ms().saturating_add(ms))).transpose()
}

pub(crate) fn grant(stores: &Stores, command: GrantCommand) -> anyhow::Result<ExitCode> {
    let grants = open(stores);
    match command {
        GrantCommand::Add {
            subject,
            server,
            tools,
            deny,
            mode,
            arg_rule,
            expires,
            config_overrides,
            note,
            disabled,
        } => {
            let server_config = match config_overrides {
                Some(text) => Some(
                    serde_json::from_str(&text).context("--server-config is a JSON object (`{\"org\": \"acme\"}`)")?,
                ),
                None => None,
            };
            // The page's form and `POST /api/grants` read their fields with the same code.
            let input = GrantInput {
                to: subject,
                server,
                tools,
                deny_tools: deny,
                mode: Some(mode),
                args: arg_rule,
                expires,
                server_config,
                note,
                disabled,
            };
            let grant = input.grant(&super::admin::local_admin(), super::admin::now_ms())?;
            let id = grants.add(&grant)?;
            outln!("grant {id}: {}", describe(&grant));
        }
        GrantCommand::List { subject, json } => {
            for g in grants.list(subject.as_deref())? {
                if json {
                    outln!("{}", serde_json::to_string(&g)?);
                } else {
                    let state = match (g.enabled, g.expires_ms) {
                        (false, _) => "off",
                        (true, Some(at)) if at <= super::admin::now_ms() => "expired",
                        _ => "on",
                    };
                    outln!("{}  {state}  {}  by {}  {}", g.id, describe(&g), g.granted_by, g.note);
                }
            }
        }
        GrantCommand::Revoke { id } => {
            grants.revoke(id)?;
            outln!("revoked grant {id}");
        }
        GrantCommand::Enable { id } => {
            grants.enable(id, true)?;
            outln!("grant {id} is on");
        }
        GrantCommand::Disable { id } => {
            grants.enable(id, false)?;
            outln!("grant {id} is off");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(g: &ToolGrant) -> String {
    let tools = if g.tool_allow.is_empty() { "every tool".to_owned() } else { g.tool_allow.join(",") };
    let what = match &g.server {
        Some(server) => format!("{tools} of server {server}"),
        None => tools,
    };
    let deny = if g.tool_deny.is_empty() { String::new() } else { format!(" except {}", g.tool_deny.join(",")) };
    let rule = g.arg_rule.as_ref().map(|r| format!(" for calls matching {r}")).unwrap_or_default();
    format!("{} {} {what}{deny}{rule}", g.mode.as_str(), g.subject)
}

pub(crate) fn access(db: &Path, stores: &Stores, command: AccessCommand) -> anyhow::Result<ExitCode> {
    let grants = open(stores);
    // A decision is audited in the gateway's log, as one made on the page is.
    let grants = match &command {
        AccessCommand::List { .. } => grants,
        _ => {
            let store = Arc::new(Store::open(db).context("cannot open the state database")?);
            let audit = toolgate::store::AuditLog::direct(store, toolgate::store::AuditOptions::default())
                .context("cannot open the audit log")?;
            grants.audited_in(Arc::new(audit))
        }
    };
    match command {
        AccessCommand::List { all, json } => {
            let status = (!all).then_some(AccessStatus::Pending);
            for r in grants.requests(status, None)? {
                if json {
                    outln!("{}", toolgate::gateway::shown_request(&r));
                } else {
                    outln!("{}  {}  {}  {}: {}", r.id, r.status.as_str(), r.user, asked(&r), r.reason);
                }
            }
        }
        AccessCommand::Approve { id, tools, expires, message } => {
            let narrow =
                Narrowing { tools: (!tools.is_empty()).then_some(tools), expires_ms: expiry(expires.as_deref())? };
            let r = grants.approve(id, None, &narrow, message.as_deref())?;
            outln!("approved request {id} of {}: grant {}", r.user, r.grant_id.unwrap_or_default());
        }
        AccessCommand::Reject { id, message } => {
            let r = grants.reject(id, None, message.as_deref())?;
            outln!("rejected request {id} of {}", r.user);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn asked(r: &AccessRequest) -> String {
    match (&r.server, &r.tool) {
        (Some(s), Some(t)) => format!("{t} of server {s}"),
        (Some(s), None) => format!("server {s}"),
        (None, Some(t)) => t.clone(),
        (None, None) => "-".to_owned(),
    }
}
