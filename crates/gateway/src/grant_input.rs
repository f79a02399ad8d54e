//! A grant as a person writes it — `toolgate admin grant add`'s flags, the page's grant form,
//! `POST /api/grants`'s JSON — turned into a [`ToolGrant`]: one reading of the words (mode,
//! duration, lists) for all three, before [`Grants::add`](crate::Grants::add) checks the grant
//! itself (subject, patterns, server, argument rule, expiry) with the same code whoever asks.

use serde::Deserialize;
use toolgate_store::{GrantMode, ToolGrant};

use crate::GatewayError;

/// The longest note kept on a grant.
const MAX_NOTE: usize = 200;

/// What a new grant is, in words. Fields left empty mean what the CLI's absent flags mean.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrantInput {
    /// Who gets it: a user, a group or an agent (`--to`).
    pub to: String,
    /// A bridged MCP server (`--server`); empty: toolgate's own tools.
    pub server: Option<String>,
    /// Tools or `*` patterns it covers (`--tool`); none: every tool of the resource.
    pub tools: Vec<String>,
    /// Tools it never covers (`--deny-tool`).
    pub deny_tools: Vec<String>,
    /// `allow` (empty: allow), `ask` or `deny` (`--mode`).
    pub mode: Option<String>,
    /// An argument rule in the policy's syntax (`--args`).
    pub args: Option<String>,
    /// How long it lasts, `30d`, `12h`, `90m` or `45s` (`--expires`); empty: until revoked.
    pub expires: Option<String>,
    /// The server's settings for this grant's agent, a JSON object (`--server-config`).
    pub server_config: Option<serde_json::Value>,
    /// Why it is given (`--note`), kept to 200 characters.
    pub note: String,
    /// Add it turned off (`--disabled`).
    pub disabled: bool,
}

/// Splits a form's list (`exec, read git_*`) at commas and white space: no tool name or
/// pattern has either, so nothing a pattern could be is lost before it is checked.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}

/// A duration in milliseconds: a positive number and a unit, `d`, `h`, `m` or `s`.
pub fn duration_ms(text: &str) -> Result<i64, GatewayError> {
    let bad = || {
        GatewayError::BadGrant(format!(
            "`{}` is not a duration: write a positive number and a unit, like `30d`, `12h` or `90m`",
            text.chars().take(40).collect::<String>().escape_debug()
        ))
    };
    let at = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let n: i64 = text[..at].parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
    let unit: i64 = match &text[at..] {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        "s" => 1_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit).ok_or_else(|| GatewayError::BadGrant("that duration is too long".to_owned()))
}

fn given(text: Option<&String>) -> Option<String> {
    text.map(|t| t.trim()).filter(|t| !t.is_empty()).map(str::to_owned)
}

impl GrantInput {
    /// The grant these words describe, granted by `by` at `now_ms`; a word that means nothing
    /// (an unknown mode, a duration that is not one) is refused with what to write instead.
    /// The grant is not checked yet: [`Grants::add`](crate::Grants::add) does that.
    pub fn grant(&self, by: &str, now_ms: i64) -> Result<ToolGrant, GatewayError> {
        let mode = match given(self.mode.as_ref()) {
            None => GrantMode::Allow,
            Some(word) => GrantMode::parse(&word).ok_or_else(|| {
                GatewayError::BadGrant(format!(
                    "the mode is `allow`, `ask` or `deny`, not `{}`",
                    word.chars().take(40).collect::<String>().escape_debug()
                ))
            })?,
        };
        let expires_ms = match given(self.expires.as_ref()) {
            None => None,
            Some(word) => Some(now_ms.saturating_add(duration_ms(&word)?)),
        };
        let lists = |list: &[String]| -> Vec<String> {
            list.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).map(str::to_owned).collect()
        };
        Ok(ToolGrant {
            id: 0,
            subject: self.to.trim().to_owned(),
            server: given(self.server.as_ref()),
            tool_allow: lists(&self.tools),
            tool_deny: lists(&self.deny_tools),
            enabled: !self.disabled,
            config_overrides: self.server_config.clone().unwrap_or_else(|| serde_json::json!({})),
            mode,
            arg_rule: given(self.args.as_ref()),
            expires_ms,
            granted_by: by.to_owned(),
            request: None,
            note: self.note.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_NOTE).collect(),
            created_ms: now_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_a_grant_and_bad_words_say_what_to_write() {
        let input = GrantInput {
            to: " ann ".into(),
            server: Some(String::new()),
            tools: split_list("exec, read  git_*,"),
            mode: Some("ask".into()),
            args: Some("  ".into()),
            expires: Some("2h".into()),
            note: "a\nb".into(),
            ..GrantInput::default()
        };
        let g = input.grant("lee", 1_000).unwrap();
        assert_eq!((g.subject.as_str(), g.server, g.mode, g.arg_rule), ("ann", None, GrantMode::Ask, None));
        assert_eq!(g.tool_allow, ["exec", "read", "git_*"]);
        assert_eq!((g.expires_ms, g.granted_by.as_str(), g.note.as_str()), (Some(7_201_000), "lee", "a b"));
        let bad = GrantInput { mode: Some("always".into()), ..GrantInput::default() };
        assert!(bad.grant("lee", 0).unwrap_err().to_string().contains("`allow`, `ask` or `deny`"));
        for word in ["soon", "0d", "12", "3w", "-1h"] {
            let bad = GrantInput { expires: Some(word.into()), ..GrantInput::default() };
            assert!(bad.grant("lee", 0).unwrap_err().to_string().contains("not a duration"), "{word}");
        }
        assert!(duration_ms("99999999999999999d").unwrap_err().to_string().contains("too long"));
        let json: GrantInput = serde_json::from_str(r#"{"to": "ann", "tools": ["time"]}"#).unwrap();
        assert_eq!(json.grant("lee", 0).unwrap().tool_allow, ["time"]);
        assert!(serde_json::from_str::<GrantInput>(r#"{"to": "ann", "tool": "time"}"#).is_err(), "unknown field");
    }
}
