//! What a tool says about itself.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's self-description: everything a model, a policy or a client needs before calling it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Unique name, `[A-Za-z0-9_-]{1,64}`; bridged MCP tools look like `mcp__server__tool`.
    pub name: String,
    /// What the tool does, written for a model choosing between tools.
    pub description: String,
    /// JSON Schema of the parameters; its root is always `{"type": "object", ...}`.
    pub input_schema: Value,
    /// JSON Schema of the structured result, when the tool returns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints about side effects, mirrored to MCP annotations.
    #[serde(default)]
    pub annotations: Annotations,
    /// The tool group (`fs`, `runtime`, `web`, ...) used by `group:NAME` policy entries.
    pub group: String,
    /// Whether the output pipeline treats what this tool returns as untrusted.
    #[serde(default)]
    pub output_trust: OutputTrust,
}

impl ToolSpec {
    /// A spec in group `toolgate` with no annotations and untrusted output.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            annotations: Annotations::default(),
            group: "toolgate".to_owned(),
            output_trust: OutputTrust::Untrusted,
        }
    }

    /// Sets the group.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Sets the annotations.
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Sets the output schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Marks the output as trusted (it only reflects what the caller sent, like `echo`).
    pub fn trusted_output(mut self) -> Self {
        self.output_trust = OutputTrust::Trusted;
        self
    }

    /// Whether MCP clients get this tool's structured result (`structuredContent`, and the
    /// `outputSchema` in `tools/list`): it declares an output schema and its output is trusted.
    /// Untrusted output reaches a model only as text, inside its untrusted-content boundary, so
    /// a client that reads only `structuredContent` cannot be handed it bare.
    pub fn returns_structured(&self) -> bool {
        self.output_schema.is_some() && self.output_trust == OutputTrust::Trusted
    }
}

/// Side-effect hints, with the meaning MCP gives them.
///
/// `destructive` and `open_world` default to `true` as in MCP: a tool that says nothing is
/// assumed to be able to do anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// The tool does not change its environment.
    pub read_only: bool,
    /// The tool may change or delete existing data (meaningful when not read-only).
    pub destructive: bool,
    /// Calling it twice with the same arguments has no further effect.
    pub idempotent: bool,
    /// The tool talks to the world outside this machine (web, external services).
    pub open_world: bool,
}

impl Default for Annotations {
    fn default() -> Self {
        Annotations { read_only: false, destructive: true, idempotent: false, open_world: true }
    }
}

impl Annotations {
    /// A read-only, closed-world tool: reads local state, changes nothing.
    pub const READ_ONLY: Annotations =
        Annotations { read_only: true, destructive: false, idempotent: true, open_world: false };

    /// A tool that computes from its parameters alone (`echo`, `time`, `json`).
    pub const PURE: Annotations = Annotations::READ_ONLY;

    /// A tool that writes local state without destroying what was there.
    pub const LOCAL_WRITE: Annotations =
        Annotations { read_only: false, destructive: false, idempotent: false, open_world: false };

    /// A tool that can overwrite or delete local state.
    pub const LOCAL_DESTRUCTIVE: Annotations =
        Annotations { read_only: false, destructive: true, idempotent: false, open_world: false };
}

/// Whether a tool's output is shown to the model as untrusted content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputTrust {
    /// Wrapped in an untrusted-content boundary, injection markers neutralized (the default).
    #[default]
    Untrusted,
    /// Only reflects the caller's own input; still truncated and scanned for secrets.
    Trusted,
}
