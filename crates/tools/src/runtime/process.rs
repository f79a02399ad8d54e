//! `process`: the background processes `exec` started: list, poll, log, write, signal, kill.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_sandbox::CapturedOutput;
use toolgate_store::LocalOwner;

use super::Runtime;
use super::exec::opt_u64;
use super::render::{cut, log_hint};
use super::run::{OUTPUTS_DIR, rel_log, valid_id};
use super::table::{Entry, StoppedBy};

const NAME: &str = "process";
/// Lines `log` returns when `limit` is not given.
const DEFAULT_LOG_LINES: u64 = 200;
/// Most lines one `log` page returns.
const MAX_LOG_LINES: u64 = 5000;
/// Longest `wait` of a `poll`, in seconds.
const MAX_POLL_WAIT: u64 = 60;
/// Largest input one `write` sends.
const MAX_WRITE_BYTES: usize = 64 * 1024;

/// Signals `signal` may send, by name.
const SIGNALS: &[(&str, i32)] = &[
    ("INT", libc::SIGINT),
    ("TERM", libc::SIGTERM),
    ("HUP", libc::SIGHUP),
    ("QUIT", libc::SIGQUIT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("STOP", libc::SIGSTOP),
    ("CONT", libc::SIGCONT),
];

/// The `process` tool.
#[derive(Debug)]
pub struct ProcessTool {
    spec: ToolSpec,
    runtime: Arc<Runtime>,
}

impl ProcessTool {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        let signals: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Manage background processes started by `exec` with `background: true` (at most {} running per \
                 workspace). Actions: `list` (every process with its status); `poll` (output since the last poll \
                 and the status; `wait` up to {MAX_POLL_WAIT} s for output or the exit); `log` (page through the \
                 whole output by lines: `offset`, negative counts from the end, and `limit`; also works with the id \
                 of a foreground `exec` whose output was cut); `write` (send `input` to its stdin, include \"\\n\" \
                 to end a line; `close_stdin` sends end of file); `signal` (send `signal`: {}); `kill` (stop its \
                 whole process group: SIGTERM, then SIGKILL after 3 s).",
                runtime.config.max_processes,
                signals.join(", ")
            ),
            json!({
                "type": "object",
                "properties": {
                    "action": { "type": "string", "enum": ["list", "poll", "log", "write", "signal", "kill"], "description": "What to do." },
                    "id": { "type": "string", "description": "The process id `exec` returned (all actions but `list`)." },
                    "wait": { "type": "integer", "minimum": 0, "maximum": MAX_POLL_WAIT, "description": "poll: seconds to wait for new output or the exit (default 0)." },
                    "offset": { "type": "integer", "description": "log: first line, from 0; negative counts from the end (-100: the last 100 lines)." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LOG_LINES, "description": format!("log: lines to return (default {DEFAULT_LOG_LINES}).") },
                    "input": { "type": "string", "maxLength": MAX_WRITE_BYTES, "description": "write: text for its stdin." },
                    "close_stdin": { "type": "boolean", "description": "write: close stdin after the input (end of file)." },
                    "signal": { "type": "string", "enum": signals, "description": "signal: which signal to send to the process group." },
                    "via": { "type": "string", "maxLength": 200, "description": "Set by another toolgate node that forwarded this call (leave it out)." }
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
        .group("runtime")
        .annotations(Annotations::LOCAL_DESTRUCTIVE);
        ProcessTool { spec, runtime }
    }

    fn entry(&self, ctx: &CallContext, params: &Value) -> Result<Arc<Entry>, ToolError> {
        let id = required_id(params)?;
        self.runtime.table.get(id, &ctx.workspace, &ctx.identity.user).ok_or_else(|| not_found(id))
    }

    /// The caller's process `id` when another node of a shared store holds it and this one
    /// does not.
    fn held_elsewhere(&self, ctx: &CallContext, params: &Value) -> Option<Result<LocalOwner, ToolError>> {
        let id = params.get("id").and_then(Value::as_str).filter(|id| valid_id(id))?;
        if self.runtime.table.get(id, &ctx.workspace, &ctx.identity.user).is_some() {
            return None;
        }
        self.runtime.table.owners.owner_elsewhere(id, &ctx.workspace, &ctx.identity.user)
    }
}

fn required_id(params: &Value) -> Result<&str, ToolError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::invalid(NAME, "/id", "`id` is required for this action: the id `exec` returned"))
}

fn not_found(id: &str) -> ToolError {
    ToolError::NotFound {
        what: format!("background process `{id}`"),
        hint: Some("list the processes with {\"action\": \"list\"}".to_owned()),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[toolgate_core::async_trait]
impl Tool for ProcessTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
        let target = self.runtime.table.find(id);
        // A process this node does not hold may be the caller's on another node: the call is
        // sent there, and may wait for that node's approval.
        let forwards = matches!(action, "poll" | "write" | "signal" | "kill") && target.is_none();
        if matches!(action, "list" | "poll" | "log") {
            return CallSafety { read_only: true, forwards, ..CallSafety::default() };
        }
        if action != "write" {
            return CallSafety { forwards, ..CallSafety::default() };
        }
        // Input to a shell or an interpreter is a command of its own: ask unless the process
        // runs a command that was classified read-only.
        let input = params.get("input").and_then(Value::as_str).unwrap_or_default();
        if target.as_ref().is_some_and(|e| e.safe) {
            return CallSafety::default();
        }
        let command = target.map_or_else(|| format!("process {id}"), |e| format!("process {id} (`{}`)", e.command));
        let mut safety = CallSafety::needs_approval(
            ApprovalRequirement::UnlessAutoApproved,
            format!("writing to the input of {command}, which may run it as commands"),
        );
        safety.approval_subject = Some(format!("write to {command}:\n{input}"));
        safety.forwards = forwards;
        // The id may be anyone's: `inspect` checks that the process is the caller's before
        // anyone is asked to approve a write to it.
        safety.inspect = true;
        safety
    }

    async fn inspect(&self, ctx: &CallContext, params: &Value) -> Result<Vec<String>, ToolError> {
        // Only `write` asks for this: the same check `execute` makes, made before approval. A
        // process of the caller's on another node is checked again by that node's gate.
        if let Some(owner) = self.held_elsewhere(ctx, params) {
            owner?;
            return Ok(Vec::new());
        }
        self.entry(ctx, params)?;
        Ok(Vec::new())
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        // The caller's process on another node: the call goes there (or says where it runs).
        if matches!(action, "poll" | "write" | "signal" | "kill")
            && let Some(owner) = self.held_elsewhere(ctx, &params)
        {
            return self.runtime.table.owners.answer(&owner?, ctx, &params).await;
        }
        match action {
            "list" => Ok(self.list(ctx)),
            "poll" => self.poll(ctx, &params).await,
            "log" => self.log(ctx, &params).await,
            "write" => self.write(ctx, &params).await,
            "signal" => self.signal(ctx, &params).await,
            "kill" => self.kill(ctx, &params).await,
            other => Err(ToolError::invalid(
                NAME,
                "/action",
                format!("unknown action `{other}`; use list, poll, log, write, signal or kill"),
            )),
        }
    }
}

impl ProcessTool {
    fn list(&self, ctx: &CallContext) -> ToolOutput {
        let entries = self.runtime.table.list(&ctx.workspace, &ctx.identity.user);
        let elsewhere = self.runtime.table.owners.elsewhere(&ctx.workspace, &ctx.identity.user);
        if entries.is_empty() && elsewhere.is_empty() {
            return ToolOutput::text("no background processes in this workspace").with_meta(json!({ "processes": [] }));
        }
        let mut text = String::new();
        let mut rows = Vec::new();
        let running = entries.iter().filter(|e| e.exit().is_none()).count();
        text.push_str(&format!(
            "{} background processes ({running} running, limit {}):\n",
            entries.len(),
            self.runtime.config.max_processes
        ));
        for e in &entries {
            let command: String = e.command.chars().take(120).collect();
            let command = command.replace('\n', " ");
            text.push_str(&format!("{}  {}  {}  {}\n", e.id, e.status(), secs(e.runtime()), command));
            rows.push(json!({
                "id": e.id,
                "pid": e.pid,
                "running": e.exit().is_none(),
                "status": e.status(),
                "runtime_ms": e.runtime().as_millis() as u64,
                "command": e.command,
                "log": rel_log(&e.id),
            }));
        }
        // What other nodes of a shared store run for this caller: only that node can poll them.
        if !elsewhere.is_empty() {
            text.push_str(&format!("{} on other nodes (call them there; `log` works here too):\n", elsewhere.len()));
        }
        for p in &elsewhere {
            let command: String = p.command.chars().take(120).collect();
            let command = command.replace('\n', " ");
            let node = match &p.node_url {
                Some(url) => format!("{} ({url})", p.node),
                None => p.node.clone(),
            };
            text.push_str(&format!("{}  on node {node}  {command}\n", p.id));
            rows.push(json!({
                "id": p.id,
                "node": p.node,
                "node_url": p.node_url,
                "command": p.command,
                "log": rel_log(&p.id),
            }));
        }
        ToolOutput::text(text).with_meta(json!({ "processes": rows }))
    }

    async fn poll(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let entry = self.entry(ctx, params)?;
        let wait = Duration::from_secs(opt_u64(NAME, params, "wait")?.unwrap_or(0).min(MAX_POLL_WAIT));
        let deadline = Instant::now() + wait;
        let mut collected = String::new();
        let mut stdin_blocked = false;
        let exit = loop {
            let Some((out, exit)) = entry.poll().await else {
                stdin_blocked = true;
                break entry.exit();
            };
            collected.push_str(&out);
            if !collected.is_empty() || exit.is_some() || Instant::now() >= deadline || ctx.cancel.is_cancelled() {
                break exit;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                () = ctx.cancel.cancelled() => {}
            }
        };
        let captured =
            CapturedOutput { total_bytes: collected.len() as u64, head: collected, ..CapturedOutput::default() };
        let hint = log_hint(&entry.id, &rel_log(&entry.id));
        let shown = cut(&captured, self.runtime.config.output_max_chars, Some(&hint));
        let mut text = format!("process {}: {} after {}\n", entry.id, entry.status(), secs(entry.runtime()));
        if stdin_blocked {
            text.push_str(
                "a write to its stdin is still waiting: the process does not read its input, so its output \
                 cannot be taken now; read the log ({\"action\": \"log\"}) or kill it\n",
            );
        }
        if shown.text.is_empty() {
            text.push_str("no new output");
        } else {
            text.push_str("new output:\n");
            text.push_str(&shown.text);
        }
        Ok(ToolOutput::text(text).with_meta(json!({
            "id": entry.id,
            "running": exit.is_none(),
            "status": entry.status(),
            "exit_code": match exit { Some(toolgate_sandbox::ExitStatusKind::Code(c)) => json!(c), _ => Value::Null },
            "new_output_bytes": captured.total_bytes,
            "truncated": shown.truncated,
        })))
    }

    async fn log(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let id = required_id(params)?;
        if !valid_id(id) {
            return Err(not_found(id));
        }
        let path = match self.runtime.table.get(id, &ctx.workspace, &ctx.identity.user) {
            Some(e) => e.log.clone(),
            None => ctx.workspace.join(OUTPUTS_DIR).join(format!("{id}.log")),
        };
        let offset = match params.get("offset") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_i64().ok_or_else(|| ToolError::invalid(NAME, "/offset", "`offset` must be an integer"))?,
        };
        let limit = opt_u64(NAME, params, "limit")?.unwrap_or(DEFAULT_LOG_LINES).clamp(1, MAX_LOG_LINES);
        let max_chars = self.runtime.config.output_max_chars;
        let id = id.to_owned();
        tokio::task::spawn_blocking(move || read_log(&id, &path, offset, limit, max_chars))
            .await
            .map_err(|e| ToolError::failed(format!("reading the log failed: {e}")))?
    }

    async fn write(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let entry = self.entry(ctx, params)?;
        let input = params.get("input").and_then(Value::as_str).unwrap_or_default();
        let close = params.get("close_stdin").and_then(Value::as_bool).unwrap_or(false);
        if input.is_empty() && !close {
            return Err(ToolError::invalid(NAME, "/input", "give `input` to send, or `close_stdin: true`"));
        }
        if input.len() > MAX_WRITE_BYTES {
            return Err(ToolError::invalid(NAME, "/input", format!("at most {MAX_WRITE_BYTES} bytes per write")));
        }
        entry.write(input.as_bytes().to_vec(), close).await?;
        let text = format!(
            "wrote {} bytes to process {}{}; read its answer with {{\"action\": \"poll\", \"id\": \"{}\", \"wait\": 2}}",
            input.len(),
            entry.id,
            if close { " and closed its stdin" } else { "" },
            entry.id
        );
        Ok(ToolOutput::text(text).with_meta(json!({ "id": entry.id, "bytes": input.len(), "closed": close })))
    }

    async fn signal(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let entry = self.entry(ctx, params)?;
        let name = params.get("signal").and_then(Value::as_str).unwrap_or("TERM");
        let bare = name.trim_start_matches("SIG").to_ascii_uppercase();
        let Some((canonical, number)) = SIGNALS.iter().find(|(n, _)| *n == bare) else {
            let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
            return Err(ToolError::invalid(
                NAME,
                "/signal",
                format!("unknown signal `{name}`; use {}", names.join(", ")),
            ));
        };
        entry.signal(*number).await?;
        Ok(ToolOutput::text(format!("sent SIG{canonical} to the process group of {}", entry.id))
            .with_meta(json!({ "id": entry.id, "signal": canonical })))
    }

    async fn kill(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let entry = self.entry(ctx, params)?;
        let already = entry.exit().is_some();
        entry.stop(StoppedBy::Kill).await?;
        let out = entry.poll().await.map(|(out, _)| out).unwrap_or_default();
        let captured = CapturedOutput { total_bytes: out.len() as u64, head: out, ..CapturedOutput::default() };
        let hint = log_hint(&entry.id, &rel_log(&entry.id));
        let shown = cut(&captured, self.runtime.config.output_max_chars, Some(&hint));
        let mut text = if already {
            format!("process {} had already ended: {}\n", entry.id, entry.status())
        } else {
            format!("process {}: {} after {}\n", entry.id, entry.status(), secs(entry.runtime()))
        };
        if !shown.text.is_empty() {
            text.push_str("output since the last poll:\n");
            text.push_str(&shown.text);
        }
        Ok(ToolOutput::text(text).with_meta(json!({ "id": entry.id, "status": entry.status() })))
    }
}

