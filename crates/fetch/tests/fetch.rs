//! The fetcher against real HTTP servers on loopback (port 0). Loopback is private, so each
//! test lets exactly its server's `IP:port` through `allow_private`: everything else of the
//! SSRF logic (parsing, vetting, redirects, pinning) runs as it does for public hosts.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use support::{Reply, serve};
use tokio_util::sync::CancellationToken;
use toolgate_fetch::{AllowPrivate, FetchError, FetchPolicy, Fetcher, Overflow, Redirects, Request};

fn fetcher(allow: &[String]) -> Fetcher {
    let policy = FetchPolicy { allow_private: AllowPrivate::parse(allow).unwrap(), ..FetchPolicy::default() };
    Fetcher::new(policy).unwrap()
}

async fn get(f: &Fetcher, url: &str) -> Result<toolgate_fetch::Response, FetchError> {
    f.fetch(Request::get(url), &CancellationToken::new()).await
}

#[tokio::test]
async fn fetches_from_an_allowed_private_port() {
    let s = serve(|_| Reply::ok("text/plain; charset=utf-8", "hello")).await;
    let f = fetcher(&[s.allow()]);
    let r = get(&f, &s.url("/a?b=1")).await.unwrap();
    assert_eq!((r.status, r.body.as_slice(), r.url.as_str()), (200, &b"hello"[..], s.url("/a?b=1").as_str()));
    assert_eq!(r.text().0, "hello");
    assert_eq!(r.remote, Some(s.addr));
    let seen = s.seen();
    assert!(seen[0].header("user-agent").unwrap().starts_with("toolgate/"));
    assert_eq!(seen[0].header("accept-encoding").as_deref(), Some("gzip, deflate, br"));
}

#[tokio::test]
async fn private_addresses_are_refused_before_connecting() {
    let s = serve(|_| Reply::ok("text/plain", "secret")).await;
    let port = s.addr.port();
    let none = fetcher(&[]);
    let other_port = fetcher(&[format!("127.0.0.1:{}", port.wrapping_add(1))]);
    for f in [&none, &other_port] {
        for url in [
            s.url("/"),
            format!("http://0x7f.1:{port}/"),
            format!("http://2130706433:{port}/"),
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            format!("http://localhost:{port}/"),
            format!("http://localhost.:{port}/"),
        ] {
            let e = get(f, &url).await.unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("loopback") || msg.contains("localhost") || msg.contains("this machine"),
                "{url}: {msg}"
            );
        }
    }
    for url in
        ["http://169.254.169.254/latest/meta-data/", "http://[fd00::1]/", "http://10.0.0.1/", "http://198.18.0.1/"]
    {
        let e = get(&none, url).await.unwrap_err();
        assert!(matches!(e, FetchError::Url(_)), "{url}: {e}");
    }
    assert_eq!(s.connections(), 0, "nothing may connect to a blocked address");
}

#[tokio::test]
async fn bad_urls_are_explained() {
    let f = fetcher(&[]);
    for (url, want) in [
        ("file:///etc/passwd", "scheme is not supported"),
        ("gopher://example.com/", "scheme is not supported"),
        ("data:text/plain,hi", "scheme is not supported"),
        ("https://user:pw@example.com/", "credentials"),
        ("http://[fe80::1%25eth0]/", "not a valid URL"),
        ("::nonsense", "not a valid URL"),
        ("http://intranet/", "single-label"),
    ] {
        let e = get(&f, url).await.unwrap_err().to_string();
        assert!(e.contains(want), "{url}: {e}");
    }
}

#[tokio::test]
async fn redirects_are_revetted_at_every_hop() {
    let target = serve(|_| Reply::ok("text/plain", "reached")).await;
    let tport = target.addr.port();
    let blocked_forms = [
        target.url("/"),
        format!("http://0x7f000001:{tport}/"),
        format!("http://[::1]:{tport}/"),
        format!("http://localhost:{tport}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "file:///etc/passwd".to_owned(),
        "http://user:pw@example.com/".to_owned(),
    ];
    for form in blocked_forms {
        let form2 = form.clone();
        let s = serve(move |_| Reply::redirect(302, &form2)).await;
        let f = fetcher(&[s.allow()]);
        let e = get(&f, &s.url("/")).await.unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, FetchError::Url(_) | FetchError::Redirect { .. } | FetchError::BlockedAddress { .. }),
            "{form}: {msg}"
        );
    }
    assert_eq!(target.connections(), 0, "a redirect reached a blocked address");
}

