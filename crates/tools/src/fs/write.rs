//! `write`: create or replace a file, atomically.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::params;
use super::state::FsState;
use super::writer;

const NAME: &str = "write";

/// The `write` tool.
#[derive(Debug)]
pub struct WriteTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl WriteTool {
    /// A `write` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let max = state.config.max_write_bytes;
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Create a file, or replace an existing file's whole content. Creates missing parent folders. \
                 The write is atomic: the old file survives any failure. At most {max} bytes. To change part of \
                 a file use `edit`. An existing file must have been read with `read` in this session first."
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the workspace root." },
                    "content": { "type": "string", "description": "The file's complete new content." }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::LOCAL_DESTRUCTIVE);
        WriteTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_write_safety(&self.state, params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, write).await
    }
}

fn write(state: &Arc<FsState>, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
    let input = params::string(NAME, params, "path")?;
    let content = params::string(NAME, params, "content")?;
    let max = state.config.max_write_bytes;
    if content.len() > max {
        return Err(ToolError::invalid(
            NAME,
            "/content",
            format!("content is {} bytes, over the {max}-byte limit; split it into smaller files", content.len()),
        ));
    }
    let root = state.root(ctx)?;
    let rel = state.resolve(NAME, root.path(), input)?;
    if let Some(r) = state.redirected(ctx, &rel) {
        if state.rules.denied_write(rel.as_str()) {
            return Err(super::state::denied_write(NAME, &rel));
        }
        let old = r.read(ctx, rel.as_str()).ok();
        writer::refuse_redaction_markers(NAME, rel.as_str(), old.as_deref().map(str::as_bytes), content.as_bytes())?;
        let said = r.write(ctx, rel.as_str(), content)?;
        return Ok(ToolOutput::text(said).with_meta(json!({ "path": rel.as_str(), "bytes": content.len() })));
    }
    let written = state.exclusive(ctx, || {
        let checked = writer::check(state, ctx, NAME, input, true)?;
        writer::commit(state, ctx, NAME, checked, content.as_bytes())
    })?;
    let lines = content.lines().count();
    let verb = if written.existed { "Overwrote" } else { "Created" };
    let mut text = format!("{verb} `{}` ({} bytes, {lines} lines).", written.real, written.bytes);
    if let Some(w) = written.warning {
        text.push('\n');
        text.push_str(&w);
    }
    Ok(ToolOutput::text(text).with_meta(json!({
        "path": written.real.as_str(),
        "created": !written.existed,
        "bytes": written.bytes,
    })))
}
