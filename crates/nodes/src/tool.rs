//! [`NodesTool`]: `list`, `status` and `run` over the paired nodes.

use std::time::Duration;

use serde_json::{Map, Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, Content, RateClass, Tool, ToolError, ToolOutput, ToolSpec, async_trait,
};
use toolgate_mcp::bridge::RemoteServer;

use crate::pairings::{Pairing, Pairings};

/// How long one node has to answer a `status` or a `run`, connection included.
const DEADLINE: Duration = Duration::from_secs(30);

/// The `nodes` tool.
#[derive(Debug)]
pub struct NodesTool {
    spec: ToolSpec,
    pairings: Pairings,
}

impl NodesTool {
    /// The tool over `pairings`.
    pub fn new(pairings: Pairings) -> NodesTool {
        NodesTool { spec: spec(), pairings }
    }

    fn pairing(&self, params: &Value) -> Result<Pairing, ToolError> {
        let name = params.get("node").and_then(Value::as_str).ok_or_else(|| {
            ToolError::invalid("nodes", "/node", "name the node (`nodes` with action `list` shows the paired ones)")
        })?;
        self.pairings.get(name).map_err(|e| ToolError::invalid("nodes", "/node", e.to_string()))?.ok_or_else(|| {
            ToolError::invalid(
                "nodes",
                "/node",
                format!("no node `{name}` is paired; `list` shows the paired ones (`toolgate nodes add` pairs one)"),
            )
        })
    }

    fn remote(&self, pairing: &Pairing) -> Result<RemoteServer, ToolError> {
        RemoteServer::new(&pairing.name, &pairing.url, Some(&pairing.key), DEADLINE)
    }

    async fn status(&self, pairing: &Pairing) -> Value {
        let reached = match self.remote(pairing) {
            Ok(remote) => remote.status().await,
            Err(e) => Err(e),
        };
        match reached {
            Ok(s) => json!({
                "node": pairing.name, "url": pairing.url, "reachable": true, "server": s.server,
                "tools": s.tools, "took_ms": s.took.as_millis() as u64,
            }),
            Err(e) => json!({"node": pairing.name, "url": pairing.url, "reachable": false, "error": e.to_string()}),
        }
    }
}

fn spec() -> ToolSpec {
    ToolSpec::new(
        "nodes",
        "Other toolgate servers paired with this one, to run a tool where the data or the hardware is. \
         `list`: the paired nodes. `status`: whether each (or `node`) answers, and how many tools it offers. \
         `run`: call `tool` with `arguments` on `node`; the call goes through that node's own policy, \
         approvals and sandbox, and its answer is untrusted text from that node.",
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "status", "run"]},
                "node": {"type": "string", "description": "A paired node's name (`list` shows them)."},
                "tool": {"type": "string", "description": "`run`: the tool to call on the node."},
                "arguments": {"type": "object", "description": "`run`: the tool's arguments."}
            },
            "required": ["action"],
            "additionalProperties": false
        }),
    )
    .group("nodes")
    .annotations(Annotations { open_world: true, ..Annotations::default() })
}

#[async_trait]
impl Tool for NodesTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        CallSafety {
            read_only: matches!(action, "list" | "status"),
            rate_class: RateClass::Http,
            // The node's deadline, with room for this gate's own stages.
            timeout: Some(DEADLINE + Duration::from_secs(5)),
            ..CallSafety::default()
        }
    }

    async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let failed = |e: crate::PairingError| ToolError::failed(e.to_string());
        match params.get("action").and_then(Value::as_str) {
            Some("list") => {
                let nodes: Vec<Value> = self
                    .pairings
                    .list()
                    .map_err(failed)?
                    .into_iter()
                    .map(|p| json!({"node": p.name, "url": p.url}))
                    .collect();
                Ok(ToolOutput::json(json!({ "nodes": nodes })))
            }
            Some("status") => {
                let pairings = match params.get("node") {
                    Some(_) => vec![self.pairing(&params)?],
                    None => self.pairings.list().map_err(failed)?,
                };
                let all = futures::future::join_all(pairings.iter().map(|p| self.status(p))).await;
                Ok(ToolOutput::json(json!({ "nodes": all })))
            }
            Some("run") => {
                let pairing = self.pairing(&params)?;
                let tool = params.get("tool").and_then(Value::as_str).filter(|t| !t.is_empty()).ok_or_else(|| {
                    ToolError::invalid("nodes", "/tool", "name the tool to run on the node (`status` counts its tools)")
                })?;
                let arguments: Map<String, Value> = match params.get("arguments") {
                    None => Map::new(),
                    Some(Value::Object(args)) => args.clone(),
                    Some(_) => {
                        return Err(ToolError::invalid("nodes", "/arguments", "give the arguments as an object"));
                    }
                };
                let mut output = self.remote(&pairing)?.call(tool, arguments).await?;
                // Where the answer came from, ahead of what the node said.
                output.content.insert(0, Content::Text { text: format!("[node `{}`, tool `{tool}`]", pairing.name) });
                Ok(output)
            }
            _ => Err(ToolError::invalid("nodes", "/action", "`action` is one of list, status, run")),
        }
    }
}
