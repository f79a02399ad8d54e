//! Finding a chunk's lines in a file: Codex's four passes, plus an ambiguity check.
//!
//! The passes, tried in order until one finds the lines: exact; ignoring trailing whitespace;
//! ignoring surrounding whitespace; ignoring surrounding whitespace with typographic punctuation
//! (dashes, curly quotes, unusual spaces) folded to ASCII. Within the pass that finds the lines,
//! toolgate collects every position, not just the first: a chunk whose lines occur more than once
//! where it may apply is refused as ambiguous instead of silently changing the first.

/// One matching pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Exact,
    TrimEnd,
    Trim,
    Typographic,
}

const PASSES: [Pass; 4] = [Pass::Exact, Pass::TrimEnd, Pass::Trim, Pass::Typographic];

fn equal(pass: Pass, a: &str, b: &str) -> bool {
    match pass {
        Pass::Exact => a == b,
        Pass::TrimEnd => a.trim_end() == b.trim_end(),
        Pass::Trim => a.trim() == b.trim(),
        Pass::Typographic => fold(a.trim()).eq(fold(b.trim())),
    }
}

/// Folds typographic punctuation to ASCII.
fn fold(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars().map(|c| match c {
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => '-',
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    })
}

fn matches_at(pass: Pass, lines: &[String], pattern: &[String], at: usize) -> bool {
    pattern.iter().enumerate().all(|(k, p)| equal(pass, &lines[at + k], p))
}

/// Every position at or after `start` where `pattern` occurs, using the first pass that finds
/// any. With `eof`, only the position that ends at the end of the file is tried first.
pub(crate) fn find_all(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Vec<usize> {
    if pattern.is_empty() {
        return vec![start.min(lines.len())];
    }
    if pattern.len() > lines.len() {
        return Vec::new();
    }
    let last = lines.len() - pattern.len();
    if eof && last >= start {
        for pass in PASSES {
            if matches_at(pass, lines, pattern, last) {
                return vec![last];
            }
        }
    }
    if start > last {
        return Vec::new();
    }
    for pass in PASSES {
        let found: Vec<usize> = (start..=last).filter(|&i| matches_at(pass, lines, pattern, i)).collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// The first position at or after `start` (the first pass that finds any).
pub(crate) fn find_first(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    find_all(lines, pattern, start, eof).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn passes_in_order() {
        let lines = v(&["a  ", "  b", "“c” – d", "a"]);
        assert_eq!(find_all(&lines, &v(&["a"]), 0, false), vec![3]);
        assert_eq!(find_all(&lines, &v(&["b"]), 0, false), vec![1]);
        assert_eq!(find_all(&lines, &v(&["\"c\" - d"]), 0, false), vec![2]);
        assert_eq!(find_all(&lines, &v(&["a "]), 0, false), vec![0, 3]);
        assert_eq!(find_all(&lines, &v(&["a"]), 0, true), vec![3]);
        assert!(find_all(&lines, &v(&["zzz"]), 0, false).is_empty());
    }
}
