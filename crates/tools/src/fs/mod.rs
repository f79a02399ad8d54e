//! The filesystem tools (group `fs`), confined to the workspace by the kernel.
//!
//! | tool | does |
//! |---|---|
//! | `read` | a file with line numbers, paged; images as image content; binary files refused |
//! | `write` | create or replace a file, atomically |
//! | `edit` | replace an exact string, keeping CRLF and a BOM |
//! | `multi_edit` | several replacements in one file, all or none |
//! | `apply_patch` | Codex's patch format, all or nothing |
//! | `grep` | search contents with the ripgrep engine, `.gitignore`-aware |
//! | `glob` | find files by glob, newest first |
//! | `ls` | list a directory (optionally recursive) |
//! | `lock_paths` / `unlock_paths` | advisory locks between agents sharing a workspace |
//!
//! Build them with [`tools`], which returns every tool sharing one [`FsState`] (what each session
//! has read, for write safety, and the locks).
//!
//! # Layout
//!
//! - `confine`: the confinement primitive (`openat2` beneath the root, atomic writes relative to
//!   a held directory descriptor). Every path goes through it.
//! - `rules`: denied paths (invisible, refused) and instruction files (writes need approval).
//! - `state`: [`FsState`], write safety and lock checks; `locks`: the path locks (in the state
//!   database when there is one, shared by every process on the workspace; else in memory);
//!   `write_lock`: the write mutex across processes (a `flock` on `.toolgate/fs-write.lock`).
//! - `writer`: the guarded write all writing tools share; `text`: BOM/CRLF-preserving text.
//! - `lines`: line counts of large files, taken in the background for `read`'s later calls.
//! - one module per tool; `apply_patch/` has its parser, matcher and staged commit.
//!
//! # Example
//!
//! ```
//! use toolgate_tools::fs::{tools, FsConfig};
//!
//! let fs_tools = tools(FsConfig::default()).expect("the default configuration is valid");
//! assert!(fs_tools.iter().any(|t| t.spec().name == "apply_patch"));
//! ```

mod apply_patch;
mod config;
mod confine;
mod edit;
mod glob;
mod grep;
mod lines;
mod lock_tools;
mod locks;
mod ls;
mod multi_edit;
mod params;
mod read;
mod rules;
mod state;
mod text;
mod walk;
mod write;
mod write_lock;
mod writer;

use std::sync::Arc;

use toolgate_core::Tool;

pub use apply_patch::ApplyPatchTool;
pub use config::{DEFAULT_INSTRUCTION_FILES, DEFAULT_SKIP_DIRS, FsConfig, WriteSafety};
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use lock_tools::{LockPathsTool, UnlockPathsTool};
pub use ls::LsTool;
pub use multi_edit::MultiEditTool;
pub use read::ReadTool;
pub use state::{FileRedirect, FsState, WriteObserver};
pub use write::WriteTool;

/// Why an [`FsConfig`] was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid fs configuration: the glob `{glob}` is not valid: {message}")]
pub struct ConfigError {
    /// The offending glob.
    pub glob: String,
    /// What is wrong with it.
    pub message: String,
}

impl FsState {
    /// Shared state for the fs tools, from a configuration.
    pub fn new_shared(config: FsConfig) -> Result<Arc<FsState>, ConfigError> {
        let rules =
            rules::PathRules::new(&config).map_err(|b| ConfigError { glob: b.glob, message: b.error.to_string() })?;
        Ok(Arc::new(FsState::new(config, rules)))
    }

