//! The loopback listener that receives the browser's redirect after sign-in
//! (`http://127.0.0.1:PORT/callback?code=…&state=…`).
//!
//! Everything in the request is hostile: it is read with a size cap, the `state` must equal the
//! one toolgate generated (so another page cannot feed in its own code), and the pages sent back
//! are fixed text that never reflects a query parameter.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The path the redirect URI names.
pub(crate) const CALLBACK_PATH: &str = "/callback";

/// Largest request head accepted; a real redirect is well under 8 KiB.
const MAX_HEAD: usize = 16 * 1024;
/// How long one connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The authorization server's answer, as the browser delivered it.
#[derive(Debug)]
pub(crate) enum Redirect {
    /// Sign-in succeeded: exchange `code` (answer the browser with [`Page`] afterwards).
    Code {
        /// The authorization code.
        code: String,
        /// RFC 9207 `iss`, when the server sent one.
        issuer: Option<String>,
        /// The browser's connection, still waiting for a page.
        stream: TcpStream,
    },
    /// The server refused (`error=access_denied`, …); the browser has been answered.
    Refused {
        /// The `error` code and description, made safe to print.
        error: String,
    },
}

/// What the browser is told at the end.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Page {
    /// Signed in.
    Done,
    /// The code exchange failed.
    Failed,
}

/// Waits until `deadline` for a redirect carrying `expected_state`. Requests for other paths,
/// and redirects with another state, are answered and ignored.
pub(crate) async fn wait(listener: &TcpListener, expected_state: &str, deadline: Instant) -> Option<Redirect> {
    loop {
        let (stream, _) = tokio::time::timeout_at(deadline, listener.accept()).await.ok()?.ok()?;
        if let Some(redirect) = handle(stream, expected_state).await {
            return Some(redirect);
        }
    }
}

async fn handle(mut stream: TcpStream, expected_state: &str) -> Option<Redirect> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => {
            respond(&mut stream, 400, BAD_REQUEST).await;
            return None;
        }
    };
    let Some(query) = callback_query(&head) else {
        respond(&mut stream, 404, NOT_FOUND).await;
        return None;
    };
    let params = Params::parse(&query);
    if !params.state.as_deref().is_some_and(|s| constant_time_eq(s.as_bytes(), expected_state.as_bytes())) {
        // Not the sign-in toolgate started (a stale tab, or a page forging a login): ignore it.
        respond(&mut stream, 400, WRONG_STATE).await;
        return None;
    }
    if let Some(error) = params.error {
        respond(&mut stream, 200, REFUSED).await;
        let description = params.error_description.map(|d| format!(": {}", printable(&d, 200))).unwrap_or_default();
        return Some(Redirect::Refused { error: format!("{}{description}", printable(&error, 64)) });
    }
    let Some(code) = params.code else {
        respond(&mut stream, 400, BAD_REQUEST).await;
        return None;
    };
    Some(Redirect::Code { code, issuer: params.issuer, stream })
}

/// Answers the browser after the code exchange.
pub(crate) async fn finish(mut stream: TcpStream, page: Page) {
    match page {
        Page::Done => respond(&mut stream, 200, DONE).await,
        Page::Failed => respond(&mut stream, 500, FAILED).await,
    }
}

/// Reads up to the blank line ending the request head.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_HEAD {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(buf).ok()
}

/// The query string of `GET /callback?…`, or `None` for any other request.
fn callback_query(head: &str) -> Option<String> {
    let mut parts = head.lines().next()?.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (method == "GET" && path == CALLBACK_PATH).then(|| query.to_owned())
}

