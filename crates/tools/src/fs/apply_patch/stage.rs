//! Staging a patch (every file's final content computed and checked) and committing it.

use std::collections::HashMap;

use serde_json::json;
use toolgate_core::{CallContext, ToolError, ToolOutput};

use super::parser::{Hunk, Patch};
use super::update::apply_chunks;
use crate::fs::confine::Root;
use crate::fs::state::{FileStamp, FsState, path_error};
use crate::fs::text::TextFile;
use crate::fs::writer::{self, Checked};

/// One file the patch touches.
#[derive(Debug)]
struct Entry {
    checked: Checked,
    /// Content before the patch (`None`: no file).
    original: Option<Vec<u8>>,
    /// Content after the patch (`None`: no file).
    result: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Staging {
    entries: Vec<Entry>,
    by_real: HashMap<String, usize>,
}

impl Staging {
    fn entry(
        &mut self,
        state: &FsState,
        ctx: &CallContext,
        tool: &str,
        root: &Root,
        path: &str,
    ) -> Result<usize, ToolError> {
        let rel = state.resolve(tool, root.path(), path)?;
        if state.redirected(ctx, &rel).is_some() {
            return Err(toolgate_core::ToolError::failed(format!(
                "`{rel}` is kept in the memory store for each user, not on disk; change it with `write` or `edit`"
            )));
        }
        let checked = writer::check_rel(state, ctx, tool, root, rel, false)?;
        let key = checked.target.real.as_str().to_owned();
        if let Some(&i) = self.by_real.get(&key) {
            return Ok(i);
        }
        let original = checked.current.clone();
        self.entries.push(Entry { checked, result: original.clone(), original });
        self.by_real.insert(key, self.entries.len() - 1);
        Ok(self.entries.len() - 1)
    }
}

/// Applies `patch` all-or-nothing and reports `A/M/D path` lines like Codex.
pub(crate) fn apply(state: &FsState, ctx: &CallContext, tool: &str, patch: &Patch) -> Result<ToolOutput, ToolError> {
    state.exclusive(ctx, || apply_locked(state, ctx, tool, patch))
}

fn apply_locked(state: &FsState, ctx: &CallContext, tool: &str, patch: &Patch) -> Result<ToolOutput, ToolError> {
    let root = state.root(ctx)?;
    let mut staging = Staging::default();
    let mut summary: Vec<(char, String)> = Vec::new();
    let fail = |msg: String| ToolError::failed(format!("{msg}\nThe patch was not applied; no file was changed."));
    for hunk in &patch.hunks {
        match hunk {
            Hunk::Add { path, contents } => {
                let i = staging.entry(state, ctx, tool, &root, path)?;
                staging.entries[i].result = Some(contents.clone().into_bytes());
                summary.push(('A', staging.entries[i].checked.real_shown()));
            }
            Hunk::Delete { path } => {
                let i = staging.entry(state, ctx, tool, &root, path)?;
                if staging.entries[i].result.is_none() {
                    return Err(fail(format!("cannot delete `{path}`: no such file")));
                }
                staging.entries[i].result = None;
                summary.push(('D', staging.entries[i].checked.real_shown()));
            }
            Hunk::Update { path, move_to, chunks } => {
                let i = staging.entry(state, ctx, tool, &root, path)?;
                let Some(current) = &staging.entries[i].result else {
                    return Err(fail(format!(
                        "cannot update `{path}`: no such file (use `*** Add File: {path}` to create it)"
                    )));
                };
                let Some(file) = TextFile::decode(current) else {
                    return Err(fail(format!("cannot update `{path}`: it is not a UTF-8 text file")));
                };
                let body = apply_chunks(path, &file.body, chunks).map_err(fail)?;
                let bytes = file.with_body(body).encode();
                match move_to {
                    None => {
                        staging.entries[i].result = Some(bytes);
                        summary.push(('M', staging.entries[i].checked.real_shown()));
                    }
                    Some(to) => {
                        let j = staging.entry(state, ctx, tool, &root, to)?;
                        staging.entries[i].result = None;
                        staging.entries[j].result = Some(bytes);
                        summary.push(('M', staging.entries[j].checked.real_shown()));
                    }
                }
            }
        }
    }
    for e in &staging.entries {
        if let Some(bytes) = &e.result {
            let shown = e.checked.real_shown();
            super::super::writer::refuse_redaction_markers(tool, &shown, e.original.as_deref(), bytes)
                .map_err(|err| fail(err.to_string()))?;
        }
    }
    let max = state.config.max_write_bytes;
    for e in &staging.entries {
        if let Some(bytes) = &e.result
            && bytes.len() > max
        {
            return Err(fail(format!(
                "`{}` would be {} bytes, over the {max}-byte limit",
                e.checked.real_shown(),
                bytes.len()
            )));
        }
    }
    commit(state, ctx, tool, &staging)?;
    let mut text = String::from("Success. Updated the following files:\n");
    let mut seen = Vec::new();
    for (k, p) in &summary {
        if !seen.contains(&(k, p)) {
            text.push_str(&format!("{k} {p}\n"));
            seen.push((k, p));
        }
    }
    let files: Vec<_> = seen.iter().map(|(k, p)| json!({ "op": k.to_string(), "path": p })).collect();
    Ok(ToolOutput::text(text).with_meta(json!({ "files": files })))
}

/// Writes every changed file (writes first, then deletes), rolling back on failure.
fn commit(state: &FsState, ctx: &CallContext, tool: &str, staging: &Staging) -> Result<(), ToolError> {
    let changed: Vec<&Entry> = staging.entries.iter().filter(|e| e.result != e.original).collect();
    let order = changed.iter().filter(|e| e.result.is_some()).chain(changed.iter().filter(|e| e.result.is_none()));
    let mut done: Vec<&Entry> = Vec::new();
    for e in order {
        let step = match &e.result {
            Some(bytes) => e.checked.target.commit(bytes),
            None => e.checked.target.remove(),
        };
        if let Err(err) = step {
            let mut unrestored = Vec::new();
            for d in done.iter().rev() {
                let undo = match &d.original {
                    Some(bytes) => d.checked.target.commit(bytes),
                    None => d.checked.target.remove(),
                };
                if undo.is_err() {
                    unrestored.push(d.checked.real_shown());
                }
            }
            let shown = e.checked.real_shown();
            let mut msg = format!("{}", path_error(tool, &shown, err));
            if unrestored.is_empty() {
                msg.push_str("\nThe patch was not applied; files already written were restored.");
            } else {
                msg.push_str(&format!(
                    "\nThe patch was not applied, but these files could not be restored: {}",
                    unrestored.join(", ")
                ));
            }
            return Err(ToolError::failed(msg));
        }
        done.push(e);
    }
    if let Ok(root) = state.root(ctx) {
        for e in &done {
            let real = &e.checked.target.real;
            match &e.result {
                Some(bytes) => {
                    if let Ok((stat, _)) = root.stat(real) {
                        state.record(ctx, real, FileStamp::of(&stat, bytes));
                    }
                }
                None => state.forget(ctx, real),
            }
        }
    }
    for e in &done {
        state.notify(ctx, e.checked.target.real.as_str());
    }
    Ok(())
}

impl Checked {
    /// The real path, for output.
    fn real_shown(&self) -> String {
        self.target.real.as_str().to_owned()
    }
}
