//! The value conversions a dialect parameter may need on its way to a canonical parameter: the
//! whole vocabulary, so a dialect file can only ask for one of these.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// How a dialect value becomes the canonical value(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// The value as it is.
    Same,
    /// A 0-based line or index: toolgate counts from 1.
    ZeroBased,
    /// `[start, end]` or `"start-end"`, 1-based and inclusive: an offset and a line count.
    LineRange,
    /// Milliseconds: whole seconds, rounded up, at least 1.
    MsToSeconds,
    /// `SIGTERM`, `sigterm`, `TERM` or `15`: toolgate's signal name (`TERM`).
    Signal,
    /// A list of globs: one glob (`{a,b}` alternation).
    GlobList,
    /// A string from a fixed set: the mapped string (others unchanged).
    Values(BTreeMap<String, String>),
}

impl Conversion {
    pub(crate) fn parse(name: Option<&str>, values: &BTreeMap<String, String>) -> Result<Self, String> {
        let conversion = match name {
            None => Conversion::Same,
            Some("zero_based") => Conversion::ZeroBased,
            Some("line_range") => Conversion::LineRange,
            Some("ms_to_seconds") => Conversion::MsToSeconds,
            Some("signal") => Conversion::Signal,
            Some("glob_list") => Conversion::GlobList,
            Some("values") if !values.is_empty() => return Ok(Conversion::Values(values.clone())),
            Some("values") => return Err("conversion `values` needs a `values` table".to_owned()),
            Some(other) => return Err(format!("unknown conversion `{other}`")),
        };
        if !values.is_empty() {
            return Err("`values` is only for the conversion `values`".to_owned());
        }
        Ok(conversion)
    }

    /// How many canonical parameters it fills.
    pub(crate) fn targets(&self) -> usize {
        if *self == Conversion::LineRange { 2 } else { 1 }
    }

    /// Whether a canonical value passes through unchanged, so the default dialect can apply it
    /// to a canonical parameter of the same name without changing what toolgate's own callers
    /// mean (`SIGTERM` as well as `TERM`, `status` as well as `poll`; never a 0-based offset).
    pub(crate) fn widens(&self) -> bool {
        matches!(self, Conversion::Same | Conversion::Signal | Conversion::Values(_))
    }

    /// Converts `value`, or says what the caller must give instead (`param` names it).
    pub(crate) fn apply(&self, param: &str, value: Value) -> Result<Vec<Value>, String> {
        let one = |v: Value| Ok(vec![v]);
        match self {
            Conversion::Same => one(value),
            Conversion::ZeroBased => match value.as_i64() {
                Some(n) if n >= 0 => match n.checked_add(1) {
                    Some(next) => one(json!(next)),
                    None => Err(format!("`{param}` is out of range")),
                },
                Some(_) => Err(format!("`{param}` counts from 0 here: give 0 or more")),
                None => Err(format!("`{param}` must be a whole number (0-based), got {}", brief(&value))),
            },
            Conversion::LineRange => {
                line_range(param, &value).map(|(start, end)| vec![json!(start), json!(end - start + 1)])
            }
            Conversion::MsToSeconds => match value.as_u64() {
                Some(ms) => one(json!(ms.div_ceil(1000).max(1))),
                None => {
                    Err(format!("`{param}` must be a whole number of milliseconds (0 or more), got {}", brief(&value)))
                }
            },
            Conversion::Signal => one(signal(&value).map_or(value, Value::from)),
            Conversion::GlobList => glob_list(param, value).map(|g| vec![g]),
            Conversion::Values(map) => match value.as_str().and_then(|s| map.get(s)) {
                Some(mapped) => one(Value::from(mapped.as_str())),
                None => one(value),
            },
        }
    }
}

/// `[start, end]` or `"start-end"` (or `"N"`: one line), 1-based and inclusive.
fn line_range(param: &str, value: &Value) -> Result<(u64, u64), String> {
    let usage = format!("`{param}` is `[start, end]` or `\"start-end\"`, 1-based and inclusive (e.g. [10, 20])");
    let (start, end) = match value {
        Value::Array(items) if items.len() == 2 => match (items[0].as_u64(), items[1].as_u64()) {
            (Some(s), Some(e)) => (s, e),
            _ => return Err(format!("{usage}; got {}", brief(value))),
        },
        Value::String(text) => {
            let text = text.trim();
            let (s, e) = text.split_once('-').unwrap_or((text, text));
            match (s.trim().parse::<u64>(), e.trim().parse::<u64>()) {
                (Ok(s), Ok(e)) => (s, e),
                _ => return Err(format!("{usage}; got {}", brief(value))),
            }
        }
        _ => return Err(format!("{usage}; got {}", brief(value))),
    };
    if start == 0 {
        return Err(format!("{usage}: lines count from 1, got a start of 0"));
    }
    if end < start {
        return Err(format!("{usage}: the end ({end}) is before the start ({start})"));
    }
    Ok((start, end))
}

/// A signal's name as toolgate writes it, from a name in any case with or without `SIG`, or
/// its Linux number; `None` leaves the value for the schema to refuse.
fn signal(value: &Value) -> Option<&'static str> {
    const SIGNALS: &[(&str, u64)] = &[
        ("HUP", 1),
        ("INT", 2),
        ("QUIT", 3),
        ("KILL", 9),
        ("USR1", 10),
        ("USR2", 12),
        ("TERM", 15),
        ("CONT", 18),
        ("STOP", 19),
    ];
    let by_number = |n: u64| SIGNALS.iter().find(|(_, num)| *num == n).map(|(name, _)| *name);
    match value {
        Value::Number(n) => n.as_u64().and_then(by_number),
        Value::String(s) => {
            let upper = s.trim().to_ascii_uppercase();
            let name = upper.strip_prefix("SIG").unwrap_or(&upper);
            SIGNALS.iter().find(|(n, _)| *n == name).map(|(n, _)| *n).or_else(|| name.parse().ok().and_then(by_number))
        }
        _ => None,
    }
}

