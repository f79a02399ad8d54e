//! `apply_patch`: Codex's patch format, applied all-or-nothing.
//!
//! - [`parser`]: the format, parsed leniently like Codex.
//! - [`matcher`]: the four matching passes, with every position collected for the ambiguity check.
//! - [`update`]: an update's chunks applied to a file's text in memory.
//! - [`stage`]: every file's final content computed and checked first, then committed; a failure
//!   while committing rolls back what was already written.

mod matcher;
mod parser;
mod stage;
mod update;

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::params;
use super::state::FsState;

const NAME: &str = "apply_patch";

/// The `apply_patch` tool.
#[derive(Debug)]
pub struct ApplyPatchTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl ApplyPatchTool {
    /// An `apply_patch` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Apply a patch in the Codex format to add, delete, update and move files, all or nothing.\n\
             *** Begin Patch\n\
             *** Add File: path/new.txt\n\
             +each line of the new file, prefixed with +\n\
             *** Delete File: path/old.txt\n\
             *** Update File: path/file.py\n\
             *** Move to: path/renamed.py   (optional)\n\
             @@ def enclosing_function():   (optional line that locates the chunk)\n \
             unchanged context line (prefixed with a space)\n\
             -removed line\n\
             +added line\n\
             *** End of File   (optional: the chunk ends at the end of the file)\n\
             *** End Patch\n\
             Give about 3 lines of unchanged context around each change. Paths are relative to the workspace. \
             A chunk whose lines match more than one place is refused: add context to make it unique. \
             Line endings (CRLF) and a byte-order mark are preserved.",
            json!({
                "type": "object",
                "properties": {
                    "patch": { "type": "string", "description": "The patch, from `*** Begin Patch` to `*** End Patch`." }
                },
                "required": ["patch"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::LOCAL_DESTRUCTIVE);
        ApplyPatchTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for ApplyPatchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let paths = params::opt_string(params, "patch")
            .and_then(|p| parser::parse(p).ok())
            .map(|patch| {
                let mut out: Vec<String> = Vec::new();
                for hunk in &patch.hunks {
                    for p in hunk.paths() {
                        let p = params::touch_path(p);
                        if !out.contains(&p) {
                            out.push(p);
                        }
                    }
                }
                out
            })
            .unwrap_or_default();
        params::write_safety(&self.state, paths)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, |state, ctx, params| {
            let text = params::string(NAME, params, "patch")?;
            let patch = parser::parse(text).map_err(|e| ToolError::invalid(NAME, "/patch", e.to_string()))?;
            if patch.hunks.is_empty() {
                return Err(ToolError::invalid(
                    NAME,
                    "/patch",
                    "the patch contains no file operations; nothing was changed",
                ));
            }
            stage::apply(state, ctx, NAME, &patch)
        })
        .await
    }
}
