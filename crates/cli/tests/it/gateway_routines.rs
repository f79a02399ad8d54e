//! A team gateway caller's routines (issue 28, "Grants") through the real binary: a routine
//! made over `/mcp` by a gateway user fires under that user's grants as they are at each fire,
//! read from the gateway's database: a user whose grants refuse `exec` cannot run it through a
//! webhook routine, a grant revoked by `toolgate admin` in another process refuses the next
//! fire, and a disabled user's routine runs nothing (the fire fails, saying why).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::gateway::{Client, admin, grant_id};
use crate::support::signed::{post as hook_post, python_hmac};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `tool` called with `args` on `client`'s session: its structured result, or its error text
/// as `{"error": ...}`.
fn call(client: &Client<'_>, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    let answer = client.send(&body.to_string());
    let message: Value = answer
        .lines()
        .filter_map(|l| l.strip_prefix("data: ").or(Some(l)))
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok().filter(|v| v.get("jsonrpc").is_some()))
        .unwrap_or_else(|| panic!("{tool}: no JSON-RPC answer in {answer}"));
    let result = &message["result"];
    if result["isError"] == true {
        return json!({"error": result["content"][0]["text"]});
    }
    result.get("structuredContent").cloned().unwrap_or_else(|| {
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null)
    })
}

/// Polls `routine_history` of `name` until its newest run's job has ended; that run.
fn ended_run(client: &Client<'_>, name: &str, runs: usize) -> Value {
    let t = Instant::now();
    loop {
        let h = call(client, "routine_history", json!({"name": name, "limit": 20}));
        let list = h["runs"].as_array().cloned().unwrap_or_default();
        if list.len() == runs
            && let Some(newest) = list.first()
            && matches!(newest["job"]["state"].as_str(), Some("completed" | "failed"))
        {
            return newest.clone();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the routine's run never ended: {h}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A signed delivery to `/hooks/NAME` (a distinct body each time, so none is a replay).
fn deliver(url: &str, name: &str, secret: &str, n: u32) -> (u16, String) {
    let body = format!(r#"{{"delivery":{n}}}"#);
    let ts = now_secs();
    let sig = format!("sha256={}", python_hmac(secret, &format!("{ts}.{body}")));
    hook_post(
        url,
        &format!("/hooks/{name}"),
        &[("X-Toolgate-Timestamp", ts.to_string()), ("X-Toolgate-Signature", sig)],
        &body,
    )
}

/// The `exec` rows of `user` in the gateway's audit log.
fn exec_rows(ws: &Path, user: &str) -> Vec<Value> {
    let audit =
        Command::new(TOOLGATE).arg("--workspace").arg(ws).args(["audit", "--json", "--tail", "500"]).output().unwrap();
    String::from_utf8_lossy(&audit.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["tool"] == "exec" && r["user"] == user)
        .collect()
}

#[test]
fn a_gateway_users_routine_fires_under_their_grants_as_they_are_at_each_fire() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\ndefault_tools = []\n\n[approval]\nmode = \"never\"\n",
    )
    .unwrap();
    for user in ["ann", "bob"] {
        admin(ws.path(), &["user", "add", user]);
        for tool in ["routine_create", "routine_run", "routine_history"] {
            admin(ws.path(), &["grant", "add", "--to", user, "--tool", tool]);
        }
    }
    // Ann may run commands; Bob may not.
    let anns_exec = grant_id(&admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "exec"]));
    let ann_key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path().to_owned();
    let secret = "bobs-webhook-secret-0123456789";

    // Bob's webhook routine calls exec: the routine is made, its fire runs nothing, and the
    // refusal is Bob's exec row, decided by the grants.
    let bob = Client::connect(&server.url, &bob_key);
    let made = call(
        &bob,
        "routine_create",
        json!({"name": "bobs", "trigger_type": "webhook", "prompt": "p", "action_type": "tool", "tool": "exec",
               "params": {"command": "echo ran > bob.txt"}, "webhook_secret": secret}),
    );
    assert!(made.get("error").is_none(), "{made}");
    let (status, reply) = deliver(&server.url, "bobs", secret, 1);
    assert_eq!(status, 202, "{reply}");
    let run = ended_run(&bob, "bobs", 1);
    assert_eq!(run["job"]["state"], "failed", "{run}");
    assert!(!ws.join("bob.txt").exists(), "Bob's routine ran exec without a grant for it");
    let rows = exec_rows(&ws, "bob");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["outcome"], "denied", "{rows:?}");
    assert!(rows[0]["decision"].as_str().unwrap().contains("gateway grants: refused"), "{rows:?}");
    // By hand (`routine_run`) too.
    let fired = call(&bob, "routine_run", json!({"name": "bobs"}));
    assert!(fired.get("error").is_none(), "{fired}");
    assert_eq!(ended_run(&bob, "bobs", 2)["job"]["state"], "failed");
    assert!(!ws.join("bob.txt").exists());

    // Ann's routine runs while her grant stands...
    let ann = Client::connect(&server.url, &ann_key);
    let made = call(
        &ann,
        "routine_create",
        json!({"name": "anns", "trigger_type": "webhook", "prompt": "p", "action_type": "tool", "tool": "exec",
               "params": {"command": "echo ran >> ann.txt"}, "webhook_secret": secret}),
    );
    assert!(made.get("error").is_none(), "{made}");
    assert_eq!(deliver(&server.url, "anns", secret, 2).0, 202);
    assert_eq!(ended_run(&ann, "anns", 1)["job"]["state"], "completed");
    assert_eq!(std::fs::read_to_string(ws.join("ann.txt")).unwrap(), "ran\n");
    // ...and not once it is revoked by another process: the next fire is refused.
    admin(&ws, &["grant", "revoke", &anns_exec.to_string()]);
    assert_eq!(deliver(&server.url, "anns", secret, 3).0, 202);
    assert_eq!(ended_run(&ann, "anns", 2)["job"]["state"], "failed");
    assert_eq!(std::fs::read_to_string(ws.join("ann.txt")).unwrap(), "ran\n", "ran after the revoke");
    let rows = exec_rows(&ws, "ann");
    let refused: Vec<&Value> = rows.iter().filter(|r| r["outcome"] == "denied").collect();
    assert_eq!(refused.len(), 1, "{rows:?}");
    assert!(refused[0]["decision"].as_str().unwrap().contains("gateway grants: refused"), "{rows:?}");

    // A disabled user's routine runs nothing at all: the fire fails and says why.
    admin(&ws, &["grant", "add", "--to", "ann", "--tool", "exec"]);
    admin(&ws, &["user", "disable", "ann"]);
    let (status, reply) = deliver(&server.url, "anns", secret, 4);
    assert_eq!(status, 500, "{reply}");
    assert!(reply.contains("`ann` is disabled"), "{reply}");
    assert_eq!(std::fs::read_to_string(ws.join("ann.txt")).unwrap(), "ran\n");
    assert_eq!(exec_rows(&ws, "ann").len(), rows.len(), "no call was made for a disabled user");
}
