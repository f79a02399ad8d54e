//! The mapping on a small catalog of canonical tools (the gate's tests run it on the real ones).

use serde_json::{Value, json};
use toolgate_core::ToolError;

use super::*;

#[derive(Debug)]
struct Schema(ToolSpec);

#[toolgate_core::async_trait]
impl toolgate_core::Tool for Schema {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn execute(&self, _: &toolgate_core::CallContext, _: Value) -> Result<toolgate_core::ToolOutput, ToolError> {
        Ok(toolgate_core::ToolOutput::text(""))
    }
}

/// A registry of a few canonical tools with just their parameters (the gate's tests run the
/// dialects on the real ones).
fn catalog() -> Registry {
    let registry = Registry::new();
    let tool = |name: &str, params: &[&str], required: &[&str], builtin: bool| {
        let props: serde_json::Map<String, Value> = params.iter().map(|p| ((*p).to_owned(), json!({}))).collect();
        let schema = json!({"type": "object", "properties": props, "required": required});
        let tool = std::sync::Arc::new(Schema(ToolSpec::new(name, "test", schema)));
        if builtin { registry.register_builtin(tool) } else { registry.register_dynamic(tool) }.unwrap();
    };
    tool("read", &["path", "offset", "limit", "max_bytes"], &["path"], true);
    tool("edit", &["path", "old_string", "new_string", "replace_all"], &["path", "old_string", "new_string"], true);
    tool("apply_patch", &["patch"], &["patch"], true);
    tool("process", &["action", "id", "signal", "input", "wait", "limit", "offset", "close_stdin"], &["action"], true);
    tool("exec", &["command", "timeout", "workdir", "background", "env"], &["command"], true);
    tool("grep", &["pattern", "path", "glob", "head_limit", "output_mode", "case_insensitive"], &["pattern"], true);
    tool("glob", &["pattern", "path", "limit"], &["pattern"], true);
    tool("subagents", &["action", "task", "id", "message", "agent", "label"], &["action"], true);
    tool("sessions_spawn", &["prompt", "agent", "label"], &["prompt"], true);
    tool("mcp__gh__issue", &["title"], &["title"], false);
    registry
}

/// The call as toolgate runs it: (tool, params, the name the caller used).
fn call(dialect_name: &str, name: &str, params: Value) -> Result<Translated, ToolError> {
    let catalog = catalog();
    let translated = dialect(dialect_name).unwrap().translate(name, &params, &catalog)?;
    Ok(translated.unwrap_or_else(|| {
        let tool = Found::lookup(&catalog, name).map_or_else(|| name.to_owned(), |f| f.name().to_owned());
        let called_as = (tool != name).then(|| name.to_owned());
        Translated { tool, params, called_as, renamed: Vec::new(), via: None, dialect: None }
    }))
}

fn problems(e: ToolError) -> String {
    e.to_string()
}

