//! Tool definitions in each provider's format, and checks of what each provider accepts.
//!
//! Providers disagree on JSON Schema.
//!
//! **OpenAI** definitions are in strict mode (`"strict": true`: Structured Outputs for function
//! calls, the model's arguments always match the schema). Its rules: every object has
//! `"additionalProperties": false` and lists every property in `required`; an optional parameter
//! is typed `["T", "null"]` (or `anyOf` with `{"type": "null"}`), and `null` means "not given"
//! (the [`ParamValidator`](crate::ParamValidator) drops it, at every level); every schema has a
//! `type`; the keywords are a subset ([`STRICT_KEYWORDS`]: `minLength`, `maxLength`,
//! `propertyNames`, `default` and the like are left out, which is safe because a call is checked
//! against the tool's own schema on the way back). What strict mode cannot express travels in
//! another form, which the validator turns back before the schema check:
//!
//! - a map (an object whose entries are all described by `additionalProperties`, such as
//!   `exec`'s `env`) is an array of `{"name": ..., "value": ...}` objects under the same name;
//! - a parameter that takes any value (no `type`, such as `json`'s `data`), any object or any
//!   array is a string parameter `NAME_json` holding its JSON text.
//!
//! Only top-level parameters travel in these forms. A tool whose schema still has no strict form
//! (such a node deeper down, `allOf`, `patternProperties`, a root that takes undeclared names) is
//! exported with `"strict": false` under the non-strict rule: no `type` arrays (a nullable type
//! keeps its non-null type, a true union drops `type`). Seed 004 §8 left `type` off any-value
//! parameters because OpenAI rejected `["T", "null"]` unions in non-strict mode; strict mode
//! needs those unions for every optional parameter, so the strict form has them.
//!
//! **Gemini** takes an OpenAPI 3.0 subset: one `type` per node, no `additionalProperties`,
//! `const`, `$ref` or `oneOf`, enums only on strings.
//!
//! [`export`] rewrites a [`ToolSpec`] for a provider; [`problems`] lists what that provider would
//! reject (for OpenAI: every strict-mode rule, or why a tool is not strict), and a test runs it
//! over every built-in tool.

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
        Provider::OpenAi => {
            let (parameters, strict) = match strict_parameters(&spec.input_schema) {
                Ok(parameters) => (parameters, true),
                Err(_) => (openai_schema(&spec.input_schema), false),
            };
            json!({
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": parameters,
                    "strict": strict,
                }
            })
        }
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

/// OpenAI without strict mode (for a tool that has no strict form): no `type` arrays (a nullable
/// type keeps its non-null type; a true union drops `type`), root is an object with
/// `properties`, no `$schema`.
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

/// The keywords strict mode takes (OpenAI's "supported schemas": `pattern` and `format` on
/// strings, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` and `multipleOf` on
/// numbers, `minItems` and `maxItems` on arrays, `enum`, `const`, `anyOf`, `$defs`/`$ref`). Not
/// `minLength`, `maxLength`, `propertyNames`, `patternProperties`, `uniqueItems`, `default`,
/// `oneOf`, `allOf`, `not`, `if`/`then`/`else`.
pub const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "$defs",
    "$ref",
];

/// The string `format`s strict mode takes; another one is left out.
const STRICT_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

const JSON_TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "null"];

/// Keywords that shape what a value is (dropping one would change what the model sends): a
/// schema with one of them has no strict form. Keywords that only narrow the accepted values
/// (`minLength`, `not`, `uniqueItems`, ...) are left out of the strict form instead.
const SHAPING_KEYWORDS: &[&str] = &["allOf", "patternProperties", "prefixItems", "dependentSchemas"];

/// The suffix of the string parameter that carries a parameter's JSON text in strict mode
/// (`data` → `data_json`).
pub(crate) const JSON_TEXT_SUFFIX: &str = "_json";

/// How a top-level parameter travels in OpenAI strict mode, and so what the validator turns back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrictForm {
    /// As itself.
    Same,
    /// A map (an object described only by an `additionalProperties` schema): an array of
    /// `{"name", "value"}` objects under the same name.
    Pairs,
    /// Any value (no `type`), any object (no declared properties) or any array (no `items`):
    /// its JSON text in a string parameter `NAME_json`.
    JsonText,
}

