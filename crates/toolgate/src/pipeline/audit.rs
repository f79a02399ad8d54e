//! Stage 16: record the call (sensitive parameters redacted) in the audit log; a call that is
//! not read-only is recorded as "started" before it runs ([`started`]) and completed after.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_guard::leak::LeakDetector;
use toolgate_guard::output::truncate_middle;
use toolgate_store::{AuditRecord, AuditStore, STARTED};

use crate::pipeline::output::scrub;

/// The marker that replaces sensitive values.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// The longest parameter text an audit record keeps; longer text keeps its head and tail (a
/// `write` of a 5 MB file must not put 5 MB in the log).
const MAX_AUDIT_PARAMS_BYTES: usize = 64 * 1024;

/// `params` with the values of `sensitive` top-level keys replaced by [`REDACTED`]; borrowed,
/// without a copy, when the call has none of them.
pub(crate) fn redact_params<'a>(params: &'a Value, sensitive: &[&str]) -> Cow<'a, Value> {
    let Value::Object(map) = params else { return Cow::Borrowed(params) };
    if !sensitive.iter().any(|key| map.contains_key(*key)) {
        return Cow::Borrowed(params);
    }
    let mut params = params.clone();
    if let Value::Object(map) = &mut params {
        for key in sensitive {
            if let Some(v) = map.get_mut(*key) {
                *v = Value::String(REDACTED.into());
            }
        }
    }
    Cow::Owned(params)
}

/// The parameters as the audit log keeps them: sensitive values redacted, credentials scrubbed
/// (before the cap, so no half of a secret survives at a cut), then capped.
pub(crate) fn audit_params(params: &Value, sensitive: &[&str], detector: &LeakDetector) -> String {
    let text = scrub(&redact_params(params, sensitive).to_string(), detector);
    if text.len() <= MAX_AUDIT_PARAMS_BYTES {
        return text;
    }
    truncate_middle(&text, MAX_AUDIT_PARAMS_BYTES).text
}

pub(crate) struct CallRecord<'a> {
    pub ctx: &'a CallContext,
    pub started: SystemTime,
    pub tool: &'a str,
    /// The name the caller used, when it is not the tool's.
    pub called_as: Option<&'a str>,
    /// Already redacted, scrubbed and capped ([`audit_params`]).
    pub params: &'a str,
    pub trace: &'a [&'a str],
    pub result: &'a Result<ToolOutput, ToolError>,
    pub duration: Duration,
}

/// The audit record of a call, credentials in parameters and messages redacted.
pub(crate) fn record(detector: &LeakDetector, rec: CallRecord<'_>) -> AuditRecord {
    let (outcome, error, output_bytes) = match rec.result {
        Ok(out) => ("ok".to_owned(), None, out.size()),
        Err(e) => (e.kind().to_owned(), Some(scrub(&e.to_string(), detector)), 0),
    };
    AuditRecord {
        id: rec.ctx.call_id.clone(),
        ts_ms: rec.started.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
        user: rec.ctx.identity.user.clone(),
        agent: rec.ctx.identity.agent.clone(),
        session: rec.ctx.identity.session.clone(),
        provider: rec.ctx.provider.clone(),
        tool: rec.tool.to_owned(),
        params: rec.params.to_owned(),
        decision: rec.trace.join("; "),
        outcome,
        error,
        duration_us: rec.duration.as_micros() as i64,
        output_bytes: output_bytes as i64,
        subject: None,
        detail: rec.ctx.audit.get().map(|d| scrub(&d, detector)),
        called_as: rec.called_as.map(str::to_owned),
    }
}

/// What a call that is about to run writes first (see [`AuditStore::record_started`]).
pub(crate) struct StartedRecord<'a> {
    pub ctx: &'a CallContext,
    pub tool: &'a str,
    /// The name the caller used, when it is not the tool's.
    pub called_as: Option<&'a str>,
    /// Already redacted, scrubbed and capped ([`audit_params`]).
    pub params: &'a str,
    pub trace: &'a [String],
    /// The normalized subject (the unwrapped command, the path...), when the tool has one.
    pub subject: Option<&'a str>,
}

/// Records a call that was decided and is about to run, and waits until the row is written,
/// for any call that is not read-only: if the process dies while the tool runs, the row stays
/// (a later start closes it as "interrupted"). Read-only calls keep the single completed row.
pub(crate) fn started(log: &dyn AuditStore, detector: &LeakDetector, read_only: bool, rec: StartedRecord<'_>) {
    if read_only {
        return;
    }
    log.record_started(AuditRecord {
        id: rec.ctx.call_id.clone(),
        ts_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
        user: rec.ctx.identity.user.clone(),
        agent: rec.ctx.identity.agent.clone(),
        session: rec.ctx.identity.session.clone(),
        provider: rec.ctx.provider.clone(),
        tool: rec.tool.to_owned(),
        params: rec.params.to_owned(),
        decision: rec.trace.join("; "),
        outcome: STARTED.to_owned(),
        error: None,
        duration_us: 0,
        output_bytes: 0,
        subject: rec.subject.map(|s| scrub(s, detector)),
        detail: None,
        called_as: rec.called_as.map(str::to_owned),
    });
}
