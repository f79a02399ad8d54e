//! The patch format of Codex's `apply_patch`, parsed leniently.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path          lines follow, each starting with `+`
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path       optional
//! @@ optional context line    one or more chunks of ` ` / `-` / `+` lines
//! *** End of File             optional: the chunk must match at the end of the file
//! *** End Patch
//! ```
//!
//! Lenient like Codex: markers may be padded with whitespace, a heredoc wrapper (`<<'EOF'` …
//! `EOF`) is taken off, blank lines between chunks are skipped, and the first chunk of an update
//! may omit its `@@`. toolgate also accepts `@@ context @@` and unified-diff headers
//! (`@@ -1,3 +1,4 @@ context`), taking the text after them as the context line.

use std::fmt;

/// A parsed patch: its file operations in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    pub(crate) hunks: Vec<Hunk>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hunk {
    /// Create (or overwrite) a file with these contents.
    Add { path: String, contents: String },
    /// Delete a file.
    Delete { path: String },
    /// Change a file in place, optionally moving it.
    Update { path: String, move_to: Option<String>, chunks: Vec<Chunk> },
}

impl Hunk {
    /// The paths this operation writes, creates or deletes.
    pub(crate) fn paths(&self) -> Vec<&str> {
        match self {
            Hunk::Add { path, .. } | Hunk::Delete { path } => vec![path],
            Hunk::Update { path, move_to: None, .. } => vec![path],
            Hunk::Update { path, move_to: Some(to), .. } => vec![path, to],
        }
    }
}

/// One change inside an update: replace `old` lines with `new` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// The `@@ line` that anchors the chunk, if given.
    pub(crate) context: Option<String>,
    /// Lines to find (context and removed lines).
    pub(crate) old: Vec<String>,
    /// Lines to put in their place (context and added lines).
    pub(crate) new: Vec<String>,
    /// For each line of `new`: the index in `old` of the same context line, or `None` for an
    /// added line. Context lines are anchors, not edits: the file keeps its own spelling of them
    /// even when they matched only after normalization.
    pub(crate) context_of: Vec<Option<usize>>,
    /// `*** End of File`: the chunk must match at the end of the file.
    pub(crate) eof: bool,
    /// The line of the patch where the chunk starts (1-based), for messages.
    pub(crate) patch_line: usize,
}

impl Chunk {
    /// Adds an unchanged context line: to find, and to keep.
    fn push_context(&mut self, line: String) {
        self.context_of.push(Some(self.old.len()));
        self.old.push(line.clone());
        self.new.push(line);
    }
}

/// Why a patch could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// 1-based line number in the patch, when the error is at a line.
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "invalid patch at line {n}: {}", self.message),
            None => write!(f, "invalid patch: {}", self.message),
        }
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARKER: &str = "*** End of File";

fn err(line: Option<usize>, message: impl Into<String>) -> ParseError {
    ParseError { line, message: message.into() }
}

