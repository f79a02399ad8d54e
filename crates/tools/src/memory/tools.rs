//! The five memory tools.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches};
use toolgate_store::memory::{MemoryError, MemoryStore, Scope, SearchOptions, WriteMode, paths};

const GROUP: &str = "memory";
/// Most lines `memory_get` returns at once.
const MAX_GET_LINES: u64 = 500;
/// Deepest `memory_tree` listing.
const MAX_DEPTH: u64 = 10;
/// Most results `memory_search` returns.
const MAX_RESULTS: u64 = 50;

fn scope(ctx: &CallContext) -> Scope {
    Scope { user: ctx.identity.user.clone(), agent: ctx.identity.agent.clone() }
}

/// A memory error as a tool error a model can act on.
fn tool_error(tool: &str, e: MemoryError) -> ToolError {
    match e {
        MemoryError::InvalidPath { .. } => ToolError::invalid(tool, "/path", e.to_string()),
        MemoryError::NotFound { path } => ToolError::NotFound {
            what: format!("memory note `{path}`"),
            hint: Some("use memory_tree to see the notes, or memory_search to find one".into()),
        },
        MemoryError::Invalid(msg) => ToolError::failed(msg),
        other => ToolError::failed(other.to_string()),
    }
}

fn str_param<'a>(tool: &str, params: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    params.get(name).and_then(Value::as_str).ok_or_else(|| {
        ToolError::invalid(tool, format!("/{name}"), format!("`{name}` is required and must be a string"))
    })
}

fn u64_param(tool: &str, params: &Value, name: &str, default: u64, min: u64, max: u64) -> Result<u64, ToolError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(ToolError::invalid(
                tool,
                format!("/{name}"),
                format!("`{name}` must be an integer from {min} to {max}"),
            )),
        },
    }
}

async fn blocking<T: Send + 'static>(
    tool: &'static str,
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ToolError::failed(format!("{tool} failed: {e}")))?
}

fn read_safety(path: Option<&str>) -> CallSafety {
    let reads = path.map(|p| vec![p.to_owned()]).unwrap_or_default();
    CallSafety { read_only: true, touches: Touches { reads, ..Touches::default() }, ..CallSafety::default() }
}

// --- memory_search ---------------------------------------------------------------------------

const SEARCH: &str = "memory_search";

/// `memory_search`.
#[derive(Debug)]
pub struct MemorySearchTool {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemorySearchTool {
    /// A `memory_search` tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let spec = ToolSpec::new(
            SEARCH,
            "Search your memory notes (MEMORY.md and memory/) by words and by meaning; a note is found even \
             when it shares no words with the query. Call this before answering questions about the user, \
             earlier work or decisions. Returns the best matches with path, line range, score (0-1) and a \
             snippet; read more of a hit with memory_get.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What to look for, in plain words." },
                    "max_results": { "type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Most results (default 6)." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Same as max_results." },
                    "min_score": { "type": "number", "minimum": 0, "maximum": 1, "description": "Lowest score returned (default 0.35)." }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .group(GROUP)
        .annotations(Annotations::READ_ONLY);
        MemorySearchTool { spec, store }
    }
}

#[toolgate_core::async_trait]
impl Tool for MemorySearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, _params: &Value) -> CallSafety {
        read_safety(None)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let query = str_param(SEARCH, &params, "query")?.to_owned();
        if query.trim().is_empty() {
            return Err(ToolError::invalid(SEARCH, "/query", "the query is empty; say what to look for"));
        }
        let default = u64_param(SEARCH, &params, "limit", 6, 1, MAX_RESULTS)?;
        let limit = u64_param(SEARCH, &params, "max_results", default, 1, MAX_RESULTS)? as usize;
        let min_score = match params.get("min_score") {
            None | Some(Value::Null) => 0.35,
            Some(v) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => x,
                _ => return Err(ToolError::invalid(SEARCH, "/min_score", "`min_score` must be a number from 0 to 1")),
            },
        };
        let store = self.store.clone();
        let scope = scope(ctx);
        let results = blocking(SEARCH, move || {
            store.search(&scope, &query, &SearchOptions { limit, min_score }).map_err(|e| tool_error(SEARCH, e))
        })
        .await?;
        let mut text = String::new();
        let mode = if results.model.is_some() { "hybrid" } else { "full-text only" };
        if results.hits.is_empty() {
            text.push_str("No memory note matches.");
        }
        for (i, h) in results.hits.iter().enumerate() {
            let how = match (h.by_text, h.by_meaning) {
                (true, true) => "words+meaning",
                (true, false) => "words",
                _ => "meaning",
            };
            text.push_str(&format!(
                "{}. {}:{}-{} (score {:.3}, {how})\n   {}\n",
                i + 1,
                h.path,
                h.start_line,
                h.end_line,
                h.score,
                h.snippet
            ));
        }
        text.push_str(&format!("\n[search: {mode}"));
        if let Some(m) = &results.model {
            text.push_str(&format!(", model {m}"));
        }
        text.push(']');
        for n in &results.notes {
            text.push_str(&format!("\nNote: {n}"));
        }
        let hits: Vec<Value> = results
            .hits
            .iter()
            .map(|h| {
                json!({
                    "path": h.path, "start_line": h.start_line, "end_line": h.end_line,
                    "score": h.score, "snippet": h.snippet, "by_text": h.by_text, "by_meaning": h.by_meaning,
                })
            })
            .collect();
        Ok(ToolOutput::text(text).with_meta(json!({
            "results": hits,
            "mode": if results.model.is_some() { "hybrid" } else { "fts" },
            "model": results.model,
            "notes": results.notes,
        })))
    }
}