#[derive(Debug, Default)]
struct Params {
    code: Option<String>,
    state: Option<String>,
    issuer: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Params {
    fn parse(query: &str) -> Params {
        let mut p = Params::default();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match key.as_ref() {
                "code" => &mut p.code,
                "state" => &mut p.state,
                "iss" => &mut p.issuer,
                "error" => &mut p.error,
                "error_description" => &mut p.error_description,
                _ => continue,
            };
            // The first value wins; a repeated parameter cannot override it.
            slot.get_or_insert_with(|| value.into_owned());
        }
        p
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A server-chosen string made safe for a terminal: printable ASCII only, capped.
pub(crate) fn printable(text: &str, max: usize) -> String {
    let mut out: String = text.chars().filter(|c| c.is_ascii_graphic() || *c == ' ').take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

async fn respond(stream: &mut TcpStream, status: u16, (title, text): Text) {
    let body = page(title, text);
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    // no-referrer: the callback URL carries the code; no-store: do not keep it in history caches.
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n\
         Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn page(title: &str, text: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>toolgate: {title}</title></head>\
         <body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{text}</p></body></html>"
    )
}

/// A page: its title and its one sentence. Fixed text only.
type Text = (&'static str, &'static str);

const DONE: Text =
    ("signed in", "toolgate is signed in to the MCP server. You can close this tab and return to the terminal.");
const FAILED: Text =
    ("sign-in failed", "toolgate could not finish signing in. The terminal says why; you can close this tab.");
const REFUSED: Text = ("sign-in refused", "The authorization server did not grant access. You can close this tab.");
const WRONG_STATE: Text = (
    "not this sign-in",
    "This redirect does not belong to the sign-in toolgate is waiting for (an old tab?). It was ignored.",
);
const BAD_REQUEST: Text = ("bad request", "This is not a sign-in redirect toolgate can use.");
const NOT_FOUND: Text = ("not found", "toolgate only listens for the sign-in redirect here.");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_callback_is_a_redirect() {
        assert_eq!(
            callback_query("GET /callback?code=1&state=2 HTTP/1.1\r\nHost: x\r\n\r\n").as_deref(),
            Some("code=1&state=2")
        );
        assert_eq!(callback_query("GET /callback HTTP/1.1\r\n\r\n").as_deref(), Some(""));
        assert!(callback_query("GET /favicon.ico HTTP/1.1\r\n\r\n").is_none());
        assert!(callback_query("POST /callback?code=1 HTTP/1.1\r\n\r\n").is_none());
        assert!(callback_query("GET /callbackx?code=1 HTTP/1.1\r\n\r\n").is_none());
    }

    #[test]
    fn params_decode_and_the_first_value_wins() {
        let p = Params::parse("code=a%2Bb&state=s1&state=s2&iss=https%3A%2F%2Fas&other=x");
        assert_eq!(p.code.as_deref(), Some("a+b"));
        assert_eq!(p.state.as_deref(), Some("s1"));
        assert_eq!(p.issuer.as_deref(), Some("https://as"));
        assert!(p.error.is_none());
    }

    #[test]
    fn server_text_is_tamed_for_the_terminal() {
        assert_eq!(printable("access_denied\x1b[31m\n<b>", 64), "access_denied[31m<b>");
        assert_eq!(printable(&"x".repeat(10), 4), "xxxx…");
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    async fn send(port: u16, request: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn wrong_state_and_stray_requests_are_ignored_then_the_right_one_returns() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(600);
        let waiter = tokio::spawn(async move { wait(&listener, "good-state", deadline).await });

        let favicon = send(port, "GET /favicon.ico HTTP/1.1\r\n\r\n").await;
        assert!(favicon.starts_with("HTTP/1.1 404"), "{favicon}");
        let forged = send(port, "GET /callback?code=evil&state=bad%3Cscript%3E HTTP/1.1\r\n\r\n").await;
        assert!(forged.starts_with("HTTP/1.1 400"), "{forged}");
        assert!(!forged.contains("evil") && !forged.contains("script"), "no reflection: {forged}");

        let mut browser = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        browser.write_all(b"GET /callback?code=the-code&state=good-state HTTP/1.1\r\n\r\n").await.unwrap();
        let Some(Redirect::Code { code, issuer, stream }) = waiter.await.unwrap() else { panic!("no code") };
        assert_eq!(code, "the-code");
        assert!(issuer.is_none());
        finish(stream, Page::Done).await;
        let mut page = String::new();
        browser.read_to_string(&mut page).await.unwrap();
        assert!(page.starts_with("HTTP/1.1 200") && page.contains("You can close this tab"), "{page}");
        assert!(!page.contains("the-code"), "{page}");
    }

    #[tokio::test]
    async fn a_refusal_ends_the_wait_with_the_tamed_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(600);
        let waiter = tokio::spawn(async move { wait(&listener, "st", deadline).await });
        let page =
            send(port, "GET /callback?error=access_denied&error_description=no%1b%5B2J&state=st HTTP/1.1\r\n\r\n")
                .await;
        assert!(page.contains("did not grant access"), "{page}");
        let Some(Redirect::Refused { error }) = waiter.await.unwrap() else { panic!("not refused") };
        assert_eq!(error, "access_denied: no[2J");
    }

    #[tokio::test]
    async fn the_wait_ends_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        assert!(wait(&listener, "st", Instant::now()).await.is_none());
    }
}
