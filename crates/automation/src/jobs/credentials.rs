//! Credentials for a `sandbox` job's agent: the gate as that agent sees it
//! ([`CredentialCaller`]). The model writes an `exec` call without any secret; this wrapper adds
//! the job's credentials to the call's `env` after the model wrote it and before the gate sees
//! it, so a value is never in the model's transcript, a prompt or the job's events, and the gate
//! treats it as any `env` value (hidden in audit rows and approval requests). Whatever comes
//! back to the model (every tool's output and errors, since `process` reads a background
//! command's output later and a file can hold what a command wrote) has each value replaced by
//! `[REDACTED:VAR]`.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_agent::ToolCaller;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec};
use toolgate_store::{SessionCalls, SessionQuery};

/// The tool whose calls get the credentials: it runs commands, in the foreground or the
/// background (the `process` tool only reads and signals what `exec` started).
const EXEC: &str = "exec";

/// The gate, adding a job's credentials to its agent's `exec` calls and taking their values out
/// of everything the agent reads.
pub(crate) struct CredentialCaller {
    inner: Arc<dyn ToolCaller>,
    /// Each variable and its value.
    env: Arc<Vec<(String, String)>>,
}

impl CredentialCaller {
    pub(crate) fn new(inner: Arc<dyn ToolCaller>, env: Arc<Vec<(String, String)>>) -> Self {
        CredentialCaller { inner, env }
    }

