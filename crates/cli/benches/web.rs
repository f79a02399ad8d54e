//! `web_fetch` against the reference MCP fetch server, in one run (`cargo xtask bench web`, or
//! `cargo bench -p toolgate-cli --bench web`).
//!
//! 50 generated HTML pages of five layouts (semantic blog, `div` soup, docs with a table of
//! contents, news with banner and breadcrumbs, old table layout), 3 to 120 KB, are served by an
//! HTTP/1.1 server on loopback inside this process (its own thread). Each page is fetched and
//! converted to Markdown over MCP (stdio, an rmcp 3.9.0 client) by
//!
//! - `toolgate serve`'s `web_fetch` (whole pipeline, audit log included; the loopback port let
//!   through `[web] allow_private`), and
//! - the official `mcp-server-fetch` (PyPI, installed by `cargo xtask deps` into the peers'
//!   venv), its `fetch` tool, started with `--ignore-robots-txt --allow-private-ips` (this
//!   release refuses private addresses by default; loopback is one).
//!
//! Both are asked for the whole page (`max_chars` / `max_length` 999,999). Every request URL
//! carries a fresh query string, so no call is answered from a cache (toolgate's `web_fetch`
//! keeps pages for 15 minutes). Modes: sequential (one call at a time) and 8 concurrent calls on
//! one connection; pages/s is calls over wall time.
//!
//! Quality: every page has known main-text markers (one per paragraph of the article) and
//! known boilerplate markers (menu, sidebar, footer, breadcrumb, cookie banner links). Per
//! server: how many pages keep every main marker, and how many drop every boilerplate marker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "mcp/servers.rs"]
mod servers;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PAGES: usize = 50;
const ROUNDS: usize = 2;
const CONCURRENCY: usize = 8;
const WARMUP: usize = 3;

/// The reference server's version (pinned in `xtask/src/peers.rs`).
const REFERENCE: &str = "mcp-server-fetch";

// ---------------------------------------------------------------------------------------------
// The pages.

/// One generated page and what a good extraction keeps and drops.
struct Page {
    html: String,
    layout: &'static str,
    /// One per article paragraph: must survive.
    main: Vec<String>,
    /// In menus, sidebars, footers, breadcrumbs, banners: should not survive.
    boilerplate: Vec<String>,
}

const WORDS: &[&str] = &[
    "the",
    "river",
    "carried",
    "old",
    "timber",
    "past",
    "quiet",
    "villages",
    "where",
    "people",
    "built",
    "boats",
    "from",
    "cedar",
    "and",
    "sold",
    "them",
    "in",
    "spring",
    "markets",
    "each",
    "year",
    "merchants",
    "arrived",
    "with",
    "salt",
    "cloth",
    "copper",
    "tools",
    "stories",
    "of",
    "distant",
    "cities",
    "children",
    "learned",
    "trade",
    "by",
    "watching",
    "their",
    "parents",
    "bargain",
    "until",
    "evening",
    "bells",
    "rang",
    "across",
    "valley",
    "harbor",
    "engineers",
    "measured",
    "tides",
    "maps",
    "changed",
    "slowly",
    "over",
    "decades",
];

/// A small deterministic generator (no `rand` in this bench).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }

    fn sentence(&mut self) -> String {
        let n = 8 + self.next() % 12;
        let mut words: Vec<&str> = (0..n).map(|_| WORDS[self.next() % WORDS.len()]).collect();
        let first = words[0];
        let capital = first[..1].to_uppercase() + &first[1..];
        words[0] = "";
        format!("{capital}{}.", words.join(" "))
    }

    fn paragraph(&mut self, marker: &str) -> String {
        let n = 3 + self.next() % 5;
        let mut sentences: Vec<String> = (0..n).map(|_| self.sentence()).collect();
        let at = self.next() % n;
        sentences[at] = format!("{} {marker} {}", sentences[at].trim_end_matches('.'), "was recorded there.");
        sentences.join(" ")
    }
}

fn links(items: &[String], href: &str) -> String {
    items.iter().enumerate().map(|(k, t)| format!("<li><a href=\"{href}{k}\">{t}</a></li>")).collect()
}

