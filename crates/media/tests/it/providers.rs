//! Provider calls against loopback doubles that follow each provider's documented format (no
//! commercial API can be reached here): OpenAI Images (`POST /v1/images/generations`, `data[].
//! b64_json` or `url`), Chat Completions with an `image_url` part, Audio transcriptions
//! (multipart, `{text}`), Audio speech (`response_format: pcm`: 24 kHz 16-bit mono), ElevenLabs
//! text-to-speech (`POST /v1/text-to-speech/{voice_id}?output_format=pcm_22050`, `xi-api-key`),
//! MiniMax T2A v2 (`POST /v1/t2a_v2`, hex audio in `data.audio`, `base_resp`).

use base64::Engine as _;
use serde_json::json;
use toolgate_media::{Endpoint, MediaConfig};

use crate::support::{KEY, KEY_NAME, Media, Server, images, png, sox_info};

fn endpoint(server: &Server, path: &str) -> Option<Endpoint> {
    Some(Endpoint { url: server.url(path), model: None, api_key_env: Some(KEY_NAME.into()) })
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn generate_saves_the_image_from_b64_or_a_vetted_url() {
    let picture = png(64, 48);
    let served = picture.clone();
    let server = Server::start(move |req| {
        if req.path == "/pic.png" {
            return (200, "image/png", served.clone());
        }
        let body = if req.json()["prompt"] == "by url" {
            json!({"data": [{"url": format!("http://{}/pic.png", req.header("host").unwrap_or_default())}]})
        } else {
            json!({"created": 1, "data": [{"b64_json": b64(&served)}]})
        };
        (200, "application/json", body.to_string().into_bytes())
    })
    .await;
    let config = MediaConfig { generate: endpoint(&server, "/v1/images/generations"), ..MediaConfig::default() };
    let m = Media::with(config, &[server.addr.to_string()]);
    let out = m
        .ok("image", json!({"action": "generate", "prompt": "a red cat", "size": "1024x1024", "output": "cat.png"}))
        .await;
    assert_eq!(std::fs::read(m.path("cat.png")).expect("saved"), picture);
    assert_eq!(images(&out).len(), 1);
    let req = &server.requests()[0];
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/v1/images/generations"));
    assert_eq!(req.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(req.json()["prompt"], "a red cat");
    assert_eq!(req.json()["size"], "1024x1024");
    assert_eq!(req.json()["response_format"], "b64_json");
    assert!(!out.text_content().contains(KEY));

    m.ok("image", json!({"action": "generate", "prompt": "by url", "output": "url.png"})).await;
    assert_eq!(std::fs::read(m.path("url.png")).expect("saved"), picture);
}

#[tokio::test]
async fn a_hostile_provider_is_contained() {
    // A provider answering a non-image, a URL to a private address, and an error echoing the key.
    let server = Server::start(|req| match req.json()["prompt"].as_str() {
        Some("text") => {
            (200, "application/json", json!({"data": [{"b64_json": b64(b"not an image")}]}).to_string().into_bytes())
        }
        Some("ssrf") => (
            200,
            "application/json",
            json!({"data": [{"url": "http://127.0.0.1:1/metadata"}]}).to_string().into_bytes(),
        ),
        _ => (
            401,
            "application/json",
            format!(r#"{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}"#).into_bytes(),
        ),
    })
    .await;
    let config = MediaConfig { generate: endpoint(&server, "/v1/images/generations"), ..MediaConfig::default() };
    let m = Media::with(config, &[server.addr.to_string()]);
    let err = m.err("image", json!({"action": "generate", "prompt": "text", "output": "a.png"})).await;
    assert!(err.contains("not a PNG, JPEG or WebP"), "{err}");
    let err = m.err("image", json!({"action": "generate", "prompt": "ssrf", "output": "b.png"})).await;
    assert!(err.contains("only public addresses can be fetched"), "{err}");
    let err = m.err("image", json!({"action": "generate", "prompt": "fail", "output": "c.png"})).await;
    assert!(err.contains("HTTP 401") && !err.contains(KEY) && err.contains("[key]"), "{err}");
    assert!(!m.path("a.png").exists() && !m.path("c.png").exists());

    // Unconfigured: a clear refusal.
    let bare = Media::new();
    let err = bare.err("image", json!({"action": "generate", "prompt": "x"})).await;
    assert!(err.contains("not configured") && err.contains("[media.generate]"), "{err}");
    let err = bare.err("audio", json!({"action": "transcribe", "path": "a.wav"})).await;
    assert!(err.contains("[media.transcribe]"), "{err}");
}

#[tokio::test]
async fn describe_sends_the_image_and_returns_the_answer() {
    let server = Server::start(|_| {
        let answer =
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "A gradient square."}}]});
        (200, "application/json", answer.to_string().into_bytes())
    })
    .await;
    let config = MediaConfig {
        describe: Some(Endpoint {
            model: Some("vision-model".into()),
            ..endpoint(&server, "/v1/chat/completions").expect("e")
        }),
        ..MediaConfig::default()
    };
    let m = Media::with(config, &[server.addr.to_string()]);
    std::fs::write(m.path("p.png"), png(32, 32)).expect("write");
    let out = m.ok("image", json!({"action": "describe", "path": "p.png", "prompt": "What is it?"})).await;
    assert!(out.text_content().contains("A gradient square."), "{}", out.text_content());
    let req = server.requests()[0].json();
    assert_eq!(req["model"], "vision-model");
    let parts = &req["messages"][0]["content"];
    assert_eq!(parts[0]["text"], "What is it?");
    let url = parts[1]["image_url"]["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("data:image/png;base64,"), "{}", &url[..40.min(url.len())]);
}

