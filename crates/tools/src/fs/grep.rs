//! `grep`: search file contents with the ripgrep engine (`grep-searcher`, `grep-regex`, `ignore`).

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use rustix::fs::OFlags;
use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};

use super::confine::{PathError, RelPath, Root, absolute, rel_of};
use super::params;
use super::state::{FsState, denied, path_error};
use super::walk;

const NAME: &str = "grep";
/// Lines kept in memory across all files in content mode (at least 4 × `head_limit`); past it
/// matches are still counted but their lines are not kept.
const MAX_STORED_LINES: usize = 20_000;
/// Longest line shown in content mode, in characters.
const MAX_LINE_CHARS: usize = 1000;

/// How `grep` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputMode {
    /// `path:line:text` for every matching line (and `path-line-text` context lines).
    Content,
    /// The paths of files with at least one match.
    FilesWithMatches,
    /// `path:count` of matching lines per file.
    Count,
}

/// The `grep` tool.
#[derive(Debug)]
pub struct GrepTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl GrepTool {
    /// A `grep` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Search file contents with a regular expression (ripgrep's engine and syntax). Respects \
                 `.gitignore` and skips hidden and binary files. `output_mode`: `files_with_matches` (default) \
                 lists matching files; `content` shows `path:line:text` lines (with `context` lines around); \
                 `count` shows matches per file. Narrow with `path`, `glob` (`*.rs`, `src/**/*.ts`) or `type` \
                 (`rust`, `py`, `js`, ...). At most `head_limit` results (default {}) are shown, with a note when \
                 more exist.",
                state.config.grep_max_results
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "Regular expression (Rust regex syntax, like ripgrep)." },
                    "path": { "type": "string", "description": "File or directory to search, relative to the workspace (default: the whole workspace)." },
                    "glob": { "type": "string", "description": "Only files matching this glob, like `rg -g` (e.g. `*.rs`, `!*.min.js`)." },
                    "type": { "type": "string", "description": "Only files of this type, like `rg -t` (e.g. `rust`, `py`, `js`, `md`)." },
                    "case_insensitive": { "type": "boolean", "description": "Ignore case (default false)." },
                    "multiline": { "type": "boolean", "description": "Let the pattern span lines; `.` also matches newlines (default false)." },
                    "context": { "type": "integer", "minimum": 0, "maximum": 20, "description": "Lines of context before and after each match (content mode)." },
                    "output_mode": { "type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to report (default files_with_matches)." },
                    "head_limit": { "type": "integer", "minimum": 1, "description": "Most result lines to show." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::READ_ONLY);
        GrepTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for GrepTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_read_safety(params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, grep).await
    }
}

/// What one file produced.
#[derive(Debug)]
struct FileHits {
    rel: String,
    /// Matching lines.
    count: u64,
    /// Output lines (content mode), at most the head limit.
    lines: Vec<String>,
}

struct Collect<'a> {
    rel: &'a str,
    mode: OutputMode,
    keep: usize,
    /// Lines stored by all files so far; storing stops at [`MAX_STORED_LINES`].
    stored: &'a AtomicUsize,
    count: u64,
    lines: Vec<String>,
}

impl Collect<'_> {
    fn push(&mut self, sep: char, line_no: Option<u64>, bytes: &[u8]) {
        if self.lines.len() >= self.keep || self.stored.fetch_add(1, Ordering::Relaxed) >= self.stored_cap() {
            return;
        }
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        while text.ends_with('\n') || text.ends_with('\r') {
            text.pop();
        }
        if let Some((at, _)) = text.char_indices().nth(MAX_LINE_CHARS) {
            let more = text[at..].chars().count();
            text.truncate(at);
            text.push_str(&format!("… [{more} more characters]"));
        }
        let n = line_no.map(|n| n.to_string()).unwrap_or_default();
        self.lines.push(format!("{}{sep}{n}{sep}{text}", self.rel));
    }
}

