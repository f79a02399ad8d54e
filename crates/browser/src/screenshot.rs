//! `capture_screenshot {url, delay_ms?, full_page?, width?, height?}` (seed 001): one shot of a
//! page in a browser context of its own (no cookies or tabs shared with any session, closed
//! after), through the same vetting proxy and URL policy as `browser`. The full-resolution PNG
//! is saved in the workspace; the model gets a copy scaled by Chromium to a size budget.
//!
//! Also the canvas's snapshots ([`canvas_snapshotter`]): the canvas's page rendered from a
//! `data:` document in one shared context.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, Content, Tool, ToolError, ToolOutput, ToolSpec, async_trait,
};

use crate::error::BrowserError;
use crate::output::save;
use crate::page::{Clip, Png, Tab};
use crate::session::{BrowserSession, Browsers};

const NAME: &str = "capture_screenshot";
/// Where the full-resolution PNGs go, inside the workspace (the `browser` tool's folder).
/// Most pixels of the image shown to the model (about what vision models take at full detail).
const SHOWN_PIXELS: f64 = 1_200_000.0;
/// Longest edge of the image shown to the model.
const SHOWN_EDGE: f64 = 2000.0;
/// Largest PNG shown to the model; past it the image is scaled down further.
const SHOWN_BYTES: usize = 1024 * 1024;
/// Longest wait after the load (`delay_ms`).
const MAX_DELAY_MS: u64 = 30_000;
/// The largest `data:` document a canvas snapshot renders (Chromium's URL limit is 2 MiB).
const MAX_SNAPSHOT_DOC: usize = 1_500_000;

/// The `capture_screenshot` tool over `browsers`.
#[derive(Debug)]
pub(crate) struct CaptureScreenshot {
    spec: ToolSpec,
    browsers: Browsers,
    /// Numbers the one-shot sessions, so two calls never share a browser context.
    shots: AtomicU64,
}

impl CaptureScreenshot {
    pub(crate) fn new(browsers: Browsers) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Take a screenshot of a web page: open `url` in a fresh browser, wait for it to load (plus `delay_ms`), \
             and return the image (scaled down to fit a size budget) and the path of the full-resolution PNG saved \
             in the workspace. `full_page` captures the whole page instead of the `width` x `height` viewport \
             (default 1280x800). Private and local addresses are refused unless the web tools' `allow_private` \
             lists them.",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "maxLength": 8192, "description": "An http:// or https:// URL"},
                    "delay_ms": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_MS, "description": "Extra wait after the page loaded, for scripts and animations (default 0)"},
                    "full_page": {"type": "boolean", "description": "Capture the whole page, not just the viewport (default false)"},
                    "width": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "Viewport width in CSS pixels (default 1280)"},
                    "height": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "Viewport height in CSS pixels (default 800)"}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        )
        .group("browser")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: true });
        CaptureScreenshot { spec, browsers, shots: AtomicU64::new(0) }
    }
}

#[async_trait]
impl Tool for CaptureScreenshot {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let mut safety = CallSafety::default();
        if let Some(host) = params["url"].as_str().and_then(host_of) {
            safety.touches.hosts.push(host);
        }
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let url = params["url"].as_str().unwrap_or_default().trim();
        let lower = url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(ToolError::invalid(
                NAME,
                "/url",
                format!("`{}` is not an http:// or https:// URL; give the page's whole address", clip(url, 100)),
            ));
        }
        let shot = Shot {
            url,
            delay: Duration::from_millis(params["delay_ms"].as_u64().unwrap_or(0).min(MAX_DELAY_MS)),
            full_page: params["full_page"].as_bool().unwrap_or(false),
            width: params["width"].as_u64().unwrap_or(1280).clamp(16, 4096) as u32,
            height: params["height"].as_u64().unwrap_or(800).clamp(16, 4096) as u32,
        };
        let key = format!("{NAME}:{}", self.shots.fetch_add(1, Ordering::Relaxed));
        let session = self.browsers.session(&key).await.map_err(failed)?;
        let result = tokio::select! {
            result = shot.take(&session) => result,
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        };
        // One shot: the context, its cookies and its tab go whatever happened.
        self.browsers.close(&key).await;
        let taken = result?;
        let path = save(&ctx.workspace, "capture", "png", &taken.full)?;
        let (sw, sh) = png_size(&taken.shown.bytes).unwrap_or((0, 0));
        let mut text = format!(
            "Screenshot of {} ({}x{} pixels{}) saved to {}",
            taken.url,
            taken.width,
            taken.height,
            if taken.loaded { "" } else { "; the page had not finished loading" },
            path.display()
        );
        if (sw, sh) != (taken.width, taken.height) {
            text.push_str(&format!("; shown here scaled to {sw}x{sh}"));
        }
        text.push('.');
        if let Some(note) = &taken.cut {
            text.push(' ');
            text.push_str(note);
        }
        Ok(ToolOutput {
            content: vec![
                Content::Text { text },
                Content::Image { data: taken.shown.base64, mime_type: "image/png".to_owned() },
            ],
            structured: None,
            meta: Some(json!({
                "path": path, "url": taken.url, "width": taken.width, "height": taken.height,
                "bytes": taken.full.len(), "shown_width": sw, "shown_height": sh, "loaded": taken.loaded,
                "cut": taken.cut.is_some(),
            })),
        })
    }
}

