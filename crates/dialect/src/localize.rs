//! What comes back from a dialect call, said in the caller's words: errors name its tool and
//! parameters, and a result's hint to call again (`read`'s "call `read` with offset=2001")
//! names its tool and parameters, values converted back.

use serde_json::Value;
use toolgate_core::{ParamProblem, ToolError};

use crate::{Conversion, Translated};

impl Translated {
    /// `error` as the caller should read it: invalid parameters (found by the validator or by
    /// the tool as it ran) under the caller's tool and parameter names, with the value toolgate
    /// checked when a conversion changed it; a tool that is not here under the caller's name.
    pub fn localize(&self, error: ToolError) -> ToolError {
        match error {
            // The dialect's tool whose family is off here: its name, and no canonical suggestion.
            ToolError::UnknownTool { name, .. } if name == self.tool && self.via.is_some() => {
                ToolError::UnknownTool { name: self.called_as.clone().unwrap_or(name), suggestion: None }
            }
            ToolError::InvalidParams { tool, problems } => {
                let tool = match &self.called_as {
                    Some(called) if tool == self.tool => called.clone(),
                    _ => tool,
                };
                let words = self.words();
                let problems = problems
                    .into_iter()
                    .map(|p| ParamProblem {
                        message: format!("{}{}", rename_quoted(&p.message, &words), self.converted(&p.pointer)),
                        pointer: self.pointer(&p.pointer),
                    })
                    .collect();
                ToolError::InvalidParams { tool, problems }
            }
            other => other,
        }
    }

    /// A result's text as the caller should read it (`None`: unchanged). Only a notice one of
    /// [`NOTICES`] appends as its last line is rewritten (`[Showing lines 1-2000 of 9000. To
    /// read on, ...]`), never the content before it (a file's lines, a command's output), and
    /// never a last line a caller's content could have written.
    pub fn localize_text(&self, text: &str) -> Option<String> {
        let via = self.via?;
        let trimmed = text.trim_end();
        let start = trimmed.rfind('\n').map_or(0, |at| at + 1);
        let notice = &trimmed[start..];
        let known = NOTICES.iter().any(|(tool, opening, prefix)| {
            via.canonical == *tool && text.starts_with(opening) && notice.starts_with(prefix) && notice.ends_with(']')
        });
        if !known {
            return None;
        }
        let localized = rename_quoted(&self.other_calls(&self.call_again(notice)), &self.words());
        (localized != notice).then(|| format!("{}{localized}{}", &text[..start], &text[trimmed.len()..]))
    }

    /// (canonical name, the caller's name): the tool, and every parameter this dialect's tool
    /// maps to one canonical parameter.
    fn words(&self) -> Vec<(String, String)> {
        let mut words: Vec<(String, String)> = self.renamed.clone();
        if let Some(via) = self.via {
            if via.name != via.canonical {
                words.push((via.canonical.clone(), via.name.clone()));
            }
            for param in &via.params {
                // A canonical name the dialect also uses as is (OpenClaw's `path` beside
                // `file_path`) stays.
                if let [to] = param.to.as_slice()
                    && *to != param.name
                    && !via.params.iter().any(|p| p.name == *to)
                    && !words.iter().any(|(c, _)| c == to)
                {
                    words.push((to.clone(), param.name.clone()));
                }
            }
        }
        words
    }

    /// What the caller's value became, when a conversion changed it: the numbers in a problem
    /// are toolgate's (`timeout` in seconds, a 1-based `offset`).
    fn converted(&self, pointer: &str) -> String {
        let first = pointer.strip_prefix('/').unwrap_or_default().split('/').next().unwrap_or_default();
        let Some(via) = self.via else { return String::new() };
        let Some(param) =
            via.params.iter().find(|p| p.conversion != Conversion::Same && p.to.iter().any(|t| t == first))
        else {
            return String::new();
        };
        let Some(value) = self.params.get(first) else { return String::new() };
        let how = match param.conversion {
            Conversion::ZeroBased => "toolgate counts lines from 1",
            Conversion::MsToSeconds => "in seconds",
            Conversion::LineRange => "from your range",
            _ => "converted",
        };
        format!(" (your `{}` is checked as `{first}` = {value}, {how})", param.name)
    }

