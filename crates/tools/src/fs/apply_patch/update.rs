//! Applying an update's chunks to a file's text, in memory.

use std::collections::BTreeSet;

use super::matcher;
use super::parser::Chunk;
use crate::fs::text;

/// Applies `chunks` in order to `body` (LF line endings). The result always ends with a newline,
/// like Codex.
pub(crate) fn apply_chunks(path: &str, body: &str, chunks: &[Chunk]) -> Result<String, String> {
    let mut lines: Vec<String> = body.split('\n').map(str::to_owned).collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut index = 0;
    for chunk in chunks {
        let (start, old_len, new) = locate(path, body, &lines, chunk, index)?;
        replacements.push((start, old_len, new));
        index = start + old_len;
    }
    for (start, old_len, new) in replacements.into_iter().rev() {
        lines.splice(start..start + old_len, new);
    }
    if lines.last().is_none_or(|l| !l.is_empty()) {
        lines.push(String::new());
    }
    Ok(lines.join("\n"))
}

/// Where `chunk` applies: (first line index, lines replaced, new lines).
fn locate(
    path: &str,
    body: &str,
    lines: &[String],
    chunk: &Chunk,
    index: usize,
) -> Result<(usize, usize, Vec<String>), String> {
    // Anchor positions: each line after which the chunk may start.
    let starts: Vec<usize> = match &chunk.context {
        None => vec![index],
        Some(ctx) => {
            let found = matcher::find_all(lines, std::slice::from_ref(ctx), index, false);
            if found.is_empty() {
                return Err(format!(
                    "the context line `@@ {ctx}` (patch line {}) was not found in `{path}`{}",
                    chunk.patch_line,
                    if index > 0 { " after the previous chunk" } else { "" }
                ));
            }
            found.into_iter().map(|p| p + 1).collect()
        }
    };

    if chunk.old.is_empty() {
        // Pure addition: after the anchor when there is one, else at the end of the file.
        let at: BTreeSet<usize> = match &chunk.context {
            Some(_) => starts.iter().copied().collect(),
            // Like Codex: before a final blank line, if the file ends with one.
            None if lines.last().is_some_and(String::is_empty) => BTreeSet::from([lines.len() - 1]),
            None => BTreeSet::from([lines.len()]),
        };
        return match one(&at) {
            Some(p) => Ok((p, 0, chunk.new.clone())),
            None => Err(ambiguous(path, chunk, &at)),
        };
    }

    let try_find = |old: &[String]| -> BTreeSet<usize> {
        match &chunk.context {
            // Without an anchor every position in the window counts.
            None => matcher::find_all(lines, old, index, chunk.eof).into_iter().collect(),
            // With anchors, the first position after each anchor.
            Some(_) => starts.iter().filter_map(|&s| matcher::find_first(lines, old, s, chunk.eof)).collect(),
        }
    };
    let mut old: &[String] = &chunk.old;
    let mut new: &[String] = &chunk.new;
    let mut found = try_find(old);
    // A trailing blank line in the chunk may stand for the end of the file.
    if found.is_empty() && old.last().is_some_and(String::is_empty) {
        old = &old[..old.len() - 1];
        if new.last().is_some_and(String::is_empty) {
            new = &new[..new.len() - 1];
        }
        if !old.is_empty() {
            found = try_find(old);
        }
    }
    if found.is_empty() {
        return Err(not_found(path, body, chunk));
    }
    match one(&found) {
        Some(p) => Ok((p, old.len(), new.to_vec())),
        None => Err(ambiguous(path, chunk, &found)),
    }
}

fn one(set: &BTreeSet<usize>) -> Option<usize> {
    if set.len() == 1 { set.iter().next().copied() } else { None }
}

fn ambiguous(path: &str, chunk: &Chunk, at: &BTreeSet<usize>) -> String {
    let lines: Vec<String> = at.iter().take(10).map(|p| (p + 1).to_string()).collect();
    format!(
        "the chunk at patch line {} matches `{path}` in {} places (starting at lines {}); toolgate refuses to guess. \
         Add more unchanged context lines, or an `@@ line` naming the enclosing function or class, so the chunk \
         matches exactly one place",
        chunk.patch_line,
        at.len(),
        lines.join(", ")
    )
}

fn not_found(path: &str, body: &str, chunk: &Chunk) -> String {
    let wanted = chunk.old.join("\n");
    let mut msg = format!(
        "the lines of the chunk at patch line {} were not found in `{path}`{}:\n{}",
        chunk.patch_line,
        if chunk.eof { " at the end of the file" } else { "" },
        wanted
    );
    if let Some((first, last, score)) = text::closest_region(body, &wanted) {
        msg.push_str(&format!(
            "\nThe closest region is lines {first}-{last} ({:.0}% similar):\n{}",
            score * 100.0,
            text::numbered(body, first, last)
        ));
    }
    msg.push_str("\n`read` the file and copy the lines exactly.");
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ctx: Option<&str>, old: &[&str], new: &[&str]) -> Chunk {
        Chunk {
            context: ctx.map(str::to_owned),
            old: old.iter().map(|s| (*s).to_owned()).collect(),
            new: new.iter().map(|s| (*s).to_owned()).collect(),
            eof: false,
            patch_line: 3,
        }
    }

    #[test]
    fn replaces_and_appends_newline() {
        let out = apply_chunks("f", "a\nb\nc", &[chunk(None, &["b"], &["B"])]);
        assert_eq!(out.as_deref(), Ok("a\nB\nc\n"));
    }

    #[test]
    fn refuses_ambiguous_and_anchors_disambiguate() {
        let body = "fn a() {\n  x = 1\n}\nfn b() {\n  x = 1\n}\n";
        assert!(apply_chunks("f", body, &[chunk(None, &["  x = 1"], &["  x = 2"])]).is_err());
        let out = apply_chunks("f", body, &[chunk(Some("fn b() {"), &["  x = 1"], &["  x = 2"])]);
        assert_eq!(out.as_deref(), Ok("fn a() {\n  x = 1\n}\nfn b() {\n  x = 2\n}\n"));
    }

    #[test]
    fn pure_addition_goes_after_anchor_or_at_end() {
        assert_eq!(apply_chunks("f", "a\nb\n", &[chunk(None, &[], &["c"])]).as_deref(), Ok("a\nb\nc\n"));
        assert_eq!(apply_chunks("f", "a\nb\n", &[chunk(Some("a"), &[], &["x"])]).as_deref(), Ok("a\nx\nb\n"));
    }
}
