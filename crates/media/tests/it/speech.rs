//! `tts` with espeak-ng (the real program), checked with `sox --i`.

use serde_json::json;

use crate::support::{Media, sox_info};

#[tokio::test]
async fn espeak_speaks_to_wav_flac_and_ogg() {
    let m = Media::new();
    let out = m.ok("tts", json!({"text": "Hello from toolgate. This is a test.", "output": "hello.wav"})).await;
    let text = out.text_content();
    assert!(text.contains("`hello.wav`") && text.contains("espeak-ng"), "{text}");
    let info = sox_info(&m.path("hello.wav"));
    assert!(info.contains("Channels       : 1") && info.contains("Sample Rate    : 22050"), "{info}");
    assert!(info.contains("16-bit Signed Integer PCM"), "{info}");
    let seconds = out.meta.as_ref().and_then(|v| v["seconds"].as_f64()).unwrap_or(0.0);
    assert!(seconds > 1.0, "{seconds} s of speech");

    for format in ["flac", "ogg"] {
        let out = m
            .ok("tts", json!({"text": "Bonjour", "voice": "fr", "format": format, "output": format!("b.{format}")}))
            .await;
        let info = sox_info(&m.path(&format!("b.{format}")));
        let kind = if format == "flac" { "FLAC" } else { "Vorbis" };
        assert!(info.contains(kind), "{format}: {info}\n{}", out.text_content());
    }
    let out = m.ok("tts", json!({"text": "mp3 please", "format": "mp3", "output": "c.mp3"})).await;
    let bytes = std::fs::read(m.path("c.mp3")).expect("mp3");
    assert!(bytes.starts_with(b"ID3") || (bytes[0] == 0xff && bytes[1] & 0xe0 == 0xe0), "{}", out.text_content());
}

#[tokio::test]
async fn hostile_text_and_voices_are_refused_or_spoken_as_text() {
    let m = Media::new();
    // 1 MB of text: a clear error, nothing written.
    let err = m.err("tts", json!({"text": "a".repeat(1 << 20), "output": "big.wav"})).await;
    assert!(err.contains("1048576 characters") && err.contains("max_chars"), "{err}");
    assert!(!m.path("big.wav").exists());

    // A voice that is an option or a path is refused before espeak-ng runs.
    for voice in ["--stdout", "../../etc/passwd", "en; rm -rf /", "x".repeat(60).as_str()] {
        let err = m.err("tts", json!({"text": "hi", "voice": voice})).await;
        assert!(err.contains("voice"), "{voice}: {err}");
    }
    let err = m.err("tts", json!({"text": "hi", "voice": "zz-nonexistent"})).await;
    assert!(err.contains("zz-nonexistent"), "{err}");

    // Text that looks like options or shell is spoken, not run.
    m.ok("tts", json!({"text": "--stdout -w /etc/passwd $(touch pwned) `id`", "output": "t.wav"})).await;
    assert!(!m.path("pwned").exists());
    sox_info(&m.path("t.wav"));

    let err = m.err("tts", json!({"text": "hi", "provider": "edge"})).await;
    assert!(err.contains("not supported") && err.contains("no published API"), "{err}");
    let err = m.err("tts", json!({"text": "hi", "provider": "openai"})).await;
    assert!(err.contains("not configured") && err.contains("[media.tts.openai]"), "{err}");
    let err = m.err("tts", json!({"text": "hi", "output": "../x.wav"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
}
