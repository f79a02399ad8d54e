//! This process as a node of a shared store (`[node]`, `[store] url`): what is inherently local
//! to it (background processes, browser sessions) is recorded in the store with its name and
//! URL, so a call about it that reaches another node is forwarded there over the node link
//! ([`McpForwarder`]), or answered with where it is (`toolgate_tools::runtime`'s `owners`).
//! `toolgate serve` announces the node once it listens ([`announce`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_core::{CallContext, ToolOutput};
use toolgate_store::{LocalOwner, LocalStore};
use toolgate_tools::runtime::{NodeForwarder, ThisNode, serve_as_node};

use crate::config::Config;

/// This node as `config` and the address it listens on make it: `[node] name`, else the host
/// name and the port (unique among nodes on one machine too); `[node] url`, else the URL it
/// listens at (right on one machine; behind a load balancer set `[node] url` to the node's own
/// address, which the other nodes and the callers can reach).
pub fn this_node(config: &Config, local: SocketAddr) -> ThisNode {
    let name = config.node.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        format!("{}:{}", if host.is_empty() { "localhost" } else { host }, local.port())
    });
    // An unspecified address (0.0.0.0) names no machine: another node would reach itself.
    let url = config
        .node
        .url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| (!local.ip().is_unspecified()).then(|| format!("http://{local}/mcp")));
    ThisNode { name, url }
}

/// What [`sharing`] gives: the store and, for a gateway, the node link.
pub(crate) type Sharing = (Arc<dyn LocalStore>, Option<Arc<dyn NodeForwarder>>);

/// With a shared store (a per-user gate's is its audit log's): the store that records what this
/// node holds (`what`, for the log), and the node link that forwards calls about what other
/// nodes hold, when the callers are users with keys (a team gateway's; a per-user gate is
/// one's: it has the gateway's database for its audit log), so the call goes to the owning
/// node as its caller.
pub(crate) fn sharing(config: &Config, what: &str) -> Option<Sharing> {
    let url = config.store.url.as_ref().or(config.store.audit_url.as_ref())?;
    match crate::state::shared(url) {
        Ok(store) => {
            let forwarder = (config.gateway.enabled || config.store.audit_url.is_some())
                .then(|| Arc::new(McpForwarder::new(Arc::new(store.clone()))) as Arc<dyn NodeForwarder>);
            Some((Arc::new(store), forwarder))
        }
        Err(e) => {
            tracing::warn!("{what} are not recorded in the shared store: {e}");
            None
        }
    }
}

/// Makes this process the node [`this_node`] describes, and, with a shared store, drops the
/// records its previous run left (its processes and browsers ended with it). A store that does not answer
/// is logged: calls still work, only the stale records stay until the next start.
pub fn announce(config: &Config, local: SocketAddr) -> ThisNode {
    let node = this_node(config, local);
    if node.url.is_none() && config.store.url.is_some() {
        tracing::warn!(
            "node {}: set `[node] url` to the address other nodes reach this one at: a call about one of its \
             background processes or browser sessions that reaches another node cannot be sent here",
            node.name
        );
    }
    if !serve_as_node(node.clone()) {
        return node;
    }
    if let Some(url) = &config.store.url {
        match crate::state::shared(url).and_then(|store| store.locals_forget_node(&node.name)) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                "node {}: dropped {n} records of background processes and browser sessions of its previous run",
                node.name
            ),
            Err(e) => tracing::warn!("node {}: cannot drop its previous run's records: {e}", node.name),
        }
    }
    node
}

/// How long a forwarded call may take when the call it serves has no deadline (every call
/// through a gate has one: its execute stage's timeout, the owner's approval wait included for a
/// call that is forwarded, the bound the call has on its own node).
const FORWARD_WITHOUT_DEADLINE: Duration = Duration::from_secs(150);

/// How much longer than its call a forwarded key lives: it is revoked as soon as the answer is
/// in, and this only bounds a key whose revocation failed.
const FORWARD_KEY_GRACE: Duration = Duration::from_secs(30);