/// Parses a patch.
pub(crate) fn parse(text: &str) -> Result<Patch, ParseError> {
    let all: Vec<&str> = text.trim().lines().collect();
    // Lenient: a heredoc wrapper around the patch.
    let (lines, first_no) = strip_heredoc(&all);
    let Some(first) = lines.first() else {
        return Err(err(None, "the patch is empty; it must start with `*** Begin Patch` and end with `*** End Patch`"));
    };
    if first.trim() != BEGIN {
        return Err(err(Some(first_no), "the first line of the patch must be `*** Begin Patch`"));
    }
    let last = lines.last().map(|l| l.trim()).unwrap_or_default();
    if lines.len() < 2 || last != END {
        return Err(err(Some(first_no + lines.len() - 1), "the last line of the patch must be `*** End Patch`"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut hunks = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line_no = first_no + 1 + i;
        let header = body[i].trim();
        if header.is_empty() {
            i += 1;
            continue;
        }
        if let Some(path) = header.strip_prefix(ADD) {
            let path = non_empty_path(path, line_no)?;
            i += 1;
            let mut contents = String::new();
            while i < body.len() {
                match body[i].strip_prefix('+') {
                    Some(rest) => {
                        contents.push_str(rest);
                        contents.push('\n');
                        i += 1;
                    }
                    None => break,
                }
            }
            hunks.push(Hunk::Add { path, contents });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete { path: non_empty_path(path, line_no)? });
            i += 1;
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            let path = non_empty_path(path, line_no)?;
            i += 1;
            let mut move_to = None;
            if let Some(to) = body.get(i).and_then(|l| l.trim().strip_prefix(MOVE)) {
                move_to = Some(non_empty_path(to, first_no + 1 + i)?);
                i += 1;
            }
            let mut chunks = Vec::new();
            while i < body.len() {
                let line = body[i];
                if line.trim().is_empty() {
                    i += 1;
                    continue;
                }
                if line.starts_with("***") || is_file_header(line.trim()) {
                    break;
                }
                let (chunk, used) = parse_chunk(&body[i..], first_no + 1 + i, chunks.is_empty())?;
                chunks.push(chunk);
                i += used;
            }
            if chunks.is_empty() {
                return Err(err(
                    Some(line_no),
                    format!("the update of `{path}` is empty; give at least one chunk of `-`/`+`/` ` lines"),
                ));
            }
            hunks.push(Hunk::Update { path, move_to, chunks });
        } else {
            return Err(err(
                Some(line_no),
                format!(
                    "`{header}` is not a valid file operation; valid headers are `*** Add File: PATH`, \
                     `*** Delete File: PATH` and `*** Update File: PATH`"
                ),
            ));
        }
    }
    Ok(Patch { hunks })
}

fn is_file_header(trimmed: &str) -> bool {
    trimmed.starts_with(ADD) || trimmed.starts_with(DELETE) || trimmed.starts_with(UPDATE) || trimmed == END
}

fn non_empty_path(path: &str, line: usize) -> Result<String, ParseError> {
    let p = path.trim();
    if p.is_empty() {
        return Err(err(Some(line), "the file operation has no path"));
    }
    Ok(p.to_owned())
}

/// Takes off `<<'EOF'` / `<<EOF` / `<<"EOF"` … `EOF` around the patch. Returns the lines and
/// the 1-based number of the first.
fn strip_heredoc<'a, 'b>(all: &'b [&'a str]) -> (&'b [&'a str], usize) {
    if all.len() >= 4 {
        let first = all[0].trim();
        let last = all[all.len() - 1].trim();
        let tag =
            first.trim_start_matches("apply_patch").trim().strip_prefix("<<").map(|t| t.trim_matches(['\'', '"']));
        if let Some(tag) = tag
            && !tag.is_empty()
            && tag == last
        {
            return (&all[1..all.len() - 1], 2);
        }
    }
    (all, 1)
}

/// Parses one chunk starting at `lines[0]`. Returns it and how many lines it used.
fn parse_chunk(lines: &[&str], line_no: usize, first_chunk: bool) -> Result<(Chunk, usize), ParseError> {
    let head = lines[0].trim();
    let (context, mut used) = if head == "@@" {
        (None, 1)
    } else if let Some(rest) = head.strip_prefix("@@ ") {
        (context_of(rest), 1)
    } else if first_chunk {
        (None, 0)
    } else {
        return Err(err(
            Some(line_no),
            format!("expected a chunk starting with `@@` (optionally `@@ context line`), found `{}`", lines[0]),
        ));
    };
    let mut chunk =
        Chunk { context, old: Vec::new(), new: Vec::new(), context_of: Vec::new(), eof: false, patch_line: line_no };
    let mut body_lines = 0;
    while used < lines.len() {
        let line = lines[used];
        if line.trim() == EOF_MARKER {
            if body_lines == 0 {
                return Err(err(Some(line_no + used), "the chunk has no lines before `*** End of File`"));
            }
            chunk.eof = true;
            used += 1;
            break;
        }
        if line.starts_with("\\ No newline") {
            // Lenient: unified diff's marker carries no line.
            used += 1;
            continue;
        }
        match line.chars().next() {
            None => chunk.push_context(String::new()),
            Some(' ') => chunk.push_context(line[1..].to_owned()),
            Some('-') => chunk.old.push(line[1..].to_owned()),
            Some('+') => {
                chunk.new.push(line[1..].to_owned());
                chunk.context_of.push(None);
            }
            Some(_) => {
                if body_lines == 0 {
                    return Err(err(
                        Some(line_no + used),
                        format!(
                            "unexpected line `{line}` in an update chunk; every line must start with ` ` (context), \
                             `-` (removed) or `+` (added)"
                        ),
                    ));
                }
                break;
            }
        }
        body_lines += 1;
        used += 1;
    }
    if body_lines == 0 {
        return Err(err(Some(line_no), "the chunk has no lines"));
    }
    Ok((chunk, used))
}