#[tokio::test]
async fn transcribe_posts_multipart_and_returns_the_text() {
    let server = Server::start(|_| (200, "application/json", br#"{"text": "hello world"}"#.to_vec())).await;
    let config = MediaConfig { transcribe: endpoint(&server, "/v1/audio/transcriptions"), ..MediaConfig::default() };
    let m = Media::with(config, &[server.addr.to_string()]);
    m.ok("tts", json!({"text": "hello world", "output": "say.wav"})).await;
    let out = m.ok("audio", json!({"action": "transcribe", "path": "say.wav", "language": "en"})).await;
    assert!(out.text_content().contains("hello world"));
    let req = &server.requests()[0];
    let ctype = req.header("content-type").unwrap_or_default().to_owned();
    assert!(ctype.starts_with("multipart/form-data; boundary="), "{ctype}");
    let body = String::from_utf8_lossy(&req.body);
    assert!(body.contains("name=\"model\"\r\n\r\nwhisper-1") && body.contains("name=\"language\"\r\n\r\nen"));
    assert!(body.contains("filename=\"say.wav\"") && body.contains("RIFF"));
    let wav = std::fs::read(m.path("say.wav")).expect("wav");
    assert!(req.body.windows(wav.len()).any(|w| w == wav.as_slice()), "the whole file is sent");
}

/// 0.5 s of a 440 Hz tone as 16-bit mono PCM at `rate`.
fn tone(rate: u32) -> Vec<u8> {
    (0..rate / 2)
        .flat_map(|i| {
            let s = (f64::from(i) * 440.0 * std::f64::consts::TAU / f64::from(rate)).sin() * 8000.0;
            (s as i16).to_le_bytes()
        })
        .collect()
}

#[tokio::test]
async fn speech_providers_follow_their_documented_formats_and_long_text_is_chunked() {
    let server = Server::start(|req| {
        if req.path.starts_with("/v1/audio/speech") {
            (200, "audio/pcm", tone(24_000))
        } else if req.path.starts_with("/v1/text-to-speech/") {
            (200, "audio/pcm", tone(22_050))
        } else {
            let hex: String = tone(32_000).iter().map(|b| format!("{b:02x}")).collect();
            let body = json!({"data": {"audio": hex, "status": 2}, "extra_info": {"audio_format": "pcm"},
                              "base_resp": {"status_code": 0, "status_msg": "success"}});
            (200, "application/json", body.to_string().into_bytes())
        }
    })
    .await;
    let mut config = MediaConfig::default();
    config.tts.openai = endpoint(&server, "/v1/audio/speech");
    config.tts.elevenlabs = endpoint(&server, "/v1/text-to-speech");
    config.tts.minimax = endpoint(&server, "/v1/t2a_v2");
    config.tts.chunk_chars = 200;
    let m = Media::with(config, &[server.addr.to_string()]);
    let text = "This sentence is a piece of a longer text. ".repeat(12);

    let out = m.ok("tts", json!({"text": text, "provider": "openai", "voice": "nova", "output": "o.wav"})).await;
    let pieces = out.meta.as_ref().and_then(|v| v["chunks"].as_u64()).unwrap_or(0);
    assert!(pieces >= 3, "{}", out.text_content());
    let info = sox_info(&m.path("o.wav"));
    assert!(info.contains("Sample Rate    : 24000"), "{info}");
    let reqs = server.requests();
    assert_eq!(reqs.len() as u64, pieces);
    let first = reqs[0].json();
    assert_eq!((first["voice"].as_str(), first["response_format"].as_str()), (Some("nova"), Some("pcm")));
    assert!(reqs.iter().all(|r| r.json()["input"].as_str().is_some_and(|s| s.chars().count() <= 200)));
    assert_eq!(reqs[0].header("authorization"), Some(format!("Bearer {KEY}").as_str()));

    m.ok("tts", json!({"text": "Hi", "provider": "elevenlabs", "voice": "JBFqnCBsd6RMkjVDRZzb", "format": "flac", "output": "e.flac"})).await;
    let req = server.requests().last().cloned().expect("request");
    assert_eq!(req.path, "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb?output_format=pcm_22050");
    assert_eq!(req.header("xi-api-key"), Some(KEY));
    assert!(sox_info(&m.path("e.flac")).contains("FLAC"));
    let err = m.err("tts", json!({"text": "Hi", "provider": "elevenlabs", "voice": "../../admin"})).await;
    assert!(err.contains("voice"), "{err}");

    m.ok("tts", json!({"text": "Hi", "provider": "minimax", "output": "mm.wav"})).await;
    let req = server.requests().last().cloned().expect("request").json();
    assert_eq!(req["audio_setting"]["format"], "pcm");
    assert_eq!(req["text"], "Hi");
    assert!(sox_info(&m.path("mm.wav")).contains("Sample Rate    : 32000"));
}