impl Collect<'_> {
    fn stored_cap(&self) -> usize {
        self.keep.saturating_mul(4).max(MAX_STORED_LINES)
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let mut n = m.line_number();
        for line in m.lines() {
            self.count += 1;
            if self.mode == OutputMode::Content {
                self.push(':', n, line);
            }
            n = n.map(|x| x + 1);
        }
        Ok(self.mode != OutputMode::FilesWithMatches)
    }

    fn context(&mut self, _searcher: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.mode == OutputMode::Content && matches!(c.kind(), SinkContextKind::Before | SinkContextKind::After) {
            self.push('-', c.line_number(), c.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, io::Error> {
        if self.mode == OutputMode::Content && self.lines.len() < self.keep {
            self.lines.push("--".to_owned());
        }
        Ok(true)
    }
}

struct Search {
    matcher: RegexMatcher,
    builder: SearcherBuilder,
    mode: OutputMode,
    keep: usize,
    stored: AtomicUsize,
}

impl Search {
    fn file(&self, searcher: &mut Searcher, file: &std::fs::File, rel: &str) -> Option<FileHits> {
        let mut sink =
            Collect { rel, mode: self.mode, keep: self.keep, stored: &self.stored, count: 0, lines: Vec::new() };
        searcher.search_file(&self.matcher, file, &mut sink).ok()?;
        if sink.count == 0 {
            return None;
        }
        Some(FileHits { rel: rel.to_owned(), count: sink.count, lines: sink.lines })
    }
}

fn grep(state: &Arc<FsState>, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
    let pattern = params::string(NAME, params, "pattern")?;
    let mode = match params::opt_string(params, "output_mode").unwrap_or("files_with_matches") {
        "content" => OutputMode::Content,
        "files_with_matches" => OutputMode::FilesWithMatches,
        "count" => OutputMode::Count,
        other => {
            return Err(ToolError::invalid(
                NAME,
                "/output_mode",
                format!("unknown output_mode `{other}`; use content, files_with_matches or count"),
            ));
        }
    };
    let multiline = params::flag(params, "multiline");
    let context = usize::try_from(params::opt_u64(NAME, params, "context")?.unwrap_or(0).min(20)).unwrap_or(0);
    let head_limit = params::opt_u64(NAME, params, "head_limit")?
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .unwrap_or(state.config.grep_max_results)
        .max(1);

    let mut mb = RegexMatcherBuilder::new();
    mb.case_insensitive(params::flag(params, "case_insensitive"));
    if multiline {
        mb.multi_line(true).dot_matches_new_line(true);
    } else {
        mb.line_terminator(Some(b'\n'));
    }
    let matcher = mb
        .build(pattern)
        .map_err(|e| ToolError::invalid(NAME, "/pattern", format!("not a valid regular expression: {e}")))?;
    let mut builder = SearcherBuilder::new();
    builder
        // Only content mode shows line numbers; counting every newline of every file searched
        // costs a pass over the bytes that `count` and `files_with_matches` do not need (and
        // `rg -c` and `rg -l` do not take).
        .line_number(mode == OutputMode::Content)
        .multi_line(multiline)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .before_context(if mode == OutputMode::Content { context } else { 0 })
        .after_context(if mode == OutputMode::Content { context } else { 0 });
    let search = Search { matcher, builder, mode, keep: head_limit, stored: AtomicUsize::new(0) };

    let root = state.root(ctx)?;
    let start = state.resolve(NAME, root.path(), params::opt_string(params, "path").unwrap_or("."))?;
    let (fd, real) = match root.open_dir(&start) {
        Ok(d) => d,
        Err(PathError::NotADirectory) => {
            // A single file.
            let f = root.open_file(&start).map_err(|e| path_error(NAME, start.display(), e))?;
            if state.rules.denied(f.real.as_str()) {
                return Err(denied(NAME, &f.real));
            }
            let mut searcher = search.builder.build();
            let hits: Vec<FileHits> = search.file(&mut searcher, &f.file, f.real.as_str()).into_iter().collect();
            return Ok(report(hits, mode, head_limit, pattern, context > 0));
        }
        Err(e) => return Err(path_error(NAME, start.display(), e)),
    };
    drop(fd);
    if state.rules.denied(real.as_str()) {
        return Err(denied(NAME, &real));
    }

    let mut wb = walk::builder(state, root.path(), &real);
    let start_abs = absolute(root.path(), &real);
    if let Some(g) = params::opt_string(params, "glob") {
        let mut ob = OverrideBuilder::new(&start_abs);
        for part in split_globs(g) {
            ob.add(part).map_err(|e| ToolError::invalid(NAME, "/glob", format!("not a valid glob: {e}")))?;
        }
        let o = ob.build().map_err(|e| ToolError::invalid(NAME, "/glob", format!("not a valid glob: {e}")))?;
        wb.overrides(o);
    }
    if let Some(t) = params::opt_string(params, "type") {
        let mut tb = TypesBuilder::new();
        tb.add_defaults().select(t);
        let types = tb.build().map_err(|e| {
            ToolError::invalid(
                NAME,
                "/type",
                format!("{e}; common types: rust, py, js, ts, go, java, c, cpp, md, json"),
            )
        })?;
        wb.types(types);
    }

    let hits: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    let root = Arc::new(root);
    let cancel = ctx.cancel.clone();
    wb.build_parallel().run(|| {
        let root: Arc<Root> = root.clone();
        let search = &search;
        let hits = &hits;
        let cancel = cancel.clone();
        let mut searcher = search.builder.build();
        let mut sink = FlushOnDrop { hits, local: Vec::new() };
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let Some(rel) = rel_of(root.path(), entry.path()) else { return WalkState::Continue };
            // Opened beneath the root without following any symlink: a directory swapped for a
            // link during the walk is refused here.
            let Ok(fd) = root.open_walked(&rel) else { return WalkState::Continue };
            let file = std::fs::File::from(fd);
            if let Some(h) = search.file(&mut searcher, &file, rel.as_str()) {
                sink.local.push(h);
            }
            WalkState::Continue
        })
    });
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let hits = hits.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(report(hits, mode, head_limit, pattern, context > 0))
}

