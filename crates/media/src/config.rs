//! `[media]`: provider endpoints and the caps of the local operations.

use serde::{Deserialize, Serialize};

/// `[media]` in `toolgate.toml`. Every provider is off until its URL is set; keys come from the
/// environment variable its `api_key_env` names, else from the secrets store under that name,
/// never from the configuration text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediaConfig {
    /// Most pixels (width × height, read from the header) an image may have before it is decoded.
    pub max_image_pixels: u64,
    /// Largest input file (image, audio, video) read from the workspace, in bytes.
    pub max_input_bytes: u64,
    /// Largest file a media tool writes to the workspace, in bytes.
    pub max_output_bytes: u64,
    /// Largest image sent to the model as an image block (base64 bytes); bigger ones are scaled
    /// down for the block (the file keeps its size).
    pub max_block_bytes: u64,
    /// Most seconds an external program (espeak-ng, sox, ffmpeg, ffprobe) may run.
    pub program_timeout_secs: u64,
    /// `image generate`: an OpenAI-compatible `/v1/images/generations` endpoint.
    pub generate: Option<Endpoint>,
    /// `image describe`: an OpenAI-compatible `/v1/chat/completions` endpoint with a
    /// vision-capable model.
    pub describe: Option<Endpoint>,
    /// `audio transcribe`: an OpenAI-compatible `/v1/audio/transcriptions` endpoint.
    pub transcribe: Option<Endpoint>,
    /// `[media.tts]`.
    pub tts: TtsConfig,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            max_image_pixels: 40_000_000,
            max_input_bytes: 100 * 1024 * 1024,
            max_output_bytes: 50 * 1024 * 1024,
            max_block_bytes: 1024 * 1024,
            program_timeout_secs: 120,
            generate: None,
            describe: None,
            transcribe: None,
            tts: TtsConfig::default(),
        }
    }
}

/// One provider endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// The full URL of the endpoint (e.g. `https://api.openai.com/v1/images/generations`).
    pub url: String,
    /// The model (or, for ElevenLabs, the `model_id`); the provider's default when unset.
    #[serde(default)]
    pub model: Option<String>,
    /// The environment variable (else stored secret) holding the key; no key is sent when unset.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// `[media.tts]`: the default provider and each provider's endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TtsConfig {
    /// `espeak-ng` (default, offline), `openai`, `elevenlabs` or `minimax`.
    pub provider: String,
    /// The voice when the call names none (provider-specific; espeak-ng: `en`).
    pub voice: Option<String>,
    /// Most characters of text in one call (longer text is refused).
    pub max_chars: usize,
    /// Most characters sent to a provider (or espeak-ng) at once: longer text is split at
    /// sentence and word boundaries and the pieces joined.
    pub chunk_chars: usize,
    /// OpenAI `/v1/audio/speech`.
    pub openai: Option<Endpoint>,
    /// ElevenLabs `/v1/text-to-speech/{voice_id}` (the URL up to and without the voice id).
    pub elevenlabs: Option<Endpoint>,
    /// MiniMax `/v1/t2a_v2`.
    pub minimax: Option<Endpoint>,
}

impl Default for TtsConfig {
    fn default() -> Self {
        TtsConfig {
            provider: "espeak-ng".into(),
            voice: None,
            max_chars: 100_000,
            chunk_chars: 2_000,
            openai: None,
            elevenlabs: None,
            minimax: None,
        }
    }
}