fn page(i: usize) -> Page {
    let mut rng = Lcg(i as u64 * 7919 + 17);
    let paragraphs = 4 + (i * 7) % 37;
    let main: Vec<String> = (0..paragraphs).map(|k| format!("mk{i}p{k}z")).collect();
    let boiler = |what: &str, n: usize| -> Vec<String> { (0..n).map(|k| format!("nv{i}{what}{k}z")).collect() };
    let (menu, side, foot, crumbs) = (boiler("m", 8), boiler("s", 6), boiler("f", 5), boiler("b", 3));
    let title = format!("Page {i}: {}", rng.sentence().trim_end_matches('.'));
    let mut body = String::new();
    for (k, marker) in main.iter().enumerate() {
        if k > 0 && k % 6 == 0 {
            body.push_str(&format!("<h2>Section {k}</h2>"));
        }
        body.push_str(&format!("<p>{}</p>\n", rng.paragraph(marker)));
        if k == 2 && i.is_multiple_of(4) {
            body.push_str("<pre><code class=\"language-rust\">fn main() {\n    println!(\"tides\");\n}</code></pre>\n");
        }
        if k == 3 && i.is_multiple_of(3) {
            body.push_str("<table><tr><th>Port</th><th>Boats</th></tr><tr><td>North</td><td>12</td></tr></table>\n");
        }
    }
    // Some pages carry the weight of real ones: inline scripts and styles.
    let weight = if i.is_multiple_of(3) {
        format!(
            "<style>{}</style><script>var data = \"{}\";</script>",
            ".c{color:#333}".repeat(300),
            "x".repeat(60_000)
        )
    } else {
        String::new()
    };
    let cookie = format!(
        "<div class=\"cookie-banner\" id=\"cookie-consent\">We use cookies. <a href=\"/privacy\">{}</a></div>",
        boiler("c", 1)[0]
    );
    let layout = ["semantic blog", "div soup", "docs", "news", "table layout"][i % 5];
    let content = match i % 5 {
        0 => format!(
            "<header><a href=\"/\">Site</a><nav><ul>{}</ul></nav></header>\
             <main><article><h1>{title}</h1>{body}</article></main>\
             <aside><h3>Related</h3><ul>{}</ul></aside><footer><ul>{}</ul><p>Copyright</p></footer>{cookie}",
            links(&menu, "/m"),
            links(&side, "/s"),
            links(&foot, "/f")
        ),
        1 => format!(
            "<div id=\"header\"><div class=\"menu\">{}</div></div>\
             <div id=\"wrapper\"><div id=\"content\" class=\"post-content\"><h1>{title}</h1>{body}</div>\
             <div id=\"sidebar\" class=\"widget-area\"><ul>{}</ul></div></div>\
             <div id=\"footer\">{}</div>{cookie}",
            menu.iter().map(|t| format!("<a href=\"/m\">{t}</a> | ")).collect::<String>(),
            links(&side, "/s"),
            foot.iter().map(|t| format!("<a href=\"/f\">{t}</a> ")).collect::<String>()
        ),
        2 => format!(
            "<nav class=\"sidebar\" aria-label=\"Table of contents\"><ul>{}{}</ul></nav>\
             <main><h1>{title}</h1>{body}</main><footer>{}</footer>",
            links(&menu, "/docs/"),
            links(&side, "/docs/more/"),
            links(&foot, "/f")
        ),
        3 => format!(
            "<header role=\"banner\"><div class=\"logo\">News</div><ul class=\"menu\">{}</ul></header>\
             <div role=\"navigation\" class=\"breadcrumbs\">{}</div>\
             <article><h1>{title}</h1><p class=\"byline\">By a reporter</p>\
             <figure><img src=\"/a.jpg\" alt=\"harbor\"><figcaption>The harbor</figcaption></figure>{body}</article>\
             <aside class=\"related\"><ul>{}</ul></aside><footer>{}</footer>{cookie}",
            links(&menu, "/m"),
            crumbs.iter().map(|t| format!("<a href=\"/b\">{t}</a> &gt; ")).collect::<String>(),
            links(&side, "/s"),
            links(&foot, "/f")
        ),
        _ => format!(
            "<table width=\"100%\"><tr><td class=\"menu\" width=\"20%\">{}</td>\
             <td class=\"body\"><h1>{title}</h1>{body}</td></tr>\
             <tr><td colspan=\"2\" class=\"footer\">{}</td></tr></table>",
            menu.iter().map(|t| format!("<a href=\"/m\">{t}</a><br>")).collect::<String>(),
            foot.iter().map(|t| format!("<a href=\"/f\">{t}</a> ")).collect::<String>()
        ),
    };
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>{weight}</head>\
         <body>{content}</body></html>"
    );
    // What each layout put on the page besides the article.
    let mut boilerplate = [menu, foot].concat();
    if i % 5 != 4 {
        boilerplate.extend(side);
    }
    if i % 5 == 3 {
        boilerplate.extend(crumbs);
    }
    if matches!(i % 5, 0 | 1 | 3) {
        boilerplate.extend(boiler("c", 1));
    }
    Page { html, layout, main, boilerplate }
}

