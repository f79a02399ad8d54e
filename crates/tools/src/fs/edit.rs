//! `edit`: replace an exact string in a file, keeping its line endings and BOM.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::params;
use super::state::FsState;
use super::text::{self, TextFile};
use super::writer;

const NAME: &str = "edit";

/// Why one replacement could not be made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EditError {
    /// `old_string` is empty.
    EmptyOld,
    /// `old_string` equals `new_string`.
    NoChange,
    /// Not found; the closest region, if any: (first line, last line, similarity).
    NotFound(Option<(usize, usize, f64)>),
    /// Found more than once without `replace_all`: the line numbers.
    Ambiguous(Vec<usize>),
}

impl EditError {
    /// The message for the model, with the file's closest region shown when not found.
    pub(crate) fn describe(&self, path: &str, body: &str, old: &str) -> String {
        match self {
            EditError::EmptyOld => {
                "`old_string` is empty; give the exact text to replace (use `write` to create a file)".to_owned()
            }
            EditError::NoChange => "`old_string` and `new_string` are the same; nothing would change".to_owned(),
            EditError::NotFound(_) if looks_numbered(old) => format!(
                "`old_string` was not found in `{path}`. It seems to start with the line-number prefix of `read` \
                 output (`   12\\t`); copy only the text after the tab"
            ),
            EditError::NotFound(None) => format!(
                "`old_string` was not found in `{path}`, and no region looks similar; `read` the file and copy the text exactly"
            ),
            EditError::NotFound(Some((first, last, score))) => format!(
                "`old_string` was not found in `{path}` (it must match exactly, including whitespace and indentation). \
                 The closest region is lines {first}-{last} ({:.0}% similar):\n{}Copy the text exactly from the file and retry.",
                score * 100.0,
                text::numbered(body, *first, *last)
            ),
            EditError::Ambiguous(lines) => {
                let shown: Vec<String> = lines.iter().take(20).map(|l| l.to_string()).collect();
                format!(
                    "`old_string` occurs {} times in `{path}` (at lines {}); include more surrounding lines to make it \
                     unique, or set `replace_all` to replace every occurrence",
                    lines.len(),
                    shown.join(", ")
                )
            }
        }
    }
}

/// Whether every line of `s` starts like a line of `read` output (spaces, a number, a tab).
fn looks_numbered(s: &str) -> bool {
    s.lines().all(|l| {
        let t = l.trim_start_matches(' ');
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && t.as_bytes().get(digits) == Some(&b'\t')
    })
}

/// A replacement made: how many occurrences and the first changed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replaced {
    pub(crate) count: usize,
    pub(crate) first_line: usize,
}

/// Replaces `old` with `new` in `body`: exactly once unless `replace_all`.
pub(crate) fn apply_edit(body: &str, old: &str, new: &str, replace_all: bool) -> Result<(String, Replaced), EditError> {
    if old.is_empty() {
        return Err(EditError::EmptyOld);
    }
    if old == new {
        return Err(EditError::NoChange);
    }
    let positions: Vec<usize> = body.match_indices(old).map(|(i, _)| i).collect();
    let Some(&first) = positions.first() else {
        return Err(EditError::NotFound(text::closest_region(body, old)));
    };
    if positions.len() > 1 && !replace_all {
        return Err(EditError::Ambiguous(positions.iter().map(|&p| text::line_of(body, p)).collect()));
    }
    let out = if replace_all { body.replace(old, new) } else { body.replacen(old, new, 1) };
    Ok((out, Replaced { count: positions.len(), first_line: text::line_of(body, first) }))
}

/// The `edit` tool.
#[derive(Debug)]
pub struct EditTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl EditTool {
    /// An `edit` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Replace exact text in a file. `old_string` must occur exactly once (include enough surrounding \
             lines to make it unique) unless `replace_all` is set. Copy `old_string` exactly from `read` output, \
             without the line-number prefix. Line endings (CRLF) and a byte-order mark are preserved. The file \
             must have been read with `read` in this session, and not changed since.",
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the workspace root." },
                    "old_string": { "type": "string", "description": "The exact text to replace." },
                    "new_string": { "type": "string", "description": "The text to put in its place." },
                    "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false)." }
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::LOCAL_DESTRUCTIVE);
        EditTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for EditTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_write_safety(&self.state, params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, |state, ctx, params| {
            let path = params::string(NAME, params, "path")?;
            let edit = Edit {
                old: params::string(NAME, params, "old_string")?.to_owned(),
                new: params::string(NAME, params, "new_string")?.to_owned(),
                replace_all: params::flag(params, "replace_all"),
            };
            edit_file(state, ctx, NAME, path, &[edit])
        })
        .await
    }
}

/// One replacement asked for.
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    pub(crate) old: String,
    pub(crate) new: String,
    pub(crate) replace_all: bool,
}

/// Applies `edits` in order to the file at `path`, all or none, and writes it atomically.
pub(crate) fn edit_file(
    state: &FsState,
    ctx: &CallContext,
    tool: &str,
    path: &str,
    edits: &[Edit],
) -> Result<ToolOutput, ToolError> {
    state.exclusive(ctx, || edit_file_locked(state, ctx, tool, path, edits))
}

