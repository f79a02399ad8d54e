//! The canvas as web pages, for `toolgate serve --http` (mounted at `/canvas` with the route's
//! own authentication: the token in the path) and for the stdio mode's file.
//!
//! - `GET /canvas/TOKEN`: the viewer: a frame for the content and a small script of ours
//!   (`/canvas/-/app.js`) that follows `GET /canvas/TOKEN/events`, a stream of server-sent
//!   events (one when it opens, one per change), and points the frame at each new version.
//! - `GET /canvas/-/frame/ID`: one version of the content. ID is random per version and is not
//!   the token: what the content can learn about its own address opens only that version.
//!
//! Every response forbids being cached and sending a referrer. The viewer's
//! Content-Security-Policy allows only our script, our event stream and our frame. The
//! content's allows no script (or inline script only, with `canvas_scripts`), no connection,
//! images from `data:` only, no forms, no `<base>`, and is a `sandbox` (an opaque origin: no
//! cookies, no access to the viewer, no pop-ups, no navigating the viewer) on top of the
//! sanitizer (`sanitize.rs`).

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::watch;

use super::{Canvas, Doc, MAX_VIEWERS, key};

/// An answer of [`Canvas::handle`].
#[derive(Debug)]
pub enum Reply {
    /// A whole response.
    Page(Page),
    /// A stream of server-sent events (each item one event's data) for the viewer.
    Events(Events),
}

/// A whole response: status, type, extra headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// More headers (Content-Security-Policy, Referrer-Policy, ...).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
}

/// The viewer's event stream: the board's current state first, then each change, until the
/// board is dropped (evicted or the gate gone).
pub struct Events {
    // A Mutex makes the stream `Sync` (what the HTTP server's bodies need) without `unsafe`;
    // only `poll_next` touches it, so it is never contended.
    inner: Mutex<Pin<Box<dyn Stream<Item = String> + Send>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Stream for Events {
    type Item = String;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.as_mut().poll_next(cx)
    }
}

impl Events {
    fn new(mut rx: watch::Receiver<String>) -> Events {
        let first = rx.borrow_and_update().clone();
        let rest = futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let event = rx.borrow_and_update().clone();
            Some((event, rx))
        });
        let stream = futures::StreamExt::chain(futures::stream::iter([first]), rest);
        Events { inner: Mutex::new(Box::pin(stream)) }
    }
}

/// The viewer's policy: our script, our stream, our frames, nothing else.
const VIEWER_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; \
                          frame-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The content's policy without scripts.
const FRAME_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; \
                         base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox";

/// The content's policy with `canvas_scripts`: inline script in an opaque origin that may not
/// connect anywhere.
const FRAME_CSP_SCRIPTS: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                                 img-src data:; font-src data:; base-uri 'none'; form-action 'none'; \
                                 frame-ancestors 'self'; sandbox allow-scripts";

/// The viewer's script: follows the event stream and loads each new version in the frame.
const APP_JS: &str = r#""use strict";
(() => {
  const frame = document.getElementById("canvas");
  const status = document.getElementById("status");
  const events = new EventSource(location.pathname.replace(/\/+$/, "") + "/events");
  events.onmessage = (e) => {
    let m;
    try { m = JSON.parse(e.data); } catch { return; }
    if (typeof m.frame === "string" && m.frame.startsWith("/canvas/-/frame/") && frame.getAttribute("src") !== m.frame) {
      frame.setAttribute("src", m.frame);
    }
    if (typeof m.title === "string") document.title = m.title || "canvas";
    status.textContent = "live \u00b7 version " + m.version;
  };
  events.onerror = () => { status.textContent = "reconnecting\u2026"; };
})();
"#;

const CONTENT_STYLE: &str = "body{font-family:system-ui,sans-serif;line-height:1.5;margin:1.5rem;color:#111;\
                             background:#fff}img,svg{max-width:100%;height:auto}table{border-collapse:collapse}\
                             td,th{border:1px solid #ccc;padding:.25rem .5rem}pre{overflow:auto}";

impl Canvas {
    /// Answers a request to `path` (which starts with `/canvas`); see the module docs.
    pub fn handle(&self, method: &str, path: &str) -> Reply {
        if method != "GET" {
            return Reply::Page(text(405, "the canvas pages only answer GET"));
        }
        let rest = path.strip_prefix("/canvas").unwrap_or(path).trim_end_matches('/');
        let parts: Vec<&str> = rest.split('/').skip(1).collect();
        match parts.as_slice() {
            ["-", "app.js"] => Reply::Page(Page {
                status: 200,
                content_type: "text/javascript; charset=utf-8",
                headers: common_headers(),
                body: APP_JS.to_owned(),
            }),
            ["-", "frame", id] => Reply::Page(self.frame(id)),
            [token] => Reply::Page(self.viewer(token)),
            [token, "events"] => self.events(token),
            _ => Reply::Page(not_found()),
        }
    }

