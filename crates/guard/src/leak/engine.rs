//! The scanning engine: keyword prefilter, windowed regex search, filters, overlap resolution.

use std::ops::Range;
use std::sync::OnceLock;

use regex_automata::{Input, meta, util::syntax};

use super::multi::Keywords;
use super::{Finding, LeakAction, Redacted, Rule, generic, rules};
use crate::output::{ceil_char_boundary, floor_char_boundary};

/// Secret environment values shorter than this are ignored (too many false hits).
const MIN_SECRET_VALUE_LEN: usize = 8;
/// Longer values (a whole certificate bundle in a variable) are not looked for verbatim; the
/// private-key rules still see keys inside them.
const MAX_SECRET_VALUE_LEN: usize = 16 << 10;
/// At most this many values, so the keyword automaton stays small.
const MAX_SECRET_VALUES: usize = 1024;

/// How a rule finds its matches once its keyword hit.
#[derive(Debug)]
pub(crate) enum Matcher {
    /// A byte regex searched in a window of `before` bytes before the keyword start to `after`
    /// bytes after it. The secret is the first capture group that took part in the match, or
    /// the whole match when the pattern has no group.
    Regex { regex: LazyRegex, pattern: String, before: usize, after: usize, filter: Filter },
    /// The hand-written `name = value` matcher of the generic rules ([`generic`]).
    Assignment(generic::Class),
    /// Verbatim values of secret environment variables (no keywords of its own).
    SecretValue,
}

/// Checks a candidate secret must pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filter {
    /// Reject documentation placeholders (`EXAMPLE`, long runs of one character, well-known
    /// sample tokens).
    pub placeholder: bool,
    /// Minimum Shannon entropy (bits per byte) of the secret; 0 disables.
    pub min_entropy: f64,
    /// A structural check (base64 that decodes to `user:pass`, ...).
    pub validate: Option<fn(&[u8]) -> bool>,
    /// Lower priority: loses every overlap with a specific rule.
    pub generic: bool,
    /// A cheap check at a keyword hit (`bytes`, keyword end) before its window is searched,
    /// for keywords that occur often in ordinary text (`://`).
    pub precheck: Option<fn(&[u8], usize) -> bool>,
}

/// Where a keyword hit sends the scan.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Run rule `rule`; if `exact` is set the hit must match it byte for byte.
    Rule { rule: usize, exact: Option<&'static str> },
    /// The verbatim secret value number `value`.
    Value(usize),
    /// Injection trigger number `n` ([`crate::injection`]), searched in the same pass.
    Trigger(usize),
}

/// The leak detector: built once (rules compiled, one Aho-Corasick automaton over all their
/// keywords and the secret values), then shared (`Send + Sync`, cheap behind an `Arc`).
#[derive(Debug)]
pub struct LeakDetector {
    rules: Vec<Rule>,
    values: Vec<String>,
    value_rule: usize,
    /// Rule index per [`generic::Class`].
    generic_rules: [usize; generic::Class::COUNT],
    prefilter: Keywords,
    /// Per Aho-Corasick pattern id: where a hit goes.
    targets: Vec<Vec<Target>>,
}

impl Default for LeakDetector {
    fn default() -> Self {
        Self::new()
    }
}

impl LeakDetector {
    /// A detector with the built-in rules.
    pub fn new() -> Self {
        let rules = rules::builtin();
        let value_rule = rules.iter().position(|r| matches!(r.matcher, Matcher::SecretValue)).unwrap_or(0);
        let mut generic_rules = [0; generic::Class::COUNT];
        for (i, r) in rules.iter().enumerate() {
            if let Matcher::Assignment(class) = r.matcher {
                generic_rules[class as usize] = i;
            }
        }
        let (prefilter, targets) = build_prefilter(&rules, &[]);
        LeakDetector { rules, values: Vec::new(), value_rule, generic_rules, prefilter, targets }
    }

