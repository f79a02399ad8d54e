//! A vetting forward proxy for the processes toolgate contains (bridged MCP servers now, the
//! browser later): HTTP (absolute-form requests) and `CONNECT` tunnels, to the hosts of an
//! allow list only, with the fetcher's address rules.
//!
//! For each request: the target must match an [`AllowHosts`] entry; the name is resolved once
//! and every address vetted ([`toolgate_guard::net::classify`]: a name that resolves to a
//! private, loopback or link-local address is refused unless the entry names that exact
//! address and port); the connection goes to the vetted addresses only (no second lookup). A
//! refusal is an HTTP `403` whose body says why and which setting would allow it, so the
//! contained program's own error names the host.
//!
//! The proxy only relays bytes: TLS inside a tunnel is end to end between the program and the
//! host, and what the program says inside a tunnel or after its first plain-HTTP request (a TLS
//! server name, a later `Host` header) is not inspected: it reaches the vetted address and no
//! other, whatever names it uses there. At most 64 connections are relayed at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use toolgate_guard::net::classify;

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client has to send its request head, and the proxy to connect.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections relayed at once per proxy: each holds two of toolgate's descriptors, and the
/// contained program must not be able to spend them all.
const MAX_CONNECTIONS: usize = 64;

/// One entry of an allow list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A host name (`api.github.com`) or a suffix (`*.npmjs.org`), on one port or, without a
    /// port, on 80 and 443. Its addresses must be public.
    Name { name: String, wildcard: bool, port: Option<u16> },
    /// An exact address and port (`127.0.0.1:8080`): allowed whatever the address is.
    Exact(SocketAddr),
}

/// The hosts a contained program may reach through the proxy.
#[derive(Debug, Clone, Default)]
pub struct AllowHosts {
    entries: Vec<Entry>,
    /// Where the list is configured, for refusals (`[mcp.servers.NAME.sandbox] allow_hosts`).
    setting: String,
}

impl AllowHosts {
    /// Parses `entries` (`host`, `host:port`, `*.domain`, `IP:port`, `[IPv6]:port`); `setting`
    /// names where they are configured, for the refusals' text.
    pub fn parse(entries: &[String], setting: impl Into<String>) -> Result<AllowHosts, String> {
        let mut parsed = Vec::with_capacity(entries.len());
        for raw in entries {
            let entry = raw.trim().to_ascii_lowercase();
            if let Ok(addr) = entry.parse::<SocketAddr>() {
                parsed.push(Entry::Exact(addr));
                continue;
            }
            if entry.trim_matches(['[', ']']).parse::<IpAddr>().is_ok() {
                return Err(format!("`{raw}`: an address needs its port (`{entry}:PORT`)"));
            }
            let (host, port) = match entry.rsplit_once(':') {
                Some((host, port)) => {
                    let port = port.parse::<u16>().map_err(|_| format!("`{raw}`: `{port}` is not a port"))?;
                    (host.to_owned(), Some(port))
                }
                None => (entry.clone(), None),
            };
            let (name, wildcard) = match host.strip_prefix("*.") {
                Some(rest) => (rest.to_owned(), true),
                None => (host, false),
            };
            let valid = !name.is_empty()
                && name.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
            if !valid {
                return Err(format!("`{raw}` is not a host name, `*.domain`, or `IP:port`"));
            }
            parsed.push(Entry::Name { name, wildcard, port });
        }
        Ok(AllowHosts { entries: parsed, setting: setting.into() })
    }

    /// Adds entries (a launcher's registries) to the list.
    pub fn extend(&mut self, more: &AllowHosts) {
        self.entries.extend(more.entries.iter().cloned());
    }

    /// Whether the list is empty (the proxy then refuses everything).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry `host:port` matches, if any.
    fn matching(&self, host: &str, port: u16) -> Option<&Entry> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let ip = host.trim_matches(['[', ']']).parse::<IpAddr>().ok();
        self.entries.iter().find(|entry| match entry {
            Entry::Exact(addr) => ip == Some(addr.ip()) && addr.port() == port,
            Entry::Name { name, wildcard, port: wanted } => {
                let name_matches = if *wildcard {
                    host.strip_suffix(name.as_str()).is_some_and(|rest| rest.ends_with('.'))
                } else {
                    host == *name
                };
                name_matches && wanted.map_or(port == 80 || port == 443, |p| p == port)
            }
        })
    }
}

