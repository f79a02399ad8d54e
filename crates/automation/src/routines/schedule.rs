//! Cron schedules: 5-field POSIX patterns (croner, Sunday = 0 or 7) in an explicit IANA time
//! zone, and the next fire after an instant.
//!
//! Daylight saving time, as croner resolves it (and `docs/automation.md` documents): a
//! fixed-time pattern whose wall-clock time does not exist on the spring-forward day
//! (`30 2 * * *` in America/New_York) fires at the first instant after the gap (03:00); one
//! whose time happens twice on the fall-back day (`30 1 * * *`) fires once, at the first.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The five fields, in order, with what each accepts.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31, L, W"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-7 or SUN-SAT, where 0 and 7 are Sunday"),
];

/// A parsed schedule: a pattern and the zone its wall clock is read in.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// Why a schedule was refused; the message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// Not five fields.
    #[error(
        "the cron expression `{expr}` has {count} field(s); write exactly five: minute hour day-of-month month day-of-week (e.g. `0 9 * * 1-5`)"
    )]
    FieldCount {
        /// The expression.
        expr: String,
        /// How many fields it has.
        count: usize,
    },
    /// One field is invalid.
    #[error(
        "the cron expression `{expr}` has an invalid {field} field `{value}` ({reason}); the {field} field takes {accepts}"
    )]
    Field {
        /// The expression.
        expr: String,
        /// Which field.
        field: &'static str,
        /// Its text.
        value: String,
        /// croner's reason.
        reason: String,
        /// What the field accepts.
        accepts: &'static str,
    },
    /// Each field is valid alone, but together they never match (`0 0 31 2 *`).
    #[error("the cron expression `{expr}` is invalid: {reason}")]
    Pattern {
        /// The expression.
        expr: String,
        /// Why.
        reason: String,
    },
    /// The time zone is not an IANA name.
    #[error("`{0}` is not an IANA time zone name; write one like `America/New_York`, `Europe/Berlin` or `UTC`")]
    Zone(String),
}

/// The machine's IANA time zone (`TZ`, then `/etc/localtime`'s target), or UTC.
pub fn machine_zone() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':');
        if Tz::from_str(tz).is_ok() {
            return tz.to_owned();
        }
    }
    if let Ok(target) = std::fs::read_link("/etc/localtime") {
        let text = target.to_string_lossy();
        if let Some((_, name)) = text.split_once("zoneinfo/")
            && Tz::from_str(name).is_ok()
        {
            return name.to_owned();
        }
    }
    if let Ok(name) = std::fs::read_to_string("/etc/timezone") {
        let name = name.trim();
        if Tz::from_str(name).is_ok() {
            return name.to_owned();
        }
    }
    "UTC".to_owned()
}

/// Parses an IANA zone name.
pub fn parse_zone(name: &str) -> Result<Tz, ScheduleError> {
    Tz::from_str(name.trim()).map_err(|_| ScheduleError::Zone(name.to_owned()))
}

fn parser() -> CronParser {
    CronParser::builder().seconds(Seconds::Disallowed).build()
}

impl Schedule {
    /// Parses a 5-field pattern in the zone `zone`; an error names the field that is wrong.
    pub fn parse(expr: &str, zone: &str) -> Result<Schedule, ScheduleError> {
        let zone = parse_zone(zone)?;
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ScheduleError::FieldCount { expr: expr.to_owned(), count: fields.len() });
        }
        // Each field alone, the others `*`, so an error names its field.
        for (i, (field, accepts)) in FIELDS.iter().enumerate() {
            let mut probe = ["*"; 5];
            probe[i] = fields[i];
            if let Err(e) = parser().parse(&probe.join(" ")) {
                return Err(ScheduleError::Field {
                    expr: expr.to_owned(),
                    field,
                    value: fields[i].to_owned(),
                    reason: e.to_string(),
                    accepts,
                });
            }
        }
        let cron = parser()
            .parse(&fields.join(" "))
            .map_err(|e| ScheduleError::Pattern { expr: expr.to_owned(), reason: e.to_string() })?;
        let schedule = Schedule { cron, zone };
        // A pattern that never matches (31 February) is refused now, not at fire time.
        if schedule.next_after(0).is_none() {
            return Err(ScheduleError::Pattern {
                expr: expr.to_owned(),
                reason: "it matches no date (for example 31 February); check the day-of-month and month fields".into(),
            });
        }
        Ok(schedule)
    }

    /// The first fire strictly after `after_ms` (Unix milliseconds), or `None` when the pattern
    /// matches no later time.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let start = self.at(after_ms)?;
        self.cron.find_next_occurrence(&start, false).ok().map(|t| t.timestamp_millis())
    }

    /// The last fire at or before `at_ms`.
    pub fn last_at_or_before(&self, at_ms: i64) -> Option<i64> {
        let start = self.at(at_ms)?;
        self.cron.find_previous_occurrence(&start, true).ok().map(|t| t.timestamp_millis())
    }

    /// `ms` as a time in the schedule's zone.
    fn at(&self, ms: i64) -> Option<DateTime<Tz>> {
        Utc.timestamp_millis_opt(ms).single().map(|t| t.with_timezone(&self.zone))
    }

    /// A human description of the pattern (croner's).
    pub fn describe(&self) -> String {
        self.cron.describe()
    }
}

