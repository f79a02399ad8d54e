//! `http.send` for WASM tools ([`GuestHttp`], the [`HttpClient`] of [`crate::wasm`]): the
//! guest's request is checked against its tool's `http` capability, credentials are added on
//! the host, and the request goes through the same SSRF-safe fetcher as the web tools
//! (`toolgate-fetch`, built from the `[web]` configuration).
//!
//! In order, for every request (nothing is sent unless every step passes):
//!
//! 1. **One parser.** The URL is parsed once (WHATWG, `toolgate_guard::net::parse_http_url`):
//!    http(s) only, no userinfo; the fragment is dropped.
//! 2. **The path is normalized before it is matched**: `.`/`..` segments (also spelled
//!    `%2e%2e`) are resolved by the parser; encoded `/` or `\` (`%2F`, `%5C`), NUL and
//!    double encoding (`%25`) are refused; empty segments (`//`) are dropped; each segment is
//!    percent-decoded (UTF-8). The normalized path is the one matched AND the one sent.
//! 3. **The allowlist** ([`check_request`]): the host matches a pattern exactly
//!    (case-insensitive, trailing dot ignored; `*.example.com` for subdomains), the decoded
//!    path is under its `path_prefix` by whole segments (`/v1` allows `/v1/x`, never `/v10`),
//!    the method is one of its `methods`; https unless `allow_insecure`.
//! 4. **The guest's headers**: `authorization`, `proxy-*`, `cookie`, `host` and any header or
//!    query parameter the host injects for this endpoint are refused (the guest cannot
//!    replace or see a credential).
//! 5. **Leak scan** of the outgoing URL, headers and body: a credential there refuses the
//!    request, naming the rule (a guest has no business sending secrets it could only have
//!    been handed by the model).
//! 6. **Credentials** from the encrypted store (`toolgate tools secret NAME`), added as the
//!    capability says: bearer, basic, a header, or a query parameter.
//! 7. **The fetcher**: resolve once, vet every address (private ones only through
//!    `[web] allow_private`, with their port), pin, no redirect followed (a 3xx comes back
//!    as it is), at most [`MAX_RESPONSE_BYTES`] of decoded body.
//! 8. **The response**: credential-bearing headers (`set-cookie`, `authorization`,
//!    `www-authenticate`, `proxy-*`, ...) removed; the injected values (also base64 and
//!    URL-encoded) and anything the leak detector finds redacted from headers and body.
//!
//! Every request, sent or refused, leaves a row in the audit log (when the gate keeps one):
//! id `<call id>.http<N>`, the tool, `{"method", "url"}` with query values and userinfo
//! removed, the decision, the status and the response's size. The call's cancel token aborts
//! a request in flight (its row says `cancelled`).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use toolgate_fetch::{Fetcher, Overflow, Redirects, Request};
use toolgate_guard::leak::LeakDetector;
use toolgate_guard::net::UrlProblem;
use toolgate_store::AuditRecord;
use toolgate_tools::custom::SecretSource;
use toolgate_wasm::{
    CredentialLocation, EndpointPattern, HttpCapability, HttpClient, HttpOrigin, HttpRequest, HttpResponse,
};

/// Where [`GuestHttp`] writes its audit rows (the gate's audit log).
pub type AuditSink = Arc<dyn Fn(AuditRecord) + Send + Sync>;

/// The most decoded body bytes a guest receives; a larger response is an error.
pub const MAX_RESPONSE_BYTES: u64 = 4 << 20;

/// What replaces an injected credential found in a response.
const CREDENTIAL_MARKER: &[u8] = b"[REDACTED:http-credential]";

/// Request headers a guest may never set (credentials are the host's; `host` is the URL's).
fn refused_request_header(name: &str) -> bool {
    matches!(name, "authorization" | "cookie" | "host") || name.starts_with("proxy-")
}

/// The [`HttpClient`] of WASM tools: allowlist, credentials, leak scanning, the SSRF-safe
/// fetcher. Cheap to share behind an `Arc`.
pub struct GuestHttp {
    fetcher: Fetcher,
    secrets: Arc<dyn SecretSource>,
    leaks: Arc<LeakDetector>,
    audit: Option<AuditSink>,
}