#[tokio::test]
async fn redirect_chains_loops_and_limits() {
    let s = serve(|path| {
        let n: u32 = path.trim_start_matches("/hop/").parse().unwrap_or(0);
        match path {
            "/loop-a" => Reply::redirect(301, "/loop-b"),
            "/loop-b" => Reply::redirect(301, "/loop-a"),
            "/end" => Reply::ok("text/plain", "end"),
            "/no-location" => Reply::Full { status: 302, headers: vec![], body: vec![] },
            _ => Reply::redirect(302, &format!("/hop/{}", n + 1)),
        }
    })
    .await;
    let f = fetcher(&[s.allow()]);
    let e = get(&f, &s.url("/hop/0")).await.unwrap_err();
    assert!(matches!(e, FetchError::TooManyRedirects { max: 10, .. }), "{e}");
    let e = get(&f, &s.url("/loop-a")).await.unwrap_err();
    assert!(matches!(e, FetchError::RedirectLoop { .. }), "{e}");
    let e = get(&f, &s.url("/no-location")).await.unwrap_err();
    assert!(e.to_string().contains("without a Location"), "{e}");
    // Returned, not followed, when asked.
    let req = Request { redirects: Redirects::Return, ..Request::get(s.url("/hop/3")) };
    let r = f.fetch(req, &CancellationToken::new()).await.unwrap();
    assert_eq!((r.status, r.header("location")), (302, Some("/hop/4")));
}

#[tokio::test]
async fn credentials_are_dropped_on_a_cross_origin_hop() {
    let other = serve(|_| Reply::ok("text/plain", "other")).await;
    let dest = other.url("/landing");
    let s = serve(move |path| {
        if path == "/same" {
            Reply::redirect(307, "/final")
        } else if path == "/final" {
            Reply::ok("text/plain", "ok")
        } else {
            Reply::redirect(302, &dest)
        }
    })
    .await;
    let f = fetcher(&[s.allow(), other.allow()]);
    let req = Request::get(s.url("/cross"))
        .header("Authorization", "Bearer abc")
        .header("Cookie", "sid=1")
        .header("X-Trace", "t");
    let r = f.fetch(req, &CancellationToken::new()).await.unwrap();
    assert_eq!(r.body, b"other");
    assert_eq!(r.redirects.len(), 1);
    let seen = other.seen();
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(seen[0].header("cookie"), None);
    assert_eq!(seen[0].header("x-trace").as_deref(), Some("t"));
    // Same origin keeps them, and 307 keeps the method and body.
    let mut req = Request::get(s.url("/same")).header("Authorization", "Bearer abc");
    req.method = "POST".into();
    req.body = Some(b"payload".to_vec());
    f.fetch(req, &CancellationToken::new()).await.unwrap();
    let last = s.seen().pop().unwrap();
    assert!(last.line.starts_with("POST /final"), "{}", last.line);
    assert_eq!(last.body, b"payload");
    assert_eq!(last.header("authorization").as_deref(), Some("Bearer abc"));
}

#[tokio::test]
async fn the_cap_counts_decoded_bytes() {
    let big = vec![b'a'; 20 * 1024 * 1024];
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&vec![0u8; 64 * 1024 * 1024]).unwrap();
        e.finish().unwrap()
    };
    assert!(gz.len() < 1024 * 1024, "the bomb is small on the wire: {}", gz.len());
    let s = serve(move |path| match path {
        "/big" => Reply::ok("text/plain", big.clone()),
        _ => Reply::ok("text/plain", gz.clone()).with_header("content-encoding", "gzip"),
    })
    .await;
    let f = fetcher(&[s.allow()]);
    let cap = 1024 * 1024;
    for path in ["/big", "/bomb"] {
        let req = Request { max_bytes: Some(cap), ..Request::get(s.url(path)) };
        let started = Instant::now();
        let e = f.fetch(req.clone(), &CancellationToken::new()).await.unwrap_err();
        assert!(matches!(e, FetchError::TooLarge { max } if max == cap), "{path}: {e}");
        assert!(started.elapsed() < Duration::from_secs(20));
        let r = f.fetch(Request { overflow: Overflow::Truncate, ..req }, &CancellationToken::new()).await.unwrap();
        assert!(r.truncated);
        assert_eq!(r.body.len() as u64, cap, "{path}");
    }
}