/// What the proxy did, for the caller's log and error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEvent {
    /// `host:port` as asked.
    pub target: String,
    /// `None` when it was relayed; otherwise why not.
    pub refused: Option<String>,
}

/// The last events of one proxy (at most 32), newest last, each numbered in order: a caller
/// marks where it is ([`ProxyLog::mark`]) and later reads what came after
/// ([`ProxyLog::events_since`]), which stays right however many events the window dropped.
#[derive(Debug, Default)]
pub struct ProxyLog {
    events: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// The number of events ever pushed.
    pushed: u64,
    recent: std::collections::VecDeque<ProxyEvent>,
}

impl ProxyLog {
    const KEPT: usize = 32;

    fn push(&self, event: ProxyEvent) {
        let mut window = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if window.recent.len() == Self::KEPT {
            window.recent.pop_front();
        }
        window.recent.push_back(event);
        window.pushed += 1;
    }

    /// The events still kept.
    pub fn events(&self) -> Vec<ProxyEvent> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).recent.iter().cloned().collect()
    }

    /// Where the log is now, for [`ProxyLog::events_since`].
    pub fn mark(&self) -> u64 {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).pushed
    }

    /// The events pushed after `mark` that are still kept (the newest 32 at most).
    pub fn events_since(&self, mark: u64) -> Vec<ProxyEvent> {
        let window = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let new = usize::try_from(window.pushed.saturating_sub(mark)).unwrap_or(usize::MAX);
        let skip = window.recent.len().saturating_sub(new);
        window.recent.iter().skip(skip).cloned().collect()
    }
}

/// What a proxy lets through.
#[derive(Debug)]
enum Rules {
    /// The hosts of an allow list (contained MCP servers).
    Hosts(Arc<AllowHosts>),
    /// Whatever the fetcher's policy allows (the browser): the web tools' URL policy, the same
    /// resolve-once-and-vet as [`Fetcher::fetch`](crate::Fetcher::fetch).
    Fetch(crate::Fetcher),
}

/// Serves the proxy on `listener` until `cancel`: one task per connection. `name` labels the
/// log lines (the server's name).
pub async fn serve(
    listener: TcpListener,
    allow: Arc<AllowHosts>,
    log: Arc<ProxyLog>,
    name: String,
    cancel: CancellationToken,
) {
    serve_rules(listener, Arc::new(Rules::Hosts(allow)), log, name, cancel).await;
}

/// Serves the proxy on `listener` until `cancel`, letting through what `fetcher`'s policy
/// allows (domain lists, SSRF ranges, `allow_private`), each name resolved once and the
/// connection made to the vetted address: the browser's way out.
pub async fn serve_policy(
    listener: TcpListener,
    fetcher: crate::Fetcher,
    log: Arc<ProxyLog>,
    name: String,
    cancel: CancellationToken,
) {
    serve_rules(listener, Arc::new(Rules::Fetch(fetcher)), log, name, cancel).await;
}

async fn serve_rules(
    listener: TcpListener,
    allow: Arc<Rules>,
    log: Arc<ProxyLog>,
    name: String,
    cancel: CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        // The next connection waits in the listener's backlog until one ends.
        let slot = tokio::select! {
            () = cancel.cancelled() => return,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { return };
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        let (allow, log, name, cancel) = (Arc::clone(&allow), Arc::clone(&log), name.clone(), cancel.clone());
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                () = cancel.cancelled() => {}
                () = relay(client, &allow, &log, &name) => {}
            }
        });
    }
}

