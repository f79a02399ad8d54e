//! `toolgate wasm install|list|remove|inspect`: a person installs WASM tools and grants their
//! capabilities here (an agent never can: no tool installs or grants).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use toolgate::wasm::{Capabilities, InstalledTool};
use toolgate_wasm::{EndpointPattern, HttpCapability, SecretsCapability, WorkspaceCapability};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Install a component (`tool.wasm`) as the tool `wasm__NAME`. Capabilities come from the
    /// sidecar `NAME.capabilities.json` beside it (or `--capabilities FILE`) plus the flags.
    Install {
        /// The component file.
        file: PathBuf,
        /// The name to install it under (default: the name it describes).
        #[arg(long)]
        name: Option<String>,
        /// A capability file to use instead of the sidecar.
        #[arg(long, value_name = "FILE")]
        capabilities: Option<PathBuf>,
        /// Allow HTTPS to HOST, or HOST/PATH-PREFIX (repeatable).
        #[arg(long = "allow-http", value_name = "HOST[/PREFIX]")]
        allow_http: Vec<String>,
        /// Allow reading workspace files under PATH (`docs/`, `./` for all) (repeatable).
        #[arg(long = "allow-read", value_name = "PATH")]
        allow_read: Vec<String>,
        /// Allow asking whether the secret NAME (or `PREFIX*`) exists (repeatable).
        #[arg(long = "secret", value_name = "NAME")]
        secrets: Vec<String>,
        /// The user's tools (`$TOOLGATE_DATA_DIR`, `$XDG_DATA_HOME/toolgate` or
        /// `~/.local/share/toolgate`), loaded in every workspace, instead of this workspace's.
        #[arg(long)]
        user: bool,
    },
    /// List the installed WASM tools.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// The user's tools (`$TOOLGATE_DATA_DIR`, `$XDG_DATA_HOME/toolgate` or
        /// `~/.local/share/toolgate`), loaded in every workspace, instead of this workspace's.
        #[arg(long)]
        user: bool,
    },
    /// Remove an installed tool.
    Remove {
        /// The installed name.
        name: String,
        /// The user's tools (`$TOOLGATE_DATA_DIR`, `$XDG_DATA_HOME/toolgate` or
        /// `~/.local/share/toolgate`), loaded in every workspace, instead of this workspace's.
        #[arg(long)]
        user: bool,
    },
    /// Show what a tool is, what it was granted, and whether its file is intact.
    Inspect {
        /// The installed name.
        name: String,
        /// The user's tools (`$TOOLGATE_DATA_DIR`, `$XDG_DATA_HOME/toolgate` or
        /// `~/.local/share/toolgate`), loaded in every workspace, instead of this workspace's.
        #[arg(long)]
        user: bool,
    },
}

/// Loads the workspace's installed WASM tools into the gate; one that fails is reported and
/// left out (a changed file, a component that no longer compiles).
pub(crate) async fn load(gate: &std::sync::Arc<toolgate::Gate>) {
    let report = toolgate::wasm::load_tools(gate).await;
    for (name, error) in report.failed {
        eprintln!("toolgate: WASM tool `{name}` not loaded: {error}");
    }
    for warning in report.warnings {
        eprintln!("toolgate: warning: {warning}");
    }
}

pub(crate) async fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    let user = match &command {
        Command::Install { user, .. }
        | Command::List { user, .. }
        | Command::Remove { user, .. }
        | Command::Inspect { user, .. } => *user,
    };
    let installer = if user {
        let dir =
            toolgate::wasm::user_dir().context("no user data folder: set TOOLGATE_DATA_DIR, XDG_DATA_HOME or HOME")?;
        toolgate::wasm::user_installer(&dir)?
    } else {
        toolgate::wasm::installer(&global.workspace()?)?
    };
    match command {
        Command::Install { file, name, capabilities, allow_http, allow_read, secrets, .. } => {
            let mut caps = toolgate::wasm::read_capabilities(&file, name.as_deref(), capabilities.as_deref())
                .map_err(anyhow::Error::msg)?;
            add_flags(&mut caps, &allow_http, &allow_read, &secrets)?;
            let installed = installer.install(&file, name.as_deref(), caps).await?;
            outln!("installed `wasm__{}` ({} bytes, BLAKE3 {})", installed.name, installed.size, installed.hash);
            print_details(&installed);
            Ok(ExitCode::SUCCESS)
        }
        Command::List { json, .. } => {
            let list = installer.list()?;
            if list.is_empty() && !json {
                outln!("no WASM tools installed (`toolgate wasm install FILE` adds one)");
            }
            for t in list {
                if json {
                    outln!("{}", serde_json::to_string(&t)?);
                } else {
                    let grants = t.capabilities.summary();
                    let grants = if grants.is_empty() { "no capabilities".to_owned() } else { grants.join("; ") };
                    outln!("wasm__{:<20} {:<10} {}", t.name, &t.hash[..10.min(t.hash.len())], grants);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Remove { name, .. } => {
            let removed = installer.remove(&name)?;
            outln!("removed `wasm__{}`", removed.name);
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { name, .. } => {
            let t = installer.get(&name)?;
            outln!("wasm__{}", t.name);
            print_details(&t);
            match installer.verify(&t) {
                Ok(()) => {
                    outln!("integrity: ok (BLAKE3 {})", t.hash);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    outln!("integrity: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

fn print_details(t: &InstalledTool) {
    outln!("  file: {}", t.file.display());
    outln!("  description: {}", t.description);
    outln!("  parameters: {}", t.input_schema);
    let grants = t.capabilities.summary();
    if grants.is_empty() {
        outln!("  capabilities: none");
    }
    for g in grants {
        outln!("  capability: {g}");
    }
}

fn add_flags(caps: &mut Capabilities, http: &[String], read: &[String], secrets: &[String]) -> anyhow::Result<()> {
    for spec in http {
        let (host, prefix) = match spec.split_once('/') {
            Some((h, p)) => (h.to_owned(), Some(format!("/{p}"))),
            None => (spec.clone(), None),
        };
        let pattern = EndpointPattern { host, path_prefix: prefix, methods: Vec::new() };
        caps.http.get_or_insert_with(HttpCapability::default).allow.push(pattern);
    }
    for path in read {
        caps.workspace.get_or_insert_with(WorkspaceCapability::default).read.push(path.clone());
    }
    for s in secrets {
        caps.secrets.get_or_insert_with(SecretsCapability::default).exists.push(s.clone());
    }
    caps.validate()?;
    Ok(())
}
