//! The gateway's sign-in and page (issue 28, items 1, 5 and 7), through the real binary: a real
//! OIDC provider (npm `oidc-provider` with its development interactions) on loopback, driven
//! through the authorization code + PKCE flow by HTTP requests and in headless Chromium
//! (playwright-core); a local admin password; CSRF refused; stored XSS through a tool
//! parameter shown in the inbox and the audit search; the provider's JWT access tokens on
//! `/mcp` (and forged, expired and wrong-audience ones refused); RFC 9728 metadata; access
//! requests over `/api/access` (CSRF, self-approval, widening refused) and the requester told
//! by their page's event stream, a webhook and MCP `list_changed`; sessions kept across a
//! restart; a user's own audit rows; OIDC users made on first sign-in within an allowed domain.
//!
//! `TOOLGATE_KEEP_SCREENSHOTS=1` keeps the page's screenshots in `/tmp/toolgate-screens/`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_testkit::receiver::{Receiver, Response};

use crate::support::gateway::{admin_with_input as admin, heard as read_until};
use crate::support::npm::{node, peer};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const SECRET: &str = "provider-client-secret-for-tests";
/// What a model could put in a file it asks to write: it must stay text on the page.
const XSS: &str = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=1\">";

fn oidc_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/oidc").join(name)
}

/// Kills its process when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Playwright script of `support/oidc` in headless Chromium against the gateway on `port`,
/// signing in as `login`, with `env` besides; its screenshots are kept when
/// `TOOLGATE_KEEP_SCREENSHOTS` is set. It talks to the test in lines over stdio.
struct Chromium {
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    _process: Killed,
}

impl Chromium {
    fn start(script: &str, port: u16, login: &str, env: &[(&str, &str)]) -> Chromium {
        let screens = std::env::var_os("TOOLGATE_KEEP_SCREENSHOTS").map(|_| {
            std::fs::create_dir_all("/tmp/toolgate-screens").unwrap();
            "/tmp/toolgate-screens".to_owned()
        });
        let mut process = Command::new(node())
            .arg(oidc_script(script))
            .env("PLAYWRIGHT", peer("playwright-core/index.mjs"))
            .env("GATEWAY", format!("http://127.0.0.1:{port}"))
            .env("LOGIN", login)
            .env("SCREENS", screens.unwrap_or_default())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let input = process.stdin.take().unwrap();
        let output = BufReader::new(process.stdout.take().unwrap());
        Chromium { input, output, _process: Killed(process) }
    }

    /// The script's next line.
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line
    }

    /// The script's next line, which must be JSON.
    fn json(&mut self) -> serde_json::Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Tells the script that the test has done its part.
    fn go(&mut self) {
        writeln!(self.input, "go").unwrap();
    }
}

/// A free loopback port (the gateway's: the provider needs its redirect URI first).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The provider, for a gateway on `port`; its issuer URL.
fn provider(port: u16, ttl: u32) -> (Killed, String) {
    let mut child = Command::new(node())
        .arg(oidc_script("provider.mjs"))
        .env("OIDC_PROVIDER", peer("oidc-provider/lib/index.js"))
        .env("REDIRECT", format!("http://127.0.0.1:{port}/signin/callback"))
        .env("AUDIENCE", format!("http://127.0.0.1:{port}/mcp"))
        .env("CLIENT_SECRET", SECRET)
        .env("TTL", ttl.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // Keep its stdout open and drained: a write to a closed pipe would kill the provider.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let issuer = serde_json::from_str::<serde_json::Value>(&line).unwrap()["issuer"].as_str().unwrap().to_owned();
    (Killed(child), issuer)
}

/// `toolgate serve --http 127.0.0.1:PORT` on `ws`, once its banner is out.
fn gateway(ws: &Path, port: u16) -> Killed {
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .env("TG_OIDC_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("Ctrl-C stops the server") {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) => Killed(child),
        Ok(Err(log)) => panic!("the gateway did not start:\n{log}"),
        Err(_) => panic!("the gateway printed no banner in 60 s"),
    }
}

fn workspace(port: u16, issuer: Option<&str>) -> tempfile::TempDir {
    let ws = toolgate_testkit::serve::workspace();
    let mut config = "[gateway]\nenabled = true\n".to_owned();
    if let Some(issuer) = issuer {
        config.push_str(&format!(
            "[gateway.oidc]\nissuer = \"{issuer}\"\nclient_id = \"toolgate\"\nclient_secret_env = \"TG_OIDC_SECRET\"\n\
             # no leeway: the expiry test's token lives 3 seconds\nclock_skew_secs = 0\n"
        ));
    }
    let _ = port;
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// One HTTP/1.1 exchange: status, the raw head, the body (chunked bodies are joined roughly,
/// enough for `contains` checks).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

fn cookie(head: &str, name: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| l.strip_prefix("set-cookie: ").or_else(|| l.strip_prefix("Set-Cookie: ")))
        .find_map(|l| l.split(';').next().filter(|p| p.starts_with(&format!("{name}="))).map(str::to_owned))
}

fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    html[at..at + 64].to_owned()
}

/// An MCP message POSTed over Streamable HTTP with `bearer`, in `session` once there is one:
/// (status, head, body).
fn mcp_post(port: u16, bearer: &str, session: Option<&str>, message: &str) -> (u16, String, String) {
    let auth = format!("Bearer {bearer}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend(session.map(|id| ("Mcp-Session-Id", id)));
    http(port, "POST", "/mcp", &headers, message)
}

/// An MCP session for `bearer` (initialize, initialized): its id, or the status and response of
/// the initialize that failed.
fn open_mcp_session(port: u16, bearer: &str) -> Result<String, (u16, String)> {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, head, body) = mcp_post(port, bearer, None, init);
    if status != 200 {
        return Err((status, format!("{head}\n{body}")));
    }
    let session = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_owned()))
        .expect("a session id");
    mcp_post(port, bearer, Some(&session), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    Ok(session)
}

/// An MCP session for `bearer` that must open: its id.
fn mcp_session(port: u16, bearer: &str) -> String {
    open_mcp_session(port, bearer)
        .unwrap_or_else(|(status, response)| panic!("initialize answered {status}: {response}"))
}

/// An MCP call over Streamable HTTP with `bearer`: initialize, initialized, tools/call; the
/// call's response (or the failed initialize's).
fn mcp_call(port: u16, bearer: &str, tool: &str, args: serde_json::Value) -> (u16, String) {
    let session = match open_mcp_session(port, bearer) {
        Ok(session) => session,
        Err(failed) => return failed,
    };
    let call =
        serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":args}});
    let (status, _, body) = mcp_post(port, bearer, Some(&session), &call.to_string());
    (status, body)
}

