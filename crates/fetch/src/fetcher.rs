//! The [`Fetcher`]: vet, pin, send, follow redirects by hand, stream and decode the body under
//! a cap and a deadline.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;
use toolgate_guard::net::{self, Target, UrlProblem, classify, local_name};
use url::Url;

use crate::decode::{DecodeError, Decoder};
use crate::error::FetchError;
use crate::pin::{PinGuard, PinnedResolver};
use crate::policy::FetchPolicy;

/// Headers that carry credentials: dropped when a redirect leaves the origin.
const CREDENTIAL_HEADERS: [&str; 7] =
    ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token", "x-access-token"];

/// Whether a response header (name in any case) carries or sets a credential, so that a tool
/// must not show it to the model or a guest: the request credential headers above, cookies being
/// set, authentication challenges and answers, and every `proxy-*` header.
pub fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_HEADERS.contains(&name.as_str())
        || matches!(name.as_str(), "set-cookie" | "set-cookie2" | "www-authenticate" | "authentication-info")
        || name.starts_with("proxy-")
}

/// What to do with a 3xx answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Redirects {
    /// Follow up to the policy's `max_redirects`, each hop re-parsed, re-resolved and re-vetted.
    #[default]
    Follow,
    /// Return the 3xx response as it is (its `Location` header tells where).
    Return,
}

/// What happens when the decoded body passes the cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Overflow {
    /// Fail with [`FetchError::TooLarge`].
    #[default]
    Fail,
    /// Keep the first `max_bytes` and set [`Response::truncated`].
    Truncate,
}

/// How often, at most, [`Request::progress`] is called while a body streams in (and once more
/// at its end).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Called with (decoded bytes so far, `Content-Length` if the server sent one).
pub type ProgressFn = Arc<dyn Fn(u64, Option<u64>) + Send + Sync>;

