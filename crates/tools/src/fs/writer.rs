//! The guarded write every writing tool goes through: confinement, write-deny rules, locks,
//! write safety, size cap, atomic commit, and the new stamp recorded for the session.

use toolgate_core::{CallContext, ToolError};

use super::confine::{PathError, RelPath, WriteTarget};
use super::state::{FileStamp, FsState, denied_write, path_error};

/// What a guarded write did.
#[derive(Debug)]
pub(crate) struct Written {
    /// Where the file really is, relative to the workspace.
    pub(crate) real: RelPath,
    /// Whether the file existed before.
    pub(crate) existed: bool,
    /// Bytes written.
    pub(crate) bytes: usize,
    /// A write-safety warning (mode `warn`).
    pub(crate) warning: Option<String>,
}

/// A write target that passed every check, with the current content.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) target: WriteTarget,
    pub(crate) rel: RelPath,
    pub(crate) current: Option<Vec<u8>>,
    pub(crate) warning: Option<String>,
}

/// Resolves `input` for writing and runs every check; nothing is changed.
pub(crate) fn check(
    state: &FsState,
    ctx: &CallContext,
    tool: &str,
    input: &str,
    write_safety: bool,
) -> Result<Checked, ToolError> {
    let root = state.root(ctx)?;
    let rel = state.resolve(tool, root.path(), input)?;
    check_rel(state, ctx, tool, &root, rel, write_safety)
}

/// [`check`] for an already-normalized path.
pub(crate) fn check_rel(
    state: &FsState,
    ctx: &CallContext,
    tool: &str,
    root: &super::confine::Root,
    rel: RelPath,
    write_safety: bool,
) -> Result<Checked, ToolError> {
    if state.rules.denied_write(rel.as_str()) {
        return Err(denied_write(tool, &rel));
    }
    let target = match root.prepare_write(&rel) {
        Ok(t) => t,
        Err(PathError::IsDirectory) => {
            return Err(ToolError::invalid(
                tool,
                super::state::path_pointer(tool),
                format!("`{rel}` is a directory; give a file path"),
            ));
        }
        Err(e) => return Err(path_error(tool, rel.display(), e)),
    };
    if state.rules.denied_write(target.real.as_str()) {
        return Err(denied_write(tool, &target.real));
    }
    if state.config.approve_instruction_files
        && state.rules.instruction_file(target.real.as_str())
        && !state.rules.instruction_file(rel.as_str())
    {
        return Err(ToolError::Denied {
            tool: tool.to_owned(),
            reason: format!(
                "`{rel}` is a link to the instruction file `{}`; write `{}` directly (that needs approval)",
                target.real, target.real
            ),
        });
    }
    state.check_lock(ctx, &target.real)?;
    let current = target.read_current().map_err(|e| path_error(tool, rel.display(), e))?;
    let mut warning = None;
    if let (Some(bytes), Some(stat), true) = (&current, &target.current, write_safety) {
        warning = state.check_write_safety(ctx, tool, &target.real, &FileStamp::of(stat, bytes))?;
    }
    Ok(Checked { target, rel, current, warning })
}

/// Refuses content that adds toolgate's redaction markers (`[REDACTED:<rule>]`): a model that
/// read redacted output and writes it back would replace a real secret with the marker (a peer
/// once wrote its own `***` markers back into a config file). Markers the file already had are
/// allowed to stay.
pub(crate) fn refuse_redaction_markers(tool: &str, rel: &str, old: Option<&[u8]>, new: &[u8]) -> Result<(), ToolError> {
    let count = |bytes: &[u8]| memchr::memmem::find_iter(bytes, b"[REDACTED").count();
    let added = count(new) > old.map_or(0, count);
    if added && toolgate_guard::leak::contains_redaction_marker(&String::from_utf8_lossy(new)) {
        return Err(ToolError::failed(format!(
            "`{tool}` refuses to write `{rel}`: the new content contains a `[REDACTED:...]` marker, which stands \
             for a secret toolgate hid from you. Writing it would replace the real value with the marker. \
             Leave that part of the file as it is, or ask the user to fill in the value"
        )));
    }
    Ok(())
}

/// Commits `bytes` to a checked target and records the new stamp for the session.
pub(crate) fn commit(
    state: &FsState,
    ctx: &CallContext,
    tool: &str,
    checked: Checked,
    bytes: &[u8],
) -> Result<Written, ToolError> {
    refuse_redaction_markers(tool, &checked.rel.to_string(), checked.current.as_deref(), bytes)?;
    let max = state.config.max_write_bytes;
    if bytes.len() > max {
        return Err(ToolError::failed(format!(
            "the result would be {} bytes, over the {max}-byte limit of `{tool}`; write smaller files",
            bytes.len()
        )));
    }
    checked
        .target
        .commit(bytes)
        .map_err(|e| ToolError::failed(format!("writing `{}` failed, the old file is unchanged: {e}", checked.rel)))?;
    let root = state.root(ctx)?;
    if let Ok((stat, _)) = root.stat(&checked.target.real) {
        state.record(ctx, &checked.target.real, FileStamp::of(&stat, bytes));
    }
    state.notify(ctx, checked.target.real.as_str());
    Ok(Written {
        real: checked.target.real.clone(),
        existed: checked.target.exists(),
        bytes: bytes.len(),
        warning: checked.warning,
    })
}
