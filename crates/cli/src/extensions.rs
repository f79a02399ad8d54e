//! `toolgate tools add|remove|secret|custom`: custom shell-template tools kept in the store
//! (`.toolgate/state.db`, or the shared database with `[store] url`), beside those in
//! `[[tools.custom]]`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use toolgate::extensions::{SECRET_PREFIX, add_custom_tool};
use toolgate::tools::custom::valid_secret_name;

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Add (or replace) a custom tool from a JSON definition (`docs/extensions.md`).
    Add {
        /// The definition: name, description, parameters, command, timeout_seconds, workdir, env,
        /// agent, enabled.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
    /// Remove a custom tool added with `add`.
    Remove {
        /// The tool's name.
        name: String,
    },
    /// List the custom tools added with `add` (those in toolgate.toml are listed by `tools`).
    Custom,
    /// Store a secret for custom tools' `env` or a web search API key (`[web.search]
    /// api_key_env`), read from standard input (encrypted at rest, never printed).
    Secret {
        /// The secret's name, as written in a definition's `env` values.
        name: String,
        /// Remove the secret instead.
        #[arg(long)]
        delete: bool,
    },
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    // The areas the server reads: with `[store] url`, custom tools (and, with the shared key,
    // secrets) are in the shared database every node loads them from.
    let (_, stores) = global.state()?;
    let (store, secrets) = (&*stores.custom_tools, &*stores.secrets);
    match command {
        Command::Add { file } => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let def = add_custom_tool(store, &text).with_context(|| format!("{} was not added", file.display()))?;
            // Build the whole gate once, so a name clash with a built-in or a config tool
            // is found now rather than when the server starts.
            if let Err(e) = global.gate(false) {
                store.custom_tool_delete(&def.name)?;
                return Err(e.context(format!("`{}` was not added", def.name)));
            }
            outln!("added custom tool `{}`: {}", def.name, def.command);
            announce(global);
            let missing: Vec<&str> = def
                .env
                .values()
                .filter(|s| matches!(secrets.secret_get(&format!("{SECRET_PREFIX}{s}")), Ok(None)))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                outln!(
                    "store its secrets before calling it: toolgate tools secret NAME < value-file ({})",
                    missing.join(", ")
                );
            }
        }
        Command::Remove { name } => {
            if !store.custom_tool_delete(&name)? {
                bail!("no custom tool `{name}` in the store (tools in toolgate.toml are removed by editing the file)");
            }
            outln!("removed custom tool `{name}`");
            announce(global);
        }
        Command::Custom => {
            for t in store.custom_tools()? {
                outln!("{}", t.definition);
            }
        }
        Command::Secret { name, delete } => {
            if !valid_secret_name(&name) {
                bail!("secret names are 1 to 128 of a-z, A-Z, 0-9, `_`, `-`, `.`");
            }
            let key = format!("{SECRET_PREFIX}{name}");
            if delete {
                secrets.secret_delete(&key)?;
                outln!("removed secret `{name}`");
                return Ok(ExitCode::SUCCESS);
            }
            let mut value = String::new();
            std::io::stdin().read_to_string(&mut value).context("cannot read the secret from standard input")?;
            let value = value.strip_suffix('\n').unwrap_or(&value);
            if value.is_empty() || value.contains('\0') {
                bail!("the secret is empty or contains a NUL byte; pipe its value on standard input");
            }
            secrets.secret_put(&key, value.as_bytes())?;
            outln!("stored secret `{name}` ({} bytes, encrypted)", value.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Lets a running `toolgate serve` pick the change up (it watches the stamp).
fn announce(global: &GlobalArgs) {
    let announced = global
        .workspace()
        .and_then(|ws| toolgate::extensions::announce_custom_tools_changed(&ws).map_err(anyhow::Error::from));
    if let Err(e) = announced {
        tracing::debug!("cannot announce the change to a running server: {e}");
    }
}
