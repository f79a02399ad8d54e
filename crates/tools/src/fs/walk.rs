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
///
/// Ignore files are read inside the workspace only: those of the folders between the root and
/// `start` are added explicitly, and nothing above the root is consulted (`parents(false)`).
pub(crate) fn builder(state: &Arc<FsState>, root: &Path, start: &RelPath) -> WalkBuilder {
    let mut b = WalkBuilder::new(absolute(root, start));
    let mut ancestor = RelPath::root();
    let mut comps = start.components().peekable();
    while comps.peek().is_some() {
        for name in [".gitignore", ".ignore"] {
            let file = ancestor.join(name);
            if state.rules.denied(file.as_str()) {
                continue;
            }
            if let Ok(root_fd) = super::confine::Root::open(root)
                && let Ok(fd) = root_fd.open_beneath_strict(&file, rustix::fs::OFlags::PATH)
                && rustix::fs::fstat(&fd).is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file())
            {
                b.add_ignore(absolute(root, &file));
            }
        }
        if let Some(c) = comps.next() {
            ancestor = ancestor.join(c);
        }
    }
    b.follow_links(false)
        .hidden(true)
        .parents(false)
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
