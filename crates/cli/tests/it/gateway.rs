//! A team gateway on one node (issue 28, item 1): users and API keys made with `toolgate admin`,
//! `toolgate serve --http` with `[gateway] enabled` admitting MCP clients (the official Python
//! SDK) by key only, each call made and audited as the key's user, and a revoked or misplaced key
//! refused from the next request.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Sends `request` as is to the server of `url`; the whole response.
fn raw(url: &str, request: &str) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// A raw `initialize` POST with `key` (what any client sends first); the whole response.
fn post_with(url: &str, key: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    raw(
        url,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn keys_admit_their_users_and_nothing_else() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\n").unwrap();
    admin(ws.path(), &["user", "add", "ann", "--group", "ops"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann", "--note", "laptop"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob", "--expires", "1d"]);
    let echo_only = admin(ws.path(), &["key", "create", "--user", "ann", "--tool", "echo"]);
    let elsewhere = admin(ws.path(), &["key", "create", "--user", "bob", "--from", "10.0.0.0/8"]);
    for key in [&ann, &bob, &echo_only, &elsewhere] {
        assert!(key.starts_with("tg_") && key.len() == 84, "one key on stdout: {key}");
    }
    let listed = admin(ws.path(), &["key", "list"]);
    assert!(listed.contains("laptop") && !listed.contains(&ann[20..]), "the list never shows a secret:\n{listed}");

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    assert!(server.banner.contains("team gateway"), "{}", server.banner);
    assert!(server.token.is_none(), "a gateway makes no shared token");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_keys.py");
    let out =
        Command::new(python::sdk_python()).arg(script).args([&server.url, &ann, &bob, &echo_only]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "gateway keys:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The approvals API decides on everyone's calls: a user's key is refused there.
    let api = raw(
        &server.url,
        &format!(
            "GET /api/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {ann}\r\n\r\n"
        ),
    );
    assert!(api.starts_with("HTTP/1.1 403") && api.contains("admin"), "{api}");
    let lee = admin(server.ws.path(), &["user", "add", "lee", "--admin"]);
    assert!(lee.contains("lee"));
    let lee_key = admin(server.ws.path(), &["key", "create", "--user", "lee"]);
    let api = raw(
        &server.url,
        &format!(
            "GET /api/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {lee_key}\r\n\r\n"
        ),
    );
    assert!(api.starts_with("HTTP/1.1 200"), "an admin's key: {api}");

    let misplaced = post_with(&server.url, &elsewhere);
    assert!(misplaced.starts_with("HTTP/1.1 403") && misplaced.contains("may not be used from"), "{misplaced}");
    assert!(post_with(&server.url, &bob).starts_with("HTTP/1.1 200"), "bob's key works");
    let bob_id = &bob[3..19];
    admin(server.ws.path(), &["key", "revoke", bob_id]);
    let revoked = post_with(&server.url, &bob);
    assert!(revoked.starts_with("HTTP/1.1 401") && revoked.contains("revoked"), "from the next request: {revoked}");

    // Each call was made, and audited, as its key's user.
    let audit = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(server.ws.path())
        .args(["audit", "--json", "--tail", "50"])
        .output()
        .unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &serde_json::Value| r["tool"] == "echo")
        .collect();
    let users: Vec<&str> = rows.iter().filter_map(|r| r["user"].as_str()).collect();
    assert!(users.contains(&"ann") && users.contains(&"bob"), "echo rows by user: {users:?}");
    assert!(!users.contains(&"local"), "never the server's own identity: {users:?}");
}

#[test]
fn bad_admin_input_is_refused_with_what_to_do() {
    let ws = toolgate_testkit::serve::workspace();
    let run = |args: &[&str]| {
        Command::new(TOOLGATE).arg("--workspace").arg(ws.path()).arg("admin").args(args).output().unwrap()
    };
    let bad_name = run(&["user", "add", "../etc"]);
    assert!(!bad_name.status.success());
    assert!(String::from_utf8_lossy(&bad_name.stderr).contains("cannot be a name"), "{bad_name:?}");
    let no_user = run(&["key", "create", "--user", "ghost"]);
    assert!(String::from_utf8_lossy(&no_user.stderr).contains("no user `ghost`"), "{no_user:?}");
    admin(ws.path(), &["user", "add", "ann"]);
    let bad_expiry = run(&["key", "create", "--user", "ann", "--expires", "soon"]);
    assert!(String::from_utf8_lossy(&bad_expiry.stderr).contains("30d"), "{bad_expiry:?}");
    let bad_range = run(&["key", "create", "--user", "ann", "--from", "10.0.0.0/99"]);
    assert!(String::from_utf8_lossy(&bad_range.stderr).contains("not an address or range"), "{bad_range:?}");
    assert!(admin(ws.path(), &["key", "list"]).contains("no API keys"), "nothing was made");
    let unknown = run(&["key", "revoke", "0123456789abcdef"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no key"), "{unknown:?}");
}

#[test]
fn each_user_works_in_a_workspace_of_its_own() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\nworkspaces = \"users\"\n").unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_users.py");
    let out = Command::new(python::sdk_python()).arg(script).args([&server.url, &ann, &bob]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "per-user workspaces:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    use std::os::unix::fs::PermissionsExt;
    let users = server.ws.path().join("users");
    for dir in [users.clone(), users.join("ann"), users.join("bob")] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is its owner's alone", dir.display());
    }
    // Each user's calls are in that user's audit log only.
    let audited = |user: &str| {
        let out = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(users.join(user))
            .args(["audit", "--json", "--tail", "100"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect::<Vec<serde_json::Value>>()
    };
    let (ann_rows, bob_rows) = (audited("ann"), audited("bob"));
    assert!(ann_rows.iter().all(|r| r["user"] == "ann") && !ann_rows.is_empty(), "{ann_rows:?}");
    assert!(bob_rows.iter().all(|r| r["user"] == "bob") && bob_rows.len() >= 7, "{bob_rows:?}");
}

/// Grants and access requests end to end (issue 28, items 4 and 5): `gateway_grants.py`
/// drives the server with the official MCP SDK and the administration with `toolgate admin`.
#[test]
fn grants_decide_what_each_caller_lists_and_calls() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\nworkspaces = \"users\"\ndefault_tools = [\"echo\"]\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    admin(ws.path(), &["user", "add", "bob"]);
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["agent", "add", "ann-ci", "--owner", "ann"]);
    let granted = admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "read", "--tool", "time"]);
    assert!(granted.starts_with("grant ") && granted.contains("allow ann read,time"), "{granted}");
    admin(ws.path(), &["grant", "add", "--to", "ann-ci", "--tool", "time"]);
    // Bad grants are refused with what is wrong, and nothing is stored.
    for (args, why) in [
        (&["grant", "add", "--to", "nobody", "--tool", "read"][..], "there is no"),
        (&["grant", "add", "--to", "bob", "--tool", "<b>x</b>"][..], "not a tool name"),
        (&["grant", "add", "--to", "bob", "--mode", "maybe"][..], "mode is `allow`, `ask` or `deny`"),
        (&["grant", "add", "--to", "bob", "--server-config", "{\"a\":1}"][..], "bridged server"),
    ] {
        let out = Command::new(TOOLGATE).arg("--workspace").arg(ws.path()).arg("admin").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(admin(ws.path(), &["grant", "list"]).lines().count(), 2, "only the two good grants");
    let keys: Vec<String> = [["--user", "bob"], ["--user", "ann"], ["--agent", "ann-ci"], ["--user", "lee"]]
        .iter()
        .map(|who| admin(ws.path(), &["key", "create", who[0], who[1]]))
        .collect();

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_grants.py");
    let ws_path = server.ws.path().to_string_lossy().into_owned();
    let out = Command::new(python::sdk_python())
        .arg(script)
        .args([server.url.as_str(), TOOLGATE, ws_path.as_str()])
        .args(&keys)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "gateway grants:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A call refused by grants never reached a gate, and is audited all the same.
    let audit = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(server.ws.path())
        .args(["audit", "--json", "--tail", "200"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["tool"] == "time" && r["user"] == "bob" && r.to_string().contains("no grant"))
        .count();
    assert!(refused >= 2, "bob's refused calls of time are audited: {refused}");
}