/// One client connection: read its request, check it, connect, relay.
async fn relay(mut client: TcpStream, allow: &Rules, log: &ProxyLog, name: &str) {
    let Ok(Ok((head, rest))) = tokio::time::timeout(STEP_TIMEOUT, read_head(&mut client)).await else {
        let _ = respond(&mut client, "400 Bad Request", "toolgate's proxy: no complete request head").await;
        return;
    };
    let request = match Request::parse(&head) {
        Ok(request) => request,
        Err(why) => {
            let _ = respond(&mut client, "400 Bad Request", &format!("toolgate's proxy: {why}")).await;
            return;
        }
    };
    let target = format!("{}:{}", request.host, request.port);
    let upstream = match open(&request.host, request.port, allow).await {
        Ok(upstream) => upstream,
        Err((status, why)) => {
            tracing::warn!(server = %name, "proxy refused {target}: {why}");
            log.push(ProxyEvent { target, refused: Some(why.clone()) });
            let _ =
                respond(&mut client, status, &format!("toolgate's proxy refused {}: {why}\n", request.shown())).await;
            return;
        }
    };
    tracing::info!(server = %name, "proxy: {} {target}", request.method);
    log.push(ProxyEvent { target, refused: None });
    let mut upstream = upstream;
    let started = if request.method == "CONNECT" {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await
    } else {
        let mut out = request.origin_form_head(&head).into_bytes();
        out.extend_from_slice(&rest);
        upstream.write_all(&out).await
    };
    if started.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// Resolves, vets and connects; a refusal is `(HTTP status, why)`.
async fn open(host: &str, port: u16, rules: &Rules) -> Result<TcpStream, (&'static str, String)> {
    let allow = match rules {
        Rules::Hosts(allow) => allow,
        Rules::Fetch(fetcher) => {
            let addrs = fetcher.vet_host(host, port).await.map_err(|e| ("403 Forbidden", e.to_string()))?;
            return connect(host, port, addrs).await;
        }
    };
    let Some(entry) = allow.matching(host, port) else {
        return Err(("403 Forbidden", format!("{host}:{port} is not in {}", allow.setting)));
    };
    let addrs: Vec<SocketAddr> = match entry {
        Entry::Exact(addr) => vec![*addr],
        Entry::Name { .. } => {
            let lookup = tokio::time::timeout(STEP_TIMEOUT, tokio::net::lookup_host((host, port))).await;
            let addrs: Vec<SocketAddr> = match lookup {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => return Err(("502 Bad Gateway", format!("{host} does not resolve: {e}"))),
                Err(_) => return Err(("504 Gateway Timeout", format!("resolving {host} took too long"))),
            };
            // Every address must be public: a name is not a way to reach the host's network.
            if let Some((addr, blocked)) = addrs.iter().find_map(|a| classify(a.ip()).blocked.map(|b| (a, b))) {
                return Err((
                    "403 Forbidden",
                    format!(
                        "{host} resolves to {}, which is {}; only an entry naming that exact address and port (`{addr}`) allows it",
                        addr.ip(),
                        blocked.describe()
                    ),
                ));
            }
            addrs
        }
    };
    connect(host, port, addrs).await
}

/// Connects to the first of the vetted `addrs` that answers.
async fn connect(host: &str, port: u16, addrs: Vec<SocketAddr>) -> Result<TcpStream, (&'static str, String)> {
    let mut last = String::from("no address");
    for addr in addrs {
        match tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("connecting to {addr}: {e}"),
            Err(_) => last = format!("connecting to {addr} took too long"),
        }
    }
    Err(("502 Bad Gateway", format!("cannot reach {host}:{port} ({last})")))
}

/// Reads up to the end of the head; returns the head and the bytes read after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            let head = String::from_utf8(buf).map_err(|_| std::io::Error::other("a request head that is not UTF-8"))?;
            return Ok((head, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("a request head over 64 KiB"));
        }
    }
}

async fn respond(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await
}

/// The request line of a proxy request.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    host: String,
    port: u16,
    /// The path and query of an absolute-form request (`None` for `CONNECT`).
    path: Option<String>,
}

