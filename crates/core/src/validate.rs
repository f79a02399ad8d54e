//! Parameter checking: aliases, the way back from OpenAI strict mode's forms, limits, safe
//! coercions, then the JSON Schema.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::export::{JSON_TEXT_SUFFIX, StrictForm, strict_form};
use crate::{ParamProblem, ToolError};

/// Size limits on a call's parameters (seed 003's defaults). Checked before the schema, so a
/// huge or deeply nested payload is refused before any work is done on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most top-level parameters.
    pub max_params: usize,
    /// Deepest nesting of objects and arrays; the parameter object itself is level 1.
    pub max_depth: usize,
    /// Most items in any array.
    pub max_array_items: usize,
    /// Longest string, in bytes.
    pub max_string_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_params: 20, max_depth: 5, max_array_items: 1000, max_string_bytes: 100 * 1024 }
    }
}

/// Parameter aliases models commonly use (seed 001), as (alias, canonical) pairs. An alias is
/// renamed only when the schema has the canonical name, lacks the alias, and the call did not
/// also send the canonical name.
const PARAM_ALIASES: &[(&str, &str)] = &[
    ("file", "path"),
    ("filepath", "path"),
    ("file_path", "path"),
    ("filename", "path"),
    ("old", "old_string"),
    ("search", "old_string"),
    ("from", "old_string"),
    ("new", "new_string"),
    ("replace", "new_string"),
    ("to", "new_string"),
    ("cmd", "command"),
    // seed 001's `delegate_to_agent {target_agent_id, task}`, an alias of `delegate`.
    ("target_agent_id", "agent"),
];

/// A tool's compiled parameter checker. Built once per tool by the registry.
pub struct ParamValidator {
    tool: String,
    schema: Value,
    /// The compiled schema: at once for tools from outside ([`ParamValidator::new`]), on the
    /// first call for built-in tools ([`ParamValidator::new_lazy`]), whose schemas are constants
    /// (compiling dozens of them was a cost every short-lived process paid).
    compiled: OnceLock<Result<jsonschema::Validator, String>>,
    strict_properties: bool,
}