#[test]
fn the_page_signs_in_with_oidc_and_shows_a_live_inbox_in_chromium() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = workspace(port, Some(&issuer));
    admin(ws.path(), &["user", "add", "ann", "--admin"], "");
    admin(ws.path(), &["user", "add", "bob"], "");
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"], "");
    let _gateway = gateway(ws.path(), port);

    let mut page = Chromium::start("page.mjs", port, "ann", &[]);
    let line = page.line();
    assert_eq!(line.trim(), "ready", "the page did not come up signed in: {line}");

    // Bob's client writes an instruction file (that needs approval) with hostile content; the
    // call waits in the inbox until Ann approves it on the page.
    let call = std::thread::spawn(move || {
        mcp_call(port, &bob, "write", serde_json::json!({"path": "AGENTS.md", "content": XSS}))
    });
    page.go();
    let found = page.json();
    assert_eq!(found["errors"], serde_json::json!([]), "{found:#}");
    assert!(found["signin_url"].as_str().unwrap().ends_with("/signin"), "{found:#}");
    assert_eq!(found["empty_inbox"], true, "{found:#}");
    assert_eq!(found["live"], true, "the call arrived without a reload: {found:#}");
    assert_eq!(found["badge"], "1", "{found:#}");
    assert!(
        found["inbox_text"].as_str().unwrap().contains("<script>window.__xss=1</script>"),
        "shown as text: {found:#}"
    );
    assert_eq!(found["xss_ran"], false, "{found:#}");
    assert_eq!(found["dialogs"], serde_json::json!([]), "{found:#}");
    assert!(found["notice"].as_str().unwrap().contains("decided"), "{found:#}");
    assert!(found["audit_text"].as_str().unwrap().contains("onerror"), "the audit row shows the parameter: {found:#}");
    assert_eq!(
        found["scripts"],
        serde_json::json!([format!("http://127.0.0.1:{port}/static/page.js")]),
        "no script but the page's own: {found:#}"
    );
    let (status, body) = call.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"isError\":false") || !body.contains("\"isError\":true"), "the approved call ran: {body}");
    assert_eq!(std::fs::read_to_string(ws.path().join("AGENTS.md")).unwrap(), XSS);
}

#[test]
fn sign_in_csrf_tokens_and_metadata_over_http() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = workspace(port, Some(&issuer));
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "ann"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    let _gateway = gateway(ws.path(), port);

    // The page's security headers.
    let (status, head, _) = http(port, "GET", "/", &[], "");
    assert_eq!(status, 303, "{head}");
    assert!(head.to_ascii_lowercase().contains("location: /signin"), "{head}");
    let (status, head, html) = http(port, "GET", "/signin", &[], "");
    assert_eq!(status, 200);
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{head}");
    assert!(!lower.contains("unsafe-inline") && lower.contains("x-frame-options: deny"), "{head}");

    // Password sign-in: the form's token must match its cookie.
    let form = cookie(&head, "tg_form").expect("a form cookie");
    let token = csrf_of(&html);
    let post = |body: &str, cookies: &str| {
        http(
            port,
            "POST",
            "/signin/password",
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", cookies)],
            body,
        )
    };
    let (status, _, _) = post("user=lee&password=correct+horse+battery+staple&csrf=0000", &form);
    assert_eq!(status, 403, "a wrong form token");
    let (status, _, body) = post(&format!("user=lee&password=wrong+password+entirely&csrf={token}"), &form);
    assert!(status == 401 && body.contains("wrong user name or password"), "{status} {body}");
    let (status, _, body) = post(&format!("user=nobody&password=correct+horse+battery+staple&csrf={token}"), &form);
    assert!(status == 401 && body.contains("wrong user name or password"), "the same answer: {body}");
    let (status, head, _) = post(&format!("user=lee&password=correct+horse+battery+staple&csrf={token}"), &form);
    assert_eq!(status, 303, "{head}");
    let session = cookie(&head, "tg_session").expect("a session cookie");
    assert!(head.contains("HttpOnly; SameSite=Lax"), "{head}");
    let (status, _, page) = http(port, "GET", "/", &[("Cookie", &session)], "");
    assert!(status == 200 && page.contains("Approvals inbox") && page.contains("lee"), "{page}");

    // Every POST needs the session's CSRF token: a cross-site form has the cookie, not it.
    let csrf = csrf_of(&page);
    let form_post = |path: &str, body: &str| {
        http(port, "POST", path, &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &session)], body)
    };
    let (status, _, _) = form_post("/keys", "user=ann&note=forged");
    assert_eq!(status, 403, "no token");
    let (status, _, _) = form_post("/keys", &format!("user=ann&note=forged&csrf={}", "f".repeat(64)));
    assert_eq!(status, 403, "a wrong token");
    let (status, _, created) = form_post("/keys", &format!("user=ann&note=%3Cscript%3Ex%3C%2Fscript%3E&csrf={csrf}"));
    assert_eq!(status, 200);
    assert!(created.contains("shown only this once") && created.contains(">tg_"), "{created}");
    assert!(
        created.contains("&lt;script&gt;x&lt;/script&gt;") && !created.contains("<script>x"),
        "the note is escaped"
    );
    let listed = admin(ws.path(), &["key", "list"], "");
    assert!(listed.contains("ann"), "{listed}");

    // The page sign-in through the provider, by HTTP (code + PKCE, state bound to the browser).
    let out = Command::new(node())
        .arg(oidc_script("flow.mjs"))
        .args(["signin", &format!("http://127.0.0.1:{port}"), "lee"])
        .output()
        .unwrap();
    let signed: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(signed["cookie"].is_string() && signed["html"].as_str().unwrap().contains("Approvals inbox"), "{signed:#}");
    // A user who is not an admin signs in to their own page: no inbox, no audit, no users.
    let out = Command::new(node())
        .arg(oidc_script("flow.mjs"))
        .args(["signin", &format!("http://127.0.0.1:{port}"), "ann"])
        .output()
        .unwrap();
    let ann: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let html = ann["html"].as_str().unwrap();
    assert!(ann["cookie"].is_string() && html.contains("My grants") && html.contains("My API keys"), "{ann:#}");
    assert!(!html.contains("Approvals inbox") && !html.contains("id=\"users\""), "{html}");
    assert!(html.contains("My calls"), "her own audit rows: {html}");
    let (status, _, _) = http(port, "GET", "/inbox", &[("Cookie", ann["cookie"].as_str().unwrap())], "");
    assert_eq!(status, 403, "the approvals inbox is for admins");
    // Someone nobody added is told how to be added, and not let in.
    let out = Command::new(node())
        .arg(oidc_script("flow.mjs"))
        .args(["signin", &format!("http://127.0.0.1:{port}"), "mallory"])
        .output()
        .unwrap();
    let refused: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let html = refused["html"].as_str().unwrap();
    assert!(refused["cookie"].is_null() && html.contains("no enabled user `mallory`"), "{refused:#}");
    // A callback this browser did not start is refused (login CSRF).
    let (status, _, body) = http(port, "GET", "/signin/callback?code=x&state=y", &[], "");
    assert!(status == 401 && body.contains("not started in this browser"), "{status} {body}");

    // RFC 9728: the metadata names the provider, and a 401 on /mcp points at it.
    let (status, _, meta) = http(port, "GET", "/.well-known/oauth-protected-resource", &[], "");
    assert_eq!(status, 200, "{meta}");
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["resource"], format!("http://127.0.0.1:{port}/mcp"));
    assert_eq!(meta["authorization_servers"], serde_json::json!([issuer]));
    let (status, head, _) = http(port, "POST", "/mcp", &[("Content-Type", "application/json")], "{}");
    assert_eq!(status, 401);
    assert!(
        head.contains(&format!("resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource\"")),
        "{head}"
    );
}