/// One request.
#[derive(Clone)]
pub struct Request {
    /// `GET`, `POST`, ... (validated when sent).
    pub method: String,
    /// The URL, as the caller wrote it.
    pub url: String,
    /// Extra headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// The deadline for the whole exchange including every redirect and the body (default:
    /// the policy's).
    pub timeout: Option<Duration>,
    /// Follow redirects or return them.
    pub redirects: Redirects,
    /// Cap on the decoded body (default: the policy's `max_response_bytes`).
    pub max_bytes: Option<u64>,
    /// What passing the cap does.
    pub overflow: Overflow,
    /// Refuse plain http unless every vetted address is an `allow_private` exception.
    pub require_https: bool,
    /// Rewrite `http:` to `https:` for public hosts (private exceptions keep http).
    pub upgrade_http: bool,
    /// Progress while the body streams in.
    pub progress: Option<ProgressFn>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers.len())
            .field("body", &self.body.as_ref().map(Vec::len))
            .field("timeout", &self.timeout)
            .field("redirects", &self.redirects)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Request {
    /// A `GET` of `url` with every default.
    pub fn get(url: impl Into<String>) -> Request {
        Request {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: None,
            redirects: Redirects::Follow,
            max_bytes: None,
            overflow: Overflow::Fail,
            require_https: false,
            upgrade_http: false,
            progress: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A response, its body decoded (content encoding) and capped.
#[derive(Debug, Clone)]
pub struct Response {
    /// The URL that answered (after redirects).
    pub url: Url,
    /// The HTTP status.
    pub status: u16,
    /// Response headers, names lowercase, in order.
    pub headers: Vec<(String, String)>,
    /// The body after content decoding.
    pub body: Vec<u8>,
    /// The body was cut at the cap ([`Overflow::Truncate`]).
    pub truncated: bool,
    /// Every URL redirected through, in order (not including [`Response::url`]).
    pub redirects: Vec<Url>,
    /// The address connected to, when known (not through a proxy).
    pub remote: Option<SocketAddr>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The media type, lowercase, without parameters (`text/html`).
    pub fn media_type(&self) -> Option<String> {
        self.header("content-type").map(|ct| ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
    }

    /// The body as UTF-8 text (charset from the header, `<meta>`, or detection) and the
    /// encoding's name.
    pub fn text(&self) -> (String, &'static str) {
        crate::charset::decode(&self.body, self.header("content-type"))
    }
}

/// Where a hop goes, once vetted.
#[derive(Debug)]
struct Vetted {
    /// Addresses to connect to (empty when a proxy resolves).
    addrs: Vec<SocketAddr>,
    /// Every address is an `allow_private` exception (not public).
    private: bool,
}

/// The one SSRF-safe HTTP client. Cheap to clone; share one per configuration.
#[derive(Debug, Clone)]
pub struct Fetcher {
    policy: Arc<FetchPolicy>,
    proxy_url: Option<Url>,
    /// Built on the first request: building it loads every root certificate of the system
    /// (tens of milliseconds), which a process that never fetches should not pay.
    client: Arc<OnceLock<reqwest::Client>>,
    resolver: PinnedResolver,
}

impl Fetcher {
    /// A fetcher for `policy`. Fails only on an invalid proxy URL or TLS setup.
    pub fn new(policy: FetchPolicy) -> Result<Fetcher, FetchError> {
        // reqwest is built without a default crypto provider; ring is the workspace's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let proxy_url = match &policy.proxy {
            Some(p) => Some(Url::parse(&p.url).map_err(|e| FetchError::Config(format!("proxy `{}`: {e}", p.url)))?),
            None => None,
        };
        let proxy_host =
            proxy_url.as_ref().and_then(|u| u.host_str()).map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase());
        let resolver = PinnedResolver::new(proxy_host);
        Ok(Fetcher { policy: Arc::new(policy), proxy_url, client: Arc::new(OnceLock::new()), resolver })
    }

    /// The HTTP client, built on first use.
    fn client(&self) -> Result<&reqwest::Client, FetchError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let client = self.build_client()?;
        Ok(self.client.get_or_init(|| client))
    }

    fn build_client(&self) -> Result<reqwest::Client, FetchError> {
        let policy = &self.policy;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .dns_resolver(Arc::new(self.resolver.clone()))
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(policy.user_agent.clone());
        builder = match self.proxy_url.clone() {
            Some(proxy_url) => {
                let policy = Arc::clone(policy);
                let proxy = reqwest::Proxy::custom(move |url| {
                    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_ascii_lowercase();
                    policy.proxied(&host).then(|| proxy_url.clone())
                });
                builder.proxy(proxy)
            }
            // The environment's HTTP(S)_PROXY would bypass pinning: ignored.
            None => builder.no_proxy(),
        };
        builder.build().map_err(|e| FetchError::Config(format!("cannot build the HTTP client: {e}")))
    }

    /// The policy this fetcher enforces.
    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    /// Parses and checks `url` without any I/O (scheme, userinfo, name rules, IP literal,
    /// domain lists): what a tool can tell the model before approval. Names are lowercase.
    pub fn precheck(&self, url: &str) -> Result<(Url, Target), FetchError> {
        let (url, target) = net::parse_http_url(url)?;
        self.check_static(&target)?;
        Ok((url, target))
    }

    fn check_static(&self, target: &Target) -> Result<(), FetchError> {
        let host = match target {
            Target::Name(n) => n.clone(),
            Target::Ip(ip) => ip.to_string(),
        };
        if let Some(why) = self.policy.domain_refusal(&host) {
            return Err(FetchError::Domain { host, why });
        }
        match target {
            // Private literals may be exceptions: decided with the port in `vet`.
            Target::Ip(_) => Ok(()),
            Target::Name(name) => match local_name(name) {
                Some(why) if self.policy.allow_private.is_empty() => {
                    Err(UrlProblem::LocalName { host: name.clone(), why }.into())
                }
                _ => Ok(()),
            },
        }
    }

    /// Resolves once and vets every address.
    async fn vet(&self, url: &Url, target: &Target, deadline: tokio::time::Instant) -> Result<Vetted, FetchError> {
        self.check_static(target)?;
        let port = url.port_or_known_default().unwrap_or(443);
        let (name, addrs): (Option<&str>, Vec<SocketAddr>) = match target {
            Target::Ip(ip) => (None, vec![SocketAddr::new(*ip, port)]),
            Target::Name(name) => {
                if self.policy.proxied(name) {
                    return Ok(Vetted { addrs: Vec::new(), private: false });
                }
                let lookup = tokio::net::lookup_host((name.as_str(), port));
                let addrs = match tokio::time::timeout_at(deadline, lookup).await {
                    Err(_) => return Err(FetchError::Timeout { after: self.policy.timeout }),
                    Ok(Err(e)) => return Err(FetchError::Resolve { host: name.clone(), why: e.to_string() }),
                    Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
                };
                if addrs.is_empty() {
                    return Err(FetchError::Resolve { host: name.clone(), why: "no addresses".into() });
                }
                (Some(name.as_str()), addrs)
            }
        };
        let local = name.and_then(local_name).is_some();
        let mut private = true;
        for addr in &addrs {
            let verdict = classify(addr.ip());
            let allowed = self.policy.allow_private.allows(*addr);
            match verdict.blocked {
                None if !local => private = false,
                _ if allowed => {}
                Some(blocked) => {
                    return Err(match name {
                        Some(host) => FetchError::BlockedAddress { host: host.to_owned(), addr: *addr, blocked },
                        None => UrlProblem::BlockedAddress { host: addr.ip().to_string(), blocked }.into(),
                    });
                }
                None => {
                    // A local name (localhost, single label) answering a public address:
                    // still refused unless that address is an exception.
                    let why = name.and_then(local_name).unwrap_or("a local name");
                    return Err(UrlProblem::LocalName { host: name.unwrap_or_default().to_owned(), why }.into());
                }
            }
        }
        Ok(Vetted { addrs, private })
    }

    /// Resolves `host` once and vets every address for `port` with this fetcher's rules (domain
    /// lists, local names, SSRF ranges, `allow_private`): the addresses a connection may go to
    /// (`proxy::serve_policy`). Refused when a forward proxy would resolve the name instead.
    pub async fn vet_host(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, FetchError> {
        let host = host.trim_matches(['[', ']']);
        let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        let (url, target) = net::parse_http_url(&format!("http://{authority}/"))?;
        let deadline = tokio::time::Instant::now() + self.policy.timeout;
        let vetted = self.vet(&url, &target, deadline).await?;
        if vetted.addrs.is_empty() {
            return Err(FetchError::Config(format!(
                "{host} is reached through the configured forward proxy, which toolgate cannot vet for this connection"
            )));
        }
        Ok(vetted.addrs)
    }

    /// Sends `request`, following redirects as asked, and reads the body under the cap and the
    /// deadline. Cancelling `cancel` drops the connection at once.
    pub async fn fetch(&self, request: Request, cancel: &CancellationToken) -> Result<Response, FetchError> {
        let timeout = request.timeout.unwrap_or(self.policy.timeout);
        let deadline = tokio::time::Instant::now() + timeout;
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(FetchError::Cancelled),
            r = tokio::time::timeout_at(deadline, self.fetch_inner(request, deadline)) => match r {
                Ok(r) => r,
                Err(_) => Err(FetchError::Timeout { after: timeout }),
            },
        }
    }

    async fn fetch_inner(&self, request: Request, deadline: tokio::time::Instant) -> Result<Response, FetchError> {
        let max = request.max_bytes.unwrap_or(self.policy.max_response_bytes);
        let method = reqwest::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| FetchError::Request(format!("`{}` is not an HTTP method", request.method)))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &request.headers {
            let n = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| FetchError::Request(format!("`{name}` is not a valid header name")))?;
            let v = HeaderValue::from_str(value)
                .map_err(|_| FetchError::Request(format!("the value of header `{name}` has invalid characters")))?;
            // Framing and encoding are the fetcher's: a caller cannot smuggle them.
            if matches!(
                n.as_str(),
                "host" | "content-length" | "transfer-encoding" | "connection" | "accept-encoding" | "te" | "upgrade"
            ) {
                continue;
            }
            headers.append(n, v);
        }
        headers.insert(reqwest::header::ACCEPT_ENCODING, HeaderValue::from_static("gzip, deflate, br"));
        let (mut url, mut target) = net::parse_http_url(&request.url)?;
        let mut method = method;
        let mut body = request.body.clone();
        let mut visited: Vec<Url> = Vec::new();
        loop {
            let vetted = self.vet(&url, &target, deadline).await?;
            if url.scheme() == "http" && !vetted.private {
                if request.upgrade_http {
                    let _ = url.set_scheme("https");
                    if url.port() == Some(80) {
                        let _ = url.set_port(None);
                    }
                } else if request.require_https {
                    return Err(FetchError::HttpsRequired { url: url.to_string() });
                }
            }
            let _pin: Option<PinGuard> = match &target {
                Target::Name(name) if !vetted.addrs.is_empty() => Some(self.resolver.pin(name, vetted.addrs.clone())),
                _ => None,
            };
            let mut builder = self.client()?.request(method.clone(), url.clone()).headers(headers.clone());
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let response =
                builder.send().await.map_err(|e| FetchError::Http { url: url.to_string(), why: describe(&e) })?;
            let status = response.status().as_u16();
            let location =
                response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let is_redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
            if request.redirects == Redirects::Follow && is_redirect {
                let Some(location) = location else {
                    return Err(FetchError::Redirect {
                        from: url.to_string(),
                        why: format!("status {status} without a Location header"),
                    });
                };
                if visited.len() >= self.policy.max_redirects {
                    return Err(FetchError::TooManyRedirects { max: self.policy.max_redirects, last: url.to_string() });
                }
                let next = url.join(&location).map_err(|e| FetchError::Redirect {
                    from: url.to_string(),
                    why: format!(
                        "Location `{}` is not a valid URL: {e}",
                        location.chars().take(200).collect::<String>()
                    ),
                })?;
                let next_target = net::url_target(&next)
                    .map_err(|e| FetchError::Redirect { from: url.to_string(), why: e.to_string() })?;
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(FetchError::Redirect {
                        from: url.to_string(),
                        why: format!("downgrade to plain http (`{next}`)"),
                    });
                }
                if next == url || visited.contains(&next) {
                    return Err(FetchError::RedirectLoop { url: next.to_string() });
                }
                if next.origin() != url.origin() {
                    for h in CREDENTIAL_HEADERS {
                        headers.remove(h);
                    }
                }
                if status == 303 || (matches!(status, 301 | 302) && method == reqwest::Method::POST) {
                    method = reqwest::Method::GET;
                    body = None;
                    headers.remove(reqwest::header::CONTENT_TYPE);
                }
                drop(response);
                visited.push(std::mem::replace(&mut url, next));
                target = next_target;
                continue;
            }
            let remote = response.remote_addr();
            let resp_headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            let (body, truncated) = read_body(response, &url, max, request.overflow, request.progress.as_ref()).await?;
            return Ok(Response { url, status, headers: resp_headers, body, truncated, redirects: visited, remote });
        }
    }
}

