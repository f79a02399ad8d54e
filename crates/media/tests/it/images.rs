//! `image`'s local operations on real files made by the test.

use serde_json::json;

use crate::support::{Media, images, png};

fn dims(bytes: &[u8]) -> (image::ImageFormat, u32, u32) {
    let r = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().expect("reader");
    let f = r.format().expect("format");
    let (w, h) = r.into_dimensions().expect("dims");
    (f, w, h)
}

#[tokio::test]
async fn info_resize_crop_convert_on_real_files() {
    let m = Media::new();
    std::fs::create_dir(m.path("pics")).expect("mkdir");
    std::fs::write(m.path("pics/photo.png"), png(640, 480)).expect("write");

    let out = m.ok("image", json!({"action": "info", "path": "pics/photo.png"})).await;
    assert!(out.text_content().contains("640×480"), "{}", out.text_content());
    assert!(images(&out).is_empty());

    let out = m.ok("image", json!({"action": "resize", "path": "pics/photo.png", "width": 320})).await;
    assert!(out.text_content().contains("pics/photo.resized.png"), "{}", out.text_content());
    assert_eq!(
        dims(&std::fs::read(m.path("pics/photo.resized.png")).expect("read")),
        (image::ImageFormat::Png, 320, 240)
    );
    assert_eq!(images(&out).len(), 1, "the result shows the image");

    m.ok("image", json!({"action": "resize", "path": "pics/photo.png", "width": 100, "height": 100, "fit": "exact", "output": "sq.png"})).await;
    assert_eq!(dims(&std::fs::read(m.path("sq.png")).expect("read")).1, 100);

    m.ok("image", json!({"action": "crop", "path": "pics/photo.png", "x": 10, "y": 20, "width": 64, "height": 32, "output": "crop.png"})).await;
    let cropped = image::load_from_memory(&std::fs::read(m.path("crop.png")).expect("read")).expect("decode").to_rgb8();
    assert_eq!(cropped.dimensions(), (64, 32));
    assert_eq!(cropped.get_pixel(0, 0).0, [10, 20, 128], "the crop starts at (10, 20)");

    let err = m
        .err("image", json!({"action": "crop", "path": "pics/photo.png", "x": 600, "y": 0, "width": 64, "height": 32}))
        .await;
    assert!(err.contains("does not fit"), "{err}");

    for (format, expect) in [("jpeg", image::ImageFormat::Jpeg), ("webp", image::ImageFormat::WebP)] {
        let out = m.ok("image", json!({"action": "convert", "path": "pics/photo.png", "format": format})).await;
        let ext = if format == "jpeg" { "jpg" } else { "webp" };
        let bytes = std::fs::read(m.path(&format!("pics/photo.{ext}"))).expect("converted file");
        assert_eq!(dims(&bytes), (expect, 640, 480), "{}", out.text_content());
    }
    // The converted JPEG is itself an input.
    let out = m.ok("image", json!({"action": "info", "path": "pics/photo.jpg"})).await;
    assert!(out.text_content().contains("Jpeg"), "{}", out.text_content());

    // An existing output is not replaced without `overwrite`.
    let err = m.err("image", json!({"action": "resize", "path": "pics/photo.png", "width": 320})).await;
    assert!(err.contains("already exists") && err.contains("overwrite"), "{err}");
    m.ok("image", json!({"action": "resize", "path": "pics/photo.png", "width": 160, "overwrite": true})).await;
    assert_eq!(dims(&std::fs::read(m.path("pics/photo.resized.png")).expect("read")).1, 160);
}

#[tokio::test]
async fn bombs_non_images_and_escapes_are_refused() {
    let m = Media::new();
    // A real PNG whose header claims 60000 × 60000 (3.6 G pixels): refused from the header.
    let mut bomb = png(8, 8);
    bomb[16..20].copy_from_slice(&60_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&60_000u32.to_be_bytes());
    std::fs::write(m.path("bomb.png"), &bomb).expect("write");
    let err = m.err("image", json!({"action": "resize", "path": "bomb.png", "width": 10})).await;
    assert!(err.contains("bomb") || err.contains("header"), "{err}");

    // A real, small-on-disk, huge-when-decoded PNG (zeros compress ~1000:1): the cap holds.
    let big = image::GrayImage::new(9000, 9000);
    let mut bytes = Vec::new();
    image::DynamicImage::ImageLuma8(big)
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        .expect("png");
    assert!(bytes.len() < 1_000_000, "{} bytes on disk", bytes.len());
    std::fs::write(m.path("zeros.png"), &bytes).expect("write");
    let err = m.err("image", json!({"action": "convert", "path": "zeros.png", "format": "jpeg"})).await;
    assert!(err.contains("9000×9000") && err.contains("max_image_pixels"), "{err}");
    // info reads only the header, so it still answers.
    let out = m.ok("image", json!({"action": "info", "path": "zeros.png"})).await;
    assert!(out.text_content().contains("9000×9000"));

    std::fs::write(m.path("notes.png"), "just some text, named like an image").expect("write");
    let err = m.err("image", json!({"action": "info", "path": "notes.png"})).await;
    assert!(err.contains("not a PNG, JPEG or WebP"), "{err}");

    let err = m.err("image", json!({"action": "info", "path": "../outside.png"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
    std::os::unix::fs::symlink("/etc/passwd", m.path("link.png")).expect("symlink");
    let err = m.err("image", json!({"action": "info", "path": "link.png"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
    std::fs::write(m.path("ok.png"), png(4, 4)).expect("write");
    let err = m
        .err("image", json!({"action": "convert", "path": "ok.png", "format": "jpeg", "output": "../escape.jpg"}))
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    let err = m
        .err("image", json!({"action": "convert", "path": "ok.png", "format": "jpeg", "output": ".toolgate/x.jpg"}))
        .await;
    assert!(err.contains(".toolgate") || err.contains("denied") || err.contains("not allowed"), "{err}");
}

#[tokio::test]
async fn big_results_are_shown_within_the_block_budget() {
    let m = Media::new();
    let noisy = image::RgbImage::from_fn(3000, 2000, |x, y| {
        let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) as u8;
        image::Rgb([v, v.rotate_left(3), v.rotate_left(5)])
    });
    let mut bytes = Vec::new();
    image::DynamicImage::ImageRgb8(noisy)
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        .expect("png");
    assert!(bytes.len() > 4_000_000);
    std::fs::write(m.path("noise.png"), &bytes).expect("write");
    let out = m
        .ok("image", json!({"action": "crop", "path": "noise.png", "x": 0, "y": 0, "width": 2900, "height": 1900}))
        .await;
    let shown = images(&out);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].0, "image/jpeg", "scaled down for the block");
    assert!(shown[0].1.len() <= 1024 * 1024, "{} bytes of base64", shown[0].1.len());
}