/// The strict-mode form of a top-level parameter with schema `schema`.
pub(crate) fn strict_form(schema: &Value) -> StrictForm {
    let Value::Object(node) = schema else {
        return if schema == &Value::Bool(true) { StrictForm::JsonText } else { StrictForm::Same };
    };
    let shaped = ["type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties", "items"];
    if !shaped.iter().any(|k| node.contains_key(*k)) {
        return StrictForm::JsonText;
    }
    match non_null_types(node).as_slice() {
        ["object"] => {
            let declared = node.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
            match node.get("additionalProperties") {
                _ if declared => StrictForm::Same,
                Some(Value::Bool(false)) => StrictForm::Same,
                Some(Value::Object(entry)) if !entry.is_empty() => StrictForm::Pairs,
                _ => StrictForm::JsonText,
            }
        }
        ["array"] if !node.contains_key("items") => StrictForm::JsonText,
        _ => StrictForm::Same,
    }
}

/// The `type`s a schema node names, less `null`.
fn non_null_types(node: &Map<String, Value>) -> Vec<&str> {
    match node.get("type") {
        Some(Value::String(t)) if t != "null" => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => Vec::new(),
    }
}

fn required_names(node: &Map<String, Value>) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The OpenAI strict-mode form of a tool's parameters, or every reason it has none.
fn strict_parameters(schema: &Value) -> Result<Value, Vec<String>> {
    let root = root_object(schema.clone());
    let Value::Object(src) = &root else {
        return Err(vec!["the input schema is not a JSON object".to_owned()]);
    };
    let mut why = Vec::new();
    for key in ["anyOf", "oneOf", "allOf", "not", "enum", "$ref"] {
        if src.contains_key(key) {
            why.push(format!("`{key}` at the root of the parameters"));
        }
    }
    if !matches!(src.get("additionalProperties"), None | Some(Value::Bool(false))) {
        why.push("the parameters take names they do not declare (`additionalProperties` at the root)".to_owned());
    }
    let required = required_names(src);
    let empty = Map::new();
    let declared = src.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let mut properties = Map::new();
    for (name, child) in declared {
        let optional = !required.contains(&name.as_str());
        let at = format!("/properties/{name}");
        match strict_form(child) {
            StrictForm::Same => {
                properties.insert(name.clone(), strict_node(child, &at, optional, &mut why));
            }
            StrictForm::Pairs => {
                properties.insert(name.clone(), strict_pairs(child, &at, optional, &mut why));
            }
            StrictForm::JsonText => {
                let key = format!("{name}{JSON_TEXT_SUFFIX}");
                if declared.contains_key(&key) {
                    why.push(format!("{at}: takes any value, and `{key}`, which would carry its JSON text, is taken"));
                }
                properties.insert(key, json_text(child, name, optional));
            }
        }
    }
    let mut out = Map::new();
    out.insert("type".into(), "object".into());
    if let Some(description) = src.get("description") {
        out.insert("description".into(), description.clone());
    }
    let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), Value::Array(names));
    out.insert("additionalProperties".into(), false.into());
    if let Some(Value::Object(defs)) = src.get("$defs") {
        let defs = defs.iter().map(|(k, d)| (k.clone(), strict_node(d, &format!("/$defs/{k}"), false, &mut why)));
        out.insert("$defs".into(), Value::Object(defs.collect()));
    }
    if why.is_empty() { Ok(Value::Object(out)) } else { Err(why) }
}

