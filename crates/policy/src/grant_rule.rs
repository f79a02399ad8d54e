//! [`ArgumentRule`]: an argument rule that comes with a gateway grant (`exec(git *)`,
//! `read(src/**)`, `web_fetch(domain:example.com)`), in the syntax and with the matching of
//! policy's own rules: a grant that gives a call uses the strict allow matching (every command,
//! path or host of the rule's kind matches), a grant that refuses one the loose deny matching
//! (any of them matches, abbreviated options and reordered arguments included).

use toolgate_core::Touches;

use crate::ToolRef;
use crate::names::Groups;
use crate::rules::{ArgRule, Mode, is_arg_rule};

/// The longest rule a grant takes.
const MAX_RULE_BYTES: usize = 512;

/// One grant's argument rule.
#[derive(Debug, Clone)]
pub struct ArgumentRule(ArgRule);

impl ArgumentRule {
    /// Parses `tool(pattern)`; the error says what was wrong and what a rule looks like.
    pub fn parse(text: &str) -> Result<ArgumentRule, String> {
        if text.len() > MAX_RULE_BYTES {
            return Err(format!("an argument rule is at most {MAX_RULE_BYTES} bytes"));
        }
        if text.chars().any(char::is_control) {
            return Err("an argument rule has no control characters".to_owned());
        }
        if !is_arg_rule(text) {
            return Err(format!(
                "`{}` is a tool name, not an argument rule: write `tool(pattern)`, e.g. `exec(git *)`, \
                 `read(src/**)` or `web_fetch(domain:example.com)`",
                text.trim()
            ));
        }
        let rule = ArgRule::parse(text).map_err(|e| {
            format!("`{}` is not an argument rule: {e} (e.g. `exec(git *)`, `read(src/**)`)", text.trim())
        })?;
        Ok(ArgumentRule(rule))
    }

    /// The rule as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// Whether a call of `tool` can be given by this rule (`exec(...)` is about `exec`,
    /// `read(...)` about the read-only file tools, `write(...)` about the file-changing ones, a
    /// named rule about the tools it names).
    pub fn about(&self, tool: ToolRef<'_>) -> bool {
        self.0.applies_to(tool, Mode::Allow, &Groups::new())
    }

    /// Whether this call of `tool` is one the rule gives: the rule is about the tool and every
    /// command, path or host of its kind matches, strictly.
    pub fn admits(&self, tool: ToolRef<'_>, touches: &Touches) -> bool {
        self.about(tool) && self.0.matches(touches, Mode::Allow).is_some()
    }

    /// Whether this call of `tool` is one the rule refuses (the rule used in a deny): any
    /// command, path or host of its kind matches, loosely.
    pub fn refuses(&self, tool: ToolRef<'_>, touches: &Touches) -> bool {
        self.0.applies_to(tool, Mode::Restrict, &Groups::new()) && self.0.matches(touches, Mode::Restrict).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(argv: &[&str]) -> Touches {
        Touches { commands: vec![argv.iter().map(|s| (*s).to_owned()).collect()], ..Touches::default() }
    }

    #[test]
    fn a_grant_rule_admits_only_what_matches_every_command() {
        let git = ArgumentRule::parse("exec(git *)").unwrap();
        let tool = ToolRef::new("exec", "runtime");
        assert!(git.admits(tool, &exec(&["git", "status"])));
        assert!(!git.admits(tool, &exec(&["rm", "-rf", "x"])));
        let both = Touches { commands: vec![vec!["git".into()], vec!["rm".into(), "x".into()]], ..Touches::default() };
        assert!(!git.admits(tool, &both), "every command must match");
        assert!(!git.admits(tool, &Touches::default()), "no command, nothing admitted");
        assert!(!git.admits(ToolRef::new("read", "fs"), &exec(&["git", "status"])), "about exec only");
        let rm = ArgumentRule::parse("exec(rm -rf)").unwrap();
        assert!(rm.refuses(tool, &exec(&["rm", "-fr", "x"])), "deny matching is loose");
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (bad, why) in [
            ("exec", "not an argument rule"),
            ("exec(git *", "must end with"),
            ("exec()", "empty"),
            ("group:fs(x)", "not a group"),
            ("exec(g*t status)", "only allowed at the end"),
            ("exec(git\n*)", "control"),
        ] {
            let e = ArgumentRule::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(ArgumentRule::parse(&format!("exec({})", "a".repeat(600))).unwrap_err().contains("at most"));
    }
}
