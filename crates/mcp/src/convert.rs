//! toolgate's types in MCP's shapes. Serialization happens here, at the boundary.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use toolgate_core::{Content, ToolError, ToolOutput, ToolSpec};

/// A tool as `tools/list` shows it: annotations from the spec, `outputSchema` when declared.
pub(crate) fn tool(spec: &ToolSpec) -> Tool {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(spec.annotations.read_only);
    annotations.destructive_hint = Some(spec.annotations.destructive);
    annotations.idempotent_hint = Some(spec.annotations.idempotent);
    annotations.open_world_hint = Some(spec.annotations.open_world);
    let mut tool = Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(object(&spec.input_schema)))
        .with_annotations(annotations);
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(object(schema)));
    }
    tool
}

/// A schema as a JSON object; MCP requires object schemas, so anything else becomes `{}` typed
/// as an object (the registry already refuses tools whose input schema is not an object).
fn object(schema: &Value) -> JsonObject {
    match schema {
        Value::Object(map) => map.clone(),
        _ => json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
    }
}

/// A successful call's result.
pub(crate) fn success(output: ToolOutput) -> CallToolResult {
    let content: Vec<ContentBlock> = output.content.into_iter().filter_map(content).collect();
    let mut result = CallToolResult::success(content);
    result.structured_content = output.structured;
    result
}

/// A failed call's result: `isError` with the message the model should read.
pub(crate) fn failure(error: &ToolError) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(error.to_string())]);
    result.meta = serde_json::from_value(json!({"io.toolgate/errorKind": error.kind()})).ok();
    result
}

fn content(block: Content) -> Option<ContentBlock> {
    match block {
        Content::Text { text } => Some(ContentBlock::text(text)),
        Content::Image { data, mime_type } => Some(ContentBlock::image(data, mime_type)),
        Content::ResourceLink { uri, name, mime_type, description } => {
            let mut link = json!({"type": "resource_link", "uri": uri, "name": name});
            if let Some(mime_type) = mime_type {
                link["mimeType"] = Value::String(mime_type);
            }
            if let Some(description) = description {
                link["description"] = Value::String(description);
            }
            serde_json::from_value(link).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::Annotations;

    #[test]
    fn annotations_and_output_schema_reach_the_listing() {
        let spec = ToolSpec::new("t", "d", json!({"type": "object"}))
            .annotations(Annotations::READ_ONLY)
            .output_schema(json!({"type": "object", "properties": {"x": {"type": "integer"}}}));
        let wire = serde_json::to_value(tool(&spec)).unwrap_or_default();
        assert_eq!(wire["annotations"]["readOnlyHint"], true);
        assert_eq!(wire["annotations"]["destructiveHint"], false);
        assert_eq!(wire["annotations"]["idempotentHint"], true);
        assert_eq!(wire["annotations"]["openWorldHint"], false);
        assert_eq!(wire["outputSchema"]["properties"]["x"]["type"], "integer");
    }

    #[test]
    fn results_carry_structured_content_and_errors_are_flagged() {
        let ok = serde_json::to_value(success(ToolOutput::json(json!({"a": 1})))).unwrap_or_default();
        assert_eq!(ok["structuredContent"]["a"], 1);
        assert_eq!(ok["isError"], false);
        let err = serde_json::to_value(failure(&ToolError::failed("boom"))).unwrap_or_default();
        assert_eq!(err["isError"], true);
        assert_eq!(err["content"][0]["text"], "boom");
        assert_eq!(err["_meta"]["io.toolgate/errorKind"], "execution_failed");
    }

    #[test]
    fn resource_links_keep_their_fields() {
        let out = ToolOutput {
            content: vec![Content::ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                mime_type: Some("text/plain".into()),
                description: None,
            }],
            structured: None,
        };
        let wire = serde_json::to_value(success(out)).unwrap_or_default();
        assert_eq!(wire["content"][0]["type"], "resource_link");
        assert_eq!(wire["content"][0]["mimeType"], "text/plain");
    }
}
