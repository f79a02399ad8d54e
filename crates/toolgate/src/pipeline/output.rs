//! Stage 8: shape what the model reads, in this order:
//!
//! 1. truncate: keep the head and the tail, cut on character boundaries, so every later step
//!    works on a bounded text;
//! 2. sanitize: valid UTF-8, control characters removed (except newline and tab);
//! 3. leak detection: credentials are replaced by `[REDACTED:<rule-id>]`; a `block` rule
//!    withholds the whole output;
//! 4. for untrusted output: neutralize forged boundaries and chat-template markers, then wrap
//!    the text in a boundary with a fresh random id (with a warning line inside when the text
//!    looks like instructions).
//!
//! Structured JSON output gets step 3 on every string it holds.

use serde_json::Value;
use toolgate_core::{Content, OutputTrust, ToolError, ToolOutput, ToolSpec};
use toolgate_guard::injection::{neutralize, sanitize_text};
use toolgate_guard::leak::LeakDetector;
use toolgate_guard::output::{truncate_middle, wrap_untrusted};

/// What the output stage did, for the audit trace.
#[derive(Debug, Default)]
pub(crate) struct OutputReport {
    pub redacted: Vec<&'static str>,
    pub suspicious: bool,
    pub truncated: bool,
}

pub(crate) fn shape(
    spec: &ToolSpec,
    mut output: ToolOutput,
    max_bytes: usize,
    detector: &LeakDetector,
) -> Result<(ToolOutput, OutputReport), ToolError> {
    let mut report = OutputReport::default();
    for block in &mut output.content {
        if let Content::Text { text } = block {
            if text.len() > max_bytes {
                *text = truncate_middle(text, max_bytes).text;
                report.truncated = true;
            }
            if needs_sanitizing(text) {
                *text = sanitize_text(text.as_bytes(), usize::MAX).text;
            }
            redact(text, spec, detector, &mut report)?;
            if spec.output_trust == OutputTrust::Untrusted {
                let neutral = neutralize(text);
                report.suspicious |= neutral.suspicious;
                let body = match neutral.note() {
                    Some(note) => format!("{note}\n{}", neutral.text),
                    None => neutral.text,
                };
                *text = wrap_untrusted(&spec.name, &body);
            }
        }
    }
    if let Some(structured) = &mut output.structured {
        redact_json(structured, spec, detector, &mut report)?;
    }
    Ok((output, report))
}

/// Only text with control characters other than `\n` and `\t` needs the sanitizer's copy.
fn needs_sanitizing(text: &str) -> bool {
    text.bytes().any(|b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
        || text.contains(|c: char| ('\u{80}'..='\u{9f}').contains(&c))
}

fn redact(
    text: &mut String,
    spec: &ToolSpec,
    detector: &LeakDetector,
    report: &mut OutputReport,
) -> Result<(), ToolError> {
    let redacted = detector.redact(text);
    if redacted.findings.is_empty() {
        return Ok(());
    }
    if redacted.blocked {
        let rules: Vec<&str> = redacted.findings.iter().map(|f| f.rule_id).collect();
        return Err(ToolError::failed(format!(
            "the output of `{}` was withheld because it contained a credential ({}); ask the user to \
             look at it directly if it is needed",
            spec.name,
            rules.join(", ")
        )));
    }
    report.redacted.extend(redacted.findings.iter().map(|f| f.rule_id));
    *text = redacted.text;
    Ok(())
}

fn redact_json(
    value: &mut Value,
    spec: &ToolSpec,
    detector: &LeakDetector,
    report: &mut OutputReport,
) -> Result<(), ToolError> {
    match value {
        Value::String(s) => redact(s, spec, detector, report),
        Value::Array(items) => items.iter_mut().try_for_each(|v| redact_json(v, spec, detector, report)),
        Value::Object(map) => map.values_mut().try_for_each(|v| redact_json(v, spec, detector, report)),
        _ => Ok(()),
    }
}

/// Redacts credentials in text bound for the audit log, an approval request or a log line.
pub(crate) fn scrub(text: &str, detector: &LeakDetector) -> String {
    let redacted = detector.redact(text);
    if redacted.findings.is_empty() { text.to_owned() } else { redacted.text }
}
