//! `read`: a file with line numbers, paged; images as image content; binary files refused.

use std::io::{BufRead, BufReader, Read as _, Seek as _, SeekFrom};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{Annotations, CallContext, CallSafety, Content, Tool, ToolError, ToolOutput, ToolSpec};

use super::confine::PathError;
use super::params;
use super::state::{FileStamp, FsState, denied, path_error};

const NAME: &str = "read";
/// Default number of lines.
const DEFAULT_LIMIT: u64 = 2000;
/// Longest line shown whole, in characters.
const MAX_LINE_CHARS: usize = 2000;
/// Files up to this size are read whole (hashed for read-before-write, every line counted);
/// larger ones a page at a time ([`read_large`]).
const WHOLE_FILE_MAX: u64 = 8 << 20;

/// The `read` tool.
#[derive(Debug)]
pub struct ReadTool {
    spec: ToolSpec,
    state: Arc<FsState>,
}

impl ReadTool {
    /// A `read` tool over `state`.
    pub fn new(state: Arc<FsState>) -> Self {
        let page = state.config.read_page_bytes;
        let max = state.config.read_page_max_bytes;
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Read a file in the workspace. Returns its lines numbered like `cat -n` (number, tab, line). \
                 Reads up to {DEFAULT_LIMIT} lines and {page} bytes per call from `offset` (1-based line number); \
                 when the file goes on, the output ends with a notice giving the `offset` to read on. Lines longer \
                 than {MAX_LINE_CHARS} characters are cut. Images (PNG, JPEG, GIF, WebP) come back as images; \
                 other binary files are refused. Reading a file is required before `write` or `edit` change it."
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "File path, relative to the workspace root." },
                    "offset": { "type": "integer", "minimum": 0, "description": "Line number to start at (1-based; default 1)." },
                    "limit": { "type": "integer", "minimum": 1, "description": "Most lines to return (default 2000)." },
                    "max_bytes": { "type": "integer", "minimum": 1, "maximum": max, "description": format!("Page size in bytes (default {page}, at most {max}).") }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .group("fs")
        .annotations(Annotations::READ_ONLY);
        ReadTool { spec, state }
    }
}

#[toolgate_core::async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        params::path_read_safety(params)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        params::blocking(NAME, &self.state, ctx, params, read).await
    }
}

fn read(state: &Arc<FsState>, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
    let input = params::string(NAME, params, "path")?;
    let offset = params::opt_u64(NAME, params, "offset")?.unwrap_or(1).max(1);
    let limit = params::opt_u64(NAME, params, "limit")?.unwrap_or(DEFAULT_LIMIT).max(1);
    let max_page = state.config.read_page_max_bytes;
    let page = params::opt_u64(NAME, params, "max_bytes")?
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX))
        .unwrap_or(state.config.read_page_bytes)
        .clamp(1, max_page);
    let root = state.root(ctx)?;
    let rel = state.resolve(NAME, root.path(), input)?;
    if let Some(r) = state.redirected(ctx, &rel) {
        return read_redirected(&rel, &r.read(ctx, rel.as_str())?, offset, limit, page);
    }
    let opened = match root.open_file(&rel) {
        Ok(f) => f,
        Err(PathError::IsDirectory) => {
            return Err(ToolError::invalid(
                NAME,
                "/path",
                format!("`{rel}` is a directory; use `ls` to list it or `glob` to find files in it"),
            ));
        }
        Err(e) => return Err(path_error(NAME, rel.display(), e)),
    };
    if state.rules.denied(opened.real.as_str()) {
        return Err(denied(NAME, &opened.real));
    }
    let size = u64::try_from(opened.stat.st_size).unwrap_or(0);
    let mut reader = BufReader::with_capacity(64 * 1024, opened.file);
    let head = reader.fill_buf().map_err(|e| io_failed(&rel, e))?;
    if let Some(mime) = image_mime(head) {
        return read_image(state, ctx, &opened.real, &opened.stat, reader, size, mime);
    }
    if looks_binary(head) {
        // Recorded as seen anyway, so the model may replace it with `write`.
        let mut hasher = Sha256::new();
        std::io::copy(&mut reader, &mut HashWriter(&mut hasher)).map_err(|e| io_failed(&rel, e))?;
        state.record(ctx, &opened.real, FileStamp::with_hash(&opened.stat, hasher.finalize().into()));
        return Err(ToolError::failed(format!(
            "`{rel}` is a binary file ({size} bytes); `read` shows text files and images only. Use `ls` for its size, \
             or a command-line tool (`xxd`, `file`) to inspect it"
        )));
    }

    if size > WHOLE_FILE_MAX {
        let page = Page { offset, limit, bytes: page };
        let out = read_large(state, &rel, reader, &opened.stat, page)?;
        state.record(ctx, &opened.real, FileStamp::of_metadata(&opened.stat));
        return Ok(out);
    }
    let mut hasher = Sha256::new();
    let mut out = String::new();
    let mut line_no: u64 = 0;
    let mut shown_first = 0;
    let mut shown_last = 0;
    let mut page_full = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(|e| io_failed(&rel, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf);
        line_no += 1;
        if line_no < offset || page_full || line_no >= offset + limit {
            continue;
        }
        let mut line: &[u8] = &buf;
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        let text = String::from_utf8_lossy(line);
        let shown = cut_line(&text);
        let entry = format!("{line_no:>6}\t{shown}\n");
        if !out.is_empty() && out.len() + entry.len() > page {
            page_full = true;
            continue;
        }
        if shown_first == 0 {
            shown_first = line_no;
        }
        shown_last = line_no;
        out.push_str(&entry);
    }
    let total = line_no;
    state.record(ctx, &opened.real, FileStamp::with_hash(&opened.stat, hasher.finalize().into()));

    if total == 0 {
        return Ok(ToolOutput::text(format!("`{rel}` is empty (0 bytes).")));
    }
    if offset > total {
        return Err(ToolError::invalid(
            NAME,
            "/offset",
            format!(
                "offset {offset} is past the end of `{rel}`, which has {total} lines; use an offset from 1 to {total}"
            ),
        ));
    }
    if shown_last < total {
        let why =
            if page_full { format!("the page limit of {page} bytes") } else { format!("the limit of {limit} lines") };
        out.push_str(&format!(
            "\n[Showing lines {shown_first}-{shown_last} of {total} ({why}). To read on, call `read` with \
             offset={}.]\n",
            shown_last + 1
        ));
    }
    Ok(ToolOutput::text(out).with_meta(json!({
        "path": rel.as_str(),
        "first_line": shown_first,
        "last_line": shown_last,
        "total_lines": total,
        "bytes": size,
    })))
}

