//! The media tools through `Gate::call`: espeak-ng speech checked with `sox --i`, an image
//! operation whose result carries the image through the output pipeline, a bomb refused, a
//! `[media]` section loaded from TOML, and a provider key read from the encrypted secrets store
//! that never shows in a result or an error (against a loopback stand-in for OpenAI's
//! `/v1/audio/speech`, which answers raw 24 kHz 16-bit PCM as documented).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::config::Config;
use toolgate::core::Content;
use toolgate::store::{SecretStore, Store};
use toolgate::{ApprovalAnswer, ApprovalRequest, Approver, Gate};

#[derive(Debug)]
struct Yes;

#[toolgate::core::async_trait]
impl Approver for Yes {
    async fn ask(&self, _request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        Some(ApprovalAnswer::AllowOnce)
    }
}

fn gate(dir: &tempfile::TempDir, config: Config) -> Gate {
    Gate::builder(dir.path()).config(config).approver(Arc::new(Yes)).build().unwrap()
}

/// A real PNG of `w` × `h`, made by ffmpeg.
fn png(w: u32, h: u32) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.png");
    let out = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-f", "lavfi", "-i", &format!("testsrc=size={w}x{h}"), "-frames:v", "1", "-y"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(path).unwrap()
}

#[tokio::test]
async fn speech_and_images_through_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, Config::default());
    let ctx = gate.context();

    let out = gate.call(&ctx, "tts", json!({"text": "Through the gate.", "output": "gate.wav"})).await.unwrap();
    assert!(out.text_content().contains("`gate.wav`"), "{}", out.text_content());
    let info = std::process::Command::new("sox").arg("--i").arg(dir.path().join("gate.wav")).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("Sample Rate    : 22050") && info.contains("16-bit"), "{info}");

    std::fs::write(dir.path().join("in.png"), png(40, 30)).unwrap();
    let out = gate.call(&ctx, "image", json!({"action": "resize", "path": "in.png", "width": 20})).await.unwrap();
    assert!(out.text_content().contains("20×15"), "{}", out.text_content());
    assert!(
        out.content.iter().any(|c| matches!(c, Content::Image { mime_type, .. } if mime_type == "image/png")),
        "the image block survives the output pipeline"
    );

    let mut bomb = png(4, 4);
    bomb[16..20].copy_from_slice(&70_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&70_000u32.to_be_bytes());
    std::fs::write(dir.path().join("bomb.png"), bomb).unwrap();
    let err = gate.call(&ctx, "image", json!({"action": "convert", "path": "bomb.png", "format": "jpeg"})).await;
    let err = err.unwrap_err().to_string();
    assert!(err.contains("bomb") || err.contains("header"), "{err}");

    let err = gate.call(&ctx, "tts", json!({"text": "x".repeat(1 << 20)})).await.unwrap_err().to_string();
    // The gate's parameter limits answer first, with the size and the limit.
    assert!(err.contains("/text") && err.contains("at most"), "{err}");
    let err = gate.call(&ctx, "tts", json!({"text": "hi", "provider": "edge"})).await.unwrap_err().to_string();
    assert!(err.contains("no published API"), "{err}");
}

#[tokio::test]
async fn the_media_section_loads_and_a_stored_key_never_shows() {
    const KEY: &str = "sk-media-stored-5c1e9a77b2";
    const NAME: &str = "TG_TEST_MEDIA_TTS_KEY";
    assert!(std::env::var_os(NAME).is_none(), "{NAME} must not be set for this test");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let auth: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&auth);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut req = Vec::new();
            let mut buf = [0u8; 8192];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&req).to_string();
            let header =
                head.lines().find_map(|l| l.strip_prefix("authorization: ").or(l.strip_prefix("Authorization: ")));
            seen.lock().unwrap().push(header.unwrap_or_default().to_owned());
            // Documented answer: raw PCM; but a body with "fail" gets a 401 that echoes the key.
            let (status, body) = if head.contains("\"fail") || !head.contains("content-length") {
                (401, format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#).into_bytes())
            } else {
                (200, vec![0u8; 48_000])
            };
            let _ = s
                .write_all(
                    format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len())
                        .as_bytes(),
                )
                .await;
            let _ = s.write_all(&body).await;
        }
    });
    let toml = format!(
        "[web]\nallow_private = [\"{addr}\"]\n[media]\nmax_image_pixels = 1000000\n[media.tts]\nprovider = \"openai\"\n\
         [media.tts.openai]\nurl = \"http://{addr}/v1/audio/speech\"\nmodel = \"tts-1\"\napi_key_env = \"{NAME}\"\n"
    );
    Config::check_layer(&toml).unwrap();
    let config: Config = toml::from_str(&toml).unwrap();
    assert_eq!(config.media.max_image_pixels, 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".toolgate/state.db")).unwrap();
    store.secret_put(&format!("{}{NAME}", toolgate::extensions::SECRET_PREFIX), KEY.as_bytes()).unwrap();
    drop(store);
    let gate = gate(&dir, config);
    let ctx = gate.context();

    let out = gate.call(&ctx, "tts", json!({"text": "Hello", "output": "o.wav"})).await.unwrap();
    assert!(out.text_content().contains("openai") && !out.text_content().contains(KEY), "{}", out.text_content());
    assert_eq!(auth.lock().unwrap()[0], format!("Bearer {KEY}"));
    assert_eq!(std::fs::metadata(dir.path().join("o.wav")).unwrap().len(), 48_044);

    let err = gate.call(&ctx, "tts", json!({"text": "fail now"})).await.unwrap_err().to_string();
    assert!(err.contains("HTTP 401") && !err.contains(KEY), "{err}");
}
