//! `toolgate tools [--format ...]`, and what a bare `toolgate` shows.

use std::process::ExitCode;

use toolgate::core::export::{self, Provider};

use super::GlobalArgs;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Openai,
    Anthropic,
    Gemini,
    Mcp,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Output format: a table, toolgate's own JSON specs, or a provider's tool definitions.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub(crate) fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let gate = global.gate(false)?;
    let specs = gate.visible_tools(&gate.context());
    let provider = match args.format {
        Format::Text => {
            for spec in &specs {
                let first = spec.description.split(". ").next().unwrap_or_default().trim_end_matches('.');
                println!("{:<14} {:<8} {first}", spec.name, spec.group);
            }
            return Ok(ExitCode::SUCCESS);
        }
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&specs)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Openai => Provider::OpenAi,
        Format::Anthropic => Provider::Anthropic,
        Format::Gemini => Provider::Gemini,
        Format::Mcp => Provider::Mcp,
    };
    println!("{}", serde_json::to_string_pretty(&export::export_all(&specs, provider))?);
    Ok(ExitCode::SUCCESS)
}

/// A bare `toolgate`: what this is, what it would serve here, and what to try.
pub(crate) fn welcome(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let gate = global.gate(false)?;
    let specs = gate.visible_tools(&gate.context());
    println!("toolgate {} — a secure tool runtime for AI agents", env!("CARGO_PKG_VERSION"));
    println!("workspace: {}", gate.workspace().display());
    println!("state:     {}", gate.workspace().join(".toolgate/state.db").display());
    let profile =
        gate.config().tools.profile.map_or("full (the default: approvals and the sandbox protect it)", |p| p.as_str());
    println!("profile:   {profile}");
    println!("\n{} tools visible:", specs.len());
    for spec in &specs {
        println!("  {:<14} {}", spec.name, spec.group);
    }
    println!("\ntry:");
    println!("  toolgate call echo '{{\"message\":\"hi\"}}'");
    println!("  toolgate call time '{{\"operation\":\"now\"}}'");
    println!("  toolgate tools --format openai");
    println!("  toolgate audit");
    Ok(ExitCode::SUCCESS)
}