/// Which lines a call asks for.
#[derive(Debug, Clone, Copy)]
struct Page {
    offset: u64,
    limit: u64,
    bytes: usize,
}

/// A page of a file over [`WHOLE_FILE_MAX`]: the lines before it are skipped at memory speed
/// (newlines counted, nothing decoded), and nothing after it is read, so the first page of a
/// 1 GB log costs what `head` does. The file is not hashed (its read-before-write stamp is its
/// size and modification time). Its lines are counted in the background (`lines`): until that
/// count is in, the notice says "at least N lines"; once it is, a later call on the unchanged
/// file gets the exact total and starts its skip from the nearest checkpoint.
fn read_large(
    state: &FsState,
    rel: &super::confine::RelPath,
    mut reader: BufReader<std::fs::File>,
    stat: &rustix::fs::Stat,
    page: Page,
) -> Result<ToolOutput, ToolError> {
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    let past_end = |total: u64| {
        ToolError::invalid(
            NAME,
            "/offset",
            format!(
                "offset {} is past the end of `{rel}`, which has {total} lines; use an offset from 1 to {total}",
                page.offset
            ),
        )
    };
    let counted = state.lines.get(stat);
    let mut skipped = 0;
    if let Some(c) = &counted {
        if page.offset > c.total {
            return Err(past_end(c.total));
        }
        let (before, at) = c.checkpoint(page.offset);
        if before > 0 {
            reader.seek(SeekFrom::Start(at)).map_err(|e| io_failed(rel, e))?;
            skipped = before;
        }
    }
    skipped += skip_lines(&mut reader, page.offset - 1 - skipped).map_err(|e| io_failed(rel, e))?;
    if skipped < page.offset - 1 {
        return Err(past_end(skipped));
    }
    let mut out = String::new();
    let mut line_no = skipped;
    let mut page_full = false;
    let mut buf = Vec::new();
    while line_no < page.offset - 1 + page.limit {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(|e| io_failed(rel, e))? == 0 {
            break;
        }
        let entry = format!("{:>6}\t{}\n", line_no + 1, cut_line(&String::from_utf8_lossy(trim_eol(&buf))));
        if !out.is_empty() && out.len() + entry.len() > page.bytes {
            page_full = true;
            break;
        }
        line_no += 1;
        out.push_str(&entry);
    }
    let at_end = !page_full && reader.fill_buf().map_err(|e| io_failed(rel, e))?.is_empty();
    let (first, last) = (page.offset, line_no);
    if out.is_empty() {
        return Err(past_end(skipped));
    }
    let total = if at_end { Some(last) } else { counted.as_ref().map(|c| c.total) };
    // Lines known to exist without reading further: the one the page had no room for and
    // those already in the buffer (a trailing part of a line counts as one).
    let rest = reader.buffer();
    let at_least = last
        + u64::from(page_full)
        + memchr::memchr_iter(b'\n', rest).count() as u64
        + u64::from(rest.last().is_some_and(|&b| b != b'\n'));
    if total.is_none() {
        state.lines.start(reader.get_ref(), stat);
    }
    if !at_end {
        let why = if page_full {
            format!("the page limit of {} bytes", page.bytes)
        } else {
            format!("the limit of {} lines", page.limit)
        };
        let of = match total {
            Some(t) => format!("{t}"),
            None => format!(
                "at least {at_least} lines of a file of {size} bytes ({why}; its lines are being counted, a later \
                 call says how many)"
            ),
        };
        let why = if total.is_some() { format!(" ({why})") } else { String::new() };
        out.push_str(&format!(
            "\n[Showing lines {first}-{last} of {of}{why}. To read on, call `read` with offset={}.]\n",
            last + 1
        ));
    }
    let mut meta = json!({
        "path": rel.as_str(),
        "first_line": first,
        "last_line": last,
        "total_lines": total,
        "bytes": size,
    });
    if total.is_none() {
        meta["total_lines_at_least"] = json!(at_least);
    }
    Ok(ToolOutput::text(out).with_meta(meta))
}

