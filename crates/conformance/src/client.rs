//! `toolgate-conformance client URL`: the client the official MCP conformance suite drives in its
//! client scenarios (`conformance client --command "toolgate-conformance client"`): toolgate's
//! MCP bridge, nothing written for the suite but the choice of calls.
//!
//! [`run`] makes a throwaway workspace whose config bridges the scenario's server as
//! `conformance`, signs in first when the scenario is an OAuth one (the suite's authorization
//! server approves by itself, so a small plain-HTTP "browser" follows its redirect to the
//! bridge's loopback callback), connects the bridge through a [`Gate`], and calls the server's
//! tools through the whole pipeline: every tool with arguments made from its schema, except
//! where a scenario asks for a particular call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_core::ToolSpec;
use toolgate_mcp::bridge::oauth::{self, LoginOptions, SecretVault};
use toolgate_mcp::bridge::{OAuthConfig, ServerConfig, ServerState};

use toolgate::Gate;
use toolgate::config::{ApprovalMode, Config};
use toolgate::mcp_vault::StoreVault;

/// The bridged server's name, so its tools are `mcp__conformance__TOOL`.
const SERVER: &str = "conformance";

/// How long the bridge's first connection (handshake and tool list) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the sign-in may wait for the redirect.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a conformance client run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The throwaway workspace or its state database could not be made.
    #[error("cannot prepare the client's workspace {}: {detail}", path.display())]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// `MCP_CONFORMANCE_CONTEXT` is not a JSON object.
    #[error("MCP_CONFORMANCE_CONTEXT is not a JSON object: {0}")]
    Context(String),
    /// Signing in failed.
    #[error("OAuth sign-in failed: {0}")]
    Login(String),
    /// The bridge did not connect.
    #[error("the bridge did not connect to {url}: {state}")]
    Connect {
        /// The server URL.
        url: String,
        /// The bridge's last state.
        state: String,
    },
    /// A gate could not be built.
    #[error("cannot build the gate: {0}")]
    Gate(String),
    /// A call failed (the scenario's checks say whether that was expected).
    #[error("calling `{tool}` failed: {detail}")]
    Call {
        /// The tool.
        tool: String,
        /// The error the model would have read.
        detail: String,
    },
}

/// Runs conformance `scenario` against the server at `url` (what the suite passes: the URL as
/// the last argument, the scenario in `MCP_CONFORMANCE_SCENARIO`, extra data in
/// `MCP_CONFORMANCE_CONTEXT`).
pub async fn run(url: &str, scenario: &str, context: Option<&str>) -> Result<(), ClientError> {
    let context: Map<String, Value> = match context {
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(ClientError::Context(other.to_string())),
            Err(e) => return Err(ClientError::Context(e.to_string())),
        },
        None => Map::new(),
    };
    let workspace = Workspace::create()?;
    let result = run_in(&workspace.0, url, scenario, &context).await;
    drop(workspace);
    result
}

async fn run_in(workspace: &Path, url: &str, scenario: &str, context: &Map<String, Value>) -> Result<(), ClientError> {
    let mut server = ServerConfig { url: Some(url.to_owned()), ..ServerConfig::default() };
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(client_id) = text("client_id") {
        server.oauth = Some(OAuthConfig {
            client_id: Some(client_id),
            client_secret: text("client_secret"),
            ..OAuthConfig::default()
        });
    }
    let auth = scenario.starts_with("auth/");
    let vault = || {
        StoreVault::open(&workspace.join(".toolgate/state.db"))
            .map(|v| Arc::new(v) as Arc<dyn SecretVault>)
            .map_err(|e| ClientError::Workspace { path: workspace.to_owned(), detail: e.to_string() })
    };
    if auth {
        login(&server, vault()?).await?;
    }
    match session(workspace, url, scenario, context, &server).await {
        // What a user does when the bridge says to sign in again (e.g. the server moved to
        // another authorization server): `toolgate mcp login`, then carry on.
        Err(e) if auth && e.to_string().contains("toolgate mcp login") => {
            eprintln!("conformance client: {e}; signing in again");
            login(&server, vault()?).await?;
            session(workspace, url, scenario, context, &server).await
        }
        other => other,
    }
}