impl std::fmt::Debug for GuestHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestHttp").field("policy", self.fetcher.policy()).finish_non_exhaustive()
    }
}

impl GuestHttp {
    /// Sends through `fetcher` (its policy decides which addresses are reachable), with
    /// credentials read from `secrets`; `leaks` (the gate's detector) refuses outgoing and
    /// redacts incoming credentials.
    pub fn new(fetcher: Fetcher, secrets: Arc<dyn SecretSource>, leaks: Arc<LeakDetector>) -> Self {
        GuestHttp { fetcher, secrets, leaks, audit: None }
    }

    /// Writes one audit row per request (sent, refused, failed or cancelled) to `sink`.
    pub fn with_audit(mut self, sink: AuditSink) -> Self {
        self.audit = Some(sink);
        self
    }

    /// The value of the secret `name`, or why there is none.
    fn secret(&self, name: &str) -> Result<String, String> {
        match self.secrets.secret(name) {
            Ok(Some(v)) if !v.is_empty() => Ok(v),
            Ok(_) => Err(format!(
                "the credential `{name}` this tool's http capability names is not stored; \
                 nothing was sent (a person stores it with `toolgate tools secret {name}`)"
            )),
            Err(e) => Err(format!("the credential `{name}` cannot be read: {e}; nothing was sent")),
        }
    }
}

/// A request the allowlist lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The URL to send: the normalized path, no fragment.
    pub url: url::Url,
    /// The host as matched (lowercase, no trailing dot, no brackets).
    pub host: String,
    /// The decoded, normalized path the prefix was matched against.
    pub path: String,
    /// The method, upper case.
    pub method: String,
}

/// Checks `method` and `url` against `cap` (no I/O): the steps 1 to 3 of the module docs.
/// The error is a message for the guest.
pub fn check_request(cap: &HttpCapability, method: &str, url: &str) -> Result<Allowed, String> {
    let method = method.trim().to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_') {
        return Err(format!("`{method}` is not an HTTP method"));
    }
    if matches!(method.as_str(), "CONNECT" | "TRACE") {
        return Err(format!("method {method} is never allowed"));
    }
    let (mut url, _) = toolgate_guard::net::parse_http_url(url).map_err(|e| match e {
        UrlProblem::Userinfo => "refused URL: URLs with a user name or password are refused; credentials are added by \
                                 the host from the tool's capability"
            .to_owned(),
        e => format!("refused URL: {e}"),
    })?;
    if url.scheme() == "http" && !cap.allow_insecure {
        return Err(format!(
            "`{}` uses plain http; this tool may only use https (its capability does not set allow_insecure)",
            shorten(url.as_str())
        ));
    }
    url.set_fragment(None);
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.trim_end_matches('.').to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err("the URL has no host".into()),
    };
    let (encoded, path) = normalize_path(url.path())?;
    url.set_path(&encoded);

    let for_host: Vec<&EndpointPattern> = cap.allow.iter().filter(|e| host_matches(&e.host, &host)).collect();
    if for_host.is_empty() {
        let allowed: Vec<&str> = cap.allow.iter().map(|e| e.host.as_str()).collect();
        return Err(format!("host `{host}` is not in this tool's http allowlist (allowed: {})", allowed.join(", ")));
    }
    let for_path: Vec<&EndpointPattern> = for_host
        .iter()
        .copied()
        .filter(|e| e.path_prefix.as_deref().is_none_or(|p| prefix_matches(p, &path)))
        .collect();
    if for_path.is_empty() {
        let prefixes: Vec<&str> = for_host.iter().filter_map(|e| e.path_prefix.as_deref()).collect();
        return Err(format!(
            "path `{path}` is outside what this tool may call on `{host}` (allowed prefixes: {})",
            prefixes.join(", ")
        ));
    }
    if !for_path.iter().any(|e| e.methods.is_empty() || e.methods.contains(&method)) {
        let mut methods: Vec<&str> = for_path.iter().flat_map(|e| e.methods.iter().map(String::as_str)).collect();
        methods.dedup();
        return Err(format!("method {method} is not allowed for `{host}{path}` (allowed: {})", methods.join(", ")));
    }
    Ok(Allowed { url, host, path, method })
}