    fn viewer(&self, token: &str) -> Page {
        let boards = self.boards();
        let Some(board) = boards.by_token.get(&key(token)).and_then(|o| boards.by_owner.get(o)) else {
            return not_found();
        };
        let sandbox = if self.config.scripts { "allow-scripts" } else { "" };
        let title = escape(if board.doc.title.is_empty() { "canvas" } else { &board.doc.title });
        let body = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
             content=\"width=device-width,initial-scale=1\"><title>{title}</title><style>\
             html,body{{margin:0;height:100%}}body{{display:flex;flex-direction:column;font-family:system-ui,sans-serif}}\
             #canvas{{flex:1;border:0;width:100%}}#status{{font-size:12px;color:#666;padding:2px 8px;\
             border-bottom:1px solid #eee}}</style></head><body><div id=\"status\">connecting\u{2026}</div>\
             <iframe id=\"canvas\" sandbox=\"{sandbox}\" referrerpolicy=\"no-referrer\" src=\"/canvas/-/frame/{frame}\">\
             </iframe><script src=\"/canvas/-/app.js\"></script></body></html>",
            frame = board.frame,
        );
        let mut headers = common_headers();
        headers.push(("Content-Security-Policy", VIEWER_CSP.to_owned()));
        Page { status: 200, content_type: "text/html; charset=utf-8", headers, body }
    }

    fn frame(&self, id: &str) -> Page {
        let boards = self.boards();
        let Some(board) = boards.by_frame.get(&key(id)).and_then(|o| boards.by_owner.get(o)) else {
            return text(
                404,
                "this version of the canvas was replaced or the canvas was closed; reload the canvas page",
            );
        };
        let mut headers = common_headers();
        let csp = if self.config.scripts { FRAME_CSP_SCRIPTS } else { FRAME_CSP };
        headers.push(("Content-Security-Policy", csp.to_owned()));
        Page { status: 200, content_type: "text/html; charset=utf-8", headers, body: frame_html(&board.doc) }
    }

    fn events(&self, token: &str) -> Reply {
        let boards = self.boards();
        let Some(board) = boards.by_token.get(&key(token)).and_then(|o| boards.by_owner.get(o)) else {
            return Reply::Page(not_found());
        };
        if board.events.receiver_count() >= MAX_VIEWERS {
            return Reply::Page(text(
                429,
                "this canvas has too many open viewers; close another tab showing it and reload",
            ));
        }
        Reply::Events(Events::new(board.events.subscribe()))
    }
}

/// The event that tells viewers about `doc`, whose content is at frame `frame`.
pub(super) fn event(doc: &Doc, frame: &str) -> String {
    serde_json::json!({
        "version": doc.version,
        "title": doc.title,
        "sections": doc.sections.len(),
        "frame": format!("/canvas/-/frame/{frame}"),
    })
    .to_string()
}

/// The content as a whole document (the frame; its policy comes in the headers).
pub(super) fn frame_html(doc: &Doc) -> String {
    let mut out = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CONTENT_STYLE}</style></head><body>",
        escape(&doc.title)
    );
    push_sections(&mut out, doc);
    out.push_str("</body></html>");
    out
}

/// The stdio mode's page: the content inline, the policy as a `<meta>` (a file has no
/// headers), and with `reload` a reload every two seconds so an open tab follows later changes
/// (a snapshot's page has none).
pub(super) fn file_html(doc: &Doc, scripts: bool, reload: bool) -> String {
    let script = if scripts { "script-src 'unsafe-inline'; " } else { "" };
    let reload = if reload { "<meta http-equiv=\"refresh\" content=\"2\">" } else { "" };
    let mut out = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" \
         content=\"default-src 'none'; {script}style-src 'unsafe-inline'; img-src data:; font-src data:; \
         base-uri 'none'; form-action 'none'\">{reload}\
         <meta name=\"referrer\" content=\"no-referrer\"><title>{}</title><style>{CONTENT_STYLE}</style></head><body>",
        escape(if doc.title.is_empty() { "canvas" } else { &doc.title })
    );
    push_sections(&mut out, doc);
    out.push_str("</body></html>");
    out
}

fn push_sections(out: &mut String, doc: &Doc) {
    for section in &doc.sections {
        out.push_str("<div class=\"tg-section\">");
        out.push_str(&section.html);
        out.push_str("</div>");
    }
}

fn common_headers() -> Vec<(&'static str, String)> {
    vec![
        ("Cache-Control", "no-store".to_owned()),
        ("Referrer-Policy", "no-referrer".to_owned()),
        ("Cross-Origin-Opener-Policy", "same-origin".to_owned()),
        ("Cross-Origin-Resource-Policy", "same-origin".to_owned()),
    ]
}

fn text(status: u16, body: &str) -> Page {
    Page { status, content_type: "text/plain; charset=utf-8", headers: common_headers(), body: body.to_owned() }
}

fn not_found() -> Page {
    text(404, "no canvas here: the link is wrong, or the canvas was closed; ask the agent for the current link")
}

/// `s` as HTML text.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}