/// The node link for `process` and `browser` calls ([`NodeForwarder`]): the call goes to the
/// owning node's `/mcp` as the caller, with an API key made for this one call: the caller's own
/// user, limited to the tool of the call, marked as carrying a call forwarded by this node
/// (`KeyScope::forwarded_by`: the owner reads the call canonically and never sends it on), with
/// the approval this node's gate gave it, if a person approved it here (`KeyScope::approved`:
/// the owner does not ask again), expiring with the call's deadline and revoked once the
/// answer is in. The link waits until the call's deadline (`CallContext::deadline`), no more.
/// So the owner's gate runs it as that user, under that user's grants, policy, approvals and
/// audit log, never as a node or an admin; and the store both nodes share
/// (where the key is kept, as a digest) is the only trust between them.
#[derive(Debug)]
pub struct McpForwarder {
    identity: std::sync::Arc<dyn toolgate_store::IdentityStore>,
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl McpForwarder {
    /// A forwarder that makes its keys in `identity` (the shared database's).
    pub fn new(identity: std::sync::Arc<dyn toolgate_store::IdentityStore>) -> Self {
        McpForwarder { identity, client: std::sync::OnceLock::new() }
    }

    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::builder()
                    .no_proxy()
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| format!("cannot build the node link's HTTP client: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// One JSON-RPC message to `url` (with the session, once there is one): the answer's
    /// headers and the message with `id`, if any.
    async fn post(
        &self,
        url: &str,
        key: &str,
        session: Option<&str>,
        body: &serde_json::Value,
        within: Duration,
    ) -> Result<(reqwest::header::HeaderMap, Option<serde_json::Value>), String> {
        let mut request = self
            .client()?
            .post(url)
            .timeout(within)
            .bearer_auth(key)
            .header("Accept", "application/json, text/event-stream")
            .json(body);
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session).header("Mcp-Protocol-Version", PROTOCOL);
        }
        // While traces are exported, the owner's call joins this one's trace (the span this
        // runs in: the `process` call's `execute` stage).
        if let Some(trace) = toolgate_core::trace::current() {
            for (name, value) in trace.headers() {
                request = request.header(name, value);
            }
        }
        let answer = request.send().await.map_err(|e| {
            if e.is_timeout() {
                format!("no answer within {} s, the call's own bound", within.as_secs())
            } else {
                format!("no answer: {e}")
            }
        })?;
        let status = answer.status();
        let headers = answer.headers().clone();
        // An answer is small (a page of output): the gate caps what a tool returns.
        let text = answer.text().await.map_err(|e| format!("the answer broke off: {e}"))?;
        if !status.is_success() {
            let cut: String = text.chars().take(300).collect();
            return Err(format!("it answered {status}: {cut}"));
        }
        let Some(id) = body.get("id") else { return Ok((headers, None)) };
        // JSON, or an event stream whose data lines hold the messages.
        let message = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.strip_prefix("data:").unwrap_or(l).trim()).ok())
            .find(|m| m.get("id") == Some(id));
        Ok((headers, message))
    }

    /// The call of `tool` on the node at `url` with `key`: initialize, the call, the session
    /// closed; all by `deadline`.
    async fn call(
        &self,
        url: &str,
        key: &str,
        tool: &str,
        params: &serde_json::Value,
        deadline: Instant,
    ) -> Result<ToolOutput, String> {
        let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "toolgate-node-link", "version": env!("CARGO_PKG_VERSION")}}});
        let (headers, _) = self.post(url, key, None, &init, left()).await?;
        let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(url, key, session.as_deref(), &initialized, left()).await?;
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": params}});
        let (_, message) = self.post(url, key, session.as_deref(), &call, left()).await?;
        if let (Some(session), Ok(client)) = (&session, self.client()) {
            let close = client.delete(url).timeout(Duration::from_secs(5)).bearer_auth(key);
            let _ = close.header("Mcp-Session-Id", session).send().await;
        }
        let message = message.ok_or("it sent no answer to the call")?;
        if let Some(error) = message.get("error") {
            return Err(format!("it refused the call: {}", error["message"].as_str().unwrap_or("no message")));
        }
        let result = &message["result"];
        let text: Vec<&str> =
            result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        let text = text.join("\n");
        if result["isError"].as_bool().unwrap_or(false) {
            return Err(text);
        }
        let mut out = ToolOutput::text(text);
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            out = out.with_structured(structured.clone());
        }
        Ok(out)
    }
}

/// The MCP revision the node link speaks.
const PROTOCOL: &str = "2025-06-18";

#[toolgate_core::async_trait]
impl NodeForwarder for McpForwarder {
    async fn forward(
        &self,
        tool: &str,
        owner: &LocalOwner,
        ctx: &CallContext,
        params: &serde_json::Value,
    ) -> Result<ToolOutput, String> {
        let user = ctx.identity.user.as_str();
        let url = owner.node_url.as_deref().ok_or("that node gave no URL")?;
        let here = toolgate_tools::runtime::this_node().map_or("?", |n| n.name.as_str());
        let admin = toolgate_gateway::Admin::new(std::sync::Arc::clone(&self.identity));
        // Marked in the owner's audit row (`VIA`).
        let mut params = params.clone();
        if let Some(map) = params.as_object_mut() {
            map.insert(toolgate_tools::runtime::VIA.to_owned(), serde_json::Value::String(here.to_owned()));
        }
        // What a person approved here, for exactly these parameters: the owner does not ask
        // again (its `deny` still refuses).
        let approved = ctx.approved.as_ref().map(|decided| toolgate_core::ForwardedApproval {
            decided: decided.clone(),
            digest: crate::pipeline::approval::params_digest(&params),
        });
        // The scope says the key carries a call this node forwards: the owner reads it
        // canonically (it was read in the caller's dialect here) and never sends it on. Only a
        // key made here can say so; a caller's own key, or a `via` it writes, cannot.
        let scope = toolgate_gateway::KeyScope {
            tools: vec![tool.to_owned()],
            sources: Vec::new(),
            forwarded_by: Some(here.to_owned()),
            approved,
        };
        let deadline = ctx.deadline.unwrap_or_else(|| Instant::now() + FORWARD_WITHOUT_DEADLINE);
        let life = deadline.saturating_duration_since(Instant::now()) + FORWARD_KEY_GRACE;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expires = now.saturating_add(i64::try_from(life.as_millis()).unwrap_or(i64::MAX));
        let note = format!("one `{tool}` call forwarded by node {here} to node {}", owner.node);
        let key = admin
            .key_create(user, &scope, Some(expires), &note, &format!("node:{here}"))
            .map_err(|e| format!("cannot make the key that carries the call as `{user}`: {e}"))?;
        let answer = self.call(url, key.text.reveal(), tool, &params, deadline).await;
        if let Err(e) = admin.key_revoke(&key.record.id) {
            tracing::warn!("the key of a forwarded call stays until it expires (in {} s): {e}", life.as_secs());
        }
        answer
    }
}
