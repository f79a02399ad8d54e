//! [`ToolAllowance`]: one entry of an allow list that comes from outside the policy
//! configuration, such as a skill's `allowed-tools` (`Read`, `pdf_to_text`, `mcp__github__*`,
//! `Bash(pdftotext:*)`), checked against one call with the same matching as policy's own allow
//! entries: names are canonical (`Read` is `read`, `Bash` is `exec`), and an argument rule allows
//! a call only when every command, path or host of its kind matches.

use toolgate_core::Touches;

use crate::ToolRef;
use crate::names::{Groups, NameMatcher, parse_name};
use crate::rules::{ArgRule, Mode, is_arg_rule};

/// One allow-list entry.
#[derive(Debug, Clone)]
pub struct ToolAllowance {
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Name(NameMatcher),
    Rule(ArgRule),
}

impl ToolAllowance {
    /// Parses an entry; the error says what a valid entry looks like.
    pub fn parse(entry: &str) -> Result<ToolAllowance, String> {
        let kind = if is_arg_rule(entry) { Kind::Rule(ArgRule::parse(entry)?) } else { Kind::Name(parse_name(entry)?) };
        Ok(ToolAllowance { text: entry.trim().to_owned(), kind })
    }

    /// Whether the entry allows a call of `tool` that touches `touches`.
    pub fn allows(&self, tool: ToolRef<'_>, touches: &Touches) -> bool {
        let groups = Groups::new();
        match &self.kind {
            Kind::Name(m) => m.matches(tool, &groups),
            Kind::Rule(r) => r.applies_to(tool, Mode::Allow, &groups) && r.matches(touches, Mode::Allow).is_some(),
        }
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(argv: &[&str]) -> Touches {
        Touches { commands: vec![argv.iter().map(|s| (*s).to_owned()).collect()], ..Touches::default() }
    }

    #[test]
    fn names_and_rules() {
        let read = ToolAllowance::parse("Read").unwrap();
        assert!(read.allows(ToolRef::new("read", "fs"), &Touches::default()));
        assert!(!read.allows(ToolRef::new("write", "fs"), &Touches::default()));
        let pdf = ToolAllowance::parse("Bash(pdftotext:*)").unwrap();
        assert!(pdf.allows(ToolRef::new("exec", "runtime"), &exec(&["pdftotext", "a.pdf", "-"])));
        assert!(!pdf.allows(ToolRef::new("exec", "runtime"), &exec(&["rm", "-rf", "x"])));
        let mut both = exec(&["pdftotext", "a.pdf"]);
        both.commands.push(vec!["curl".into(), "x".into()]);
        assert!(!pdf.allows(ToolRef::new("exec", "runtime"), &both), "every command must match");
        let mcp = ToolAllowance::parse("mcp__github__*").unwrap();
        assert!(mcp.allows(ToolRef::new("mcp__github__list", "mcp:github"), &Touches::default()));
        assert!(ToolAllowance::parse("rm -rf /").is_err());
        assert_eq!(read.as_str(), "Read");
    }
}