#[test]
fn every_dialect_file_loads_with_unique_names() {
    assert_eq!(all().iter().map(Dialect::name).collect::<Vec<_>>(), NAMES);
    for d in all() {
        let mut names: Vec<&str> = d.tools().iter().map(|t| t.name.as_str()).collect();
        names.extend(d.missing.iter().map(|(n, _)| n.as_str()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "{}: a tool name is listed twice", d.name());
    }
    assert!(
        dialect("klingon").unwrap_err().to_string().contains("toolgate, goclaw, linggen, gomini, openclaw, ironclaw")
    );
}

#[test]
fn linggen_line_range_in_both_forms() {
    for range in [json!([3, 5]), json!("3-5")] {
        let t = call("linggen", "Read", json!({"path": "a.txt", "line_range": range})).unwrap();
        assert_eq!(t.tool, "read");
        assert_eq!(t.params, json!({"path": "a.txt", "offset": 3, "limit": 3}));
        assert_eq!(t.called_as.as_deref(), Some("Read"));
    }
    let e = call("linggen", "Read", json!({"path": "a", "line_range": [5, 3]})).unwrap_err();
    assert!(problems(e).contains("before the start"));
}

#[test]
fn a_named_dialect_refuses_other_spellings_and_names_its_own() {
    let e = call("linggen", "read_file", json!({"path": "a"})).unwrap_err();
    assert!(matches!(&e, ToolError::UnknownTool { suggestion: Some(s), .. } if s == "Read"), "{e}");
    let e = call("linggen", "read", json!({"path": "a"})).unwrap_err();
    assert!(matches!(&e, ToolError::UnknownTool { suggestion: Some(s), .. } if s == "Read"), "{e}");
    let e = call("linggen", "Read", json!({"path": "a", "offset": 3})).unwrap_err();
    assert!(problems(e).contains("write it as `line_range`"));
    let e = call("gomini", "edit", json!({"path": "a", "old_string": "x", "new_text": "y"})).unwrap_err();
    assert!(problems(e).contains("write it as `old_text`"));
    let e = call("gomini", "read", json!({"path": "a", "line_range": [1, 2]})).unwrap_err();
    assert!(problems(e).contains("use `limit` and `offset`"), "Linggen's line_range in gomini");
}

#[test]
fn the_same_parameter_twice_is_refused() {
    let e = call("linggen", "Read", json!({"path": "a", "file": "b"})).unwrap_err();
    assert!(problems(e).contains("the same parameter"), "documented aliases still refuse duplicates");
    let e = call("toolgate", "Read", json!({"path": "a", "filepath": "b"})).unwrap_err();
    assert!(problems(e).contains("the same parameter"));
}

#[test]
fn dynamic_tools_keep_their_names_in_every_dialect() {
    for d in NAMES {
        let t = call(d, "mcp__gh__issue", json!({"title": "x"})).unwrap();
        assert_eq!(t.tool, "mcp__gh__issue");
        assert_eq!(t.params, json!({"title": "x"}));
    }
}

#[test]
fn gomini_offsets_count_from_zero_and_process_speaks_its_words() {
    let t = call("gomini", "read", json!({"path": "a", "offset": 0, "limit": 2})).unwrap();
    assert_eq!(t.params, json!({"path": "a", "offset": 1, "limit": 2}));
    assert!(call("gomini", "read", json!({"path": "a", "offset": -1})).is_err());
    let t = call("gomini", "process", json!({"action": "signal", "process_id": "p1", "signal": "SIGTERM"})).unwrap();
    assert_eq!(t.params, json!({"action": "signal", "id": "p1", "signal": "TERM"}));
    let t = call("gomini", "process", json!({"action": "status", "process_id": "p1"})).unwrap();
    assert_eq!(t.params["action"], "poll");
}

#[test]
fn the_default_dialect_keeps_its_meaning_and_understands_the_seeds() {
    // toolgate's offset is 1-based: gomini's 0-based reading is its dialect's alone.
    let t = call("toolgate", "read", json!({"path": "a", "offset": 4})).unwrap();
    assert_eq!(t.params["offset"], 4);
    // Linggen's line_range, under Linggen's name or toolgate's.
    for name in ["Read", "read", "read_file"] {
        let t = call("toolgate", name, json!({"path": "a", "line_range": "2-3"})).unwrap();
        assert_eq!((t.tool.as_str(), &t.params), ("read", &json!({"path": "a", "offset": 2, "limit": 2})));
    }
    // apply_patch told apart by its parameters.
    let t = call("toolgate", "apply_patch", json!({"path": "a", "old_string": "x", "new_string": "y"})).unwrap();
    assert_eq!(t.tool, "edit");
    let t = call("toolgate", "apply_patch", json!({"patch": "*** Begin Patch"})).unwrap();
    assert_eq!(t.tool, "apply_patch");
    // SIGTERM as well as TERM, process_id as well as id.
    let t = call("toolgate", "process", json!({"action": "signal", "process_id": "p", "signal": "SIGTERM"})).unwrap();
    assert_eq!(t.params, json!({"action": "signal", "id": "p", "signal": "TERM"}));
    // subagents with no action lists.
    let t = call("toolgate", "subagents", json!({})).unwrap();
    assert_eq!(t.params, json!({"action": "list"}));
    let t = call("toolgate", "subagents", json!({"task": "look"})).unwrap();
    assert_eq!(t.params, json!({"action": "run", "task": "look"}), "GoClaw's default action");
    // An unknown name is left for the registry to refuse with its suggestion.
    let t = call("toolgate", "no_such_tool", json!({"a": 1})).unwrap();
    assert_eq!(t.tool, "no_such_tool");
}

#[test]
fn errors_name_parameters_as_the_caller_wrote_them() {
    let t = call("linggen", "Read", json!({"path": "a", "line_range": [1, 9]})).unwrap();
    let e = t.localize(ToolError::invalid("read", "/limit", "too many"));
    assert!(
        matches!(&e, ToolError::InvalidParams { tool, problems } if tool == "Read" && problems[0].pointer == "/line_range"),
        "{e}"
    );
}

#[test]
fn presented_tools_are_the_dialects_and_the_dynamic_ones() {
    let spec = |name: &str, builtin| (ToolSpec::new(name, "d", json!({"type": "object"})).group("fs"), builtin);
    let visible = [spec("read", true), spec("edit", true), spec("mcp__gh__issue", false)];
    let names: Vec<String> = dialect("linggen").unwrap().present(&visible).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["Edit", "Read", "mcp__gh__issue"]);
    let names: Vec<String> = dialect("toolgate").unwrap().present(&visible).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read", "edit", "mcp__gh__issue"]);
}