/// The context line of `@@ rest`: `None` when empty; unified-diff ranges and a closing `@@` are
/// taken off.
fn context_of(rest: &str) -> Option<String> {
    let mut r = rest.trim();
    if let Some(after) = strip_ranges(r) {
        r = after;
    }
    if let Some(before) = r.strip_suffix("@@") {
        r = before.trim_end();
    }
    if r.is_empty() { None } else { Some(r.to_owned()) }
}

/// `-1,3 +1,4 @@ rest` → `rest`.
fn strip_ranges(s: &str) -> Option<&str> {
    let mut parts = s.splitn(3, ' ');
    let a = parts.next()?;
    let b = parts.next()?;
    let is_range = |t: &str, sign: char| {
        t.strip_prefix(sign).is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == ','))
    };
    if !(is_range(a, '-') && is_range(b, '+')) {
        return None;
    }
    let rest = parts.next().unwrap_or("").trim_start();
    Some(rest.strip_prefix("@@").unwrap_or(rest).trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_operations() {
        let p = parse(
            "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** Delete File: b.txt\n*** Update File: c.txt\n\
             *** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n*** End of File\n*** End Patch\n",
        );
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.hunks.len(), 3);
        assert_eq!(p.hunks[0], Hunk::Add { path: "a.txt".into(), contents: "hi\n".into() });
        let Hunk::Update { move_to, chunks, .. } = &p.hunks[2] else { panic!("not an update") };
        assert_eq!(move_to.as_deref(), Some("d.txt"));
        assert_eq!(chunks[0].context.as_deref(), Some("fn main"));
        assert_eq!(chunks[0].old, vec!["ctx", "old"]);
        assert_eq!(chunks[0].new, vec!["ctx", "new"]);
        assert!(chunks[0].eof);
    }

    #[test]
    fn lenient_forms() {
        let p =
            parse("<<'EOF'\n*** Begin Patch\n*** Update File: x\n@@ -1,2 +1,2 @@ def f():\n-a\n+b\n*** End Patch\nEOF");
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        let Hunk::Update { chunks, .. } = &p.hunks[0] else { panic!("not an update") };
        assert_eq!(chunks[0].context.as_deref(), Some("def f():"));
        let p = parse("*** Begin Patch\n*** Update File: x\n@@ ctx @@\n-a\n+b\n*** End Patch")
            .unwrap_or_else(|e| panic!("{e}"));
        let Hunk::Update { chunks, .. } = &p.hunks[0] else { panic!("not an update") };
        assert_eq!(chunks[0].context.as_deref(), Some("ctx"));
    }

    #[test]
    fn skips_no_newline_markers() {
        let p = parse("*** Begin Patch\n*** Update File: x\n@@\n-a\n\\ No newline at end of file\n+b\n*** End Patch");
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        let Hunk::Update { chunks, .. } = &p.hunks[0] else { panic!("not an update") };
        assert_eq!((chunks[0].old.clone(), chunks[0].new.clone()), (vec!["a".to_owned()], vec!["b".to_owned()]));
    }

    #[test]
    fn rejects_bad_patches() {
        assert!(parse("").is_err());
        assert!(parse("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Update File: foo\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: foo\n+x").is_err());
    }
}
