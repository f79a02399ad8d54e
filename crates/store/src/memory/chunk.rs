//! Splitting a Markdown note into chunks: by headings first, then by paragraphs, each chunk at
//! most [`MAX_CHARS`] (about 600 tokens), with the last paragraph of a split section repeated at
//! the start of the next chunk so a fact on the border is found from both sides.

/// Longest chunk, in characters (about 600 tokens of English).
pub(crate) const MAX_CHARS: usize = 2400;
/// Longest paragraph repeated as overlap.
const MAX_OVERLAP_CHARS: usize = MAX_CHARS / 4;

/// A piece of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// The chunk's text (its lines joined by `\n`).
    pub text: String,
    /// The headings above the chunk (`Project > Deadlines`), for context when embedding.
    pub heading: String,
}

impl Chunk {
    /// The sha256 of its text, hex: an unchanged chunk of an edited note keeps its vector.
    pub fn hash(&self) -> String {
        super::index::sha256_hex(self.text.as_bytes())
    }
}

/// A run of lines: (first index, last index exclusive).
type Span = (usize, usize);

/// Splits `text` into chunks. Blank notes have none.
pub(crate) fn chunk(text: &str) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (section, heading) in sections(&lines) {
        let paragraphs = paragraphs(&lines, section);
        let mut current: Vec<Span> = Vec::new();
        let mut size = 0;
        for para in paragraphs {
            let para_size = chars(&lines, para);
            if para_size > MAX_CHARS {
                flush(&lines, &mut current, &heading, &mut out);
                size = 0;
                for piece in split_long(&lines, para) {
                    out.push(make(&lines, piece, &heading));
                }
                continue;
            }
            if size + para_size > MAX_CHARS && !current.is_empty() {
                let last = *current.last().unwrap_or(&para);
                flush(&lines, &mut current, &heading, &mut out);
                size = 0;
                let overlap = chars(&lines, last);
                if overlap <= MAX_OVERLAP_CHARS && overlap + para_size <= MAX_CHARS {
                    current.push(last);
                    size = overlap;
                }
            }
            current.push(para);
            size += para_size + 1;
        }
        flush(&lines, &mut current, &heading, &mut out);
    }
    out
}

fn flush(lines: &[&str], current: &mut Vec<Span>, heading: &str, out: &mut Vec<Chunk>) {
    if let (Some(first), Some(last)) = (current.first(), current.last()) {
        out.push(make(lines, (first.0, last.1), heading));
    }
    current.clear();
}

fn make(lines: &[&str], (start, end): Span, heading: &str) -> Chunk {
    Chunk { start_line: start + 1, end_line: end, text: lines[start..end].join("\n"), heading: heading.to_owned() }
}

fn chars(lines: &[&str], (start, end): Span) -> usize {
    lines[start..end].iter().map(|l| l.chars().count() + 1).sum()
}

/// Heading level of a Markdown ATX heading line.
fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with(' '))).then_some(hashes)
}

/// Sections: each starts at a heading (or the top of the note) and runs to the next heading.
/// Lines inside fenced code blocks are never headings.
fn sections(lines: &[&str]) -> Vec<(Span, String)> {
    let mut out = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut start = 0;
    let mut fence = false;
    let mut heading = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if let Some(level) = heading_level(line) {
            if i > start {
                out.push(((start, i), heading.clone()));
            }
            start = i;
            path.retain(|(l, _)| *l < level);
            path.push((level, line[level..].trim().to_owned()));
            heading = path.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(" > ");
        }
    }
    if lines.len() > start {
        out.push(((start, lines.len()), heading));
    }
    out.retain(|((s, e), _)| lines[*s..*e].iter().any(|l| !l.trim().is_empty()));
    out
}

/// Paragraphs of a section: runs of non-blank lines (a heading line is its own paragraph).
fn paragraphs(lines: &[&str], (start, end): Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut begin: Option<usize> = None;
    for (i, line) in lines.iter().enumerate().take(end).skip(start) {
        let blank = line.trim().is_empty();
        match (blank, begin) {
            (true, Some(b)) => {
                out.push((b, i));
                begin = None;
            }
            (false, None) => begin = Some(i),
            _ => {}
        }
    }
    if let Some(b) = begin {
        out.push((b, end));
    }
    out
}

/// A paragraph longer than a chunk, cut at line boundaries (a single huge line stays whole: the
/// embedder truncates it, and FTS still sees every word).
fn split_long(lines: &[&str], (start, end): Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut begin = start;
    let mut size = 0;
    for (i, line) in lines.iter().enumerate().take(end).skip(start) {
        let n = line.chars().count() + 1;
        if size + n > MAX_CHARS && i > begin {
            out.push((begin, i));
            begin = i;
            size = 0;
        }
        size += n;
    }
    if end > begin {
        out.push((begin, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_split_and_lines_are_kept() {
        let text = "intro line\n\n# Work\nships on friday\n\n## Team\nann and bob\n\n# Home\ncat named tom\n";
        let chunks = chunk(text);
        let got: Vec<(usize, usize, &str)> =
            chunks.iter().map(|c| (c.start_line, c.end_line, c.heading.as_str())).collect();
        assert_eq!(got, vec![(1, 1, ""), (3, 4, "Work"), (6, 7, "Work > Team"), (9, 10, "Home")]);
        assert_eq!(chunks[3].text, "# Home\ncat named tom");
    }

    #[test]
    fn headings_inside_code_fences_do_not_split() {
        let text = "# A\n```\n# not a heading\n```\ntext\n";
        assert_eq!(chunk(text).len(), 1);
    }

    #[test]
    fn long_sections_split_by_paragraph_with_overlap() {
        let para = "word ".repeat(100); // 500 chars
        let text = (0..12).map(|i| format!("{para}{i}")).collect::<Vec<_>>().join("\n\n");
        let chunks = chunk(&text);
        assert!(chunks.len() >= 3, "{}", chunks.len());
        for c in &chunks {
            assert!(c.text.chars().count() <= MAX_CHARS, "{}", c.text.len());
        }
        // The last paragraph of one chunk opens the next.
        assert_eq!(chunks[1].start_line, chunks[0].end_line);
        let last = chunks.last().map(|c| c.end_line);
        assert_eq!(last, Some(text.lines().count()));
    }

    #[test]
    fn huge_paragraphs_split_by_line_and_blank_notes_have_no_chunks() {
        let text = (0..400).map(|i| format!("line number {i} of a list")).collect::<Vec<_>>().join("\n");
        let chunks = chunk(&text);
        assert!(chunks.len() > 1);
        assert_eq!(chunks[0].start_line, 1);
        assert_eq!(chunks[1].start_line, chunks[0].end_line + 1);
        assert!(chunk("\n  \n\n").is_empty());
        assert!(chunk("").is_empty());
    }
}
