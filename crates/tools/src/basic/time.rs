use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, Tool, ToolError, ToolOutput, ToolSpec, async_trait};

/// `time {operation: now|parse|format|diff, timestamp?, format?, timestamp2?}` (seed 004 §4.2).
#[derive(Debug)]
pub struct Time {
    spec: ToolSpec,
}

impl Time {
    /// The tool.
    pub fn new() -> Self {
        let spec = ToolSpec::new(
            "time",
            "Date and time operations. `now`: current time. `parse`: read a timestamp (RFC 3339/ISO 8601, \
             `YYYY-MM-DD`, `YYYY-MM-DD HH:MM:SS`, or Unix seconds). `format`: format `timestamp` (default: now) \
             with a strftime `format` such as `%Y-%m-%d %H:%M`. `diff`: seconds from `timestamp` to `timestamp2`.",
            json!({
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "enum": ["now", "parse", "format", "diff"], "description": "Operation to perform"},
                    "timestamp": {"type": "string", "description": "ISO 8601 timestamp or Unix seconds"},
                    "format": {"type": "string", "description": "strftime format string for `format`"},
                    "timestamp2": {"type": "string", "description": "Second timestamp for `diff`"}
                },
                "required": ["operation"],
                "additionalProperties": false
            }),
        )
        .group("basic")
        .annotations(Annotations::PURE)
        .trusted_output()
        .output_schema(json!({
            "type": "object",
            "properties": {
                "iso": {"type": "string"},
                "unix": {"type": "integer"},
                "unix_millis": {"type": "integer"},
                "formatted": {"type": "string"},
                "seconds": {"type": "number"}
            }
        }));
        Time { spec }
    }
}

impl Default for Time {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Time {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let op = params["operation"].as_str().unwrap_or_default();
        let result = match op {
            "now" => stamp(Utc::now().fixed_offset()),
            "parse" => stamp(parse(required(&params, "timestamp")?, "/timestamp")?),
            "format" => {
                let when = match params.get("timestamp").and_then(Value::as_str) {
                    Some(t) => parse(t, "/timestamp")?,
                    None => Utc::now().fixed_offset(),
                };
                let fmt = required(&params, "format")?;
                json!({"formatted": format(&when, fmt)?, "iso": when.to_rfc3339()})
            }
            "diff" => {
                let a = parse(required(&params, "timestamp")?, "/timestamp")?;
                let b = parse(required(&params, "timestamp2")?, "/timestamp2")?;
                let millis = (b - a).num_milliseconds();
                json!({"seconds": millis as f64 / 1000.0})
            }
            other => return Err(ToolError::invalid("time", "/operation", format!("unknown operation `{other}`"))),
        };
        Ok(ToolOutput::json(result))
    }
}

fn required<'a>(params: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| {
        let op = params["operation"].as_str().unwrap_or_default();
        ToolError::invalid("time", format!("/{key}"), format!("`{key}` is required for `{op}`"))
    })
}

fn stamp(t: DateTime<FixedOffset>) -> Value {
    json!({"iso": t.to_rfc3339(), "unix": t.timestamp(), "unix_millis": t.timestamp_millis()})
}

/// Accepts RFC 3339, RFC 2822, `YYYY-MM-DD[ T]HH:MM[:SS]` (UTC), `YYYY-MM-DD`, and Unix seconds.
fn parse(input: &str, pointer: &str) -> Result<DateTime<FixedOffset>, ToolError> {
    let s = input.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t);
    }
    if let Ok(t) = DateTime::parse_from_rfc2822(s) {
        return Ok(t);
    }
    for fmt in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(Utc.from_utc_datetime(&naive).fixed_offset());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(naive) = date.and_hms_opt(0, 0, 0)
    {
        return Ok(Utc.from_utc_datetime(&naive).fixed_offset());
    }
    if let Ok(secs) = s.parse::<f64>()
        && secs.is_finite()
        && secs.abs() < 1.0e12
        && let Some(t) = DateTime::from_timestamp_millis((secs * 1000.0).round() as i64)
    {
        return Ok(t.fixed_offset());
    }
    Err(ToolError::invalid(
        "time",
        pointer,
        format!("cannot read `{s}` as a time; use RFC 3339 like `2026-01-31T12:00:00Z`, `2026-01-31`, or Unix seconds"),
    ))
}

/// strftime formatting that reports a bad format string instead of panicking (chrono's
/// `Display` of an invalid format item returns `fmt::Error`, which `to_string` would turn into
/// a panic).
fn format(t: &DateTime<FixedOffset>, fmt: &str) -> Result<String, ToolError> {
    use std::fmt::Write;
    let items: Vec<_> = chrono::format::StrftimeItems::new(fmt).collect();
    if items.iter().any(|i| matches!(i, chrono::format::Item::Error)) {
        return Err(ToolError::invalid("time", "/format", format!("`{fmt}` is not a valid strftime format")));
    }
    let mut out = String::new();
    write!(out, "{}", t.format_with_items(items.into_iter()))
        .map_err(|_| ToolError::invalid("time", "/format", format!("`{fmt}` cannot format this time")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(params: Value) -> Result<Value, ToolError> {
        let out = Time::new().execute(&CallContext::new("/"), params).await?;
        Ok(out.structured.unwrap_or_default())
    }

    #[tokio::test]
    async fn operations() {
        let now = call(json!({"operation": "now"})).await.unwrap();
        assert!(now["unix"].as_i64().unwrap() > 1_700_000_000);
        let parsed = call(json!({"operation": "parse", "timestamp": "2026-01-31T12:00:00+01:00"})).await.unwrap();
        assert_eq!(parsed["unix"], 1_769_857_200);
        let unix = call(json!({"operation": "parse", "timestamp": "1769857200"})).await.unwrap();
        assert_eq!(unix["iso"], "2026-01-31T11:00:00+00:00");
        let f = call(json!({"operation": "format", "timestamp": "2026-01-31", "format": "%d/%m/%Y"})).await.unwrap();
        assert_eq!(f["formatted"], "31/01/2026");
        let d = call(json!({"operation": "diff", "timestamp": "2026-01-01", "timestamp2": "2026-01-02T00:00:01Z"}))
            .await
            .unwrap();
        assert_eq!(d["seconds"], 86401.0);
    }

    #[tokio::test]
    async fn bad_input_is_explained() {
        let e = call(json!({"operation": "parse", "timestamp": "yesterday-ish"})).await.unwrap_err();
        assert!(e.to_string().contains("cannot read `yesterday-ish`"), "{e}");
        let e = call(json!({"operation": "diff", "timestamp": "2026-01-01"})).await.unwrap_err();
        assert!(e.to_string().contains("`timestamp2` is required for `diff`"), "{e}");
        let e = call(json!({"operation": "format", "format": "%Q%"})).await.unwrap_err();
        assert!(e.to_string().contains("not a valid strftime"), "{e}");
    }
}