impl std::fmt::Debug for ParamValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamValidator").field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl ParamValidator {
    /// Compiles `schema` for `tool`. Fails with a description when the schema itself is invalid.
    pub fn new(tool: &str, schema: &Value) -> Result<Self, String> {
        let validator = Self::new_lazy(tool, schema)?;
        validator.compile()?;
        Ok(validator)
    }

    /// Like [`ParamValidator::new`], but the schema is compiled on the first check: for
    /// schemas known to be valid (built-in tools; a test compiles every one of them).
    pub fn new_lazy(tool: &str, schema: &Value) -> Result<Self, String> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!("the input schema of `{tool}` must have `\"type\": \"object\"` at its root"));
        }
        let strict_properties = schema.get("additionalProperties") == Some(&Value::Bool(false));
        Ok(ParamValidator {
            tool: tool.to_owned(),
            schema: schema.clone(),
            compiled: OnceLock::new(),
            strict_properties,
        })
    }

    /// Compiles the schema now if it is not yet; says why it is not valid JSON Schema.
    pub fn compile(&self) -> Result<(), String> {
        self.compiled().map(|_| ())
    }

    fn compiled(&self) -> Result<&jsonschema::Validator, String> {
        self.compiled
            .get_or_init(|| {
                jsonschema::validator_for(&self.schema)
                    .map_err(|e| format!("the input schema of `{}` is not valid JSON Schema: {e}", self.tool))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Turns what the model sent into the parameters the tool receives, or lists every problem.
    ///
    /// `null` or a missing parameter object counts as `{}`.
    pub fn check(&self, mut params: Value, limits: &Limits) -> Result<Value, ToolError> {
        self.check_in_place(&mut params, limits).map(|()| params)
    }

    /// [`check`](Self::check) without taking the parameters: they are rewritten in place (aliases,
    /// coercions), and stay with the caller when they are refused (the audit log records them).
    pub fn check_in_place(&self, params: &mut Value, limits: &Limits) -> Result<(), ToolError> {
        if params.is_null() {
            *params = Value::Object(Map::new());
        }
        let Value::Object(object) = params else {
            return Err(self.error(vec![ParamProblem {
                pointer: String::new(),
                message: format!("expected an object of parameters, got {}", describe(params)),
            }]));
        };
        let properties = self.schema.get("properties").and_then(Value::as_object);
        let mut problems = Vec::new();
        if let Some(properties) = properties {
            apply_aliases(object, properties);
            from_strict_forms(object, properties, limits, &mut problems);
            if !problems.is_empty() {
                return Err(self.error(problems));
            }
            drop_null_optionals(object, properties, self.schema.get("required"));
        }
        check_limits(object, limits, &mut problems);
        if !problems.is_empty() {
            return Err(self.error(problems));
        }
        if let Some(properties) = properties {
            if self.strict_properties {
                for key in object.keys() {
                    if !properties.contains_key(key) {
                        problems.push(unknown_param(key, properties));
                    }
                }
            }
            for (key, value) in object.iter_mut() {
                if let Some(schema) = properties.get(key) {
                    coerce(value, schema);
                }
            }
        }
        let compiled = self.compiled().map_err(ToolError::failed)?;
        for error in compiled.iter_errors(params) {
            let pointer = error.instance_path().to_string();
            // Additional-property errors are already reported with a suggestion above.
            if self.strict_properties && pointer.is_empty() && error.to_string().contains("Additional properties") {
                continue;
            }
            problems.push(ParamProblem { pointer, message: error.to_string() });
        }
        if problems.is_empty() { Ok(()) } else { Err(self.error(problems)) }
    }

    fn error(&self, problems: Vec<ParamProblem>) -> ToolError {
        ToolError::InvalidParams { tool: self.tool.clone(), problems }
    }
}

fn apply_aliases(object: &mut Map<String, Value>, properties: &Map<String, Value>) {
    for (alias, canonical) in PARAM_ALIASES {
        if object.contains_key(*alias)
            && !object.contains_key(*canonical)
            && properties.contains_key(*canonical)
            && !properties.contains_key(*alias)
            && let Some(value) = object.remove(*alias)
        {
            object.insert((*canonical).to_owned(), value);
        }
    }
}

/// The way back from the forms OpenAI's strict mode sends (see [`crate::export`]), for top-level
/// parameters: a map given as an array of `{"name", "value"}` objects becomes the object (a name
/// given twice is refused, not merged), and `NAME_json` (JSON text) is decoded into `NAME` (where
/// the schema has `NAME`, carried as JSON text, and no `NAME_json`). `NAME_json: null` means "not
/// given". A refused parameter is left as it was sent.
///
/// A list longer than the array limit, or JSON text longer than the string limit, is left for
/// the limits to refuse, so no work is done on it; a decoded value is held to the limits too.
fn from_strict_forms(
    object: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    limits: &Limits,
    problems: &mut Vec<ParamProblem>,
) {
    for (name, schema) in properties {
        match strict_form(schema) {
            StrictForm::Same => {}
            StrictForm::Pairs => {
                let Some(Value::Array(items)) = object.get(name) else { continue };
                if items.len() > limits.max_array_items {
                    continue;
                }
                match pairs_to_map(name, items) {
                    Ok(map) => {
                        object.insert(name.clone(), Value::Object(map));
                    }
                    Err(problem) => problems.push(problem),
                }
            }
            StrictForm::JsonText => {
                let key = format!("{name}{JSON_TEXT_SUFFIX}");
                if properties.contains_key(&key) {
                    continue;
                }
                let pointer = format!("/{}", escape_pointer(&key));
                match object.get(&key) {
                    None => {}
                    Some(Value::Null) => {
                        object.remove(&key);
                    }
                    Some(_) if object.contains_key(name) => problems.push(ParamProblem {
                        pointer,
                        message: format!(
                            "`{name}` and `{key}` were both given; `{key}` is `{name}` as JSON text: give one of them"
                        ),
                    }),
                    Some(Value::String(text)) if text.len() > limits.max_string_bytes => {}
                    Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                        Ok(value) => {
                            object.remove(&key);
                            object.insert(name.clone(), value);
                        }
                        Err(e) => problems.push(ParamProblem {
                            pointer,
                            message: format!(
                                "`{key}` must be JSON text (the value of `{name}`, JSON-encoded, such as {{\"a\": 1}} or \"text\"): {e}"
                            ),
                        }),
                    },
                    Some(other) => problems.push(ParamProblem {
                        pointer,
                        message: format!(
                            "`{key}` must be a string of JSON text (the value of `{name}`, JSON-encoded), got {}",
                            describe(other)
                        ),
                    }),
                }
            }
        }
    }
}

/// `[{"name": "A", "value": 1}, ...]` → `{"A": 1, ...}`.
fn pairs_to_map(name: &str, items: &[Value]) -> Result<Map<String, Value>, ParamProblem> {
    let mut map = Map::new();
    for (i, item) in items.iter().enumerate() {
        let pointer = format!("/{}/{i}", escape_pointer(name));
        let pair = item.as_object().filter(|o| o.len() == 2 && o.contains_key("value"));
        let Some((key, value)) = pair.and_then(|o| Some((o.get("name")?.as_str()?, &o["value"]))) else {
            return Err(ParamProblem {
                pointer,
                message: format!(
                    "`{name}` given as a list takes {{\"name\": \"...\", \"value\": ...}} objects (a string name and a value, nothing else), got {}",
                    serde_json::to_string(item).unwrap_or_default()
                ),
            });
        };
        if map.contains_key(key) {
            return Err(ParamProblem {
                pointer,
                message: format!("`{name}` names `{key}` twice; give each name once"),
            });
        }
        map.insert(key.to_owned(), value.clone());
    }
    Ok(map)
}

fn unknown_param(key: &str, properties: &Map<String, Value>) -> ParamProblem {
    let closest = properties
        .keys()
        .map(|k| (strsim::jaro_winkler(k, key), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    let known: Vec<&str> = properties.keys().map(String::as_str).collect();
    ParamProblem {
        pointer: format!("/{}", escape_pointer(key)),
        message: format!("unknown parameter `{key}`{closest} (this tool takes: {})", known.join(", ")),
    }
}

fn check_limits(object: &Map<String, Value>, limits: &Limits, problems: &mut Vec<ParamProblem>) {
    if object.len() > limits.max_params {
        problems.push(ParamProblem {
            pointer: String::new(),
            message: format!("{} parameters given, at most {} allowed", object.len(), limits.max_params),
        });
    }
    let mut pointer = String::new();
    for (key, value) in object {
        let len = pointer.len();
        pointer.push('/');
        pointer.push_str(&escape_pointer(key));
        walk_limits(value, 2, limits, &mut pointer, problems);
        pointer.truncate(len);
    }
}

fn walk_limits(value: &Value, depth: usize, limits: &Limits, pointer: &mut String, problems: &mut Vec<ParamProblem>) {
    // Stop after a handful of problems: a hostile payload could otherwise produce millions.
    if problems.len() >= 10 {
        return;
    }
    match value {
        Value::String(s) if s.len() > limits.max_string_bytes => problems.push(ParamProblem {
            pointer: pointer.clone(),
            message: format!("string of {} bytes, at most {} allowed", s.len(), limits.max_string_bytes),
        }),
        Value::Array(_) | Value::Object(_) if depth > limits.max_depth => problems.push(ParamProblem {
            pointer: pointer.clone(),
            message: format!("nested {} levels deep, at most {} allowed", depth, limits.max_depth),
        }),
        Value::Array(items) => {
            if items.len() > limits.max_array_items {
                problems.push(ParamProblem {
                    pointer: pointer.clone(),
                    message: format!("array of {} items, at most {} allowed", items.len(), limits.max_array_items),
                });
                return;
            }
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk_limits(item, depth + 1, limits, pointer, problems);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&escape_pointer(key));
                walk_limits(item, depth + 1, limits, pointer, problems);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// `"flag": null` for an optional parameter means "not given": OpenAI's strict mode and many
/// MCP clients send it for every optional field, at every level (strict mode requires every
/// property of a nested object too). Dropped unless the parameter's schema accepts `null` itself
/// (then the tool gets it) or the parameter is required (then it is an error).
fn drop_null_optionals(object: &mut Map<String, Value>, properties: &Map<String, Value>, required: Option<&Value>) {
    let required = |key: &str| required.and_then(Value::as_array).is_some_and(|r| r.iter().any(|k| k == key));
    object.retain(|key, value| {
        !(value.is_null() && !required(key) && properties.get(key).is_some_and(|schema| !accepts_null(schema)))
    });
    for (key, value) in object.iter_mut() {
        if let Some(schema) = properties.get(key) {
            drop_nested_null_optionals(value, schema);
        }
    }
}

/// Whether `schema` takes `null`, as far as its `type`, `enum`, `const` or union members say;
/// when they say nothing (any value, a `$ref`), the schema decides, so the `null` is kept.
fn accepts_null(schema: &Value) -> bool {
    let Value::Object(s) = schema else { return schema != &Value::Bool(false) };
    if let Some(ty) = s.get("type") {
        return match ty {
            Value::String(t) => t == "null",
            Value::Array(types) => types.iter().any(|t| t == "null"),
            _ => true,
        };
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return values.contains(&Value::Null);
    }
    if let Some(value) = s.get("const") {
        return value.is_null();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(members)) = s.get(key) {
            return members.iter().any(accepts_null);
        }
    }
    true
}

/// [`drop_null_optionals`] inside objects and arrays, following the schema (so no deeper than it).
fn drop_nested_null_optionals(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                drop_null_optionals(map, properties, schema.get("required"));
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    drop_nested_null_optionals(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Safe coercions of what models often send as strings: `"5"` for an integer, `"true"` for a
/// boolean, `"[1,2]"` for an array. Anything else is left for the schema to reject.
fn coerce(value: &mut Value, schema: &Value) {
    let Some(ty) = schema.get("type").and_then(Value::as_str) else { return };
    match (ty, &*value) {
        ("integer", Value::String(s)) => {
            if let Ok(n) = s.trim().parse::<i64>() {
                *value = Value::from(n);
            }
        }
        ("integer", Value::Number(n)) => {
            // 5.0 is an integer to a person; JSON Schema agrees, serde does not.
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                && n.as_i64().is_none()
                && n.as_u64().is_none()
            {
                *value = Value::from(f as i64);
            }
        }
        ("number", Value::String(s)) => {
            if let Some(n) = s.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                *value = Value::Number(n);
            }
        }
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => *value = Value::Bool(true),
            "false" => *value = Value::Bool(false),
            _ => {}
        },
        ("array", Value::String(s)) if s.trim_start().starts_with('[') => {
            if let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s) {
                *value = parsed;
            }
        }
        ("object", Value::String(s)) if s.trim_start().starts_with('{') => {
            if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(s) {
                *value = parsed;
            }
        }
        _ => {}
    }
    match (ty, value) {
        ("array", Value::Array(items)) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    coerce(item, item_schema);
                }
            }
        }
        ("object", Value::Object(map)) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, item) in map.iter_mut() {
                    if let Some(s) = properties.get(key) {
                        coerce(item, s);
                    }
                }
            }
        }
        _ => {}
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn validator() -> ParamValidator {
        ParamValidator::new(
            "t",
            &json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1},
                    "flag": {"type": "boolean"},
                    "items": {"type": "array", "items": {"type": "integer"}},
                    "old_string": {"type": "string"},
                },
                "required": ["path"],
                "additionalProperties": false,
            }),
        )
        .unwrap()
    }

    fn problems(result: Result<Value, ToolError>) -> Vec<ParamProblem> {
        match result {
            Err(ToolError::InvalidParams { problems, .. }) => problems,
            other => panic!("expected invalid params, got {other:?}"),
        }
    }

    #[test]
    fn aliases_and_coercions() {
        let out = validator()
            .check(
                json!({"file": "a.txt", "count": "5", "flag": "true", "items": "[1, \"2\"]", "search": "x"}),
                &Limits::default(),
            )
            .unwrap();
        assert_eq!(out, json!({"path": "a.txt", "count": 5, "flag": true, "items": [1, 2], "old_string": "x"}));
    }

    #[test]
    fn canonical_name_wins_over_alias() {
        let p = problems(validator().check(json!({"path": "a", "file": "b"}), &Limits::default()));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].pointer, "/file");
        assert!(p[0].message.contains("unknown parameter `file`"), "{}", p[0].message);
    }

    #[test]
    fn every_problem_is_listed_with_pointer() {
        let p = problems(
            validator().check(json!({"count": "zero", "flag": 3, "items": [1, "x"], "colour": 1}), &Limits::default()),
        );
        let pointers: Vec<&str> = p.iter().map(|p| p.pointer.as_str()).collect();
        assert!(pointers.contains(&"/colour"), "{pointers:?}");
        assert!(pointers.contains(&"/count"), "{pointers:?}");
        assert!(pointers.contains(&"/flag"), "{pointers:?}");
        assert!(pointers.contains(&"/items/1"), "{pointers:?}");
        assert!(pointers.contains(&""), "missing `path` is reported at the root: {pointers:?}");
        let count = p.iter().find(|p| p.pointer == "/count").unwrap();
        assert!(count.message.contains("zero"), "says what was given: {}", count.message);
    }

    #[test]
    fn limits_are_enforced_before_the_schema() {
        let limits = Limits { max_params: 20, max_depth: 3, max_array_items: 3, max_string_bytes: 4 };
        let p = problems(validator().check(json!({"path": "toolong", "items": [1, 2, 3, 4]}), &limits));
        assert_eq!(p.len(), 2, "{p:?}");
        let deep = json!({"path": "a", "x": {"a": {"b": {"c": 1}}}});
        let p = problems(ParamValidator::new("t", &json!({"type": "object"})).unwrap().check(deep, &limits));
        assert_eq!(p[0].pointer, "/x/a/b");
    }

    #[test]
    fn null_for_an_optional_parameter_means_absent() {
        let out = validator().check(json!({"path": "a", "flag": null, "count": null}), &Limits::default()).unwrap();
        assert_eq!(out, json!({"path": "a"}));
        let p = problems(validator().check(json!({"path": null}), &Limits::default()));
        assert_eq!(p.len(), 1, "a required parameter cannot be null: {p:?}");
        let nullable = ParamValidator::new(
            "t",
            &json!({"type": "object", "properties": {"note": {"type": ["string", "null"]}, "any": {}}}),
        )
        .unwrap();
        let out = nullable.check(json!({"note": null, "any": null}), &Limits::default()).unwrap();
        assert_eq!(out, json!({"note": null, "any": null}), "a schema that takes null gets it");
    }

    /// A tool as OpenAI strict mode sees it: a map, an any-value parameter (required and
    /// optional), a nested object with an optional field, optional parameters of every type.
    fn strict_validator() -> ParamValidator {
        ParamValidator::new(
            "t",
            &json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "data": {"description": "any value"},
                    "body": {},
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"old": {"type": "string"}, "all": {"type": "boolean"}},
                            "required": ["old"],
                            "additionalProperties": false,
                        },
                    },
                    "opts": {
                        "type": "object",
                        "properties": {"depth": {"type": "integer"}, "name": {"type": "string"}},
                        "required": ["name"],
                        "additionalProperties": false,
                    },
                    "text": {"type": "string"},
                    "count": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "kind": {"const": "k"},
                    "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                },
                "required": ["command", "data"],
                "additionalProperties": false,
            }),
        )
        .unwrap()
    }

    #[test]
    fn a_map_given_as_name_value_pairs_becomes_the_map() {
        let v = strict_validator();
        let out = v
            .check(
                json!({"command": "x", "data": 1, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}),
                &Limits::default(),
            )
            .unwrap();
        assert_eq!(out, json!({"command": "x", "data": 1, "env": {"A": "1", "B": "2"}}));
        let out = v.check(json!({"command": "x", "data": 1, "env": []}), &Limits::default()).unwrap();
        assert_eq!(out["env"], json!({}));
        let out = v.check(json!({"command": "x", "data": 1, "env": {"A": "1"}}), &Limits::default()).unwrap();
        assert_eq!(out["env"], json!({"A": "1"}), "the map itself still works");

        let twice =
            json!({"command": "x", "data": 1, "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]});
        let p = problems(v.check(twice.clone(), &Limits::default()));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].pointer, "/env/1");
        assert!(p[0].message.contains("names `A` twice"), "{}", p[0].message);
        let mut kept = twice.clone();
        assert!(v.check_in_place(&mut kept, &Limits::default()).is_err());
        assert_eq!(kept, twice, "refused parameters stay as they were sent");

        for bad in [
            json!({"name": "A"}),
            json!({"name": 1, "value": "x"}),
            json!({"name": "A", "value": "1", "x": 1}),
            json!("A=1"),
        ] {
            let p = problems(v.check(json!({"command": "x", "data": 1, "env": [bad]}), &Limits::default()));
            assert_eq!(p[0].pointer, "/env/0", "{p:?}");
            assert!(p[0].message.contains("takes {\"name\": \"...\", \"value\": ...} objects"), "{}", p[0].message);
        }
        let p = problems(
            v.check(json!({"command": "x", "data": 1, "env": [{"name": "A", "value": 3}]}), &Limits::default()),
        );
        assert_eq!(p[0].pointer, "/env/A", "the values are checked against the map's schema: {p:?}");
        let limits = Limits { max_array_items: 1, ..Limits::default() };
        let pairs = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
        let p = problems(v.check(json!({"command": "x", "data": 1, "env": pairs}), &limits));
        assert!(p[0].message.contains("array of 2 items"), "a list past the limit is not converted: {p:?}");
    }

    #[test]
    fn name_json_is_decoded_into_name() {
        let v = strict_validator();
        let out = v
            .check(json!({"command": "x", "data_json": "{\"a\": [1, 2]}", "body_json": "\"text\""}), &Limits::default())
            .unwrap();
        assert_eq!(out, json!({"command": "x", "data": {"a": [1, 2]}, "body": "text"}));
        let out = v.check(json!({"command": "x", "data_json": "null", "body_json": null}), &Limits::default()).unwrap();
        assert_eq!(out, json!({"command": "x", "data": null}), "JSON null is a value; a null `body_json` is not given");

        let p = problems(v.check(json!({"command": "x", "data_json": "{a: 1}"}), &Limits::default()));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].pointer, "/data_json");
        assert!(
            p[0].message.starts_with("`data_json` must be JSON text (the value of `data`, JSON-encoded"),
            "{}",
            p[0].message
        );
        let p = problems(v.check(json!({"command": "x", "data_json": {"a": 1}}), &Limits::default()));
        assert!(p[0].message.contains("must be a string of JSON text") && p[0].message.contains("an object"), "{p:?}");
        let p = problems(v.check(json!({"command": "x", "data": 1, "data_json": "2"}), &Limits::default()));
        assert_eq!(p[0].pointer, "/data_json");
        assert!(p[0].message.contains("`data` and `data_json` were both given"), "{}", p[0].message);
        let p = problems(v.check(json!({"command": "x", "body_json": null}), &Limits::default()));
        assert_eq!((p.len(), p[0].pointer.as_str()), (1, ""), "required `data` is still missing: {p:?}");

        let limits = Limits { max_depth: 3, ..Limits::default() };
        let p = problems(v.check(json!({"command": "x", "data_json": "{\"a\": {\"b\": {\"c\": 1}}}"}), &limits));
        assert_eq!(p[0].pointer, "/data/a/b", "the decoded value is held to the limits: {p:?}");

        // A schema that declares `NAME_json` itself keeps it.
        let own = ParamValidator::new(
            "t",
            &json!({"type": "object", "properties": {"data": {}, "data_json": {"type": "string"}}, "additionalProperties": false}),
        )
        .unwrap();
        assert_eq!(own.check(json!({"data_json": "[1]"}), &Limits::default()).unwrap(), json!({"data_json": "[1]"}));
        let p = problems(
            strict_validator().check(json!({"command": "x", "data": 1, "text_json": "\"a\""}), &Limits::default()),
        );
        assert!(p[0].message.contains("unknown parameter `text_json`"), "only any-value parameters: {p:?}");
    }

    /// What a model in strict mode sends: every parameter, `null` for the ones it leaves out, at
    /// every level and for every type.
    #[test]
    fn null_means_absent_for_every_type_and_at_every_level() {
        let sent = json!({
                    "command": "x",
                    "data_json": "1",
                    "body_json": null,
                    "env": null,
                    "edits": [{"old": "a", "all": null}, {"old": "b", "all": true}],
                    "opts": {"name": "n", "depth": null},
                    "text": null,
                    "count": null,
                    "ratio": null,
                    "flag": null,
                    "tags": null,
                    "mode": null,
                    "kind": null,
                    "either": null,
        });
        let spec = crate::ToolSpec::new("t", "", strict_validator().schema.clone());
        let exported = crate::export::export(&spec, crate::export::Provider::OpenAi);
        let names = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<std::collections::BTreeSet<_>>());
        assert_eq!(names(&sent), names(&exported["function"]["parameters"]["properties"]), "what strict mode sends");
        let out = strict_validator().check(sent, &Limits::default()).unwrap();
        assert_eq!(
            out,
            json!({"command": "x", "data": 1, "edits": [{"old": "a"}, {"old": "b", "all": true}], "opts": {"name": "n"}})
        );
        let p = problems(
            strict_validator().check(json!({"command": "x", "data": 1, "opts": {"name": null}}), &Limits::default()),
        );
        assert_eq!(p[0].pointer, "/opts/name", "a required nested field cannot be null: {p:?}");
    }

    #[test]
    fn non_object_params_are_refused() {
        let p = problems(validator().check(json!([1]), &Limits::default()));
        assert!(p[0].message.contains("an array"));
        assert!(validator().check(Value::Null, &Limits::default()).is_err(), "path is still required");
    }

    #[test]
    fn schema_root_must_be_an_object() {
        assert!(ParamValidator::new("t", &json!({"type": "string"})).is_err());
    }
}
