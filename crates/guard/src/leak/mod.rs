//! Finding credentials in text: tool output, outgoing requests, audit entries.
//!
//! A [`LeakDetector`] is built once from the built-in rule set ([`LeakDetector::rules`]: cloud providers,
//! code hosts, AI providers, payments, messaging, package registries, private keys, JWTs,
//! database URLs, provider-named values and entropy-gated `key = value` assignments; see
//! `docs/safety.md` for each rule against gitleaks' list) plus, optionally, the verbatim
//! values of the server's own secret environment variables ([`LeakDetector::from_env`]).
//!
//! # How a scan works
//!
//! 1. One Aho-Corasick DFA pass over the text finds every rule keyword (`ghp_`, `AKIA`,
//!    `PRIVATE KEY-----`, `password`, ...) and every secret environment value; the DFA walks
//!    eight parts of a large text in lockstep (its steps are bound by load latency, so
//!    independent walks run side by side). The same pass finds the injection triggers when called through
//!    [`crate::injection::redact_and_neutralize`].
//! 2. Only the rules whose keyword hit run, and only on a window around each hit (the window is
//!    sized by the rule: a fixed-length token needs a few dozen bytes, a PEM block a few KB).
//!    Patterns are byte regexes in ASCII mode; the window search still sees the bytes around
//!    it, so `\b` is exact at window edges.
//! 3. Candidates pass per-rule filters (documentation placeholders such as `...EXAMPLE`, runs of
//!    one character, entropy for the generic rules, structural validators), then overlaps are
//!    resolved: specific rules win over the generic ones, then leftmost-longest.
//!
//! [`LeakDetector::redact`] replaces `Block` and `Redact` findings with `[REDACTED:<rule-id>]`
//! and reports whether any finding asked to block the whole output. Text carrying that marker
//! must never be stored back as a value: see [`contains_redaction_marker`].
//!
//! `cargo bench -p toolgate-guard --bench leak` measures the whole leak + injection stage on
//! 10 MB of source code and logs against a baseline running every rule's regex over the whole
//! text; `cargo run --release -p toolgate-guard --example scan_registry` counts findings per rule
//! on the cargo registry sources (real code, few real secrets).
//!
//! # Example
//!
//! ```
//! use toolgate_guard::leak::LeakDetector;
//!
//! let detector = LeakDetector::new();
//! let out = detector.redact("export GITHUB_TOKEN=ghp_FAKEaB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY");
//! assert_eq!(out.text, "export GITHUB_TOKEN=[REDACTED:github-pat-classic]");
//! assert!(!out.blocked);
//! ```

mod engine;
mod generic;
pub(crate) mod multi;
mod rules;
mod vendors;

use std::ops::Range;

pub use engine::LeakDetector;

/// How bad a leak of this kind is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Identifies an account but grants little (a DSN's public key).
    Low,
    /// Grants some access, or the match is less certain (generic assignments).
    Medium,
    /// Grants access to an account or service.
    High,
    /// Grants broad or lasting access (private keys, cloud secret keys, live payment keys).
    Critical,
}

/// What the output pipeline does with a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakAction {
    /// Replace it and withhold the whole output ([`Redacted::blocked`]).
    Block,
    /// Replace it with `[REDACTED:<rule-id>]`.
    Redact,
    /// Leave it in place; report it for audit.
    Warn,
}

/// One detection rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable id, used in `[REDACTED:<id>]` markers and audit entries (`github-pat-classic`).
    pub id: &'static str,
    /// What the rule finds, for people.
    pub description: &'static str,
    /// How bad a leak is.
    pub severity: Severity,
    /// What to do with a finding.
    pub action: LeakAction,
    /// Keywords that must occur for the rule to run (matched ASCII case-insensitively, then
    /// exactly when the rule is case-sensitive).
    pub keywords: &'static [&'static str],
    /// Whether keyword hits must match the keyword's case exactly.
    pub(crate) case_sensitive: bool,
    pub(crate) matcher: engine::Matcher,
}

impl Rule {
    /// The rule's regex (ASCII byte mode; the secret is its first capture group, or the whole
    /// match), or `None` for rules matched by code: the generic `name = value` rules and the
    /// secret environment values.
    pub fn pattern(&self) -> Option<&str> {
        match &self.matcher {
            engine::Matcher::Regex { pattern, .. } => Some(pattern),
            _ => None,
        }
    }
}

/// A credential found in a text (serializable for the audit log: rule, severity, action and
/// byte range, never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// The rule that matched.
    pub rule_id: &'static str,
    /// The rule's severity.
    pub severity: Severity,
    /// The rule's action.
    pub action: LeakAction,
    /// Byte range of the secret itself in the scanned text (for `key = value` rules, only the
    /// value), always on character boundaries.
    pub range: Range<usize>,
}

/// A text with its secrets replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The text with every `Block` and `Redact` finding replaced by `[REDACTED:<rule-id>]`;
    /// `Warn` findings are left in place.
    pub text: String,
    /// Every finding, with ranges into the *original* text.
    pub findings: Vec<Finding>,
    /// Whether any finding's action is [`LeakAction::Block`]: the caller must not pass the
    /// output on (not even redacted).
    pub blocked: bool,
}

/// The marker written in place of a secret: `[REDACTED:<rule-id>]`.
pub fn redaction_marker(rule_id: &str) -> String {
    format!("{MARKER_PREFIX}{rule_id}]")
}

const MARKER_PREFIX: &str = "[REDACTED:";

/// Whether `text` contains one of our redaction markers (`[REDACTED:<rule-id>]`, or the bare
/// `[REDACTED]`).
///
/// Write and config tools refuse to store such text as a value: a model that read redacted
/// output and writes it back would otherwise replace a real secret with the marker (a peer once
/// wrote its own `***` markers back into a config file).
pub fn contains_redaction_marker(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memmem::find_iter(bytes, b"[REDACTED").any(|at| {
        let rest = &bytes[at + "[REDACTED".len()..];
        match rest.first() {
            Some(b']') => true,
            Some(b':') => {
                let id = &rest[1..];
                let n = id.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b'_').count();
                n > 0 && id.get(n) == Some(&b']')
            }
            _ => false,
        }
    })
}

/// Shannon entropy of `bytes`, in bits per byte.
pub fn shannon_entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / n).map(|p| -p * p.log2()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert!(contains_redaction_marker("token = [REDACTED:github-pat-classic]"));
        assert!(contains_redaction_marker("x [REDACTED] y"));
        assert!(!contains_redaction_marker("token = ***"));
        assert!(!contains_redaction_marker("[REDACTED: nope"));
        assert!(!contains_redaction_marker("[REDACTED"));
        assert_eq!(redaction_marker("jwt"), "[REDACTED:jwt]");
    }

    #[test]
    fn findings_serialize_without_the_secret() {
        let f = Finding { rule_id: "jwt", severity: Severity::High, action: LeakAction::Redact, range: 3..9 };
        let json = serde_json::to_string(&f).unwrap_or_default();
        assert_eq!(json, r#"{"rule_id":"jwt","severity":"high","action":"redact","range":{"start":3,"end":9}}"#);
    }

    #[test]
    fn entropy() {
        assert_eq!(shannon_entropy(b""), 0.0);
        assert_eq!(shannon_entropy(b"aaaa"), 0.0);
        assert!((shannon_entropy(b"abcd") - 2.0).abs() < 1e-9);
    }
}
