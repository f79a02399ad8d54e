//! Text files as the editing tools see them: a BOM and CRLF line endings taken off on the way in
//! and put back on the way out, so an edit changes only what it says.

const BOM: &str = "\u{feff}";

/// A decoded text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextFile {
    /// The file started with a UTF-8 byte order mark.
    pub(crate) bom: bool,
    /// Every line ending was CRLF (the body holds LF; CRLF is restored on encode).
    pub(crate) crlf: bool,
    /// The content, without BOM, with LF line endings when `crlf`.
    pub(crate) body: String,
}

impl TextFile {
    /// Decodes `bytes`; `None` when they are not UTF-8 or look binary (a NUL byte).
    pub(crate) fn decode(bytes: &[u8]) -> Option<TextFile> {
        if bytes.contains(&0) {
            return None;
        }
        let s = std::str::from_utf8(bytes).ok()?;
        let (bom, s) = match s.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let crlf = is_crlf(s);
        let body = if crlf { s.replace("\r\n", "\n") } else { s.to_owned() };
        Some(TextFile { bom, crlf, body })
    }

    /// A new file with the conventions of this one.
    pub(crate) fn with_body(&self, body: String) -> TextFile {
        TextFile { bom: self.bom, crlf: self.crlf, body }
    }

    /// Encodes back to bytes, restoring the BOM and CRLF line endings.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = String::with_capacity(self.body.len() + 16);
        if self.bom {
            out.push_str(BOM);
        }
        if self.crlf {
            // The body holds LF only where CRLF was; a lone CR stays as it was.
            out.push_str(&self.body.replace('\n', "\r\n"));
        } else {
            out.push_str(&self.body);
        }
        out.into_bytes()
    }

    /// Brings a string from the model into this file's body convention (CRLF → LF when the file
    /// is CRLF).
    pub(crate) fn adapt(&self, s: &str) -> String {
        if self.crlf { s.replace("\r\n", "\n") } else { s.to_owned() }
    }
}

/// Whether the text has line endings and all of them are CRLF.
fn is_crlf(s: &str) -> bool {
    let bytes = s.as_bytes();
    let mut any = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            if i == 0 || bytes[i - 1] != b'\r' {
                return false;
            }
            any = true;
        }
    }
    any
}

/// The 1-based line number of byte offset `at` in `s`.
pub(crate) fn line_of(s: &str, at: usize) -> usize {
    s.as_bytes()[..at.min(s.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Lines `first..=last` (1-based) of `s`, numbered like `cat -n`.
pub(crate) fn numbered(s: &str, first: usize, last: usize) -> String {
    let mut out = String::new();
    for (i, line) in s.split('\n').enumerate() {
        let n = i + 1;
        if n < first {
            continue;
        }
        if n > last {
            break;
        }
        out.push_str(&format!("{n:>6}\t{}\n", cut(line, 500)));
    }
    out
}

fn cut(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let head: String = line.chars().take(max).collect();
    format!("{head}… [line cut]")
}

/// The region of `body` most like `needle`: (first line, last line, similarity 0..1).
///
/// Slides a window of the needle's line count over the file, scoring lines equal after trimming
/// first and string similarity second, so it stays fast on large files.
pub(crate) fn closest_region(body: &str, needle: &str) -> Option<(usize, usize, f64)> {
    let lines: Vec<&str> = body.split('\n').collect();
    let needle_lines: Vec<&str> = needle.trim_end_matches('\n').split('\n').collect();
    let n = needle_lines.len().max(1);
    if lines.is_empty() || needle.trim().is_empty() {
        return None;
    }
    let trimmed_needle: Vec<&str> = needle_lines.iter().map(|l| l.trim()).collect();
    let window = n.min(lines.len());
    let mut best: Option<(usize, f64)> = None;
    for start in 0..=(lines.len() - window) {
        let mut score = 0.0;
        for (k, want) in trimmed_needle.iter().enumerate().take(window) {
            let got = lines[start + k].trim();
            if got == *want {
                score += 1.0;
            } else if !want.is_empty() && !got.is_empty() {
                score += 0.9 * similarity(got, want);
            }
        }
        let score = score / n as f64;
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((start, score));
        }
    }
    let (start, score) = best?;
    if score < 0.3 {
        return None;
    }
    Some((start + 1, start + window, score))
}

/// Cheap similarity of two short strings (bounded work on long lines).
fn similarity(a: &str, b: &str) -> f64 {
    let cap = |s: &str| -> String { s.chars().take(160).collect() };
    strsim::normalized_levenshtein(&cap(a), &cap(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_crlf_and_bom() {
        for raw in ["a\r\nb\r\n", "\u{feff}x\r\ny", "mixed\r\nlf\n", "plain\n", "", "cr\ronly"] {
            let t = TextFile::decode(raw.as_bytes()).unwrap_or_else(|| panic!("decode {raw:?}"));
            assert_eq!(t.encode(), raw.as_bytes(), "{raw:?}");
        }
        let t = TextFile::decode(b"a\r\nb\r\n").unwrap_or_else(|| panic!("decode"));
        assert!(t.crlf);
        assert_eq!(t.body, "a\nb\n");
        assert!(TextFile::decode(b"a\0b").is_none());
    }

    #[test]
    fn finds_closest_region() {
        let body = "fn a() {}\nfn main() {\n    println!(\"hi\");\n}\n";
        let r = closest_region(body, "fn main() {\n    println!(\"hello\");\n");
        assert_eq!(r.map(|(a, b, _)| (a, b)), Some((2, 3)));
    }
}
