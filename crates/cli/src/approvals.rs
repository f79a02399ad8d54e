//! `toolgate approvals list|revoke ID` (the "allow always" grants) and
//! `toolgate approvals pending|show|approve|deny|history` (the durable inbox of
//! `toolgate serve --http`, decided from this process: the serving one sees the decision).

use std::process::ExitCode;

use super::GlobalArgs;
use toolgate::approvals::{Decision, PendingApprovals};
use toolgate::store::{ApprovalFilter, ApprovalRecord, ApprovalStatus};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the "allow always" grants.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove a grant by its id (from `list`).
    Revoke {
        /// The grant's id.
        id: i64,
    },
    /// The calls waiting in the approvals inbox, newest first.
    Pending {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// One inbox entry and its history.
    Show {
        /// The entry's number (from `pending`).
        id: i64,
    },
    /// Approves an inbox entry: the waiting call runs (or its retry does).
    Approve {
        /// The entry's number (from `pending`).
        id: i64,
        /// Approve later calls with the same subject too ("allow always").
        #[arg(long)]
        always: bool,
        /// A note kept in the entry's history.
        #[arg(long, short)]
        message: Option<String>,
        /// Who decides (default: `[identity] user`).
        #[arg(long = "as", value_name = "USER")]
        by: Option<String>,
    },
    /// Denies an inbox entry; the message reaches the caller.
    Deny {
        /// The entry's number (from `pending`).
        id: i64,
        /// Why (the caller is told).
        #[arg(long, short)]
        message: Option<String>,
        /// Who decides (default: `[identity] user`).
        #[arg(long = "as", value_name = "USER")]
        by: Option<String>,
    },
    /// Inbox entries in any state, newest first.
    History {
        /// Only these states (pending, allowed, allowed_always, denied, expired); repeatable.
        #[arg(long)]
        status: Vec<String>,
        /// Only calls of this user.
        #[arg(long)]
        user: Option<String>,
        /// Only calls of this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only calls of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let (db, stores) = global.state()?;
    let store = &stores.grants;
    match command {
        Command::List { json } => {
            let grants = store.grants()?;
            if grants.is_empty() && !json {
                outln!("no standing approvals (answer \"always\" to an approval prompt to add one)");
            }
            for g in grants {
                if json {
                    outln!("{}", serde_json::to_string(&g)?);
                } else {
                    outln!("{:>4}  {:<8} {:<8} {:<12} {}", g.id, g.user, g.agent, g.tool, g.shown);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Revoke { id } => {
            if store.grant_revoke(id)? {
                outln!("revoked grant {id}");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("error: no grant with id {id}; `toolgate approvals list` shows the ids");
                Ok(ExitCode::from(1))
            }
        }
        inbox_command => inbox(global, &db, inbox_command),
    }
}

/// The inbox's commands, on the same database the server uses.
fn inbox(global: &GlobalArgs, db: &std::path::Path, command: Command) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let inbox = PendingApprovals::open(db, &config).map_err(|e| anyhow::anyhow!("{e}"))?;
    let by = |by: Option<String>| by.unwrap_or_else(|| config.identity.user.clone());
    let decide = |id: i64, decision: Decision, by: String, message: Option<String>| match inbox
        .decide(id, decision, &by, message)
    {
        Ok(record) => {
            outln!("approval {id}: {} by {by} ({} {})", record.status, record.tool, one_line(&record.shown));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(1))
        }
    };
    match command {
        Command::Pending { json } => {
            let list = inbox.find(&ApprovalFilter { status: vec![ApprovalStatus::Pending], ..Default::default() })?;
            if list.is_empty() && !json {
                outln!("no calls wait for approval");
            }
            print(&list, json)
        }
        Command::Show { id } => {
            let (record, events) = inbox.get(id)?;
            outln!("{}", serde_json::to_string_pretty(&record)?);
            for e in events {
                outln!("{}  {:<14} {:<10} {}", e.at_ms, e.kind, e.by, e.detail.unwrap_or_default());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Approve { id, always, message, by: who } => {
            let decision = if always { Decision::AllowAlways } else { Decision::AllowOnce };
            decide(id, decision, by(who), message)
        }
        Command::Deny { id, message, by: who } => decide(id, Decision::Deny, by(who), message),
        Command::History { status, user, agent, tool, limit, json } => {
            let status = status
                .iter()
                .map(|s| {
                    serde_json::from_value::<ApprovalStatus>(serde_json::Value::String(s.clone())).map_err(|_| {
                        anyhow::anyhow!("unknown state `{s}`; use pending, allowed, allowed_always, denied or expired")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let filter = ApprovalFilter { status, user, agent, tool, limit: Some(limit), ..Default::default() };
            print(&inbox.find(&filter)?, json)
        }
        grants @ (Command::List { .. } | Command::Revoke { .. }) => run(global, grants),
    }
}

fn print(list: &[ApprovalRecord], json: bool) -> anyhow::Result<ExitCode> {
    for r in list {
        if json {
            outln!("{}", serde_json::to_string(r)?);
        } else {
            let by = r.decided_by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default();
            outln!(
                "{:>5}  {:<14} {:<8} {:<8} {:<16} {}{by}",
                r.id,
                r.status.as_str(),
                r.user,
                r.agent,
                r.tool,
                one_line(&r.shown)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the approver was shown, on one line of at most 120 characters, control characters
/// (a hostile argument's terminal escapes) replaced.
fn one_line(shown: &serde_json::Value) -> String {
    let text = shown.get("params").unwrap_or(shown).to_string();
    let mut line: String = text.chars().map(|c| if c.is_control() { '?' } else { c }).take(120).collect();
    if text.chars().count() > 120 {
        line.push('…');
    }
    line
}