fn edit_file_locked(
    state: &FsState,
    ctx: &CallContext,
    tool: &str,
    path: &str,
    edits: &[Edit],
) -> Result<ToolOutput, ToolError> {
    let root = state.root(ctx)?;
    let rel = state.resolve(tool, root.path(), path)?;
    if let Some(r) = state.redirected(ctx, &rel) {
        return edit_redirected(state, r, ctx, tool, &rel, edits);
    }
    let checked = writer::check(state, ctx, tool, path, true)?;
    let Some(bytes) = &checked.current else {
        return Err(ToolError::NotFound {
            what: format!("file `{}`", checked.rel),
            hint: Some("`edit` changes existing files; use `write` to create one".to_owned()),
        });
    };
    let Some(file) = TextFile::decode(bytes) else {
        return Err(ToolError::failed(format!(
            "`{}` is not a UTF-8 text file; `{tool}` can only change text files",
            checked.rel
        )));
    };
    let mut body = file.body.clone();
    let mut summary = Vec::new();
    for (i, e) in edits.iter().enumerate() {
        let old = file.adapt(&e.old);
        let new = file.adapt(&e.new);
        let mut result = apply_edit(&body, &old, &new, e.replace_all);
        // A file with mixed line endings: try the model's LF text as CRLF too.
        if matches!(result, Err(EditError::NotFound(_))) && !file.crlf && old.contains('\n') && body.contains("\r\n") {
            let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
            if let Ok(ok) = apply_edit(&body, &crlf(&old), &crlf(&new), e.replace_all) {
                result = Ok(ok);
            }
        }
        match result {
            Ok((next, replaced)) => {
                summary.push((replaced, new.matches('\n').count() + 1));
                body = next;
            }
            Err(err) => {
                let msg = err.describe(checked.rel.as_str(), &body, &old);
                return Err(if edits.len() == 1 {
                    ToolError::invalid(tool, "/old_string", msg)
                } else {
                    ToolError::invalid(
                        tool,
                        format!("/edits/{i}/old_string"),
                        format!("edit {} of {}: {msg}. No edit was applied.", i + 1, edits.len()),
                    )
                });
            }
        }
    }
    let out = file.with_body(body.clone()).encode();
    let written = writer::commit(state, ctx, tool, checked, &out)?;
    let mut text = String::new();
    let total: usize = summary.iter().map(|(r, _)| r.count).sum();
    text.push_str(&format!(
        "Edited `{}`: {} edit{}, {total} replacement{}.",
        written.real,
        edits.len(),
        if edits.len() == 1 { "" } else { "s" },
        if total == 1 { "" } else { "s" }
    ));
    if let Some((first, new_lines)) = summary.last().map(|(r, n)| (r.first_line, *n))
        && edits.len() == 1
        && summary[0].0.count == 1
    {
        let from = first.saturating_sub(2).max(1);
        let to = first + new_lines + 1;
        text.push_str(&format!(" The changed region now reads:\n{}", text::numbered(&body, from, to)));
    }
    if let Some(w) = written.warning {
        text.push('\n');
        text.push_str(&w);
    }
    Ok(ToolOutput::text(text).with_meta(json!({
        "path": written.real.as_str(),
        "edits": edits.len(),
        "replacements": total,
    })))
}

/// Edits a file served by a redirect (managed memory): read it there, replace, write it back.
fn edit_redirected(
    state: &FsState,
    r: &dyn super::state::FileRedirect,
    ctx: &CallContext,
    tool: &str,
    rel: &super::confine::RelPath,
    edits: &[Edit],
) -> Result<ToolOutput, ToolError> {
    if state.rules.denied_write(rel.as_str()) {
        return Err(super::state::denied_write(tool, rel));
    }
    let mut body = r.read(ctx, rel.as_str())?;
    let old = body.clone();
    let mut total = 0;
    for (i, e) in edits.iter().enumerate() {
        match apply_edit(&body, &e.old, &e.new, e.replace_all) {
            Ok((next, replaced)) => {
                total += replaced.count;
                body = next;
            }
            Err(err) => {
                let msg = err.describe(rel.as_str(), &body, &e.old);
                return Err(if edits.len() == 1 {
                    ToolError::invalid(tool, "/old_string", msg)
                } else {
                    ToolError::invalid(
                        tool,
                        format!("/edits/{i}/old_string"),
                        format!("edit {} of {}: {msg}. No edit was applied.", i + 1, edits.len()),
                    )
                });
            }
        }
    }
    writer::refuse_redaction_markers(tool, rel.as_str(), Some(old.as_bytes()), body.as_bytes())?;
    let said = r.write(ctx, rel.as_str(), &body)?;
    Ok(ToolOutput::text(format!("Edited `{rel}`: {total} replacement{}. {said}", if total == 1 { "" } else { "s" }))
        .with_meta(json!({ "path": rel.as_str(), "edits": edits.len(), "replacements": total })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ambiguous_missing() {
        assert_eq!(apply_edit("a b a", "b", "c", false).map(|r| r.0), Ok("a c a".to_owned()));
        assert!(matches!(apply_edit("a b a", "a", "c", false), Err(EditError::Ambiguous(_))));
        assert_eq!(apply_edit("a b a", "a", "c", true).map(|r| r.0), Ok("c b c".to_owned()));
        assert!(matches!(apply_edit("abc", "x", "y", false), Err(EditError::NotFound(_))));
        assert!(matches!(apply_edit("abc", "", "y", false), Err(EditError::EmptyOld)));
        assert!(matches!(apply_edit("abc", "a", "a", false), Err(EditError::NoChange)));
    }
}
