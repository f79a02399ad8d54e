//! Tool definitions in each provider's format, and checks of what each provider accepts.
//!
//! Providers disagree on JSON Schema. OpenAI rejects `type` arrays (seed 004 §8): a parameter
//! that accepts any value has no `type` at all. Gemini takes an OpenAPI 3.0 subset: one `type`
//! per node, no `additionalProperties`, `const`, `$ref` or `oneOf`, enums only on strings.
//! [`export`] rewrites a [`ToolSpec`] for a provider; [`problems`] lists what that provider would
//! reject, and a test runs it over every built-in tool.

use serde_json::{Map, Value, json};

use crate::ToolSpec;

/// A tool-definition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI chat completions / responses: `{"type": "function", "function": {...}}`.
    OpenAi,
    /// Anthropic messages: `{"name", "description", "input_schema"}`.
    Anthropic,
    /// Gemini function declarations: `{"name", "description", "parameters"}` (OpenAPI subset).
    Gemini,
    /// MCP `tools/list` entries: `{"name", "description", "inputSchema", "annotations", ...}`.
    Mcp,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 4] = [Provider::OpenAi, Provider::Anthropic, Provider::Gemini, Provider::Mcp];

    /// The lowercase name used on the command line and in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Mcp => "mcp",
        }
    }
}

/// One tool definition in `provider`'s format.
pub fn export(spec: &ToolSpec, provider: Provider) -> Value {
    match provider {
        Provider::OpenAi => json!({
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": openai_schema(&spec.input_schema),
            }
        }),
        Provider::Anthropic => json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": root_object(spec.input_schema.clone()),
        }),
        Provider::Gemini => {
            let mut decl = Map::new();
            decl.insert("name".into(), spec.name.clone().into());
            decl.insert("description".into(), spec.description.clone().into());
            let params = gemini_schema(&spec.input_schema);
            // Gemini rejects an OBJECT with no properties: a tool without parameters omits them.
            if params.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
                decl.insert("parameters".into(), params);
            }
            Value::Object(decl)
        }
        Provider::Mcp => {
            let a = spec.annotations;
            let mut tool = json!({
                "name": spec.name,
                "description": spec.description,
                "inputSchema": root_object(spec.input_schema.clone()),
                "annotations": {
                    "readOnlyHint": a.read_only,
                    "destructiveHint": a.destructive,
                    "idempotentHint": a.idempotent,
                    "openWorldHint": a.open_world,
                },
            });
            if let Some(out) = &spec.output_schema {
                tool["outputSchema"] = root_object(out.clone());
            }
            tool
        }
    }
}

/// Every tool in `provider`'s format, as a JSON array.
pub fn export_all<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>, provider: Provider) -> Value {
    Value::Array(specs.into_iter().map(|s| export(s, provider)).collect())
}

fn root_object(mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        map.insert("type".into(), "object".into());
        map.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

/// OpenAI: no `type` arrays (a nullable type keeps its non-null type; a true union drops `type`),
/// root is an object with `properties`, no `$schema`.
fn openai_schema(schema: &Value) -> Value {
    let mut out = root_object(schema.clone());
    if let Value::Object(map) = &mut out {
        map.remove("$schema");
    }
    walk_nodes(&mut out, &mut |node| {
        if let Some(Value::Array(types)) = node.get("type") {
            let non_null: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
            if non_null.len() == 1 {
                node.insert("type".into(), non_null[0].clone());
            } else {
                node.remove("type");
            }
        }
    });
    out
}

const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "title",
    "propertyOrdering",
];