    /// A JSON pointer with its first segment in the caller's words.
    fn pointer(&self, pointer: &str) -> String {
        let rest = pointer.strip_prefix('/').unwrap_or_default();
        let (first, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let theirs = self.words().into_iter().find(|(canonical, _)| canonical == first).map(|(_, theirs)| theirs);
        match theirs {
            Some(theirs) if tail.is_empty() => format!("/{theirs}"),
            Some(theirs) => format!("/{theirs}/{tail}"),
            None => pointer.to_owned(),
        }
    }

    /// "`read` with offset=N": the call to make next, in the dialect (gomini's 0-based
    /// `offset=N-1`; Linggen's `line_range=[N, M]`, as long a page as this call asked for).
    fn call_again(&self, notice: &str) -> String {
        let Some(via) = self.via else { return notice.to_owned() };
        let mut out = notice.to_owned();
        for param in &via.params {
            let needle = format!("`{}` with {}=", via.canonical, param.to[0]);
            let Some(at) = out.find(&needle) else { continue };
            let after = &out[at + needle.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let Ok(n) = after[..digits].parse::<u64>() else { continue };
            let value = match (&param.conversion, param.to.as_slice()) {
                (Conversion::Same, [_]) => n.to_string(),
                (Conversion::ZeroBased, [_]) if n > 0 => (n - 1).to_string(),
                (Conversion::LineRange, [offset, limit]) => {
                    // The rest of the range asked for, or, when it was all shown, the next page
                    // as long; with no range asked for, the rest of the file.
                    let asked = self
                        .params
                        .get(offset)
                        .and_then(Value::as_u64)
                        .zip(self.params.get(limit).and_then(Value::as_u64));
                    let end = match asked {
                        Some((first, count)) if count > 0 => {
                            let end = first.saturating_add(count - 1);
                            if n <= end { end } else { n.saturating_add(count - 1) }
                        }
                        _ => match total_lines(notice) {
                            Some(total) if total >= n => total,
                            _ => continue,
                        },
                    };
                    format!("[{n}, {end}]")
                }
                _ => continue,
            };
            out = format!(
                "{}`{}` with {}={value}{}",
                &out[..at],
                via.name,
                param.name,
                &out[at + needle.len() + digits..]
            );
        }
        out
    }
}

impl Translated {
    /// A notice's calls of another tool (`exec`'s "`process` tool: {\"action\": \"poll\",
    /// \"id\": ...}") in the dialect: its name, and each JSON object's keys and values.
    fn other_calls(&self, notice: &str) -> String {
        let Some(dialect) = self.dialect else { return notice.to_owned() };
        // The first of the dialect's tools the notice names as a tool ("the `process` tool"),
        // other than the one called (a backquoted `glob` may be a parameter).
        let named = dialect.tools().iter().find(|t| {
            self.via.is_none_or(|v| v.canonical != t.canonical) && notice.contains(&format!("`{}` tool", t.canonical))
        });
        let Some(tool) = named else { return notice.to_owned() };
        let canonical = format!("`{}` tool", tool.canonical);
        let mut out = String::with_capacity(notice.len());
        let mut rest = notice;
        while let Some(at) = rest.find('{') {
            out.push_str(&rest[..at]);
            let mut stream = serde_json::Deserializer::from_str(&rest[at..]).into_iter::<Value>();
            match stream.next() {
                Some(Ok(Value::Object(call))) => {
                    out.push_str(&in_words(tool, call).to_string());
                    rest = &rest[at + stream.byte_offset()..];
                }
                _ => {
                    out.push('{');
                    rest = &rest[at + 1..];
                }
            }
        }
        out.push_str(rest);
        out.replace(&canonical, &format!("`{}` tool", tool.name))
    }
}

/// A canonical call's parameters as `tool`'s: each key by the dialect parameter that fills it
/// alone, each value a `values` conversion renames back.
fn in_words(tool: &crate::DialectTool, call: serde_json::Map<String, Value>) -> Value {
    let mut out = serde_json::Map::new();
    for (key, value) in call {
        let param = tool
            .params
            .iter()
            .find(|p| p.to.len() == 1 && p.to[0] == key && p.name == key)
            .or_else(|| tool.params.iter().find(|p| p.to.len() == 1 && p.to[0] == key));
        let Some(param) = param else {
            out.insert(key, value);
            continue;
        };
        let value = match (&param.conversion, value.as_str()) {
            (Conversion::Values(map), Some(v)) => {
                let back: Vec<&String> = map.iter().filter(|(_, to)| *to == v).map(|(from, _)| from).collect();
                match back.as_slice() {
                    [one] => Value::from(one.as_str()),
                    _ => value,
                }
            }
            _ => value,
        };
        out.insert(param.name.clone(), value);
    }
    Value::Object(out)
}

/// The notices tools end their results with that name a call to make next, as (tool, how its
/// result opens, how the notice opens). A result's last line is one of these only when the
/// result is that tool's and opens as it always does: a command's output or a file's content
/// cannot pass for one.
const NOTICES: &[(&str, &str, &str)] = &[
    ("read", "", "[Showing lines "),
    ("grep", "", "[Results cut"),
    ("glob", "", "[Showing the "),
    ("exec", "started background process ", "[Read new output with the `process` tool"),
];

/// The `T` of "of T" in a notice ("Showing lines 1-2000 of 9000").
fn total_lines(notice: &str) -> Option<u64> {
    let after = &notice[notice.find(" of ")? + 4..];
    after[..after.bytes().take_while(u8::is_ascii_digit).count()].parse().ok()
}

/// `text` with every backquoted canonical name (`` `old_string` ``) in the caller's words.
fn rename_quoted(text: &str, words: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (canonical, theirs) in words {
        out = out.replace(&format!("`{canonical}`"), &format!("`{theirs}`"));
    }
    out
}
