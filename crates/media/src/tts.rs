//! `tts`: speech from text to a file in the workspace. Providers: `espeak-ng` (local, offline,
//! the default), OpenAI `/v1/audio/speech`, ElevenLabs `/v1/text-to-speech/{voice_id}`, MiniMax
//! `/v1/t2a_v2`. Each is asked for raw 16-bit PCM, so the pieces of long text are joined as
//! samples and wrapped as WAV; other formats are converted by `sox` (FLAC, Ogg Vorbis) or
//! `ffmpeg` (MP3) when installed. Edge's read-aloud voices have no published API: refused.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches, async_trait,
};
use toolgate_fetch::Request;

use crate::config::Endpoint;
use crate::host::{Host, scratch};
use crate::image_tool::{unix_millis, url_host};
use crate::wav::{self, PcmFormat};

const NAME: &str = "tts";

const EDGE_REFUSAL: &str = "the `edge` provider is not supported: Microsoft Edge's read-aloud voices are served by an \
     undocumented endpoint with no published API or terms for other programs, and toolgate implements providers only \
     against documented interfaces. Use `espeak-ng` (offline), `openai`, `elevenlabs` or `minimax`";

/// The `tts` tool.
#[derive(Debug)]
pub(crate) struct TtsTool {
    spec: ToolSpec,
    host: Arc<Host>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Espeak,
    OpenAi,
    ElevenLabs,
    MiniMax,
}

impl TtsTool {
    pub(crate) fn new(host: Arc<Host>) -> TtsTool {
        let max = host.config.tts.max_chars;
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Speak text into an audio file in the workspace. provider: espeak-ng (local, offline; the \
                 default unless configured otherwise), openai, elevenlabs or minimax (when configured). format: \
                 wav (default), flac, ogg or mp3. voice: provider-specific (espeak-ng: a language such as `en`, \
                 `en-us`, `de`, `fr+f3`). At most {max} characters; long text is split and joined."
            ),
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "description": "What to say"},
                    "voice": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The voice (provider-specific)"},
                    "format": {"type": "string", "enum": ["wav", "flac", "ogg", "mp3"], "description": "Audio format (default wav)"},
                    "provider": {"type": "string", "enum": ["espeak-ng", "openai", "elevenlabs", "minimax", "edge"]},
                    "output": {"type": "string", "minLength": 1, "description": "Where to write the file (default speech/tts-<time>.<format>)"},
                    "overwrite": {"type": "boolean", "description": "Replace `output` if it exists (default false)"}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        )
        .group("media")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: true });
        TtsTool { spec, host }
    }

    fn provider(&self, params: &Value) -> Result<Provider, ToolError> {
        let name = params["provider"].as_str().unwrap_or(&self.host.config.tts.provider);
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "espeak-ng" | "espeak" | "local" => Provider::Espeak,
            "openai" => Provider::OpenAi,
            "elevenlabs" => Provider::ElevenLabs,
            "minimax" => Provider::MiniMax,
            "edge" => return Err(ToolError::failed(EDGE_REFUSAL)),
            other => {
                return Err(ToolError::invalid(
                    NAME,
                    "/provider",
                    format!("unknown provider `{other}`; use espeak-ng, openai, elevenlabs or minimax"),
                ));
            }
        })
    }

    fn endpoint(&self, provider: Provider) -> Result<Endpoint, ToolError> {
        let tts = &self.host.config.tts;
        let (e, section, doc) = match provider {
            Provider::OpenAi => (&tts.openai, "openai", "https://api.openai.com/v1/audio/speech"),
            Provider::ElevenLabs => (&tts.elevenlabs, "elevenlabs", "https://api.elevenlabs.io/v1/text-to-speech"),
            Provider::MiniMax => (&tts.minimax, "minimax", "https://api.minimax.io/v1/t2a_v2"),
            Provider::Espeak => return Err(ToolError::failed("espeak-ng has no endpoint")),
        };
        e.clone().ok_or_else(|| {
            ToolError::failed(format!(
                "the {section} provider is not configured: set `[media.tts.{section}] url` (e.g. `{doc}`) and \
                 `api_key_env`, or use provider `espeak-ng` (offline)"
            ))
        })
    }
}