async fn read_body(
    mut response: reqwest::Response,
    url: &Url,
    max: u64,
    overflow: Overflow,
    progress: Option<&ProgressFn>,
) -> Result<(Vec<u8>, bool), FetchError> {
    let encoding = response
        .headers()
        .get(reqwest::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let length = response.content_length();
    let cap = usize::try_from(max).unwrap_or(usize::MAX);
    let mut decoder =
        Decoder::new(&encoding, cap).ok_or_else(|| FetchError::Encoding { encoding: encoding.clone() })?;
    // Compressed bytes are capped too (a stream of headers-only gzip members inflates to nothing).
    let mut raw: u64 = 0;
    let mut last_report: Option<std::time::Instant> = None;
    let mut reported = 0usize;
    let too_large = |buf: Vec<u8>| match overflow {
        Overflow::Fail => Err(FetchError::TooLarge { max }),
        Overflow::Truncate => Ok((buf, true)),
    };
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => return Err(FetchError::Http { url: url.to_string(), why: describe(&e) }),
        };
        raw += chunk.len() as u64;
        if raw > max.saturating_mul(2).max(1 << 20) {
            return too_large(Vec::new());
        }
        match decoder.push(&chunk) {
            Ok(()) => {}
            Err(DecodeError::Cap(buf)) => return too_large(buf),
            Err(DecodeError::Corrupt(why)) => return Err(FetchError::Decode { encoding, why }),
        }
        if let Some(p) = progress {
            // At most one report per PROGRESS_EVERY (each may become an MCP notification).
            let now = std::time::Instant::now();
            if last_report.is_none_or(|at| now.duration_since(at) >= PROGRESS_EVERY) {
                last_report = Some(now);
                reported = decoder.decoded_len();
                p(reported as u64, length);
            }
        }
    }
    if let Some(p) = progress
        && decoder.decoded_len() != reported
    {
        p(decoder.decoded_len() as u64, length);
    }
    match decoder.finish() {
        Ok(buf) => Ok((buf, false)),
        Err(DecodeError::Cap(buf)) => too_large(buf),
        Err(DecodeError::Corrupt(why)) => Err(FetchError::Decode { encoding, why }),
    }
}

/// reqwest's error with its sources, which carry the useful part ("connection refused").
fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s = s.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = s_source(source);
    }
    text
}

fn s_source<'a>(e: Option<&'a (dyn std::error::Error + 'static)>) -> Option<&'a (dyn std::error::Error + 'static)> {
    e.and_then(|e| e.source())
}