#[test]
fn a_hint_to_call_again_is_said_in_the_dialect() {
    let t = call("gomini", "read", json!({"path": "a", "limit": 2})).unwrap();
    let text = "   1\tx\n[Showing lines 1-2 of 9. To read on, call `read` with offset=3.]";
    assert_eq!(
        t.localize_text(text).unwrap(),
        "   1\tx\n[Showing lines 1-2 of 9. To read on, call `read` with offset=2.]"
    );
    let t = call("goclaw", "read_file", json!({"path": "a"})).unwrap();
    assert!(t.localize_text(text).unwrap().contains("call `read_file` with offset=2."));
    // Linggen's Read has no offset: the rest of the file as a line_range, or a page as long
    // as the call asked for.
    let t = call("linggen", "Read", json!({"path": "a"})).unwrap();
    assert!(t.localize_text(text).unwrap().contains("call `Read` with line_range=[3, 9]."));
    let t = call("linggen", "Read", json!({"path": "a", "line_range": [1, 2]})).unwrap();
    assert!(t.localize_text(text).unwrap().contains("call `Read` with line_range=[3, 4]."));
    // Content is never rewritten: only a bracketed notice on the last line.
    let content = "   1\tcall `read` with offset=3 and `pattern`\n";
    assert_eq!(t.localize_text(content), None);
    let output = "[a line of output: call `read` with offset=3]\nlast line\n";
    assert_eq!(t.localize_text(output), None);
    let huge = "[Showing lines 1-2 of 3. To read on, call `read` with offset=18446744073709551615.]";
    assert!(t.localize_text(huge).is_some(), "no overflow");
}

#[test]
fn errors_from_a_running_tool_use_the_callers_words() {
    let t = call("gomini", "edit", json!({"path": "a", "old_text": "x", "new_text": "y"})).unwrap();
    let e = t.localize(ToolError::invalid("edit", "/old_string", "`old_string` occurs 2 times; give more context"));
    let text = e.to_string();
    assert!(text.contains("/old_text") && text.contains("`old_text` occurs") && !text.contains("old_string"), "{text}");
}

#[test]
fn the_strict_export_form_of_an_any_value_parameter_passes_through() {
    let t = call("ironclaw", "json", json!({"operation": "parse", "data_json": "{\"a\": 1}"})).unwrap();
    assert_eq!(t.params["data_json"], "{\"a\": 1}");
    assert!(call("ironclaw", "json", json!({"operation": "parse", "nope_json": "1"})).is_err());
}