/// Whether `host` (lowercase, no trailing dot) matches the pattern: exactly, or for
/// `*.example.com` any subdomain of `example.com` (not `example.com` itself).
fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.trim_start_matches('[').trim_end_matches(']');
    match pattern.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1 && host.ends_with(suffix) && host.ends_with(&format!(".{suffix}"))
        }
        None => host == pattern,
    }
}

/// Whether the decoded, normalized `path` is under `prefix` by whole segments.
fn prefix_matches(prefix: &str, path: &str) -> bool {
    let base: String = prefix.split('/').filter(|s| !s.is_empty() && *s != ".").fold(String::new(), |mut acc, s| {
        acc.push('/');
        acc.push_str(s);
        acc
    });
    base.is_empty() || path == base || path.strip_prefix(&base).is_some_and(|rest| rest.starts_with('/'))
}

/// The URL path (already parsed, dot segments resolved) normalized: `(encoded, decoded)`.
/// Refuses encoded separators, NUL and control characters, double encoding, dot segments
/// that survived decoding, and segments that are not UTF-8.
fn normalize_path(raw: &str) -> Result<(String, String), String> {
    let lower = raw.to_ascii_lowercase();
    for (code, what) in [("%2f", "an encoded `/` (%2F)"), ("%5c", "an encoded `\\` (%5C)"), ("%00", "an encoded NUL")] {
        if lower.contains(code) {
            return Err(format!("the path `{}` contains {what}; refused", shorten(raw)));
        }
    }
    if lower.contains("%25") {
        return Err(format!("the path `{}` is percent-encoded twice (%25); refused", shorten(raw)));
    }
    let mut encoded = String::new();
    let mut decoded = String::new();
    for segment in raw.split('/').filter(|s| !s.is_empty()) {
        let text = percent_decode(segment)
            .ok_or_else(|| format!("the path `{}` has an invalid percent-encoding or is not UTF-8", shorten(raw)))?;
        if text == "." || text == ".." {
            return Err(format!("the path `{}` has a `{text}` segment; refused", shorten(raw)));
        }
        if text.chars().any(|c| c.is_control() || c == '\\' || c == '/') {
            return Err(format!("the path `{}` contains control characters or separators; refused", shorten(raw)));
        }
        encoded.push('/');
        encoded.push_str(segment);
        decoded.push('/');
        decoded.push_str(&text);
    }
    if raw.ends_with('/') || encoded.is_empty() {
        encoded.push('/');
        decoded.push('/');
    }
    Ok((encoded, decoded))
}

