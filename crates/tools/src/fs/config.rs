//! Configuration of the filesystem tools.

use serde::{Deserialize, Serialize};

/// Whether `write`, `edit` and `multi_edit` require a fresh `read` of an existing file first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteSafety {
    /// Refuse to change an existing file that this session has not read, or that changed on disk
    /// since it was read (size, modification time, content hash). The default.
    #[default]
    Strict,
    /// Allow the change, but say in the output that the file was not read or had changed.
    Warn,
    /// No check.
    Off,
}

/// Configuration of the `fs` tool group (the `[tools.fs]` table of `toolgate.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FsConfig {
    /// Read-before-write checking for `write`, `edit` and `multi_edit`.
    pub write_safety: WriteSafety,
    /// Extra denied globs, workspace-relative (`secrets/**`, `*.pem`): invisible to listing and
    /// search, refused for reading and writing. A glob without `/` matches a name at any depth.
    /// `.toolgate/` is always denied.
    pub denied: Vec<String>,
    /// Extra globs refused for writing only. `.git/hooks/`, `.git/config` and `toolgate.toml`
    /// are always refused for writing.
    pub denied_writes: Vec<String>,
    /// Files that agents load into their prompts; writing them needs approval. A name without
    /// `/` matches that file name at any depth (case-insensitively); otherwise a glob.
    pub instruction_files: Vec<String>,
    /// Whether writing an instruction file needs approval (unless auto-approved).
    pub approve_instruction_files: bool,
    /// Largest content `write` accepts, and largest file `edit`/`apply_patch` produce, in bytes.
    pub max_write_bytes: usize,
    /// Default page size of `read`, in bytes (at most [`FsConfig::read_page_max_bytes`]).
    pub read_page_bytes: usize,
    /// Largest page `read` returns when asked with `max_bytes`.
    pub read_page_max_bytes: usize,
    /// Largest image `read` returns as image content, in bytes.
    pub max_image_bytes: usize,
    /// Default number of result lines of `grep` (`head_limit` overrides).
    pub grep_max_results: usize,
    /// Most paths `glob` returns.
    pub glob_max_results: usize,
    /// Most entries `ls` returns.
    pub ls_max_entries: usize,
    /// Directory names `ls` skips unless asked for directly.
    pub ls_skip_dirs: Vec<String>,
    /// Default lifetime of a `lock_paths` lock, in milliseconds.
    pub lock_default_ttl_ms: u64,
    /// Longest lifetime a lock may ask for, in milliseconds.
    pub lock_max_ttl_ms: u64,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            write_safety: WriteSafety::Strict,
            denied: Vec::new(),
            denied_writes: Vec::new(),
            instruction_files: DEFAULT_INSTRUCTION_FILES.iter().map(|s| (*s).to_owned()).collect(),
            approve_instruction_files: true,
            max_write_bytes: 5 * 1024 * 1024,
            read_page_bytes: 50 * 1024,
            read_page_max_bytes: 512 * 1024,
            max_image_bytes: 10 * 1024 * 1024,
            grep_max_results: 250,
            glob_max_results: 200,
            ls_max_entries: 500,
            ls_skip_dirs: DEFAULT_SKIP_DIRS.iter().map(|s| (*s).to_owned()).collect(),
            lock_default_ttl_ms: 5 * 60 * 1000,
            lock_max_ttl_ms: 60 * 60 * 1000,
        }
    }
}

/// Instruction files agents load into their prompts (OpenClaw/GoClaw context files, Claude Code,
/// Codex, Gemini, Cursor, Copilot).
pub const DEFAULT_INSTRUCTION_FILES: &[&str] = &[
    "IDENTITY.md",
    "SOUL.md",
    "AGENTS.md",
    "AGENT.md",
    "USER.md",
    "HEARTBEAT.md",
    "MEMORY.md",
    "TOOLS.md",
    "BOOTSTRAP.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "GEMINI.md",
    ".cursorrules",
    ".windsurfrules",
    ".github/copilot-instructions.md",
];

/// Directories `ls` skips by default.
pub const DEFAULT_SKIP_DIRS: &[&str] = &[
    "node_modules",
    "target",
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    "dist",
    "build",
    ".next",
    ".cache",
    ".gradle",
    ".idea",
];
