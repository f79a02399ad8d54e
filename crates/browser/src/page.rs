//! One tab: its protocol session and what its events say (loads, dialogs, console, requests).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cdp::{Cdp, EventSink};
use crate::error::BrowserError;
use crate::process::COMMAND_TIMEOUT;
use crate::snapshot::Refs;

/// Console lines kept per tab.
const CONSOLE_LINES: usize = 200;
/// Characters kept of one console line.
const CONSOLE_CHARS: usize = 2000;
/// Every tab's viewport until a screenshot asks for another size (CSS pixels). Set when the tab
/// is attached, so it is exact (a headless window's viewport is smaller than the window) and a
/// screenshot at this size needs no resize.
pub(crate) const DEFAULT_VIEWPORT: (u32, u32) = (1280, 800);
/// How long a screenshot or a PDF may take.
pub(crate) const CAPTURE_TIMEOUT: Duration = Duration::from_secs(60);
/// Tallest page captured (Chromium's texture limit); the rest is cut.
pub(crate) const MAX_PAGE_HEIGHT: f64 = 16_384.0;
/// Widest page captured.
pub(crate) const MAX_PAGE_WIDTH: f64 = 4096.0;

/// A PNG from `Page.captureScreenshot`: the bytes, and the base64 the browser sent (what an
/// image block carries, so it is not encoded twice).
#[derive(Debug, Clone)]
pub(crate) struct Png {
    pub(crate) bytes: Vec<u8>,
    pub(crate) base64: String,
}

/// The part of the page a capture takes, in CSS pixels from the page's top left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clip {
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) scale: f64,
}

/// A page's whole size and what a full-page capture takes of it, in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PageSize {
    pub(crate) width: f64,
    pub(crate) height: f64,
    /// Width and height captured: the page's, cut at [`MAX_PAGE_WIDTH`] x [`MAX_PAGE_HEIGHT`].
    pub(crate) shot: (f64, f64),
}

impl PageSize {
    /// What the model is told when the capture is cut (`None` when it holds the whole page).
    pub(crate) fn cut_note(&self) -> Option<String> {
        let (w, h) = self.shot;
        if (w, h) == (self.width, self.height) {
            return None;
        }
        Some(format!(
            "The page is {}x{} pixels, larger than a screenshot takes ({MAX_PAGE_WIDTH}x{MAX_PAGE_HEIGHT} at most): \
             this one shows its top-left {w}x{h}.",
            self.width, self.height
        ))
    }
}

/// An open JavaScript dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialog {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    pub kind: String,
    /// Its text (from the page: untrusted).
    pub message: String,
}

/// What a tab's events tell, updated by the reader task.
#[derive(Debug)]
pub(crate) struct PageState {
    pub(crate) dialog: Mutex<Option<Dialog>>,
    pub(crate) console: Mutex<VecDeque<String>>,
    /// Bumped at every main-frame `load` event.
    pub(crate) loads: watch::Sender<u64>,
    /// Requests in flight, and when that number last changed.
    inflight: AtomicI64,
    last_network: Mutex<Instant>,
    pub(crate) url: Mutex<String>,
    /// Things toolgate refused on this tab (navigations by scheme, downloads, file choosers).
    pub(crate) refused: Mutex<Vec<String>>,
    /// Cancelled when the tab's renderer crashed (a page that used too much memory ends so):
    /// every command waiting on the tab ends then.
    pub(crate) crashed: CancellationToken,
    /// The main frame is loading (a navigation started and its load event has not come).
    pub(crate) loading: AtomicBool,
    /// The main frame's id (the target's id).
    main_frame: String,
}

impl PageState {
    fn new(main_frame: &str) -> Self {
        PageState {
            dialog: Mutex::new(None),
            console: Mutex::new(VecDeque::new()),
            loads: watch::channel(0).0,
            inflight: AtomicI64::new(0),
            last_network: Mutex::new(Instant::now()),
            url: Mutex::new("about:blank".to_owned()),
            refused: Mutex::new(Vec::new()),
            crashed: CancellationToken::new(),
            loading: AtomicBool::new(false),
            main_frame: main_frame.to_owned(),
        }
    }