    /// Adds verbatim secret values (for example the values of the server's secret environment
    /// variables): any occurrence in a scanned text is a finding of rule `env-secret-value`.
    /// Values shorter than 8 bytes or longer than 16 KB are ignored, and at most 1,024 values
    /// are kept.
    pub fn with_secret_values(mut self, values: impl IntoIterator<Item = String>) -> Self {
        let before = self.values.len();
        for v in values {
            let v = v.trim().to_owned();
            let fits = (MIN_SECRET_VALUE_LEN..=MAX_SECRET_VALUE_LEN).contains(&v.len());
            if fits && self.values.len() < MAX_SECRET_VALUES && !self.values.contains(&v) {
                self.values.push(v);
            }
        }
        if self.values.len() == before {
            // Nothing new (the usual `from_env` without secret variables): keep the automaton.
            return self;
        }
        let (prefilter, targets) = build_prefilter(&self.rules, &self.values);
        self.prefilter = prefilter;
        self.targets = targets;
        self
    }

    /// Adds the values of this process's environment variables whose names
    /// [`crate::env::is_secret_name`] calls secret. Values that are file paths (`/...`, `~/...`,
    /// `./...`: `GOOGLE_APPLICATION_CREDENTIALS` names a file, it is not the secret) are skipped.
    pub fn from_env(self) -> Self {
        let values: Vec<String> = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.to_str()?;
                let v = v.into_string().ok()?;
                let path = v.starts_with('/') || v.starts_with("~/") || v.starts_with("./");
                (crate::env::is_secret_name(k) && !path).then_some(v)
            })
            .collect();
        self.with_secret_values(values)
    }

    /// The rules, in priority order (earlier wins a tie).
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Every secret in `text`, sorted by position, non-overlapping.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        self.scan_with_triggers(text, None)
    }

    /// [`LeakDetector::scan`], also collecting the injection triggers' hits
    /// (`(trigger, start, end)`) found by the same automaton pass.
    pub(crate) fn scan_with_triggers(
        &self,
        text: &str,
        mut triggers: Option<&mut Vec<(usize, usize, usize)>>,
    ) -> Vec<Finding> {
        let bytes = text.as_bytes();
        let mut windows: Vec<(usize, usize, usize)> = Vec::new();
        let mut cands: Vec<Cand> = Vec::new();
        for (pattern, hit_start, hit_end) in self.prefilter.find_all(bytes) {
            let Some(targets) = self.targets.get(pattern) else { continue };
            for target in targets {
                match *target {
                    Target::Trigger(n) => {
                        if let Some(t) = triggers.as_deref_mut() {
                            t.push((n, hit_start, hit_end));
                        }
                    }
                    Target::Value(i) => {
                        if self.values.get(i).is_some_and(|v| v.as_bytes() == &bytes[hit_start..hit_end]) {
                            cands.push(Cand { rule: self.value_rule, range: hit_start..hit_end, generic: false });
                        }
                    }
                    Target::Rule { rule, exact } => {
                        if exact.is_some_and(|e| e.as_bytes() != &bytes[hit_start..hit_end]) {
                            continue;
                        }
                        match &self.rules[rule].matcher {
                            Matcher::Regex { before, after, filter, .. } => {
                                if filter.precheck.is_some_and(|check| !check(bytes, hit_end)) {
                                    continue;
                                }
                                let start = hit_start.saturating_sub(*before);
                                let end = hit_start.saturating_add(*after).max(hit_end).min(bytes.len());
                                windows.push((rule, start, end));
                            }
                            Matcher::Assignment(_) => {
                                if let Some((range, class)) = generic::assignment(bytes, hit_start, hit_end) {
                                    let rule = self.generic_rules[class as usize];
                                    cands.push(Cand { rule, range, generic: true });
                                }
                            }
                            Matcher::SecretValue => {}
                        }
                    }
                }
            }
        }
        self.run_windows(bytes, &mut windows, &mut cands);
        resolve(text, &self.rules, cands)
    }

    fn run_windows(&self, bytes: &[u8], windows: &mut [(usize, usize, usize)], cands: &mut Vec<Cand>) {
        windows.sort_unstable();
        let mut i = 0;
        while i < windows.len() {
            let (rule, start, mut end) = windows[i];
            i += 1;
            while i < windows.len() && windows[i].0 == rule && windows[i].1 <= end {
                end = end.max(windows[i].2);
                i += 1;
            }
            let Matcher::Regex { regex, filter, .. } = &self.rules[rule].matcher else { continue };
            let regex = regex.get();
            let input = Input::new(bytes).range(start..end);
            if regex.captures_len() > 1 {
                for caps in regex.captures_iter(input) {
                    let Some(span) = (1..caps.group_len()).find_map(|g| caps.get_group(g)) else { continue };
                    if accept(filter, &bytes[span.range()]) {
                        cands.push(Cand { rule, range: span.range(), generic: filter.generic });
                    }
                }
            } else {
                for m in regex.find_iter(input) {
                    if accept(filter, &bytes[m.range()]) {
                        cands.push(Cand { rule, range: m.range(), generic: filter.generic });
                    }
                }
            }
        }
    }

    /// The same scan without the keyword prefilter and without windows: every rule's regex runs
    /// separately over the whole text (the generic rules run their matcher at every match of
    /// their keyword regex). Only for benchmarks (the baseline) and tests (it must find exactly
    /// what [`LeakDetector::scan`] finds).
    #[doc(hidden)]
    pub fn scan_naive(&self, text: &str) -> Vec<Finding> {
        static GENERIC_KEYWORDS: OnceLock<meta::Regex> = OnceLock::new();
        let bytes = text.as_bytes();
        let mut cands = Vec::new();
        for (rule, r) in self.rules.iter().enumerate() {
            match &r.matcher {
                Matcher::Regex { .. } => self.run_windows(bytes, &mut [(rule, 0, bytes.len())], &mut cands),
                Matcher::Assignment(class) => {
                    let keywords = GENERIC_KEYWORDS
                        .get_or_init(|| compile_now("generic", "(?i)passw|pwd|passphrase|secret|token|key"));
                    for m in keywords.find_iter(bytes) {
                        if let Some((range, c)) = generic::assignment(bytes, m.start(), m.end())
                            && c == *class
                        {
                            cands.push(Cand { rule, range, generic: true });
                        }
                    }
                }
                Matcher::SecretValue => {
                    for v in &self.values {
                        for at in memchr::memmem::find_iter(bytes, v.as_bytes()) {
                            cands.push(Cand { rule, range: at..at + v.len(), generic: false });
                        }
                    }
                }
            }
        }
        resolve(text, &self.rules, cands)
    }

    /// Scans `text` and replaces every `Block` or `Redact` finding with `[REDACTED:<rule-id>]`.
    pub fn redact(&self, text: &str) -> Redacted {
        let findings = self.scan(text);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut blocked = false;
        for f in &findings {
            if f.action == LeakAction::Warn {
                continue;
            }
            blocked |= f.action == LeakAction::Block;
            out.push_str(&text[at..f.range.start]);
            out.push_str(super::MARKER_PREFIX);
            out.push_str(f.rule_id);
            out.push(']');
            at = f.range.end;
        }
        out.push_str(&text[at..]);
        Redacted { text: out, findings, blocked }
    }
}

