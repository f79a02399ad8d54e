//! Progress and cancellation through a real peer (the official MCP Python SDK), against an
//! in-process Streamable HTTP server whose handler has a slow `sleep` tool. The SDK comes from
//! `<repo>/.cache/peers/venv` (`cargo xtask deps`); the test fails, never skips, without it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{Annotations, CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_mcp::{CallHandler, HttpConfig, HttpToken};

#[derive(Debug, Default)]
struct Slow {
    /// Calls of `sleep` that saw their cancellation token fire.
    cancelled: AtomicUsize,
}

#[toolgate_core::async_trait]
impl CallHandler for Slow {
    fn context(&self) -> CallContext {
        CallContext::new(std::env::temp_dir())
    }

    fn list(&self, _ctx: &CallContext) -> Vec<ToolSpec> {
        let object =
            json!({"type": "object", "properties": {"message": {"type": "string"}, "ms": {"type": "integer"}}});
        vec![
            ToolSpec::new("echo", "Echo.", object.clone()).annotations(Annotations::PURE),
            ToolSpec::new("sleep", "Sleep `ms` milliseconds, reporting progress.", object),
        ]
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        match name {
            "echo" => Ok(ToolOutput::text(params["message"].as_str().unwrap_or_default())),
            "sleep" => {
                let ms = params["ms"].as_u64().unwrap_or(100);
                let steps = ms.div_ceil(100).max(1);
                for step in 0..steps {
                    ctx.progress.report(step as f64, Some(steps as f64), Some(format!("step {step}")));
                    tokio::select! {
                        () = ctx.cancel.cancelled() => {
                            self.cancelled.fetch_add(1, Ordering::SeqCst);
                            return Err(ToolError::Cancelled);
                        }
                        () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
                ctx.progress.report(steps as f64, Some(steps as f64), None);
                Ok(ToolOutput::text("slept"))
            }
            _ => Err(ToolError::UnknownTool { name: name.to_owned(), suggestion: None }),
        }
    }
}

fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/venv");
    let python = venv.join("bin/python");
    let has_sdk = |py: &Path| {
        Command::new(py)
            .args(["-c", "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '2.3.0')"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_sdk(&python) {
        let _ = Command::new("python3").args(["-m", "venv"]).arg(&venv).status();
        let _ = Command::new(&python).args(["-m", "pip", "install", "--quiet", "mcp==2.3.0"]).status();
    }
    assert!(has_sdk(&python), "the MCP Python SDK (mcp==2.3.0) is not in {}; run `cargo xtask deps`", venv.display());
    python
}

async fn progress_and_cancellation(mode: &str) {
    let python = python();
    let handler = Arc::new(Slow::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let config = HttpConfig::new(HttpToken::fixed("test-token"));
    let server = tokio::spawn(toolgate_mcp::serve_http(Arc::clone(&handler), listener, config, shutdown.clone()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .args(["http", mode, &url, "test-token"])
        .output()
        .await
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "Python MCP client failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // The abandoned 30 s sleep must have been stopped through its token, not left running.
    for _ in 0..50 {
        if handler.cancelled.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(handler.cancelled.load(Ordering::SeqCst), 1, "the abandoned call was cancelled\n{stdout}");
    shutdown.cancel();
    server.await.expect("server task").expect("server stopped cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_progress_and_cancel_over_http_legacy() {
    progress_and_cancellation("legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_progress_and_cancel_over_http_2026_07_28() {
    progress_and_cancellation("2026-07-28").await;
}

/// Cancellation on the byte-stream transport `toolgate serve` uses over stdio: a
/// `notifications/cancelled` for a running `tools/call` fires the call's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_notification_stops_the_call_over_a_byte_stream() {
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let handler = Arc::new(Slow::default());
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = toolgate_mcp::McpServer::new(Arc::clone(&handler));
    let running = tokio::spawn(async move {
        let service = server.serve(tokio::io::split(server_io)).await.expect("handshake");
        let _ = service.waiting().await;
    });
    let (read, mut write) = tokio::io::split(client_io);
    let mut lines = BufReader::new(read).lines();
    let send = |v: Value| format!("{v}\n");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    write.write_all(send(init).as_bytes()).await.expect("write");
    let reply = lines.next_line().await.expect("read").expect("initialize reply");
    assert!(reply.contains("\"id\":1"), "{reply}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    write.write_all(send(initialized).as_bytes()).await.expect("write");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sleep", "arguments": {"ms": 30000}}});
    write.write_all(send(call).as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}});
    write.write_all(send(cancel).as_bytes()).await.expect("write");
    for _ in 0..50 {
        if handler.cancelled.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(handler.cancelled.load(Ordering::SeqCst), 1, "the cancelled call saw its token fire");
    drop(write);
    drop(lines);
    let _ = tokio::time::timeout(Duration::from_secs(5), running).await;
}
