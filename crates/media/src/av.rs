//! `audio` (`transcribe`, an OpenAI-compatible `/v1/audio/transcriptions` endpoint) and `video`
//! (`info` with ffprobe, `frames` with ffmpeg). The video is copied into the call's scratch
//! folder and the programs run there in the sandbox; only container demuxers are allowed
//! (`-format_whitelist`) and only local files (`-protocol_whitelist file`), so a playlist
//! (HLS, concat) cannot make ffmpeg read another file or reach the network.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, Content, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};
use toolgate_fetch::Request;

use crate::host::{Host, scratch};
use crate::image_tool::{unix_millis, url_host};
use crate::raster::{self, Caps, Format};

/// The demuxers ffmpeg may use: containers and raw streams, no playlists or file lists.
const DEMUXERS: &str =
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,flv,mpegts,mpeg,ogg,gif,h264,hevc,mjpeg,wav,mp3,aac,flac";

/// The `audio` tool.
#[derive(Debug)]
pub(crate) struct AudioTool {
    spec: ToolSpec,
    host: Arc<Host>,
}

impl AudioTool {
    pub(crate) fn new(host: Arc<Host>) -> AudioTool {
        let spec = ToolSpec::new(
            "audio",
            "Audio files in the workspace. action `transcribe`: the speech in `path` as text, from the configured \
             transcription model (language: an ISO-639-1 hint; prompt: spelling hints).",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["transcribe"]},
                    "path": {"type": "string", "minLength": 1, "description": "The audio file, relative to the workspace"},
                    "language": {"type": "string", "pattern": "^[a-z]{2,3}$"},
                    "prompt": {"type": "string", "maxLength": 1000}
                },
                "required": ["action", "path"],
                "additionalProperties": false
            }),
        )
        .group("media")
        .annotations(Annotations { read_only: true, destructive: false, idempotent: true, open_world: true });
        AudioTool { spec, host }
    }
}

#[async_trait]
impl Tool for AudioTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let mut touches = Touches::default();
        touches.reads.extend(params["path"].as_str().map(str::to_owned));
        touches.hosts.extend(self.host.config.transcribe.as_ref().map(|e| url_host(&e.url)));
        CallSafety { rate_class: RateClass::Http, read_only: true, touches, ..CallSafety::default() }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        if params["action"].as_str() != Some("transcribe") {
            return Err(ToolError::invalid("audio", "/action", "use action `transcribe`"));
        }
        let path = params["path"].as_str().unwrap_or_default();
        let Some(endpoint) = self.host.config.transcribe.clone() else {
            return Err(ToolError::failed(
                "transcription is not configured: set `[media.transcribe] url` (an OpenAI-compatible \
                 /v1/audio/transcriptions endpoint), `model` and `api_key_env`",
            ));
        };
        let audio = self.host.read(ctx, path)?;
        let key = self.host.key("transcription", &endpoint)?;
        let file_name: String = path
            .rsplit('/')
            .next()
            .unwrap_or("audio")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .take(100)
            .collect();
        let mut fields = vec![
            ("model", endpoint.model.clone().unwrap_or_else(|| "whisper-1".into())),
            ("response_format", "json".to_owned()),
        ];
        fields.extend(params["language"].as_str().map(|l| ("language", l.to_owned())));
        fields.extend(params["prompt"].as_str().map(|p| ("prompt", p.to_owned())));
        let (content_type, body) = multipart(&fields, if file_name.is_empty() { "audio" } else { &file_name }, &audio);
        let mut req = Request::get(endpoint.url.clone()).header("Content-Type", content_type);
        req.method = "POST".into();
        req.body = Some(body);
        if let Some(k) = &key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let service = "transcription";
        let resp = self.host.send(ctx, service, req, key.as_deref(), 4 << 20).await?;
        let answer: Value = serde_json::from_slice(&resp.body).map_err(|_| ToolError::ExternalService {
            service: service.into(),
            message: "the answer is not JSON".into(),
        })?;
        let Some(text) = answer["text"].as_str() else {
            return Err(ToolError::ExternalService {
                service: service.into(),
                message: "the answer has no `text`".into(),
            });
        };
        Ok(ToolOutput::text(format!("Transcript of `{path}`:\n{}", text.trim()))
            .with_meta(json!({"path": path, "chars": text.chars().count()})))
    }
}