#[tokio::test]
async fn gzip_and_both_deflates_decode() {
    let text = "Grüße aus dem Netz. ".repeat(500);
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let zlib = {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let raw = {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let s = serve(move |path| match path {
        "/gz" => Reply::ok("text/plain; charset=utf-8", gz.clone()).with_header("content-encoding", "gzip"),
        "/zlib" => Reply::ok("text/plain; charset=utf-8", zlib.clone()).with_header("content-encoding", "deflate"),
        "/raw" => Reply::ok("text/plain; charset=utf-8", raw.clone()).with_header("content-encoding", "deflate"),
        "/corrupt" => {
            Reply::ok("text/plain", b"\x1f\x8b\x08\x00garbage-garbage".to_vec()).with_header("content-encoding", "gzip")
        }
        _ => Reply::ok("text/plain", "x").with_header("content-encoding", "zstd"),
    })
    .await;
    let f = fetcher(&[s.allow()]);
    for path in ["/gz", "/zlib", "/raw"] {
        let r = get(&f, &s.url(path)).await.unwrap();
        assert_eq!(r.text().0, text, "{path}");
    }
    let e = get(&f, &s.url("/corrupt")).await.unwrap_err();
    assert!(matches!(e, FetchError::Decode { .. }), "{e}");
    let e = get(&f, &s.url("/zstd")).await.unwrap_err();
    assert!(e.to_string().contains("`zstd`"), "{e}");
}

fn brotli(data: &[u8], quality: u32) -> Vec<u8> {
    let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, quality, 22);
    w.write_all(data).unwrap();
    w.into_inner()
}

#[tokio::test]
async fn brotli_decodes_and_a_brotli_bomb_stops_at_the_cap() {
    let text = "Brotli-Grüße, 東京, ünïcödé. ".repeat(2_000);
    let br = brotli(text.as_bytes(), 9);
    assert!(br.len() < text.len() / 10, "the fixture is really compressed: {} bytes", br.len());
    // 256 MB of zeros: a few hundred bytes on the wire.
    let bomb = {
        let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 24);
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..256 {
            w.write_all(&zeros).unwrap();
        }
        w.into_inner()
    };
    assert!(bomb.len() < 64 * 1024, "the bomb is small on the wire: {}", bomb.len());
    let mut corrupt = br.clone();
    corrupt.truncate(br.len() / 2);
    let s = serve(move |path| match path {
        "/br" => Reply::ok("text/plain; charset=utf-8", br.clone()).with_header("content-encoding", "br"),
        "/cut" => Reply::ok("text/plain", corrupt.clone()).with_header("content-encoding", "br"),
        "/garbage" => {
            Reply::ok("text/plain", b"\xff\xfe not brotli at all".to_vec()).with_header("content-encoding", "br")
        }
        _ => Reply::ok("text/plain", bomb.clone()).with_header("content-encoding", "br"),
    })
    .await;
    let f = fetcher(&[s.allow()]);
    let r = get(&f, &s.url("/br")).await.unwrap();
    assert_eq!(r.text().0, text);
    for path in ["/cut", "/garbage"] {
        let e = get(&f, &s.url(path)).await.unwrap_err();
        assert!(matches!(e, FetchError::Decode { ref encoding, .. } if encoding == "br"), "{path}: {e}");
    }
    let cap = 1024 * 1024;
    let req = Request { max_bytes: Some(cap), ..Request::get(s.url("/bomb")) };
    let started = Instant::now();
    let e = f.fetch(req.clone(), &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(e, FetchError::TooLarge { max } if max == cap), "{e}");
    let r = f.fetch(Request { overflow: Overflow::Truncate, ..req }, &CancellationToken::new()).await.unwrap();
    assert!(r.truncated);
    assert_eq!(r.body.len() as u64, cap, "inflation stopped at the cap");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[tokio::test]
async fn progress_is_reported_while_a_slow_body_streams() {
    // 300 bytes, one every 5 ms: about 1.5 s of body.
    let s = serve(|_| Reply::Slow { body: vec![b'p'; 300], every: Duration::from_millis(5) }).await;
    let f = fetcher(&[s.allow()]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let req = Request {
        progress: Some(std::sync::Arc::new(move |done, total| sink.lock().unwrap().push((done, total)))),
        ..Request::get(s.url("/slow"))
    };
    let r = f.fetch(req, &CancellationToken::new()).await.unwrap();
    assert_eq!(r.body.len(), 300);
    let reports = seen.lock().unwrap().clone();
    assert!(reports.len() >= 4, "reports arrive while the body streams: {reports:?}");
    assert!(reports.len() <= 60, "reports are throttled (one per 100 ms), not one per chunk: {}", reports.len());
    assert!(reports.windows(2).all(|w| w[0].0 < w[1].0), "increasing: {reports:?}");
    assert!(reports.iter().all(|(_, total)| *total == Some(300)), "{reports:?}");
    assert_eq!(reports.last().unwrap().0, 300, "the last report is the whole body");
}

#[tokio::test]
async fn a_slow_body_times_out_and_cancel_closes_the_connection() {
    let s = serve(|_| Reply::Slow { body: vec![b'x'; 600], every: Duration::from_millis(100) }).await;
    let f = fetcher(&[s.allow()]);
    let started = Instant::now();
    let req = Request { timeout: Some(Duration::from_secs(1)), ..Request::get(s.url("/slow")) };
    let e = f.fetch(req, &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(e, FetchError::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));

    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.cancel();
    });
    let e = f.fetch(Request::get(s.url("/slow2")), &cancel).await.unwrap_err();
    assert!(matches!(e, FetchError::Cancelled), "{e}");
    // The server notices the closed connection on its next write.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !*s.closed_early.lock().unwrap() {
        assert!(Instant::now() < deadline, "the connection stayed open after cancellation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn charsets_come_out_as_utf8() {
    let s = serve(|path| match path {
        "/meta" => Reply::ok(
            "text/html",
            b"<html><head><meta charset=windows-1251></head><body>\xcf\xf0\xe8\xe2\xe5\xf2</body></html>".to_vec(),
        ),
        "/header" => Reply::ok("text/plain; charset=iso-8859-1", b"caf\xe9".to_vec()),
        "/sjis" => Reply::ok("text/plain; charset=shift_jis", b"\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd".to_vec()),
        _ => Reply::ok("text/plain; charset=bogus-charset", b"ok \xff".to_vec()),
    })
    .await;
    let f = fetcher(&[s.allow()]);
    assert!(get(&f, &s.url("/meta")).await.unwrap().text().0.contains("Привет"));
    assert_eq!(get(&f, &s.url("/header")).await.unwrap().text().0, "café");
    assert_eq!(get(&f, &s.url("/sjis")).await.unwrap().text().0, "こんにちは");
    assert!(get(&f, &s.url("/bogus")).await.unwrap().text().0.starts_with("ok "));
}

#[tokio::test]
async fn domain_lists_and_https_rules() {
    let s = serve(|_| Reply::ok("text/plain", "x")).await;
    let policy = FetchPolicy {
        allow_private: AllowPrivate::parse(&[s.allow()]).unwrap(),
        deny_domains: vec!["evil.example".into()],
        allow_domains: vec!["example.com".into(), "evil.example".into()],
        ..FetchPolicy::default()
    };
    let f = Fetcher::new(policy).unwrap();
    for (url, why) in [
        ("https://www.evil.example/", "deny_domains"),
        ("https://example.org/", "not in allow_domains"),
        ("https://notexample.com/", "not in allow_domains"),
    ] {
        let e = get(&f, url).await.unwrap_err().to_string();
        assert!(e.contains(why), "{url}: {e}");
    }
    // https required: plain http is fine only for an allow_private exception.
    let f = fetcher(&[s.allow()]);
    let req = Request { require_https: true, ..Request::get(s.url("/")) };
    assert_eq!(f.fetch(req, &CancellationToken::new()).await.unwrap().status, 200);
}

/// The environment's proxy variables would bypass pinning: they are ignored.
#[tokio::test]
async fn environment_proxies_are_ignored() {
    let proxy = serve(|_| Reply::ok("text/plain", "from the proxy")).await;
    let s = serve(|_| Reply::ok("text/plain", "direct")).await;
    // SAFETY of the test: nextest runs each test in its own process.
    unsafe_env(&proxy.url(""));
    let f = fetcher(&[s.allow(), proxy.allow()]);
    assert_eq!(get(&f, &s.url("/")).await.unwrap().body, b"direct");
    assert_eq!(proxy.connections(), 0);
}

#[allow(unsafe_code)]
fn unsafe_env(proxy: &str) {
    for k in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"] {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe { std::env::set_var(k, proxy) };
    }
}

