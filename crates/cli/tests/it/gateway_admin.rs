//! The `gateway` tool's configuration actions on a running team gateway (issue 28 item 10),
//! through the binary: `config_apply` waits for a person (`toolgate approvals approve` from
//! another process), then the patch is in force on the gateway's gate and on every user's gate
//! (per-user workspaces) without a restart; `reload` reports a file that does not parse and keeps
//! the configuration in force.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::gateway::{Client, admin};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn call(client: &Client<'_>, tool: &str, arguments: &str) -> String {
    client.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    ))
}

fn lists(client: &Client<'_>, tool: &str) -> bool {
    client.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).contains(&format!(r#""name":"{tool}""#))
}

/// The pending approvals, as `toolgate approvals pending --json` prints them.
fn pending(ws: &std::path::Path) -> Vec<Value> {
    let out =
        Command::new(TOOLGATE).arg("--workspace").arg(ws).args(["approvals", "pending", "--json"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn an_approved_config_patch_is_in_force_for_every_user_without_a_restart() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[approval]\nwait_secs = 60\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    admin(ws.path(), &["user", "add", "max", "--admin"]);
    admin(ws.path(), &["user", "add", "ann"]);
    let (lee_key, ann_key) =
        (admin(ws.path(), &["key", "create", "--user", "lee"]), admin(ws.path(), &["key", "create", "--user", "ann"]));
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path().to_owned();
    let ann = Client::connect(&server.url, &ann_key);
    // Ann's gate exists (her workspace) before the patch: a reload must reach it, not only new ones.
    assert!(lists(&ann, "time") && call(&ann, "time", r#"{"operation":"now"}"#).contains(r#""isError":false"#));

    let url = server.url.clone();
    let apply = std::thread::spawn(move || {
        let lee = Client::connect(&url, &lee_key);
        let patch = r#"{"action":"config_apply","patch":"[tools]\ndeny = [\"time\"]"}"#;
        call(&lee, "gateway", patch)
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let entry = loop {
        if let Some(entry) = pending(&ws).into_iter().find(|e| e["tool"] == "gateway") {
            break entry;
        }
        assert!(Instant::now() < deadline, "config_apply never reached the approvals inbox");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(entry["subject"].as_str().unwrap_or_default().contains("deny"), "the inbox shows the patch: {entry}");
    assert!(!std::fs::read_to_string(ws.join("toolgate.toml")).unwrap().contains("deny"), "nothing before approval");
    admin_approve(&ws, entry["id"].as_i64().unwrap());
    let applied = apply.join().unwrap();
    assert!(applied.contains("and reloaded"), "{applied}");

    // In force at once on Ann's gate and the gateway's: no watcher debounce to wait for.
    assert!(!lists(&ann, "time"), "ann's gate follows the gateway's reload");
    let refused = call(&ann, "time", r#"{"operation":"now"}"#);
    assert!(!refused.contains(r#""isError":false"#), "{refused}");
    assert!(call(&ann, "echo", r#"{"message":"still"}"#).contains(r#""isError":false"#));

    // A file that does not parse: `reload` says so, and the configuration in force stays.
    let lee = Client::connect(&server.url, &admin(&ws, &["key", "create", "--user", "lee"]));
    let good = std::fs::read_to_string(ws.join("toolgate.toml")).unwrap();
    std::fs::write(ws.join("toolgate.toml"), format!("{good}\n[tools\n")).unwrap();
    let answer = call(&lee, "gateway", r#"{"action":"reload"}"#);
    assert!(answer.contains("previous configuration stays in force") && answer.contains("isError"), "{answer}");
    assert!(!lists(&ann, "time") && lists(&ann, "echo"), "the last good configuration stays");

    // Fixed without the deny: `reload` puts it in force (the watcher may have too).
    std::fs::write(ws.join("toolgate.toml"), good.replace("deny = [\"time\"]", "")).unwrap();
    let answer = call(&lee, "gateway", r#"{"action":"reload"}"#);
    assert!(answer.contains("reloaded"), "{answer}");
    assert!(lists(&ann, "time"), "the deny is gone for ann");
    // `config_get` shows the configuration in force, not the one the server started with.
    let got = call(&lee, "gateway", r#"{"action":"config_get"}"#);
    assert!(got.contains("isError\":false") && !got.contains(r#""deny":["time"]"#), "{got}");
    assert!(!got.contains(r#"\"deny\":[\"time\"]"#), "{got}");
}

fn admin_approve(ws: &std::path::Path, id: i64) {
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["approvals", "approve", &id.to_string(), "--as", "max"])
        .output()
        .unwrap();
    assert!(out.status.success(), "approve: {}", String::from_utf8_lossy(&out.stderr));
}

/// `[gateway.policy.USER]` gives one user a tool policy of their own on their gate (issue 28
/// item 2, "its own ... policy profile"): Ann's is `minimal`, Bob keeps the gateway's.
#[test]
fn a_user_can_have_a_policy_profile_of_their_own() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[gateway.policy.ann]\nprofile = \"minimal\"\n\
         deny = [\"echo\"]\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let (ann_key, bob_key) =
        (admin(ws.path(), &["key", "create", "--user", "ann"]), admin(ws.path(), &["key", "create", "--user", "bob"]));
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let (ann, bob) = (Client::connect(&server.url, &ann_key), Client::connect(&server.url, &bob_key));
    assert!(lists(&ann, "session_status") && !lists(&ann, "exec") && !lists(&ann, "echo"), "ann's own profile");
    assert!(lists(&bob, "exec") && lists(&bob, "echo"), "bob has the gateway's policy");
    let refused = call(&ann, "exec", r#"{"command":"true"}"#);
    assert!(!refused.contains(r#""isError":false"#), "{refused}");
}
