//! `video` with the real ffmpeg and ffprobe, on a video the test makes with ffmpeg.

use serde_json::json;

use crate::support::{Media, images};

fn make_video(path: &std::path::Path) {
    let out = std::process::Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=3:size=320x240:rate=10",
            "-pix_fmt",
            "yuv420p",
            "-y",
        ])
        .arg(path)
        .output()
        .expect("ffmpeg");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn info_and_frames_of_a_real_video() {
    let m = Media::new();
    make_video(&m.path("clip.mp4"));
    let out = m.ok("video", json!({"action": "info", "path": "clip.mp4"})).await;
    let text = out.text_content();
    assert!(text.contains("3.00 s") && text.contains("320×240") && text.contains("h264"), "{text}");

    let out = m.ok("video", json!({"action": "frames", "path": "clip.mp4", "count": 3})).await;
    assert_eq!(images(&out).len(), 3, "{}", out.text_content());
    for i in 1..=3 {
        let png = std::fs::read(m.path(&format!("clip-frames/frame-0{i}.png"))).expect("frame file");
        let img = image::load_from_memory(&png).expect("a real PNG");
        assert_eq!((img.width(), img.height()), (320, 240));
    }
    // The frames can be looked at by `image`.
    let out = m.ok("image", json!({"action": "info", "path": "clip-frames/frame-01.png"})).await;
    assert!(out.text_content().contains("320×240"));

    let err = m.err("video", json!({"action": "frames", "path": "clip.mp4", "at": [99]})).await;
    assert!(err.contains("past the end"), "{err}");
}

#[tokio::test]
async fn playlists_and_non_videos_are_refused() {
    let m = Media::new();
    // An HLS playlist that would make ffmpeg read a file outside the workspace.
    let secret = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(secret.path(), "secret").expect("write");
    let playlist = format!(
        "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:10.0,\nfile://{}\n#EXT-X-ENDLIST\n",
        secret.path().display()
    );
    std::fs::write(m.path("evil.mp4"), playlist).expect("write");
    let err = m.err("video", json!({"action": "frames", "path": "evil.mp4"})).await;
    assert!(err.contains("not a video") || err.contains("not allowed"), "{err}");
    let concat = format!("ffconcat version 1.0\nfile '{}'\n", secret.path().display());
    std::fs::write(m.path("evil2.mp4"), concat).expect("write");
    let err = m.err("video", json!({"action": "info", "path": "evil2.mp4"})).await;
    assert!(err.contains("not a video") || err.contains("not allowed"), "{err}");

    std::fs::write(m.path("text.mp4"), "hello").expect("write");
    let err = m.err("video", json!({"action": "info", "path": "text.mp4"})).await;
    assert!(err.contains("not a video"), "{err}");
}