/// Moves a worker's results into the shared list when the worker ends.
struct FlushOnDrop<'a> {
    hits: &'a Mutex<Vec<FileHits>>,
    local: Vec<FileHits>,
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        if !self.local.is_empty() {
            let mut all = self.hits.lock().unwrap_or_else(|p| p.into_inner());
            all.append(&mut self.local);
        }
    }
}

/// `a,b` or whitespace-separated globs; braces keep their commas.
fn split_globs(g: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in g.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' | ' ' if depth == 0 => {
                if i > start {
                    out.push(&g[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < g.len() {
        out.push(&g[start..]);
    }
    out
}

fn report(
    mut hits: Vec<FileHits>,
    mode: OutputMode,
    head_limit: usize,
    pattern: &str,
    with_context: bool,
) -> ToolOutput {
    hits.sort_by(|a, b| a.rel.cmp(&b.rel));
    let files = hits.len();
    let total_matches: u64 = hits.iter().map(|h| h.count).sum();
    if files == 0 {
        return ToolOutput::text(format!("No matches for `{pattern}`.")).with_meta(json!({
            "files": 0, "matches": 0, "shown": 0, "truncated": false
        }));
    }
    let mut out = String::new();
    let mut shown = 0usize;
    let mut available = 0usize;
    match mode {
        OutputMode::FilesWithMatches => {
            available = files;
            for h in hits.iter().take(head_limit) {
                out.push_str(&h.rel);
                out.push('\n');
                shown += 1;
            }
        }
        OutputMode::Count => {
            available = files;
            for h in hits.iter().take(head_limit) {
                out.push_str(&format!("{}:{}\n", h.rel, h.count));
                shown += 1;
            }
        }
        OutputMode::Content => {
            for (i, h) in hits.iter().enumerate() {
                let lines_here = h.lines.len().max(usize::try_from(h.count).unwrap_or(usize::MAX));
                available += lines_here;
                for l in &h.lines {
                    if shown >= head_limit {
                        break;
                    }
                    out.push_str(l);
                    out.push('\n');
                    shown += 1;
                }
                if with_context && shown < head_limit && i + 1 < hits.len() {
                    // Keep groups from different files apart, like ripgrep.
                    out.push_str("--\n");
                }
            }
        }
    }
    let truncated = shown < available;
    if truncated {
        out.push_str(&format!(
            "\n[Results cut: showing {shown} of {available} {}. Narrow the search with `path`, `glob` or `type`, \
             or raise `head_limit`.]\n",
            if mode == OutputMode::Content { "lines" } else { "files" }
        ));
    }
    ToolOutput::text(out).with_meta(json!({
        "files": files,
        "matches": total_matches,
        "shown": shown,
        "truncated": truncated,
    }))
}

impl Root {
    /// Opens a file found by a walk: beneath the root, following no symlink at all (the walk
    /// follows none, so one appearing now is a race and is refused).
    pub(crate) fn open_walked(&self, rel: &RelPath) -> Result<std::os::fd::OwnedFd, PathError> {
        self.open_beneath_strict(rel, OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK)
    }
}