#[test]
fn mcp_accepts_the_providers_access_tokens_and_refuses_bad_ones() {
    let port = free_port();
    // Access tokens that live 3 seconds, to see one expire.
    let (_provider, issuer) = provider(port, 3);
    let ws = workspace(port, Some(&issuer));
    admin(ws.path(), &["user", "add", "ann"], "");
    let _gateway = gateway(ws.path(), port);
    let out = Command::new(node())
        .arg(oidc_script("flow.mjs"))
        .args(["token", &issuer, "ann"])
        .env("AUDIENCE", format!("http://127.0.0.1:{port}/mcp"))
        .output()
        .unwrap();
    let tokens: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let access = tokens["access_token"].as_str().unwrap();
    let (status, body) = mcp_call(port, access, "echo", serde_json::json!({"message": "hi"}));
    assert_eq!(status, 200, "the provider's token for this gateway: {body}");
    assert!(body.contains("hi"), "{body}");

    // Forged: the payload changed (another user), the signature kept.
    let parts: Vec<&str> = access.split('.').collect();
    let payload = String::from_utf8(base64_url_decode(parts[1])).unwrap().replace("\"sub\":\"ann\"", "\"sub\":\"lee\"");
    let forged = format!("{}.{}.{}", parts[0], base64_url_encode(payload.as_bytes()), parts[2]);
    let (status, body) = mcp_call(port, &forged, "echo", serde_json::json!({"message": "hi"}));
    assert_eq!(status, 401, "{body}");
    // Signed by the provider, but for another audience (the client's ID token).
    let id_token = tokens["id_token"].as_str().unwrap();
    let (status, body) = mcp_call(port, id_token, "echo", serde_json::json!({"message": "hi"}));
    assert_eq!(status, 401, "an ID token is not an access token for /mcp: {body}");
    assert!(body.contains("sign in again"), "{body}");
    // Expired: the same token, once its 3 seconds are over.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = mcp_call(port, access, "echo", serde_json::json!({"message": "hi"}));
        if status == 401 {
            assert!(body.contains("refused"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "the token was still accepted after it expired: {status} {body}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// An access token of `login` for the gateway on `port`, from the provider at `issuer`.
fn access_token(issuer: &str, port: u16, login: &str) -> serde_json::Value {
    let out = Command::new(node())
        .arg(oidc_script("flow.mjs"))
        .args(["token", issuer, login])
        .env("AUDIENCE", format!("http://127.0.0.1:{port}/mcp"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_rotated_provider_key_is_read_on_its_unknown_key_id() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = workspace(port, Some(&issuer));
    admin(ws.path(), &["user", "add", "ann"], "");
    let _gateway = gateway(ws.path(), port);
    let before = access_token(&issuer, port, "ann");
    let before = before["access_token"].as_str().unwrap();
    let (status, body) = mcp_call(port, before, "echo", serde_json::json!({"message": "old key"}));
    assert!(status == 200 && body.contains("old key"), "{status} {body}");

    // The provider rotates its key: the gateway's cached keys lack the new `kid`.
    let provider_port: u16 = issuer.rsplit(':').next().unwrap().parse().unwrap();
    let (status, _, rotated) = http(provider_port, "GET", "/rotate", &[], "");
    assert_eq!(status, 200, "{rotated}");
    let after = access_token(&issuer, port, "ann");
    let after = after["access_token"].as_str().unwrap();
    assert!(after.split('.').next() != before.split('.').next(), "a token under the new key");
    let (status, body) = mcp_call(port, after, "echo", serde_json::json!({"message": "new key"}));
    assert!(status == 200 && body.contains("new key"), "the keys were read again: {status} {body}");
    // The old key is gone from the provider's set, so its tokens are refused now.
    let (status, body) = mcp_call(port, before, "echo", serde_json::json!({"message": "old key"}));
    assert_eq!(status, 401, "{body}");
}

#[test]
fn without_oidc_no_metadata_is_published() {
    let port = free_port();
    let ws = workspace(port, None);
    let _gateway = gateway(ws.path(), port);
    let (status, _, body) = http(port, "GET", "/.well-known/oauth-protected-resource", &[], "");
    assert_eq!(status, 404, "{body}");
    let (status, head, _) = http(port, "POST", "/mcp", &[("Content-Type", "application/json")], "{}");
    assert_eq!(status, 401);
    assert!(!head.contains("resource_metadata"), "{head}");
    let (_, _, signin) = http(port, "GET", "/signin", &[], "");
    assert!(signin.contains("Sign in with a password") && !signin.contains("/signin/oidc"), "{signin}");
}

/// Signs `user` in with a password: the session cookie.
fn password_signin(port: u16, user: &str, password: &str) -> Result<String, (u16, String)> {
    let (_, head, html) = http(port, "GET", "/signin", &[], "");
    let form = cookie(&head, "tg_form").expect("a form cookie");
    let body = url_form(&[("user", user), ("password", password), ("csrf", &csrf_of(&html))]);
    let (status, head, body) = http(
        port,
        "POST",
        "/signin/password",
        &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &form)],
        &body,
    );
    cookie(&head, "tg_session").filter(|_| status == 303).ok_or((status, body))
}

fn url_form(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        for b in v.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// A signed-in browser: GET and POST (with the page's CSRF token) as one session.
struct Browser {
    port: u16,
    cookie: String,
}

impl Browser {
    fn get(&self, path: &str) -> (u16, String) {
        let (status, _, body) = http(self.port, "GET", path, &[("Cookie", &self.cookie)], "");
        (status, body)
    }

    fn post(&self, path: &str, pairs: &[(&str, &str)]) -> (u16, String) {
        let (_, page) = self.get("/");
        let mut pairs = pairs.to_vec();
        let csrf = csrf_of(&page);
        pairs.push(("csrf", &csrf));
        let (status, _, body) = http(
            self.port,
            "POST",
            path,
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &self.cookie)],
            &url_form(&pairs),
        );
        (status, body)
    }
}

/// The text of the page's notice (`<p class="notice ok">...</p>`), or the body.
fn notice(html: &str) -> String {
    html.find("class=\"notice")
        .and_then(|at| html[at..].split_once('>').map(|(_, rest)| rest.split("</p>").next().unwrap_or("").to_owned()))
        .unwrap_or_else(|| html.to_owned())
}

#[test]
fn a_user_requests_access_an_admin_approves_and_the_page_shows_grants_keys_and_audit() {
    let port = free_port();
    let ws = workspace(port, None);
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\ndefault_tools = [\"echo\", \"request_access\"]\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "ann"], "");
    admin(ws.path(), &["user", "add", "bob"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    admin(ws.path(), &["password", "set", "ann"], "ann's long passphrase\n");
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"], "");
    let _gateway = gateway(ws.path(), port);

    let ann = Browser { port, cookie: password_signin(port, "ann", "ann's long passphrase").unwrap() };
    let lee = Browser { port, cookie: password_signin(port, "lee", "correct horse battery staple").unwrap() };

    // Ann makes a key for herself: shown once, then listed without its secret.
    let (status, created) = ann.post("/keys", &[("note", "laptop")]);
    assert_eq!(status, 200, "{created}");
    let at = created.find("id=\"new-key\">").expect("the new key") + 13;
    let key = created[at..].split('<').next().unwrap().to_owned();
    assert!(key.starts_with("tg_") && created.contains("shown only this once"), "{created}");
    let (_, page) = ann.get("/");
    assert!(page.contains("laptop") && !page.contains(&key), "the secret is not shown again");
    // ... and cannot make one for Bob, or revoke Bob's.
    let (_, refused) = ann.post("/keys", &[("user", "bob")]);
    assert!(notice(&refused).contains("not for bob"), "{}", notice(&refused));
    let bob_id = bob_key.split('_').nth(1).unwrap().to_owned();
    let (_, refused) = ann.post(&format!("/keys/{bob_id}/revoke"), &[]);
    assert!(notice(&refused).contains("no key"), "{}", notice(&refused));
    let (status, body) = mcp_call(port, &bob_key, "echo", serde_json::json!({"message": "bob still works"}));
    assert!(status == 200 && body.contains("bob still works"), "{status} {body}");

    // Her key works on /mcp for the default tools; `time` needs a grant.
    let (status, body) = mcp_call(port, &key, "echo", serde_json::json!({"message": "from ann"}));
    assert!(status == 200 && body.contains("from ann"), "{status} {body}");
    let (_, body) = mcp_call(port, &key, "time", serde_json::json!({"operation": "now"}));
    assert!(body.contains("request_access") || body.contains("grant"), "refused for lack of a grant: {body}");

    // She asks on the page (with a hostile reason), and cannot approve her own request.
    let reason = "<img src=x onerror=alert(1)> for the release notes";
    let (_, asked) = ann.post("/access", &[("tool", "time"), ("reason", reason)]);
    assert!(notice(&asked).contains("sent to the admins"), "{}", notice(&asked));
    let id: String = notice(&asked).split_whitespace().nth(2).unwrap().to_owned();
    assert!(asked.contains("&lt;img src=x onerror=alert(1)&gt;") && !asked.contains("<img src=x"), "escaped");
    let (_, own) = ann.post(&format!("/access/{id}/approve"), &[]);
    assert!(notice(&own).contains("may not decide"), "{}", notice(&own));
    let (_, mine) = ann.get("/");
    assert!(!mine.contains(&format!("/access/{id}/approve")), "no approve button for a user");

    // Lee sees it waiting and approves it for 30 days: the grant exists, Ann's page shows it.
    let (_, page) = lee.get("/");
    assert!(page.contains(&format!("/access/{id}/approve")) && page.contains("ann"), "{page}");
    let (_, approved) = lee.post(&format!("/access/{id}/approve"), &[("expires", "30d")]);
    assert!(notice(&approved).contains(&format!("request {id} approved: grant")), "{}", notice(&approved));
    let (_, again) = lee.post(&format!("/access/{id}/reject"), &[]);
    assert!(notice(&again).contains("approved by lee already"), "{}", notice(&again));
    let (_, mine) = ann.get("/");
    let grants = &mine[mine.find("id=\"grants\"").unwrap()..mine.find("id=\"keys\"").unwrap()];
    assert!(grants.contains("<code>time</code>") && grants.contains("lee") && grants.contains("active"), "{grants}");
    let (status, body) = mcp_call(port, &key, "time", serde_json::json!({"operation": "now"}));
    assert!(status == 200 && !body.contains("\"isError\":true"), "granted now: {body}");

    // Ann revokes her key: /mcp refuses it at once.
    let key_id = key.split('_').nth(1).unwrap().to_owned();
    let (_, revoked) = ann.post(&format!("/keys/{key_id}/revoke"), &[]);
    assert!(notice(&revoked).contains("revoked"), "{}", notice(&revoked));
    let (status, _) = mcp_call(port, &key, "echo", serde_json::json!({"message": "x"}));
    assert_eq!(status, 401);

    // The audit search: every filter narrows, the export has the same rows.
    let (_, page) = lee.get("/?user=ann&tool=echo");
    let audit = &page[page.find("id=\"audit\"").unwrap()..page.find("id=\"keys\"").unwrap()];
    assert!(audit.contains("from ann") && !audit.contains("bob still works"), "{audit}");
    let (_, page) = lee.get("/?user=bob&outcome=ok");
    let audit = &page[page.find("id=\"audit\"").unwrap()..page.find("id=\"keys\"").unwrap()];
    assert!(audit.contains("bob still works") && !audit.contains("from ann"), "{audit}");
    let (_, page) = lee.get("/?tool=echo&to=2000-01-01T00%3A00");
    assert!(page.contains("No calls match"), "a time range before every call");
    let (status, csv) = lee.get("/audit.csv?tool=time&user=ann");
    assert_eq!(status, 200);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("time") || lines[0].contains("tool"), "a header: {csv}");
    assert!(lines.len() >= 3 && lines[1..].iter().all(|l| l.contains("ann") && l.contains("time")), "{csv}");
    let (status, jsonl) = lee.get("/audit.jsonl?user=bob");
    assert_eq!(status, 200);
    for line in jsonl.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(row["user"], "bob", "{line}");
    }

    // Sign-out ends the session on the server: the old cookie no longer opens the page.
    let (status, _) = lee.post("/signout", &[]);
    assert_eq!(status, 303);
    let (status, _) = lee.get("/audit.csv");
    assert_eq!(status, 401);
}

#[test]
fn password_sign_in_is_rate_limited() {
    let port = free_port();
    let ws = workspace(port, None);
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    let _gateway = gateway(ws.path(), port);
    for _ in 0..5 {
        let (status, body) = password_signin(port, "lee", "a wrong password!").unwrap_err();
        assert!(status == 401 && body.contains("wrong user name or password"), "{status} {body}");
    }
    // The sixth try is refused without checking, even with the right password.
    let (status, body) = password_signin(port, "lee", "correct horse battery staple").unwrap_err();
    assert!(status == 401 && body.contains("too many failed sign-ins"), "{status} {body}");
    // A password too short to set is refused with what to do.
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.path())
        .args(["admin", "password", "set", "lee"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"short\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("at least 12"), "{out:?}");
}

fn base64_url_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c).unwrap() as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn base64_url_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// `/api/access` with `auth` headers and a JSON body: the status and the JSON answer.
fn api(port: u16, method: &str, path: &str, auth: &[(&str, &str)], body: &str) -> (u16, serde_json::Value) {
    let mut headers = auth.to_vec();
    headers.push(("Content-Type", "application/json"));
    let (status, head, text) = http(port, method, path, &headers, body);
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {head}\n{text}"));
    (status, json)
}

/// A streamed GET (server-sent events): the open connection, its head sent.
fn stream(port: u16, path: &str, headers: &[(&str, &str)]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    stream
}

/// `tools/list` in session `session`: the names listed.
fn mcp_tools(port: u16, bearer: &str, session: &str) -> Vec<String> {
    let (_, _, body) = mcp_post(port, bearer, Some(session), r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let json =
        body.lines().find_map(|l| l.strip_prefix("data: ").filter(|d| d.contains("\"result\""))).unwrap_or(&body);
    let json: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"));
    json["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn access_requests_over_the_api_reach_the_requester_by_page_webhook_and_mcp() {
    let port = free_port();
    let hooks = Receiver::answering(Response::new(200));
    let ws = workspace(port, None);
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\ndefault_tools = [\"echo\", \"request_access\"]\n\
             notify_url = \"{}\"\n",
            hooks.url("/hook")
        ),
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "bob", "--group", "dev"], "");
    admin(ws.path(), &["user", "add", "kim", "--group", "dev"], "");
    admin(ws.path(), &["agent", "add", "bob-ci", "--owner", "bob"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    admin(ws.path(), &["password", "set", "bob"], "bob's long passphrase\n");
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"], "");
    let ci_key = admin(ws.path(), &["key", "create", "--user", "bob-ci"], "");
    let kim_key = admin(ws.path(), &["key", "create", "--user", "kim"], "");
    let lee_key = admin(ws.path(), &["key", "create", "--user", "lee"], "");
    let gateway_process = gateway(ws.path(), port);
    let bearer = |key: &str| format!("Bearer {key}");
    let (bob_auth, ci_auth, kim_auth, lee_auth) =
        (bearer(&bob_key), bearer(&ci_key), bearer(&kim_key), bearer(&lee_key));
    let as_bob = [("Authorization", bob_auth.as_str())];
    let as_kim = [("Authorization", kim_auth.as_str())];
    let as_lee = [("Authorization", lee_auth.as_str())];

    // Bob's MCP client is connected and listening for server notifications.
    let session = mcp_session(port, &bob_key);
    assert!(!mcp_tools(port, &bob_key, &session).contains(&"time".to_owned()), "time needs a grant");
    let mut notes = stream(
        port,
        "/mcp",
        &[("Authorization", &bob_auth), ("Accept", "text/event-stream"), ("Mcp-Session-Id", &session)],
    );
    let mut heard = String::new();
    // Bob's page is open, listening for changes of his requests.
    let bob = Browser { port, cookie: password_signin(port, "bob", "bob's long passphrase").unwrap() };
    let mut page_events = stream(port, "/events", &[("Cookie", &bob.cookie)]);
    let mut page_seen = String::new();
    assert!(read_until(&mut page_events, &mut page_seen, "data: ", 1), "the first event: {page_seen}");

    // No credential, a forged key: refused with what to do.
    let (status, body) = api(port, "GET", "/api/access", &[], "");
    assert!(status == 401 && body["error"].as_str().unwrap().contains("toolgate admin key create"), "{body}");
    let (status, _) = api(
        port,
        "GET",
        "/api/access",
        &[("Authorization", &format!("Bearer tg_{}_{}", "0".repeat(16), "1".repeat(64)))],
        "",
    );
    assert_eq!(status, 401);

    // Bob asks for `time` with a hostile reason; asked again, it is the same request.
    let asked = serde_json::json!({"tool": "time", "reason": XSS}).to_string();
    let (status, filed) = api(port, "POST", "/api/access", &as_bob, &asked);
    assert_eq!(status, 201, "{filed}");
    let id = filed["request"]["id"].as_i64().unwrap();
    let (status, again) = api(port, "POST", "/api/access", &as_bob, &asked);
    assert!(status == 200 && again["new"] == false && again["request"]["id"] == id, "{again}");
    // Bad input: no reason, nothing asked, not an object.
    for bad in [r#"{"tool": "time"}"#, r#"{"reason": "x"}"#, "[1]", "{"] {
        let (status, body) = api(port, "POST", "/api/access", &as_bob, bad);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // His agent's request is filed for him, naming the agent.
    let (status, by_ci) =
        api(port, "POST", "/api/access", &[("Authorization", &ci_auth)], r#"{"tool":"exec","reason":"ci builds"}"#);
    assert_eq!(status, 201, "{by_ci}");
    assert!(
        by_ci["request"]["user"] == "bob"
            && by_ci["request"]["reason"].as_str().unwrap().starts_with("[asked by agent bob-ci]"),
        "{by_ci}"
    );
    let ci_request = by_ci["request"]["id"].as_i64().unwrap();

    // Kim (same group, not its admin) neither sees nor decides Bob's requests.
    let (_, listed) = api(port, "GET", "/api/access", &as_kim, "");
    assert_eq!(listed["requests"], serde_json::json!([]), "{listed}");
    let (status, _) = api(port, "GET", &format!("/api/access/{id}"), &as_kim, "");
    assert_eq!(status, 404, "someone else's request is not found");
    let (status, body) = api(port, "POST", &format!("/api/access/{id}/approve"), &as_kim, "{}");
    assert!(status == 403 && body["error"].as_str().unwrap().contains("may not decide"), "{body}");
    // Bob may not approve his own request, by key, by his agent's key or on the page.
    let (status, body) = api(port, "POST", &format!("/api/access/{id}/approve"), &as_bob, "{}");
    assert!(status == 403 && body["error"].as_str().unwrap().contains("own request"), "{body}");
    let (status, _) = api(port, "POST", &format!("/api/access/{id}/approve"), &[("Authorization", &ci_auth)], "{}");
    assert_eq!(status, 403);
    let (_, page) = bob.get("/");
    let csrf = csrf_of(&page);
    let (status, body) = api(
        port,
        "POST",
        &format!("/api/access/{id}/approve"),
        &[("Cookie", &bob.cookie), ("X-CSRF-Token", &csrf)],
        "{}",
    );
    assert!(status == 403 && body["error"].as_str().unwrap().contains("own request"), "{body}");
    // Bob lists his own, with may_decide false.
    let (_, mine) = api(port, "GET", "/api/access?status=pending", &as_bob, "");
    let mine = mine["requests"].as_array().unwrap();
    assert!(mine.len() == 2 && mine.iter().all(|r| r["may_decide"] == false), "{mine:?}");

    // Lee, signed in to the page, decides over the API with the session cookie: without the
    // CSRF token (what another site's page would send) it is refused.
    let lee = Browser { port, cookie: password_signin(port, "lee", "correct horse battery staple").unwrap() };
    let (_, page) = lee.get("/");
    let lee_csrf = csrf_of(&page);
    let path = format!("/api/access/{id}/approve");
    let (status, body) = api(port, "POST", &path, &[("Cookie", &lee.cookie)], "{}");
    assert!(status == 403 && body["error"].as_str().unwrap().contains("X-CSRF-Token"), "{body}");
    let (status, _) = api(port, "POST", &path, &[("Cookie", &lee.cookie), ("X-CSRF-Token", &"0".repeat(64))], "{}");
    assert_eq!(status, 403, "a wrong token");
    let (status, _) = api(port, "POST", &path, &[("Cookie", &bob.cookie), ("X-CSRF-Token", &lee_csrf)], "{}");
    assert_eq!(status, 403, "another session's token");
    // An approval may narrow what was asked, never widen it.
    let (status, body) =
        api(port, "POST", &path, &[("Cookie", &lee.cookie), ("X-CSRF-Token", &lee_csrf)], r#"{"tools": ["exec"]}"#);
    assert!(status == 400 && body["error"].as_str().unwrap().contains("not widen"), "{body}");
    let (status, body) = api(port, "POST", &path, &as_lee, r#"{"expires": "soon"}"#);
    assert!(status == 400 && body["error"].as_str().unwrap().contains("not a duration"), "{body}");
    let (_, listed) = api(port, "GET", "/api/access", &as_lee, "");
    assert!(
        listed["requests"].as_array().unwrap().iter().any(|r| r["id"] == id && r["may_decide"] == true),
        "{listed}"
    );
    let (status, approved) = api(
        port,
        "POST",
        &path,
        &[("Cookie", &lee.cookie), ("X-CSRF-Token", &lee_csrf)],
        r#"{"expires": "1h", "message": "for the release"}"#,
    );
    assert_eq!(status, 200, "{approved}");
    assert!(approved["request"]["status"] == "approved" && approved["request"]["grant"].is_i64(), "{approved}");
    // The first decision stands.
    let (status, body) = api(port, "POST", &format!("/api/access/{id}/reject"), &as_lee, "{}");
    assert!(status == 409 && body["error"].as_str().unwrap().contains("approved by lee already"), "{body}");

    // Bob is told: his MCP session gets list_changed and now lists `time`; the webhook gets
    // the decision; his open page's event stream moves, and its requests table shows it.
    assert!(read_until(&mut notes, &mut heard, "notifications/tools/list_changed", 1), "no list_changed: {heard}");
    assert!(mcp_tools(port, &bob_key, &session).contains(&"time".to_owned()), "granted now");
    let hook = hooks.next(Duration::from_secs(20)).expect("the webhook was called").json();
    assert!(hook["event"] == "access_decided" && hook["request"]["id"] == id, "{hook}");
    assert_eq!(hook["request"]["status"], "approved", "{hook}");
    assert!(read_until(&mut page_events, &mut page_seen, "data: ", 2), "the page was not told: {page_seen}");
    let (status, rows) = bob.get("/requests");
    assert_eq!(status, 200);
    assert!(rows.contains(&format!("id=\"request-{id}-state\">approved")), "{rows}");
    assert!(rows.contains("&lt;script&gt;window.__xss=1&lt;/script&gt;") && !rows.contains("<script>window"), "{rows}");

    // A rejection over the API with a key; Kim still sees none of it.
    let (status, rejected) =
        api(port, "POST", &format!("/api/access/{ci_request}/reject"), &as_lee, r#"{"message":"use the runner"}"#);
    assert!(status == 200 && rejected["request"]["status"] == "rejected", "{rejected}");
    let hook = hooks.next(Duration::from_secs(20)).unwrap().json();
    assert_eq!(hook["request"]["status"], "rejected", "{hook}");
    let (_, theirs) = api(port, "GET", &format!("/api/access/{ci_request}"), &as_bob, "");
    assert_eq!(theirs["request"]["message"], "use the runner", "{theirs}");

    // Bob's page shows his own calls, and its export has his rows only: never Lee's.
    let (status, body) = mcp_call(port, &lee_key, "echo", serde_json::json!({"message": "lee's own call"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = mcp_call(port, &bob_key, "echo", serde_json::json!({"message": "bob's own call"}));
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let csv = loop {
        let (status, csv) = bob.get("/audit.csv");
        assert_eq!(status, 200);
        if csv.contains("bob's own call") || Instant::now() > deadline {
            break csv;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(csv.contains("bob's own call") && !csv.contains("lee's own call"), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.contains(",\"bob\",")), "{csv}");
    let (_, jsonl) = bob.get("/audit.jsonl?user=lee");
    assert!(jsonl.trim().is_empty(), "asking for lee's rows gives nothing: {jsonl}");
    let (_, page) = bob.get("/?user=");
    let audit = &page[page.find("id=\"audit\"").unwrap()..page.find("id=\"keys\"").unwrap()];
    assert!(
        audit.contains("My calls") && audit.contains("bob&#39;s own call") || audit.contains("bob's own call"),
        "{audit}"
    );
    assert!(!audit.contains("lee&#39;s own call") && !audit.contains("lee's own call"), "{audit}");
    let (status, _) = bob.get("/inbox");
    assert_eq!(status, 403, "the approvals inbox stays the admins'");

    // A restart keeps Bob signed in (with the same CSRF token); a forged cookie is nobody.
    drop(notes);
    drop(page_events);
    drop(gateway_process);
    let _gateway = gateway(ws.path(), port);
    let (status, page) = bob.get("/");
    assert!(status == 200 && page.contains("My grants"), "still signed in after the restart: {status}");
    assert_eq!(csrf_of(&page), csrf, "the session's CSRF token is the same");
    let forged = format!("tg_session={}", "a".repeat(64));
    let (status, head, _) = http(port, "GET", "/", &[("Cookie", &forged)], "");
    assert!(status == 303 && head.to_ascii_lowercase().contains("location: /signin"), "{head}");
    let (status, _) = api(port, "GET", "/api/access", &[("Cookie", &forged)], "");
    assert_eq!(status, 401);
    let (status, _) = bob.post("/signout", &[]);
    assert_eq!(status, 303);
    let (status, _) = api(port, "GET", "/api/access", &[("Cookie", &bob.cookie)], "");
    assert_eq!(status, 401, "signed out");
}

#[test]
fn oidc_users_are_made_on_first_sign_in_within_the_allowed_domain() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = workspace(port, Some(&issuer));
    let config = std::fs::read_to_string(ws.path().join("toolgate.toml")).unwrap();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!("{config}user_claim = \"email\"\nprovision = true\nallowed_domains = [\"example.test\"]\n"),
    )
    .unwrap();
    let _gateway = gateway(ws.path(), port);
    let signin = |login: &str| -> serde_json::Value {
        let out = Command::new(node())
            .arg(oidc_script("flow.mjs"))
            .args(["signin", &format!("http://127.0.0.1:{port}"), login])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    // Someone at the allowed domain gets a plain user on their first sign-in.
    let newbie = signin("newbie");
    let html = newbie["html"].as_str().unwrap();
    assert!(
        newbie["cookie"].is_string() && html.contains("newbie@example.test") && html.contains("My grants"),
        "{newbie:#}"
    );
    assert!(!html.contains("Approvals inbox"), "not an admin");
    let users = admin(ws.path(), &["user", "list"], "");
    assert!(users.contains("newbie@example.test"), "{users}");
    // Again: the same user, signed in.
    let again = signin("newbie");
    assert!(again["cookie"].is_string(), "{again:#}");
    // Someone elsewhere is refused, and no user is made.
    let outsider = signin("mallory@evil.test");
    let html = outsider["html"].as_str().unwrap();
    assert!(outsider["cookie"].is_null() && html.contains("not at an allowed domain"), "{outsider:#}");
    let users = admin(ws.path(), &["user", "list"], "");
    assert!(!users.contains("mallory"), "{users}");
}

#[test]
fn a_requester_sees_the_decision_live_in_chromium() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = workspace(port, Some(&issuer));
    admin(ws.path(), &["user", "add", "ann"], "");
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    let lee = admin(ws.path(), &["key", "create", "--user", "lee"], "");
    let _gateway = gateway(ws.path(), port);

    let mut page = Chromium::start("requester.mjs", port, "ann", &[("REASON", XSS)]);
    let filed = page.json();
    let id = filed["request"].as_i64().unwrap_or_else(|| panic!("no request filed: {filed}"));

    // Lee approves it over the API, from elsewhere: Ann's open page shows it without a reload.
    let auth = format!("Bearer {lee}");
    let (status, body) = api(port, "POST", &format!("/api/access/{id}/approve"), &[("Authorization", &auth)], "{}");
    assert_eq!(status, 200, "{body}");
    page.go();
    let found = page.json();
    assert_eq!(found["errors"], serde_json::json!([]), "{found:#}");
    assert_eq!(found["pending_before"], true, "{found:#}");
    assert_eq!(found["live"], true, "{found:#}");
    assert!(found["requests_text"].as_str().unwrap().contains("<script>window.__xss=1</script>"), "as text: {found:#}");
    assert_eq!(found["xss_ran"], false, "{found:#}");
    assert_eq!(found["dialogs"], serde_json::json!([]), "{found:#}");
    assert_eq!(found["csp"], serde_json::json!([]), "{found:#}");
    assert_eq!(found["my_calls"], true, "{found:#}");
    assert_eq!(
        found["scripts"],
        serde_json::json!([format!("http://127.0.0.1:{port}/static/page.js")]),
        "no script but the page's own: {found:#}"
    );
}

/// A gateway config with OIDC (when `issuer` is given) in which `time` needs a grant.
fn grants_workspace(issuer: Option<&str>) -> tempfile::TempDir {
    let ws = toolgate_testkit::serve::workspace();
    let mut config = "[gateway]\nenabled = true\ndefault_tools = [\"echo\", \"request_access\"]\n".to_owned();
    if let Some(issuer) = issuer {
        config.push_str(&format!(
            "[gateway.oidc]\nissuer = \"{issuer}\"\nclient_id = \"toolgate\"\nclient_secret_env = \"TG_OIDC_SECRET\"\n"
        ));
    }
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// Every grant, as `toolgate admin grant list --json` prints them.
fn grant_list(ws: &Path) -> Vec<serde_json::Value> {
    admin(ws, &["grant", "list", "--json"], "").lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn an_admin_adds_a_grant_with_the_pages_form_in_chromium() {
    let port = free_port();
    let (_provider, issuer) = provider(port, 600);
    let ws = grants_workspace(Some(&issuer));
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "ann"], "");
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"], "");
    let _gateway = gateway(ws.path(), port);
    let (_, body) = mcp_call(port, &ann, "time", serde_json::json!({"operation": "now"}));
    assert!(body.contains("request_access"), "no grant yet: {body}");

    let mut page = Chromium::start("grants.mjs", port, "lee", &[("USER", "ann"), ("HOSTILE", XSS)]);
    let found = page.json();
    assert_eq!(found["errors"], serde_json::json!([]), "{found:#}");
    // The hostile pattern is refused with what is wrong, the form comes back with it as text
    // (and the mode chosen), and nothing is stored.
    assert!(found["bad_notice"].as_str().unwrap().contains("is not a tool name or pattern"), "{found:#}");
    assert_eq!(found["bad_tools"], XSS, "{found:#}");
    assert_eq!(found["bad_args"], format!("exec({XSS})"), "{found:#}");
    assert_eq!(found["bad_mode"], "ask", "{found:#}");
    assert_eq!(found["rows_after_bad"], found["rows_before"], "{found:#}");
    assert_eq!(found["xss_ran"], false, "{found:#}");
    assert_eq!(found["dialogs"], serde_json::json!([]), "{found:#}");
    assert_eq!(found["csp"], serde_json::json!([]), "{found:#}");
    assert_eq!(
        found["scripts"],
        serde_json::json!([format!("http://127.0.0.1:{port}/static/page.js")]),
        "no script but the page's own: {found:#}"
    );
    // The good one is stored as granted by the signed-in admin, and applies to Ann's next call.
    assert!(found["ok_notice"].as_str().unwrap().contains("added for ann"), "{found:#}");
    assert_eq!(found["rows_after"].as_i64(), found["rows_before"].as_i64().map(|n| n + 1), "{found:#}");
    let grants = grant_list(ws.path());
    assert_eq!(grants.len(), 1, "only the good grant: {grants:?}");
    let g = &grants[0];
    assert!(g["subject"] == "ann" && g["tool_allow"] == serde_json::json!(["time"]), "{g}");
    assert!(g["granted_by"] == "lee" && g["mode"] == "allow" && g["note"] == "added in Chromium", "{g}");
    let (status, body) = mcp_call(port, &ann, "time", serde_json::json!({"operation": "now"}));
    assert!(status == 200 && !body.contains("\"isError\":true"), "granted now: {body}");
}

#[test]
fn grants_over_the_api_need_an_admin_and_the_csrf_token() {
    let port = free_port();
    let ws = grants_workspace(None);
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "bob"], "");
    admin(ws.path(), &["agent", "add", "lee-bot", "--owner", "lee"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    admin(ws.path(), &["password", "set", "bob"], "bob's long passphrase\n");
    let lee_key = admin(ws.path(), &["key", "create", "--user", "lee"], "");
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"], "");
    let bot_key = admin(ws.path(), &["key", "create", "--user", "lee-bot"], "");
    let _gateway = gateway(ws.path(), port);
    let (as_lee, as_bob, as_bot) =
        (format!("Bearer {lee_key}"), format!("Bearer {bob_key}"), format!("Bearer {bot_key}"));
    let as_lee = [("Authorization", as_lee.as_str())];

    // Bob's MCP client listens for notifications; `time` is not his yet.
    let session = mcp_session(port, &bob_key);
    assert!(!mcp_tools(port, &bob_key, &session).contains(&"time".to_owned()));
    let mut notes = stream(
        port,
        "/mcp",
        &[("Authorization", &as_bob), ("Accept", "text/event-stream"), ("Mcp-Session-Id", &session)],
    );
    let mut heard = String::new();

    // Not an admin, an admin's agent, no credential: refused, nothing stored.
    let wanted = r#"{"to": "bob", "tools": ["time"], "expires": "1h", "note": "release week"}"#;
    for (who, auth) in [("bob", as_bob.as_str()), ("lee's agent", as_bot.as_str())] {
        let (status, body) = api(port, "POST", "/api/grants", &[("Authorization", auth)], wanted);
        assert!(status == 403 && body["error"].as_str().unwrap().contains("admins"), "{who}: {status} {body}");
    }
    let (status, _) = api(port, "POST", "/api/grants", &[], wanted);
    assert_eq!(status, 401);
    // With the page's cookie but without the session's CSRF token (another site's form).
    let lee = Browser { port, cookie: password_signin(port, "lee", "correct horse battery staple").unwrap() };
    let (status, body) = api(port, "POST", "/api/grants", &[("Cookie", &lee.cookie)], wanted);
    assert!(status == 403 && body["error"].as_str().unwrap().contains("X-CSRF-Token"), "{body}");
    // Bad fields: 400 with what is wrong, checked by the CLI's code.
    for (bad, why) in [
        (r#"{"to": "bob", "tools": ["<script>alert(1)</script>"]}"#, "not a tool name"),
        (r#"{"to": "nobody", "tools": ["time"]}"#, "there is no"),
        (r#"{"to": "bob", "tools": ["time"], "mode": "always"}"#, "`allow`, `ask` or `deny`"),
        (r#"{"to": "bob", "tools": ["time"], "expires": "soon"}"#, "not a duration"),
        (r#"{"to": "bob", "tools": ["exec"], "args": "exec(git *"}"#, "must end with"),
        (r#"{"to": "bob", "tool": "time"}"#, "unknown field"),
        ("[1]", "JSON object"),
    ] {
        let (status, body) = api(port, "POST", "/api/grants", &as_lee, bad);
        assert!(status == 400 && body["error"].as_str().unwrap().contains(why), "{bad}: {status} {body}");
    }
    assert!(grant_list(ws.path()).is_empty(), "nothing stored");

    // Lee's key: the grant is made, by lee, and reaches Bob's session at once.
    let (status, body) = api(port, "POST", "/api/grants", &as_lee, wanted);
    assert_eq!(status, 201, "{body}");
    let grant = &body["grant"];
    assert!(grant["id"].is_i64() && grant["granted_by"] == "lee" && grant["expires_ms"].is_i64(), "{body}");
    assert!(read_until(&mut notes, &mut heard, "notifications/tools/list_changed", 1), "no list_changed: {heard}");
    assert!(mcp_tools(port, &bob_key, &session).contains(&"time".to_owned()), "granted now");
    let (status, body) = mcp_call(port, &bob_key, "time", serde_json::json!({"operation": "now"}));
    assert!(status == 200 && !body.contains("\"isError\":true"), "{body}");
    let id = grant["id"].as_i64().unwrap();

    // With the cookie and the token: made. A hostile argument rule is refused or stays text.
    let (_, page) = lee.get("/");
    let csrf = csrf_of(&page);
    let with_token = [("Cookie", lee.cookie.as_str()), ("X-CSRF-Token", csrf.as_str())];
    let hostile = r#"{"to": "bob", "tools": ["exec"], "args": "exec(echo <img src=x onerror=alert(1)>)"}"#;
    let (status, body) = api(port, "POST", "/api/grants", &with_token, hostile);
    assert!(status == 201 || status == 400, "{status} {body}");
    let (_, page) = lee.get("/");
    assert!(!page.contains("<img src=x onerror"), "the rule stays text on the page");
    if status == 201 {
        assert!(page.contains("exec(echo &lt;img src=x onerror=alert(1)&gt;)"), "shown escaped");
    }
    let (status, listed) = api(port, "GET", "/api/grants", &as_lee, "");
    assert!(status == 200 && listed["grants"].as_array().unwrap().iter().any(|g| g["id"] == id), "{listed}");
    let (status, _) = api(port, "GET", "/api/grants", &[("Authorization", &as_bob)], "");
    assert_eq!(status, 403);

    // On the page: a bad pattern shows the error (escaped) and stores nothing; disable and
    // enable apply to Bob's next call.
    let before = grant_list(ws.path()).len();
    let (status, html) = lee.post("/grants", &[("to", "bob"), ("tools", "<b>bold</b>"), ("args", "exec(\"><i>")]);
    assert_eq!(status, 200);
    assert!(notice(&html).contains("is not a tool name or pattern") && !html.contains("<b>bold"), "{}", notice(&html));
    assert!(html.contains("value=\"&lt;b&gt;bold&lt;/b&gt;\"") && !html.contains("\"><i>"), "refilled, escaped");
    assert_eq!(grant_list(ws.path()).len(), before, "nothing stored");
    let bob = Browser { port, cookie: password_signin(port, "bob", "bob's long passphrase").unwrap() };
    let (_, refused) = bob.post("/grants", &[("to", "bob"), ("tools", "exec")]);
    assert!(notice(&refused).contains("only the gateway&#39;s admins"), "{}", notice(&refused));
    assert_eq!(grant_list(ws.path()).len(), before, "a user adds no grant");
    let (_, off) = lee.post(&format!("/grants/{id}/disable"), &[]);
    assert!(notice(&off).contains(&format!("grant {id} disabled")), "{}", notice(&off));
    let (_, body) = mcp_call(port, &bob_key, "time", serde_json::json!({"operation": "now"}));
    assert!(body.contains("request_access"), "disabled: {body}");
    let (_, on) = lee.post(&format!("/grants/{id}/enable"), &[]);
    assert!(notice(&on).contains(&format!("grant {id} enabled")), "{}", notice(&on));
    let (_, body) = mcp_call(port, &bob_key, "time", serde_json::json!({"operation": "now"}));
    assert!(!body.contains("\"isError\":true"), "enabled again: {body}");
}

#[test]
fn a_requesters_webhook_that_fails_is_kept_on_the_request_shown_and_audited() {
    let port = free_port();
    // The webhook fails for decisions on `time` (500) and answers the others.
    let hooks = Receiver::start(|req| Response::new(if req.json()["request"]["tool"] == "time" { 500 } else { 200 }));
    let ws = grants_workspace(None);
    let config = std::fs::read_to_string(ws.path().join("toolgate.toml")).unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), format!("{config}notify_url = \"{}\"\n", hooks.url("/hook")))
        .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"], "");
    admin(ws.path(), &["user", "add", "ann"], "");
    admin(ws.path(), &["password", "set", "lee"], "correct horse battery staple\n");
    admin(ws.path(), &["password", "set", "ann"], "ann's long passphrase\n");
    let lee_key = admin(ws.path(), &["key", "create", "--user", "lee"], "");
    let ann_key = admin(ws.path(), &["key", "create", "--user", "ann"], "");
    let _gateway = gateway(ws.path(), port);
    let (as_lee, as_ann) = (format!("Bearer {lee_key}"), format!("Bearer {ann_key}"));

    // Ann asks for `time` (her reason hostile) and `read`; Lee approves both.
    let mut ids = Vec::new();
    for tool in ["time", "read"] {
        let asked = serde_json::json!({"tool": tool, "reason": XSS}).to_string();
        let (status, filed) = api(port, "POST", "/api/access", &[("Authorization", &as_ann)], &asked);
        assert_eq!(status, 201, "{filed}");
        let id = filed["request"]["id"].as_i64().unwrap();
        let (status, body) =
            api(port, "POST", &format!("/api/access/{id}/approve"), &[("Authorization", &as_lee)], "{}");
        assert_eq!(status, 200, "{body}");
        ids.push(id);
    }
    let (failed, told) = (ids[0], ids[1]);
    let mut heard: Vec<serde_json::Value> =
        (0..2).map(|_| hooks.next(Duration::from_secs(20)).expect("the webhook was called").json()).collect();
    heard.sort_by_key(|h| h["request"]["id"].as_i64());
    assert!(heard[0]["request"]["id"] == failed && heard[1]["request"]["id"] == told, "{heard:?}");

    // The failure is kept on the request (written after the webhook answered: read until it is).
    let deadline = Instant::now() + Duration::from_secs(20);
    let request = loop {
        let (_, body) = api(port, "GET", &format!("/api/access/{failed}"), &[("Authorization", &as_ann)], "");
        if !body["request"]["notify_error"].is_null() || Instant::now() > deadline {
            break body["request"].clone();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let error = request["notify_error"].as_str().unwrap_or_else(|| panic!("no failure stored: {request}"));
    assert!(error.contains("500"), "{request}");
    assert!(request["notify_failed_ms"].is_i64() && request["status"] == "approved", "the decision stands: {request}");
    let (_, ok) = api(port, "GET", &format!("/api/access/{told}"), &[("Authorization", &as_ann)], "");
    assert!(ok["request"]["notify_error"].is_null(), "a webhook that answered leaves no error: {ok}");

    // `request_access {"status": true}` tells Ann's client.
    let (status, body) = mcp_call(port, &ann_key, "request_access", serde_json::json!({"status": true}));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("could not be told of this decision") && body.contains("notify_error"), "{body}");

    // Her page and Lee's show it beside the request; the other request shows none.
    for (who, password) in [("ann", "ann's long passphrase"), ("lee", "correct horse battery staple")] {
        let page = Browser { port, cookie: password_signin(port, who, password).unwrap() };
        let (status, rows) = page.get("/requests");
        assert_eq!(status, 200);
        assert!(rows.contains(&format!("id=\"request-{failed}-notify\"")), "{who}: {rows}");
        assert!(rows.contains("the requester's webhook failed") && rows.contains("HTTP 500"), "{who}: {rows}");
        assert!(!rows.contains(&format!("id=\"request-{told}-notify\"")), "{who}: {rows}");
        assert!(!rows.contains("<script>window"), "{who}: the reason stays text");
    }

    // One audit row of the gateway's log: Ann's, the request, outcome notify_failed.
    let lee = Browser { port, cookie: password_signin(port, "lee", "correct horse battery staple").unwrap() };
    let deadline = Instant::now() + Duration::from_secs(20);
    let rows: Vec<serde_json::Value> = loop {
        let (status, jsonl) = lee.get("/audit.jsonl?tool=access_notify");
        assert_eq!(status, 200);
        let rows: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if !rows.is_empty() || Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert!(row["user"] == "ann" && row["outcome"] == "notify_failed", "{row}");
    assert!(row["error"].as_str().unwrap().contains("500"), "{row}");
    assert!(row["decision"].as_str().unwrap().contains(&format!("access request {failed} approved by lee")), "{row}");

    // Each decision is a row of its own, on Ann, naming who decided and the grant it made; the
    // hostile reason is in its parameters, never run on the page.
    let (status, jsonl) = lee.get("/audit.jsonl?tool=access_decide");
    assert_eq!(status, 200);
    let decided: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(decided.len(), 2, "{decided:?}");
    for id in [failed, told] {
        let row = decided.iter().find(|r| r["subject"] == format!("access request {id}")).expect("a decision row");
        assert!(row["user"] == "ann" && row["outcome"] == "approved", "{row}");
        let text = row["decision"].as_str().unwrap();
        assert!(text.starts_with(&format!("access request {id} approved by lee, grant ")), "{row}");
    }
    let (_, page) = lee.get("/?tool=access_decide");
    assert!(page.contains("access_decide") && !page.contains("<script>window"), "shown, escaped");
}
