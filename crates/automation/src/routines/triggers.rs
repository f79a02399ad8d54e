//! Event triggers: the gate's own events (a tool called, an approval decided, a job finished, a
//! file changed, a message received) matched against `event` routines' `event_channel` and
//! `event_pattern` (a glob over the event's subject).

use globset::{GlobBuilder, GlobMatcher};

/// One event of the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The source: `tool`, `approval`, `job`, `file`, `message`.
    pub channel: &'static str,
    /// What the pattern is matched against: the tool's name (`tool`, `approval`), the job's
    /// title (`job`), the workspace-relative path (`file`), `CHANNEL:sender` (`message`).
    pub subject: String,
    /// A short description for the run's prompt (outcome, decision, state). Untrusted.
    pub detail: String,
    /// The session the event came from: events of a routine's own run (`routine:` sessions)
    /// trigger nothing, so a routine cannot feed itself.
    pub session: String,
}

/// Compiles an event pattern.
pub fn compile(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.len() > 512 {
        return Err("the pattern is longer than 512 characters".into());
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`{pattern}` is not a valid glob: {e}"))
}

/// Whether `pattern` matches `subject` (`*` matches everything, `**` any path).
pub fn matches(pattern: &str, subject: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    compile(pattern).is_ok_and(|m| m.is_match(subject))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_subjects() {
        assert!(matches("exec", "exec"));
        assert!(!matches("exec", "execute_code"));
        assert!(matches("mcp__*", "mcp__github__create_issue"));
        assert!(matches("src/**", "src/a/b.rs"));
        assert!(!matches("src/*", "src/a/b.rs"));
        assert!(matches("*", "anything/at/all"));
        assert!(compile("[").is_err());
    }
}
