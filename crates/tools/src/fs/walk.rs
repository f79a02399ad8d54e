//! The ignore-aware walk shared by `grep` and `glob`.
//!
//! The walk runs on real paths (the `ignore` crate needs them) but never follows symlinks, starts
//! from the real location of the asked directory, and skips denied paths before descending. Every
//! file it yields is then opened (`grep`) or checked (`glob`) beneath the root with
//! `RESOLVE_NO_SYMLINKS`, so a directory swapped for a symlink during the walk is refused.

use std::path::Path;
use std::sync::Arc;

use ignore::WalkBuilder;

use super::confine::{RelPath, absolute, rel_of};
use super::state::FsState;

/// A walk builder for `start` (a real, workspace-relative path) under `root`.
pub(crate) fn builder(state: &Arc<FsState>, root: &Path, start: &RelPath) -> WalkBuilder {
    let mut b = WalkBuilder::new(absolute(root, start));
    b.follow_links(false)
        .hidden(true)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .same_file_system(false);
    let state = state.clone();
    let root = root.to_path_buf();
    b.filter_entry(move |entry| match rel_of(&root, entry.path()) {
        Some(rel) => !state.rules.denied(rel.as_str()),
        None => false,
    });
    b
}