/// One page of a log, by lines.
fn read_log(id: &str, path: &Path, offset: i64, limit: u64, max_chars: usize) -> Result<ToolOutput, ToolError> {
    let open = || {
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ToolError::NotFound {
                    what: format!("a log for `{id}`"),
                    hint: Some(
                        "logs exist for background processes and for foreground commands whose output was cut"
                            .to_owned(),
                    ),
                }
            } else {
                ToolError::failed(format!("cannot open {}: {e}", rel_log(id)))
            }
        })
    };
    let file: File = open()?;
    let start = if offset < 0 {
        let total = count_lines(BufReader::new(file))?;
        total.saturating_sub(offset.unsigned_abs())
    } else {
        offset as u64
    };
    let mut reader = BufReader::new(open()?);
    let mut line = Vec::new();
    let mut index = 0u64;
    let mut page = String::new();
    let mut shown = 0u64;
    let mut chars = 0usize;
    let mut cut_short = false;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ToolError::failed(format!("reading {}: {e}", rel_log(id))))?;
        if n == 0 {
            break;
        }
        if index >= start && shown < limit {
            let text = String::from_utf8_lossy(&line);
            let len = text.chars().count();
            if chars + len > max_chars {
                if shown == 0 {
                    // A single enormous line: show its start.
                    let head: String = text.chars().take(max_chars).collect();
                    page.push_str(&head);
                    page.push_str("\n[... rest of this line cut ...]\n");
                    shown = 1;
                }
                cut_short = true;
                index += 1;
                // Count the remaining lines for the total.
                index += count_lines(&mut reader)?;
                break;
            }
            chars += len;
            page.push_str(&text);
            shown += 1;
        }
        index += 1;
    }
    let total = index;
    let first = start.min(total);
    let last = first + shown;
    let mut text = if shown == 0 {
        format!("{} has {total} lines; none from line {} on\n", rel_log(id), start + 1)
    } else {
        format!("lines {}-{last} of {total} of {}", first + 1, rel_log(id))
    };
    if shown > 0 {
        if last < total {
            text.push_str(&format!(
                " (next page: \"offset\": {last}{})",
                if cut_short { ", the page was cut at the size limit" } else { "" }
            ));
        }
        text.push_str(":\n");
        text.push_str(&page);
    }
    Ok(ToolOutput::text(text).with_meta(json!({
        "id": id,
        "log": rel_log(id),
        "first_line": first,
        "lines": shown,
        "total_lines": total,
        "next_offset": if last < total { json!(last) } else { Value::Null },
    })))
}

fn count_lines(mut reader: impl BufRead) -> Result<u64, ToolError> {
    let mut count = 0u64;
    let mut last_byte = None;
    loop {
        let buf = reader.fill_buf().map_err(|e| ToolError::failed(format!("reading the log: {e}")))?;
        if buf.is_empty() {
            break;
        }
        count += memchr_count(buf);
        last_byte = buf.last().copied();
        let len = buf.len();
        reader.consume(len);
    }
    // A last line without a newline still counts.
    if last_byte.is_some_and(|b| b != b'\n') {
        count += 1;
    }
    Ok(count)
}

fn memchr_count(buf: &[u8]) -> u64 {
    buf.iter().filter(|&&b| b == b'\n').count() as u64
}
