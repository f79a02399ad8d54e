//! The `browser` tool beside Playwright MCP, in one run (`cargo xtask bench browser`, or
//! `cargo bench -p toolgate-cli --bench browser`).
//!
//! Both drive the same Debian `chromium` (`/usr/bin/chromium`, headless, a 1280x800 viewport) over MCP
//! stdio with an rmcp 3.9.0 client:
//!
//! - `toolgate serve`'s `browser` tool (the whole pipeline, audit log included; the page
//!   server's loopback port let through `[web] allow_private`, every connection through
//!   toolgate's vetting proxy), and
//! - `@playwright/mcp` (npm, pinned in `xtask/src/peers.rs`, on the peers' Node 22), started
//!   with `--executable-path /usr/bin/chromium --headless --isolated --no-sandbox` (Chromium
//!   refuses to run as root with its sandbox; toolgate runs it without its own sandbox too,
//!   inside its containment) and `--codegen none`.
//!
//! The same steps on the same pages, served on loopback by this process, servers taking turns
//! each round:
//!
//! - **start**: the browser closed (`stop` / `browser_close`, not timed), then the first
//!   navigation to a small page, which launches it;
//! - **navigate + snapshot** of a medium page (navigation, 40 links, 3 sections of text, a
//!   30-row table, a 6-field form): `navigate` then `snapshot` / `browser_navigate` then
//!   `browser_snapshot`;
//! - **click** on the form's button by the ref the snapshot gave (its effect checked once);
//! - **screenshot** of the viewport (PNG, 1280x800: Playwright MCP's `--viewport-size`, toolgate's
//!   `width`/`height`, the size its tabs already have, as Playwright MCP's pages already have
//!   theirs; `BENCH_SCREENSHOT_SIZE=1280x720` asks toolgate for another size, which resizes the
//!   tab once per round, as a new session's first screenshot at that size would).
//!
//! Reported: p50 and p90 per step and the ratio (toolgate's p50 over Playwright MCP's; the
//! issue's target is at most 1.2), and the size of the medium page's snapshot as the model gets
//! it (the tool result's text): characters, lines, and tokens by `gpt-tokenizer`'s o200k_base
//! (GPT-4o/GPT-5's encoding; bundled, from the peers' npm folder).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "mcp/servers.rs"]
mod servers;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_benchkit::summary::{Row, Target};

/// Rounds: 10, or 4 in `cargo xtask bench summary`'s short run.
fn rounds() -> usize {
    toolgate_benchkit::rounds(10, 4)
}
const CHROMIUM: &str = "/usr/bin/chromium";
const STEPS: [&str; 4] = ["start", "navigate + snapshot", "click", "screenshot"];

// ---------------------------------------------------------------------------------------------
// The pages.

fn small_page() -> String {
    "<!doctype html><html><head><title>Start</title></head><body><h1>Ready</h1><p>A small page.</p></body></html>"
        .to_owned()
}