// ---------------------------------------------------------------------------------------------
// The page server: HTTP/1.1 with keep-alive, on its own thread and runtime.

fn serve_pages(pages: Arc<Vec<Page>>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(connection(stream, pages.clone()));
            }
        });
    });
    addr
}

async fn connection(mut s: tokio::net::TcpStream, pages: Arc<Vec<Page>>) {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_owned();
        let index =
            path.strip_prefix("/p/").and_then(|p| p.strip_suffix(".html")).and_then(|n| n.parse::<usize>().ok());
        let (status, ctype, body) = match index.and_then(|n| pages.get(n)) {
            Some(p) => ("200 OK", "text/html; charset=utf-8", p.html.as_bytes()),
            None => ("404 Not Found", "text/plain", &b"not found"[..]),
        };
        // One write per answer: a head and a body written apart meet Nagle's algorithm and the
        // client's delayed ACK, a 40 ms stall per request that would hide every difference.
        let mut out = format!("HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n", body.len())
            .into_bytes();
        out.extend_from_slice(body);
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The servers measured.

type Client = RunningService<RoleClient, ()>;

struct Server {
    name: String,
    client: Client,
    tool: &'static str,
    /// The tool's arguments for `url`.
    args: fn(&str) -> serde_json::Map<String, Value>,
}

async fn connect(command: &[String], dir: Option<&Path>) -> Client {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().expect("spawn the server");
    ().serve(transport).await.expect("initialize over stdio")
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect()
}

static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// A URL for page `i` no cache has seen.
fn url(addr: SocketAddr, i: usize) -> String {
    format!("http://{addr}/p/{i}.html?v={}", SERIAL.fetch_add(1, Ordering::Relaxed))
}

/// One call: its round-trip time and its text (or the error).
async fn fetch(peer: &Peer<RoleClient>, server: &Server, url: &str) -> (Duration, Result<String, String>) {
    let request = CallToolRequestParams::new(server.tool).with_arguments((server.args)(url));
    let start = Instant::now();
    let result = peer.call_tool(request).await;
    let took = start.elapsed();
    let outcome = match result {
        Ok(r) if r.is_error == Some(true) => Err(text_of(&r)),
        Ok(r) => Ok(text_of(&r)),
        Err(e) => Err(e.to_string()),
    };
    (took, outcome)
}

/// Latencies and wall time of one mode.
#[derive(Default)]
struct Run {
    times: Vec<Duration>,
    wall: Duration,
    errors: Vec<String>,
}

impl Run {
    fn per_sec(&self) -> f64 {
        self.times.len() as f64 / self.wall.as_secs_f64()
    }
    fn median(&self) -> Duration {
        let mut t = self.times.clone();
        t.sort();
        t[t.len() / 2]
    }
    fn p90(&self) -> Duration {
        let mut t = self.times.clone();
        t.sort();
        t[t.len() * 9 / 10]
    }
}

/// Every page once, one call at a time; returns the texts by page.
async fn sequential(server: &Server, addr: SocketAddr, run: &mut Run) -> Vec<Result<String, String>> {
    let peer = server.client.peer().clone();
    let mut texts = Vec::with_capacity(PAGES);
    let started = Instant::now();
    for i in 0..PAGES {
        let (took, text) = fetch(&peer, server, &url(addr, i)).await;
        run.times.push(took);
        if let Err(e) = &text {
            run.errors.push(e.clone());
        }
        texts.push(text);
    }
    run.wall += started.elapsed();
    texts
}

/// Every page once, `CONCURRENCY` calls in flight on the one connection.
async fn concurrent(server: &Server, addr: SocketAddr, run: &mut Run) {
    let peer = server.client.peer().clone();
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let workers = (0..CONCURRENCY).map(|_| async {
        let mut mine = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= PAGES {
                break mine;
            }
            mine.push(fetch(&peer, server, &url(addr, i)).await);
        }
    });
    let results = futures_join_all(workers).await;
    run.wall += started.elapsed();
    for (took, text) in results.into_iter().flatten() {
        run.times.push(took);
        if let Err(e) = text {
            run.errors.push(e);
        }
    }
}

