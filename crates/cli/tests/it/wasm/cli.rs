//! `toolgate wasm install FILE --allow-http HOST/PREFIX --secret NAME` and `toolgate call`
//! end to end, through the real binary, with a host NAME (capability files refuse IP
//! addresses and local names, and this test does not weaken that rule): the workspace's
//! `[web] https_proxy` points at a forward proxy on loopback, the production way to reach a
//! named host through a proxy. The fetcher sends `GET http://api.example.com/...` to it;
//! it answers for that host. No test-only switch is involved.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use toolgate_testkit::receiver::{Receiver, Response};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const TOKEN: &str = "pX7wq2Lm9Rt4Vz8Nc3Kd";

/// A forward proxy on loopback that answers every request itself, recording what it got
/// (the request line names the host the guest asked for).
fn proxy() -> Receiver {
    Receiver::answering(Response::text(200, "items from api.example.com"))
}

/// Copies the compiled components the other tests cached (`.cache/wasm/compiled`, same engine
/// settings) into the workspace's cache, so `install` loads the Python interpreter instead of
/// compiling it again (tens of seconds in a debug build).
fn seed_compiled_cache(ws: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/wasm/compiled");
    let Ok(engines) = std::fs::read_dir(&from) else { return };
    for engine in engines.flatten() {
        let to = ws.join(".toolgate/wasm-cache").join(engine.file_name());
        let Ok(files) = std::fs::read_dir(engine.path()) else { continue };
        for file in files.flatten() {
            if file.path().extension().is_some_and(|e| e == "cwasm") {
                std::fs::create_dir_all(&to).expect("cache dir");
                let _ = std::fs::copy(file.path(), to.join(file.file_name()));
            }
        }
    }
}

/// Runs the CLI in `ws` (with `stdin`), returning success and stdout + stderr.
fn toolgate(ws: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    toolgate_with(ws, None, args, stdin)
}