/// A candidate finding before overlap resolution.
#[derive(Debug, Clone)]
struct Cand {
    rule: usize,
    range: Range<usize>,
    generic: bool,
}

fn accept(filter: &Filter, secret: &[u8]) -> bool {
    if filter.placeholder && generic::is_placeholder(secret) {
        return false;
    }
    if filter.min_entropy > 0.0 && super::shannon_entropy(secret) < filter.min_entropy {
        return false;
    }
    filter.validate.is_none_or(|v| v(secret))
}

/// Specific candidates first (leftmost, then longest, then earlier rule), then generic ones
/// where they overlap nothing already taken; the result sorted by position.
fn resolve(text: &str, rules: &[Rule], mut cands: Vec<Cand>) -> Vec<Finding> {
    // toolgate's own ids (lock tokens, process ids, ...) are not credentials; a look-alike
    // without this process's tag is (see `crate::ids`).
    cands.retain(|c| !crate::ids::within_ours(text, c.range.clone()));
    if cands.is_empty() {
        return Vec::new();
    }
    for c in &mut cands {
        c.range = floor_char_boundary(text, c.range.start)..ceil_char_boundary(text, c.range.end);
    }
    cands.retain(|c| !c.range.is_empty());
    cands.sort_by(|a, b| {
        (a.generic, a.range.start, std::cmp::Reverse(a.range.end), a.rule).cmp(&(
            b.generic,
            b.range.start,
            std::cmp::Reverse(b.range.end),
            b.rule,
        ))
    });
    let mut taken: Vec<Cand> = Vec::new();
    let mut last_end = 0;
    let split = cands.iter().position(|c| c.generic).unwrap_or(cands.len());
    for c in &cands[..split] {
        if taken.is_empty() || c.range.start >= last_end {
            last_end = c.range.end;
            taken.push(c.clone());
        }
    }
    let specific_len = taken.len();
    let mut last_generic_end = 0;
    for c in &cands[split..] {
        if c.range.start < last_generic_end && specific_len < taken.len() {
            continue;
        }
        // `taken[..specific_len]` is sorted and non-overlapping: find the first one ending after
        // our start and check it begins at or after our end.
        let specific = &taken[..specific_len];
        let idx = specific.partition_point(|t| t.range.end <= c.range.start);
        if specific.get(idx).is_some_and(|t| t.range.start < c.range.end) {
            continue;
        }
        last_generic_end = c.range.end;
        taken.push(c.clone());
    }
    taken.sort_by_key(|c| c.range.start);
    taken
        .into_iter()
        .map(|c| {
            let r = &rules[c.rule];
            Finding { rule_id: r.id, severity: r.severity, action: r.action, range: c.range }
        })
        .collect()
}