/// Names from `/etc/hosts` are vetted like DNS answers: run in a private mount and network
/// namespace (`unshare -m -n`, root) with a private copy of `/etc/hosts` where `evil.test` maps
/// to loopback and `mixed.test` to a public address first and a private one second. Nothing can
/// leave the machine: the namespace has no network.
#[tokio::test]
async fn hosts_file_answers_are_vetted() {
    if std::env::var_os("TOOLGATE_FETCH_IN_NETNS").is_none() {
        let dir = std::env::temp_dir().join(format!("toolgate-fetch-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hosts = dir.join("hosts");
        std::fs::write(&hosts, "127.0.0.1 localhost\n127.0.0.2 evil.test\n93.184.216.34 mixed.test\n10.1.2.3 mixed.test\n169.254.169.254 metadata.test\n").unwrap();
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "mount --bind '{}' /etc/hosts && ip link set lo up && exec '{}' --exact hosts_file_answers_are_vetted --nocapture",
            hosts.display(),
            exe.display()
        );
        let out = std::process::Command::new("unshare")
            .args(["-m", "-n", "sh", "-c", &script])
            .env("TOOLGATE_FETCH_IN_NETNS", "1")
            .output()
            .expect("unshare (util-linux) is needed: install it (`cargo xtask deps`) and run as root");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "the namespace run failed (needs root and unshare):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let f = fetcher(&[]);
    for (url, addr) in [
        ("http://evil.test/", "127.0.0.2"),
        ("http://mixed.test/", "10.1.2.3"),
        ("https://metadata.test/latest", "169.254.169.254"),
    ] {
        let e = get(&f, url).await.unwrap_err();
        match &e {
            FetchError::BlockedAddress { addr: a, .. } => assert_eq!(a.ip().to_string(), addr, "{url}"),
            other => panic!("{url}: {other}"),
        }
    }
    // An exception for one address does not open the other: mixed.test still has 10.1.2.3.
    let f = fetcher(&["93.184.216.34".to_owned()]);
    assert!(matches!(get(&f, "http://mixed.test/").await.unwrap_err(), FetchError::BlockedAddress { .. }));
}

/// DNS rebinding: a DNS server (written here, on loopback inside a network namespace) answers
/// `rebind.test` with a "public" address first and loopback afterwards. The fetch connects to
/// the address it vetted, asking DNS once; the next fetch gets loopback and is refused.
#[tokio::test]
async fn dns_is_asked_once_and_pinned() {
    if std::env::var_os("TOOLGATE_FETCH_IN_NETNS").is_none() {
        let dir = std::env::temp_dir().join(format!("toolgate-fetch-dns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("resolv.conf"), "nameserver 127.0.0.53\noptions attempts:1 timeout:2\n").unwrap();
        std::fs::write(dir.join("hosts"), "127.0.0.1 localhost\n").unwrap();
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "mount --bind '{d}/resolv.conf' /etc/resolv.conf && mount --bind '{d}/hosts' /etc/hosts && ip link set lo up && ip addr add 93.184.216.34/32 dev lo && exec '{e}' --exact dns_is_asked_once_and_pinned --nocapture",
            d = dir.display(),
            e = exe.display()
        );
        let out = std::process::Command::new("unshare")
            .args(["-m", "-n", "sh", "-c", &script])
            .env("TOOLGATE_FETCH_IN_NETNS", "1")
            .output()
            .expect("unshare (util-linux) is needed; run as root");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let queries = std::sync::Arc::new(std::sync::Mutex::new(0usize));
    let q = queries.clone();
    let sock = tokio::net::UdpSocket::bind("127.0.0.53:53").await.unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let req = &buf[..n];
            // Question ends after the name's zero byte + type + class.
            let mut i = 12;
            while i < n && req[i] != 0 {
                i += usize::from(req[i]) + 1;
            }
            let qtype = u16::from_be_bytes([req[i + 1], req[i + 2]]);
            let question = &req[12..i + 5];
            let mut resp = vec![req[0], req[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0];
            resp.extend_from_slice(question);
            if qtype == 1 {
                let first = {
                    let mut c = q.lock().unwrap();
                    *c += 1;
                    *c == 1
                };
                let addr = if first { [93, 184, 216, 34] } else { [127, 0, 0, 1] };
                resp[7] = 1;
                resp.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
                resp.extend_from_slice(&addr);
            }
            let _ = sock.send_to(&resp, from).await;
        }
    });
    let public = support::serve_on("93.184.216.34:80", |_| Reply::ok("text/plain", "public")).await;
    let local = support::serve_on("127.0.0.1:80", |_| Reply::ok("text/plain", "local")).await;
    let f = fetcher(&[]);
    let r = get(&f, "http://rebind.test/").await.unwrap();
    assert_eq!(
        (r.body.as_slice(), r.remote.map(|a| a.ip().to_string())),
        (&b"public"[..], Some("93.184.216.34".to_owned()))
    );
    assert_eq!(*queries.lock().unwrap(), 1, "one A query for one fetch");
    let e = get(&f, "http://rebind.test/again").await.unwrap_err();
    assert!(matches!(e, FetchError::BlockedAddress { .. }), "{e}");
    assert_eq!((public.connections(), local.connections()), (1, 0));
}