/// `%XX` decoded, as UTF-8; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn shorten(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Standard base64 with padding (for `Authorization: Basic`).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Replaces every occurrence of each of `needles` in `hay`.
fn replace_all(hay: &[u8], needles: &[Vec<u8>]) -> Vec<u8> {
    let mut out = hay.to_vec();
    for needle in needles.iter().filter(|n| !n.is_empty()) {
        if out.windows(needle.len()).all(|w| w != needle.as_slice()) {
            continue;
        }
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(needle) {
                next.extend_from_slice(CREDENTIAL_MARKER);
                i += needle.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    out
}

#[async_trait::async_trait]
impl HttpClient for GuestHttp {
    async fn send(
        &self,
        origin: HttpOrigin<'_>,
        cap: &HttpCapability,
        req: HttpRequest,
    ) -> Result<HttpResponse, String> {
        // Written when dropped: a call cancelled with this request in flight still leaves it.
        let mut row = self.audit.as_ref().map(|sink| AuditRow::new(Arc::clone(sink), origin, &req, &self.leaks));
        let cancel = origin.ctx.map(|c| c.cancel.clone()).unwrap_or_default();
        let result = self.exchange(cap, req, &cancel).await;
        if let Some(row) = &mut row {
            row.finish(&result, &self.leaks);
        }
        result.map_err(|f| f.message)
    }

    fn refused(&self, origin: HttpOrigin<'_>, req: &HttpRequest, reason: &str) {
        if let Some(sink) = &self.audit {
            let mut row = AuditRow::new(Arc::clone(sink), origin, req, &self.leaks);
            row.finish(&Err(Failure::refused(reason.to_owned())), &self.leaks);
        }
    }
}

/// Why a request did not come back: refused by a rule (nothing was sent) or failed in the
/// fetcher.
struct Failure {
    refused: bool,
    /// The fetch was cancelled (the call's token), as the fetcher's typed error says.
    cancelled: bool,
    message: String,
}

impl Failure {
    fn refused(message: String) -> Self {
        Failure { refused: true, cancelled: false, message }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::refused(message)
    }
}

/// The audit row of one guest request. It starts as `cancelled` and is written when dropped,
/// so a request whose call was dropped mid-flight is recorded too.
struct AuditRow {
    sink: AuditSink,
    record: AuditRecord,
    started: Instant,
    /// `METHOD URL` for the detail line.
    line: String,
}

impl AuditRow {
    fn new(sink: AuditSink, origin: HttpOrigin<'_>, req: &HttpRequest, leaks: &LeakDetector) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let (url, host) = audit_url(&req.url);
        let url = leaks.redact(&url).text;
        let method: String = req.method.trim().to_ascii_uppercase().chars().take(16).collect();
        let mut record = AuditRecord {
            ts_ms: now.as_millis() as i64,
            tool: origin.tool.to_owned(),
            params: serde_json::json!({"method": method, "url": url}).to_string(),
            decision: "wasm http: cancelled while in flight".into(),
            outcome: "cancelled".into(),
            subject: host,
            ..AuditRecord::default()
        };
        match origin.ctx {
            Some(ctx) => {
                let call =
                    if ctx.call_id.is_empty() { format!("wasm-{}", now.as_nanos()) } else { ctx.call_id.clone() };
                record.id = format!("{call}.http{}", origin.index);
                record.user = ctx.identity.user.clone();
                record.agent = ctx.identity.agent.clone();
                record.session = ctx.identity.session.clone();
                record.provider = ctx.provider.clone();
            }
            None => record.id = format!("wasm-{}.http{}", now.as_nanos(), origin.index),
        }
        AuditRow { sink, record, started: Instant::now(), line: format!("{method} {url}") }
    }

    fn finish(&mut self, result: &Result<HttpResponse, Failure>, leaks: &LeakDetector) {
        let r = &mut self.record;
        match result {
            Ok(resp) => {
                r.decision = "wasm http: allowed".into();
                r.outcome = "ok".into();
                r.output_bytes = resp.body.len() as i64;
                r.detail = Some(format!("{} -> {}, {} bytes", self.line, resp.status, resp.body.len()));
            }
            Err(f) => {
                let message = leaks.redact(&shorten(&f.message)).text;
                if f.refused {
                    r.decision = "wasm http: refused".into();
                    r.outcome = "denied".into();
                    r.detail = Some(format!("{} refused: {message}", self.line));
                } else {
                    r.decision = "wasm http: allowed; the request failed".into();
                    r.outcome = if f.cancelled { "cancelled" } else { "external_service" }.into();
                    r.detail = Some(format!("{} failed: {message}", self.line));
                }
                r.error = Some(message);
            }
        }
    }
}

impl Drop for AuditRow {
    fn drop(&mut self) {
        self.record.duration_us = self.started.elapsed().as_micros() as i64;
        if self.record.detail.is_none() {
            self.record.detail = Some(format!("{} cancelled", self.line));
        }
        (self.sink)(std::mem::take(&mut self.record));
    }
}

/// The URL as the audit log keeps it: no userinfo, no fragment, query values replaced by `*`
/// (a guest may put anything there), at most 200 characters; and its host.
fn audit_url(raw: &str) -> (String, Option<String>) {
    match url::Url::parse(raw.trim()) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_fragment(None);
            if u.query().is_some() {
                let keys: Vec<String> = u.query_pairs().map(|(k, _)| format!("{k}=*")).collect();
                let query = keys.join("&");
                u.set_query((!query.is_empty()).then_some(query.as_str()));
            }
            (shorten(u.as_str()), u.host_str().map(str::to_owned))
        }
        Err(_) => {
            let head = raw.split(['?', '#']).next().unwrap_or_default();
            (shorten(head.rsplit('@').next().unwrap_or_default()), None)
        }
    }
}

