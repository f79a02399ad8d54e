//! `toolgate nodes`: pair this node with other `toolgate serve` instances, which the `nodes`
//! tool then reaches (`toolgate_nodes`). Pairings are kept sealed in the workspace's state
//! (shared by every node on one database when `[store] url` and `TOOLGATE_SECRET_KEY` are set).

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use toolgate::nodes::Pairings;

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Pair with the node serving MCP at URL (`https://host/mcp`), called with its API key
    /// (`toolgate admin key create --user NAME` on that node). Without `--key`, the key is read
    /// from stdin, so it stays out of the process list and the shell's history.
    Add {
        name: String,
        url: String,
        #[arg(long)]
        key: Option<String>,
    },
    /// The paired nodes and their URLs (never their keys).
    List,
    /// Unpair a node.
    Remove { name: String },
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let (_, stores) = global.state()?;
    let pairings = Pairings::new(Arc::clone(&stores.secrets));
    match command {
        Command::Add { name, url, key } => {
            let key = match key {
                Some(key) => key,
                None => {
                    let mut line = String::new();
                    std::io::stdin().lock().read_line(&mut line).context("cannot read the key from stdin")?;
                    line.trim().to_owned()
                }
            };
            pairings.add(&name, &url, &key)?;
            outln!("paired with node {name} at {url}; the `nodes` tool reaches it (`nodes status` checks it)");
        }
        Command::List => {
            let all = pairings.list()?;
            if all.is_empty() {
                outln!("no paired nodes (`toolgate nodes add NAME URL` pairs one)");
            }
            for p in all {
                outln!("{:<20} {}", p.name, p.url);
            }
        }
        Command::Remove { name } => {
            if !pairings.remove(&name)? {
                eprintln!("error: no node `{name}` is paired; `toolgate nodes list` shows them");
                return Ok(ExitCode::from(1));
            }
            outln!("unpaired node {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
