//! Stage 8: shape what the model reads, in this order:
//!
//! 1. truncate: keep the head and the tail, cut on character boundaries, so every later step
//!    works on a bounded text;
//! 2. sanitize: valid UTF-8, control characters removed (except newline and tab);
//! 3. leak detection: credentials are replaced by `[REDACTED:<rule-id>]`; a `block` rule
//!    withholds the whole output;
//! 4. for untrusted output: neutralize forged boundaries and chat-template markers (in the same
//!    pass as step 3), cap the length again, then wrap the text in a boundary with a fresh random
//!    id (with a warning line inside when the text looks like instructions).
//!
//! Structured JSON output gets step 3 on every string it holds.

use serde_json::Value;
use toolgate_core::{Content, OutputTrust, ToolError, ToolOutput, ToolSpec};
use toolgate_guard::injection::{SUSPICIOUS_NOTE, redact_and_neutralize, sanitize_text};
use toolgate_guard::leak::{Finding, LeakDetector};
use toolgate_guard::output::{truncate_middle, wrap_untrusted};

/// Room for the marker line a cut adds, so a re-cap only happens when redaction grew the text.
const CUT_MARKER_SLACK: usize = 256;

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
            if spec.output_trust == OutputTrust::Untrusted {
                // Leak redaction and injection neutralizing in one pass over the text.
                let guarded = redact_and_neutralize(detector, text);
                if guarded.blocked {
                    return Err(withheld(spec, &guarded.findings));
                }
                report.redacted.extend(guarded.findings.iter().map(|f| f.rule_id));
                report.suspicious |= guarded.suspicious;
                let mut body = guarded.text;
                // Redaction markers and defanged characters can lengthen the text: cap it again,
                // past the fixed overhead of the first cut's marker line.
                if body.len() > max_bytes + CUT_MARKER_SLACK {
                    body = truncate_middle(&body, max_bytes).text;
                }
                if guarded.suspicious {
                    body.insert(0, '\n');
                    body.insert_str(0, SUSPICIOUS_NOTE);
                }
                *text = wrap_untrusted(&spec.name, &body);
            } else {
                redact(text, spec, detector, &mut report)?;
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
        return Err(withheld(spec, &redacted.findings));
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

/// The error for output that contained a credential whose rule says to withhold it.
fn withheld(spec: &ToolSpec, findings: &[Finding]) -> ToolError {
    let rules: Vec<&str> = findings.iter().map(|f| f.rule_id).collect();
    ToolError::failed(format!(
        "the output of `{}` was withheld because it contained a credential ({}); ask the user to look at \
         it directly if it is needed",
        spec.name,
        rules.join(", ")
    ))
}

/// Redacts credentials in text bound for the audit log, an approval request or a log line.
pub(crate) fn scrub(text: &str, detector: &LeakDetector) -> String {
    let redacted = detector.redact(text);
    if redacted.findings.is_empty() { text.to_owned() } else { redacted.text }
}