    fn note_refused(&self, what: String) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.len() < 50 {
            refused.push(what);
        }
    }

    fn network(&self, delta: i64) {
        let n = self.inflight.fetch_add(delta, Ordering::Relaxed) + delta;
        if n < 0 {
            self.inflight.store(0, Ordering::Relaxed);
        }
        *self.last_network.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Whether no request has been in flight for `quiet`.
    pub(crate) fn network_idle(&self, quiet: Duration) -> bool {
        self.inflight.load(Ordering::Relaxed) <= 0
            && self.last_network.lock().unwrap_or_else(PoisonError::into_inner).elapsed() >= quiet
    }
}

/// Whether toolgate lets a page or the model go to `url`: the web schemes, and the blank and
/// data documents a page may open.
pub(crate) fn scheme_refusal(url: &str) -> Option<String> {
    let scheme = url.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
    match scheme.as_str() {
        "http" | "https" | "about" | "data" | "blob" => None,
        "" => Some(format!("`{}` is not a URL; write an absolute http:// or https:// URL", clip(url, 100))),
        other => Some(format!(
            "`{other}:` URLs are refused (file:, chrome:, devtools:, view-source:, javascript: and other local or browser-internal schemes can read this machine or run code outside the page); only http(s) pages may be opened"
        )),
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

impl EventSink for PageState {
    fn event(&self, method: &str, params: &Value) -> Option<(String, Value)> {
        match method {
            "Page.loadEventFired" => {
                self.loading.store(false, Ordering::Relaxed);
                self.loads.send_modify(|n| *n += 1);
            }
            "Page.frameStartedLoading" if params["frameId"] == self.main_frame.as_str() => {
                self.loading.store(true, Ordering::Relaxed);
            }
            "Page.frameStoppedLoading" if params["frameId"] == self.main_frame.as_str() => {
                self.loading.store(false, Ordering::Relaxed);
            }
            "Page.frameNavigated" if params["frame"]["parentId"].is_null() => {
                let url = params["frame"]["url"].as_str().unwrap_or_default().to_owned();
                *self.url.lock().unwrap_or_else(PoisonError::into_inner) = url;
            }
            "Page.navigatedWithinDocument" => {
                if let Some(url) = params["url"].as_str() {
                    *self.url.lock().unwrap_or_else(PoisonError::into_inner) = url.to_owned();
                }
            }
            "Page.javascriptDialogOpening" => {
                let kind = params["type"].as_str().unwrap_or("alert").to_owned();
                // Leaving a page is never held up by the page.
                if kind == "beforeunload" {
                    return Some(("Page.handleJavaScriptDialog".to_owned(), json!({"accept": true})));
                }
                let message = clip(params["message"].as_str().unwrap_or_default(), 1000);
                *self.dialog.lock().unwrap_or_else(PoisonError::into_inner) = Some(Dialog { kind, message });
            }
            "Page.javascriptDialogClosed" => {
                *self.dialog.lock().unwrap_or_else(PoisonError::into_inner) = None;
            }
            "Page.fileChooserOpened" => self.note_refused("a file chooser (uploads are off)".to_owned()),
            "Page.downloadWillBegin" | "Browser.downloadWillBegin" => {
                let url = clip(params["url"].as_str().unwrap_or_default(), 200);
                self.note_refused(format!("a download of {url} (downloads are off)"));
            }
            "Runtime.consoleAPICalled" => {
                let kind = params["type"].as_str().unwrap_or("log");
                let args: Vec<String> = params["args"]
                    .as_array()
                    .map(|args| {
                        args.iter()
                            .map(|a| match &a["value"] {
                                Value::String(s) => clip(s, CONSOLE_CHARS),
                                Value::Null => a["description"].as_str().map(|d| clip(d, 200)).unwrap_or_default(),
                                v => clip(&v.to_string(), CONSOLE_CHARS),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.push_console(format!("[{kind}] {}", clip(&args.join(" "), CONSOLE_CHARS)));
            }
            "Runtime.exceptionThrown" => {
                let details = &params["exceptionDetails"];
                let text = details["exception"]["description"].as_str().or(details["text"].as_str()).unwrap_or("");
                self.push_console(format!("[exception] {}", clip(text, CONSOLE_CHARS)));
            }
            "Network.requestWillBeSent" => self.network(1),
            "Network.loadingFinished" | "Network.loadingFailed" => self.network(-1),
            "Fetch.requestPaused" => {
                // The second layer: a document request with a scheme toolgate refuses never
                // starts, whoever asked for it.
                let id = params["requestId"].clone();
                let url = params["request"]["url"].as_str().unwrap_or_default();
                return Some(match scheme_refusal(url) {
                    None => ("Fetch.continueRequest".to_owned(), json!({"requestId": id})),
                    Some(why) => {
                        self.note_refused(format!("a navigation to {}: {why}", clip(url, 200)));
                        ("Fetch.failRequest".to_owned(), json!({"requestId": id, "errorReason": "BlockedByClient"}))
                    }
                });
            }
            "Inspector.targetCrashed" => self.crashed.cancel(),
            _ => {}
        }
        None
    }
}

impl PageState {
    fn push_console(&self, line: String) {
        let mut console = self.console.lock().unwrap_or_else(PoisonError::into_inner);
        if console.len() == CONSOLE_LINES {
            console.pop_front();
        }
        console.push_back(line);
    }
}

/// One tab of a session.
#[derive(Debug)]
pub(crate) struct Tab {
    pub(crate) target_id: String,
    pub(crate) session_id: String,
    pub(crate) state: Arc<PageState>,
    pub(crate) refs: Mutex<Refs>,
    /// The viewport this tab was last set to (`Emulation.setDeviceMetricsOverride`), so a
    /// screenshot at the same size does not resize (and repaint) the page again.
    viewport: Mutex<(u32, u32)>,
    cdp: Arc<Cdp>,
}

impl Tab {
    /// Attaches to `target_id` and turns on what the tab needs.
    pub(crate) async fn attach(cdp: &Arc<Cdp>, target_id: &str) -> Result<Arc<Tab>, BrowserError> {
        let attached = cdp
            .send(None, "Target.attachToTarget", json!({"targetId": target_id, "flatten": true}), COMMAND_TIMEOUT)
            .await?;
        let session_id = attached["sessionId"].as_str().unwrap_or_default().to_owned();
        let state = Arc::new(PageState::new(target_id));
        cdp.route(&session_id, Arc::clone(&state) as Arc<dyn EventSink>);
        let tab = Arc::new(Tab {
            target_id: target_id.to_owned(),
            session_id,
            state,
            refs: Mutex::new(Refs::default()),
            viewport: Mutex::new((0, 0)),
            cdp: Arc::clone(cdp),
        });
        for (method, params) in [
            ("Page.enable", json!({})),
            ("Runtime.enable", json!({})),
            ("Network.enable", json!({"maxTotalBufferSize": 0, "maxResourceBufferSize": 0})),
            ("Page.setInterceptFileChooserDialog", json!({"enabled": true})),
            ("Fetch.enable", json!({"patterns": [{"urlPattern": "*", "resourceType": "Document"}]})),
            ("Emulation.setFocusEmulationEnabled", json!({"enabled": true})),
        ] {
            tab.call(method, params).await?;
        }
        tab.set_viewport(DEFAULT_VIEWPORT.0, DEFAULT_VIEWPORT.1).await?;
        let info = tab.call("Target.getTargetInfo", json!({"targetId": target_id})).await?;
        if let Some(url) = info["targetInfo"]["url"].as_str() {
            *tab.state.url.lock().unwrap_or_else(PoisonError::into_inner) = url.to_owned();
        }
        Ok(tab)
    }

    /// Sends a command to this tab.
    pub(crate) async fn call(&self, method: &str, params: Value) -> Result<Value, BrowserError> {
        self.call_for(method, params, COMMAND_TIMEOUT).await
    }

    pub(crate) async fn call_for(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, BrowserError> {
        let crashed = || {
            BrowserError::Refused(
                "this tab's page crashed (it may have used too much memory); close it or open a new one".to_owned(),
            )
        };
        if self.state.crashed.is_cancelled() {
            return Err(crashed());
        }
        // A renderer that dies never answers: the command ends with the crash, not its timeout.
        tokio::select! {
            answer = self.cdp.send(Some(&self.session_id), method, params, timeout) => answer,
            () = self.state.crashed.cancelled() => Err(crashed()),
        }
    }

    /// Sends an input event. An input that opens a dialog holds the browser's answer until the
    /// dialog is closed, so a dialog that opens ends the wait.
    pub(crate) async fn input(&self, method: &str, params: Value) -> Result<(), BrowserError> {
        let send = self.call(method, params);
        tokio::pin!(send);
        loop {
            tokio::select! {
                answer = &mut send => return answer.map(|_| ()),
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    if self.state.dialog.lock().unwrap_or_else(PoisonError::into_inner).is_some() {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The current URL.
    pub(crate) fn url(&self) -> String {
        self.state.url.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Errors when a dialog is open (most commands would hang behind it).
    pub(crate) fn check_dialog(&self) -> Result<(), BrowserError> {
        match &*self.state.dialog.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(d) => Err(BrowserError::DialogOpen { kind: d.kind.clone(), message: d.message.clone() }),
            None => Ok(()),
        }
    }

    /// Goes to `url` and waits for its load event, at most `timeout`. Returns whether it loaded
    /// in time (a page that never finishes loading is left as it is).
    pub(crate) async fn navigate(&self, url: &str, timeout: Duration) -> Result<bool, BrowserError> {
        if let Some(why) = scheme_refusal(url) {
            return Err(BrowserError::Refused(why));
        }
        self.check_dialog()?;
        let mut loads = self.state.loads.subscribe();
        loads.mark_unchanged();
        // Chromium answers Page.navigate once the response has started: a server that never
        // answers holds it, so the wait is the load timeout, and running out is "not loaded".
        let nav = match self.call_for("Page.navigate", json!({"url": url}), timeout).await {
            Ok(nav) => nav,
            Err(BrowserError::Timeout { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        if let Some(error) = nav["errorText"].as_str() {
            let refused = self.state.refused.lock().unwrap_or_else(PoisonError::into_inner).last().cloned();
            return Err(BrowserError::Refused(match refused {
                Some(why) => format!("{url} was not opened: {why}"),
                None => format!(
                    "{url} could not be opened ({error}); if it is a private or local address, toolgate's proxy refused it (see the web tools' allow_private)"
                ),
            }));
        }
        if nav["loaderId"].is_null() {
            // Same-document navigation (a fragment): no load event comes.
            return Ok(true);
        }
        Ok(self.wait_load(&mut loads, timeout).await)
    }

    /// Waits for the next load event (or a dialog, which stops the page), at most `timeout`.
    pub(crate) async fn wait_load(&self, loads: &mut watch::Receiver<u64>, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let dialog_open = self.state.dialog.lock().unwrap_or_else(PoisonError::into_inner).is_some();
            if dialog_open {
                return true;
            }
            // Wake up now and then to notice a dialog.
            let step = (tokio::time::Instant::now() + Duration::from_millis(200)).min(deadline);
            match tokio::time::timeout_at(step, loads.changed()).await {
                Ok(Ok(())) => return true,
                Ok(Err(_)) => return false,
                Err(_) if tokio::time::Instant::now() >= deadline => return false,
                Err(_) => {}
            }
        }
    }

    /// Sets the viewport to `width` x `height` CSS pixels (16 to 4096 each way); nothing to do
    /// when it already is that size.
    pub(crate) async fn set_viewport(&self, width: u32, height: u32) -> Result<(), BrowserError> {
        if !(16..=4096).contains(&width) || !(16..=4096).contains(&height) {
            return Err(BrowserError::Invalid(format!(
                "a viewport of {width}x{height} is out of range: width and height are 16 to 4096 pixels"
            )));
        }
        if *self.viewport.lock().unwrap_or_else(PoisonError::into_inner) == (width, height) {
            return Ok(());
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await?;
        *self.viewport.lock().unwrap_or_else(PoisonError::into_inner) = (width, height);
        Ok(())
    }

    /// The page's whole size in CSS pixels, and the part of it a capture takes (cut at
    /// [`MAX_PAGE_WIDTH`] x [`MAX_PAGE_HEIGHT`]).
    pub(crate) async fn page_size(&self) -> Result<PageSize, BrowserError> {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await?;
        let content = &metrics["cssContentSize"];
        let (vw, vh) = *self.viewport.lock().unwrap_or_else(PoisonError::into_inner);
        // A page can claim any size: only finite, positive numbers are taken.
        let dimension = |v: &Value, default: u32| match v.as_f64() {
            Some(x) if x.is_finite() && x >= 1.0 => x.ceil(),
            _ => f64::from(default),
        };
        let (width, height) = (dimension(&content["width"], vw), dimension(&content["height"], vh));
        Ok(PageSize { width, height, shot: (width.min(MAX_PAGE_WIDTH), height.min(MAX_PAGE_HEIGHT)) })
    }

    /// One PNG: the viewport as it is (`None`), or `clip` (beyond the viewport when it reaches
    /// past it). Chromium encodes it with its fast setting (`optimizeForSpeed`): about a third
    /// larger, a third of the time; the model's cost is by pixels, not bytes.
    pub(crate) async fn capture(&self, clip: Option<Clip>) -> Result<Png, BrowserError> {
        let mut params = json!({"format": "png", "optimizeForSpeed": true});
        if let Some(c) = clip {
            let (vw, vh) = *self.viewport.lock().unwrap_or_else(PoisonError::into_inner);
            let beyond = c.x < 0.0 || c.y < 0.0 || c.x + c.width > f64::from(vw) || c.y + c.height > f64::from(vh);
            params["clip"] = json!({"x": c.x, "y": c.y, "width": c.width, "height": c.height, "scale": c.scale});
            params["captureBeyondViewport"] = json!(beyond);
        }
        let mut shot = self.call_for("Page.captureScreenshot", params, CAPTURE_TIMEOUT).await?;
        let base64 = match shot["data"].take() {
            Value::String(data) => data,
            _ => return Err(BrowserError::protocol("Page.captureScreenshot", "no image in the answer")),
        };
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&base64)
            .map_err(|e| BrowserError::protocol("Page.captureScreenshot", format!("not base64: {e}")))?;
        Ok(Png { bytes, base64 })
    }

    /// A PNG of the viewport (or the whole page, cut at 4096 x 16384), `size` the viewport in
    /// CSS pixels; with a full page, its size (which says whether it was cut).
    pub(crate) async fn screenshot(
        &self,
        full_page: bool,
        size: Option<(u32, u32)>,
    ) -> Result<(Png, Option<PageSize>), BrowserError> {
        self.check_dialog()?;
        if let Some((w, h)) = size {
            self.set_viewport(w, h).await?;
        }
        if !full_page {
            return Ok((self.capture(None).await?, None));
        }
        let page = self.page_size().await?;
        let (width, height) = page.shot;
        Ok((self.capture(Some(Clip { x: 0.0, y: 0.0, width, height, scale: 1.0 })).await?, Some(page)))
    }

    pub(crate) fn detach(&self) {
        self.cdp.unroute(&self.session_id);
    }
}
