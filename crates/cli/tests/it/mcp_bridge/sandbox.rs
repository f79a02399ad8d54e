//! Bridged stdio servers in the sandbox: `tests/python/escape_server.py` does what a
//! compromised package would (read a secret in another folder and `/etc/shadow`, write outside
//! the workspace, connect to a loopback listener, leave a daemon behind). Each escape is tried
//! with the default profile and with `enabled = false`, so the test shows that the sandbox is
//! what stops it.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::sync::mpsc;

use super::*;

/// Outside every profile: a secret to read, a place to write, a listener to reach.
struct Targets {
    outside: tempfile::TempDir,
    listener_port: u16,
    heard: mpsc::Receiver<String>,
}

impl Targets {
    fn new() -> Targets {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "OUTSIDE-SECRET-7731\n").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let listener_port = listener.local_addr().unwrap().port();
        let (tx, heard) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut line = String::new();
                let _ = BufReader::new(stream).read_line(&mut line);
                let _ = tx.send(line);
            }
        });
        Targets { outside, listener_port, heard }
    }

    fn secret(&self) -> String {
        self.outside.path().join("secret.txt").display().to_string()
    }

    fn written(&self) -> PathBuf {
        self.outside.path().join("written.txt")
    }
}

fn escape_server(sandbox: ServerSandbox) -> ServerConfig {
    ServerConfig {
        command: Some(python().display().to_string()),
        args: vec![repo().join("crates/cli/tests/python/escape_server.py").display().to_string()],
        sandbox,
        ..ServerConfig::default()
    }
}

async fn escape_gate(sandbox: ServerSandbox) -> Setup {
    let setup = start(vec![("escape", escape_server(sandbox))], |c| c.approval.mode = ApprovalMode::Never);
    connected(&setup).await;
    setup
}

