//! `ls`: list a directory, optionally recursively, with type and size.
//!
//! The listing walks directory descriptors (`openat` of each child with `O_NOFOLLOW` relative to
//! its parent's descriptor), so no path is re-resolved and no symlink is followed.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::confine::{PathError, RelPath};
use super::params;
use super::state::{FsState, denied, path_error};

const NAME: &str = "ls";
/// Depth of a recursive listing when `max_depth` is not given.
const DEFAULT_RECURSIVE_DEPTH: u64 = 3;

/// The `ls` tool.
#[derive(Debug)]
pub struct LsTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl LsTool {
    /// An `ls` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            format!(
                "List a directory of the workspace: each entry with its type (dir, file, link) and size. \
                 `recursive` descends into subfolders (to `max_depth`, default {DEFAULT_RECURSIVE_DEPTH}). \
                 Large generated folders ({}) are shown but not entered unless you list them directly. At most \
                 {} entries.",
                state.config.ls_skip_dirs.iter().take(4).cloned().collect::<Vec<_>>().join(", ") + ", ...",
                state.config.ls_max_entries
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "Directory, relative to the workspace (default: the root)." },
                    "recursive": { "type": "boolean", "description": "List subfolders too (default false)." },
                    "max_depth": { "type": "integer", "minimum": 1, "maximum": 20, "description": "How deep a recursive listing goes (default 3)." }
                },
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::READ_ONLY);
        LsTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for LsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_read_safety(params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, ls).await
    }
}

struct Listing<'a> {
    state: &'a FsState,
    root: std::path::PathBuf,
    max: usize,
    max_depth: u64,
    lines: Vec<String>,
    more: bool,
}

fn ls(state: &Arc<FsState>, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
    let recursive = params::flag(params, "recursive");
    let max_depth = if recursive {
        params::opt_u64(NAME, params, "max_depth")?.unwrap_or(DEFAULT_RECURSIVE_DEPTH).clamp(1, 20)
    } else {
        1
    };
    let root = state.root(ctx)?;
    let start = state.resolve(NAME, root.path(), params::opt_string(params, "path").unwrap_or("."))?;
    let (fd, real) = match root.open_dir(&start) {
        Ok(d) => d,
        Err(PathError::NotADirectory) => {
            let (stat, real) = root.stat(&start).map_err(|e| path_error(NAME, start.display(), e))?;
            if state.rules.denied(real.as_str()) {
                return Err(denied(NAME, &real));
            }
            let line = format!("file  {:>9}  {}", human(stat.st_size), real);
            return Ok(ToolOutput::text(line));
        }
        Err(e) => return Err(path_error(NAME, start.display(), e)),
    };
    if state.rules.denied(real.as_str()) {
        return Err(denied(NAME, &real));
    }
    let mut listing = Listing {
        state,
        root: root.path().to_path_buf(),
        max: state.config.ls_max_entries,
        max_depth,
        lines: Vec::new(),
        more: false,
    };
    listing.list(fd, &real, 1, ctx)?;
    let count = listing.lines.len();
    let mut text = format!("{}/ ({count} entries{})\n", real.display(), if listing.more { ", cut" } else { "" });
    for l in &listing.lines {
        text.push_str(l);
        text.push('\n');
    }
    if count == 0 {
        text.push_str("(empty)\n");
    }
    if listing.more {
        text.push_str(&format!(
            "\n[Listing cut at {} entries. List a subfolder, lower `max_depth`, or use `glob` to find specific files.]\n",
            listing.max
        ));
    }
    Ok(ToolOutput::text(text).with_meta(json!({ "path": real.as_str(), "entries": count, "truncated": listing.more })))
}

impl Listing<'_> {
    fn list(&mut self, dir: OwnedFd, rel: &RelPath, depth: u64, ctx: &CallContext) -> Result<(), ToolError> {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let mut names: Vec<(String, FileType)> = Vec::new();
        let dup = rustix::fs::openat(&dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| ToolError::failed(format!("cannot list `{rel}`: {e}")))?;
        let entries = Dir::new(dup).map_err(|e| ToolError::failed(format!("cannot list `{rel}`: {e}")))?;
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            names.push((name, entry.file_type()));
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let indent = "  ".repeat(usize::try_from(depth - 1).unwrap_or(0));
        for (name, _) in names {
            let child = rel.join(&name);
            if self.state.rules.denied(child.as_str()) {
                continue;
            }
            if self.lines.len() >= self.max {
                self.more = true;
                return Ok(());
            }
            let Ok(st) = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    let skipped = self.state.config.ls_skip_dirs.iter().any(|s| s == &name);
                    let note = if skipped && depth < self.max_depth { "  (not entered; list it directly)" } else { "" };
                    self.lines.push(format!("{indent}dir   {:>9}  {name}/{note}", "-"));
                    if depth < self.max_depth
                        && !skipped
                        && let Ok(sub) = rustix::fs::openat(
                            &dir,
                            name.as_str(),
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                    {
                        self.list(sub, &child, depth + 1, ctx)?;
                    }
                }
                FileType::Symlink => {
                    let mut target = rustix::fs::readlinkat(&dir, name.as_str(), Vec::new())
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    if self.points_to_denied(rel, &target) {
                        target = "(a path denied by policy)".to_owned();
                    }
                    self.lines.push(format!("{indent}link  {:>9}  {name} -> {target}", "-"));
                }
                FileType::RegularFile => {
                    self.lines.push(format!("{indent}file  {:>9}  {name}", human(st.st_size)));
                }
                _ => self.lines.push(format!("{indent}other {:>9}  {name}", "-")),
            }
        }
        Ok(())
    }
}

impl Listing<'_> {
    /// Whether a link in `dir` with this target names a denied path (lexically).
    fn points_to_denied(&self, dir: &RelPath, target: &str) -> bool {
        let joined = if target.starts_with('/') || dir.as_str().is_empty() {
            target.to_owned()
        } else {
            format!("{}/{target}", dir.as_str())
        };
        match super::confine::normalize(&self.root, &joined) {
            Ok(rel) => self.state.rules.denied(rel.as_str()),
            Err(_) => false,
        }
    }
}

/// A size for people: bytes below 10 KiB, then K/M/G with one decimal.
fn human(size: i64) -> String {
    let s = size as f64;
    if size < 10 * 1024 {
        format!("{size}")
    } else if s < 1024.0 * 1024.0 {
        format!("{:.1}K", s / 1024.0)
    } else if s < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1}M", s / (1024.0 * 1024.0))
    } else {
        format!("{:.1}G", s / (1024.0 * 1024.0 * 1024.0))
    }
}
