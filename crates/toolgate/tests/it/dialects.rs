//! Dialects through the gate: every dialect file against the real tools, calls in a dialect
//! through the whole pipeline (policy, audit), per-agent dialects and reloads.

use serde_json::{Value, json};
use toolgate::config::Config;
use toolgate::core::{CallContext, ParamValidator, Tool, ToolError, ToolOutput, ToolSpec, async_trait};
use toolgate::dialect;
use toolgate::store::Store;
use toolgate::{Gate, GateError};

/// A config with agents (so the agent tools are registered) and no instruction-file approvals.
fn config() -> Config {
    let mut config = Config::default();
    config.fs.approve_instruction_files = false;
    let agents: toml::Table = toml::from_str(
        r#"
        [main]
        provider = "none"
        [helper]
        provider = "none"
        dialect = "gomini"
        "#,
    )
    .unwrap();
    for (name, value) in agents {
        config.agents.insert(name, value.try_into().unwrap());
    }
    config
}

fn gate(dir: &tempfile::TempDir, config: Config) -> Gate {
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    Gate::builder(dir.path()).config(config).build().unwrap()
}

fn names(specs: &[ToolSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn every_dialect_maps_onto_real_tools_and_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, config());
    for d in dialect::all() {
        for tool in d.tools() {
            let at = format!("{}: `{}`", d.name(), tool.name);
            let found =
                gate.registry().resolve(&tool.canonical).unwrap_or_else(|| panic!("{at}: no `{}`", tool.canonical));
            let spec = found.tool.spec();
            assert!(found.builtin && spec.name == tool.canonical, "{at}: `{}` is not a built-in", tool.canonical);
            let props = spec.input_schema["properties"].as_object().cloned().unwrap_or_default();
            for (param, targets, _) in tool.param_table() {
                for target in targets {
                    assert!(
                        props.contains_key(&target),
                        "{at}: `{param}` maps to `{target}`, which `{}` lacks",
                        spec.name
                    );
                }
            }
            for key in tool.fixed().keys() {
                assert!(props.contains_key(key), "{at}: fixes `{key}`, which `{}` lacks", spec.name);
            }
            ParamValidator::new(&tool.name, &tool.schema).unwrap_or_else(|e| panic!("{at}: {e}"));
        }
    }
}

#[derive(Debug)]
struct Named(ToolSpec);

#[async_trait]
impl Tool for Named {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn execute(&self, _: &CallContext, _: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ran"))
    }
}

#[test]
fn no_other_tool_can_take_a_dialect_name() {
    for name in ["Read", "read_file", "list_files", "search", "WebSearch", "shell", "spawn", "browser", "cron"] {
        let dir = tempfile::tempdir().unwrap();
        let tool = Named(ToolSpec::new(name, "imposter", json!({"type": "object"})));
        let built = Gate::builder(dir.path()).config(config()).tool(std::sync::Arc::new(tool)).build();
        assert!(matches!(built, Err(GateError::Registry(_))), "`{name}` must stay a built-in's");
    }
}

#[tokio::test]
async fn a_dialect_call_runs_the_canonical_tool_and_the_audit_keeps_both_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config();
    config.gate.dialect = "linggen".into();
    let gate = gate(&dir, config);
    let ctx = gate.context();
    let listed = gate.visible_tools(&ctx);
    assert!(names(&listed).contains(&"Read") && !names(&listed).contains(&"read"), "{:?}", names(&listed));
    let out = gate.call(&ctx, "Read", json!({"path": "a.txt", "line_range": "2-3"})).await.unwrap();
    let text = out.text_content();
    assert!(
        text.contains("two") && text.contains("three") && !text.contains("one") && !text.contains("four"),
        "{text}"
    );
    let e = gate.call(&ctx, "read", json!({"path": "a.txt"})).await.unwrap_err();
    assert!(e.to_string().contains("did you mean `Read`"), "{e}");
    let e = gate.call(&ctx, "Read", json!({"path": "a.txt", "line_range": [3, 2]})).await.unwrap_err();
    assert!(matches!(&e, ToolError::InvalidParams { tool, .. } if tool == "Read"), "{e}");
    // A canonical error is said in the caller's words: `max_bytes` too large is `Read`'s.
    let e = gate.call(&ctx, "Read", json!({"path": "a.txt", "max_bytes": 0})).await.unwrap_err();
    assert!(
        matches!(&e, ToolError::InvalidParams { tool, problems } if tool == "Read" && problems[0].pointer == "/max_bytes"),
        "{e}"
    );
    gate.flush_audit();
    let rows = Store::open(&dir.path().join(".toolgate/state.db")).unwrap().audit_tail(10).unwrap();
    let ok = rows.iter().find(|r| r.outcome == "ok").unwrap();
    assert_eq!((ok.tool.as_str(), ok.called_as.as_deref()), ("read", Some("Read")));
    assert!(ok.params.contains("\"offset\":2") && ok.decision.contains("dialect linggen"), "{ok:?}");
}

#[tokio::test]
async fn a_policy_rule_on_the_canonical_tool_governs_every_dialect_name() {
    for (dialect_name, name) in
        [("goclaw", "read_file"), ("linggen", "Read"), ("ironclaw", "read_file"), ("toolgate", "Read")]
    {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config();
        config.gate.dialect = dialect_name.into();
        config.tools.policy.deny = vec!["read".into()];
        let gate = gate(&dir, config);
        let ctx = gate.context();
        assert!(!names(&gate.visible_tools(&ctx)).contains(&name), "{dialect_name}: `{name}` is listed");
        let e = gate.call(&ctx, name, json!({"path": "a.txt"})).await.unwrap_err();
        assert!(matches!(e, ToolError::Denied { .. } | ToolError::UnknownTool { .. }), "{dialect_name}: {e}");
    }
}

#[tokio::test]
async fn an_agent_speaks_its_own_dialect() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, config());
    let mut helper = gate.context();
    helper.identity.agent = "helper".into();
    // gomini's read counts from 0; the gate's own callers keep toolgate's 1-based offset.
    let out = gate.call(&helper, "read", json!({"path": "a.txt", "offset": 1, "limit": 1})).await.unwrap();
    assert!(out.text_content().contains("two") && !out.text_content().contains("one"), "{}", out.text_content());
    let out = gate.call(&gate.context(), "read", json!({"path": "a.txt", "offset": 1, "limit": 1})).await.unwrap();
    assert!(out.text_content().contains("one") && !out.text_content().contains("two"), "{}", out.text_content());
    assert!(names(&gate.visible_tools(&helper)).contains(&"sessions_status"));
    assert!(!names(&gate.visible_tools(&gate.context())).contains(&"sessions_status"));
}

#[test]
fn a_reload_changes_the_dialect_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir, config());
    let ctx = gate.context();
    let mut changes = gate.registry().changes();
    changes.mark_unchanged();
    let mut next = config();
    next.gate.dialect = "ironclaw".into();
    gate.reload(&next).unwrap();
    assert!(changes.has_changed().unwrap(), "MCP clients are told to list the tools again");
    assert!(names(&gate.visible_tools(&ctx)).contains(&"read_file"));
    next.gate.dialect = "klingon".into();
    let e = gate.reload(&next).unwrap_err();
    assert!(e.to_string().contains("toolgate, goclaw, linggen, gomini, openclaw, ironclaw"), "{e}");
    assert!(names(&gate.visible_tools(&ctx)).contains(&"read_file"), "a failed reload keeps the dialect");
    let mut bad = config();
    bad.gate.dialect = "klingon".into();
    assert!(matches!(Gate::builder(dir.path()).config(bad).build(), Err(GateError::Dialect(_))));
}
