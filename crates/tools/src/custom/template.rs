//! Command templates: `grep -n {{.pattern}} {{path}}`, parsed once when the tool is defined and
//! rendered in one pass per call.
//!
//! Every placeholder becomes exactly one shell word: the value single-quoted, each `'` in it
//! written `'\''`. That is only true where the shell reads the placeholder as ordinary unquoted
//! text, so the parser refuses a placeholder anywhere else: inside quotes the author wrote
//! (`"{{x}}"` would end the author's quote at the value's first `'`), after a backslash or a
//! `$`, in a comment (a newline in the value would end the comment), and in templates with
//! backticks, arithmetic `((`, or here-documents, whose bodies the shell re-reads with other
//! rules. Rendering walks the parsed segments, never the output, so a value that contains
//! `{{other}}` stays literal text.

use serde_json::Value;

/// Longest template accepted, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 8 * 1024;

/// Longest rendered command, in bytes (the shell analyzer's own limit).
pub const MAX_RENDERED_BYTES: usize = toolgate_guard::shell::MAX_INPUT_BYTES;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// Shell text copied as written.
    Literal(String),
    /// A parameter's value, as one single-quoted word.
    Param(String),
}

/// A parsed command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

/// Why a template was refused, or a value could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template is empty or too long.
    #[error("the command template {0}")]
    Size(String),
    /// A `{{` that is not a well-formed placeholder, or a placeholder where it cannot be one word.
    #[error("the command template has {problem} at byte {at}: {hint}")]
    Placeholder {
        /// What is wrong.
        problem: String,
        /// Byte offset in the template.
        at: usize,
        /// What to write instead.
        hint: String,
    },
    /// A value cannot be passed to a command.
    #[error("{0}")]
    Value(String),
}

/// Quoting state while scanning the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
    /// `$'...'`: backslash escapes apply.
    AnsiC,
    /// A `#` comment, to the end of the line.
    Comment,
}

impl Template {
    /// Parses `text`, refusing placeholders the renderer could not keep to one word.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        if text.trim().is_empty() {
            return Err(TemplateError::Size("is empty; give the command line to run".into()));
        }
        if text.len() > MAX_TEMPLATE_BYTES {
            return Err(TemplateError::Size(format!(
                "is {} bytes; at most {MAX_TEMPLATE_BYTES} (put long scripts in a file and run that)",
                text.len()
            )));
        }
        if text.contains('\0') {
            return Err(TemplateError::Size("contains a NUL byte".into()));
        }
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut literal_start = 0;
        let mut state = Quote::None;
        let mut i = 0;
        let refuse = |problem: &str, at: usize, hint: &str| TemplateError::Placeholder {
            problem: problem.to_owned(),
            at,
            hint: hint.to_owned(),
        };
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'{' && bytes.get(i + 1) == Some(&b'{') {
                let (key, end) = placeholder_at(text, i).ok_or_else(|| {
                    refuse(
                        "a `{{` that is not a placeholder",
                        i,
                        "placeholders are `{{.name}}` or `{{name}}` with a parameter name of letters, digits and `_`; \
                         a literal `{{` cannot appear in a template",
                    )
                })?;
                let where_ = match state {
                    Quote::None => None,
                    Quote::Single | Quote::AnsiC => Some("inside single quotes"),
                    Quote::Double => Some("inside double quotes"),
                    Quote::Comment => Some("inside a `#` comment"),
                };
                if let Some(where_) = where_ {
                    return Err(refuse(
                        &format!("the placeholder `{{{{{key}}}}}` {where_}"),
                        i,
                        "write placeholders unquoted: toolgate quotes every value as one shell word itself",
                    ));
                }
                match i.checked_sub(1).map(|p| bytes[p]) {
                    Some(b'\\') => {
                        return Err(refuse(
                            &format!("the placeholder `{{{{{key}}}}}` after a backslash"),
                            i,
                            "remove the backslash: the value is quoted already",
                        ));
                    }
                    Some(b'$') => {
                        return Err(refuse(
                            &format!("the placeholder `{{{{{key}}}}}` after `$`"),
                            i,
                            "`$'...'` would interpret escapes in the value; put a space or other text between them",
                        ));
                    }
                    _ => {}
                }
                if i > literal_start {
                    segments.push(Segment::Literal(text[literal_start..i].to_owned()));
                }
                segments.push(Segment::Param(key));
                i = end;
                literal_start = end;
                continue;
            }
            // A backslash escapes the next byte, except a `{` (so `\{{x}}` is seen, and refused).
            let escapes = b == b'\\' && bytes.get(i + 1) != Some(&b'{');
            state = match (state, b) {
                (Quote::None, b'\\') if escapes => {
                    i += 2;
                    continue;
                }
                (Quote::None, b'\'') if i > 0 && bytes[i - 1] == b'$' => Quote::AnsiC,
                (Quote::None, b'\'') => Quote::Single,
                (Quote::None, b'"') => Quote::Double,
                (Quote::None, b'#') if starts_word(bytes, i) => Quote::Comment,
                (Quote::Single, b'\'') => Quote::None,
                (Quote::AnsiC, b'\\') | (Quote::Double, b'\\') if escapes => {
                    i += 2;
                    continue;
                }
                (Quote::AnsiC, b'\'') | (Quote::Double, b'"') => Quote::None,
                (Quote::Comment, b'\n') => Quote::None,
                (s, _) => s,
            };
            i += 1;
        }
        if literal_start < text.len() {
            segments.push(Segment::Literal(text[literal_start..].to_owned()));
        }
        let template = Template { segments };
        if template.params().next().is_some() {
            for (pattern, why) in [
                ("`", "backticks (their body is read again by the shell)"),
                ("((", "arithmetic `(( ))` (values cannot be quoted there)"),
                ("<<", "a here-document (its body is expanded with other rules)"),
            ] {
                let found = template.literals().find_map(|l| {
                    let at = l.find(pattern)?;
                    // `<<<` is a here-string: one word, quoted like any other.
                    (pattern != "<<" || !l[at..].starts_with("<<<")).then_some(())
                });
                if found.is_some() {
                    return Err(TemplateError::Placeholder {
                        problem: format!("placeholders in a template that uses {why}"),
                        at: text.find(pattern).unwrap_or(0),
                        hint: "use `$(...)` for command substitution, or move the logic into a script file the \
                               template runs with the values as arguments"
                            .into(),
                    });
                }
            }
        }
        Ok(template)
    }

    /// The parameter names the template uses, in order, with repeats.
    pub fn params(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Param(k) => Some(k.as_str()),
            Segment::Literal(_) => None,
        })
    }

    fn literals(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Literal(l) => Some(l.as_str()),
            Segment::Param(_) => None,
        })
    }

    /// The command line for `params`: every placeholder one single-quoted word, in one pass. A
    /// parameter that is absent renders as an empty word (`''`).
    pub fn render(&self, params: &Value) -> Result<String, TemplateError> {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Param(key) => {
                    let value = params.get(key).unwrap_or(&Value::Null);
                    let text = scalar_text(key, value)?;
                    quote_into(&mut out, &text);
                }
            }
            if out.len() > MAX_RENDERED_BYTES {
                return Err(TemplateError::Value(format!(
                    "the command would be longer than {MAX_RENDERED_BYTES} bytes; pass shorter values (or a file path)"
                )));
            }
        }
        Ok(out)
    }
}

