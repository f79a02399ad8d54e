//! toolgate's `browser` tool family (ARCHITECTURE.md, "Adding a tool family"): Debian's
//! `chromium` driven over the DevTools protocol, behind toolgate's vetting proxy.
//!
//! [`Browsers`] is the pool: one Chromium per pool, started on first use with a fresh profile
//! under `.toolgate/browser/`, in its own process group and contained so it dies with toolgate,
//! every connection through `toolgate_fetch::proxy::serve_policy` (the web tools' URL policy,
//! each name resolved once and the vetted address connected to). [`Browsers::session`] gives a
//! [`BrowserSession`] per key: its own browser context (cookies, storage, tabs). The tools are
//! made by [`tools`] from a [`Setup`]. See `docs/browser.md`.
//!
//! # Layout
//!
//! - `cdp`: the protocol client over `--remote-debugging-pipe` (no port, no WebSocket).
//! - `process`: launching and killing Chromium, its proxy, the tab cap.
//! - `session`: [`Browsers`], [`BrowserSession`].
//! - `page`: a tab and what its events say (loads, dialogs, console, refused navigations).
//! - `snapshot`: the accessibility tree as text, refs.
//! - `tool`: the `browser` tool ([`BrowserTool`]).
//! - `screenshot`: `capture_screenshot` (one shot in a context of its own), and the canvas's
//!   snapshots.
//! - [`canvas`]: the `canvas` tool, its sanitizer and its live pages.
//!
//! # Example
//!
//! ```no_run
//! use toolgate_browser::{BrowserConfig, Browsers};
//! # async fn demo(fetcher: toolgate_fetch::Fetcher) -> Result<(), toolgate_browser::BrowserError> {
//! let browsers = Browsers::new(BrowserConfig::new("/work/.toolgate/browser", fetcher));
//! let session = browsers.session("alice").await?;
//! let page = session.navigate("https://example.org/").await?;
//! let png = session.screenshot(false, Some((800, 600))).await?;
//! println!("{} loaded: {}, {} bytes of PNG", page.url, page.loaded, png.len());
//! browsers.shutdown().await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod canvas;
mod cdp;
mod error;
mod output;
mod page;
mod process;
mod screenshot;
mod session;
mod settings;
mod snapshot;
mod tool;

use std::sync::Arc;

use toolgate_core::Tool;

pub use error::BrowserError;
pub use page::Dialog;
pub use session::{BrowserConfig, BrowserSession, Browsers, Navigated};
pub use settings::BrowserSettings;
pub use tool::BrowserTool;

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[browser]` configuration section.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// The pool the tools drive; `None`: no browser tools.
    pub browsers: Option<Browsers>,
    /// The canvas boards the `canvas` tool draws on, shared with the `/canvas` pages the
    /// facade mounts.
    pub canvas: Arc<canvas::Canvas>,
}

/// The family's tools.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let mut tools = vec![setup.canvas.tool()];
    if let Some(browsers) = &setup.browsers {
        tools.extend(tool::tools(browsers));
        tools.push(Arc::new(screenshot::CaptureScreenshot::new(browsers.clone())));
        setup.canvas.set_snapshotter(screenshot::canvas_snapshotter(browsers.clone()));
    }
    tools
}
