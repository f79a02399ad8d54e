//! Serving over stdin/stdout. Nothing but protocol may be written to stdout.

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::{CallHandler, Error, McpServer};

/// Serves `handler` to one client over stdin/stdout until the client closes stdin or
/// `shutdown` is cancelled. Calls [`CallHandler::shutdown`] before returning.
pub async fn serve_stdio<H: CallHandler>(handler: Arc<H>, shutdown: CancellationToken) -> Result<(), Error> {
    let server = McpServer::new(Arc::clone(&handler));
    let result = match server.serve_with_ct(rmcp::transport::stdio(), shutdown).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|reason| tracing::debug!("MCP stdio session ended: {reason:?}"))
            .map_err(|e| Error::Stdio { message: e.to_string() }),
        Err(e) => Err(Error::Stdio { message: e.to_string() }),
    };
    handler.shutdown();
    result
}
