//! What the model reads after a command: how it ended, how it was sandboxed, what the sandbox
//! blocked, and the output, cut in the middle when long.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::ToolOutput;
use toolgate_sandbox::{CapturedOutput, Denial, DenialKind, Enforcement, ExitStatusKind, RunResult, SandboxMode};

/// Output cut to a number of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The text to show, with a marker line where the middle was cut.
    pub(crate) text: String,
    /// Whether anything was cut.
    pub(crate) truncated: bool,
}

/// The first `n` characters of `s`.
fn head_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The last `n` characters of `s`.
fn tail_chars(s: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    match s.char_indices().rev().nth(n - 1) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

/// Keeps at most `max_chars` characters of `out`: the head and the tail, joined by a line saying
/// how much was cut and where the whole output is (`log_hint`).
pub(crate) fn cut(out: &CapturedOutput, max_chars: usize, log_hint: Option<&str>) -> Cut {
    let half = max_chars / 2;
    let (head, tail) = if out.truncated {
        (head_chars(&out.head, half), tail_chars(&out.tail, max_chars - half))
    } else if out.head.chars().count() <= max_chars {
        return Cut { text: out.head.clone(), truncated: false };
    } else {
        (head_chars(&out.head, half), tail_chars(&out.head, max_chars - half))
    };
    // Prefer whole lines when a line break is near the cut.
    let head = match head.rfind('\n') {
        Some(nl) if nl >= head.len() / 2 => &head[..=nl],
        _ => head,
    };
    let tail = match tail.find('\n') {
        Some(nl) if nl < tail.len() / 2 => &tail[nl + 1..],
        _ => tail,
    };
    let cut_bytes = out.total_bytes.saturating_sub((head.len() + tail.len()) as u64);
    let mut text = String::with_capacity(head.len() + tail.len() + 300);
    text.push_str(head);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "[... {cut_bytes} bytes cut from the middle of {} bytes of output (the first and last {} characters are shown)",
        out.total_bytes, half
    ));
    match log_hint {
        Some(hint) => text.push_str(&format!("; {hint} ...]\n")),
        None => text.push_str(" ...]\n"),
    }
    text.push_str(tail);
    Cut { text, truncated: true }
}

/// The sentence that tells the model where the full log is and how to read it.
pub(crate) fn log_hint(id: &str, rel_log: &str) -> String {
    format!(
        "the full output is in {rel_log}: page through it with the `process` tool, \
         {{\"action\": \"log\", \"id\": \"{id}\"}} (file tools cannot read .toolgate/)"
    )
}

/// What the user can change so that this denial does not happen again.
pub(crate) fn denial_advice(denial: &Denial, enforcement: &Enforcement, workspace: &std::path::Path) -> String {
    match &denial.kind {
        DenialKind::Path { path, write: true } if path.starts_with(workspace) => {
            if enforcement.mode == SandboxMode::ReadOnly {
                "the sandbox is read-only; to change files, ask the user to set `[runtime.sandbox] mode = \
                 \"workspace-write\"`"
                    .to_owned()
            } else {
                "this path of the workspace is kept read-only (`[runtime.sandbox] read_only_subpaths`); ask the \
                 user to change it themselves"
                    .to_owned()
            }
        }
        DenialKind::Path { write: true, .. } => "only the workspace and the temporary folder ($TMPDIR) are writable; \
             write there instead, or ask the user to add the folder to `[runtime.sandbox] extra_writable`"
            .to_owned(),
        DenialKind::Path { write: false, .. } => {
            "ask the user to add the folder to `[runtime.sandbox] extra_readable` if the command needs it".to_owned()
        }
        DenialKind::Network => {
            "the network is off for commands; ask the user to set `[runtime.sandbox] network = \"on\"` if the \
             command needs it"
                .to_owned()
        }
        DenialKind::Syscall => "this system call is not allowed in a confined sandbox".to_owned(),
        _ => "ask the user for more access if the command needs it".to_owned(),
    }
}

/// How a run ended, in words.
pub(crate) fn status_line(exit: &ExitStatusKind, timeout: Duration, max_timeout_secs: u64) -> String {
    match exit {
        ExitStatusKind::TimedOut => format!(
            "timed out after {} s: the whole process group was stopped (SIGTERM, then SIGKILL 3 s later); \
             give a longer `timeout` (at most {max_timeout_secs} s) or run it with `background: true`",
            timeout.as_secs()
        ),
        other => other.to_string(),
    }
}

