//! `glob`: find files by glob pattern, newest first.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use rustix::fs::OFlags;
use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::confine::{Root, absolute, rel_of};
use super::params;
use super::state::{FsState, denied, path_error};
use super::walk;

const NAME: &str = "glob";

/// The `glob` tool.
#[derive(Debug)]
pub struct GlobTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl GlobTool {
    /// A `glob` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Find files whose path matches a glob, newest first (by modification time). `**` matches any \
                 number of folders, `*` any characters except `/`, `{{a,b}}` alternatives: `**/*.rs`, \
                 `src/**/*.{{ts,tsx}}`. Patterns are relative to `path` (default: the workspace root). Respects \
                 `.gitignore` and skips hidden files. At most {} paths.",
                state.config.glob_max_results
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Glob pattern, e.g. `**/*.rs`." },
                    "path": { "type": "string", "description": "Directory to search in, relative to the workspace (default: the root)." },
                    "limit": { "type": "integer", "minimum": 1, "description": "Most paths to return (default and most: the configured cap)." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::READ_ONLY);
        GlobTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for GlobTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_read_safety(params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, glob).await
    }
}

fn compile(pattern: &str) -> Result<GlobMatcher, ToolError> {
    let p = pattern.trim_start_matches("./");
    GlobBuilder::new(p)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::invalid(NAME, "/pattern", format!("not a valid glob: {e}")))
}

fn glob(state: &Arc<FsState>, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
    let pattern = params::string(NAME, params, "pattern")?;
    let root = state.root(ctx)?;
    // An absolute pattern inside the workspace is taken relative to it.
    let ws_prefix = format!("{}/", root.path().display());
    let pattern = pattern.strip_prefix(&ws_prefix).unwrap_or(pattern);
    let matcher = compile(pattern)?;
    let start = state.resolve(NAME, root.path(), params::opt_string(params, "path").unwrap_or("."))?;
    let (fd, real) = match root.open_dir(&start) {
        Ok(d) => d,
        Err(super::confine::PathError::NotADirectory) => {
            return Err(ToolError::invalid(
                NAME,
                "/path",
                format!("`{start}` is a file; `path` is the folder to search in (use `read` for a file)"),
            ));
        }
        Err(e) => return Err(path_error(NAME, start.display(), e)),
    };
    drop(fd);
    if state.rules.denied(real.as_str()) {
        return Err(denied(NAME, &real));
    }
    let start_abs = absolute(root.path(), &real);
    let found: Mutex<Vec<(SystemTime, String)>> = Mutex::new(Vec::new());
    let cancel = ctx.cancel.clone();
    walk::builder(state, root.path(), &real).build_parallel().run(|| {
        let found = &found;
        let matcher = &matcher;
        let start_abs = &start_abs;
        let root_path = root.path();
        let cancel = cancel.clone();
        let mut sink = Flush { found, local: Vec::new() };
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let Ok(rel_to_start) = entry.path().strip_prefix(start_abs) else { return WalkState::Continue };
            if !matcher.is_match(rel_to_start) {
                return WalkState::Continue;
            }
            let Some(rel) = rel_of(root_path, entry.path()) else { return WalkState::Continue };
            let mtime = entry.metadata().ok().and_then(|m| m.modified().ok()).unwrap_or(SystemTime::UNIX_EPOCH);
            sink.local.push((mtime, rel.as_str().to_owned()));
            WalkState::Continue
        })
    });
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let cap = params::opt_u64(NAME, params, "limit")?
        .map_or(state.config.glob_max_results, |limit| (limit as usize).min(state.config.glob_max_results));
    let mut out = String::new();
    let mut shown = 0;
    for (_, rel) in &found {
        if shown >= cap {
            break;
        }
        // Re-checked beneath the root without following symlinks: a race during the walk
        // cannot make a path outside the workspace appear here.
        if !still_beneath(&root, rel) {
            continue;
        }
        out.push_str(rel);
        out.push('\n');
        shown += 1;
    }
    if total == 0 {
        let mut text = format!("No files match `{pattern}`.");
        if !pattern.contains('/') {
            text.push_str(&format!(" `*` does not cross folders; to search every folder use `**/{pattern}`."));
        }
        return Ok(ToolOutput::text(text).with_meta(json!({ "total": 0, "shown": 0, "truncated": false })));
    }
    let truncated = total > shown;
    if truncated {
        out.push_str(&format!(
            "\n[Showing the {shown} newest of {total} matching files. Use a narrower pattern or `path` to see others.]\n"
        ));
    }
    Ok(ToolOutput::text(out).with_meta(json!({ "total": total, "shown": shown, "truncated": truncated })))
}

fn still_beneath(root: &Root, rel: &str) -> bool {
    root.open_beneath_strict(&super::confine::RelPath::from_normalized(rel), OFlags::PATH).is_ok()
}

struct Flush<'a> {
    found: &'a Mutex<Vec<(SystemTime, String)>>,
    local: Vec<(SystemTime, String)>,
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        if !self.local.is_empty() {
            let mut all = self.found.lock().unwrap_or_else(|p| p.into_inner());
            all.append(&mut self.local);
        }
    }
}