fn glob_list(param: &str, value: Value) -> Result<Value, String> {
    let globs: Vec<String> = match value {
        Value::String(s) => return Ok(Value::String(s)),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) if !s.is_empty() => Ok(s),
                other => Err(format!("`{param}` is a list of glob strings, got {}", brief(&other))),
            })
            .collect::<Result<_, _>>()?,
        other => return Err(format!("`{param}` is a list of glob strings, got {}", brief(&other))),
    };
    match globs.as_slice() {
        [] => Err(format!("`{param}` is empty: give at least one glob, e.g. [\"**/*.rs\"]")),
        [one] => Ok(Value::String(one.clone())),
        many => {
            // One glob with `{a,b}` alternation; a glob that already has braces, commas or a `!`
            // exclusion cannot be joined without changing what it means.
            if let Some(bad) = many.iter().find(|g| g.contains(['{', '}', ',']) || g.starts_with('!')) {
                return Err(format!(
                    "`{param}`: `{bad}` cannot be combined with other globs (braces, commas or `!`); give it alone"
                ));
            }
            Ok(Value::String(format!("{{{}}}", many.join(","))))
        }
    }
}

/// A value in a few words, for error messages (never the whole of a long string).
pub(crate) fn brief(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 40 => format!("a string of {} characters", s.chars().count()),
        Value::Array(a) if a.len() > 4 => format!("a list of {} items", a.len()),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(c: &Conversion, v: Value) -> Result<Vec<Value>, String> {
        c.apply("p", v)
    }

    #[test]
    fn zero_based_adds_one_and_refuses_negatives() {
        assert_eq!(apply(&Conversion::ZeroBased, json!(0)).unwrap(), vec![json!(1)]);
        assert_eq!(apply(&Conversion::ZeroBased, json!(9)).unwrap(), vec![json!(10)]);
        assert!(apply(&Conversion::ZeroBased, json!(-1)).unwrap_err().contains("counts from 0"));
        assert!(apply(&Conversion::ZeroBased, json!("3")).is_err());
    }

    #[test]
    fn line_ranges_in_both_forms() {
        for v in [json!([3, 5]), json!("3-5"), json!(" 3 - 5 ")] {
            assert_eq!(apply(&Conversion::LineRange, v).unwrap(), vec![json!(3), json!(3)]);
        }
        assert_eq!(apply(&Conversion::LineRange, json!("7")).unwrap(), vec![json!(7), json!(1)]);
        assert!(apply(&Conversion::LineRange, json!([5, 3])).unwrap_err().contains("before the start"));
        assert!(apply(&Conversion::LineRange, json!([0, 3])).unwrap_err().contains("count from 1"));
        for bad in [json!([1]), json!("a-b"), json!([1, -2]), json!(4), json!("1-2-3")] {
            assert!(apply(&Conversion::LineRange, bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn milliseconds_round_up_to_seconds() {
        assert_eq!(apply(&Conversion::MsToSeconds, json!(1500)).unwrap(), vec![json!(2)]);
        assert_eq!(apply(&Conversion::MsToSeconds, json!(0)).unwrap(), vec![json!(1)]);
        assert_eq!(apply(&Conversion::MsToSeconds, json!(30000)).unwrap(), vec![json!(30)]);
        assert!(apply(&Conversion::MsToSeconds, json!(-5)).is_err());
    }

    #[test]
    fn signals_by_any_name_or_number() {
        for v in [json!("SIGTERM"), json!("sigterm"), json!("TERM"), json!(15), json!("15")] {
            assert_eq!(apply(&Conversion::Signal, v).unwrap(), vec![json!("TERM")]);
        }
        // Unknown signals are left for the schema's enum to refuse with the list.
        assert_eq!(apply(&Conversion::Signal, json!("SIGWINCH")).unwrap(), vec![json!("SIGWINCH")]);
    }

    #[test]
    fn glob_lists_join_with_alternation() {
        assert_eq!(apply(&Conversion::GlobList, json!(["*.rs"])).unwrap(), vec![json!("*.rs")]);
        assert_eq!(apply(&Conversion::GlobList, json!(["*.rs", "*.md"])).unwrap(), vec![json!("{*.rs,*.md}")]);
        assert_eq!(apply(&Conversion::GlobList, json!("src/**")).unwrap(), vec![json!("src/**")]);
        assert!(apply(&Conversion::GlobList, json!([])).is_err());
        assert!(apply(&Conversion::GlobList, json!(["{a,b}", "c"])).is_err());
        assert!(apply(&Conversion::GlobList, json!(["!x", "c"])).is_err());
    }

    #[test]
    fn values_are_renamed_and_others_pass() {
        let values = Conversion::Values(BTreeMap::from([("status".to_owned(), "poll".to_owned())]));
        assert_eq!(apply(&values, json!("status")).unwrap(), vec![json!("poll")]);
        assert_eq!(apply(&values, json!("kill")).unwrap(), vec![json!("kill")]);
    }

    #[test]
    fn unknown_conversions_are_refused() {
        assert!(Conversion::parse(Some("base64"), &BTreeMap::new()).is_err());
        assert!(Conversion::parse(Some("values"), &BTreeMap::new()).is_err());
    }
}