    /// `params` of an `exec` call with the credentials in `env` (the map form; the list form
    /// `[{"name", "value"}]` the gate also takes is turned into it). A credential replaces a
    /// variable of the same name the model set. Any other shape of `env` is left for the gate
    /// to refuse, without the values.
    fn with_env(&self, mut params: Value) -> Value {
        let Some(obj) = params.as_object_mut() else { return params };
        let mut env = match obj.remove("env") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(Value::Array(list)) => {
                let mut m = Map::new();
                for item in &list {
                    match (item.get("name").and_then(Value::as_str), item.get("value")) {
                        (Some(name), Some(value)) if item.as_object().is_some_and(|o| o.len() == 2) => {
                            m.insert(name.to_owned(), value.clone());
                        }
                        _ => {
                            obj.insert("env".to_owned(), Value::Array(list));
                            return params;
                        }
                    }
                }
                m
            }
            Some(other) => {
                obj.insert("env".to_owned(), other);
                return params;
            }
        };
        for (name, value) in self.env.iter() {
            env.insert(name.clone(), Value::String(value.clone()));
        }
        obj.insert("env".to_owned(), Value::Object(env));
        params
    }

    /// `text` with every value replaced by `[REDACTED:VAR]`.
    pub(crate) fn redact(&self, text: &str) -> String {
        redact(&self.env, text)
    }

    fn redact_value(&self, v: &mut Value) {
        match v {
            Value::String(s) if self.env.iter().any(|(_, value)| !value.is_empty() && s.contains(value.as_str())) => {
                *s = self.redact(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.redact_value(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.redact_value(i)),
            _ => {}
        }
    }

    fn redact_output(&self, out: ToolOutput) -> ToolOutput {
        let Ok(mut v) = serde_json::to_value(&out) else { return out };
        let before = v.to_string();
        if !self.env.iter().any(|(_, value)| !value.is_empty() && before.contains(value.as_str())) {
            return out;
        }
        self.redact_value(&mut v);
        // Every string of the result was redacted; one that no longer parses is replaced by its
        // redacted text alone, never passed on as it was.
        serde_json::from_value(v).unwrap_or_else(|_| ToolOutput::text(self.redact(&out.text_content())))
    }

    fn redact_error(&self, e: ToolError) -> ToolError {
        let text = e.to_string();
        if self.env.iter().any(|(_, value)| !value.is_empty() && text.contains(value.as_str())) {
            ToolError::failed(self.redact(&text))
        } else {
            e
        }
    }
}

/// `text` with every value of `env` replaced by `[REDACTED:VAR]` (longest values first, so a
/// value inside another is not left half shown).
pub(crate) fn redact(env: &[(String, String)], text: &str) -> String {
    let mut pairs: Vec<&(String, String)> = env.iter().filter(|(_, v)| !v.is_empty()).collect();
    pairs.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let mut text = text.to_owned();
    for (name, value) in pairs {
        if text.contains(value.as_str()) {
            text = text.replace(value.as_str(), &format!("[REDACTED:{name}]"));
        }
    }
    text
}

#[async_trait::async_trait]
impl ToolCaller for CredentialCaller {
    fn context(&self) -> CallContext {
        self.inner.context()
    }

    fn tools(&self, ctx: &CallContext) -> Vec<ToolSpec> {
        self.inner.tools(ctx)
    }

    async fn call(&self, ctx: &CallContext, name: &str, params: Value) -> Result<ToolOutput, ToolError> {
        let params = if name == EXEC { self.with_env(params) } else { params };
        match self.inner.call(ctx, name, params).await {
            Ok(out) => Ok(self.redact_output(out)),
            Err(e) => Err(self.redact_error(e)),
        }
    }

    fn orders_turns(&self) -> bool {
        self.inner.orders_turns()
    }

    fn refused(&self, ctx: &CallContext, name: &str, arguments: &str, error: &ToolError) {
        self.inner.refused(ctx, name, arguments, error);
    }

    fn scrub(&self, ctx: &CallContext, text: &str) -> String {
        self.inner.scrub(ctx, &self.redact(text))
    }

    fn session_calls(&self, query: &SessionQuery<'_>) -> Vec<SessionCalls> {
        self.inner.session_calls(query)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[derive(Debug)]
    struct Echo;

    #[async_trait::async_trait]
    impl ToolCaller for Echo {
        fn context(&self) -> CallContext {
            CallContext::new(std::env::temp_dir())
        }
        fn tools(&self, _: &CallContext) -> Vec<ToolSpec> {
            Vec::new()
        }
        async fn call(&self, _: &CallContext, _: &str, params: Value) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(params.to_string()).with_meta(json!({"seen": params})))
        }
    }

    fn caller() -> CredentialCaller {
        let env = vec![("CI_TOKEN".to_owned(), "tok-123".to_owned()), ("LONG".to_owned(), "tok-1234567".to_owned())];
        CredentialCaller::new(Arc::new(Echo), Arc::new(env))
    }

    #[test]
    fn credentials_join_the_models_env_and_win_over_its_names() {
        let c = caller();
        let p = c.with_env(json!({"command": "x", "env": {"A": "1", "CI_TOKEN": "forged"}}));
        assert_eq!(p["env"], json!({"A": "1", "CI_TOKEN": "tok-123", "LONG": "tok-1234567"}));
        let p = c.with_env(json!({"command": "x", "env": [{"name": "A", "value": "1"}]}));
        assert_eq!(p["env"]["A"], "1");
        assert_eq!(p["env"]["CI_TOKEN"], "tok-123");
        let p = c.with_env(json!({"command": "x"}));
        assert_eq!(p["env"]["LONG"], "tok-1234567");
        // Shapes the gate refuses stay as they were: the values are not added to them.
        for bad in [json!("A=1"), json!([{"name": "A"}]), json!(3)] {
            let p = c.with_env(json!({"command": "x", "env": bad.clone()}));
            assert_eq!(p["env"], bad);
        }
    }

    #[tokio::test]
    async fn what_comes_back_has_no_value_and_other_tools_get_no_env() {
        let c = caller();
        let ctx = c.context();
        let out = c.call(&ctx, "exec", json!({"command": "echo"})).await.unwrap();
        let text = serde_json::to_string(&out).unwrap();
        assert!(!text.contains("tok-123"), "{text}");
        assert!(text.contains("[REDACTED:LONG]") && text.contains("[REDACTED:CI_TOKEN]"), "{text}");
        let out = c.call(&ctx, "read", json!({"path": "a"})).await.unwrap();
        assert!(!out.text_content().contains("env"), "{}", out.text_content());
        // The longer value is replaced whole, not as the shorter one plus a tail.
        assert_eq!(c.redact("x tok-1234567 y tok-123"), "x [REDACTED:LONG] y [REDACTED:CI_TOKEN]");
        assert_eq!(c.scrub(&ctx, "said tok-123"), "said [REDACTED:CI_TOKEN]");
    }
}