#[async_trait]
impl Tool for TtsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let mut touches = Touches::default();
        touches.writes.push(params["output"].as_str().unwrap_or("speech/").to_owned());
        let remote = self.provider(params).ok().filter(|p| *p != Provider::Espeak);
        if let Some(e) = remote.and_then(|p| self.endpoint(p).ok()) {
            touches.hosts.push(url_host(&e.url));
        }
        CallSafety {
            rate_class: if remote.is_some() { RateClass::Http } else { RateClass::default() },
            touches,
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let text = params["text"].as_str().unwrap_or_default();
        let chars = text.chars().count();
        let max = self.host.config.tts.max_chars;
        if text.trim().is_empty() {
            return Err(ToolError::invalid(NAME, "/text", "the text is empty"));
        }
        if chars > max {
            return Err(ToolError::invalid(
                NAME,
                "/text",
                format!(
                    "the text is {chars} characters, over the {max}-character limit of one call ([media.tts] \
                     max_chars); split it into several calls, each to its own file"
                ),
            ));
        }
        let provider = self.provider(&params)?;
        let format = params["format"].as_str().unwrap_or("wav");
        if !matches!(format, "wav" | "flac" | "ogg" | "mp3") {
            return Err(ToolError::invalid(NAME, "/format", "use wav, flac, ogg or mp3"));
        }
        let converter = match format {
            "wav" => None,
            "mp3" => Some("ffmpeg"),
            _ => Some("sox"),
        };
        if let Some(program) = converter.filter(|p| !self.host.has(p)) {
            return Err(ToolError::failed(format!(
                "writing {format} needs `{program}`, which is not installed; install it (`cargo xtask deps`) or \
                 use format wav"
            )));
        }
        let voice = params["voice"].as_str().or(self.host.config.tts.voice.as_deref()).map(str::to_owned);
        let work = scratch()?;
        let (pcm, pcm_format, chunks, voice_used) = match provider {
            Provider::Espeak => self.espeak(ctx, text, voice, work.path()).await?,
            _ => self.remote(ctx, provider, text, voice).await?,
        };
        let mut audio = wav::wrap(&pcm, pcm_format)?;
        if let Some(program) = converter {
            let input = work.path().join("speech.wav");
            std::fs::write(&input, &audio)
                .map_err(|e| ToolError::failed(format!("cannot write a scratch file: {e}")))?;
            let out_name = format!("speech.{format}");
            let args: Vec<String> = match program {
                "sox" => vec!["speech.wav".into(), out_name.clone()],
                _ => {
                    ["-v", "error", "-nostdin", "-i", "speech.wav", "-y", out_name.as_str()].map(String::from).to_vec()
                }
            };
            self.host.run(ctx, program, args, work.path()).await?;
            audio = std::fs::read(work.path().join(&out_name))
                .map_err(|e| ToolError::failed(format!("`{program}` wrote no {format} file: {e}")))?;
        }
        let output = match params["output"].as_str() {
            Some(o) => o.to_owned(),
            None => format!("speech/tts-{}.{format}", unix_millis()),
        };
        let written = self.host.write(ctx, NAME, &output, &audio, params["overwrite"].as_bool().unwrap_or(false))?;
        let bytes_per_second = f64::from(pcm_format.rate) * f64::from(pcm_format.channels) * 2.0;
        let seconds = pcm.len() as f64 / bytes_per_second.max(1.0);
        let provider_name = match provider {
            Provider::Espeak => "espeak-ng",
            Provider::OpenAi => "openai",
            Provider::ElevenLabs => "elevenlabs",
            Provider::MiniMax => "minimax",
        };
        let text = format!(
            "Wrote `{written}` ({}, {seconds:.1} s, {} Hz, {} bytes) with {provider_name} voice `{voice_used}` \
             ({chunks} {}).",
            format.to_ascii_uppercase(),
            pcm_format.rate,
            audio.len(),
            if chunks == 1 { "piece" } else { "pieces" }
        );
        Ok(ToolOutput::text(text).with_meta(json!({
            "path": written, "format": format, "seconds": (seconds * 10.0).round() / 10.0, "bytes": audio.len(),
            "provider": provider_name, "voice": voice_used, "chunks": chunks
        })))
    }
}

type Speech = (Vec<u8>, PcmFormat, usize, String);