/// `ms` in `zone` as RFC 3339 with its offset (`2026-11-01T01:30:00-04:00`), for listings.
pub fn format_in(ms: i64, zone: &str) -> String {
    let Ok(tz) = parse_zone(zone) else { return ms.to_string() };
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) => t.with_timezone(&tz).to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        None => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Datelike, NaiveDate, Weekday};

    use super::*;

    const NY: &str = "America/New_York";

    /// Unix ms of a wall-clock time in New York (the earlier one when ambiguous).
    fn ny(y: i32, m: u32, d: u32, h: u32, min: u32) -> i64 {
        let tz = parse_zone(NY).unwrap();
        let naive = NaiveDate::from_ymd_opt(y, m, d).unwrap().and_hms_opt(h, min, 0).unwrap();
        tz.from_local_datetime(&naive).earliest().unwrap().timestamp_millis()
    }

    /// Every fire from `from_ms` up to `to_ms`, as the scheduler walks them.
    fn fires(s: &Schedule, from_ms: i64, to_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = from_ms;
        while let Some(next) = s.next_after(at) {
            if next > to_ms {
                break;
            }
            out.push(format_in(next, NY));
            at = next;
        }
        out
    }

    #[test]
    fn on_the_fall_back_day_a_fixed_time_in_the_repeated_hour_fires_once() {
        // 2026-11-01: 02:00 EDT falls back to 01:00 EST, so 01:30 happens twice.
        let s = Schedule::parse("30 1 * * *", NY).unwrap();
        let got = fires(&s, ny(2026, 10, 31, 12, 0), ny(2026, 11, 2, 12, 0));
        assert_eq!(got, ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]);
    }

    #[test]
    fn on_the_spring_forward_day_a_time_in_the_gap_fires_at_three() {
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
        let s = Schedule::parse("30 2 * * *", NY).unwrap();
        let got = fires(&s, ny(2026, 3, 7, 12, 0), ny(2026, 3, 9, 12, 0));
        assert_eq!(got, ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]);
    }

    #[test]
    fn weekdays_are_posix_monday_to_friday() {
        let s = Schedule::parse("0 9 * * 1-5", NY).unwrap();
        // Sunday 2026-03-01 to Sunday 2026-03-15: two full weeks, across the DST change.
        let got = fires(&s, ny(2026, 3, 1, 0, 0), ny(2026, 3, 15, 23, 0));
        assert_eq!(got.len(), 10);
        let tz = parse_zone(NY).unwrap();
        for text in &got {
            let t = DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&tz);
            assert!(!matches!(t.weekday(), Weekday::Sat | Weekday::Sun), "{text} is a weekend day");
            assert_eq!(t.format("%H:%M").to_string(), "09:00", "{text} is not 09:00 local");
        }
        // Sunday as 0 and as 7 is the same day.
        let sun0 = Schedule::parse("0 9 * * 0", NY).unwrap().next_after(ny(2026, 3, 2, 0, 0));
        let sun7 = Schedule::parse("0 9 * * 7", NY).unwrap().next_after(ny(2026, 3, 2, 0, 0));
        assert_eq!(sun0, sun7);
        assert_eq!(format_in(sun0.unwrap(), NY), "2026-03-08T09:00:00-04:00");
    }

    #[test]
    fn bad_expressions_name_their_field() {
        let err = |e: &str| Schedule::parse(e, NY).unwrap_err().to_string();
        assert!(err("61 * * * *").contains("invalid minute field `61`"), "{}", err("61 * * * *"));
        assert!(err("0 24 * * *").contains("invalid hour field `24`"));
        assert!(err("0 0 32 * *").contains("invalid day of month field `32`"));
        assert!(err("0 0 * 13 *").contains("invalid month field `13`"));
        assert!(err("0 9 * * MON-XYZ").contains("day of week"), "{}", err("0 9 * * MON-XYZ"));
        assert!(err("0 9 * *").contains("has 4 field(s)"));
        assert!(err("0 0 9 * * *").contains("has 6 field(s)"));
        assert!(err("").contains("has 0 field(s)"));
        assert!(err("0 0 31 2 *").contains("matches no date"), "{}", err("0 0 31 2 *"));
        let zone = Schedule::parse("* * * * *", "Mars/Olympus").unwrap_err().to_string();
        assert!(zone.contains("not an IANA time zone"), "{zone}");
    }

    #[test]
    fn the_machine_zone_is_a_valid_name() {
        assert!(parse_zone(&machine_zone()).is_ok());
    }
}
