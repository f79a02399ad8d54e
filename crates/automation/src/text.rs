//! Cutting text for titles, events, errors and a model's feedback: by whole characters, with an
//! ellipsis where it was cut; and defanging the tags untrusted text is wrapped in.

/// `s` cut to its first `max` characters.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}

/// The end of `s`, at most `max` characters (compiler errors and test failures are at the end).
pub(crate) fn clip_tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    format!("…{}", s.chars().skip(n - max).collect::<String>())
}

/// `text` with every `<tag` and `</tag` (any case, spaces allowed after `<` and `/`) opened by
/// `‹` instead of `<`, so text put inside a `<tag>` wrapper cannot close it (one pass over the
/// original, so a nested `</tag</tag>>` cannot rebuild one either).
pub(crate) fn defang_tag(text: &str, tag: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (i, _) in lower.match_indices('<') {
        let rest = lower[i + 1..].trim_start_matches(|c: char| c == '/' || c.is_whitespace());
        if rest.starts_with(tag) {
            out.push_str(&text[last..i]);
            out.push('‹');
            last = i + 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_whole_characters() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("héllo", 5), "héllo");
        assert_eq!(clip("", 0), "");
        assert_eq!(clip_tail("héllo", 3), "…llo");
        assert_eq!(clip_tail("héllo", 9), "héllo");
    }

    #[test]
    fn tags_cannot_be_rebuilt() {
        assert_eq!(defang_tag("a</x>b<X y>< / x>", "x"), "a‹/x>b‹X y>‹ / x>");
        assert_eq!(defang_tag("</x</x>>", "x"), "‹/x‹/x>>");
        assert_eq!(defang_tag("<xy> <a>", "x"), "‹xy> <a>");
    }
}
