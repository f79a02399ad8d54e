//! Local image operations with the `image` crate (PNG, JPEG, WebP only). Every decode is
//! preceded by a look at the header: width × height × bytes per pixel is checked against the
//! caps before a pixel is allocated, and the decoder gets the same caps as [`image::Limits`],
//! so a decompression bomb is refused, not decoded.

use std::io::Cursor;

use base64::Engine as _;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use toolgate_core::{Content, ToolError};

/// The formats the tools read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Png,
    Jpeg,
    WebP,
}

impl Format {
    pub(crate) fn parse(name: &str) -> Option<Format> {
        Some(match name.trim().trim_start_matches('.').to_ascii_lowercase().as_str() {
            "png" => Format::Png,
            "jpeg" | "jpg" => Format::Jpeg,
            "webp" => Format::WebP,
            _ => return None,
        })
    }

    pub(crate) fn of_path(path: &str) -> Option<Format> {
        path.rsplit_once('.').and_then(|(_, ext)| Format::parse(ext))
    }

    pub(crate) fn ext(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Jpeg => "jpg",
            Format::WebP => "webp",
        }
    }

    pub(crate) fn mime(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::WebP => "image/webp",
        }
    }

    fn image_format(self) -> ImageFormat {
        match self {
            Format::Png => ImageFormat::Png,
            Format::Jpeg => ImageFormat::Jpeg,
            Format::WebP => ImageFormat::WebP,
        }
    }
}

/// What the header says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub(crate) format: Format,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) color: image::ColorType,
}

/// The caps of one decode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub(crate) max_pixels: u64,
}

impl Caps {
    /// Bytes the decoded image may take: the pixel cap at 8 bytes per pixel (16-bit RGBA).
    fn max_alloc(self) -> u64 {
        self.max_pixels.saturating_mul(8)
    }
}

fn not_an_image(what: &str) -> ToolError {
    ToolError::failed(format!("{what} is not a PNG, JPEG or WebP image (or its header is damaged); give an image file"))
}

/// A reader over bytes, with the format it found.
type Reader<'a> = (ImageReader<Cursor<&'a [u8]>>, Format);

fn reader<'a>(bytes: &'a [u8], what: &str) -> Result<Reader<'a>, ToolError> {
    let reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|_| not_an_image(what))?;
    let format = match reader.format() {
        Some(ImageFormat::Png) => Format::Png,
        Some(ImageFormat::Jpeg) => Format::Jpeg,
        Some(ImageFormat::WebP) => Format::WebP,
        Some(other) => {
            return Err(ToolError::failed(format!(
                "{what} is a {other:?} image; only PNG, JPEG and WebP are supported (convert it with ffmpeg first)"
            )));
        }
        None => return Err(not_an_image(what)),
    };
    Ok((reader, format))
}

/// Reads the header only: format, dimensions, colour type. Nothing is decoded.
pub(crate) fn probe(bytes: &[u8], what: &str) -> Result<Probe, ToolError> {
    let (reader, format) = reader(bytes, what)?;
    let decoder =
        reader.into_decoder().map_err(|e| ToolError::failed(format!("{what}: cannot read the header: {e}")))?;
    let (width, height) = decoder.dimensions();
    Ok(Probe { format, width, height, color: decoder.color_type() })
}