/// Whether byte `i` starts a shell word (so a `#` there starts a comment).
fn starts_word(bytes: &[u8], i: usize) -> bool {
    i == 0 || matches!(bytes[i - 1], b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>')
}

/// The key and the end offset of a placeholder starting at `start` (`{{.key}}`, `{{ key }}`).
fn placeholder_at(text: &str, start: usize) -> Option<(String, usize)> {
    let rest = &text[start + 2..];
    let close = rest.find("}}")?;
    let inner = rest[..close].trim_matches([' ', '\t']);
    let key = inner.strip_prefix('.').unwrap_or(inner);
    let valid = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && key.len() <= 64
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then(|| (key.to_owned(), start + 2 + close + 2))
}

/// A parameter value as the text of one argument.
fn scalar_text(key: &str, value: &Value) -> Result<String, TemplateError> {
    let text = match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) | Value::Object(_) => {
            return Err(TemplateError::Value(format!(
                "`{key}` must be a string, number or boolean: each placeholder is one command-line argument"
            )));
        }
    };
    if text.contains('\0') {
        return Err(TemplateError::Value(format!(
            "`{key}` contains a NUL byte, which a command-line argument cannot carry; remove it"
        )));
    }
    Ok(text)
}

/// Appends `text` as one single-quoted shell word.
fn quote_into(out: &mut String, text: &str) {
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(t: &str, p: Value) -> String {
        Template::parse(t).unwrap().render(&p).unwrap()
    }

    #[test]
    fn values_become_one_quoted_word() {
        assert_eq!(
            render("grep -n {{.pattern}} {{path}}", json!({"pattern": "a b", "path": "src"})),
            "grep -n 'a b' 'src'"
        );
        assert_eq!(render("echo {{ .x }}", json!({"x": "it's"})), "echo 'it'\\''s'");
        assert_eq!(render("echo --n={{n}}", json!({"n": 3})), "echo --n='3'");
        assert_eq!(render("echo {{x}}", json!({})), "echo ''");
    }

    #[test]
    fn one_pass_only() {
        let out = render("echo {{a}} {{b}}", json!({"a": "{{b}}", "b": "x"}));
        assert_eq!(out, "echo '{{b}}' 'x'");
    }

    #[test]
    fn placeholders_where_they_cannot_be_one_word_are_refused() {
        for bad in [
            "echo '{{x}}'",
            "echo \"{{x}}\"",
            "echo \"a {{x}} b\"",
            "echo $'{{x}}'",
            "echo \\{{x}}",
            "echo ${{x}}",
            "echo ok # {{x}}",
            "echo `cat {{x}}`",
            "echo $(( {{x}} + 1 ))",
            "cat <<EOF\n{{x}}\nEOF",
            "echo {{x y}}",
            "echo {{}}",
            "echo {{x",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad:?} should be refused");
        }
        // Quotes closed before the placeholder, `#` inside a word, here-strings, `$(...)`: fine.
        for good in ["echo 'a' {{x}} \"b\"", "echo a#{{x}}", "cat <<< {{x}}", "echo $(basename {{x}})"] {
            assert!(Template::parse(good).is_ok(), "{good:?} should be accepted");
        }
    }

    #[test]
    fn values_that_cannot_be_arguments_are_errors() {
        let t = Template::parse("echo {{x}}").unwrap();
        assert!(t.render(&json!({"x": "a\0b"})).is_err());
        assert!(t.render(&json!({"x": ["a"]})).is_err());
        assert!(t.render(&json!({"x": "y".repeat(MAX_RENDERED_BYTES)})).is_err());
    }
}