fn build_prefilter(rules: &[Rule], values: &[String]) -> (Keywords, Vec<Vec<Target>>) {
    // One automaton pattern per distinct lower-cased keyword.
    let mut patterns: Vec<Vec<u8>> = Vec::new();
    let mut targets: Vec<Vec<Target>> = Vec::new();
    let mut index = std::collections::HashMap::<Vec<u8>, usize>::new();
    let mut add = |key: Vec<u8>, target: Target| {
        let id = *index.entry(key.clone()).or_insert_with(|| {
            patterns.push(key);
            targets.push(Vec::new());
            targets.len() - 1
        });
        targets[id].push(target);
    };
    for (i, rule) in rules.iter().enumerate() {
        let case_sensitive = rule.case_sensitive;
        for kw in rule.keywords {
            add(kw.to_ascii_lowercase().into_bytes(), Target::Rule { rule: i, exact: case_sensitive.then_some(*kw) });
        }
    }
    for (n, t) in crate::injection::trigger_literals().iter().enumerate() {
        add(t.to_ascii_lowercase().into_bytes(), Target::Trigger(n));
    }
    for (i, v) in values.iter().enumerate() {
        add(v.to_ascii_lowercase().into_bytes(), Target::Value(i));
    }
    let prefilter = Keywords::new(&patterns);
    (prefilter, targets)
}

/// A rule's regex, compiled on its first keyword hit. Most texts hit few rules, and compiling
/// all of them up front was most of what a short-lived process such as `toolgate call` spent
/// before doing anything (about 60 ms of 90).
#[derive(Debug)]
pub(crate) struct LazyRegex {
    id: String,
    pattern: String,
    compiled: OnceLock<meta::Regex>,
}

impl LazyRegex {
    /// The compiled regex (built-in patterns are constants, checked by a test).
    pub(crate) fn get(&self) -> &meta::Regex {
        self.compiled.get_or_init(|| compile_now(&self.id, &self.pattern))
    }
}

/// A constant rule pattern in ASCII byte mode, compiled when first needed.
pub(crate) fn compile(id: &str, pattern: &str) -> LazyRegex {
    LazyRegex { id: id.to_owned(), pattern: pattern.to_owned(), compiled: OnceLock::new() }
}

/// Compiles a constant rule pattern in ASCII byte mode.
pub(crate) fn compile_now(id: &str, pattern: &str) -> meta::Regex {
    meta::Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(meta::Config::new().utf8_empty(false))
        .build(pattern)
        .unwrap_or_else(|e| panic!("built-in leak rule {id} has an invalid pattern: {e}"))
}

#[cfg(test)]
mod lazy_tests {
    use super::*;

    /// Rule regexes compile on first use: every built-in pattern must compile (a bad one would
    /// otherwise panic in the middle of a scan).
    #[test]
    fn every_builtin_pattern_compiles() {
        let detector = LeakDetector::new();
        let mut regexes = 0;
        for rule in detector.rules() {
            if let Matcher::Regex { regex, .. } = &rule.matcher {
                let compiled = std::panic::catch_unwind(|| regex.get().captures_len());
                assert!(compiled.is_ok(), "rule {} does not compile", rule.id);
                regexes += 1;
            }
        }
        assert!(regexes > 50, "{regexes} regex rules");
    }
}