/// One schema node in strict form; `optional` nodes also take `null`. What cannot be expressed
/// is added to `why`.
fn strict_node(schema: &Value, at: &str, optional: bool, why: &mut Vec<String>) -> Value {
    let src = match schema {
        Value::Object(src) => src,
        Value::Bool(true) => {
            why.push(format!("{at}: takes any value (only a top-level parameter can travel as JSON text)"));
            return json!({});
        }
        _ => {
            why.push(format!("{at}: is not a schema strict mode can express"));
            return json!({});
        }
    };
    for key in SHAPING_KEYWORDS {
        if src.contains_key(*key) {
            why.push(format!("{at}: strict mode has no `{key}`"));
        }
    }
    if let Some(reference) = src.get("$ref") {
        // Alone: strict mode takes no keywords beside a `$ref`.
        if !reference.as_str().is_some_and(|r| r.starts_with("#/$defs/")) {
            why.push(format!("{at}: a `$ref` outside `#/$defs/`"));
        }
        let mut out = Map::new();
        out.insert("$ref".into(), reference.clone());
        if optional {
            make_nullable(&mut out);
        }
        return Value::Object(out);
    }
    let mut out = Map::new();
    let types = node_types(src);
    if types.is_empty() && !src.contains_key("anyOf") && !src.contains_key("oneOf") {
        why.push(format!("{at}: takes any value (only a top-level parameter can travel as JSON text)"));
        return json!({});
    }
    for t in &types {
        if !JSON_TYPES.contains(&t.as_str()) {
            why.push(format!("{at}: unknown type `{t}`"));
        }
    }
    if let Some(description) = described(src) {
        out.insert("description".into(), description.into());
    }
    for key in ["enum", "const", "pattern", "minItems", "maxItems"] {
        if let Some(v) = src.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    // Numbers only: draft 4's boolean `exclusiveMinimum` has no strict form and is left out.
    for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"] {
        if let Some(v) = src.get(key).filter(|v| v.is_number()) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(format) = src.get("format").filter(|f| f.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f))) {
        out.insert("format".into(), format.clone());
    }
    if types.iter().any(|t| t == "object") {
        let empty = Map::new();
        let declared = src.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        match src.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            // Closed: the model is told only the declared names anyway.
            None if !declared.is_empty() => {}
            Some(Value::Object(entry)) if !entry.is_empty() && declared.is_empty() => why.push(format!(
                "{at}: a map (`additionalProperties` with a schema); only a top-level parameter can travel as name/value pairs"
            )),
            _ if declared.is_empty() => {
                why.push(format!("{at}: an object that takes any names; only a top-level parameter can travel as JSON text"))
            }
            _ => why.push(format!("{at}: an object that takes names it does not declare (`additionalProperties`)")),
        }
        let required = required_names(src);
        let properties: Map<String, Value> = declared
            .iter()
            .map(|(k, child)| {
                let child = strict_node(child, &format!("{at}/properties/{k}"), !required.contains(&k.as_str()), why);
                (k.clone(), child)
            })
            .collect();
        let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
        out.insert("properties".into(), Value::Object(properties));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), false.into());
    }
    if types.iter().any(|t| t == "array") {
        match src.get("items") {
            Some(items @ (Value::Object(_) | Value::Bool(_))) => {
                out.insert("items".into(), strict_node(items, &format!("{at}/items"), false, why));
            }
            Some(_) => why.push(format!("{at}: a tuple (`items` as a list)")),
            None => {
                why.push(format!("{at}: an array with no `items`; only a top-level parameter can travel as JSON text"))
            }
        }
    }
    // `oneOf` becomes `anyOf`: it accepts more, and the tool's own schema is checked on the way back.
    let members: Vec<&Value> =
        ["anyOf", "oneOf"].iter().filter_map(|k| src.get(*k).and_then(Value::as_array)).flatten().collect();
    if !members.is_empty() {
        let members = members.iter().enumerate().map(|(i, m)| strict_node(m, &format!("{at}/anyOf/{i}"), false, why));
        out.insert("anyOf".into(), Value::Array(members.collect()));
    }
    match types.as_slice() {
        [] => {}
        [one] => {
            out.insert("type".into(), one.clone().into());
        }
        many => {
            out.insert("type".into(), many.to_vec().into());
        }
    }
    if optional && !takes_null(&out) {
        make_nullable(&mut out);
    }
    Value::Object(out)
}

