//! Per-user upstream sign-ins (issue 28 item 3) through the binary: a team gateway with
//! per-user workspaces bridges a real Streamable HTTP MCP server on loopback
//! (`mcp_oauth/per_user_server.cjs`, the official TypeScript SDK's auth router and bearer
//! middleware) that checks bearer tokens and answers with whose token it saw and whose token
//! opened the session. Users sign in with `toolgate mcp login per --user NAME` (the test plays the
//! browser), call through the official MCP Python SDK with their own API keys, and sign out with
//! `toolgate mcp logout per --user NAME` while the gateway serves.
//!
//! The peer is installed by `cargo xtask deps` into `<repo>/.cache/peers/npm`; a missing peer
//! fails the test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use toolgate_testkit::ports::Listening;

use crate::mcp_oauth::{node, node_modules};
use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new(TOOLGATE).arg("--workspace").arg(ws).args(args).output().unwrap()
}

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = toolgate(ws, &[&["admin"], args].concat());
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The fixture on its loopback port, killed on drop.
pub(crate) struct Upstream {
    _process: Listening,
    port: u16,
}

impl Upstream {
    pub(crate) fn start() -> Upstream {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_oauth/per_user_server.cjs");
        let process = Listening::start(1, &["per-user fixture listening"], |ports| {
            let mut command = Command::new(node());
            command.arg(&script).env("NODE_MODULES", node_modules()).env("PORT", ports[0].to_string());
            command
        });
        let port = process.ports[0];
        Upstream { _process: process, port }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.port)
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(self.url(path)).await.unwrap().json().await.unwrap()
    }

    /// Signs `user` in to `per` through the CLI: the fixture's next sign-in is `user`'s, the
    /// test is the browser (it follows the printed URL to toolgate's loopback callback).
    async fn login(&self, ws: &Path, user: &str) {
        self.login_to(ws, "per", user, &["--user", user]).await;
    }

    /// Signs in to `server` as `person` with the extra arguments `how`.
    async fn login_to(&self, ws: &Path, server: &str, person: &str, how: &[&str]) {
        let user = person;
        let set = reqwest::Client::new().post(self.url(&format!("/test/subject?name={user}"))).send().await.unwrap();
        assert!(set.status().is_success());
        let mut login = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws)
            .args(["mcp", "login", server, "--no-browser"])
            .args(how)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(login.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        // Read to the end: closing the pipe early would kill the CLI's next `eprintln!`.
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut said = Vec::new();
        let url = loop {
            let line = tokio::task::block_in_place(|| rx.recv_timeout(Duration::from_secs(120)))
                .unwrap_or_else(|_| panic!("`toolgate mcp login --user {user}` printed no URL: {said:?}"));
            if line.trim().starts_with("http") {
                break line.trim().to_owned();
            }
            said.push(line);
        };
        let page = reqwest::get(&url).await.unwrap();
        assert!(page.status().is_success(), "{}", page.status());
        let out = tokio::task::block_in_place(|| login.wait_with_output()).unwrap();
        let printed = String::from_utf8_lossy(&out.stdout);
        let expected = if how.is_empty() { format!("signed in to `{server}`") } else { format!("as {user}") };
        assert!(out.status.success() && printed.contains(&expected), "{printed}");
    }
}

/// One call of `per`'s `whoami` through the official MCP Python SDK with `key`: (is_error, text).
pub(crate) fn call(url: &str, key: &str) -> (bool, String) {
    call_tool(url, key, "mcp__per__whoami")
}