/// Whether the output has the errno texts a sandbox denial produces.
fn has_permission_errors(out: &CapturedOutput) -> bool {
    ["Permission denied", "Operation not permitted", "Read-only file system"]
        .iter()
        .any(|t| out.head.contains(t) || out.tail.contains(t))
}

/// The structured fields every result shares.
fn exit_json(exit: &ExitStatusKind) -> (Value, Value) {
    match exit {
        ExitStatusKind::Code(c) => (json!(c), Value::Null),
        ExitStatusKind::Signal(s) => (Value::Null, json!(s)),
        _ => (Value::Null, Value::Null),
    }
}

/// Everything needed to render a finished foreground run.
pub(crate) struct Finished<'a> {
    pub(crate) id: &'a str,
    pub(crate) result: &'a RunResult,
    pub(crate) timeout: Duration,
    pub(crate) max_timeout_secs: u64,
    pub(crate) max_chars: usize,
    /// The log, relative to the workspace, when it was kept.
    pub(crate) rel_log: Option<&'a str>,
    pub(crate) workspace: &'a std::path::Path,
}

/// The tool output for a finished run.
pub(crate) fn finished(f: Finished<'_>) -> (ToolOutput, bool) {
    let r = f.result;
    let hint = f.rel_log.map(|rel| log_hint(f.id, rel));
    let shown = cut(&r.output, f.max_chars, hint.as_deref());
    let mut text = format!(
        "{} after {:.2} s\nsandbox: {}\n",
        status_line(&r.exit, f.timeout, f.max_timeout_secs),
        r.duration.as_secs_f64(),
        r.enforcement
    );
    let mut denials = Vec::new();
    for d in &r.denials {
        let advice = denial_advice(d, &r.enforcement, f.workspace);
        text.push_str(&format!("{d}; {advice}\n"));
        denials.push(json!({ "denial": d, "message": d.to_string(), "advice": advice }));
    }
    if r.denials.is_empty() && r.enforcement.confined && has_permission_errors(&r.output) {
        text.push_str(
            "note: the output shows permission errors; in this sandbox only the workspace and $TMPDIR are \
             writable, and only system folders and the workspace are readable (symbolic links count as the path \
             they point to)\n",
        );
    }
    if shown.text.is_empty() {
        text.push_str("output: (none)");
    } else {
        text.push_str("output:\n");
        text.push_str(&shown.text);
    }
    let (code, signal) = exit_json(&r.exit);
    let structured = json!({
        "id": f.id,
        "exit_code": code,
        "signal": signal,
        "timed_out": r.exit == ExitStatusKind::TimedOut,
        "duration_ms": r.duration.as_millis() as u64,
        "output_bytes": r.output.total_bytes,
        "truncated": shown.truncated,
        "log": f.rel_log,
        "sandbox": r.enforcement.to_string(),
        "sandboxed": !r.enforcement.is_unsandboxed(),
        "denials": denials,
    });
    (ToolOutput::text(text).with_meta(structured), shown.truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str) -> CapturedOutput {
        CapturedOutput { head: text.to_owned(), total_bytes: text.len() as u64, ..CapturedOutput::default() }
    }

    #[test]
    fn short_output_is_whole() {
        let c = cut(&captured("hello\n"), 1000, Some("log"));
        assert_eq!(c, Cut { text: "hello\n".into(), truncated: false });
    }

    #[test]
    fn long_output_keeps_head_and_tail_on_char_boundaries() {
        let text: String = "é".repeat(3000) + &"x".repeat(3000);
        let c = cut(&captured(&text), 1000, Some("see .toolgate/outputs/a.log"));
        assert!(c.truncated);
        assert!(c.text.starts_with(&"é".repeat(500)));
        assert!(c.text.ends_with(&"x".repeat(500)));
        assert!(c.text.contains("bytes cut from the middle of 9000 bytes"));
        assert!(c.text.contains(".toolgate/outputs/a.log"));
        assert!(c.text.chars().count() < 1000 + 200);
    }

    #[test]
    fn sandbox_truncated_capture_is_cut_again() {
        let out = CapturedOutput {
            head: "a\n".repeat(5000),
            tail: "z\n".repeat(5000),
            total_bytes: 1_000_000,
            truncated: true,
            log_path: None,
        };
        let c = cut(&out, 1000, None);
        assert!(c.truncated);
        assert!(c.text.starts_with("a\n"));
        assert!(c.text.ends_with("z\n"));
        assert!(c.text.contains("bytes cut from the middle of 1000000 bytes"));
    }
}
