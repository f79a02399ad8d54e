use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, Tool, ToolError, ToolOutput, ToolSpec, async_trait};

/// `echo {message}`: returns the message unchanged. Its output only reflects the caller's own
/// input, so it is marked trusted (not wrapped), but it is still truncated and scanned.
#[derive(Debug)]
pub struct Echo {
    spec: ToolSpec,
}

impl Echo {
    /// The tool.
    pub fn new() -> Self {
        let spec = ToolSpec::new(
            "echo",
            "Return the message unchanged. Useful to test that tool calls work.",
            json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "The message to echo back"}
                },
                "required": ["message"],
                "additionalProperties": false
            }),
        )
        .group("basic")
        .annotations(Annotations::PURE)
        .trusted_output();
        Echo { spec }
    }
}

impl Default for Echo {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        match params.get("message") {
            Some(Value::String(message)) => Ok(ToolOutput::text(message.clone())),
            _ => Err(ToolError::invalid("echo", "/message", "expected a string")),
        }
    }
}
