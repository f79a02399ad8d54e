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
        Some(p) => Ok((p, old.len(), keep_context(&lines[p..p + old.len()], new, &chunk.context_of))),
        None => Err(ambiguous(path, chunk, &found)),
    }
}

/// The lines that replace `matched`: added lines as the patch spells them, context lines as the
/// file spells them. A context line may have matched only after normalization (trailing
/// whitespace, typographic quotes, dashes and spaces): it is an anchor, not an edit, so it stays
/// byte for byte what it was.
fn keep_context(matched: &[String], new: &[String], context_of: &[Option<usize>]) -> Vec<String> {
    new.iter()
        .enumerate()
        .map(|(j, line)| match context_of.get(j).copied().flatten().and_then(|i| matched.get(i)) {
            Some(original) => original.clone(),
            None => line.clone(),
        })
        .collect()
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

    /// A chunk of removed `old` and added `new` lines (no context lines).
    fn chunk(ctx: Option<&str>, old: &[&str], new: &[&str]) -> Chunk {
        Chunk {
            context: ctx.map(str::to_owned),
            old: old.iter().map(|s| (*s).to_owned()).collect(),
            new: new.iter().map(|s| (*s).to_owned()).collect(),
            context_of: vec![None; new.len()],
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

    #[test]
    fn context_lines_keep_the_files_spelling() {
        // The file has curly quotes, an em dash, a no-break space and trailing spaces; the patch
        // spells its context in ASCII. Only the removed line changes.
        let body = "say(\u{201c}hi\u{201d})  \nold \u{2014} line\nit\u{2019}s\u{a0}fine\t\n";
        let patch =
            "*** Begin Patch\n*** Update File: f\n@@\n say(\"hi\")\n-old - line\n+new line\n it's fine\n*** End Patch";
        let out = apply_patch_text(body, patch);
        assert_eq!(out.as_deref(), Ok("say(\u{201c}hi\u{201d})  \nnew line\nit\u{2019}s\u{a0}fine\t\n"));
    }

    /// Parses `patch` (one update of one file) and applies it to `body`.
    fn apply_patch_text(body: &str, patch: &str) -> Result<String, String> {
        let parsed = super::super::parser::parse(patch).map_err(|e| e.to_string())?;
        let Some(super::super::parser::Hunk::Update { chunks, .. }) = parsed.hunks.first() else {
            return Err("not an update".into());
        };
        apply_chunks("f", body, chunks)
    }

    mod props {
        use proptest::prelude::*;

        /// Pieces of text with their ASCII spellings: what a model writes for them.
        const PIECES: &[(&str, &str)] = &[
            ("word", "word"),
            ("\u{201c}q\u{201d}", "\"q\""),
            ("it\u{2019}s", "it's"),
            ("a\u{2014}b", "a-b"),
            ("x\u{2013}y", "x-y"),
            ("no\u{a0}break", "no break"),
            ("thin\u{2009}space", "thin space"),
            ("(x)", "(x)"),
            ("\u{2212}1", "-1"),
        ];

        /// A file line: its text as stored, and the normalized spelling a patch may use.
        fn line(index: usize) -> impl Strategy<Value = (String, String)> {
            (
                prop::collection::vec(0..PIECES.len(), 1..4),
                prop::sample::select(vec!["", " ", "  ", "\t"]),
                prop::sample::select(vec!["", "  ", "\t"]),
            )
                .prop_map(move |(pieces, trailing, leading)| {
                    let stored: Vec<&str> = pieces.iter().map(|&p| PIECES[p].0).collect();
                    let ascii: Vec<&str> = pieces.iter().map(|&p| PIECES[p].1).collect();
                    // A unique token per line keeps every chunk unambiguous.
                    (
                        format!("{leading}l{index} {}{trailing}", stored.join(" ")),
                        format!("l{index} {}", ascii.join(" ")),
                    )
                })
        }

        fn file() -> impl Strategy<Value = Vec<(String, String)>> {
            (3usize..24).prop_flat_map(|n| (0..n).map(line).collect::<Vec<_>>())
        }

        proptest! {
            /// Whatever the spelling of the context, every line the patch neither removes nor
            /// adds is byte for byte what it was.
            #[test]
            fn untouched_lines_never_change(
                lines in file(),
                at in any::<prop::sample::Index>(),
                before in 0usize..4,
                after in 0usize..4,
                op in 0u8..3,
                exact_context in any::<bool>(),
            ) {
                let k = at.index(lines.len());
                let body: String = lines.iter().map(|(stored, _)| format!("{stored}\n")).collect();
                let spell = |i: usize| if exact_context { lines[i].0.clone() } else { lines[i].1.clone() };
                let mut patch = String::from("*** Begin Patch\n*** Update File: f\n@@\n");
                for i in k.saturating_sub(before)..k {
                    patch.push_str(&format!(" {}\n", spell(i)));
                }
                let mut expected: Vec<String> = lines[..k].iter().map(|(s, _)| s.clone()).collect();
                match op {
                    // Replace line k.
                    0 => {
                        patch.push_str(&format!("-{}\n+NEW\n", spell(k)));
                        expected.push("NEW".into());
                    }
                    // Delete line k.
                    1 => patch.push_str(&format!("-{}\n", spell(k))),
                    // Insert before line k (after its context), keeping k as context.
                    _ => {
                        patch.push_str(&format!("+NEW\n {}\n", spell(k)));
                        expected.push("NEW".into());
                        expected.push(lines[k].0.clone());
                    }
                }
                let end = (k + 1 + after).min(lines.len());
                for i in k + 1..end {
                    patch.push_str(&format!(" {}\n", spell(i)));
                }
                patch.push_str("*** End Patch");
                expected.extend(lines[k + 1..].iter().map(|(s, _)| s.clone()));
                let want: String = expected.iter().map(|l| format!("{l}\n")).collect();
                prop_assert_eq!(super::apply_patch_text(&body, &patch), Ok(want));
            }
        }
    }
}