/// The text of an error or a result.
async fn attempt(gate: &Gate, tool: &str, params: Value) -> (bool, String) {
    match call(gate, &format!("mcp__escape__{tool}"), params).await {
        Ok(out) => (true, out.text_content()),
        Err(err) => (false, err.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_stops_each_escape_and_says_which_config_line_allows_it() {
    let targets = Targets::new();
    let setup = escape_gate(ServerSandbox::default()).await;
    let gate = &setup.gate;

    let (ok, text) = attempt(gate, "read_file", json!({"path": targets.secret()})).await;
    assert!(!ok && !text.contains("OUTSIDE-SECRET"), "{text}");
    assert!(text.contains("blocked by the sandbox") && text.contains(&targets.secret()), "{text}");
    assert!(text.contains("[mcp.servers.escape.sandbox] read = "), "names the line that allows it: {text}");

    let (ok, text) = attempt(gate, "read_file", json!({"path": "/etc/shadow"})).await;
    assert!(!ok && text.contains("blocked by the sandbox"), "{text}");

    let written = targets.written();
    let (ok, text) = attempt(gate, "write_file", json!({"path": written, "text": "owned"})).await;
    assert!(!ok && !written.exists(), "{text}");
    assert!(text.contains("[mcp.servers.escape.sandbox] write = "), "{text}");

    let (ok, text) = attempt(gate, "connect", json!({"port": targets.listener_port})).await;
    assert!(!ok && text.contains("network access is off"), "{text}");
    assert!(text.contains("network = \"host\""), "{text}");
    assert!(targets.heard.recv_timeout(Duration::from_millis(300)).is_err(), "the listener heard the server");

    // What it may do: keep state in its own folder (and only there under .toolgate).
    let (ok, text) = attempt(gate, "state", json!({"folder": ".toolgate/mcp/escape", "text": "kept"})).await;
    assert!(ok && text.contains("kept"), "{text}");
    let ws = setup._workspace.path();
    assert_eq!(std::fs::read_to_string(ws.join(".toolgate/mcp/escape/state.txt")).unwrap(), "kept");
    let (ok, text) = attempt(gate, "state", json!({"folder": ".toolgate", "text": "x"})).await;
    assert!(!ok, "the rest of .toolgate is not writable: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_sandbox_the_same_escapes_succeed() {
    let targets = Targets::new();
    let setup = escape_gate(ServerSandbox { enabled: false, ..ServerSandbox::default() }).await;
    let gate = &setup.gate;

    let (ok, text) = attempt(gate, "read_file", json!({"path": targets.secret()})).await;
    assert!(ok && text.contains("OUTSIDE-SECRET-7731"), "{text}");
    let written = targets.written();
    let (ok, text) = attempt(gate, "write_file", json!({"path": written, "text": "owned"})).await;
    assert!(ok && std::fs::read_to_string(&written).unwrap() == "owned", "{text}");
    let (ok, text) = attempt(gate, "connect", json!({"port": targets.listener_port})).await;
    assert!(ok, "{text}");
    let heard = targets.heard.recv_timeout(HANG_GUARD).unwrap();
    assert_eq!(heard, "hello from the server\n");
    if nix_root() {
        let (ok, text) = attempt(gate, "read_file", json!({"path": "/etc/shadow"})).await;
        assert!(ok, "root reads /etc/shadow unconfined: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_widened_in_config_allows_exactly_what_it_names() {
    let targets = Targets::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let sandbox = ServerSandbox {
        read: vec![targets.outside.path().display().to_string()],
        write: vec![elsewhere.path().display().to_string()],
        network: Some(ServerNetwork::Host),
        ..ServerSandbox::default()
    };
    let setup = escape_gate(sandbox).await;
    let gate = &setup.gate;
    let (ok, text) = attempt(gate, "read_file", json!({"path": targets.secret()})).await;
    assert!(ok && text.contains("OUTSIDE-SECRET-7731"), "{text}");
    // Readable is not writable.
    let (ok, text) = attempt(gate, "write_file", json!({"path": targets.written(), "text": "x"})).await;
    assert!(!ok && !targets.written().exists(), "{text}");
    let target = elsewhere.path().join("out.txt");
    let (ok, text) = attempt(gate, "write_file", json!({"path": target, "text": "allowed"})).await;
    assert!(ok && target.exists(), "{text}");
    let (ok, text) = attempt(gate, "connect", json!({"port": targets.listener_port})).await;
    assert!(ok, "{text}");
    assert_eq!(targets.heard.recv_timeout(HANG_GUARD).unwrap(), "hello from the server\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_the_server_leaves_behind_dies_with_it() {
    let setup = escape_gate(ServerSandbox::default()).await;
    let ws = setup._workspace.path().to_path_buf();
    let ticks = ws.join(".toolgate/mcp/escape/ticks");
    let (ok, text) = attempt(&setup.gate, "spawn_daemon", json!({"path": ".toolgate/mcp/escape/ticks"})).await;
    assert!(ok, "{text}");
    eventually("the daemon ticks", || std::fs::metadata(&ticks).is_ok_and(|m| m.len() > 0)).await;
    setup.gate.shutdown();
    // Once the server's process tree is gone the file stops growing.
    let mut last = u64::MAX;
    eventually("the daemon stopped", || {
        std::thread::sleep(Duration::from_millis(300));
        let now = std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
        let stopped = now == last;
        last = now;
        stopped
    })
    .await;
}

fn nix_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
}

// Reference servers as users install them, in the default profile.

fn venv_bin(name: &str) -> String {
    let bin = python().with_file_name(name);
    assert!(bin.exists(), "{} is missing; run `cargo xtask deps`", bin.display());
    bin.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_servers_from_pypi_and_npx_work_in_the_default_profile() {
    let repo_dir = tempfile::tempdir().unwrap();
    let servers = vec![
        ("time", ServerConfig { command: Some(venv_bin("mcp-server-time")), ..ServerConfig::default() }),
        (
            "git",
            ServerConfig {
                command: Some(venv_bin("mcp-server-git")),
                env: BTreeMap::from([("PATH".into(), "${PATH}".into())]),
                ..ServerConfig::default()
            },
        ),
        // `npx` finds the package installed in its working directory's node_modules: no network.
        (
            "everything",
            ServerConfig {
                command: Some("npx".into()),
                args: vec!["--offline".into(), "mcp-server-everything".into(), "stdio".into()],
                cwd: Some(repo().join(".cache/peers/npm")),
                env: BTreeMap::from([("PATH".into(), "${PATH}".into())]),
                ..ServerConfig::default()
            },
        ),
    ];
    let setup = start(servers, |c| c.approval.mode = ApprovalMode::Never);
    connected(&setup).await;
    let gate = &setup.gate;
    let ws = setup._workspace.path();

    let out = call(gate, "mcp__time__get_current_time", json!({"timezone": "UTC"})).await.unwrap();
    assert!(out.text_content().contains("\"timezone\": \"UTC\""), "{}", out.text_content());
    let out = call(gate, "mcp__everything__echo", json!({"message": "boxed"})).await.unwrap();
    assert!(out.text_content().contains("Echo: boxed"), "{}", out.text_content());

    // git: the workspace's repository is readable; the server cannot write it (nor one
    // elsewhere) with the default profile.
    let git = |dir: &Path, args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
    };
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(ws, &["add", "a.txt"]);
    git(ws, &["commit", "-qm", "first"]);
    let repo_path = ws.display().to_string();
    let out = call(gate, "mcp__git__git_log", json!({"repo_path": repo_path})).await.unwrap();
    assert!(out.text_content().contains("first"), "{}", out.text_content());
    std::fs::write(ws.join("b.txt"), "two\n").unwrap();
    let err = call(gate, "mcp__git__git_add", json!({"repo_path": repo_path, "files": ["b.txt"]})).await;
    let text = match err {
        Ok(out) => out.text_content(),
        Err(e) => e.to_string(),
    };
    assert!(!text.contains("Files staged successfully"), "the workspace is read-only for it: {text}");
    assert!(
        text.contains("blocked by the sandbox: writing") && text.contains("[mcp.servers.git.sandbox] write = ["),
        "{text}"
    );
    let other = repo_dir.path().display().to_string();
    let err = call(gate, "mcp__git__git_status", json!({"repo_path": other})).await.unwrap_err();
    assert!(!err.to_string().contains("On branch"), "{err}");
}

// A proxied network.

/// A loopback HTTP server answering every request with `body`; the request lines it got.
fn http_site(body: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        use std::io::Write;
        for mut stream in listener.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let _ = reader.read_line(&mut line);
            log.lock().unwrap().push(line.trim().to_owned());
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let _ =
                write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_server_reaches_its_allowed_hosts_through_the_proxy_and_nothing_else() {
    let (allowed, allowed_seen) = http_site("hello through the proxy");
    let (other, other_seen) = http_site("should not be reached");
    let sandbox = ServerSandbox {
        network: Some(ServerNetwork::Proxy),
        // The exact loopback address and port is allowed; a name resolving there is not.
        allow_hosts: vec![format!("127.0.0.1:{allowed}"), format!("localhost:{other}")],
        ..ServerSandbox::default()
    };
    let setup = escape_gate(sandbox).await;
    let gate = &setup.gate;

    let (ok, text) = attempt(gate, "http_get", json!({"url": format!("http://127.0.0.1:{allowed}/through")})).await;
    assert!(ok && text.contains("hello through the proxy"), "{text}");
    assert_eq!(allowed_seen.lock().unwrap().as_slice(), ["GET /through HTTP/1.1"]);

    let (ok, text) = attempt(gate, "http_get", json!({"url": format!("http://127.0.0.1:{other}/")})).await;
    assert!(
        !ok && text.contains(&format!("127.0.0.1:{other} is not in [mcp.servers.escape.sandbox] allow_hosts")),
        "{text}"
    );
    let (ok, text) = attempt(gate, "http_get", json!({"url": format!("http://localhost:{other}/")})).await;
    assert!(
        !ok && text.contains("localhost resolves to 127.0.0.1") && text.contains("exact address and port"),
        "{text}"
    );
    assert!(other_seen.lock().unwrap().is_empty(), "the other site was reached");

    // A client that ignores the proxy variables reaches nothing: its namespace has no way out.
    let (ok, text) = attempt(gate, "connect", json!({"port": allowed})).await;
    assert!(!ok, "{text}");
    assert_eq!(allowed_seen.lock().unwrap().len(), 1, "reached without the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launcher_that_cannot_reach_its_registry_fails_naming_the_host() {
    // `npx -y` for a package that is not installed: it must fetch it. The registry is pointed
    // somewhere the launcher's default allow list (registry.npmjs.org) does not cover, so the
    // test stays off the network and the proxy's refusal is what stops it.
    let npx = ServerConfig {
        command: Some("npx".into()),
        args: vec!["-y".into(), "toolgate-test-surely-not-a-package".into()],
        env: BTreeMap::from([
            ("PATH".into(), "${PATH}".into()),
            ("npm_config_registry".into(), "http://registry.invalid/".into()),
        ]),
        ..ServerConfig::default()
    };
    let mut timings = test_timings();
    timings.max_attempts = 1;
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.mcp.servers = BTreeMap::from([("launched".to_owned(), npx)]);
    let gate = Gate::builder(workspace.path()).config(config).no_audit().mcp_timings(timings).build().unwrap();
    gate.start_mcp();
    let err = call(&gate, "mcp__launched__anything", json!({})).await.unwrap_err().to_string();
    assert!(
        err.contains("toolgate's proxy")
            && err.contains("registry.invalid:80 is not in [mcp.servers.launched.sandbox] allow_hosts"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opt_out_is_on_the_audit_record() {
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.mcp.servers = BTreeMap::from([
        ("loose".to_owned(), escape_server(ServerSandbox { enabled: false, ..ServerSandbox::default() })),
        (
            "wide".to_owned(),
            escape_server(ServerSandbox { network: Some(ServerNetwork::Host), ..ServerSandbox::default() }),
        ),
        ("boxed".to_owned(), escape_server(ServerSandbox::default())),
    ]);
    let gate = Gate::builder(workspace.path()).config(config).mcp_timings(test_timings()).build().unwrap();
    assert!(gate.connect_mcp(HANG_GUARD).await);
    gate.shutdown();
    drop(gate);
    let store = toolgate::store::Store::open(&workspace.path().join(".toolgate/state.db")).unwrap();
    let rows: Vec<String> = store.audit_tail(100).unwrap().into_iter().map(|r| r.decision).collect();
    assert!(rows.iter().any(|d| d.contains("`loose` started unconfined")), "{rows:?}");
    assert!(rows.iter().any(|d| d.contains("`wide` started with the host's network")), "{rows:?}");
    assert!(!rows.iter().any(|d| d.contains("`boxed`")), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_a_changed_profile_restarts_the_server_with_it() {
    let targets = Targets::new();
    let setup = escape_gate(ServerSandbox::default()).await;
    let gate = &setup.gate;
    let (ok, _) = attempt(gate, "read_file", json!({"path": targets.secret()})).await;
    assert!(!ok);

    let mut mcp = gate.config().mcp.clone();
    let widened =
        ServerSandbox { read: vec![targets.outside.path().display().to_string()], ..ServerSandbox::default() };
    mcp.servers.insert("escape".into(), escape_server(widened));
    let (stopped, started) = gate.reload_mcp(&mcp);
    assert_eq!((stopped, started), (vec!["escape".to_owned()], vec!["escape".to_owned()]));
    assert!(gate.connect_mcp(HANG_GUARD).await);
    let (ok, text) = attempt(gate, "read_file", json!({"path": targets.secret()})).await;
    assert!(ok && text.contains("OUTSIDE-SECRET-7731"), "{text}");
}
