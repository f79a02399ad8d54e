//! `toolgate sandbox status [--json]`: what this machine can enforce, and how `exec` commands
//! will run in this workspace with the `[runtime.sandbox]` configuration.

use std::io::Write;
use std::process::ExitCode;

use toolgate::tools::runtime::{Sandbox, sandbox_status};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// What this machine can enforce (Landlock, seccomp, namespaces, process limits) and how
    /// commands run here with the configured mode.
    Status(StatusArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let Command::Status(args) = command;
    let config = global.load_config()?;
    let workspace = global.workspace()?;
    let machine = sandbox_status();
    let configured = &config.runtime.sandbox;
    // Building the sandbox is exactly what the first `exec` call does: it either says how
    // commands will run, or why they will be refused.
    let built = Sandbox::new(configured.policy(&workspace));
    let mut text: String;
    if args.json {
        let (enforcement, error) = match &built {
            Ok(s) => (serde_json::to_value(s.enforcement())?, serde_json::Value::Null),
            Err(e) => (serde_json::Value::Null, serde_json::Value::String(e.to_string())),
        };
        let out = serde_json::json!({
            "machine": machine,
            "configured": {
                "mode": configured.mode,
                "network": configured.network,
                "allow_unsandboxed_fallback": configured.allow_unsandboxed_fallback,
            },
            "workspace": workspace,
            "enforcement": enforcement,
            "error": error,
        });
        text = serde_json::to_string_pretty(&out)? + "\n";
    } else {
        text = format!("{machine}\n");
        text += &format!(
            "configured:  {} mode, network {}{} ([runtime.sandbox])\n",
            configured.mode,
            configured.network,
            if configured.allow_unsandboxed_fallback { ", unsandboxed fallback allowed" } else { "" }
        );
        text += &format!("workspace:   {}\n", workspace.display());
        match &built {
            Ok(s) => text += &format!("commands:    {}\n", s.enforcement()),
            Err(e) => text += &format!("commands:    REFUSED: {e}\n"),
        }
    }
    // A closed pipe (`| head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(if built.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
