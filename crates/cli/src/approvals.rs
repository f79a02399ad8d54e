//! `toolgate approvals list|revoke ID`.

use std::process::ExitCode;

use anyhow::Context;
use toolgate::store::Store;

use super::GlobalArgs;
use toolgate::store::GrantStore;

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
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let db = global.workspace()?.join(".toolgate/state.db");
    let store = Store::open(&db).context("cannot open the state database")?;
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
    }
}