/// Consumes the first `n` lines; returns how many there were (fewer at the end of the file,
/// where a last line without a newline counts).
fn skip_lines(reader: &mut impl BufRead, n: u64) -> std::io::Result<u64> {
    let mut seen = 0;
    let mut partial = false;
    while seen < n {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(seen + u64::from(partial));
        }
        let mut used = buf.len();
        for at in memchr::memchr_iter(b'\n', buf) {
            seen += 1;
            if seen == n {
                used = at + 1;
                break;
            }
        }
        partial = used == buf.len() && buf.last() != Some(&b'\n');
        reader.consume(used);
    }
    Ok(seen)
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A page of a file served by a redirect (managed memory), numbered like a file on disk.
fn read_redirected(
    rel: &super::confine::RelPath,
    text: &str,
    offset: u64,
    limit: u64,
    page: usize,
) -> Result<ToolOutput, ToolError> {
    let total = text.lines().count() as u64;
    if total == 0 {
        return Ok(ToolOutput::text(format!("`{rel}` is empty (0 bytes).")));
    }
    if offset > total {
        return Err(ToolError::invalid(
            NAME,
            "/offset",
            format!(
                "offset {offset} is past the end of `{rel}`, which has {total} lines; use an offset from 1 to {total}"
            ),
        ));
    }
    let mut out = String::new();
    let mut last = offset - 1;
    for (line_no, line) in (1u64..).zip(text.lines()).skip((offset - 1) as usize).take(limit as usize) {
        let entry = format!("{line_no:>6}\t{}\n", cut_line(line.strip_suffix('\r').unwrap_or(line)));
        if !out.is_empty() && out.len() + entry.len() > page {
            break;
        }
        out.push_str(&entry);
        last = line_no;
    }
    if last < total {
        out.push_str(&format!(
            "\n[Showing lines {offset}-{last} of {total}. To read on, call `read` with offset={}.]\n",
            last + 1
        ));
    }
    Ok(ToolOutput::text(out).with_meta(json!({
        "path": rel.as_str(),
        "first_line": offset,
        "last_line": last,
        "total_lines": total,
        "bytes": text.len(),
    })))
}

fn io_failed(rel: &super::confine::RelPath, e: std::io::Error) -> ToolError {
    ToolError::failed(format!("reading `{rel}` failed: {e}"))
}

fn cut_line(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => {
            let more = text[at..].chars().count();
            std::borrow::Cow::Owned(format!("{}… [line truncated: {more} more characters]", &text[..at]))
        }
    }
}

/// A NUL byte in the first 8 KiB means binary (what git and ripgrep use).
fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(8192)].contains(&0)
}

/// The MIME type of an image format a model can see, from its magic bytes.
pub(crate) fn image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn read_image(
    state: &FsState,
    ctx: &CallContext,
    rel: &super::confine::RelPath,
    stat: &rustix::fs::Stat,
    mut reader: BufReader<std::fs::File>,
    size: u64,
    mime: &'static str,
) -> Result<ToolOutput, ToolError> {
    let max = state.config.max_image_bytes;
    if size > max as u64 {
        return Err(ToolError::failed(format!(
            "`{rel}` is an image of {size} bytes, larger than the {max} bytes `read` returns; resize it first"
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    (&mut reader).take(max as u64 + 1).read_to_end(&mut bytes).map_err(|e| io_failed(rel, e))?;
    state.record(ctx, rel, FileStamp::of(stat, &bytes));
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ToolOutput {
        content: vec![
            Content::Text { text: format!("`{rel}`: {mime}, {} bytes", bytes.len()) },
            Content::Image { data, mime_type: mime.to_owned() },
        ],
        ..ToolOutput::default()
    })
}

/// Feeds what is written into a hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