impl Request {
    fn parse(head: &str) -> Result<Request, String> {
        let line = head.lines().next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("a malformed request line".to_owned());
        };
        if !version.starts_with("HTTP/1.") {
            return Err(format!("unsupported protocol `{version}`"));
        }
        if method == "CONNECT" {
            let (host, port) = split_host_port(target).ok_or_else(|| format!("`CONNECT {target}` names no port"))?;
            return Ok(Request { method: method.to_owned(), host, port, path: None });
        }
        let Some(rest) = target.strip_prefix("http://") else {
            return Err(format!("`{target}` is not an absolute http:// URL (use CONNECT for https)"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("credentials in the URL are not relayed".to_owned());
        }
        let (host, port) = split_host_port(authority).unwrap_or_else(|| (authority.to_owned(), 80));
        Ok(Request { method: method.to_owned(), host, port, path: Some(path.to_owned()) })
    }

    /// The head with the request line in origin form and the proxy's own headers left out.
    fn origin_form_head(&self, head: &str) -> String {
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let version = first.rsplit(' ').next().unwrap_or("HTTP/1.1");
        let mut out = format!("{} {} {version}\r\n", self.method, self.path.as_deref().unwrap_or("/"));
        for line in lines {
            let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
            if name == "proxy-connection" || name == "proxy-authorization" {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        // `head` ends with an empty line, which the loop copied.
        out.truncate(out.trim_end_matches("\r\n").len());
        out.push_str("\r\n\r\n");
        out
    }

    fn shown(&self) -> String {
        format!("{} {}:{}", self.method, self.host, self.port)
    }
}

/// `host:port` or `[v6]:port`.
fn split_host_port(authority: &str) -> Option<(String, u16)> {
    let (host, port) = authority.rsplit_once(':')?;
    let port = port.parse().ok()?;
    Some((host.trim_matches(['[', ']']).to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> AllowHosts {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        AllowHosts::parse(&entries, "allow_hosts").unwrap_or_else(|e| panic!("{e}"))
    }

    fn event(n: usize) -> ProxyEvent {
        ProxyEvent { target: format!("h{n}:80"), refused: n.is_multiple_of(2).then(|| "blocked".to_owned()) }
    }

    #[test]
    fn events_since_a_mark_stay_right_after_the_window_drops_old_ones() {
        let log = ProxyLog::default();
        for n in 0..40 {
            log.push(event(n));
        }
        let mark = log.mark();
        assert!(log.events_since(mark).is_empty(), "nothing after the mark yet");
        log.push(event(40));
        log.push(event(41));
        // By position in the 32-event window these would be lost; by number they are the two new.
        assert_eq!(log.events_since(mark), vec![event(40), event(41)]);
        for n in 42..100 {
            log.push(event(n));
        }
        let since = log.events_since(mark);
        assert_eq!(since.len(), 32, "at most the window, the newest");
        assert_eq!(since.last(), Some(&event(99)));
    }

    #[test]
    fn entries_match_by_name_suffix_port_and_exact_address() {
        let a = allow(&["api.github.com", "*.npmjs.org", "files.example:8443", "127.0.0.1:8080"]);
        assert!(a.matching("api.github.com", 443).is_some() && a.matching("API.GitHub.com.", 80).is_some());
        assert!(a.matching("api.github.com", 22).is_none(), "a name without a port is 80 and 443");
        assert!(a.matching("registry.npmjs.org", 443).is_some());
        assert!(a.matching("npmjs.org", 443).is_none() && a.matching("evilnpmjs.org", 443).is_none());
        assert!(a.matching("files.example", 8443).is_some() && a.matching("files.example", 443).is_none());
        assert!(a.matching("127.0.0.1", 8080).is_some() && a.matching("127.0.0.1", 8081).is_none());
        assert!(AllowHosts::parse(&["10.0.0.1".into()], "x").unwrap_err().contains("needs its port"));
        assert!(AllowHosts::parse(&["a b".into()], "x").is_err());
        assert!(AllowHosts::parse(&["host:99999".into()], "x").is_err());
    }

    #[test]
    fn request_lines_parse_and_rewrite() {
        let r = Request::parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.method.as_str(), r.host.as_str(), r.port), ("CONNECT", "pypi.org", 443));
        let head = "GET http://127.0.0.1:9/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nProxy-Connection: keep-alive\r\n\r\n";
        let r = Request::parse(head).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.1", 9));
        assert_eq!(r.origin_form_head(head), "GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n");
        assert!(Request::parse("GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(Request::parse("GET http://u:p@h/ HTTP/1.1\r\n\r\n").is_err());
    }
}