/// A page of a common shape: navigation, article text, a table, a form whose button changes
/// the page, a footer.
fn medium_page() -> String {
    let mut html = String::from("<!doctype html><html><head><title>Orders - Harbor Supply</title></head><body>");
    html.push_str("<header><nav aria-label=\"Main\"><ul>");
    for (i, name) in
        ["Home", "Catalog", "Orders", "Customers", "Reports", "Settings", "Help", "Blog", "About", "Contact"]
            .iter()
            .enumerate()
    {
        html.push_str(&format!("<li><a href=\"/s/{i}\">{name}</a></li>"));
    }
    html.push_str("</ul></nav></header><main><h1>Orders this week</h1>");
    for (s, title) in ["Timber", "Salt and cloth", "Copper tools"].iter().enumerate() {
        html.push_str(&format!("<section><h2>{title}</h2>"));
        for p in 0..3 {
            html.push_str(&format!(
                "<p>Shipment {s}.{p}: the river carried old timber past quiet villages where people built boats \
                 from cedar and sold them in spring markets; merchants arrived with salt, cloth and copper tools. \
                 See <a href=\"/o/{s}{p}\">order {s}{p}</a> for the details.</p>"
            ));
        }
        html.push_str("</section>");
    }
    html.push_str("<table><caption>Open orders</caption><thead><tr><th>Id</th><th>Item</th><th>Qty</th><th>Status</th></tr></thead><tbody>");
    for r in 0..30 {
        let item = ["Cedar boat", "Salt sack", "Cloth bolt", "Copper adze", "Rope coil"][r % 5];
        let status = ["open", "packed", "shipped"][r % 3];
        html.push_str(&format!("<tr><td>{}</td><td>{item}</td><td>{}</td><td>{status}</td></tr>", 1000 + r, r * 3 + 1));
    }
    html.push_str("</tbody></table><form><h2>New order</h2>");
    for (id, label) in [("name", "Customer name"), ("email", "Email"), ("item", "Item"), ("qty", "Quantity")] {
        html.push_str(&format!("<p><label for=\"{id}\">{label}</label> <input id=\"{id}\" name=\"{id}\"></p>"));
    }
    html.push_str(
        "<p><label for=\"speed\">Shipping</label> <select id=\"speed\"><option>Standard</option><option>Express</option></select></p>\
         <p><label><input type=\"checkbox\" id=\"gift\"> Gift wrap</label></p>\
         <button type=\"button\" onclick=\"document.getElementById('result').textContent='Order placed'\">Place order</button>\
         <p id=\"result\" role=\"status\">No order yet</p></form></main><footer><ul>",
    );
    for i in 0..30 {
        html.push_str(&format!("<li><a href=\"/f/{i}\">Footer link {i}</a></li>"));
    }
    html.push_str("</ul><p>Harbor Supply, since 1901.</p></footer></body></html>");
    html
}

/// Serves `/small` and `/medium` on loopback from a thread of its own.
fn serve_pages() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (small, medium) = (small_page(), medium_page());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((mut s, _)) = listener.accept().await {
                let (small, medium) = (small.clone(), medium.clone());
                tokio::spawn(async move {
                    let _ = s.set_nodelay(true);
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf);
                    let path = head.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/");
                    let (status, body) = match path {
                        "/small" => ("200 OK", small),
                        "/medium" => ("200 OK", medium),
                        _ => ("404 Not Found", "not found".to_owned()),
                    };
                    // One write per answer (no Nagle stall between head and body).
                    let out = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(out.as_bytes()).await;
                });
            }
        });
    });
    addr
}

// ---------------------------------------------------------------------------------------------
// The servers.

type Client = RunningService<RoleClient, ()>;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Toolgate,
    Playwright,
}

struct Server {
    name: String,
    kind: Kind,
    client: Client,
}

async fn connect(command: &[String], dir: &Path) -> Client {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]).current_dir(dir);
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().expect("spawn the server");
    ().serve(transport).await.expect("initialize over stdio")
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect::<Vec<_>>().join("\n")
}

fn has_image(result: &CallToolResult) -> bool {
    result.content.iter().any(|c| c.as_image().is_some())
}

impl Server {
    /// One tool call: its time and result; a failed call stops the benchmark with its text.
    async fn call(&self, tool: &'static str, args: Value) -> (Duration, CallToolResult) {
        let request = CallToolRequestParams::new(tool).with_arguments(args.as_object().cloned().unwrap());
        let start = Instant::now();
        let result = self.client.peer().call_tool(request).await;
        let took = start.elapsed();
        match result {
            Ok(r) if r.is_error == Some(true) => panic!("{}: {tool} {args} failed: {}", self.name, text_of(&r)),
            Ok(r) => (took, r),
            Err(e) => panic!("{}: {tool} {args}: {e}", self.name),
        }
    }

    async fn close_browser(&self) {
        let _ = match self.kind {
            Kind::Toolgate => self.call("browser", json!({"action": "stop"})).await,
            Kind::Playwright => self.call("browser_close", json!({})).await,
        };
    }

    async fn navigate(&self, url: &str) -> Duration {
        match self.kind {
            Kind::Toolgate => self.call("browser", json!({"action": "navigate", "url": url})).await.0,
            Kind::Playwright => self.call("browser_navigate", json!({"url": url})).await.0,
        }
    }