/// The types a node names, or, when it names none, what its keywords imply (`properties`: an
/// object; `items`: an array; `enum` or `const`: the one type of their values).
fn node_types(src: &Map<String, Value>) -> Vec<String> {
    match src.get("type") {
        Some(Value::String(t)) => return vec![t.clone()],
        Some(Value::Array(types)) => return types.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => {}
    }
    if src.contains_key("properties") {
        return vec!["object".to_owned()];
    }
    if src.contains_key("items") {
        return vec!["array".to_owned()];
    }
    let values: Vec<&Value> = match (src.get("enum"), src.get("const")) {
        (Some(Value::Array(values)), _) => values.iter().collect(),
        (_, Some(value)) => vec![value],
        _ => return Vec::new(),
    };
    let mut types: Vec<String> = Vec::new();
    for value in values {
        let t = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !types.iter().any(|have| have == t) {
            types.push(t.to_owned());
        }
    }
    if types.iter().any(|t| t == "number") {
        types.retain(|t| t != "integer");
    }
    types
}

/// A node's description, with its `default` (a keyword strict mode lacks) said in words unless
/// the description already speaks of one.
fn described(src: &Map<String, Value>) -> Option<String> {
    let description = src.get("description").and_then(Value::as_str);
    let default = src.get("default").filter(|d| !d.is_null());
    match (description, default) {
        (Some(d), Some(v)) if !d.to_lowercase().contains("default") => {
            Some(format!("{} (default {v}).", d.trim_end_matches('.')))
        }
        (Some(d), _) => Some(d.to_owned()),
        (None, Some(v)) => Some(format!("Default {v}.")),
        (None, None) => None,
    }
}

fn takes_null(node: &Map<String, Value>) -> bool {
    match node.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => node
            .get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|members| members.iter().any(|m| m.as_object().is_some_and(takes_null))),
    }
}

/// Lets `node` also take `null`: `["T", "null"]`, or an `anyOf` with `{"type": "null"}` where a
/// type array would not do (an `enum`, a `const`, a `$ref`, a union).
fn make_nullable(node: &mut Map<String, Value>) {
    let null = json!({"type": "null"});
    let constrained = ["enum", "const", "$ref"].iter().any(|k| node.contains_key(*k));
    let union = node.contains_key("anyOf");
    if !constrained {
        match node.get_mut("type") {
            Some(Value::String(t)) if !union => {
                let t = std::mem::take(t);
                node.insert("type".into(), json!([t, "null"]));
                return;
            }
            Some(Value::Array(types)) if !union => {
                types.push("null".into());
                return;
            }
            None => {
                if let Some(Value::Array(members)) = node.get_mut("anyOf") {
                    members.push(null);
                    return;
                }
            }
            _ => {}
        }
    }
    let description = node.remove("description");
    let inner = std::mem::take(node);
    if let Some(description) = description {
        node.insert("description".into(), description);
    }
    node.insert("anyOf".into(), Value::Array(vec![Value::Object(inner), null]));
}

/// A map parameter in strict form: a list of `{"name", "value"}` objects.
fn strict_pairs(schema: &Value, at: &str, optional: bool, why: &mut Vec<String>) -> Value {
    let mut name = json!({"type": "string"});
    if let Some(pattern) = schema.pointer("/propertyNames/pattern") {
        name["pattern"] = pattern.clone();
    }
    let value = strict_node(&schema["additionalProperties"], &format!("{at}/additionalProperties"), false, why);
    let said = "A list of {\"name\": ..., \"value\": ...} objects, one per entry, each name once.";
    let description = match schema.get("description").and_then(Value::as_str) {
        Some(d) => format!("{d} {said}"),
        None => said.to_owned(),
    };
    let mut out = Map::new();
    out.insert("type".into(), "array".into());
    out.insert("description".into(), description.into());
    out.insert(
        "items".into(),
        json!({
            "type": "object",
            "properties": {"name": name, "value": value},
            "required": ["name", "value"],
            "additionalProperties": false,
        }),
    );
    for (from, to) in [("minProperties", "minItems"), ("maxProperties", "maxItems")] {
        if let Some(n) = schema.get(from).filter(|n| n.is_u64()) {
            out.insert(to.into(), n.clone());
        }
    }
    if optional {
        make_nullable(&mut out);
    }
    Value::Object(out)
}