/// One call's request.
struct Shot<'a> {
    url: &'a str,
    delay: Duration,
    full_page: bool,
    width: u32,
    height: u32,
}

/// What a shot gave.
struct Taken {
    url: String,
    loaded: bool,
    width: u32,
    height: u32,
    full: Vec<u8>,
    shown: Png,
    /// What was left out of a full page taller or wider than a capture takes.
    cut: Option<String>,
}

impl Shot<'_> {
    async fn take(&self, session: &BrowserSession) -> Result<Taken, ToolError> {
        let tab = session.current().await.map_err(failed)?;
        tab.set_viewport(self.width, self.height).await.map_err(failed)?;
        let mark = session.inner.process.proxy_mark();
        let nav = session.navigate(self.url).await.map_err(failed)?;
        session.inner.process.check_landed(&nav.url, mark).map_err(failed)?;
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        dismiss_dialogs(&tab).await?;
        let (width, height, cut) = if self.full_page {
            let page = tab.page_size().await.map_err(failed)?;
            (page.shot.0 as u32, page.shot.1 as u32, page.cut_note())
        } else {
            (self.width, self.height, None)
        };
        let region = |scale| Clip { x: 0.0, y: 0.0, width: f64::from(width), height: f64::from(height), scale };
        let full = tab.capture(if self.full_page { Some(region(1.0)) } else { None }).await.map_err(failed)?;
        let mut scale = shown_scale(width, height);
        let mut shown =
            if scale < 1.0 { tab.capture(Some(region(scale))).await.map_err(failed)? } else { full.clone() };
        // A busy page compresses badly: smaller until it fits (a few steps at most).
        while shown.bytes.len() > SHOWN_BYTES && scale > 0.1 {
            scale *= 0.7;
            shown = tab.capture(Some(region(scale))).await.map_err(failed)?;
        }
        Ok(Taken { url: nav.url, loaded: nav.loaded, width, height, full: full.bytes, shown, cut })
    }
}

/// The scale that brings `width` x `height` within the shown-image budget (1 when it fits).
fn shown_scale(width: u32, height: u32) -> f64 {
    let (w, h) = (f64::from(width), f64::from(height));
    (SHOWN_PIXELS / (w * h)).sqrt().min(SHOWN_EDGE / w.max(h)).min(1.0)
}

/// Dismisses a dialog the page opened (nobody is there to answer it in one shot); a page that
/// keeps opening them is refused.
async fn dismiss_dialogs(tab: &Tab) -> Result<(), ToolError> {
    for _ in 0..5 {
        if tab.check_dialog().is_ok() {
            return Ok(());
        }
        let _ = tab.call("Page.handleJavaScriptDialog", json!({"accept": false})).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ToolError::failed("the page keeps opening dialogs (alert, confirm, prompt), so it cannot be captured"))
}

fn failed(e: BrowserError) -> ToolError {
    ToolError::failed(e.to_string())
}

/// Width and height from a PNG's header.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[..8] != b"\x89PNG\r\n\x1a\n" || &png[12..16] != b"IHDR" {
        return None;
    }
    Some((
        u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
        u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
    ))
}

fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') { host.split(']').next().map(|h| &h[1..])? } else { host.split(':').next()? };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_owned() } else { s.chars().take(max).collect::<String>() + "…" }
}

/// The canvas's snapshots, in one browser context of their own ("toolgate:canvas"), one at a
/// time.
pub(crate) fn canvas_snapshotter(browsers: Browsers) -> Arc<dyn crate::canvas::Snapshotter> {
    Arc::new(CanvasShots { browsers, one_at_a_time: tokio::sync::Mutex::new(()) })
}

#[derive(Debug)]
struct CanvasShots {
    browsers: Browsers,
    one_at_a_time: tokio::sync::Mutex<()>,
}

#[async_trait]
impl crate::canvas::Snapshotter for CanvasShots {
    async fn snapshot(&self, html: String, width: u32, height: u32) -> Result<Vec<u8>, String> {
        let url =
            format!("data:text/html;base64,{}", base64::engine::general_purpose::STANDARD.encode(html.as_bytes()));
        if url.len() > MAX_SNAPSHOT_DOC * 4 / 3 {
            return Err(format!(
                "the canvas is {} bytes, more than the {MAX_SNAPSHOT_DOC} a snapshot renders; snapshot a smaller page",
                html.len()
            ));
        }
        let _one = self.one_at_a_time.lock().await;
        let session = self.browsers.session("toolgate:canvas").await.map_err(|e| e.to_string())?;
        let tab = session.current().await.map_err(|e| e.to_string())?;
        tab.set_viewport(width, height).await.map_err(|e| e.to_string())?;
        session.navigate(&url).await.map_err(|e| e.to_string())?;
        tab.capture(None).await.map(|png| png.bytes).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_image_fits_the_budget() {
        assert_eq!(shown_scale(1280, 800), 1.0);
        let s = shown_scale(1280, 16384);
        assert!(f64::from(16384) * s <= SHOWN_EDGE + 0.5, "{s}");
        let s = shown_scale(4096, 4096);
        assert!(4096.0 * 4096.0 * s * s <= SHOWN_PIXELS + 1.0, "{s}");
    }

    #[test]
    fn hosts_are_read_for_policy() {
        assert_eq!(host_of("https://User@Example.com:8443/x?y").as_deref(), Some("example.com"));
        assert_eq!(host_of("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(host_of("http:///x"), None);
    }
}