/// A `multipart/form-data` body: the text fields, then the file. The boundary is checked
/// against the content, so no field can end the part early.
fn multipart(fields: &[(&str, String)], file_name: &str, file: &[u8]) -> (String, Vec<u8>) {
    let mut n = unix_millis();
    let boundary = loop {
        let b = format!("toolgate-media-{n:x}");
        let found = |hay: &[u8]| hay.windows(b.len()).any(|w| w == b.as_bytes());
        if !found(file) && !fields.iter().any(|(_, v)| found(v.as_bytes())) {
            break b;
        }
        n = n.wrapping_mul(31).wrapping_add(7);
    };
    let mut body = Vec::with_capacity(file.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\nContent-Type: \
             application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The `video` tool.
#[derive(Debug)]
pub(crate) struct VideoTool {
    spec: ToolSpec,
    host: Arc<Host>,
}

impl VideoTool {
    pub(crate) fn new(host: Arc<Host>) -> VideoTool {
        let spec = ToolSpec::new(
            "video",
            "Video files in the workspace (needs ffmpeg). action `info`: duration, streams, size. `frames`: save \
             `count` frames evenly spread (or at the `at` seconds) as PNG files under `output` (a folder, default \
             `<name>-frames/`) and show them; `image` action `describe` can then describe a frame.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["info", "frames"]},
                    "path": {"type": "string", "minLength": 1, "description": "The video, relative to the workspace"},
                    "count": {"type": "integer", "minimum": 1, "maximum": 16, "description": "frames: how many (default 4)"},
                    "at": {"type": "array", "items": {"type": "number", "minimum": 0}, "maxItems": 16, "description": "frames: times in seconds"},
                    "width": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "frames: largest width (default 1024)"},
                    "output": {"type": "string", "minLength": 1, "description": "frames: the folder to write into"},
                    "overwrite": {"type": "boolean"}
                },
                "required": ["action", "path"],
                "additionalProperties": false
            }),
        )
        .group("media")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: true, open_world: false });
        VideoTool { spec, host }
    }

    /// ffprobe's JSON for the video copied into `dir` as `input`.
    async fn probe(&self, ctx: &CallContext, dir: &std::path::Path) -> Result<Value, ToolError> {
        let args = [
            "-v",
            "error",
            "-format_whitelist",
            DEMUXERS,
            "-protocol_whitelist",
            "file",
            "-print_format",
            "json",
            "-show_format",
            "-show_streams",
            "input",
        ]
        .map(String::from)
        .to_vec();
        let result = self.host.run(ctx, "ffprobe", args, dir).await.map_err(|e| not_a_video(e, "ffprobe"))?;
        let out = result.output.text();
        let start = out.find('{').unwrap_or(0);
        serde_json::from_str(&out[start..])
            .map_err(|_| ToolError::failed("ffprobe's answer could not be read; is this a video file?"))
    }
}

fn not_a_video(e: ToolError, program: &str) -> ToolError {
    match e {
        ToolError::ExecutionFailed { message } if message.starts_with(&format!("`{program}` failed")) => {
            ToolError::failed(format!(
                "this is not a video ffmpeg can read, or its container is not allowed (playlists and file lists are \
                 refused): {message}"
            ))
        }
        other => other,
    }
}