// --- memory_write ----------------------------------------------------------------------------

const WRITE: &str = "memory_write";

/// `memory_write`.
#[derive(Debug)]
pub struct MemoryWriteTool {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryWriteTool {
    /// A `memory_write` tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let spec = ToolSpec::new(
            WRITE,
            "Save something to remember across sessions. target: `memory` (MEMORY.md, lasting facts about the \
             user and decisions; the default), `daily_log` (today's log, memory/daily/YYYY-MM-DD.md, appended), \
             `heartbeat` (memory/heartbeat.md), or a path under memory/ ending in .md. append=true adds to the \
             end; otherwise the note is replaced. The note is searchable as soon as this returns.",
            json!({
                "type": "object",
                "properties": {
                    "content": { "type": "string", "description": "Markdown to write." },
                    "target": { "type": "string", "description": "memory, daily_log, heartbeat, or a path under memory/ (e.g. memory/people/ann.md)." },
                    "append": { "type": "boolean", "description": "Add to the end instead of replacing (default: true for daily_log, false otherwise)." }
                },
                "required": ["content"],
                "additionalProperties": false
            }),
        )
        .group(GROUP)
        .annotations(Annotations::LOCAL_WRITE);
        MemoryWriteTool { spec, store }
    }
}

/// The note a `target` names.
fn target_path(target: &str) -> String {
    match target {
        "" | "memory" | "MEMORY" => "MEMORY.md".into(),
        "daily_log" | "daily" => format!("memory/daily/{}.md", chrono::Utc::now().format("%Y-%m-%d")),
        "heartbeat" => "memory/heartbeat.md".into(),
        other => other.to_owned(),
    }
}

#[toolgate_core::async_trait]
impl Tool for MemoryWriteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let target = params.get("target").and_then(Value::as_str).unwrap_or("memory");
        let path = target_path(target);
        let writes = vec![paths::normalize(&path, false).unwrap_or(path)];
        CallSafety { touches: Touches { writes, ..Touches::default() }, ..CallSafety::default() }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let content = str_param(WRITE, &params, "content")?.to_owned();
        let target = match params.get("target") {
            None | Some(Value::Null) => "memory",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(ToolError::invalid(WRITE, "/target", "`target` must be a string")),
        };
        let append = match params.get("append") {
            None | Some(Value::Null) => target == "daily_log",
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ToolError::invalid(WRITE, "/append", "`append` must be true or false")),
        };
        let path = target_path(target);
        if let Err(e) = paths::normalize_note(&path) {
            return Err(ToolError::invalid(WRITE, "/target", e.to_string()));
        }
        let store = self.store.clone();
        let scope = scope(ctx);
        let mode = if append { WriteMode::Append } else { WriteMode::Replace };
        let written = blocking(WRITE, move || {
            store.write(&scope, &path, &content, mode).map_err(|e| match e {
                MemoryError::InvalidPath { .. } => ToolError::invalid(WRITE, "/target", e.to_string()),
                MemoryError::TooLarge { .. } => ToolError::invalid(WRITE, "/content", e.to_string()),
                other => tool_error(WRITE, other),
            })
        })
        .await?;
        let verb = match (written.created, append) {
            (true, _) => "Created",
            (false, true) => "Appended to",
            (false, false) => "Replaced",
        };
        let mut text =
            format!("{verb} `{}` ({} bytes, {} chunks indexed).", written.path, written.bytes, written.chunks);
        for n in &written.notes {
            text.push_str(&format!("\nNote: {n}"));
        }
        Ok(ToolOutput::text(text).with_meta(json!({
            "path": written.path, "created": written.created, "bytes": written.bytes, "chunks": written.chunks,
        })))
    }
}

// --- memory_read -----------------------------------------------------------------------------

const READ: &str = "memory_read";

