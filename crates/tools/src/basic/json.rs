use serde_json::{Value, json};
use serde_json_path::JsonPath;
use toolgate_core::{Annotations, CallContext, Tool, ToolError, ToolOutput, ToolSpec, async_trait};

/// `json {operation: parse|query|stringify|validate, data, path?}` (seed 004 §4.3).
///
/// `data` accepts any JSON value, so its schema has no `type` (OpenAI rejects `type` arrays).
/// Where `data` is a string holding JSON (how Gemini sends an untyped value), `query` and
/// `stringify` read it as JSON.
#[derive(Debug)]
pub struct Json {
    spec: ToolSpec,
}

impl Json {
    /// The tool.
    pub fn new() -> Self {
        let spec = ToolSpec::new(
            "json",
            "JSON operations. `parse`: parse a JSON string. `query`: run an RFC 9535 JSONPath `path` (like \
             `$.items[*].name`) against `data`. `stringify`: serialize `data` to a JSON string. `validate`: \
             check whether a string is valid JSON and say where it is not.",
            json!({
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "enum": ["parse", "query", "stringify", "validate"]},
                    "data": {"description": "JSON data to process (any value)"},
                    "path": {"type": "string", "description": "JSONPath query for `query`"}
                },
                "required": ["operation", "data"],
                "additionalProperties": false
            }),
        )
        .group("basic")
        .annotations(Annotations::PURE)
        .trusted_output()
        // Each operation fills its own fields; the text is this object, pretty-printed.
        .output_schema(json!({
            "type": "object",
            "properties": {
                "value": {"description": "`parse`: the parsed value"},
                "count": {"type": "integer", "description": "`query`: how many values matched"},
                "matches": {"type": "array", "description": "`query`: the values matched"},
                "json": {"type": "string", "description": "`stringify`: the serialized text"},
                "valid": {"type": "boolean", "description": "`validate`: whether the text is JSON"},
                "error": {"type": "string"},
                "line": {"type": "integer"},
                "column": {"type": "integer"},
                "note": {"type": "string"}
            }
        }));
        Json { spec }
    }
}

impl Default for Json {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Json {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let data = params.get("data").cloned().unwrap_or(Value::Null);
        match params["operation"].as_str().unwrap_or_default() {
            "parse" => {
                let text = data.as_str().ok_or_else(|| {
                    ToolError::invalid("json", "/data", "`parse` needs `data` to be a string of JSON text")
                })?;
                let value: Value = serde_json::from_str(text).map_err(|e| {
                    ToolError::invalid(
                        "json",
                        "/data",
                        format!("not valid JSON: {e} (line {}, column {})", e.line(), e.column()),
                    )
                })?;
                Ok(ToolOutput::json(json!({"value": value})))
            }
            "query" => {
                let path = params.get("path").and_then(Value::as_str).ok_or_else(|| {
                    ToolError::invalid("json", "/path", "`query` needs a JSONPath in `path`, e.g. `$.items[0]`")
                })?;
                let compiled = JsonPath::parse(path)
                    .map_err(|e| ToolError::invalid("json", "/path", format!("invalid JSONPath `{path}`: {e}")))?;
                let data = embedded_json(data);
                let matches: Vec<Value> = compiled.query(&data).all().into_iter().cloned().collect();
                Ok(ToolOutput::json(json!({"count": matches.len(), "matches": matches})))
            }
            "stringify" => {
                let text = serde_json::to_string(&embedded_json(data))
                    .map_err(|e| ToolError::failed(format!("cannot serialize: {e}")))?;
                Ok(ToolOutput::json(json!({"json": text})))
            }
            "validate" => {
                let Some(text) = data.as_str() else {
                    return Ok(ToolOutput::json(
                        json!({"valid": true, "note": "`data` arrived as a JSON value, not text"}),
                    ));
                };
                Ok(ToolOutput::json(match serde_json::from_str::<Value>(text) {
                    Ok(_) => json!({"valid": true}),
                    Err(e) => json!({"valid": false, "error": e.to_string(), "line": e.line(), "column": e.column()}),
                }))
            }
            other => Err(ToolError::invalid("json", "/operation", format!("unknown operation `{other}`"))),
        }
    }
}

/// A string that holds a JSON object or array is read as that value.
fn embedded_json(data: Value) -> Value {
    if let Value::String(s) = &data {
        let t = s.trim_start();
        if (t.starts_with('{') || t.starts_with('['))
            && let Ok(v) = serde_json::from_str(s)
        {
            return v;
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(params: Value) -> Result<Value, ToolError> {
        let out = Json::new().execute(&CallContext::new("/"), params).await?;
        Ok(out.structured.unwrap_or_default())
    }

    #[tokio::test]
    async fn operations() {
        let v = call(json!({"operation": "parse", "data": "{\"a\": [1, 2]}"})).await.unwrap();
        assert_eq!(v["value"], json!({"a": [1, 2]}));
        let q = call(json!({"operation": "query", "data": {"items": [{"n": 1}, {"n": 2}]}, "path": "$.items[*].n"}))
            .await
            .unwrap();
        assert_eq!(q, json!({"count": 2, "matches": [1, 2]}));
        let q = call(json!({"operation": "query", "data": "{\"x\": 3}", "path": "$.x"})).await.unwrap();
        assert_eq!(q["matches"], json!([3]), "JSON inside a string is queried");
        let s = call(json!({"operation": "stringify", "data": {"b": true}})).await.unwrap();
        assert_eq!(s["json"], "{\"b\":true}");
        let bad = call(json!({"operation": "validate", "data": "{\"a\": }"})).await.unwrap();
        assert_eq!(bad["valid"], false);
        assert_eq!(bad["line"], 1);
    }

    #[tokio::test]
    async fn errors_say_what_to_do() {
        let e = call(json!({"operation": "query", "data": {}, "path": "$[?"})).await.unwrap_err();
        assert!(e.to_string().contains("invalid JSONPath"), "{e}");
        let e = call(json!({"operation": "query", "data": {}})).await.unwrap_err();
        assert!(e.to_string().contains("needs a JSONPath"), "{e}");
        let e = call(json!({"operation": "parse", "data": "{"})).await.unwrap_err();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
    }
}
