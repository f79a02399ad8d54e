//! Stage 10: record the call (sensitive parameters redacted) in the audit log.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_guard::leak::LeakDetector;
use toolgate_store::AuditRecord;

use crate::pipeline::output::scrub;

/// The marker that replaces sensitive values.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// `params` with the values of `sensitive` top-level keys replaced by [`REDACTED`].
pub(crate) fn redact_params(params: &Value, sensitive: &[&str]) -> Value {
    let mut params = params.clone();
    if let Value::Object(map) = &mut params {
        for key in sensitive {
            if let Some(v) = map.get_mut(*key) {
                *v = Value::String(REDACTED.into());
            }
        }
    }
    params
}

pub(crate) struct CallRecord<'a> {
    pub ctx: &'a CallContext,
    pub started: SystemTime,
    pub tool: &'a str,
    pub params: &'a Value,
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
        params: scrub(&rec.params.to_string(), detector),
        decision: rec.trace.join("; "),
        outcome,
        error,
        duration_us: rec.duration.as_micros() as i64,
        output_bytes: output_bytes as i64,
    }
}