/// Gemini: the OpenAPI subset. Unknown keywords are dropped, `const` becomes a one-value enum,
/// a nullable type array becomes `nullable: true`, and a node that accepts any value (no
/// `type`) becomes a string holding JSON, which is how Gemini can still send it.
fn gemini_schema(schema: &Value) -> Value {
    let mut out = root_object(schema.clone());
    walk_nodes(&mut out, &mut |node| {
        if let Some(c) = node.remove("const") {
            node.insert("enum".into(), Value::Array(vec![c]));
        }
        match node.get("type").cloned() {
            Some(Value::Array(types)) => {
                let nullable = types.iter().any(|t| t.as_str() == Some("null"));
                let non_null: Vec<Value> = types.into_iter().filter(|t| t.as_str() != Some("null")).collect();
                if non_null.len() == 1 {
                    node.insert("type".into(), non_null[0].clone());
                    if nullable {
                        node.insert("nullable".into(), true.into());
                    }
                } else {
                    make_json_string(node);
                }
            }
            Some(Value::String(_)) => {}
            _ if node.contains_key("anyOf") => {}
            _ => make_json_string(node),
        }
        if node.get("type").and_then(Value::as_str) != Some("string") {
            node.remove("enum");
        }
        if node.get("type").and_then(Value::as_str) == Some("array") && !node.contains_key("items") {
            node.insert("items".into(), json!({"type": "string"}));
        }
        node.retain(|k, _| GEMINI_KEYS.contains(&k.as_str()));
    });
    out
}

fn make_json_string(node: &mut Map<String, Value>) {
    node.insert("type".into(), "string".into());
    let desc = match node.get("description").and_then(Value::as_str) {
        Some(d) => format!("{d}; send it JSON-encoded"),
        None => "Any JSON value, sent JSON-encoded".to_owned(),
    };
    node.insert("description".into(), desc.into());
}

/// Calls `f` on every schema node (the root, property schemas, `items`, `anyOf` members),
/// children after their parent so `f` sees the rewritten parent first.
fn walk_nodes(schema: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(node) = schema else { return };
    f(node);
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for child in props.values_mut() {
            walk_nodes(child, f);
        }
    }
    if let Some(items) = node.get_mut("items") {
        walk_nodes(items, f);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(members)) = node.get_mut(key) {
            for child in members {
                walk_nodes(child, f);
            }
        }
    }
}

/// What `provider` would reject in an exported definition (empty when it is accepted).
///
/// These are the documented rules each provider enforces on tool definitions; keep them in step
/// with the providers' documentation.
pub fn problems(provider: Provider, exported: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let (name, schema, schema_key) = match provider {
        Provider::OpenAi => {
            if exported["type"] != "function" {
                out.push("`type` must be \"function\"".to_owned());
            }
            (&exported["function"]["name"], exported["function"].get("parameters"), "parameters")
        }
        Provider::Anthropic => (&exported["name"], exported.get("input_schema"), "input_schema"),
        Provider::Gemini => (&exported["name"], exported.get("parameters"), "parameters"),
        Provider::Mcp => (&exported["name"], exported.get("inputSchema"), "inputSchema"),
    };
    let name = name.as_str().unwrap_or_default();
    let name_ok = match provider {
        Provider::Gemini => {
            name.len() <= 64
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        }
        _ => (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b)),
    };
    if !name_ok {
        out.push(format!("name `{name}` is not accepted"));
    }
    let Some(schema) = schema else {
        if provider != Provider::Gemini {
            out.push(format!("`{schema_key}` is missing"));
        }
        return out;
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        out.push(format!("`{schema_key}` must have type \"object\" at its root"));
    }
    if provider == Provider::OpenAi {
        for key in ["oneOf", "anyOf", "allOf", "enum", "not"] {
            if schema.get(key).is_some() {
                out.push(format!("`{key}` is not allowed at the root of `parameters`"));
            }
        }
    }
    check_nodes(provider, schema, "", &mut out);
    if provider == Provider::Mcp
        && let Some(ann) = exported.get("annotations").and_then(Value::as_object)
    {
        for (k, v) in ann {
            if !v.is_boolean() {
                out.push(format!("annotation `{k}` must be a boolean"));
            }
        }
    }
    out
}