#[async_trait]
impl Tool for VideoTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let mut touches = Touches::default();
        touches.reads.extend(params["path"].as_str().map(str::to_owned));
        let frames = params["action"].as_str() == Some("frames");
        if frames {
            touches.writes.push(params["output"].as_str().unwrap_or("(beside the video)").to_owned());
        }
        CallSafety { read_only: !frames, touches, ..CallSafety::default() }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let act = params["action"].as_str().unwrap_or_default();
        if !matches!(act, "info" | "frames") {
            return Err(ToolError::invalid("video", "/action", "use action `info` or `frames`"));
        }
        let path = params["path"].as_str().unwrap_or_default().to_owned();
        if !self.host.has("ffprobe") || !self.host.has("ffmpeg") {
            return Err(ToolError::failed(
                "the video tool needs ffmpeg and ffprobe, which are not installed; install them (Debian: `apt-get \
                 install ffmpeg`, or `cargo xtask deps`)",
            ));
        }
        let bytes = self.host.read(ctx, &path)?;
        let work = scratch()?;
        std::fs::write(work.path().join("input"), &bytes)
            .map_err(|e| ToolError::failed(format!("cannot copy the video to a scratch folder: {e}")))?;
        drop(bytes);
        let info = self.probe(ctx, work.path()).await?;
        let duration: f64 = info["format"]["duration"].as_str().and_then(|d| d.parse().ok()).unwrap_or(0.0);
        let streams = info["streams"].as_array().cloned().unwrap_or_default();
        let video = streams.iter().find(|s| s["codec_type"] == "video");
        let Some(video) = video else {
            return Err(ToolError::failed(format!("`{path}` has no video stream")));
        };
        let (w, h) = (video["width"].as_u64().unwrap_or(0), video["height"].as_u64().unwrap_or(0));
        let summary = format!(
            "`{path}`: {} container, {duration:.2} s, video {} {w}×{h} at {} fps{}.",
            info["format"]["format_name"].as_str().unwrap_or("?"),
            video["codec_name"].as_str().unwrap_or("?"),
            video["avg_frame_rate"].as_str().unwrap_or("?"),
            streams
                .iter()
                .find(|s| s["codec_type"] == "audio")
                .map(|a| format!(
                    ", audio {} {} Hz",
                    a["codec_name"].as_str().unwrap_or("?"),
                    a["sample_rate"].as_str().unwrap_or("?")
                ))
                .unwrap_or_default()
        );
        let meta = json!({"path": path, "duration": duration, "width": w, "height": h,
                          "codec": video["codec_name"], "format": info["format"]["format_name"]});
        if act == "info" {
            return Ok(ToolOutput::text(summary).with_meta(meta));
        }
        let times: Vec<f64> = match params["at"].as_array() {
            Some(at) if !at.is_empty() => at.iter().filter_map(Value::as_f64).collect(),
            _ => {
                let count = params["count"].as_u64().unwrap_or(4).clamp(1, 16);
                (0..count).map(|i| (i as f64 + 0.5) * duration / count as f64).collect()
            }
        };
        if let Some(t) = times.iter().find(|t| **t > duration && duration > 0.0) {
            return Err(ToolError::invalid("video", "/at", format!("{t} s is past the end ({duration:.2} s)")));
        }
        let width = params["width"].as_u64().unwrap_or(1024).clamp(16, 4096);
        let stem = path.rsplit('/').next().unwrap_or("video").split('.').next().unwrap_or("video");
        let dir = params["output"].as_str().map(str::to_owned).unwrap_or_else(|| match path.rsplit_once('/') {
            Some((d, _)) => format!("{d}/{stem}-frames"),
            None => format!("{stem}-frames"),
        });
        let overwrite = params["overwrite"].as_bool().unwrap_or(false);
        let mut content = vec![Content::Text { text: String::new() }];
        let mut written = Vec::new();
        let budget = self.host.config.max_block_bytes / times.len().max(1) as u64;
        for (i, t) in times.iter().enumerate() {
            let name = format!("frame-{:02}.png", i + 1);
            let args = vec![
                "-v".into(),
                "error".into(),
                "-nostdin".into(),
                "-format_whitelist".into(),
                DEMUXERS.into(),
                "-protocol_whitelist".into(),
                "file".into(),
                "-ss".into(),
                format!("{t:.3}"),
                "-i".into(),
                "input".into(),
                "-frames:v".into(),
                "1".into(),
                "-vf".into(),
                format!("scale='min({width},iw)':-2"),
                "-y".into(),
                name.clone(),
            ];
            self.host.run(ctx, "ffmpeg", args, work.path()).await.map_err(|e| not_a_video(e, "ffmpeg"))?;
            let png = std::fs::read(work.path().join(&name))
                .map_err(|_| ToolError::failed(format!("ffmpeg found no frame at {t:.2} s in `{path}`")))?;
            let caps = Caps { max_pixels: self.host.config.max_image_pixels };
            let (img, _) = raster::decode(&png, "the extracted frame", caps)?;
            let target = format!("{dir}/{name}");
            let real = self.host.write(ctx, "video", &target, &png, overwrite)?;
            if let Some(block) = raster::block(&img, Some((&png, Format::Png)), budget) {
                content.push(Content::Text { text: format!("`{real}` at {t:.2} s:") });
                content.push(block);
            }
            written.push(json!({"path": real, "at": t}));
        }
        let list: Vec<String> = written
            .iter()
            .map(|w| format!("`{}` ({:.2} s)", w["path"].as_str().unwrap_or(""), w["at"].as_f64().unwrap_or(0.0)))
            .collect();
        content[0] = Content::Text { text: format!("{summary}\nWrote {} frames: {}.", written.len(), list.join(", ")) };
        let mut meta = meta;
        meta["frames"] = json!(written);
        Ok(ToolOutput { content, meta: Some(meta), ..ToolOutput::default() })
    }
}