/// `memory_read`.
#[derive(Debug)]
pub struct MemoryReadTool {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryReadTool {
    /// A `memory_read` tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let spec = ToolSpec::new(
            READ,
            "Read a whole memory note: `MEMORY.md` or a path under memory/. For part of a long note use memory_get.",
            json!({
                "type": "object",
                "properties": { "path": { "type": "string", "description": "MEMORY.md or memory/..." } },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .group(GROUP)
        .annotations(Annotations::READ_ONLY);
        MemoryReadTool { spec, store }
    }
}

#[toolgate_core::async_trait]
impl Tool for MemoryReadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        read_safety(params.get("path").and_then(Value::as_str))
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let path = str_param(READ, &params, "path")?.to_owned();
        let store = self.store.clone();
        let scope = scope(ctx);
        let p = path.clone();
        let text = blocking(READ, move || store.read(&scope, &p).map_err(|e| tool_error(READ, e))).await?;
        let lines = text.lines().count();
        Ok(ToolOutput::text(text.clone()).with_meta(json!({ "path": path, "lines": lines, "content": text })))
    }
}

// --- memory_get ------------------------------------------------------------------------------

const GET: &str = "memory_get";

/// `memory_get`.
#[derive(Debug)]
pub struct MemoryGetTool {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryGetTool {
    /// A `memory_get` tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let spec = ToolSpec::new(
            GET,
            "Read some lines of a memory note, with line numbers: typically the range a memory_search hit gave.",
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "MEMORY.md or memory/..." },
                    "from": { "type": "integer", "minimum": 1, "description": "First line, 1-based (default 1)." },
                    "lines": { "type": "integer", "minimum": 1, "maximum": MAX_GET_LINES, "description": "How many lines (default 50)." }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .group(GROUP)
        .annotations(Annotations::READ_ONLY);
        MemoryGetTool { spec, store }
    }
}

#[toolgate_core::async_trait]
impl Tool for MemoryGetTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        read_safety(params.get("path").and_then(Value::as_str))
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let path = str_param(GET, &params, "path")?.to_owned();
        let from = u64_param(GET, &params, "from", 1, 1, u64::from(u32::MAX))? as usize;
        let count = u64_param(GET, &params, "lines", 50, 1, MAX_GET_LINES)? as usize;
        let store = self.store.clone();
        let scope = scope(ctx);
        let p = path.clone();
        let text = blocking(GET, move || store.read(&scope, &p).map_err(|e| tool_error(GET, e))).await?;
        let total = text.lines().count();
        if from > total.max(1) {
            return Err(ToolError::invalid(
                GET,
                "/from",
                format!("`{path}` has {total} lines; `from` must be at most {}", total.max(1)),
            ));
        }
        let mut out = String::new();
        let mut last = from.saturating_sub(1);
        for (i, line) in text.lines().enumerate().skip(from - 1).take(count) {
            out.push_str(&format!("{:>5}\t{line}\n", i + 1));
            last = i + 1;
        }
        if last < total {
            out.push_str(&format!("[lines {from}-{last} of {total}; continue with from={}]\n", last + 1));
        }
        Ok(ToolOutput::text(out).with_meta(json!({ "path": path, "from": from, "to": last, "total_lines": total })))
    }
}

// --- memory_tree -----------------------------------------------------------------------------

const TREE: &str = "memory_tree";

/// `memory_tree`.
#[derive(Debug)]
pub struct MemoryTreeTool {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryTreeTool {
    /// A `memory_tree` tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let spec = ToolSpec::new(
            TREE,
            "List memory notes and folders (MEMORY.md and memory/), with sizes.",
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "A folder under memory/ (default: everything)." },
                    "depth": { "type": "integer", "minimum": 0, "maximum": MAX_DEPTH, "description": "Folder levels to descend (default 3)." }
                },
                "additionalProperties": false
            }),
        )
        .group(GROUP)
        .annotations(Annotations::READ_ONLY);
        MemoryTreeTool { spec, store }
    }
}

#[toolgate_core::async_trait]
impl Tool for MemoryTreeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        read_safety(params.get("path").and_then(Value::as_str))
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let path = match params.get("path") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ToolError::invalid(TREE, "/path", "`path` must be a string")),
        };
        let depth = u64_param(TREE, &params, "depth", 3, 0, MAX_DEPTH)? as usize;
        let store = self.store.clone();
        let scope = scope(ctx);
        let entries = blocking(TREE, move || store.tree(&scope, &path, depth).map_err(|e| tool_error(TREE, e))).await?;
        let mut text = String::new();
        if entries.is_empty() {
            text.push_str("No memory notes yet; write one with memory_write.");
        }
        for e in &entries {
            let indent = "  ".repeat(e.depth);
            if e.path.ends_with('/') {
                text.push_str(&format!("{indent}{}\n", e.path));
            } else {
                text.push_str(&format!("{indent}{} ({} bytes)\n", e.path, e.bytes));
            }
        }
        let list: Vec<Value> =
            entries.iter().map(|e| json!({ "path": e.path, "bytes": e.bytes, "depth": e.depth })).collect();
        Ok(ToolOutput::text(text).with_meta(json!({ "entries": list })))
    }
}
