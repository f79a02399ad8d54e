//! Shell words after quote removal: their visible text, whether the shell would still expand
//! them, and where their content comes from.

/// Where the value of a word (or the output of a command) may come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Taint {
    /// Content fetched from the network (`curl`, `wget`, `nc`, ...).
    pub remote: bool,
    /// Content decoded or obfuscated (`base64 -d`, `xxd -r`, `rev`, `printf '\x..'`, ...).
    pub decoded: bool,
}

impl Taint {
    pub(crate) fn merge(&mut self, other: Taint) {
        self.remote |= other.remote;
        self.decoded |= other.decoded;
    }

    pub(crate) fn any(self) -> bool {
        self.remote || self.decoded
    }

    pub(crate) fn describe(self) -> &'static str {
        match (self.remote, self.decoded) {
            (true, true) => "downloaded and decoded content",
            (true, false) => "downloaded content",
            (false, true) => "decoded or obfuscated content",
            (false, false) => "content",
        }
    }
}

/// One shell word after quote removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Arg {
    /// Visible text: literal parts unquoted, expansions kept as written (`$HOME`, `$(date)`).
    pub text: String,
    /// True when the shell will not change the word any further (no parameter, command or
    /// arithmetic expansion, no unquoted glob or brace expansion).
    pub literal: bool,
    /// Taint of the command substitutions inside the word.
    pub taint: Taint,
}

impl Arg {
    pub(crate) fn lit(text: impl Into<String>) -> Self {
        Self { text: text.into(), literal: true, taint: Taint::default() }
    }
}

/// True if an unquoted piece of text would be changed by pathname or brace expansion.
pub(crate) fn unquoted_expands(text: &str) -> bool {
    if text.contains(['*', '?']) {
        return true;
    }
    if let Some(open) = text.find('[')
        && text[open + 1..].contains(']')
    {
        return true;
    }
    // Brace expansion: `{a,b}` or `{1..3}`.
    if let Some(open) = text.find('{')
        && let Some(close) = text[open..].find('}')
    {
        let inner = &text[open + 1..open + close];
        return inner.contains(',') || inner.contains("..");
    }
    false
}

/// Decodes the body of an ANSI-C quoted string (`$'...'`). Returns `None` for escapes that are
/// not decoded here, so the caller treats the word as not literal.
pub(crate) fn decode_ansi_c(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' | 'u' | 'U' | '0'..='7' => {
                let (radix, max) = match e {
                    'x' => (16, 2),
                    'u' => (16, 4),
                    'U' => (16, 8),
                    _ => (8, 2),
                };
                let mut digits = String::new();
                if radix == 8 {
                    digits.push(e);
                }
                while digits.len() < max + usize::from(radix == 8) {
                    match chars.peek() {
                        Some(d) if d.is_digit(radix) => {
                            digits.push(*d);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                let value = u32::from_str_radix(&digits, radix).ok()?;
                out.push(char::from_u32(value)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Quotes a word for display in an approval prompt, so that a reader sees word boundaries and
/// control characters.
pub(crate) fn quote_for_display(word: &str) -> String {
    if word.is_empty() {
        return "''".to_string();
    }
    let plain = word.chars().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '+' | '@' | '%' | '~' | '^')
    });
    // Expansions stay visible as written ($HOME, $(cmd)); only quote when whitespace or
    // control characters would make the word ambiguous.
    let expansion_only = word.chars().all(|c| !c.is_whitespace() && !c.is_control() && c != '\'');
    if plain || expansion_only {
        return word.to_string();
    }
    let mut out = String::from("'");
    for c in word.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '\n' => out.push_str("'$'\\n''"),
            c if c.is_control() => out.push_str(&format!("'$'\\x{:02x}''", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The last path component of a command name (`/usr/bin/env` is `env`).
pub(crate) fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c() {
        assert_eq!(decode_ansi_c(r"\x72m").as_deref(), Some("rm"));
        assert_eq!(decode_ansi_c(r"a\nb\'").as_deref(), Some("a\nb'"));
        assert_eq!(decode_ansi_c(r"\162m").as_deref(), Some("rm"));
        assert_eq!(decode_ansi_c(r"\u0072m").as_deref(), Some("rm"));
        assert_eq!(decode_ansi_c(r"\cA"), None);
    }

    #[test]
    fn expands() {
        assert!(unquoted_expands("*.rs"));
        assert!(unquoted_expands("-{exec,}"));
        assert!(unquoted_expands("{1..3}"));
        assert!(!unquoted_expands("{}"));
        assert!(!unquoted_expands("plain"));
    }

    #[test]
    fn display_quoting() {
        assert_eq!(quote_for_display("ls"), "ls");
        assert_eq!(quote_for_display("a b"), "'a b'");
        assert_eq!(quote_for_display("it's"), "'it'\\''s'");
        assert_eq!(quote_for_display("$HOME"), "$HOME");
        assert_eq!(quote_for_display(""), "''");
    }
}