/// One gate bridging `server`: connect, then make the scenario's calls.
async fn session(
    workspace: &Path,
    url: &str,
    scenario: &str,
    context: &Map<String, Value>,
    server: &ServerConfig,
) -> Result<(), ClientError> {
    let mut config = Config::default();
    config.mcp.servers.insert(SERVER.to_owned(), server.clone());
    // The suite's tools carry no annotations, which means "ask"; nobody is here to answer.
    config.approval.mode = ApprovalMode::Never;
    // A JSON Schema sent back as an argument (json-schema-2020-12-preservation) nests deeper
    // than the default 5 levels.
    config.limits.max_depth = 12;
    let gate = Gate::builder(workspace).config(config).build().map_err(|e| ClientError::Gate(e.to_string()))?;
    let result = calls(&gate, url, scenario, context).await;
    gate.shutdown();
    result
}

async fn calls(gate: &Gate, url: &str, scenario: &str, context: &Map<String, Value>) -> Result<(), ClientError> {
    gate.connect_mcp(CONNECT_TIMEOUT).await;
    let state = gate.mcp_status().first().map(|s| s.state.clone());
    match state {
        Some(ServerState::Connected) => {}
        Some(ServerState::Reconnecting { error, .. } | ServerState::Unavailable { error }) => {
            return Err(ClientError::Connect { url: url.to_owned(), state: error });
        }
        other => return Err(ClientError::Connect { url: url.to_owned(), state: format!("{other:?}") }),
    }
    let ctx = gate.context();
    let prefix = format!("mcp__{SERVER}__");
    let tools: Vec<ToolSpec> = gate.visible_tools(&ctx).into_iter().filter(|t| t.name.starts_with(&prefix)).collect();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    eprintln!("conformance client: {scenario}: tools {names:?}");
    let mut failed = None;
    for (tool, params) in plan(scenario, context, &prefix, &tools) {
        eprintln!("conformance client: calling {tool} {params}");
        match gate.call(&ctx, &tool, params).await {
            Ok(out) => eprintln!("conformance client: {tool} -> {}", out.text_content()),
            Err(e) => {
                eprintln!("conformance client: {tool} failed: {e}");
                failed.get_or_insert(ClientError::Call { tool, detail: e.to_string() });
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

/// The calls to make: the context's `toolCalls` when the suite names them, what the scenario
/// asks for, else every tool once.
fn plan(scenario: &str, context: &Map<String, Value>, prefix: &str, tools: &[ToolSpec]) -> Vec<(String, Value)> {
    if let Some(listed) = context.get("toolCalls").and_then(Value::as_array) {
        return listed
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?;
                Some((format!("{prefix}{name}"), call.get("arguments").cloned().unwrap_or_else(|| json!({}))))
            })
            .collect();
    }
    let focal = format!("{prefix}json_schema_2020_12_tool");
    match scenario {
        // Listing is the whole scenario: a `$ref` to a network URI must not be fetched.
        "json-schema-ref-no-deref" => Vec::new(),
        // Round-trip the focal tool's schema, as received, through the echo tool.
        "json-schema-2020-12-preservation" => {
            match (tools.iter().find(|t| t.name == focal), tools.iter().find(|t| t.name != focal)) {
                (Some(focal), Some(echo)) => vec![(echo.name.clone(), json!({"schema": focal.input_schema}))],
                _ => Vec::new(),
            }
        }
        _ => tools.iter().map(|t| (t.name.clone(), arguments(&t.input_schema))).collect(),
    }
}

/// Arguments with `schema`'s required properties only, each its `default`, `const` or first
/// `enum` value, else a plain value of its type.
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if required.iter().any(|r| r == name) {
                args.insert(name.clone(), example(property));
            }
        }
    }
    Value::Object(args)
}

