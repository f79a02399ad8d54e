//! toolgate's `media` tool family (ARCHITECTURE.md, "Adding a tool family"; `docs/media.md`):
//!
//! | tool | does |
//! |---|---|
//! | `image` | `info`, `resize`, `crop`, `convert` (PNG, JPEG, WebP) locally; `generate` and `describe` through configured endpoints |
//! | `audio` | `transcribe` through an OpenAI-compatible `/v1/audio/transcriptions` endpoint |
//! | `video` | `info` (ffprobe) and `frames` (ffmpeg) so `image describe` can look at a video |
//! | `tts` | speech from text to a file: `espeak-ng` (offline, the default), OpenAI, ElevenLabs, MiniMax |
//!
//! The tools are made by [`tools`] from a [`Setup`] the `toolgate` facade fills from its
//! services: the file tools' confinement (`toolgate_tools::fs::FsState`: every path read or
//! written goes through it), the SSRF-safe fetcher (`toolgate-fetch`: every provider request),
//! the secrets store (keys), and the sandbox policy (`toolgate-sandbox`: `espeak-ng`, `sox`,
//! `ffmpeg` and `ffprobe` run there, without a shell or network, in a private scratch folder;
//! they never see the workspace).
//!
//! # Layout
//!
//! - `config`: [`MediaConfig`], `[media]`.
//! - `host`: confined reads and writes, keys, provider requests, programs in the sandbox.
//! - `raster`: image decoding with caps checked from the header first, encoding, image blocks.
//! - `image_tool`, `av` (`audio`, `video`), `tts`: one module per tool; `wav`: PCM and WAV.
//!
//! # Example
//!
//! ```
//! use toolgate_media::{MediaConfig, Setup, tools};
//!
//! let fs = toolgate_tools::fs::FsState::new_shared(Default::default()).expect("default fs config");
//! let fetcher = toolgate_fetch::Fetcher::new(Default::default()).expect("default fetch policy");
//! let media = tools(&Setup::new(MediaConfig::default(), fs, fetcher));
//! let names: Vec<&str> = media.iter().map(|t| t.spec().name.as_str()).collect();
//! assert_eq!(names, ["image", "audio", "video", "tts"]);
//! ```

#![deny(missing_docs)]

mod av;
mod config;
mod host;
mod image_tool;
mod raster;
mod tts;
mod wav;

use std::sync::Arc;

use toolgate_core::Tool;
use toolgate_fetch::Fetcher;
use toolgate_sandbox::SandboxPolicy;
use toolgate_tools::custom::{NoSecrets, SecretSource};
use toolgate_tools::fs::FsState;

pub use config::{Endpoint, MediaConfig, TtsConfig};

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[media]` configuration section.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// `[media]`.
    pub config: MediaConfig,
    /// The file tools' confinement and rules: every path goes through it.
    pub fs: Arc<FsState>,
    /// The SSRF-safe fetcher every provider request goes through.
    pub fetcher: Fetcher,
    /// Where a key not in the environment is looked up (the encrypted secrets store).
    pub secrets: Arc<dyn SecretSource>,
    /// The template of the programs' sandbox: its limits and fallback setting (`[runtime.sandbox]`).
    pub sandbox: SandboxPolicy,
}

impl Setup {
    /// A setup without stored secrets and with the default sandbox policy.
    pub fn new(config: MediaConfig, fs: Arc<FsState>, fetcher: Fetcher) -> Setup {
        Setup { config, fs, fetcher, secrets: Arc::new(NoSecrets), sandbox: SandboxPolicy::default() }
    }

    /// Looks keys up in `secrets` when the environment does not have them.
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretSource>) -> Setup {
        self.secrets = secrets;
        self
    }

    /// Runs the programs with `sandbox`'s mode limits and fallback (its workspace is replaced).
    pub fn with_sandbox(mut self, sandbox: SandboxPolicy) -> Setup {
        self.sandbox = sandbox;
        self
    }
}

/// The family's tools: `image`, `audio`, `video`, `tts`.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let host = Arc::new(host::Host::new(setup));
    vec![
        Arc::new(image_tool::ImageTool::new(Arc::clone(&host))),
        Arc::new(av::AudioTool::new(Arc::clone(&host))),
        Arc::new(av::VideoTool::new(Arc::clone(&host))),
        Arc::new(tts::TtsTool::new(host)),
    ]
}