fn check_nodes(provider: Provider, node: &Value, at: &str, out: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        out.push(format!("{at}: a schema must be an object"));
        return;
    };
    let ty = map.get("type");
    match provider {
        Provider::OpenAi => {
            if ty.is_some_and(Value::is_array) {
                out.push(format!("{at}: OpenAI rejects `type` arrays; omit `type` to accept any value"));
            }
        }
        Provider::Gemini => {
            for key in map.keys() {
                if !GEMINI_KEYS.contains(&key.as_str()) {
                    out.push(format!("{at}: Gemini does not accept the keyword `{key}`"));
                }
            }
            let valid = ["string", "number", "integer", "boolean", "array", "object"];
            match ty.and_then(Value::as_str) {
                Some(t) if valid.contains(&t) => {
                    if t == "array" && !map.contains_key("items") {
                        out.push(format!("{at}: Gemini needs `items` on an array"));
                    }
                    if t != "string" && map.contains_key("enum") {
                        out.push(format!("{at}: Gemini accepts `enum` only on strings"));
                    }
                }
                None if map.contains_key("anyOf") => {}
                _ => out.push(format!("{at}: Gemini needs exactly one `type` of {valid:?}")),
            }
        }
        Provider::Anthropic | Provider::Mcp => {}
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (k, child) in props {
            check_nodes(provider, child, &format!("{at}/properties/{k}"), out);
        }
    }
    if let Some(items) = map.get("items") {
        check_nodes(provider, items, &format!("{at}/items"), out);
    }
    if let Some(Value::Array(members)) = map.get("anyOf") {
        for (i, child) in members.iter().enumerate() {
            check_nodes(provider, child, &format!("{at}/anyOf/{i}"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec::new(
            "json",
            "JSON operations",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "enum": ["parse", "query"]},
                    "data": {"description": "any value"},
                    "maybe": {"type": ["string", "null"]},
                    "mode": {"const": "x"},
                    "tags": {"type": "array"},
                    "n": {"type": "integer", "enum": [1, 2]},
                },
                "required": ["operation", "data"],
                "additionalProperties": false,
            }),
        )
    }

    #[test]
    fn every_export_is_accepted_by_its_provider() {
        for provider in Provider::ALL {
            let exported = export(&spec(), provider);
            assert_eq!(problems(provider, &exported), Vec::<String>::new(), "{provider:?}: {exported:#}");
        }
    }

    #[test]
    fn the_checker_catches_what_providers_reject() {
        let raw = json!({"type": "function", "function": {"name": "json", "parameters": spec().input_schema}});
        assert!(problems(Provider::OpenAi, &raw).iter().any(|p| p.contains("type` arrays")));
        let raw = json!({"name": "json", "parameters": spec().input_schema});
        let found = problems(Provider::Gemini, &raw);
        assert!(found.iter().any(|p| p.contains("additionalProperties")), "{found:?}");
        assert!(found.iter().any(|p| p.contains("/properties/data")), "{found:?}");
        assert!(problems(Provider::Gemini, &json!({"name": "1bad"})).iter().any(|p| p.contains("name")));
    }

    #[test]
    fn any_value_has_no_type_for_openai_and_is_a_json_string_for_gemini() {
        let openai = export(&spec(), Provider::OpenAi);
        let data = &openai["function"]["parameters"]["properties"]["data"];
        assert!(data.get("type").is_none(), "{data}");
        assert_eq!(openai["function"]["parameters"]["properties"]["maybe"]["type"], "string");
        let gemini = export(&spec(), Provider::Gemini);
        assert_eq!(gemini["parameters"]["properties"]["data"]["type"], "string");
        assert_eq!(gemini["parameters"]["properties"]["maybe"]["nullable"], true);
        assert_eq!(gemini["parameters"]["properties"]["mode"]["enum"], json!(["x"]));
    }
}
