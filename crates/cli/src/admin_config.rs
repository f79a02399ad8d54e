//! `toolgate admin config show|push FILE|clear`: the configuration several nodes share in the
//! PostgreSQL database (`[store] url`; `toolgate::shared_config`, docs/gateway.md "Configuration
//! on several nodes").

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use toolgate::shared_config::{MAX_BYTES, SHARED_NAMES, split};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the shared configuration stored in the database, with who stored it and when.
    Show,
    /// Store FILE's shared sections ([tools], [mcp], [gate] dialect) as the configuration every
    /// node runs, once they are checked (every node puts it in force within a second); the
    /// file's other sections are left out (they stay each node's). It REPLACES what is stored
    /// whole, by design (a change applied meanwhile through `gateway config_apply` is gone):
    /// to change one section over what is stored, use `config_apply`.
    Push {
        /// A TOML file, e.g. a toolgate.toml.
        file: PathBuf,
    },
    /// Remove the stored configuration: every node goes back to its own files' [tools], [mcp]
    /// and [gate] dialect within a second. Prints what was removed (keep it to push it back).
    Clear,
}

pub(crate) fn run(global: &GlobalArgs, command: &ConfigCommand) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let Some(shared) = global.shared_config(&config)? else {
        bail!(
            "this workspace has no `[store] url`: its configuration is its toolgate.toml alone (edit that file; \
             a running server reloads it)"
        );
    };
    match command {
        ConfigCommand::Show => {
            let (revision, stored) = shared.stored().map_err(anyhow::Error::msg)?;
            match stored {
                None => outln!("# nothing stored (revision {revision}): each node runs its own files' {SHARED_NAMES}"),
                Some(s) => {
                    let at = super::audit::chrono_like(s.changed_ms);
                    outln!("# revision {revision}, stored by {} at {at} UTC", s.changed_by.escape_debug());
                    outln!("{}", s.text.trim_end());
                }
            }
        }
        ConfigCommand::Push { file } => {
            let mut text = String::new();
            std::fs::File::open(file)
                .with_context(|| format!("cannot open {}", file.display()))?
                .take(MAX_BYTES as u64 + 1)
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read {} (is it UTF-8 text?)", file.display()))?;
            if text.len() > MAX_BYTES {
                bail!("{} is over {MAX_BYTES} bytes: push only the shared sections", file.display());
            }
            let (sections, others) = split(&text).map_err(|e| anyhow::anyhow!("{} is {e}", file.display()))?;
            if sections.is_empty() {
                bail!("{} has none of the shared sections ({SHARED_NAMES}): nothing to store", file.display());
            }
            let by = format!("{} (toolgate admin config push)", std::env::var("USER").unwrap_or_else(|_| "?".into()));
            let revision = shared
                .put(&sections, &by)
                .map_err(|e| anyhow::anyhow!("not stored, every node keeps the configuration it has: {e}"))?;
            outln!("stored as revision {revision}: every node puts it in force as it hears of it");
            if !others.is_empty() {
                outln!("left out (each node's own, in its toolgate.toml): {}", others.join(", "));
            }
        }
        ConfigCommand::Clear => match shared.clear().map_err(anyhow::Error::msg)? {
            (revision, None) => {
                outln!(
                    "# nothing was stored (revision {revision}): each node already runs its own files' {SHARED_NAMES}"
                );
            }
            (revision, Some(s)) => {
                let at = super::audit::chrono_like(s.changed_ms);
                outln!(
                    "# cleared (now revision {revision}): every node goes back to its own files' {SHARED_NAMES}; this \
                     was stored by {} at {at} UTC:",
                    s.changed_by.escape_debug()
                );
                outln!("{}", s.text.trim_end());
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
