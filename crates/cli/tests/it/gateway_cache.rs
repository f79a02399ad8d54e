//! The gateway's caches (issue 28, "cached by revision"; `crates/gateway/src/cache.rs`) through
//! the real binary: a running `toolgate serve --http` keeps each key's verification and each
//! caller's compiled grants, and still sees a change made by `toolgate admin` in another process
//! on its very next request — a revoked key, a disabled user, a grant added and revoked — and an
//! expired key is refused once its time has passed.

use std::time::{Duration, Instant};

use crate::support::gateway::{Client, admin};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `echo` called once on `client`'s session: the whole HTTP answer.
fn echo(client: &Client<'_>) -> String {
    client.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"cached?"}}}"#,
    )
}

fn echoed(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200")
        && answer.contains(r#""text":"cached?""#)
        && answer.contains(r#""isError":false"#)
}

fn gateway(config: &str) -> toolgate_testkit::serve::HttpServer {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), format!("[gateway]\nenabled = true\n{config}")).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[])
}

#[test]
fn a_revoked_key_or_disabled_user_is_refused_on_the_next_call() {
    let server = gateway("");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    let bob = admin(ws, &["key", "create", "--user", "bob"]);
    let (ann_client, bob_client) = (Client::connect(&server.url, &ann), Client::connect(&server.url, &bob));
    for _ in 0..3 {
        assert!(echoed(&echo(&ann_client)) && echoed(&echo(&bob_client)), "both keys work, and are cached");
    }
    admin(ws, &["key", "revoke", &ann[3..19]]);
    let refused = echo(&ann_client);
    assert!(refused.starts_with("HTTP/1.1 401") && refused.contains("revoked"), "the next call: {refused}");
    assert!(echoed(&echo(&bob_client)), "another key is untouched");
    admin(ws, &["user", "disable", "bob"]);
    let refused = echo(&bob_client);
    assert!(refused.starts_with("HTTP/1.1 403") && refused.contains("disabled"), "the next call: {refused}");
    admin(ws, &["user", "enable", "bob"]);
    assert!(echoed(&echo(&bob_client)), "enabled again");
}

#[test]
fn grants_written_by_another_process_apply_to_the_next_call() {
    // `echo` needs a grant here.
    let server = gateway("default_tools = []\n");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    let client = Client::connect(&server.url, &ann);
    for _ in 0..2 {
        let refused = echo(&client);
        assert!(refused.contains("no grant") && !echoed(&refused), "no grant yet: {refused}");
    }
    let granted = admin(ws, &["grant", "add", "--to", "ann", "--tool", "echo"]);
    let id = granted.strip_prefix("grant ").and_then(|r| r.split(':').next()).expect("the grant's id").to_owned();
    for _ in 0..2 {
        assert!(echoed(&echo(&client)), "granted from the next call");
    }
    admin(ws, &["grant", "disable", &id]);
    assert!(echo(&client).contains("no grant"), "disabled at once");
    admin(ws, &["grant", "enable", &id]);
    assert!(echoed(&echo(&client)), "enabled at once");
    admin(ws, &["grant", "revoke", &id]);
    assert!(echo(&client).contains("no grant"), "revoked at once");
    // A group's grant reaches its members from the next call too (membership and grant both
    // change).
    admin(ws, &["user", "add", "cy", "--group", "ops"]);
    admin(ws, &["grant", "add", "--to", "ops", "--tool", "echo"]);
    let cy = admin(ws, &["key", "create", "--user", "cy"]);
    assert!(echoed(&echo(&Client::connect(&server.url, &cy))), "a member of ops");
    assert!(echo(&client).contains("no grant"), "ann is not in ops");
}

#[test]
fn an_expired_key_is_refused_once_its_time_has_passed() {
    let server = gateway("");
    let ws = server.ws.path();
    let ann = admin(ws, &["key", "create", "--user", "ann"]);
    // The shortest `--expires` is minutes: the test sets the key's end 2 s ahead in the store,
    // as a key made earlier would have it.
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let ends = now_ms + 2_000;
    let db = rusqlite::Connection::open(ws.join(".toolgate/state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let changed = db.execute("UPDATE api_keys SET expires_ms = ?1 WHERE id = ?2", rusqlite::params![ends, &ann[3..19]]);
    assert_eq!(changed.unwrap(), 1);
    let client = Client::connect(&server.url, &ann);
    assert!(echoed(&echo(&client)), "valid (and now cached) until its end");
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let answer = echo(&client);
        if !echoed(&answer) {
            break answer;
        }
        assert!(Instant::now() < deadline, "still admitted long after the key's end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(refused.starts_with("HTTP/1.1 401") && refused.contains("expired"), "{refused}");
    assert!(after >= ends, "refused only once the end has passed");
}
