//! Cutting text for titles, events, errors and a model's feedback: by whole characters, with an
//! ellipsis where it was cut.

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
}