#[test]
fn a_hint_to_call_another_tool_is_said_in_the_dialect() {
    let notice = "started background process p1\n[Read new output with the `process` tool: {\"action\": \"poll\", \"id\": \"p1\"}; send input with {\"action\": \"write\", \"id\": \"p1\", \"input\": \"...\"}.]";
    let t = call("gomini", "exec", json!({"command": "sleep 9", "background": true})).unwrap();
    let text = t.localize_text(notice).unwrap();
    assert!(
        text.contains(r#"{"action":"status","process_id":"p1"}"#)
            || text.contains(r#"{"action":"poll","process_id":"p1"}"#),
        "{text}"
    );
    assert!(text.contains(r#"{"action":"input","input":"...","process_id":"p1"}"#), "{text}");
    // A backquoted name that is also a tool's (`glob`) is a parameter unless called a tool.
    let t = call("linggen", "Grep", json!({"query": "x", "max_results": 1})).unwrap();
    let cut = "[Results cut. Narrow the search with `path`, `glob` or `type`, or raise `head_limit`.]";
    assert_eq!(
        t.localize_text(cut).unwrap(),
        "[Results cut. Narrow the search with `path`, `globs` or `type`, or raise `max_results`.]"
    );
    // The default dialect speaks toolgate's names: nothing changes.
    let t = call("toolgate", "exec", json!({"command": "sleep 9", "background": true})).unwrap();
    assert_eq!(t.localize_text(notice), None);
}

#[test]
fn null_is_not_given_as_openai_strict_mode_sends_it() {
    let t = call("openclaw", "read", json!({"path": "a", "file_path": null, "offset": null, "limit": null})).unwrap();
    assert_eq!(t.params, json!({"path": "a"}));
    let t = call("gomini", "read", json!({"path": "a", "offset": null, "limit": null})).unwrap();
    assert_eq!(t.params, json!({"path": "a"}));
    let t = call("goclaw", "subagents", json!({"action": null, "task": "x"})).unwrap();
    assert_eq!(t.params, json!({"action": "run", "task": "x"}), "a fixed value fills a null");
}

#[test]
fn bridged_tools_pass_named_dialects_while_their_server_connects() {
    for d in ["linggen", "gomini"] {
        assert!(dialect(d).unwrap().translate("mcp__later__tool", &json!({}), &catalog()).unwrap().is_none());
        assert!(call(d, "not_a_tool", json!({})).is_err());
    }
}

#[test]
fn alternatives_are_said_with_or_and_parts_with_and() {
    let e = call("openclaw", "read", json!({"filepath": "a"})).unwrap_err().to_string();
    assert!(e.contains("write it as `file_path` or `path`"), "{e}");
    let e = call("gomini", "read", json!({"path": "a", "line_range": [1, 2]})).unwrap_err().to_string();
    assert!(e.contains("use `limit` and `offset`"), "{e}");
}

#[test]
fn the_default_dialect_keeps_toolgates_own_sessions_spawn() {
    // GoClaw's and OpenClaw's sessions_spawn start a background sub-agent with every tool;
    // toolgate's is the read-only research agent, and a `task` does not turn it into the other.
    let t = call("toolgate", "sessions_spawn", json!({"task": "x"})).unwrap();
    assert_eq!(t.tool, "sessions_spawn");
    // In GoClaw's own dialect it is GoClaw's.
    assert_eq!(call("goclaw", "sessions_spawn", json!({"task": "x"})).unwrap().tool, "subagents");
}

#[test]
fn a_problem_says_what_a_converted_value_became() {
    let t = call("linggen", "Bash", json!({"cmd": "x", "timeout_ms": 700000})).unwrap();
    let e = t.localize(ToolError::invalid("exec", "/timeout", "700 is greater than the maximum of 600")).to_string();
    assert!(
        e.contains("/timeout_ms") && e.contains("your `timeout_ms` is checked as `timeout` = 700, in seconds"),
        "{e}"
    );
    let t = call("gomini", "read", json!({"path": "a", "offset": 9})).unwrap();
    let e = t.localize(ToolError::invalid("read", "/offset", "offset 10 is past the end")).to_string();
    assert!(e.contains("`offset` = 10, toolgate counts lines from 1"), "{e}");
    let e = t.localize(ToolError::UnknownTool { name: "read".into(), suggestion: Some("ls".into()) });
    assert!(matches!(&e, ToolError::UnknownTool { suggestion: None, .. }), "gomini's read keeps its name: {e}");
}
