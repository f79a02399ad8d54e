//! Audit search: a filter on every column the page shows (substring, case-insensitive) and a
//! time range, and the JSONL and CSV exports of what it selects.

use toolgate_store::AuditRecord;

/// The audit search's fields, as the form (and the export links) send them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AuditFilter {
    pub(crate) user: String,
    pub(crate) agent: String,
    pub(crate) tool: String,
    pub(crate) decision: String,
    pub(crate) outcome: String,
    pub(crate) params: String,
    /// `YYYY-MM-DDTHH:MM` (UTC), as `datetime-local` sends it.
    pub(crate) from: String,
    pub(crate) to: String,
}

impl AuditFilter {
    pub(crate) fn from_query(query: &[(String, String)]) -> AuditFilter {
        let get = |name: &str| super::field(query, name).trim().to_owned();
        AuditFilter {
            user: get("user"),
            agent: get("agent"),
            tool: get("tool"),
            decision: get("decision"),
            outcome: get("outcome"),
            params: get("params"),
            from: get("from"),
            to: get("to"),
        }
    }

    /// The same filter as a query string (for the export links).
    pub(crate) fn query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("user", &self.user),
            ("agent", &self.agent),
            ("tool", &self.tool),
            ("decision", &self.decision),
            ("outcome", &self.outcome),
            ("params", &self.params),
            ("from", &self.from),
            ("to", &self.to),
        ] {
            if !v.is_empty() {
                q.append_pair(k, v);
            }
        }
        q.finish()
    }

    pub(crate) fn apply(&self, rows: Vec<AuditRecord>) -> Vec<AuditRecord> {
        let from = parse_time(&self.from);
        let to = parse_time(&self.to);
        let has = |field: &str, want: &str| want.is_empty() || field.to_lowercase().contains(&want.to_lowercase());
        rows.into_iter()
            .filter(|r| {
                has(&r.user, &self.user)
                    && has(&r.agent, &self.agent)
                    && has(&r.tool, &self.tool)
                    && has(&r.decision, &self.decision)
                    && has(&r.outcome, &self.outcome)
                    && has(&r.params, &self.params)
                    && from.is_none_or(|f| r.ts_ms >= f)
                    // `to` names a minute: rows within it are in.
                    && to.is_none_or(|t| r.ts_ms < t + 60_000)
            })
            .collect()
    }
}

/// `YYYY-MM-DDTHH:MM[:SS]` or `YYYY-MM-DD` (UTC) in Unix milliseconds.
pub(crate) fn parse_time(text: &str) -> Option<i64> {
    let (date, time) = text.split_once(['T', ' ']).unwrap_or((text, "00:00"));
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, min) = (t.next()??, t.next()??);
    let s = t.next().flatten().unwrap_or(0);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || min > 59 || s > 59 || h < 0 || min < 0 {
        return None;
    }
    Some((days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60 + s) * 1000)
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS` (UTC).
pub(crate) fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `30d`, `12h`, `90m`, `45s` in milliseconds.
pub(crate) fn duration_ms(text: &str) -> Option<i64> {
    let at = text.find(|c: char| !c.is_ascii_digit())?;
    let n: i64 = text[..at].parse().ok().filter(|n| *n > 0)?;
    let unit = match &text[at..] {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        "s" => 1_000,
        _ => return None,
    };
    n.checked_mul(unit)
}

pub(crate) fn jsonl(rows: &[AuditRecord]) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&serde_json::to_string(row).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// RFC 4180 CSV. A cell that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab,
/// CR first) gets a leading `'`: the values come from models.
pub(crate) fn csv(rows: &[AuditRecord]) -> String {
    let cell = |v: &str| {
        let v = if v.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{v}") } else { v.to_owned() };
        format!("\"{}\"", v.replace('"', "\"\""))
    };
    let mut out =
        String::from("id,time,user,agent,session,tool,params,decision,outcome,error,duration_us,output_bytes\r\n");
    for r in rows {
        let cells = [
            cell(&r.id),
            cell(&format_time(r.ts_ms)),
            cell(&r.user),
            cell(&r.agent),
            cell(&r.session),
            cell(&r.tool),
            cell(&r.params),
            cell(&r.decision),
            cell(&r.outcome),
            cell(r.error.as_deref().unwrap_or("")),
            r.duration_us.to_string(),
            r.output_bytes.to_string(),
        ];
        out.push_str(&cells.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        let ms = parse_time("2026-11-28T05:10").unwrap();
        assert_eq!(format_time(ms), "2026-11-28 05:10:00");
        assert_eq!(parse_time("1970-01-01"), Some(0));
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00");
        for bad in ["", "2026-13-01", "2026-01-01T25:00", "x", "2026-01"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn csv_cells_are_quoted_and_formulas_defused() {
        let row = AuditRecord {
            tool: "exec".into(),
            params: "=HYPERLINK(\"http://x\")".into(),
            user: "a,b".into(),
            ..AuditRecord::default()
        };
        let text = csv(&[row]);
        assert!(text.contains("\"'=HYPERLINK(\"\"http://x\"\")\""), "{text}");
        assert!(text.contains("\"a,b\""), "{text}");
    }

    #[test]
    fn filter_matches_every_column_and_range() {
        let row = |user: &str, tool: &str, ts_ms: i64| AuditRecord {
            user: user.into(),
            tool: tool.into(),
            ts_ms,
            decision: "allow".into(),
            outcome: "ok".into(),
            ..AuditRecord::default()
        };
        let day = parse_time("2026-11-28").unwrap();
        let rows = vec![row("ann", "read", day), row("bob", "exec", day + 3_600_000)];
        let f = AuditFilter { user: "ANN".into(), ..AuditFilter::default() };
        assert_eq!(f.apply(rows.clone()).len(), 1);
        let f = AuditFilter { from: "2026-11-28T00:30".into(), ..AuditFilter::default() };
        assert_eq!(f.apply(rows.clone())[0].user, "bob");
        let f = AuditFilter { to: "2026-11-28T00:00".into(), tool: "read".into(), ..AuditFilter::default() };
        assert_eq!(f.apply(rows).len(), 1);
    }
}
