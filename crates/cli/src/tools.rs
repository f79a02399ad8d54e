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
    /// Instead: the tools of the dialect's system (`--dialect`) that toolgate does not have
    /// here, each with the reason.
    #[arg(long, conflicts_with = "format")]
    missing: bool,
    /// Custom tools in the store: `add --file def.json`, `remove`, `custom`, `secret`.
    #[command(subcommand)]
    action: Option<super::extensions::Command>,
}

pub(crate) async fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(action) = args.action {
        return super::extensions::run(global, action);
    }
    let gate = global.gate(false)?;
    super::wasm::load(&gate).await;
    // Bridged MCP servers (each one's first attempt, bounded): a server that does not come up
    // is logged and left out.
    if !gate.connect_mcp(MCP_LIST_WAIT).await {
        eprintln!(
            "toolgate: some MCP servers did not connect within {} s; their tools are not listed",
            MCP_LIST_WAIT.as_secs()
        );
    }
    gate.shutdown();
    let ctx = gate.context();
    if args.missing {
        let dialect = gate.dialect(&ctx);
        let missing = dialect.missing(gate.registry());
        if dialect.is_default() {
            outln!(
                "the `toolgate` dialect is toolgate's own tools: nothing is missing (choose a system with --dialect NAME)"
            );
        } else if missing.is_empty() {
            outln!("every tool of the {} dialect ({}) is here", dialect.name(), dialect.system());
        }
        for (name, reason) in missing {
            outln!("{name:<20} {reason}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let specs = gate.visible_tools(&ctx);
    let provider = match args.format {
        Format::Text => {
            for spec in &specs {
                outln!("{:<14} {:<8} {}", spec.name, spec.group, first_sentence(&spec.description, 100));
            }
            return Ok(ExitCode::SUCCESS);
        }
        Format::Json => {
            outln!("{}", serde_json::to_string_pretty(&specs)?);
            return Ok(ExitCode::SUCCESS);
        }
        Format::Openai => Provider::OpenAi,
        Format::Anthropic => Provider::Anthropic,
        Format::Gemini => Provider::Gemini,
        Format::Mcp => Provider::Mcp,
    };
    outln!("{}", serde_json::to_string_pretty(&export::export_all(&specs, provider))?);
    Ok(ExitCode::SUCCESS)
}

/// How long `toolgate tools` waits for MCP servers.
const MCP_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(40);

/// A bare `toolgate`: what this is and what it serves here; the caller then starts the server.
pub(crate) fn welcome(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let gate = global.gate(false)?;
    let specs = gate.visible_tools(&gate.context());
    let profile =
        gate.config().tools.profile.map_or("full (the default: approvals and the sandbox protect it)", |p| p.as_str());
    eprintln!("toolgate {} — a secure tool runtime for AI agents", env!("CARGO_PKG_VERSION"));
    eprintln!("workspace: {}", gate.workspace().display());
    eprintln!("state:     {}", gate.workspace().join(".toolgate/state.db").display());
    eprintln!("profile:   {profile}");
    eprintln!("\n{} tools visible:", specs.len());
    for spec in &specs {
        eprintln!("  {:<13} {:<8} {}", spec.name, spec.group, first_sentence(&spec.description, 70));
    }
    let servers: Vec<&str> =
        gate.config().mcp.servers.iter().filter(|(_, s)| s.enabled).map(|(n, _)| n.as_str()).collect();
    if servers.is_empty() {
        eprintln!("\nno MCP servers bridged in (add one: toolgate mcp add NAME --url URL | -- COMMAND ARGS)");
    } else {
        eprintln!("\nbridging MCP servers: {} (their tools join as mcp__NAME__*)", servers.join(", "));
    }
    eprintln!("\nfrom another terminal:");
    eprintln!("  toolgate call echo '{{\"message\":\"hi\"}}'        one call through the whole pipeline");
    eprintln!("  toolgate tools --format openai                 the tools as OpenAI function definitions");
    eprintln!("  toolgate audit                                 what was called, decided and returned");
    eprintln!("  toolgate serve                                 MCP over stdio, for a client that starts it\n");
    Ok(ExitCode::SUCCESS)
}

/// The first sentence of a description (up to the first line break, or the first ". " that
/// does not end "e.g." or "i.e."), at most `max` characters.
pub(crate) fn first_sentence(description: &str, max: usize) -> String {
    let line = description.lines().next().unwrap_or_default();
    let end = line
        .match_indices(". ")
        .map(|(i, _)| i)
        .find(|&i| !line[..i].ends_with("e.g") && !line[..i].ends_with("i.e"))
        .unwrap_or(line.len());
    let sentence = line[..end].trim_end_matches('.');
    if sentence.chars().count() <= max {
        sentence.to_owned()
    } else {
        let cut: String = sentence.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}
