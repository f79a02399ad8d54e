//! `toolgate mcp add|list|remove`: edits of `toolgate.toml` that keep the user's text, refuse
//! bad entries, and round-trip through the config loader.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(ws: &Path, args: &[&str]) -> Output {
    Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .env("XDG_CONFIG_HOME", ws.join("xdg"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn add_list_remove_round_trip_and_keep_comments() {
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("toolgate.toml");
    std::fs::write(&file, "# team settings\n[gate]\ntimeout_secs = 12 # slow CI\n").unwrap();

    let out = toolgate(
        ws.path(),
        &[
            "mcp",
            "add",
            "everything",
            "-e",
            "PATH=${PATH}",
            "--deny",
            "get-env",
            "--",
            "mcp-server-everything",
            "stdio",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("mcp__everything__*"), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "add", "gh", "--url", "https://h.example/mcp", "-H", "X-Team: blue"]);
    assert!(out.status.success(), "{}", text(&out));

    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("# team settings\n[gate]\ntimeout_secs = 12 # slow CI\n"), "{written}");
    assert!(written.contains("[mcp.servers.everything]\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]"));

    let out = toolgate(ws.path(), &["mcp", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["name"], "everything");
    assert_eq!(lines[0]["transport"], "stdio");
    assert_eq!(lines[0]["tools"]["deny"], serde_json::json!(["get-env"]));
    assert_eq!(lines[1]["transport"], "http");
    assert_eq!(lines[1]["target"], "https://h.example/mcp");

    let out = toolgate(ws.path(), &["mcp", "add", "gh", "--url", "https://other.example/mcp"]);
    assert!(!out.status.success() && text(&out).contains("--force"), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "add", "gh", "--url", "https://other.example/sse", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "list"]);
    assert!(text(&out).contains("gh               sse    https://other.example/sse"), "{}", text(&out));

    for name in ["everything", "gh"] {
        let out = toolgate(ws.path(), &["mcp", "remove", name]);
        assert!(out.status.success(), "{}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "# team settings\n[gate]\ntimeout_secs = 12 # slow CI\n");
    let out = toolgate(ws.path(), &["mcp", "remove", "gh"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

#[test]
fn bad_entries_are_refused_and_the_file_is_untouched() {
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("toolgate.toml");
    std::fs::write(&file, "[gate]\ntimeout_secs = 12\n").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["mcp", "add", "x"], "--url URL"),
        (&["mcp", "add", "bad name", "--url", "https://h.example/mcp"], "letters, digits"),
        (&["mcp", "add", "x", "--url", "ftp://h.example/mcp"], "http:// or https://"),
        (&["mcp", "add", "x", "-e", "NOEQUALS", "--", "srv"], "NAME=VALUE"),
        (&["mcp", "add", "x", "--url", "https://h.example/mcp", "-H", "no colon"], "NAME: VALUE"),
    ];
    for (args, expect) in cases {
        let out = toolgate(ws.path(), args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(text(&out).contains(expect), "{args:?}: {}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "[gate]\ntimeout_secs = 12\n");

    // A hand-written entry missing its target is named when the config loads.
    std::fs::write(&file, "[mcp.servers.half]\nenabled = true\n").unwrap();
    let out = toolgate(ws.path(), &["mcp", "list"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("[mcp.servers.half] needs `command`"), "{}", text(&out));
}

#[test]
fn user_flag_edits_the_user_config() {
    let ws = tempfile::tempdir().unwrap();
    let out = toolgate(ws.path(), &["mcp", "add", "mine", "--user", "--url", "http://127.0.0.1:9/mcp"]);
    assert!(out.status.success(), "{}", text(&out));
    let user = ws.path().join("xdg/toolgate/config.toml");
    assert!(std::fs::read_to_string(user).unwrap().contains("[mcp.servers.mine]"));
    assert!(!ws.path().join("toolgate.toml").exists());
    let out = toolgate(ws.path(), &["mcp", "list"]);
    assert!(text(&out).contains("mine"), "{}", text(&out));
}

fn everything() -> std::path::PathBuf {
    let bin =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/npm/node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "{} is missing; run `cargo xtask deps`", bin.display());
    bin
}

#[test]
fn tools_connects_to_one_server_and_shows_the_gate_names() {
    let ws = tempfile::tempdir().unwrap();
    let server = everything();
    let path = format!("PATH={}", std::env::var("PATH").unwrap());
    let out = toolgate(
        ws.path(),
        &["mcp", "add", "ev", "--disabled", "-e", &path, "--deny", "get-env", "--", server.to_str().unwrap(), "stdio"],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Also a server that cannot start: `tools` must not touch it.
    let out = toolgate(ws.path(), &["mcp", "add", "broken", "--", "/nonexistent/mcp-server"]);
    assert!(out.status.success(), "{}", text(&out));

    let out = toolgate(ws.path(), &["mcp", "tools", "ev", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let tools: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"mcp__ev__echo") && names.contains(&"mcp__ev__get-sum"), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with("get-env")), "denied tool listed: {names:?}");
    let echo = tools.iter().find(|t| t["name"] == "mcp__ev__echo").unwrap();
    assert_eq!(echo["visible"], true);

    let out = toolgate(ws.path(), &["mcp", "tools", "broken"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("/nonexistent/mcp-server"), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "tools", "nope"]);
    assert!(!out.status.success() && text(&out).contains("configured: broken, ev"), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "login", "ev"]);
    assert!(!out.status.success() && text(&out).contains("stdio server"), "{}", text(&out));
    assert!(!ws.path().join(".toolgate/state.db").exists() || text(&out).contains("stdio"));
}

#[test]
fn add_writes_the_sandbox_profile_and_list_shows_it() {
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("toolgate.toml");
    let out = toolgate(
        ws.path(),
        &[
            "mcp",
            "add",
            "files",
            "--allow-read",
            "~/notes",
            "--allow-write",
            "out",
            "--allow-network",
            "--",
            "mcp-server-filesystem",
            ".",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "add", "loose", "--no-sandbox", "--", "mcp-server-time"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "add", "plain", "--", "mcp-server-time"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(
        ws.path(),
        &[
            "mcp",
            "add",
            "gh",
            "--allow-host",
            "api.github.com",
            "--allow-host",
            "*.githubusercontent.com",
            "--",
            "gh-mcp",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(ws.path(), &["mcp", "add", "bad", "--allow-host", "10.0.0.1", "--", "srv"]);
    assert!(!out.status.success() && text(&out).contains("needs its port"), "{}", text(&out));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains("sandbox = { network = \"host\", read = [\"~/notes\"], write = [\"out\"] }"),
        "only what differs from the default is written: {written}"
    );
    assert!(written.contains("sandbox = { enabled = false }"), "{written}");
    assert!(
        written.contains(
            "sandbox = { allow_hosts = [\"api.github.com\", \"*.githubusercontent.com\"], network = \"proxy\" }"
        ),
        "{written}"
    );
    assert_eq!(written.matches("sandbox").count(), 3, "the default profile is not written: {written}");

    let out = toolgate(ws.path(), &["mcp", "list"]);
    let listed = text(&out);
    assert!(out.status.success(), "{listed}");
    assert!(
        listed.contains(
            "sandboxed: reads the workspace, its installation, ~/notes; writes .toolgate/mcp/files/, out; network host"
        ),
        "{listed}"
    );
    assert!(listed.contains("NOT sandboxed ([mcp.servers.loose.sandbox] enabled = false)"), "{listed}");
    assert!(listed.contains("writes .toolgate/mcp/plain/; network off"), "{listed}");
    assert!(listed.contains("network through toolgate's proxy to api.github.com, *.githubusercontent.com"), "{listed}");
    let out = toolgate(ws.path(), &["mcp", "list", "--json"]);
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let files = lines.iter().find(|l| l["name"] == "files").unwrap();
    assert_eq!(files["sandbox"]["network"], "host");
    assert_eq!(files["sandbox"]["read"][0], "~/notes");

    // Sandbox flags belong to stdio servers.
    let out = toolgate(ws.path(), &["mcp", "add", "web", "--url", "https://h.example/mcp", "--no-sandbox"]);
    assert!(!out.status.success(), "{}", text(&out));
}
