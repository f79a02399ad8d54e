//! Grants written by another process reach a team gateway's connected MCP clients (issue 28
//! item 5, "the requester is told ... MCP notification"): `toolgate admin grant add` and
//! `revoke` run beside a `toolgate serve` on the same workspace, and the user's open session
//! hears `notifications/tools/list_changed`, then lists what the grant gives.

use crate::support::gateway::{Client, admin, grant_id, heard};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn lists_time(client: &Client<'_>) -> bool {
    client.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).contains(r#""name":"time""#)
}

#[test]
fn a_grant_written_by_another_process_is_announced_to_connected_clients() {
    announced_with("");
}

/// The same with a workspace per user, where the handler has no tool list of its own (only
/// each caller's), which once meant no session was told anything.
#[test]
fn with_per_user_workspaces_too() {
    announced_with("workspaces = \"users\"\n");
}

fn announced_with(gateway: &str) {
    let ws = toolgate_testkit::serve::workspace();
    let config = format!("[gateway]\nenabled = true\ndefault_tools = [\"echo\"]\n{gateway}");
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann_key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let ws = server.ws.path();
    let ann = Client::connect(&server.url, &ann_key);
    assert!(!lists_time(&ann), "time needs a grant");
    let mut stream = ann.listen();
    let mut seen = String::new();

    let added = grant_id(&admin(ws, &["grant", "add", "--to", "ann", "--tool", "time"]));
    assert!(heard(&mut stream, &mut seen, "notifications/tools/list_changed", 1), "not told of the grant: {seen}");
    assert!(lists_time(&ann), "the new grant is listed");

    seen.clear();
    admin(ws, &["grant", "revoke", &added.to_string()]);
    assert!(heard(&mut stream, &mut seen, "notifications/tools/list_changed", 1), "not told of the revocation: {seen}");
    assert!(!lists_time(&ann), "revoked");
}
