//! The process's call counters and latency histograms, in Prometheus' text format (`GET
//! /metrics` of `toolgate serve --http`, `docs/operations.md`).
//!
//! One set per process, like a Prometheus client's default registry: a team gateway's own gate
//! and every user's gate count into it, so one scrape sees the whole server. Every finished call
//! adds to its tool's counter (by outcome) and histogram under one short
//! lock. A tool name is a label only once the call resolved to a registered tool: a name a
//! client made up is counted as `(unknown)`, so a hostile client cannot grow the label set; and
//! past [`MAX_TOOLS`] names (bridged servers can bring many) the rest share `(other)`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (`le`).
const BUCKETS: [f64; 10] = [0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

/// The most tool names kept as labels.
pub const MAX_TOOLS: usize = 512;

/// The label of calls that named no registered tool.
pub const UNKNOWN_TOOL: &str = "(unknown)";

/// The label of tools past [`MAX_TOOLS`].
const OTHER_TOOL: &str = "(other)";

#[derive(Debug, Default)]
struct ToolCalls {
    /// Calls by outcome (`ok`, or the error's kind).
    outcomes: HashMap<&'static str, u64>,
    /// Calls per bucket of [`BUCKETS`] (not cumulative; summed when rendered), then the rest.
    buckets: [u64; BUCKETS.len() + 1],
    seconds: f64,
}

/// A set of call counters.
#[derive(Debug, Default)]
pub struct Metrics {
    tools: Mutex<HashMap<String, ToolCalls>>,
}

/// The counters every gate of this process adds to.
pub fn process() -> &'static Metrics {
    static PROCESS: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();
    PROCESS.get_or_init(Metrics::default)
}

impl Metrics {
    /// Counts a finished call of `tool` (a registered tool's name, or [`UNKNOWN_TOOL`]).
    pub fn observe(&self, tool: &str, outcome: &'static str, took: Duration) {
        let mut tools = self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = if tools.contains_key(tool) || tools.len() < MAX_TOOLS { tool } else { OTHER_TOOL };
        let calls = match tools.get_mut(key) {
            Some(calls) => calls,
            None => tools.entry(key.to_owned()).or_default(),
        };
        *calls.outcomes.entry(outcome).or_default() += 1;
        let secs = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|le| secs <= *le).unwrap_or(BUCKETS.len());
        calls.buckets[bucket] += 1;
        calls.seconds += secs;
    }

    /// The counters in Prometheus' text exposition format, tools in name order.
    pub fn render(&self) -> String {
        let tools = self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut names: Vec<&String> = tools.keys().collect();
        names.sort();
        let mut out = String::new();
        out.push_str("# HELP toolgate_calls_total Tool calls finished, by tool and outcome.\n");
        out.push_str("# TYPE toolgate_calls_total counter\n");
        for name in &names {
            let mut outcomes: Vec<_> = tools[*name].outcomes.iter().collect();
            outcomes.sort();
            for (outcome, n) in outcomes {
                let _ = writeln!(out, "toolgate_calls_total{{tool=\"{}\",outcome=\"{outcome}\"}} {n}", label(name));
            }
        }
        out.push_str("# HELP toolgate_call_duration_seconds Time from a call's arrival to its answer.\n");
        out.push_str("# TYPE toolgate_call_duration_seconds histogram\n");
        for name in &names {
            let calls = &tools[*name];
            let tool = label(name);
            let mut cumulative = 0;
            for (le, n) in BUCKETS.iter().zip(calls.buckets) {
                cumulative += n;
                let _ =
                    writeln!(out, "toolgate_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{le}\"}} {cumulative}");
            }
            let count = cumulative + calls.buckets[BUCKETS.len()];
            let _ = writeln!(out, "toolgate_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {count}");
            let _ = writeln!(out, "toolgate_call_duration_seconds_sum{{tool=\"{tool}\"}} {}", calls.seconds);
            let _ = writeln!(out, "toolgate_call_duration_seconds_count{{tool=\"{tool}\"}} {count}");
        }
        out
    }
}

/// `text` as a label value: backslash, quote and newline escaped (a bridged server names its
/// tools; the format has no other escapes).
pub fn label(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_tool_and_outcome_with_cumulative_buckets() {
        let m = Metrics::default();
        m.observe("echo", "ok", Duration::from_micros(300));
        m.observe("echo", "ok", Duration::from_millis(3));
        m.observe("echo", "denied", Duration::from_secs(60));
        let text = m.render();
        assert!(text.contains("toolgate_calls_total{tool=\"echo\",outcome=\"ok\"} 2\n"), "{text}");
        assert!(text.contains("toolgate_calls_total{tool=\"echo\",outcome=\"denied\"} 1\n"), "{text}");
        assert!(text.contains("toolgate_call_duration_seconds_bucket{tool=\"echo\",le=\"0.0005\"} 1\n"), "{text}");
        assert!(text.contains("toolgate_call_duration_seconds_bucket{tool=\"echo\",le=\"0.005\"} 2\n"), "{text}");
        assert!(text.contains("toolgate_call_duration_seconds_bucket{tool=\"echo\",le=\"30\"} 2\n"), "{text}");
        assert!(text.contains("toolgate_call_duration_seconds_bucket{tool=\"echo\",le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("toolgate_call_duration_seconds_count{tool=\"echo\"} 3\n"), "{text}");
    }

    #[test]
    fn hostile_names_are_escaped_and_the_label_set_is_bounded() {
        let m = Metrics::default();
        m.observe("evil\"} 1\ntoolgate_calls_total{tool=\"x", "ok", Duration::ZERO);
        let text = m.render();
        assert!(text.contains(r#"tool="evil\"} 1\ntoolgate_calls_total{tool=\"x""#), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("toolgate_calls_total")).count(), 1, "{text}");
        for i in 0..MAX_TOOLS + 10 {
            m.observe(&format!("t{i}"), "ok", Duration::ZERO);
        }
        let text = m.render();
        assert!(text.contains("toolgate_calls_total{tool=\"(other)\",outcome=\"ok\"} 11\n"), "{text}");
    }
}
