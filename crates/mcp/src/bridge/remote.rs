//! One MCP server reached for a single request, outside the bridge's registry: what `nodes`
//! does with another `toolgate serve` (issue 29). Each request opens a session over Streamable
//! HTTP with the node's key, makes its one request and closes it, all within one deadline, so a
//! node that is down or never answers costs a bounded wait. Results and errors come back as a
//! bridged tool's do: capped, cleaned, and untrusted (the gate wraps them).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};
use toolgate_core::{ToolError, ToolOutput};

use super::connect::http_client;
use super::mapping::{clean_text, remote_error, result};

/// Another MCP server, by URL and bearer key.
#[derive(Clone)]
pub struct RemoteServer {
    name: String,
    url: String,
    key: Option<String>,
    deadline: Duration,
}

impl std::fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("RemoteServer").field("name", &self.name).field("url", &self.url).finish_non_exhaustive()
    }
}

/// What [`RemoteServer::status`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteStatus {
    /// The server's name and version, as its handshake said (untrusted, capped).
    pub server: String,
    /// How many tools it lists to this key.
    pub tools: usize,
    /// The handshake and the list, from first byte to last.
    pub took: Duration,
}

/// rmcp's transport errors name their Rust types (`Transport [rmcp::transport::...] error:`):
/// what is left without them is what a person can act on.
fn plain(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        out.push_str(&rest[..open]);
        if !rest[open..close].contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.replace("Send message error Transport  error: ", "").replace("Client error: ", "")
}

impl RemoteServer {
    /// `name` (for messages) at `url` (`http(s)://host/mcp`), with `key` sent as a bearer token;
    /// every request ends within `deadline`.
    pub fn new(name: &str, url: &str, key: Option<&str>, deadline: Duration) -> Result<RemoteServer, ToolError> {
        let parsed = url::Url::parse(url)
            .map_err(|e| ToolError::failed(format!("node `{name}` has an invalid URL `{url}`: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ToolError::failed(format!("node `{name}`: the URL must be http:// or https://, not `{url}`")));
        }
        Ok(RemoteServer { name: name.to_owned(), url: url.to_owned(), key: key.map(str::to_owned), deadline })
    }

    /// Connects, lists the tools and closes.
    pub async fn status(&self) -> Result<RemoteStatus, ToolError> {
        let started = Instant::now();
        self.within(async {
            let service = self.connect().await?;
            let server = service
                .peer_info()
                .and_then(|i| i.server_info.clone())
                .map(|i| clean_text(&format!("{} {}", i.name, i.version), 200))
                .unwrap_or_default();
            let tools = service.list_all_tools().await.map_err(|e| remote_error(&self.name, &e.to_string()));
            let _ = service.cancel().await;
            Ok(RemoteStatus { server, tools: tools?.len(), took: started.elapsed() })
        })
        .await
    }

    /// Calls `tool` with `arguments` on the server, through its own gate, and closes.
    pub async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolError> {
        self.within(async {
            let service = self.connect().await?;
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            let answer = service.call_tool(params).await;
            let _ = service.cancel().await;
            match answer {
                Ok(answer) => result(&self.name, answer),
                Err(e) => Err(remote_error(&self.name, &e.to_string())),
            }
        })
        .await
    }

    async fn within<T>(&self, work: impl Future<Output = Result<T, ToolError>>) -> Result<T, ToolError> {
        tokio::time::timeout(self.deadline, work).await.unwrap_or_else(|_| {
            Err(ToolError::ExternalService {
                service: format!("node `{}`", self.name),
                message: format!(
                    "no answer within {} s; `nodes status` says whether it is up",
                    self.deadline.as_secs()
                ),
            })
        })
    }

    async fn connect(&self) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, ToolError> {
        let unreachable = |e: &dyn std::fmt::Display| ToolError::ExternalService {
            service: format!("node `{}`", self.name),
            message: clean_text(&format!("cannot connect to {}: {}", self.url, plain(&e.to_string())), 2000),
        };
        let client = http_client().map_err(|e| unreachable(&e))?;
        let mut headers = HashMap::new();
        if let Some(key) = &self.key {
            let mut bearer = HeaderValue::try_from(format!("Bearer {key}"))
                .map_err(|_| ToolError::failed(format!("node `{}`: its key is not a valid header value", self.name)))?;
            bearer.set_sensitive(true);
            headers.insert(HeaderName::from_static("authorization"), bearer);
        }
        // While traces are exported, the node's call joins this one's trace.
        if let Some(trace) = toolgate_core::trace::current() {
            for (name, value) in trace.headers() {
                if let Ok(value) = HeaderValue::from_str(value) {
                    headers.insert(HeaderName::from_static(name), value);
                }
            }
        }
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str()).custom_headers(headers);
        ().serve(StreamableHttpClientTransport::with_client(client, config)).await.map_err(|e| unreachable(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_errors_lose_their_type_names() {
        let rmcp = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::async_impl::client::Client>>] error: Client error: error sending request for url (http://127.0.0.1:1/mcp), when send initialize request";
        assert_eq!(plain(rmcp), "error sending request for url (http://127.0.0.1:1/mcp), when send initialize request");
        assert_eq!(plain("a [plain] note"), "a [plain] note", "brackets without type names stay");
        assert_eq!(plain("unclosed [x"), "unclosed [x");
    }
}
