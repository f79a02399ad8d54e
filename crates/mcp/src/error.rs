//! Why the server could not start or stopped.

use std::path::PathBuf;

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The MCP session over stdio could not start (the client did not complete the handshake,
    /// or stdin/stdout failed).
    #[error("the MCP session over stdio failed: {message}")]
    Stdio {
        /// What rmcp reported.
        message: String,
    },
    /// The HTTP listener failed.
    #[error("the MCP HTTP server failed: {source}")]
    Http {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bearer token file could not be read or written.
    #[error("cannot use the HTTP token file {}: {source}; check the permissions of the workspace's `.toolgate/` folder", path.display())]
    Token {
        /// The token file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