    async fn snapshot(&self) -> (Duration, String) {
        let (took, result) = match self.kind {
            Kind::Toolgate => self.call("browser", json!({"action": "snapshot"})).await,
            Kind::Playwright => self.call("browser_snapshot", json!({})).await,
        };
        (took, text_of(&result))
    }

    async fn click(&self, r: &str) -> Duration {
        match self.kind {
            Kind::Toolgate => self.call("browser", json!({"action": "click", "ref": r})).await.0,
            Kind::Playwright => {
                self.call("browser_click", json!({"target": r, "element": "Place order button"})).await.0
            }
        }
    }

    async fn screenshot(&self) -> Duration {
        let (took, result) = match self.kind {
            Kind::Toolgate => {
                let (width, height) = screenshot_size();
                self.call("browser", json!({"action": "screenshot", "width": width, "height": height})).await
            }
            Kind::Playwright => self.call("browser_take_screenshot", json!({"scale": "css"})).await,
        };
        assert!(has_image(&result), "{}: the screenshot returned no image: {}", self.name, text_of(&result));
        took
    }
}

/// The size toolgate's screenshot asks for: 1280x800 (its tabs' viewport), or
/// `BENCH_SCREENSHOT_SIZE` (`WIDTHxHEIGHT`).
fn screenshot_size() -> (u32, u32) {
    std::env::var("BENCH_SCREENSHOT_SIZE")
        .ok()
        .and_then(|v| v.split_once('x').and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?))))
        .unwrap_or((1280, 800))
}

/// The ref of the line that shows `role "name"` in a snapshot (`[ref=e12]`).
fn ref_of(snapshot: &str, role: &str, name: &str) -> String {
    let needle = format!("{role} \"{name}\"");
    let line = snapshot.lines().find(|l| l.contains(&needle)).unwrap_or_else(|| panic!("no {needle} in:\n{snapshot}"));
    let at = line.find("[ref=").expect("a ref") + 5;
    line[at..].split(']').next().unwrap().to_owned()
}