impl GuestHttp {
    /// Steps 1 to 8 of the module docs.
    async fn exchange(
        &self,
        cap: &HttpCapability,
        req: HttpRequest,
        cancel: &CancellationToken,
    ) -> Result<HttpResponse, Failure> {
        let Allowed { mut url, host, method, .. } = check_request(cap, &req.method, &req.url)?;

        // What the host injects for this endpoint, and so what the guest may not set.
        let credentials: Vec<_> = cap.credentials.iter().filter(|c| host_matches(&c.host, &host)).collect();
        let mut injected_headers: Vec<String> = Vec::new();
        let mut injected_query: Vec<String> = Vec::new();
        for c in &credentials {
            match &c.location {
                CredentialLocation::Bearer {} | CredentialLocation::Basic { .. } => {
                    injected_headers.push("authorization".into());
                }
                CredentialLocation::Header { name, .. } => injected_headers.push(name.trim().to_ascii_lowercase()),
                CredentialLocation::Query { name } => injected_query.push(name.clone()),
            }
        }
        let mut headers = Vec::with_capacity(req.headers.len() + credentials.len());
        for (name, value) in &req.headers {
            let lower = name.trim().to_ascii_lowercase();
            if injected_headers.contains(&lower) {
                return Err(format!(
                    "the header `{name}` is set by the host for `{host}` (a credential this tool never sees); \
                     do not send it"
                )
                .into());
            }
            if refused_request_header(&lower) {
                return Err(format!(
                    "a WASM tool cannot set the header `{name}`; credentials are added by the host from the \
                     tool's capability"
                )
                .into());
            }
            headers.push((name.clone(), value.clone()));
        }
        if let Some(q) = url.query_pairs().find(|(k, _)| injected_query.iter().any(|n| n == k.as_ref())) {
            return Err(format!(
                "the query parameter `{}` is set by the host for `{host}` (a credential this tool never sees); \
                 do not send it",
                q.0
            )
            .into());
        }

        // Nothing the guest sends may carry a credential.
        let mut outgoing = format!("{url}\n");
        for (k, v) in &headers {
            outgoing.push_str(&format!("{k}: {v}\n"));
        }
        if let Some(body) = &req.body {
            outgoing.push_str(&String::from_utf8_lossy(body));
        }
        let mut rules: Vec<&str> = self.leaks.scan(&outgoing).into_iter().map(|f| f.rule_id).collect();
        rules.dedup();
        if !rules.is_empty() {
            return Err(format!(
                "refused: the request contains a credential (leak rule {}); nothing was sent. A WASM tool gets \
                 credentials only through its capability's `credentials`, added by the host",
                rules.join(", ")
            )
            .into());
        }

        // Credentials, added last, and what to redact if the server echoes them.
        let mut redact: Vec<Vec<u8>> = Vec::new();
        for c in &credentials {
            let secret = self.secret(&c.secret)?;
            redact.push(secret.clone().into_bytes());
            match &c.location {
                CredentialLocation::Bearer {} => headers.push(("authorization".into(), format!("Bearer {secret}"))),
                CredentialLocation::Basic { username } => {
                    let encoded = base64(format!("{username}:{secret}").as_bytes());
                    redact.push(encoded.clone().into_bytes());
                    headers.push(("authorization".into(), format!("Basic {encoded}")));
                }
                CredentialLocation::Header { name, prefix } => {
                    headers.push((name.trim().to_owned(), format!("{prefix}{secret}")));
                }
                CredentialLocation::Query { name } => {
                    url.query_pairs_mut().append_pair(name, &secret);
                    let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
                    redact.push(encoded.into_bytes());
                }
            }
        }
        // Longest first, so a value that contains another is replaced whole.
        redact.sort_by_key(|v| std::cmp::Reverse(v.len()));
        redact.dedup();

        let mut request = Request::get(url.to_string());
        request.method = method;
        request.headers = headers;
        request.body = req.body;
        request.redirects = Redirects::Return;
        request.max_bytes = Some(MAX_RESPONSE_BYTES);
        request.overflow = Overflow::Fail;
        request.require_https = !cap.allow_insecure;
        // The call's token: cancelling the call closes the connection at once (a dropped call,
        // the gate's timeout, drops this future and the connection with it too).
        let response = self.fetcher.fetch(request, cancel).await.map_err(|e| Failure {
            refused: false,
            cancelled: matches!(e, toolgate_fetch::FetchError::Cancelled),
            // The fetcher's words may quote the URL, which may hold a query credential.
            message: String::from_utf8_lossy(&replace_all(e.to_string().as_bytes(), &redact)).into_owned(),
        })?;
        tracing::debug!(status = response.status, url = %shorten(&String::from_utf8_lossy(&replace_all(response.url.as_str().as_bytes(), &redact))), "wasm http");

        let mut headers = Vec::new();
        for (name, value) in response.headers {
            if toolgate_fetch::is_credential_header(&name) {
                continue;
            }
            let value = String::from_utf8_lossy(&replace_all(value.as_bytes(), &redact)).into_owned();
            headers.push((name, self.leaks.redact(&value).text));
        }
        let body = replace_all(&response.body, &redact);
        let body = match String::from_utf8(body) {
            Ok(text) => self.leaks.redact(&text).text.into_bytes(),
            Err(e) => {
                let body = e.into_bytes();
                let mut rules: Vec<&str> =
                    self.leaks.scan(&String::from_utf8_lossy(&body)).into_iter().map(|f| f.rule_id).collect();
                rules.dedup();
                if !rules.is_empty() {
                    return Err(format!(
                        "the response (status {}) is binary and contains what looks like a credential (leak rule {}); \
                         it is not returned",
                        response.status,
                        rules.join(", ")
                    )
                    .into());
                }
                body
            }
        };
        Ok(HttpResponse { status: response.status, headers, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(json: &str) -> HttpCapability {
        serde_json::from_str(json).expect("capability")
    }

    /// `(method, url)` -> `Ok(sent URL)` or `Err(part of the message)`.
    fn check(cap: &HttpCapability, cases: &[(&str, &str, Result<&str, &str>)]) {
        for (method, url, expect) in cases {
            let got = check_request(cap, method, url).map(|a| a.url.to_string());
            match (expect, &got) {
                (Ok(want), Ok(sent)) => assert_eq!(sent, want, "{method} {url}"),
                (Err(part), Err(msg)) => assert!(msg.contains(part), "{method} {url}: {msg:?} lacks {part:?}"),
                _ => panic!("{method} {url}: expected {expect:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn the_allowlist_table() {
        let api = cap(r#"{"allow": [{"host": "api.example.com", "path_prefix": "/v1/", "methods": ["GET", "POST"]},
                                    {"host": "*.cdn.example.org"},
                                    {"host": "upload.example.com", "path_prefix": "/files", "methods": ["PUT"]}]}"#);
        check(
            &api,
            &[
                ("GET", "https://api.example.com/v1/users?id=3", Ok("https://api.example.com/v1/users?id=3")),
                ("get", "https://API.Example.COM./v1/users", Ok("https://api.example.com./v1/users")),
                ("POST", "https://api.example.com/v1/", Ok("https://api.example.com/v1/")),
                ("GET", "https://api.example.com/v1", Ok("https://api.example.com/v1")),
                ("GET", "https://api.example.com//v1//users/", Ok("https://api.example.com/v1/users/")),
                ("GET", "https://api.example.com/v1/a%20b#frag", Ok("https://api.example.com/v1/a%20b")),
                ("GET", "https://api.example.com:8443/v1/x", Ok("https://api.example.com:8443/v1/x")),
                // Traversal, literal and encoded: resolved before the match, then refused.
                ("GET", "https://api.example.com/v1/../admin", Err("path `/admin` is outside")),
                ("GET", "https://api.example.com/v1/%2e%2e/admin", Err("path `/admin` is outside")),
                ("GET", "https://api.example.com/v1/%2E%2e/%2e%2E/etc", Err("path `/etc` is outside")),
                ("GET", "https://api.example.com/v1/.%2e/admin", Err("path `/admin` is outside")),
                ("GET", "https://api.example.com/v1//../../admin", Err("path `/admin` is outside")),
                ("GET", "https://api.example.com/v1/..%2Fadmin", Err("encoded `/`")),
                ("GET", "https://api.example.com/v1%2fadmin", Err("encoded `/`")),
                ("GET", "https://api.example.com/v1/%5c..%5cadmin", Err("encoded `\\`")),
                ("GET", "https://api.example.com/v1/%252e%252e/admin", Err("twice")),
                ("GET", "https://api.example.com/v1/a%00b", Err("NUL")),
                ("GET", "https://api.example.com/v1/%ff", Err("not UTF-8")),
                // Segment-aware prefixes.
                ("GET", "https://api.example.com/v10/users", Err("path `/v10/users` is outside")),
                ("GET", "https://api.example.com/v1x", Err("outside")),
                ("PUT", "https://upload.example.com/files/a", Ok("https://upload.example.com/files/a")),
                ("PUT", "https://upload.example.com/files", Ok("https://upload.example.com/files")),
                ("PUT", "https://upload.example.com/files2", Err("path `/files2` is outside")),
                // Methods.
                ("DELETE", "https://api.example.com/v1/users", Err("method DELETE is not allowed")),
                ("PUT", "https://api.example.com/v1/users", Err("(allowed: GET, POST)")),
                ("TRACE", "https://x.cdn.example.org/", Err("never allowed")),
                ("G ET", "https://api.example.com/v1/", Err("not an HTTP method")),
                // Hosts: exact, case-insensitive; subdomains only with `*.`.
                ("GET", "https://evil.com/v1/", Err("host `evil.com` is not in this tool's http allowlist")),
                ("GET", "https://api.example.com.evil.com/v1/", Err("not in this tool's http allowlist")),
                ("GET", "https://example.com/v1/", Err("not in this tool's http allowlist")),
                ("GET", "https://a.b.cdn.example.org/any", Ok("https://a.b.cdn.example.org/any")),
                ("GET", "https://cdn.example.org/any", Err("not in this tool's http allowlist")),
                ("GET", "https://xcdn.example.org/any", Err("not in this tool's http allowlist")),
                ("GET", "https://127.0.0.1/v1/", Err("not in this tool's http allowlist")),
                // Scheme and userinfo.
                ("GET", "http://api.example.com/v1/", Err("plain http")),
                ("GET", "ftp://api.example.com/v1/", Err("refused URL")),
                ("GET", "https://user:pw@api.example.com/v1/", Err("refused URL")),
                ("GET", "https://user@api.example.com/v1/", Err("refused URL")),
                ("GET", "not a url", Err("refused URL")),
            ],
        );
        let insecure = cap(r#"{"allow": [{"host": "api.example.com"}], "allow_insecure": true}"#);
        check(&insecure, &[("DELETE", "http://api.example.com/anything", Ok("http://api.example.com/anything"))]);
    }

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, encoded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")]
        {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn injected_values_are_replaced_everywhere() {
        let out = replace_all(b"a SECRET and SECRETSECRET b", &[b"SECRET".to_vec()]);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "a [REDACTED:http-credential] and [REDACTED:http-credential][REDACTED:http-credential] b"
        );
    }
}