/// `join_all` without the `futures` crate: poll every worker on this task.
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut outputs: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in set.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().map(|o| o.unwrap()).collect()
}

// ---------------------------------------------------------------------------------------------
// Quality.

#[derive(Default)]
struct Quality {
    main_kept: usize,
    boilerplate_dropped: usize,
    both: usize,
    main_fraction: f64,
    boilerplate_fraction: f64,
    by_layout: Vec<(&'static str, usize, usize)>,
}

fn quality(pages: &[Page], texts: &[Result<String, String>]) -> Quality {
    let mut q = Quality::default();
    let layouts = ["semantic blog", "div soup", "docs", "news", "table layout"];
    q.by_layout = layouts.iter().map(|l| (*l, 0, 0)).collect();
    for (page, text) in pages.iter().zip(texts) {
        let text = text.as_deref().unwrap_or("");
        // Whole tokens only: `mk1p1z` must not be found inside `mk1p10z` (the `z` ends each).
        let kept = page.main.iter().filter(|m| text.contains(m.as_str())).count();
        let leaked = page.boilerplate.iter().filter(|b| text.contains(b.as_str())).count();
        q.main_fraction += kept as f64 / page.main.len() as f64;
        q.boilerplate_fraction += leaked as f64 / page.boilerplate.len() as f64;
        let (all_main, no_boiler) = (kept == page.main.len(), leaked == 0);
        q.main_kept += usize::from(all_main);
        q.boilerplate_dropped += usize::from(no_boiler);
        q.both += usize::from(all_main && no_boiler);
        let row = q.by_layout.iter_mut().find(|(l, _, _)| *l == page.layout).unwrap();
        row.1 += usize::from(all_main);
        row.2 += usize::from(no_boiler);
    }
    q.main_fraction /= pages.len() as f64;
    q.boilerplate_fraction /= pages.len() as f64;
    q
}

// ---------------------------------------------------------------------------------------------

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".to_owned(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The reference's version, and which extractor it runs (Readability.js when `readabilipy`
/// has Node support, else its Python fallback).
fn reference_version(python: &Path) -> (String, &'static str) {
    let script = "import importlib.metadata as m, readabilipy.simple_json as s; \
                  print(m.version('mcp-server-fetch'), s.have_node())";
    let out = std::process::Command::new(python).args(["-c", script]).output().expect("run the peers' python");
    assert!(out.status.success(), "{REFERENCE} is not installed in the peers' venv: run `cargo xtask deps`");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    let version = words.next().unwrap_or("?").to_owned();
    let extractor = if words.next() == Some("True") {
        "Readability.js via readabilipy and Node"
    } else {
        "readabilipy's Python extractor (no Node)"
    };
    (version, extractor)
}

async fn bench(pages: Arc<Vec<Page>>, addr: SocketAddr) {
    let ws = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gate]\nmax_output_bytes = 4194304\ntimeout_secs = 120\nmax_in_flight = 16\n\n\
             [web]\nallow_private = [\"{addr}\"]\n\n[rate_limits.tools]\n\
             web_fetch = {{ per_minute = 4294967295, per_hour = 4294967295 }}\n"
        ),
    )
    .expect("write toolgate.toml");
    let toolgate = servers::toolgate();
    let tg = connect(&servers::toolgate_stdio(&toolgate, ws.path()), None).await;
    let python = servers::python();
    let (version, extractor) = reference_version(&python);
    let reference_cmd: Vec<String> = [
        python.display().to_string(),
        "-m".into(),
        "mcp_server_fetch".into(),
        "--ignore-robots-txt".into(),
        "--allow-private-ips".into(),
    ]
    .to_vec();
    let reference = connect(&reference_cmd, Some(ws.path())).await;
    let servers = [
        Server {
            name: "toolgate serve `web_fetch`".into(),
            client: tg,
            tool: "web_fetch",
            args: |u| json!({"url": u, "max_chars": 999_999}).as_object().cloned().unwrap(),
        },
        Server {
            name: format!("{REFERENCE} {version} `fetch`"),
            client: reference,
            tool: "fetch",
            args: |u| json!({"url": u, "max_length": 999_999}).as_object().cloned().unwrap(),
        },
    ];
    let sizes: Vec<usize> = pages.iter().map(|p| p.html.len()).collect();
    println!(
        "web benchmark: {PAGES} pages ({} to {} bytes, {} in all), {REFERENCE} {version} ({extractor}), load average at start {}\n",
        sizes.iter().min().unwrap(),
        sizes.iter().max().unwrap(),
        sizes.iter().sum::<usize>(),
        loadavg()
    );
    for server in &servers {
        let peer = server.client.peer().clone();
        for i in 0..WARMUP {
            let (_, text) = fetch(&peer, server, &url(addr, i)).await;
            if let Err(e) = text {
                panic!("{} cannot fetch from the page server: {e}", server.name);
            }
        }
    }
    let mut seq: Vec<Run> = servers.iter().map(|_| Run::default()).collect();
    let mut conc: Vec<Run> = servers.iter().map(|_| Run::default()).collect();
    let mut texts: Vec<Vec<Result<String, String>>> = vec![Vec::new(); servers.len()];
    // Rounds, servers taking turns, so load from elsewhere falls on both alike.
    for round in 0..ROUNDS {
        for (k, server) in servers.iter().enumerate() {
            let t = sequential(server, addr, &mut seq[k]).await;
            if round == 0 {
                texts[k] = t;
            }
            concurrent(server, addr, &mut conc[k]).await;
        }
    }
    println!(
        "### throughput and latency: {ROUNDS} rounds of the {PAGES} pages per server and mode, after {WARMUP} warm-up calls\n"
    );
    println!("| server | mode | pages/s | median | p90 | errors | toolgate vs {REFERENCE}: pages/s | median |");
    println!("|---|---|---|---|---|---|---|---|");
    for (mode, runs) in [("sequential".to_owned(), &seq), (format!("{CONCURRENCY} concurrent"), &conc)] {
        for (k, (server, run)) in servers.iter().zip(runs.iter()).enumerate() {
            let (rate, median) = if k == 0 {
                let peer = &runs[1];
                (
                    format!("{:.1}x", run.per_sec() / peer.per_sec()),
                    format!("{:.1}x", peer.median().as_secs_f64() / run.median().as_secs_f64()),
                )
            } else {
                ("-".to_owned(), "-".to_owned())
            };
            println!(
                "| {} | {mode} | {:.1} | {} | {} | {} | {rate} | {median} |",
                server.name,
                run.per_sec(),
                ms(run.median()),
                ms(run.p90()),
                run.errors.len()
            );
        }
    }
    for (server, run) in servers.iter().zip(seq.iter().chain(conc.iter())) {
        if let Some(e) = run.errors.first() {
            println!("\n{}: first error: {}", server.name, e.chars().take(300).collect::<String>());
        }
    }
    println!("\n### extraction quality on the {PAGES} pages (first sequential round)\n");
    println!(
        "| server | main text kept (all paragraphs) | boilerplate dropped (all links) | both | mean main kept | mean boilerplate leaked |"
    );
    println!("|---|---|---|---|---|---|");
    let qualities: Vec<Quality> = texts.iter().map(|t| quality(&pages, t)).collect();
    for (server, q) in servers.iter().zip(&qualities) {
        println!(
            "| {} | {}/{PAGES} | {}/{PAGES} | {}/{PAGES} | {:.1}% | {:.1}% |",
            server.name,
            q.main_kept,
            q.boilerplate_dropped,
            q.both,
            q.main_fraction * 100.0,
            q.boilerplate_fraction * 100.0
        );
    }
    println!("\nby layout (10 pages each): main kept / boilerplate dropped\n");
    println!("| layout | {} | {} |", servers[0].name, servers[1].name);
    println!("|---|---|---|");
    for (a, b) in qualities[0].by_layout.iter().zip(&qualities[1].by_layout) {
        println!("| {} | {} / {} | {} / {} |", a.0, a.1, a.2, b.1, b.2);
    }
    println!("\nload average at end {}", loadavg());
    for server in servers {
        let _ = server.client.cancel().await;
    }
}

fn main() {
    // reqwest is built with `rustls-no-provider` in this workspace.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pages: Arc<Vec<Page>> = Arc::new((0..PAGES).map(page).collect());
    let addr = serve_pages(pages.clone());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(bench(pages, addr));
}
