//! The rows of `cargo xtask bench summary`.
//!
//! A benchmark prints each headline figure once more as a tagged line,
//! `@summary\t{json}`; the summary collects those lines from every benchmark's output and prints
//! them as one table (and heads `docs/benchmarks.md` with it). A benchmark run on its own prints
//! them too, which costs a line each.

/// What "met" means for a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// toolgate's value at most this (lower is better: a latency, a size).
    AtMost(f64),
    /// toolgate's value at least this (higher is better: a throughput).
    AtLeast(f64),
    /// toolgate over the peer at most this (lower is better).
    RatioAtMost(f64),
    /// toolgate over the peer at least this (higher is better).
    RatioAtLeast(f64),
    /// Reported only.
    None,
}

/// One row: a figure of toolgate's, maybe beside a peer's.
#[derive(Debug, Clone)]
pub struct Row {
    metric: String,
    unit: String,
    toolgate: f64,
    peer: Option<(String, f64)>,
    target: Target,
}

impl Row {
    /// `metric` measured as `toolgate` in `unit` (`ms`, `µs`, `calls/s`, `MB/s`, `tokens`, ...).
    pub fn new(metric: impl Into<String>, toolgate: f64, unit: impl Into<String>) -> Self {
        Row { metric: metric.into(), unit: unit.into(), toolgate, peer: None, target: Target::None }
    }

    /// The same figure of the named peer, measured in the same run.
    pub fn peer(mut self, name: impl Into<String>, value: f64) -> Self {
        self.peer = Some((name.into(), value));
        self
    }

    /// The target the row is judged by.
    pub fn target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// toolgate over the peer, when there is a peer with a non-zero figure.
    pub fn ratio(&self) -> Option<f64> {
        self.peer.as_ref().and_then(|(_, p)| (*p != 0.0).then(|| self.toolgate / p))
    }

    /// Whether the target is met; `None` without a target (or a ratio target without a peer).
    pub fn met(&self) -> Option<bool> {
        match self.target {
            Target::AtMost(t) => Some(self.toolgate <= t),
            Target::AtLeast(t) => Some(self.toolgate >= t),
            Target::RatioAtMost(t) => self.ratio().map(|r| r <= t),
            Target::RatioAtLeast(t) => self.ratio().map(|r| r >= t),
            Target::None => None,
        }
    }

    /// Prints the tagged line the summary collects.
    pub fn emit(&self) {
        println!("@summary\t{}", self.json());
    }

    /// The row as one line of JSON.
    pub fn json(&self) -> String {
        let (kind, value) = match self.target {
            Target::AtMost(t) => ("at_most", t),
            Target::AtLeast(t) => ("at_least", t),
            Target::RatioAtMost(t) => ("ratio_at_most", t),
            Target::RatioAtLeast(t) => ("ratio_at_least", t),
            Target::None => ("none", 0.0),
        };
        let peer = match &self.peer {
            Some((name, v)) => format!(r#"{{"name":{},"value":{}}}"#, quote(name), number(*v)),
            None => "null".to_owned(),
        };
        let met = match self.met() {
            Some(m) => m.to_string(),
            None => "null".to_owned(),
        };
        format!(
            r#"{{"metric":{},"unit":{},"toolgate":{},"peer":{peer},"target":{{"kind":"{kind}","value":{}}},"met":{met}}}"#,
            quote(&self.metric),
            quote(&self.unit),
            number(self.toolgate),
            number(value),
        )
    }
}

/// A JSON number (a figure that is not finite is written as null).
fn number(v: f64) -> String {
    if v.is_finite() { format!("{v}") } else { "null".to_owned() }
}

/// A JSON string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_judged_by_its_target() {
        let row = Row::new("screenshot p50", 12.0, "ms").peer("Playwright MCP", 10.0).target(Target::RatioAtMost(1.2));
        assert_eq!(row.ratio(), Some(1.2));
        assert_eq!(row.met(), Some(true));
        assert_eq!(Row::new("echo", 9.0, "ms").target(Target::AtMost(8.0)).met(), Some(false));
        assert_eq!(Row::new("scan", 1.1, "GB/s").target(Target::AtLeast(1.0)).met(), Some(true));
        assert_eq!(Row::new("x", 1.0, "ms").target(Target::RatioAtMost(1.0)).met(), None, "no peer");
    }

    #[test]
    fn the_line_is_json_whatever_the_names() {
        let row = Row::new("a \"quoted\"\tname\\", f64::NAN, "ms").peer("p", 2.0);
        let json = row.json();
        assert!(json.starts_with(r#"{"metric":"a \"quoted\"\u0009name\\","#), "{json}");
        assert!(json.contains(r#""toolgate":null"#), "{json}");
        assert!(json.contains(r#""met":null"#), "{json}");
    }
}
