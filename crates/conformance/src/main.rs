//! `toolgate-conformance`: what the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`) drives, kept out of the `toolgate` binary. Test-only:
//! never published, never a dependency of anything (`cargo xtask tidy` checks both).
//!
//! - `toolgate-conformance [--workspace DIR] serve --http ADDR`: a gate over the workspace served
//!   over Streamable HTTP at `http://ADDR/mcp` with the suite's fixtures beside its tools
//!   (`fixtures.rs`, through `toolgate_mcp::ExtraFeatures`), and **no bearer token** (the suite
//!   cannot send headers), so it binds loopback addresses only (`serve.rs`);
//! - `toolgate-conformance client URL`: one client scenario (`MCP_CONFORMANCE_SCENARIO`) against
//!   `URL` with toolgate's MCP bridge as the client (`client.rs`), for
//!   `conformance client --command "toolgate-conformance client"`.
//!
//! The tests in `tests/it` run the suite against both and judge its checks against
//! `tests/baseline.toml` (docs/mcp-conformance.md).

mod client;
mod fixtures;
mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// The MCP conformance suite's server and client for toolgate. For the suite only.
#[derive(Debug, Parser)]
#[command(name = "toolgate-conformance", about, long_about = None)]
struct Cli {
    /// The workspace the served gate is confined to (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a gate plus the suite's fixtures at http://ADDR/mcp, without a bearer token
    /// (loopback addresses only).
    Serve {
        /// The address to listen on (a loopback address; port 0 picks a free one).
        #[arg(long, value_name = "ADDR")]
        http: SocketAddr,
    },
    /// Run one client scenario (`MCP_CONFORMANCE_SCENARIO`, with `MCP_CONFORMANCE_CONTEXT`)
    /// against URL through toolgate's bridge.
    Client {
        /// The scenario server's URL (the suite passes it last).
        url: String,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolgate-conformance: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The bridge's and the server's log (`TOOLGATE_LOG`, default warn) on stderr: the suite keeps
    // each client scenario's stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(std::io::stderr).try_init();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { http } => {
                let dir = match cli.workspace {
                    Some(dir) => dir,
                    None => std::env::current_dir().context("cannot read the current directory")?,
                };
                let workspace = std::fs::canonicalize(&dir)
                    .with_context(|| format!("workspace {} does not exist", dir.display()))?;
                serve::run(&workspace, http).await
            }
            Command::Client { url } => {
                let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
                let context = std::env::var("MCP_CONFORMANCE_CONTEXT").ok();
                client::run(&url, &scenario, context.as_deref()).await?;
                Ok(())
            }
        }
    });
    // As the `toolgate` binary does: do not wait for blocking threads once the work is done.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}
