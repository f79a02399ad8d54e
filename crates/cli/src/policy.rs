//! `toolgate policy explain TOOL [--depth N] [--params JSON]`.

use std::process::ExitCode;

use anyhow::Context;

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Why a tool is visible or hidden for this caller, and what policy decides about a call.
    Explain(ExplainArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    /// The tool (aliases work).
    tool: String,
    /// Sub-agent depth of the caller (0 = the main agent).
    #[arg(long, default_value_t = 0)]
    depth: u32,
    /// Parameters of a call to check against argument rules, as JSON.
    #[arg(long, value_name = "JSON")]
    params: Option<String>,
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let Command::Explain(args) = command;
    let gate = global.gate(false)?;
    let params = args.params.as_deref().map(serde_json::from_str).transpose().context("--params is not valid JSON")?;
    let ctx = gate.context().with_depth(args.depth);
    for warning in gate.policy_warnings() {
        eprintln!("warning: {warning}");
    }
    match gate.explain(&ctx, &args.tool, params) {
        Ok(text) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
