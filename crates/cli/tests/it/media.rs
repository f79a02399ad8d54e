//! The media tools through the real binary (`toolgate call`): speech written by espeak-ng and
//! checked with `sox --i`, frames of a video made with ffmpeg, and the refusals a model gets.
//! Over MCP they are in `mcp_results.rs`'s table.

use std::path::Path;
use std::process::{Command, Output};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn call(ws: &Path, tool: &str, args: &str) -> Output {
    Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["--approval", "never", "call", tool, args])
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn speech_frames_and_refusals_through_the_binary() {
    let ws = tempfile::tempdir().unwrap();
    let out = call(ws.path(), "tts", r#"{"text": "Hello from the binary.", "format": "flac", "output": "hi.flac"}"#);
    assert!(out.status.success(), "{}", text(&out));
    let info = Command::new("sox").arg("--i").arg(ws.path().join("hi.flac")).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("FLAC") && info.contains("Channels       : 1"), "{info}");

    let made = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=2:size=160x120:rate=10",
            "-pix_fmt",
            "yuv420p",
            "-y",
        ])
        .arg(ws.path().join("clip.mp4"))
        .status()
        .unwrap();
    assert!(made.success());
    let out = call(ws.path(), "video", r#"{"action": "frames", "path": "clip.mp4", "count": 2}"#);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("clip-frames/frame-02.png"), "{}", text(&out));
    let png = std::fs::read(ws.path().join("clip-frames/frame-01.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));

    let out = call(ws.path(), "tts", r#"{"text": "hi", "provider": "edge"}"#);
    assert!(!out.status.success() && text(&out).contains("no published API"), "{}", text(&out));
    let out = call(ws.path(), "image", r#"{"action": "info", "path": "../../etc/passwd"}"#);
    assert!(!out.status.success() && text(&out).contains("outside the workspace"), "{}", text(&out));
}