/// The string parameter `NAME_json` that carries parameter `name`'s JSON text in strict mode.
fn json_text(schema: &Value, name: &str, optional: bool) -> Value {
    let what = match schema.as_object().map(non_null_types).as_deref() {
        Some(["object"]) => "a JSON object",
        Some(["array"]) => "a JSON array",
        _ => "any JSON value",
    };
    let said = format!(
        "`{name}` as JSON text: {what}, JSON-encoded into this string (for example {{\"a\": 1}}, [1, 2], \"text\" or 3)."
    );
    let description = match schema.get("description").and_then(Value::as_str) {
        Some(d) => format!("{}. {said}", d.trim_end_matches('.')),
        None => said,
    };
    let ty = if optional { json!(["string", "null"]) } else { json!("string") };
    json!({"type": ty, "description": description})
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
    let strict = provider == Provider::OpenAi && exported["function"]["strict"] == true;
    if provider == Provider::OpenAi {
        for key in ["oneOf", "anyOf", "allOf", "enum", "not"] {
            if schema.get(key).is_some() {
                out.push(format!("`{key}` is not allowed at the root of `parameters`"));
            }
        }
        if strict {
            let mut seen = StrictCounts::default();
            check_strict(schema, "", 1, &mut seen, &mut out);
            if seen.properties > 5000 {
                out.push(format!("{} properties in all; strict mode takes at most 5000", seen.properties));
            }
            if seen.enum_values > 1000 {
                out.push(format!("{} enum values in all; strict mode takes at most 1000", seen.enum_values));
            }
        } else {
            out.push(match strict_parameters(schema) {
                Err(why) => format!("not in strict mode (`\"strict\": false`): {}", why.join("; ")),
                Ok(_) => {
                    "not in strict mode (`\"strict\": false`), though its parameters have a strict form".to_owned()
                }
            });
        }
    }
    if !strict {
        check_nodes(provider, schema, "", &mut out);
    }
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

#[derive(Default)]
struct StrictCounts {
    properties: usize,
    enum_values: usize,
}

/// The strict-mode rules, node by node: supported keywords and formats only, a `type` on every
/// node, objects closed with every property required, arrays with `items`, at most 10 levels of
/// objects.
fn check_strict(node: &Value, at: &str, depth: usize, seen: &mut StrictCounts, out: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        out.push(format!("{at}: a schema must be an object"));
        return;
    };
    for key in map.keys() {
        if !STRICT_KEYWORDS.contains(&key.as_str()) {
            out.push(format!("{at}: strict mode does not take the keyword `{key}`"));
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for t in &types {
        if !JSON_TYPES.contains(t) {
            out.push(format!("{at}: unknown type `{t}`"));
        }
    }
    if types.is_empty() && !map.contains_key("anyOf") && !map.contains_key("$ref") {
        out.push(format!("{at}: strict mode needs a `type` (or `anyOf`, `$ref`) on every schema"));
    }
    if map.contains_key("$ref") && map.len() > 1 {
        out.push(format!("{at}: strict mode takes no keywords beside `$ref`"));
    }
    if let Some(format) = map.get("format").and_then(Value::as_str)
        && !STRICT_FORMATS.contains(&format)
    {
        out.push(format!("{at}: strict mode does not take the format `{format}`"));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        seen.enum_values += values.len();
    }
    if types.contains(&"object") {
        if depth > 10 {
            out.push(format!("{at}: objects nested {depth} deep; strict mode takes at most 10 levels"));
        }
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push(format!("{at}: strict mode needs `\"additionalProperties\": false` on every object"));
        }
        match map.get("properties").and_then(Value::as_object) {
            None => out.push(format!("{at}: strict mode needs `properties` on every object")),
            Some(properties) => {
                seen.properties += properties.len();
                let required = required_names(map);
                let missing: Vec<&str> =
                    properties.keys().map(String::as_str).filter(|k| !required.contains(k)).collect();
                if !missing.is_empty() {
                    out.push(format!(
                        "{at}: strict mode needs every property in `required` (optional ones typed [\"T\", \"null\"]); missing: {}",
                        missing.join(", ")
                    ));
                }
                for name in required.iter().filter(|r| !properties.contains_key(**r)) {
                    out.push(format!("{at}: `required` names `{name}`, which is not a property"));
                }
                for (k, child) in properties {
                    check_strict(child, &format!("{at}/properties/{k}"), depth + 1, seen, out);
                }
            }
        }
    }
    if types.contains(&"array") && !map.contains_key("items") {
        out.push(format!("{at}: strict mode needs `items` on every array"));
    }
    if let Some(items) = map.get("items") {
        check_strict(items, &format!("{at}/items"), depth, seen, out);
    }
    if let Some(Value::Array(members)) = map.get("anyOf") {
        for (i, child) in members.iter().enumerate() {
            check_strict(child, &format!("{at}/anyOf/{i}"), depth, seen, out);
        }
    }
    if let Some(Value::Object(defs)) = map.get("$defs") {
        for (k, child) in defs {
            check_strict(child, &format!("{at}/$defs/{k}"), depth, seen, out);
        }
    }
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
                out.push(format!(
                    "{at}: OpenAI rejects `type` arrays outside strict mode; omit `type` to accept any value"
                ));
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
    fn any_value_is_json_text_for_openai_and_gemini() {
        let openai = export(&spec(), Provider::OpenAi);
        let params = &openai["function"]["parameters"];
        assert_eq!(openai["function"]["strict"], true, "{openai:#}");
        assert!(params["properties"].get("data").is_none(), "{params}");
        assert_eq!(params["properties"]["data_json"]["type"], "string", "required: not nullable");
        assert_eq!(params["properties"]["maybe"]["type"], json!(["string", "null"]));
        let gemini = export(&spec(), Provider::Gemini);
        assert_eq!(gemini["parameters"]["properties"]["data"]["type"], "string");
        assert_eq!(gemini["parameters"]["properties"]["maybe"]["nullable"], true);
        assert_eq!(gemini["parameters"]["properties"]["mode"]["enum"], json!(["x"]));
    }

    /// Exports `schema` for OpenAI: it must be strict, pass the checker, and have `expect` as its
    /// parameters. Properties are in name order in these tests, so `required` is too.
    fn check(schema: Value, expect: Value) {
        let exported = export(&ToolSpec::new("t", "A tool.", schema), Provider::OpenAi);
        assert_eq!(exported["function"]["strict"], true, "{exported:#}");
        assert_eq!(exported["function"]["parameters"], expect, "{exported:#}");
        assert_eq!(problems(Provider::OpenAi, &exported), Vec::<String>::new(), "{exported:#}");
    }

    #[test]
    fn strict_a_map_is_a_list_of_name_value_pairs() {
        check(
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1},
                    "env": {
                        "type": "object",
                        "description": "Extra variables.",
                        "additionalProperties": {"type": "string", "maxLength": 10},
                        "propertyNames": {"pattern": "^[A-Z_]+$"},
                        "maxProperties": 8,
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
                "required": ["command", "labels"],
                "additionalProperties": false,
            }),
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "env": {
                        "type": ["array", "null"],
                        "description": "Extra variables. A list of {\"name\": ..., \"value\": ...} objects, one per entry, each name once.",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string", "pattern": "^[A-Z_]+$"}, "value": {"type": "string"}},
                            "required": ["name", "value"],
                            "additionalProperties": false,
                        },
                        "maxItems": 8,
                    },
                    "labels": {
                        "type": "array",
                        "description": "A list of {\"name\": ..., \"value\": ...} objects, one per entry, each name once.",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "value": {"type": "integer"}},
                            "required": ["name", "value"],
                            "additionalProperties": false,
                        },
                    },
                },
                "required": ["command", "env", "labels"],
                "additionalProperties": false,
            }),
        );
    }

    #[test]
    fn strict_any_value_is_json_text_named_name_json() {
        let said = "as JSON text: any JSON value, JSON-encoded into this string (for example {\"a\": 1}, [1, 2], \"text\" or 3).";
        check(
            json!({
                "type": "object",
                "properties": {
                    "body": {"description": "Request body."},
                    "data": {},
                    "free": {"type": "object"},
                    "list": {"type": "array", "description": "Anything"},
                },
                "required": ["data"],
            }),
            json!({
                "type": "object",
                "properties": {
                    "body_json": {"type": ["string", "null"], "description": format!("Request body. `body` {said}")},
                    "data_json": {"type": "string", "description": format!("`data` {said}")},
                    "free_json": {
                        "type": ["string", "null"],
                        "description": "`free` as JSON text: a JSON object, JSON-encoded into this string (for example {\"a\": 1}, [1, 2], \"text\" or 3).",
                    },
                    "list_json": {
                        "type": ["string", "null"],
                        "description": "Anything. `list` as JSON text: a JSON array, JSON-encoded into this string (for example {\"a\": 1}, [1, 2], \"text\" or 3).",
                    },
                },
                "required": ["body_json", "data_json", "free_json", "list_json"],
                "additionalProperties": false,
            }),
        );
    }

    #[test]
    fn strict_nested_objects_and_optional_parameters() {
        check(
            json!({
                "type": "object",
                "properties": {
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "uniqueItems": true,
                        "items": {
                            "type": "object",
                            "properties": {
                                "new": {"type": "string"},
                                "old": {"type": "string", "maxLength": 100},
                                "replace_all": {"type": "boolean", "default": false},
                            },
                            "required": ["old", "new"],
                        },
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5, "description": "How many."},
                    "note": {"type": ["string", "null"], "format": "uri"},
                    "when": {"type": "string", "format": "date-time", "title": "When"},
                },
                "required": ["edits"],
                "additionalProperties": false,
            }),
            json!({
                "type": "object",
                "properties": {
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "new": {"type": "string"},
                                "old": {"type": "string"},
                                "replace_all": {"type": ["boolean", "null"], "description": "Default false."},
                            },
                            "required": ["new", "old", "replace_all"],
                            "additionalProperties": false,
                        },
                    },
                    "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 50, "description": "How many (default 5)."},
                    "note": {"type": ["string", "null"]},
                    "when": {"type": ["string", "null"], "format": "date-time"},
                },
                "required": ["edits", "limit", "note", "when"],
                "additionalProperties": false,
            }),
        );
    }

    #[test]
    fn strict_enums_consts_and_unions() {
        check(
            json!({
                "type": "object",
                "properties": {
                    "kind": {"const": "x"},
                    "level": {"type": "integer", "enum": [1, 2], "description": "Level."},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "value": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                },
                "required": ["mode", "kind"],
            }),
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "const": "x"},
                    "level": {"description": "Level.", "anyOf": [{"type": "integer", "enum": [1, 2]}, {"type": "null"}]},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "value": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                },
                "required": ["kind", "level", "mode", "value"],
                "additionalProperties": false,
            }),
        );
    }

    #[test]
    fn strict_parameters_of_a_tool_without_any() {
        check(
            json!({"type": "object"}),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
        );
    }

    /// What strict mode cannot express below the top level: exported with `"strict": false` under
    /// the non-strict rule, and `problems` says why.
    #[test]
    fn a_schema_with_no_strict_form_is_exported_non_strict_and_problems_say_why() {
        let cases = [
            (
                json!({"opts": {"type": "object", "properties": {"env": {"type": "object", "additionalProperties": {"type": "string"}}}}}),
                "/properties/opts/properties/env: a map",
            ),
            (
                json!({"opts": {"type": "object", "properties": {"data": {}, "n": {"type": ["integer", "null"]}}}}),
                "/properties/opts/properties/data: takes any value",
            ),
            (
                json!({"rows": {"type": "array", "items": {"type": "array"}}}),
                "/properties/rows/items: an array with no `items`",
            ),
            (json!({"both": {"allOf": [{"type": "string"}, {"minLength": 2}]}}), "strict mode has no `allOf`"),
            (
                json!({"data": {}, "data_json": {"type": "string"}}),
                "`data_json`, which would carry its JSON text, is taken",
            ),
            (
                json!({"o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}}),
                "takes names it does not declare",
            ),
        ];
        for (properties, why) in cases {
            let spec = ToolSpec::new("t", "A tool.", json!({"type": "object", "properties": properties}));
            let exported = export(&spec, Provider::OpenAi);
            assert_eq!(exported["function"]["strict"], false, "{exported:#}");
            assert_eq!(exported["function"]["parameters"], openai_schema(&spec.input_schema));
            let found = problems(Provider::OpenAi, &exported);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].starts_with("not in strict mode") && found[0].contains(why), "{why}: {found:?}");
        }
        let open_root = ToolSpec::new("t", "A tool.", json!({"type": "object", "additionalProperties": true}));
        let found = problems(Provider::OpenAi, &export(&open_root, Provider::OpenAi));
        assert!(found[0].contains("do not declare (`additionalProperties` at the root)"), "{found:?}");
        // The non-strict rule still holds for such a tool: no `type` arrays.
        let nested = &export(
            &ToolSpec::new(
                "t",
                "",
                json!({"type": "object", "properties": {"opts": {"type": "object", "properties": {"data": {}, "n": {"type": ["integer", "null"]}}}}}),
            ),
            Provider::OpenAi,
        );
        assert_eq!(nested["function"]["parameters"]["properties"]["opts"]["properties"]["n"]["type"], "integer");
    }

    #[test]
    fn the_strict_checker_catches_each_violation() {
        let good = export(
            &ToolSpec::new(
                "t",
                "",
                json!({"type": "object", "properties": {
                    "a": {"type": "string"},
                    "o": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                    "l": {"type": "array", "items": {"type": "string"}},
                }, "required": ["a", "o", "l"]}),
            ),
            Provider::OpenAi,
        );
        assert_eq!(problems(Provider::OpenAi, &good), Vec::<String>::new());
        let cases: &[(&str, Value, &str)] = &[
            (
                "/function/parameters/properties/o/additionalProperties",
                Value::Null,
                "/properties/o: strict mode needs `\"additionalProperties\": false`",
            ),
            (
                "/function/parameters/properties/o/required",
                json!([]),
                "/properties/o: strict mode needs every property in `required` (optional ones typed [\"T\", \"null\"]); missing: x",
            ),
            (
                "/function/parameters/required",
                json!(["a", "o", "l", "zz"]),
                ": `required` names `zz`, which is not a property",
            ),
            (
                "/function/parameters/properties/a/minLength",
                json!(1),
                "/properties/a: strict mode does not take the keyword `minLength`",
            ),
            ("/function/parameters/properties/a/default", json!("x"), "keyword `default`"),
            (
                "/function/parameters/properties/a/format",
                json!("uri"),
                "/properties/a: strict mode does not take the format `uri`",
            ),
            ("/function/parameters/properties/a/type", Value::Null, "/properties/a: strict mode needs a `type`"),
            (
                "/function/parameters/properties/l/items",
                Value::Null,
                "/properties/l: strict mode needs `items` on every array",
            ),
            ("/function/parameters/properties/o/properties/x/type", json!("int"), "unknown type `int`"),
            (
                "/function/parameters/properties/o/properties",
                Value::Null,
                "/properties/o: strict mode needs `properties`",
            ),
            (
                "/function/strict",
                json!(false),
                "not in strict mode (`\"strict\": false`), though its parameters have a strict form",
            ),
        ];
        for (pointer, value, expect) in cases {
            let mut bad = good.clone();
            let (parent, key) = pointer.rsplit_once('/').unwrap_or_default();
            let parent = bad.pointer_mut(parent).and_then(Value::as_object_mut).unwrap_or_else(|| panic!("{pointer}"));
            if value.is_null() {
                parent.remove(key);
            } else {
                parent.insert(key.to_owned(), value.clone());
            }
            let found = problems(Provider::OpenAi, &bad);
            assert!(found.iter().any(|p| p.contains(expect)), "{pointer}: expected `{expect}` in {found:?}");
        }
        let mut deep = json!({"type": "string"});
        for _ in 0..11 {
            deep =
                json!({"type": "object", "properties": {"d": deep}, "required": ["d"], "additionalProperties": false});
        }
        let deep = json!({"type": "function", "function": {"name": "t", "parameters": deep, "strict": true}});
        assert!(
            problems(Provider::OpenAi, &deep).iter().any(|p| p.contains("at most 10 levels")),
            "{:?}",
            problems(Provider::OpenAi, &deep)
        );
    }
}
