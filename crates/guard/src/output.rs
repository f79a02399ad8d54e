//! Shaping what a tool returns before a model reads it.
//!
//! The gate's output stage runs, in order: [`truncate_middle`] (keep the head and the tail, cut
//! on character boundaries), leak detection ([`crate::leak`]), injection neutralizing
//! ([`crate::injection`]), then [`wrap_untrusted`] for tools whose output is untrusted.

/// What truncation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// The text fit.
    None,
    /// The middle was cut.
    Cut {
        /// Bytes of the original text.
        original_bytes: usize,
        /// Bytes removed from the middle.
        removed_bytes: usize,
        /// Lines removed from the middle.
        removed_lines: usize,
    },
}

/// A possibly shortened text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// The text to show, with a marker line where the middle was cut.
    pub text: String,
    /// What was done.
    pub truncation: Truncation,
}

/// Keeps at most about `max_bytes` of `text`: 60% from the head and 40% from the tail, each cut
/// on a UTF-8 character boundary (and preferably at a line break near it), joined by a marker
/// line that says how much was removed. The result never exceeds `max_bytes` plus the marker.
pub fn truncate_middle(text: &str, max_bytes: usize) -> Truncated {
    if text.len() <= max_bytes {
        return Truncated { text: text.to_owned(), truncation: Truncation::None };
    }
    let head_budget = max_bytes * 3 / 5;
    let tail_budget = max_bytes - head_budget;
    let mut head_end = floor_char_boundary(text, head_budget);
    if let Some(nl) = text[..head_end].rfind('\n').filter(|&nl| nl >= head_end / 2) {
        head_end = nl + 1;
    }
    let mut tail_start = ceil_char_boundary(text, text.len() - tail_budget);
    if let Some(nl) = text[tail_start..].find('\n').filter(|&off| off < tail_budget / 2) {
        tail_start += nl + 1;
    }
    let removed = &text[head_end..tail_start];
    let removed_lines = removed.bytes().filter(|&b| b == b'\n').count();
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 80);
    out.push_str(&text[..head_end]);
    if !out.ends_with('\n') && !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "[... {} bytes ({} lines) cut from the middle of {} bytes ...]\n",
        removed.len(),
        removed_lines,
        text.len()
    ));
    out.push_str(&text[tail_start..]);
    Truncated {
        text: out,
        truncation: Truncation::Cut { original_bytes: text.len(), removed_bytes: removed.len(), removed_lines },
    }
}

/// The largest char boundary `<= i`.
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary `>= i`.
pub fn ceil_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Wraps untrusted `text` from tool `tool` in a boundary with a fresh random id:
///
/// ```text
/// <tool_output name="web_fetch" id="9f3c...">
/// ...
/// </tool_output id="9f3c...">
/// ```
///
/// The id is new for every wrap, so text inside cannot know it in advance and cannot close the
/// boundary early; [`crate::injection`] also neutralizes anything inside that looks like a
/// boundary tag.
pub fn wrap_untrusted(tool: &str, text: &str) -> String {
    let id = crate::random::hex_id(8);
    let name: String = tool.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect();
    let mut out = String::with_capacity(text.len() + 96);
    out.push_str("<tool_output name=\"");
    out.push_str(&name);
    out.push_str("\" id=\"");
    out.push_str(&id);
    out.push_str("\">\n");
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("</tool_output id=\"");
    out.push_str(&id);
    out.push_str("\">");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        let t = truncate_middle("hello", 10);
        assert_eq!(t.text, "hello");
        assert_eq!(t.truncation, Truncation::None);
    }

    #[test]
    fn cuts_keep_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(1000); // 2 bytes each
        for max in [1, 2, 3, 99, 100, 101, 1999] {
            let t = truncate_middle(&text, max);
            assert!(t.text.starts_with('é') || max < 4, "max {max}");
            assert!(t.text.ends_with('é') || max < 4, "max {max}");
            let Truncation::Cut { removed_bytes, .. } = t.truncation else { panic!("must cut") };
            assert!(text.len() - removed_bytes <= max, "kept at most max bytes (max {max})");
        }
    }

    #[test]
    fn prefers_line_breaks_and_counts_lines() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = truncate_middle(&text, 200);
        assert!(t.text.starts_with("line 0\n"));
        assert!(t.text.ends_with("line 99\n"));
        assert!(t.text.contains("lines) cut from the middle"));
        for line in t.text.lines().filter(|l| !l.starts_with("[...")) {
            assert!(line.starts_with("line "), "whole lines only: {line:?}");
        }
    }

    #[test]
    fn wrapper_ids_are_fresh() {
        let a = wrap_untrusted("web_fetch", "x");
        let b = wrap_untrusted("web_fetch", "x");
        assert_ne!(a, b);
        assert!(a.starts_with("<tool_output name=\"web_fetch\" id=\""));
        assert!(a.ends_with("\">"));
    }
}
