//! Serving over stdin/stdout. Nothing but protocol may be written to stdout.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio_util::sync::CancellationToken;

use crate::{CallHandler, Error, McpServer};

/// Serves `handler` to one client over stdin/stdout until the client closes stdin or
/// `shutdown` is cancelled. Calls [`CallHandler::shutdown`] before returning.
///
/// Must run on a Tokio runtime with I/O enabled. Unless stdin and stdout are both pipes, stdin
/// is read on the runtime's blocking pool, and a read cannot be cancelled: after a return on
/// `shutdown` it stays pending until the client closes stdin, so end the runtime with
/// `Runtime::shutdown_timeout` (as the `toolgate` binary does), not by dropping it, which
/// waits for that read.
pub async fn serve_stdio<H: CallHandler>(handler: Arc<H>, shutdown: CancellationToken) -> Result<(), Error> {
    let server = McpServer::new(Arc::clone(&handler));
    // When stdin and stdout are pipes (clients that spawn the server with pipes: the Python SDK,
    // rmcp, Codex), read and write them on the runtime's reactor. `stdio()` would hand every read
    // and write to the blocking pool, a thread switch each way per message (about 40 µs of a
    // 200 µs echo round trip in `benches/mcp.rs`). Anything else, a socket pair (Node clients) or
    // a terminal, keeps the blocking handles. Reopened descriptors keep O_NONBLOCK off fd 0/1.
    // A line that is not JSON gets a parse error back (`stdio_guard`).
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let result = match server.serve_with_ct(crate::stdio_guard::guard(reader, writer), shutdown).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|reason| tracing::debug!("MCP stdio session ended: {reason:?}"))
            .map_err(|e| Error::Stdio { message: e.to_string() }),
        // A 2026-07-28 client never sends `initialize`, so its leaving (stdin closed) ends the
        // wait for one: a normal end, as is Ctrl-C before anyone connected.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            tracing::debug!("MCP stdio session ended before or without `initialize`");
            Ok(())
        }
        Err(e) => Err(Error::Stdio { message: e.to_string() }),
    };
    handler.shutdown();
    result
}