    /// The bytes of the workspace file `input` (at most `max`), confined exactly like `read`:
    /// resolved beneath the workspace by the kernel, denied paths (and `.toolgate/`) refused.
    /// For hosts that lend file access to guests (WASM tools' `workspace.read`).
    pub fn read_confined(
        &self,
        ctx: &toolgate_core::CallContext,
        input: &str,
        max: usize,
    ) -> Result<Vec<u8>, toolgate_core::ToolError> {
        use std::io::Read as _;
        let root = self.root(ctx)?;
        let rel = self.resolve("read", root.path(), input)?;
        let opened = root.open_file(&rel).map_err(|e| state::path_error("read", rel.display(), e))?;
        if self.rules.denied(opened.real.as_str()) {
            return Err(state::denied("read", &opened.real));
        }
        let mut bytes = Vec::new();
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        (&opened.file)
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| toolgate_core::ToolError::failed(format!("cannot read `{rel}`: {e}")))?;
        if bytes.len() > max {
            return Err(toolgate_core::ToolError::failed(format!("`{rel}` is larger than {max} bytes")));
        }
        Ok(bytes)
    }

    /// Writes `bytes` (at most `max`) to the workspace file `input`, guarded like `write`
    /// (confinement, write-deny rules, instruction files, locks, redaction markers; atomic, so a
    /// failure leaves the old file), for tools that produce files (the media family). An existing
    /// file is replaced only with `overwrite`. Returns the file's real path in the workspace.
    pub fn write_confined(
        &self,
        ctx: &toolgate_core::CallContext,
        tool: &str,
        input: &str,
        bytes: &[u8],
        max: usize,
        overwrite: bool,
    ) -> Result<String, toolgate_core::ToolError> {
        if bytes.len() > max {
            return Err(toolgate_core::ToolError::failed(format!(
                "the output would be {} bytes, over the {max}-byte limit of `{tool}`",
                bytes.len()
            )));
        }
        self.exclusive(ctx, || {
            let checked = writer::check(self, ctx, tool, input, false)?;
            if checked.current.is_some() && !overwrite {
                return Err(toolgate_core::ToolError::failed(format!(
                    "`{}` already exists; pass \"overwrite\": true to replace it, or choose another path",
                    checked.rel
                )));
            }
            writer::refuse_redaction_markers(tool, checked.rel.as_str(), checked.current.as_deref(), bytes)?;
            checked.target.commit(bytes).map_err(|e| {
                toolgate_core::ToolError::failed(format!(
                    "writing `{}` failed, the old file is unchanged: {e}",
                    checked.rel
                ))
            })?;
            self.notify(ctx, checked.target.real.as_str());
            Ok(checked.target.real.as_str().to_owned())
        })
    }
}

/// Every fs tool, sharing one state.
pub fn tools(config: FsConfig) -> Result<Vec<Arc<dyn Tool>>, ConfigError> {
    tools_observed(config, None)
}

/// [`tools`], with an observer told about every file they write (the memory interceptor).
pub fn tools_observed(
    config: FsConfig,
    observer: Option<Arc<dyn WriteObserver>>,
) -> Result<Vec<Arc<dyn Tool>>, ConfigError> {
    tools_shared(config, observer, None)
}

/// [`tools_observed`], with the path locks in the state database's `locks` when the caller
/// keeps one: every process on the workspace then honours them, and the write mutex holds
/// across processes too ([`FsState::share_across_processes`]).
pub fn tools_shared(
    config: FsConfig,
    observer: Option<Arc<dyn WriteObserver>>,
    locks: Option<Arc<dyn toolgate_store::LockStore>>,
) -> Result<Vec<Arc<dyn Tool>>, ConfigError> {
    let state = FsState::new_shared(config)?;
    if let Some(o) = observer {
        state.set_observer(o);
    }
    if let Some(locks) = locks {
        state.share_across_processes(locks);
    }
    Ok(vec![
        Arc::new(ReadTool::new(state.clone())),
        Arc::new(WriteTool::new(state.clone())),
        Arc::new(EditTool::new(state.clone())),
        Arc::new(MultiEditTool::new(state.clone())),
        Arc::new(ApplyPatchTool::new(state.clone())),
        Arc::new(GrepTool::new(state.clone())),
        Arc::new(GlobTool::new(state.clone())),
        Arc::new(LsTool::new(state.clone())),
        Arc::new(LockPathsTool::new(state.clone())),
        Arc::new(UnlockPathsTool::new(state)),
    ])
}