/// [`toolgate`] with the user's data folder at `user`.
fn toolgate_with(ws: &Path, user: Option<&Path>, args: &[&str], stdin: &str) -> (bool, String) {
    let mut command = Command::new(TOOLGATE);
    match user {
        Some(dir) => command.env("TOOLGATE_DATA_DIR", dir),
        None => command.env("TOOLGATE_DATA_DIR", ws.join("no-user-tools")),
    };
    let mut child = command
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate runs");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("toolgate ends");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn install_with_allow_http_then_call_reaches_the_server() {
    let proxy = proxy();
    let port = proxy.port();
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    std::fs::write(
        ws.join("toolgate.toml"),
        format!("[approval]\nmode = \"never\"\n\n[web]\nhttps_proxy = \"http://127.0.0.1:{port}\"\n"),
    )
    .expect("config");
    std::fs::write(ws.join("fetcher.wasm"), super::http::component()).expect("component");
    super::http::compile_into_shared_cache().await;
    seed_compiled_cache(ws);
    // The credential and plain http (no TLS for a made-up host) come from a capability file;
    // the endpoint the call uses comes from `--allow-http` alone (the file's prefix is unused).
    std::fs::write(
        ws.join("grants.json"),
        r#"{"http": {"allow": [{"host": "api.example.com", "path_prefix": "/unused/"}], "allow_insecure": true,
                     "credentials": [{"secret": "EXAMPLE_TOKEN", "host": "api.example.com", "location": {"bearer": {}}}]},
            "limits": {"memory_mb": 64, "instances": 16, "component_mb": 32}}"#,
    )
    .expect("capabilities");

    let (ok, out) = toolgate(ws, &["tools", "secret", "EXAMPLE_TOKEN"], TOKEN);
    assert!(ok, "{out}");
    let wasm = ws.join("fetcher.wasm");
    let caps = ws.join("grants.json");
    let (ok, out) = toolgate(
        ws,
        &[
            "wasm",
            "install",
            wasm.to_str().expect("utf-8"),
            "--name",
            "fetcher",
            "--capabilities",
            caps.to_str().expect("utf-8"),
            "--allow-http",
            "api.example.com/v1",
            "--secret",
            "EXAMPLE_TOKEN",
        ],
        "",
    );
    assert!(ok, "{out}");
    assert!(out.contains("installed `wasm__fetcher`"), "{out}");
    assert!(out.contains("http: api.example.com/v1 (any method)"), "{out}");
    assert!(out.contains("secret existence: EXAMPLE_TOKEN"), "{out}");

    let (ok, out) = toolgate(ws, &["call", "wasm__fetcher", r#"{"url": "http://api.example.com/v1/items?q=1"}"#], "");
    assert!(ok, "{out}");
    assert!(out.contains("items from api.example.com"), "{out}");
    assert!(!out.contains(TOKEN), "the credential reached the output: {out}");
    let request = proxy.next(Duration::ZERO).expect("the request reached the server").text();
    assert!(request.starts_with("GET http://api.example.com/v1/items?q=1 HTTP/1.1"), "{request}");
    assert!(request.contains(&format!("authorization: Bearer {TOKEN}")), "{request}");

    // Outside what `--allow-http` granted: refused, nothing sent.
    let (ok, out) = toolgate(ws, &["call", "wasm__fetcher", r#"{"url": "http://api.example.com/v2/items"}"#], "");
    assert!(!ok, "{out}");
    assert!(out.contains("path `/v2/items` is outside"), "{out}");
    assert!(proxy.next(Duration::ZERO).is_none());

    // A capability file naming a private address is refused at install, flag or file.
    let (ok, out) =
        toolgate(ws, &["wasm", "install", wasm.to_str().expect("utf-8"), "--allow-http", "127.0.0.1/v1"], "");
    assert!(!ok && out.contains("IP addresses are not allowed"), "{out}");
}

#[test]
fn user_tools_install_with_the_cli_and_load_in_any_workspace() {
    let user = tempfile::tempdir().expect("tempdir");
    let (ws_a, ws_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let file = ws_a.path().join("echo.wasm");
    std::fs::write(&file, toolgate_testkit::wasm::Guest::default().component()).expect("component");
    let run = |ws: &Path, args: &[&str]| toolgate_with(ws, Some(user.path()), args, "");

    let (ok, out) = run(ws_a.path(), &["wasm", "install", "--user", file.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    assert!(user.path().join("tools/echo.wasm").is_file(), "{out}");
    let (ok, out) = run(ws_b.path(), &["wasm", "list", "--user"]);
    assert!(ok && out.contains("wasm__echo"), "{out}");
    let (ok, out) = run(ws_b.path(), &["wasm", "list"]);
    assert!(ok && out.contains("no WASM tools installed"), "the workspace has none of its own: {out}");
    let (ok, out) = run(ws_b.path(), &["call", "wasm__echo", r#"{"text": "anywhere"}"#]);
    assert!(ok && out.contains("anywhere"), "{out}");

    // A workspace tool of the same name wins, and the CLI says so.
    let mine = toolgate_testkit::wasm::Guest {
        description: "The workspace's echo.",
        ..toolgate_testkit::wasm::Guest::default()
    };
    std::fs::write(&file, mine.component()).expect("component");
    let (ok, out) = run(ws_b.path(), &["wasm", "install", file.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    let (ok, out) = run(ws_b.path(), &["call", "wasm__echo", r#"{"text": "here"}"#]);
    assert!(ok && out.contains("here"), "{out}");
    assert!(out.contains("warning: the workspace's WASM tool `wasm__echo` replaces the user's"), "{out}");
    assert!(!out.contains("not loaded"), "{out}");
    let (ok, out) = run(ws_b.path(), &["tools", "--format", "json"]);
    assert!(ok && out.contains("The workspace's echo."), "{out}");

    let (ok, out) = run(ws_b.path(), &["wasm", "remove", "--user", "echo"]);
    assert!(ok, "{out}");
    assert!(!user.path().join("tools/echo.wasm").exists());
}
