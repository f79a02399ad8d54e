//! What the host lends a guest, as traits the embedding (the `toolgate` crate) implements:
//! calling tools through the gate, asking the secret store, reading confined workspace files,
//! and fetching over HTTP. A missing service makes its import answer with an error.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};

use crate::capabilities::HttpCapability;

/// Calls a tool through the gate's whole pipeline (policy, approval, limits, output).
#[async_trait::async_trait]
pub trait ToolInvoker: Send + Sync + 'static {
    /// Calls `tool` with `params` for the caller in `ctx`.
    async fn invoke(&self, ctx: &CallContext, tool: &str, params: Value) -> Result<ToolOutput, ToolError>;
}

/// Answers whether a secret exists; never returns its value.
pub trait SecretLookup: Send + Sync + 'static {
    /// Whether a secret named `name` is stored.
    fn exists(&self, name: &str) -> bool;
}

/// Reads a workspace file confined like the file tools (the kernel resolves the path beneath
/// the workspace, denied paths are invisible).
#[async_trait::async_trait]
pub trait WorkspaceReader: Send + Sync + 'static {
    /// The bytes of `rel` (workspace-relative, already normalized) under `workspace`, at most
    /// `max` bytes, or a message for the guest.
    async fn read(&self, workspace: &Path, rel: &str, max: usize) -> Result<Vec<u8>, String>;
}

/// An HTTP request from a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Headers (the host refuses `authorization`, `cookie`, `host`, `proxy-*` and the headers it
    /// injects credentials into).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<Vec<u8>>,
}

/// An HTTP response for a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// Body (bounded by the client).
    pub body: Vec<u8>,
}

/// Who sends a guest's request: the tool, its call (the cancel token that must abort the
/// request, and the identity its audit row names), and the request's number within the call.
#[derive(Debug, Clone, Copy)]
pub struct HttpOrigin<'a> {
    /// The tool's registered name (`wasm__NAME`).
    pub tool: &'a str,
    /// The call being served (none outside a call).
    pub ctx: Option<&'a CallContext>,
    /// 1 for the call's first request, 2 for the next, ...
    pub index: u32,
}

/// Sends a guest's request after checking it against the tool's allowlist, adding credentials
/// on the host side and scanning the response for leaks.
#[async_trait::async_trait]
pub trait HttpClient: Send + Sync + 'static {
    /// Sends `req` if `cap` allows it, or says why not. A cancelled `origin.ctx` aborts it.
    async fn send(
        &self,
        origin: HttpOrigin<'_>,
        cap: &HttpCapability,
        req: HttpRequest,
    ) -> Result<HttpResponse, String>;

    /// A request the host refused before it reached [`send`](HttpClient::send) (the capability
    /// is not granted, or the per-call budget is spent), for clients that keep an audit log.
    /// Called at most once per call, not per attempt.
    fn refused(&self, _origin: HttpOrigin<'_>, _req: &HttpRequest, _reason: &str) {}
}

/// The services a runtime lends its guests. Cheap to clone.
#[derive(Clone, Default)]
pub struct Services {
    /// `tools.invoke`.
    pub invoker: Option<Arc<dyn ToolInvoker>>,
    /// `secrets.exists`.
    pub secrets: Option<Arc<dyn SecretLookup>>,
    /// `workspace.read`.
    pub workspace: Option<Arc<dyn WorkspaceReader>>,
    /// `http.send`.
    pub http: Option<Arc<dyn HttpClient>>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("invoker", &self.invoker.is_some())
            .field("secrets", &self.secrets.is_some())
            .field("workspace", &self.workspace.is_some())
            .field("http", &self.http.is_some())
            .finish()
    }
}