/// o200k_base tokens of `text`, counted by `gpt-tokenizer` on the peers' Node.
fn tokens(text: &str) -> usize {
    let module = servers::node().parent().unwrap().join("../../gpt-tokenizer/cjs/encoding/o200k_base.js");
    let script = format!(
        "const {{encode}} = require({:?}); let s = ''; process.stdin.on('data', d => s += d).on('end', () => console.log(encode(s).length));",
        module.canonicalize().expect("gpt-tokenizer is missing: run `cargo xtask deps`").display().to_string()
    );
    let mut child = std::process::Command::new(servers::node())
        .args(["-e", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node");
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a token count")
}

fn percentile(times: &[Duration], p: usize) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t[(t.len() * p / 100).min(t.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".to_owned(), |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

async fn bench(addr: SocketAddr) {
    let ws = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gate]\ntimeout_secs = 120\n\n[web]\nallow_private = [\"{addr}\"]\n\n[rate_limits.tools]\n\
             browser = {{ per_minute = 4294967295, per_hour = 4294967295 }}\n"
        ),
    )
    .expect("write toolgate.toml");
    let pw_dir = tempfile::tempdir().expect("a folder for Playwright MCP's output");
    let toolgate = servers::toolgate();
    let tg = connect(&servers::toolgate_stdio(&toolgate, ws.path()), ws.path()).await;
    let pw_cli = servers::node().parent().unwrap().join("../../@playwright/mcp/cli.js");
    let pw_cmd: Vec<String> = vec![
        servers::node().display().to_string(),
        pw_cli.canonicalize().expect("@playwright/mcp is missing: run `cargo xtask deps`").display().to_string(),
        "--executable-path".into(),
        CHROMIUM.into(),
        "--headless".into(),
        "--isolated".into(),
        "--no-sandbox".into(),
        "--codegen".into(),
        "none".into(),
        "--viewport-size".into(),
        "1280x800".into(),
        "--output-dir".into(),
        pw_dir.path().display().to_string(),
    ];
    let pw = connect(&pw_cmd, pw_dir.path()).await;
    let version = servers::npm_version("@playwright/mcp");
    let chromium = std::process::Command::new(CHROMIUM)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let servers = [
        Server { name: "toolgate serve `browser`".into(), kind: Kind::Toolgate, client: tg },
        Server { name: format!("@playwright/mcp {version}"), kind: Kind::Playwright, client: pw },
    ];
    let (small, medium) = (format!("http://{addr}/small"), format!("http://{addr}/medium"));
    let (sw, sh) = screenshot_size();
    println!(
        "browser benchmark: {chromium}, {} rounds, viewports 1280x800, toolgate's screenshot {sw}x{sh}, load average at start {}\n",
        rounds(),
        loadavg()
    );

    // Warm-up, and the click's effect checked once per server.
    let mut snapshots = vec![String::new(); servers.len()];
    for server in &servers {
        server.navigate(&medium).await;
        let (_, snap) = server.snapshot().await;
        server.click(&ref_of(&snap, "button", "Place order")).await;
        let (_, after) = server.snapshot().await;
        assert!(after.contains("Order placed"), "{}: the click had no effect:\n{after}", server.name);
    }

    let mut times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); STEPS.len()]; servers.len()];
    for round in 0..rounds() {
        for (k, server) in servers.iter().enumerate() {
            server.close_browser().await;
            times[k][0].push(server.navigate(&small).await);
            let nav = server.navigate(&medium).await;
            let (snap_time, snap) = server.snapshot().await;
            times[k][1].push(nav + snap_time);
            let r = ref_of(&snap, "button", "Place order");
            times[k][2].push(server.click(&r).await);
            times[k][3].push(server.screenshot().await);
            if round == 0 {
                snapshots[k] = snap;
            }
        }
    }

    println!("### latency: {} rounds, servers taking turns\n", rounds());
    println!(
        "| step | {} p50 | p90 | {} p50 | p90 | toolgate / Playwright MCP (p50) |",
        servers[0].name, servers[1].name
    );
    println!("|---|---|---|---|---|---|");
    for (s, step) in STEPS.iter().enumerate() {
        let (a, b) = (&times[0][s], &times[1][s]);
        println!(
            "| {step} | {} | {} | {} | {} | {:.2}x |",
            ms(percentile(a, 50)),
            ms(percentile(a, 90)),
            ms(percentile(b, 50)),
            ms(percentile(b, 90)),
            percentile(a, 50).as_secs_f64() / percentile(b, 50).as_secs_f64()
        );
    }
    println!("\n### the medium page's snapshot as the model gets it\n");
    println!("| server | characters | lines | o200k tokens |");
    println!("|---|---|---|---|");
    let counted: Vec<usize> = snapshots.iter().map(|s| tokens(s)).collect();
    for ((server, snap), t) in servers.iter().zip(&snapshots).zip(&counted) {
        println!("| {} | {} | {} | {t} |", server.name, snap.chars().count(), snap.lines().count());
    }
    println!("\ntoolgate / Playwright MCP tokens: {:.2}x", counted[0] as f64 / counted[1] as f64);
    // The summary's rows: each step's p50 beside Playwright MCP's (the issue's target: at most
    // 1.2x), and the snapshot's size (target: smaller).
    for (s, step) in STEPS.iter().enumerate() {
        let (a, b) = (percentile(&times[0][s], 50), percentile(&times[1][s], 50));
        Row::new(format!("browser {step}, p50"), a.as_secs_f64() * 1e3, "ms")
            .peer("Playwright MCP", b.as_secs_f64() * 1e3)
            .target(Target::RatioAtMost(1.2))
            .emit();
    }
    Row::new("browser snapshot of a medium page", counted[0] as f64, "tokens")
        .peer("Playwright MCP", counted[1] as f64)
        .target(Target::RatioAtMost(1.0))
        .emit();
    if std::env::var_os("BENCH_SHOW_SNAPSHOTS").is_some() {
        for (server, snap) in servers.iter().zip(&snapshots) {
            println!("\n#### {}\n\n```\n{snap}\n```", server.name);
        }
    }
    println!("\nload average at end {}", loadavg());
    for server in servers {
        server.close_browser().await;
        let _ = server.client.cancel().await;
    }
}

fn main() {
    let addr = serve_pages();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(bench(addr));
}
