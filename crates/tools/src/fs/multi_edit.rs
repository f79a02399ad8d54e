//! `multi_edit`: several replacements in one file, all or none.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::edit::{Edit, edit_file};
use super::params;
use super::state::FsState;

const NAME: &str = "multi_edit";

/// The `multi_edit` tool.
#[derive(Debug)]
pub struct MultiEditTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl MultiEditTool {
    /// A `multi_edit` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Make several exact-text replacements in one file, in order, all or none: if any edit fails, the \
             file is left unchanged. Each edit works like `edit` on the result of the previous ones. The file \
             must have been read with `read` in this session, and not changed since.",
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the workspace root." },
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "description": "The replacements, applied in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "old_string": { "type": "string", "description": "The exact text to replace." },
                                "new_string": { "type": "string", "description": "The text to put in its place." },
                                "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false)." }
                            },
                            "required": ["old_string", "new_string"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "edits"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::LOCAL_DESTRUCTIVE);
        MultiEditTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for MultiEditTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_write_safety(&self.state, params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, |state, ctx, params| {
            let path = params::string(NAME, params, "path")?;
            edit_file(state, ctx, NAME, path, &parse_edits(params)?)
        })
        .await
    }
}

fn parse_edits(params: &Value) -> Result<Vec<Edit>, ToolError> {
    let Some(list) = params.get("edits").and_then(Value::as_array) else {
        return Err(ToolError::invalid(NAME, "/edits", "`edits` is required: a list of {old_string, new_string}"));
    };
    if list.is_empty() {
        return Err(ToolError::invalid(NAME, "/edits", "`edits` is empty; give at least one edit"));
    }
    let mut edits = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let get = |name: &str| {
            e.get(name).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                ToolError::invalid(
                    NAME,
                    format!("/edits/{i}/{name}"),
                    format!("`{name}` is required and must be a string"),
                )
            })
        };
        edits.push(Edit {
            old: get("old_string")?,
            new: get("new_string")?,
            replace_all: e.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    Ok(edits)
}