/// Decodes after checking the header against `caps` (a bomb is refused before any pixel is
/// allocated; the decoder enforces the same limits on what it allocates).
pub(crate) fn decode(bytes: &[u8], what: &str, caps: Caps) -> Result<(DynamicImage, Probe), ToolError> {
    let (reader, format) = reader(bytes, what)?;
    let mut decoder =
        reader.into_decoder().map_err(|e| ToolError::failed(format!("{what}: cannot read the header: {e}")))?;
    let (width, height) = decoder.dimensions();
    let color = decoder.color_type();
    let pixels = u64::from(width) * u64::from(height);
    let need = pixels.saturating_mul(u64::from(color.bytes_per_pixel()));
    if pixels == 0 {
        return Err(ToolError::failed(format!("{what} has no pixels ({width}×{height})")));
    }
    if pixels > caps.max_pixels || need > caps.max_alloc() {
        return Err(ToolError::failed(format!(
            "{what} is {width}×{height} pixels ({} MB decoded), over the cap of {} pixels ([media] \
             max_image_pixels); refusing to decode it (a decompression bomb or simply too large)",
            need / 1_000_000,
            caps.max_pixels
        )));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    limits.max_alloc = Some(caps.max_alloc());
    decoder.set_limits(limits).map_err(|e| ToolError::failed(format!("{what}: {e}")))?;
    let image = DynamicImage::from_decoder(decoder)
        .map_err(|e| ToolError::failed(format!("{what} could not be decoded: {e}")))?;
    Ok((image, Probe { format, width, height, color }))
}

/// Encodes `image`; `quality` (1-100) is used by JPEG. WebP is written lossless (the codec
/// the `image` crate has).
pub(crate) fn encode(image: &DynamicImage, format: Format, quality: u8) -> Result<Vec<u8>, ToolError> {
    let mut out = Vec::new();
    let failed = |e: image::ImageError| ToolError::failed(format!("encoding the {format:?} image failed: {e}"));
    match format {
        Format::Jpeg => {
            let rgb = image.to_rgb8();
            let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100));
            rgb.write_with_encoder(encoder).map_err(failed)?;
        }
        Format::WebP => {
            let rgba = image.to_rgba8();
            rgba.write_with_encoder(image::codecs::webp::WebPEncoder::new_lossless(&mut out)).map_err(failed)?;
        }
        Format::Png => {
            let normalized = match image {
                DynamicImage::ImageLuma8(_)
                | DynamicImage::ImageLumaA8(_)
                | DynamicImage::ImageRgb8(_)
                | DynamicImage::ImageRgba8(_) => image.clone(),
                _ => DynamicImage::ImageRgba8(image.to_rgba8()),
            };
            normalized.write_to(&mut Cursor::new(&mut out), format.image_format()).map_err(failed)?;
        }
    }
    Ok(out)
}

/// An image block for the model no larger than `budget` bytes of base64: the image itself when
/// it fits, else a scaled-down JPEG (halving until it fits). `None` when even a tiny one does not.
pub(crate) fn block(image: &DynamicImage, encoded: Option<(&[u8], Format)>, budget: u64) -> Option<Content> {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let fits = |bytes: &[u8]| (bytes.len() as u64).div_ceil(3).saturating_mul(4) <= budget;
    if let Some((bytes, format)) = encoded.filter(|(b, _)| fits(b)) {
        return Some(Content::Image { data: b64(bytes), mime_type: format.mime().to_owned() });
    }
    let mut side = image.width().max(image.height()).min(2048);
    while side >= 32 {
        let small = image.thumbnail(side, side);
        if let Some(bytes) = encode(&small, Format::Jpeg, 80).ok().filter(|b| fits(b)) {
            return Some(Content::Image { data: b64(&bytes), mime_type: Format::Jpeg.mime().to_owned() });
        }
        side /= 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_pixel(width, height, image::Rgb([10, 20, 30])));
        encode(&img, Format::Png, 90).expect("encode")
    }

    #[test]
    fn a_header_claiming_huge_dimensions_is_refused_before_decoding() {
        let mut bytes = png(4, 4);
        // IHDR width and height (bytes 16..24) rewritten to 100000 × 100000; the CRC no longer
        // matches, which the check must not need to reach.
        bytes[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bytes[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let err = decode(&bytes, "`bomb.png`", Caps { max_pixels: 40_000_000 }).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("cap") || err.contains("header"), "{err}");
    }

    #[test]
    fn text_is_not_an_image() {
        let err = probe(b"hello, world", "`a.txt`").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("not a PNG, JPEG or WebP"), "{err}");
    }

    #[test]
    fn formats_round_trip() {
        let bytes = png(8, 6);
        let (img, p) = decode(&bytes, "x", Caps { max_pixels: 1000 }).expect("decode");
        assert_eq!((p.width, p.height, p.format), (8, 6, Format::Png));
        for f in [Format::Png, Format::Jpeg, Format::WebP] {
            let out = encode(&img, f, 80).expect("encode");
            assert_eq!(probe(&out, "y").map(|p| (p.format, p.width, p.height)).ok(), Some((f, 8, 6)));
        }
    }
}
