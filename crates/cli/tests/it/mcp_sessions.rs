//! Every MCP session its own session (issue 25, item 1): two clients of one `toolgate serve
//! --http`, each with its own `Mcp-Session-Id`, driven by the official Python SDK
//! (`tests/python/two_sessions.py`): read-before-write, file locks and the loop breaker are per
//! session.

use std::process::Command;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

#[test]
fn two_http_sessions_do_not_share_reads_locks_or_the_loop_breaker() {
    let server = toolgate_testkit::serve::HttpServer::start(TOOLGATE, &[]);
    let token = server.token.clone().expect("token file");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/two_sessions.py");
    let out = Command::new(python::sdk_python()).arg(script).args([&server.url, &token]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "two sessions:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