fn example(schema: &Value) -> Value {
    if let Some(value) = schema.get("default").or_else(|| schema.get("const")) {
        return value.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("number" | "integer") => json!(2),
        Some("boolean") => json!(true),
        Some("object") => arguments(schema),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        _ => json!("conformance"),
    }
}

/// Signs in to the server with the bridge's OAuth, a plain-HTTP "browser" following the
/// authorization server's redirect to the bridge's loopback callback.
async fn login(server: &ServerConfig, vault: Arc<dyn SecretVault>) -> Result<(), ClientError> {
    oauth::install_crypto_provider();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let options = LoginOptions::default().with_timeout(LOGIN_TIMEOUT);
    let login = oauth::login_with(SERVER, server, vault, options, move |url: &str| {
        let url = url.to_owned();
        let _ = tx.send(tokio::spawn(async move { browse(&url).await }));
    });
    let outcome = login.await.map_err(|e| ClientError::Login(e.to_string()))?;
    eprintln!(
        "conformance client: signed in as {} ({:?}), scopes {:?}",
        outcome.client_id, outcome.registration, outcome.scopes
    );
    if let Ok(browser) = rx.await
        && let Ok(Err(e)) = browser.await
    {
        eprintln!("conformance client: browser: {e}");
    }
    Ok(())
}

/// GETs `url` and follows redirects (at most 5), over plain HTTP only; returns the last status.
async fn browse(url: &str) -> Result<u16, String> {
    let mut url = url.to_owned();
    for _ in 0..5 {
        let (status, location) = get(&url).await?;
        match location {
            Some(next) if (300..400).contains(&status) => url = absolute(&url, &next),
            _ => return Ok(status),
        }
    }
    Err("too many redirects".into())
}

/// One `GET`: the status and the `Location` header.
async fn get(url: &str) -> Result<(u16, Option<String>), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("the browser speaks plain http only: {url}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = tokio::net::TcpStream::connect(authority).await.map_err(|e| format!("{authority}: {e}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAccept: */*\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream.take(1 << 20).read_to_end(&mut response).await.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&response);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP status from {url}"))?;
    let location = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("location"))
        .map(|(_, v)| v.trim().to_owned());
    Ok((status, location))
}

/// `location` resolved against `base` (absolute URLs and absolute paths).
fn absolute(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let origin_end = base.find("://").map_or(0, |i| i + 3);
    let origin = &base[..base[origin_end..].find('/').map_or(base.len(), |i| origin_end + i)];
    format!("{origin}{location}")
}

/// A throwaway workspace under the temporary directory, removed on drop.
struct Workspace(PathBuf);

impl Workspace {
    fn create() -> Result<Workspace, ClientError> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!("toolgate-conformance-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .map_err(|e| ClientError::Workspace { path: path.clone(), detail: e.to_string() })?;
        Ok(Workspace(path))
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_fill_the_required_properties() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "s": {"type": "string"}, "e": {"type": "string", "enum": ["x", "y"]},
            "d": {"type": "integer", "default": 7}, "o": {"type": "object", "properties": {"b": {"type": "boolean"}}},
        }, "required": ["a"]});
        assert_eq!(arguments(&schema), json!({"a": 2}));
        let all = json!({"type": "object", "required": ["s", "e", "d", "o"], "properties": {
            "s": {"type": "string"}, "e": {"enum": ["x", "y"]}, "d": {"type": "integer", "default": 7},
            "o": {"type": "object", "required": ["b"], "properties": {"b": {"type": "boolean"}}},
        }});
        assert_eq!(arguments(&all), json!({"s": "conformance", "e": "x", "d": 7, "o": {"b": true}}));
    }

    #[test]
    fn redirects_resolve_against_the_origin() {
        assert_eq!(absolute("http://h:1/a/b?c", "/cb?code=1"), "http://h:1/cb?code=1");
        assert_eq!(absolute("http://h:1/a", "http://127.0.0.1:2/cb"), "http://127.0.0.1:2/cb");
    }
}