impl TtsTool {
    /// espeak-ng reads the text from a file (never the command line, so no text is an option)
    /// and writes WAV; one run takes the whole text.
    async fn espeak(
        &self,
        ctx: &CallContext,
        text: &str,
        voice: Option<String>,
        dir: &std::path::Path,
    ) -> Result<Speech, ToolError> {
        let voice = voice.unwrap_or_else(|| "en".into());
        let valid = !voice.is_empty()
            && voice.len() <= 40
            && voice.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
            && !voice.starts_with('-');
        if !valid {
            return Err(ToolError::invalid(
                NAME,
                "/voice",
                format!(
                    "`{}` is not an espeak-ng voice; use a language code such as en, en-us, de, fr, optionally \
                     with a variant (en+f3)",
                    voice.chars().take(40).collect::<String>()
                ),
            ));
        }
        std::fs::write(dir.join("text.txt"), text)
            .map_err(|e| ToolError::failed(format!("cannot write a scratch file: {e}")))?;
        let args = ["-v", voice.as_str(), "-w", "espeak.wav", "-f", "text.txt"].map(String::from).to_vec();
        let no_voice = || {
            ToolError::invalid(
                NAME,
                "/voice",
                format!("espeak-ng has no voice `{voice}`; list them with `espeak-ng --voices`"),
            )
        };
        let result = self.host.run(ctx, "espeak-ng", args, dir).await.map_err(|e| match e {
            ToolError::ExecutionFailed { message } if message.contains("voice does not exist") => no_voice(),
            other => other,
        })?;
        let out = result.output.text();
        if out.contains("voice does not exist") {
            return Err(no_voice());
        }
        let bytes = std::fs::read(dir.join("espeak.wav"))
            .map_err(|_| ToolError::failed(format!("espeak-ng wrote no audio (voice `{voice}`): {}", out.trim())))?;
        let (format, pcm) = wav::unwrap(&bytes)?;
        Ok((pcm.to_vec(), format, 1, voice))
    }

    /// One request per chunk, each answered with 16-bit PCM, joined in order.
    async fn remote(
        &self,
        ctx: &CallContext,
        provider: Provider,
        text: &str,
        voice: Option<String>,
    ) -> Result<Speech, ToolError> {
        let endpoint = self.endpoint(provider)?;
        let service = match provider {
            Provider::OpenAi => "OpenAI speech",
            Provider::ElevenLabs => "ElevenLabs",
            _ => "MiniMax speech",
        };
        let key = self.host.key(service, &endpoint)?;
        let voice = match (provider, voice) {
            (_, Some(v)) => v,
            (Provider::OpenAi, None) => "alloy".into(),
            (Provider::MiniMax, None) => "English_Graceful_Lady".into(),
            (_, None) => {
                return Err(ToolError::invalid(
                    NAME,
                    "/voice",
                    "ElevenLabs needs a `voice` (a voice id, e.g. JBFqnCBsd6RMkjVDRZzb)",
                ));
            }
        };
        if !voice.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(ToolError::invalid(NAME, "/voice", "a voice is letters, digits, `-`, `_` and `.` only"));
        }
        let pieces = chunks(text, self.host.config.tts.chunk_chars.max(100));
        let format = match provider {
            Provider::OpenAi => PcmFormat { rate: 24_000, channels: 1 },
            Provider::ElevenLabs => PcmFormat { rate: 22_050, channels: 1 },
            _ => PcmFormat { rate: 32_000, channels: 1 },
        };
        let cap = self.host.config.max_output_bytes;
        let mut pcm = Vec::new();
        for piece in &pieces {
            let (url, body, auth) = match provider {
                Provider::OpenAi => (
                    endpoint.url.clone(),
                    json!({"model": endpoint.model.as_deref().unwrap_or("gpt-4o-mini-tts"), "input": piece,
                           "voice": voice, "response_format": "pcm"}),
                    key.as_ref().map(|k| ("Authorization", format!("Bearer {k}"))),
                ),
                Provider::ElevenLabs => (
                    format!("{}/{voice}?output_format=pcm_22050", endpoint.url.trim_end_matches('/')),
                    json!({"text": piece, "model_id": endpoint.model.as_deref().unwrap_or("eleven_multilingual_v2")}),
                    key.as_ref().map(|k| ("xi-api-key", k.clone())),
                ),
                _ => (
                    endpoint.url.clone(),
                    json!({"model": endpoint.model.as_deref().unwrap_or("speech-02-hd"), "text": piece, "stream": false,
                           "voice_setting": {"voice_id": voice, "speed": 1, "vol": 1, "pitch": 0},
                           "audio_setting": {"sample_rate": 32000, "format": "pcm", "channel": 1},
                           "output_format": "hex"}),
                    key.as_ref().map(|k| ("Authorization", format!("Bearer {k}"))),
                ),
            };
            let mut req = Request::get(url).header("Content-Type", "application/json");
            req.method = "POST".into();
            req.body = Some(body.to_string().into_bytes());
            if let Some((name, value)) = auth {
                req = req.header(name, value);
            }
            let resp = self.host.send(ctx, service, req, key.as_deref(), cap.saturating_mul(2)).await?;
            let audio = if provider == Provider::MiniMax {
                minimax_audio(&resp.body, key.as_deref())?
            } else {
                resp.body.to_vec()
            };
            if audio.len() % 2 != 0 && provider != Provider::MiniMax {
                return Err(ToolError::ExternalService {
                    service: service.into(),
                    message: "the answer is not 16-bit PCM (odd length); check the endpoint".into(),
                });
            }
            pcm.extend_from_slice(&audio);
            if pcm.len() as u64 > cap {
                return Err(ToolError::failed(format!(
                    "the speech is over {cap} bytes ([media] max_output_bytes); speak less text per call"
                )));
            }
        }
        Ok((pcm, format, pieces.len(), voice))
    }
}

