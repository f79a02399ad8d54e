//! toolgate's types in MCP's shapes. Serialization happens here, at the boundary.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use toolgate_core::{Content, ToolError, ToolOutput, ToolSpec};

/// A tool as `tools/list` shows it: annotations from the spec, `outputSchema` when the tool's
/// results carry `structuredContent` ([`ToolSpec::returns_structured`]).
pub(crate) fn tool(spec: &ToolSpec) -> Tool {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(spec.annotations.read_only);
    annotations.destructive_hint = Some(spec.annotations.destructive);
    annotations.idempotent_hint = Some(spec.annotations.idempotent);
    annotations.open_world_hint = Some(spec.annotations.open_world);
    let mut tool = Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(object(&spec.input_schema)))
        .with_annotations(annotations);
    if let Some(schema) = spec.output_schema.as_ref().filter(|_| spec.returns_structured()) {
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

/// A successful call's result: the content, `structuredContent` when the handler left the
/// structured result in (the gate does only for [`ToolSpec::returns_structured`] tools), and
/// the facts for programs in `_meta` under [`RESULT_META`].
pub(crate) fn success(output: ToolOutput) -> CallToolResult {
    let content: Vec<ContentBlock> = output.content.into_iter().filter_map(content).collect();
    let mut result = CallToolResult::success(content);
    result.structured_content = output.structured;
    if let Some(meta) = output.meta {
        let mut map = serde_json::Map::new();
        map.insert(RESULT_META.to_owned(), meta);
        result.meta = serde_json::from_value(Value::Object(map)).ok();
    }
    result
}

/// The `_meta` key of a result's facts for programs ([`ToolOutput::meta`]).
pub const RESULT_META: &str = "io.toolgate/result";

/// A failed call's result: `isError` with the message the model should read.
pub(crate) fn failure(error: &ToolError) -> CallToolResult {
    failure_of(error.kind(), &error.to_string())
}

/// [`failure`] from an error's kind and text (a task's failure, read back from its record).
pub(crate) fn failure_of(kind: &str, message: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(message.to_owned())]);
    result.meta = serde_json::from_value(json!({"io.toolgate/errorKind": kind})).ok();
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
        let untrusted = serde_json::to_value(tool(&spec)).unwrap_or_default();
        assert!(untrusted.get("outputSchema").is_none(), "untrusted output is text only: {untrusted}");
        let wire = serde_json::to_value(tool(&spec.trusted_output())).unwrap_or_default();
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
        assert!(ok.get("_meta").is_none(), "{ok}");
        let facts = ToolOutput::text("t").with_meta(json!({"bytes": 1}));
        let wire = serde_json::to_value(success(facts)).unwrap_or_default();
        assert_eq!(wire["_meta"][RESULT_META]["bytes"], 1, "{wire}");
        assert!(wire.get("structuredContent").is_none(), "{wire}");
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
            ..ToolOutput::default()
        };
        let wire = serde_json::to_value(success(out)).unwrap_or_default();
        assert_eq!(wire["content"][0]["type"], "resource_link");
        assert_eq!(wire["content"][0]["mimeType"], "text/plain");
    }
}