/// One call of `tool` through the official MCP Python SDK with `key`: (is_error, text).
pub(crate) fn call_tool(url: &str, key: &str, tool: &str) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_call.py");
    let out = Command::new(python::sdk_python()).arg(script).args([url, key, tool]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: Value = stdout.lines().find_map(|l| serde_json::from_str(l).ok()).unwrap_or_else(|| {
        panic!("no result from gateway_call.py:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    });
    (line["is_error"].as_bool().unwrap(), line["text"].as_str().unwrap().to_owned())
}

/// Every file under `dir`, recursively, with its bytes.
fn files(dir: &Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, bytes));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_calls_an_upstream_server_with_their_own_sign_in() {
    // reqwest is built with rustls but no default provider (see toolgate-mcp).
    toolgate_mcp::bridge::oauth::install_crypto_provider();
    let upstream = Upstream::start();
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[mcp.servers.per]\nurl = \"{url}\"\n\n\
             [mcp.servers.team]\nurl = \"{url}\"\nshared = true\n\n\
             [mcp.servers.keyed]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer s3cr3t-static\" }}\n",
            url = upstream.url("/mcp")
        ),
    )
    .unwrap();
    for user in ["ann", "bob", "cy"] {
        admin(ws.path(), &["user", "add", user]);
        for server in ["per", "team", "keyed"] {
            admin(ws.path(), &["grant", "add", "--to", user, "--server", server]);
        }
    }
    let keys: Vec<String> =
        ["ann", "bob", "cy"].iter().map(|user| admin(ws.path(), &["key", "create", "--user", user])).collect();
    let (ann, bob, cy) = (&keys[0], &keys[1], &keys[2]);

    // A per-user server has no server-wide sign-in, and a sign-in is for a user that exists.
    for (args, why) in [
        (&["mcp", "login", "per", "--no-browser"][..], "--user USER"),
        (&["mcp", "login", "per", "--no-browser", "--user", "nobody"][..], "there is no user `nobody`"),
        (&["mcp", "login", "team", "--no-browser", "--user", "ann"][..], "is `shared`"),
    ] {
        let out = toolgate(ws.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{args:?}: {err}");
    }
    upstream.login(ws.path(), "ann").await;
    // A shared server: one sign-in, by the gateway's operator, serves every user (said explicitly).
    upstream.login_to(ws.path(), "team", "operator", &[]).await;
    let listed = String::from_utf8_lossy(&toolgate(ws.path(), &["mcp", "list"]).stdout).into_owned();
    assert!(listed.contains("(per user; signed in: ann)") && listed.contains("(signed in)"), "{listed}");

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let url = server.url.clone();
    let mut said = Vec::new();

    // Ann's call carries Ann's token, over a connection her token opened.
    let (error, text) = tokio::task::block_in_place(|| call(&url, ann));
    assert!(!error && text.contains("token of ann; session opened by ann"), "{text}");
    said.push(text);

    // The shared server answers every user with the operator's token; a key in `headers` on a
    // server not said to be shared is refused, and its value never shown.
    for key in [ann, cy] {
        let (error, text) = tokio::task::block_in_place(|| call_tool(&url, key, "mcp__team__whoami"));
        assert!(!error && text.contains("token of operator"), "{text}");
        said.push(text);
    }
    let (error, text) = tokio::task::block_in_place(|| call_tool(&url, ann, "mcp__keyed__whoami"));
    assert!(error && text.contains("shared = true") && !text.contains("s3cr3t"), "{text}");
    said.push(text);

    // Bob and Cy have not signed in: they are told how, and nobody's token is used for them.
    for (key, user) in [(bob, "bob"), (cy, "cy")] {
        let (error, text) = tokio::task::block_in_place(|| call(&url, key));
        assert!(
            error && text.contains("needs your own sign-in") && text.contains(&format!("--user {user}")),
            "{user}: {text}"
        );
        assert!(!text.contains("token of"), "{user} reached the server: {text}");
        said.push(text);
    }

    // Bob signs in while the gateway serves: his next call connects as him.
    upstream.login(server.ws.path(), "bob").await;
    let (error, text) = tokio::task::block_in_place(|| call(&url, bob));
    assert!(!error && text.contains("token of bob; session opened by bob"), "{text}");
    said.push(text);
    let (error, text) = tokio::task::block_in_place(|| call(&url, ann));
    assert!(!error && text.contains("token of ann; session opened by ann"), "{text}");
    said.push(text);

    // Ann signs out: her next call is refused with what to do; Bob's still works, as Bob.
    let out = toolgate(server.ws.path(), &["mcp", "logout", "per", "--user", "ann"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot"), "{out:?}");
    let (error, text) = tokio::task::block_in_place(|| call(&url, ann));
    assert!(error && text.contains("needs your own sign-in") && text.contains("--user ann"), "{text}");
    said.push(text);
    let (error, text) = tokio::task::block_in_place(|| call(&url, bob));
    assert!(!error && text.contains("token of bob; session opened by bob"), "{text}");
    said.push(text);
    let (error, text) = tokio::task::block_in_place(|| call(&url, ann));
    assert!(error && text.contains("--user ann"), "still signed out: {text}");
    said.push(text);

    // Every request the server authorized was made with the token of someone who had signed in.
    let seen = upstream.get("/test/seen").await;
    let seen: Vec<&str> = seen.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(seen.contains(&"ann") && seen.contains(&"bob"), "{seen:?}");
    assert!(!seen.contains(&"cy") && !seen.contains(&"unknown"), "{seen:?}");
    let listed = String::from_utf8_lossy(&toolgate(server.ws.path(), &["mcp", "list"]).stdout).into_owned();
    assert!(listed.contains("(per user; signed in: bob)"), "ann signed out, bob in: {listed}");

    // Each call is audited as its caller, in the caller's workspace.
    let users = server.ws.path().join("users");
    for user in ["ann", "bob", "cy"] {
        let out = toolgate(&users.join(user), &["audit", "--json", "--tail", "100"]);
        let rows: Vec<Value> =
            String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let calls = rows.iter().filter(|r| r["tool"] == "mcp__per__whoami").count();
        // Cy's calls never found the server's tools (it never connected for him).
        assert!((calls >= 1 || user == "cy") && rows.iter().all(|r| r["user"] == user), "{user}: {rows:?}");
        said.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }

    // No token in any error or audit row, nor in clear in any file of the gateway (the sign-ins
    // are kept encrypted in its state database; the users' workspaces hold none).
    let tokens = upstream.get("/test/tokens").await;
    let tokens: Vec<&str> = tokens.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(tokens.len(), 3, "one sign-in each for ann, bob and the operator: {tokens:?}");
    let mut all = Vec::new();
    files(server.ws.path(), &mut all);
    assert!(all.iter().any(|(p, _)| p.ends_with("users/ann/.toolgate/state.db")), "the audit logs were read");
    for token in &tokens {
        for text in &said {
            assert!(!text.contains(token), "a token in what a caller saw: {text}");
        }
        for (path, bytes) in &all {
            assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()), "a token in {}", path.display());
        }
    }
}

/// Without per-user workspaces the gateway's one gate serves every user: a server that is not
/// `shared` gets no one's token there (not even that of a user who signed in), and a call says how
/// per-user sign-ins are set up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_per_user_workspaces_no_users_token_is_used() {
    toolgate_mcp::bridge::oauth::install_crypto_provider();
    let upstream = Upstream::start();
    let ws = toolgate_testkit::serve::workspace();
    let config = format!("[gateway]\nenabled = true\n\n[mcp.servers.per]\nurl = \"{}\"\n", upstream.url("/mcp"));
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["grant", "add", "--to", "ann", "--server", "per"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    upstream.login(ws.path(), "ann").await;

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let (error, text) = tokio::task::block_in_place(|| call(&server.url, &ann));
    assert!(error && text.contains("[gateway] workspaces") && text.contains("shared = true"), "{text}");
    let seen = upstream.get("/test/seen").await;
    assert!(!seen.to_string().contains("ann"), "ann's token was used by the gateway's shared gate: {seen}");
}

/// A fresh random key (hex), for the fixture to accept and the test to look for.
pub(crate) fn random_key(label: &str) -> String {
    let mut bytes = [0u8; 20];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut bytes).unwrap();
    format!("{label}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// `toolgate mcp login keyed --user USER --key` with `key` on stdin: its output.
fn store_key(ws: &Path, user: &str, key: &str) -> std::process::Output {
    let mut child = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["mcp", "login", "keyed", "--user", user, "--key"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), format!("{key}\n").as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Per-user static keys (`user_key_header`): each user stores their own key for a server that
/// takes one, and that user's connection sends it; nobody else's key is ever used for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_calls_an_upstream_server_with_their_own_key() {
    // reqwest is built with rustls but no default provider (see toolgate-mcp).
    toolgate_mcp::bridge::oauth::install_crypto_provider();
    let (ann_key, ann_second, bob_key) = (random_key("ann"), random_key("ann2"), random_key("bob"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_oauth/per_user_key_server.cjs");
    let keys = format!("ann={ann_key},ann-second={ann_second},bob={bob_key}");
    let fixture = Listening::start(1, &["per-user key fixture listening"], |ports| {
        let mut command = Command::new(node());
        command.arg(&script).env("NODE_MODULES", node_modules()).env("PORT", ports[0].to_string()).env("KEYS", &keys);
        command
    });
    let base = format!("http://127.0.0.1:{}", fixture.ports[0]);
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[mcp.servers.keyed]\nurl = \"{base}/mcp\"\n\
             user_key_header = \"Authorization\"\nuser_key_prefix = \"Bearer \"\n"
        ),
    )
    .unwrap();
    for user in ["ann", "bob", "cy"] {
        admin(ws.path(), &["user", "add", user]);
        admin(ws.path(), &["grant", "add", "--to", user, "--server", "keyed"]);
    }
    let callers: Vec<String> =
        ["ann", "bob", "cy"].iter().map(|user| admin(ws.path(), &["key", "create", "--user", user])).collect();
    let (ann, bob, cy) = (&callers[0], &callers[1], &callers[2]);

    // A key is read from stdin only, for a user that exists, and never printed.
    let out = store_key(ws.path(), "ann", &ann_key);
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && printed.contains("stored ann's key for `keyed`"), "{printed}");
    assert!(!printed.contains(&ann_key), "the key was printed: {printed}");
    for (user, input, why) in [
        ("nobody", "x", "there is no user `nobody`"),
        ("bob", "", "no key on stdin"),
        ("bob", "two\tparts", "not one a header can carry"),
    ] {
        let out = store_key(ws.path(), user, input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{user} {input:?}: {err}");
    }
    let out = toolgate(ws.path(), &["mcp", "login", "keyed", "--key"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--user"), "{out:?}");
    let listed = String::from_utf8_lossy(&toolgate(ws.path(), &["mcp", "list"]).stdout).into_owned();
    assert!(listed.contains("(per-user keys; stored by: ann)") && !listed.contains(&ann_key), "{listed}");

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let url = server.url.clone();
    let mut said = Vec::new();
    let mut whoami = |key: &str| {
        let (error, text) = tokio::task::block_in_place(|| call_tool(&url, key, "mcp__keyed__whoami"));
        said.push(text.clone());
        (error, text)
    };

    // Ann's call carries Ann's key, over a connection her key opened.
    let (error, text) = whoami(ann);
    assert!(!error && text.contains("key of ann; session opened by ann"), "{text}");
    // Bob and Cy have none: told how to store theirs; nobody's key is sent for them.
    for (key, user) in [(bob, "bob"), (cy, "cy")] {
        let (error, text) = whoami(key);
        assert!(
            error && text.contains("needs your own key") && text.contains(&format!("--user {user} --key")),
            "{user}: {text}"
        );
    }
    // Bob stores his while the gateway serves: his next call sends it.
    assert!(store_key(server.ws.path(), "bob", &bob_key).status.success());
    let (error, text) = whoami(bob);
    assert!(!error && text.contains("key of bob; session opened by bob"), "{text}");
    // Ann replaces hers: her next call sends the new one, over a new connection.
    assert!(store_key(server.ws.path(), "ann", &ann_second).status.success());
    let (error, text) = whoami(ann);
    assert!(!error && text.contains("key of ann-second; session opened by ann-second"), "{text}");
    // Ann removes hers: her next call is refused; Bob's still works, as Bob.
    let out = toolgate(server.ws.path(), &["mcp", "logout", "keyed", "--user", "ann"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot the key of `keyed` for ann"), "{out:?}");
    let (error, text) = whoami(ann);
    assert!(error && text.contains("needs your own key") && text.contains("--user ann --key"), "{text}");
    let (error, text) = whoami(bob);
    assert!(!error && text.contains("key of bob; session opened by bob"), "{text}");

    // The server never saw a key of someone else's, or an unknown one.
    let seen: Value = reqwest::get(format!("{base}/test/seen")).await.unwrap().json().await.unwrap();
    let seen: Vec<&str> = seen.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(seen.contains(&"ann") && seen.contains(&"bob") && seen.contains(&"ann-second"), "{seen:?}");
    assert!(!seen.contains(&"unknown"), "{seen:?}");

    // No key in what a caller saw, an audit row, or any file of the gateway's folder in clear
    // (they are kept encrypted in its state database).
    let users = server.ws.path().join("users");
    for user in ["ann", "bob", "cy"] {
        let out = toolgate(&users.join(user), &["audit", "--json", "--tail", "100"]);
        said.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let out = toolgate(server.ws.path(), &["audit", "--json", "--tail", "200"]);
    said.push(String::from_utf8_lossy(&out.stdout).into_owned());
    let mut all = Vec::new();
    files(server.ws.path(), &mut all);
    assert!(all.iter().any(|(p, _)| p.ends_with(".toolgate/state.db")), "the gateway's database was read");
    for key in [&ann_key, &ann_second, &bob_key] {
        for text in &said {
            assert!(!text.contains(key.as_str()), "a key in what a caller saw: {text}");
        }
        for (path, bytes) in &all {
            assert!(!bytes.windows(key.len()).any(|w| w == key.as_bytes()), "a key in {}", path.display());
        }
    }
}