/// MiniMax's `t2a_v2` answer: `base_resp.status_code` 0 and `data.audio` in hex.
fn minimax_audio(body: &[u8], key: Option<&str>) -> Result<Vec<u8>, ToolError> {
    let service = "MiniMax speech";
    let v: Value = serde_json::from_slice(body).map_err(|_| ToolError::ExternalService {
        service: service.into(),
        message: "the answer is not JSON".into(),
    })?;
    let code = v["base_resp"]["status_code"].as_i64().unwrap_or(0);
    if code != 0 {
        let msg: String = v["base_resp"]["status_msg"].as_str().unwrap_or("no message").chars().take(200).collect();
        return Err(ToolError::ExternalService {
            service: service.into(),
            message: format!("status {code}: {}", crate::host::scrub(&msg, key)),
        });
    }
    let hex = v["data"]["audio"].as_str().ok_or_else(|| ToolError::ExternalService {
        service: service.into(),
        message: "the answer has no `data.audio`".into(),
    })?;
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let bytes = hex.as_bytes();
    if bytes.len() % 4 != 0 {
        return Err(ToolError::ExternalService {
            service: service.into(),
            message: "`data.audio` is not hex-encoded 16-bit PCM".into(),
        });
    }
    bytes.chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect::<Option<Vec<u8>>>().ok_or_else(|| {
        ToolError::ExternalService { service: service.into(), message: "`data.audio` is not hex".into() }
    })
}

/// `text` split into pieces of at most `max` characters, at a sentence end when there is one
/// in the second half of the piece, else at a space, else anywhere.
pub(crate) fn chunks(text: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = text.trim().chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let end = (start + max).min(chars.len());
        let mut cut = end;
        if end < chars.len() {
            let window = &chars[start..end];
            let half = window.len() / 2;
            let at = |pred: &dyn Fn(char) -> bool| window.iter().rposition(|c| pred(*c)).filter(|i| *i >= half);
            if let Some(i) = at(&|c| matches!(c, '.' | '!' | '?' | '。' | '\n')).or_else(|| at(&char::is_whitespace)) {
                cut = start + i + 1;
            }
        }
        let piece: String = chars[start..cut].iter().collect();
        if !piece.trim().is_empty() {
            out.push(piece.trim().to_owned());
        }
        start = cut;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_at_sentences_and_keep_every_word() {
        let text = "One two three. Four five six! Seven eight nine ten eleven twelve. ".repeat(50);
        let pieces = chunks(&text, 120);
        assert!(pieces.iter().all(|p| p.chars().count() <= 120));
        assert!(pieces.iter().all(|p| p.ends_with(['.', '!'])), "{pieces:?}");
        let joined: String = pieces.join(" ");
        assert_eq!(joined.split_whitespace().count(), text.split_whitespace().count());
        let long_word = "x".repeat(250);
        assert_eq!(chunks(&long_word, 100).len(), 3);
    }

    #[test]
    fn minimax_hex_and_errors() {
        let ok = br#"{"data":{"audio":"0100ff7f","status":2},"base_resp":{"status_code":0,"status_msg":"success"}}"#;
        assert_eq!(minimax_audio(ok, None).ok(), Some(vec![1, 0, 0xff, 0x7f]));
        let bad = br#"{"base_resp":{"status_code":1004,"status_msg":"login fail: key sk-secret-1234"}}"#;
        let e = minimax_audio(bad, Some("sk-secret-1234")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("1004") && !e.contains("sk-secret-1234"), "{e}");
    }
}
