//! `toolgate-conformance serve --http ADDR`: a gate over the workspace, served over Streamable
//! HTTP with the suite's fixtures beside its tools and without a bearer token.
//!
//! The suite's server runner cannot send headers, so it cannot present a token; serving without
//! one means any process on the machine could call every tool served, `exec` included, so this
//! binds loopback addresses only (and `toolgate_mcp::serve_http` refuses anything else without
//! a token, too). Otherwise it is `toolgate serve --http`: the same gate (the workspace's and the
//! user's configuration), approvals asked through the client's elicitation or left waiting in the
//! approvals API, the same Host and body checks.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolgate::Gate;
use toolgate::approvals::{FirstAvailable, PendingApprovals};
use toolgate::config::ConfigSources;
use toolgate::mcp::{HttpConfig, HttpToken, McpApprover};

use crate::fixtures::Fixtures;

/// Serves until SIGINT or SIGTERM.
pub(crate) async fn run(workspace: &Path, addr: SocketAddr) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "toolgate-conformance serves without a bearer token, so it binds loopback addresses only \
             (e.g. --http 127.0.0.1:PORT), not {addr}"
        );
    }
    let config = ConfigSources::standard(workspace, None).load(None)?;
    let pending = PendingApprovals::new();
    let approver: Arc<dyn toolgate::Approver> =
        Arc::new(FirstAvailable(vec![Arc::new(McpApprover::default()), pending.clone()]));
    let gate = Gate::builder(workspace).config(config).approver(approver).build_shared()?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("cannot read the listening address")?;
    let mut http = HttpConfig { token: None, ..HttpConfig::new(HttpToken::fixed(String::new())) };
    // The suite checks that the server's own loopback origin is accepted (no page can have that
    // origin: nothing here serves HTML). `toolgate serve` accepts `--allow-origin` values only.
    let port = local.port();
    http.allowed_origins =
        ["localhost", "127.0.0.1", "[::1]"].iter().map(|host| format!("http://{host}:{port}")).collect();
    http.api = Some(pending);
    http.extra = Some(Arc::new(Fixtures::default()));
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone())?;
    eprintln!("toolgate-conformance: serving MCP over Streamable HTTP at http://{local}/mcp");
    eprintln!(
        "toolgate-conformance: WARNING: for the MCP conformance suite only: NO BEARER TOKEN is required, \
         so any process on this machine can call every tool served here"
    );
    eprintln!("toolgate-conformance: Ctrl-C stops the server");
    toolgate::mcp::serve_http(gate, listener, http, shutdown).await?;
    Ok(())
}

/// SIGINT and SIGTERM stop the server (running calls cancelled, the audit log written out).
fn stop_on_signals(shutdown: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        shutdown.cancel();
    });
    Ok(())
}
