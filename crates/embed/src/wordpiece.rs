//! BERT's WordPiece tokenizer (the `BertNormalizer` + `BertPreTokenizer` + `WordPiece` of
//! Hugging Face `tokenizers`, as `tokenizer.json` describes it for uncased models): clean the
//! text, pad CJK ideographs with spaces, lowercase, strip accents, split on whitespace and
//! punctuation, then greedy longest-match pieces with `##` continuations.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use crate::EmbedError;

/// Words longer than this (in characters) become `[UNK]`, as in `tokenizers`.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary and the ids of its special tokens.
#[derive(Debug)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
}

impl WordPiece {
    /// Reads the vocabulary from a `tokenizer.json` (its `model.vocab` map).
    pub fn from_tokenizer_json(json: &str) -> Result<WordPiece, EmbedError> {
        let bad = |m: &str| EmbedError::Model(format!("tokenizer.json: {m}"));
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(&e.to_string()))?;
        let model = &v["model"];
        if model["type"].as_str() != Some("WordPiece") {
            return Err(bad("not a WordPiece tokenizer"));
        }
        let map = model["vocab"].as_object().ok_or_else(|| bad("no model.vocab"))?;
        let mut vocab = HashMap::with_capacity(map.len());
        for (token, id) in map {
            let id =
                id.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| bad("a vocab id is not a number"))?;
            vocab.insert(token.clone(), id);
        }
        let id = |t: &str| vocab.get(t).copied().ok_or_else(|| bad(&format!("no {t} token")));
        Ok(WordPiece { unk: id("[UNK]")?, cls: id("[CLS]")?, sep: id("[SEP]")?, vocab })
    }

    /// Token ids of `text`: `[CLS] pieces... [SEP]`, at most `max_len` in all (pieces past the
    /// limit are dropped, as `tokenizers` truncates).
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        let room = max_len.saturating_sub(2);
        'words: for word in pre_tokenize(&normalize(text)) {
            for id in self.pieces(&word) {
                if ids.len() > room {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    fn pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        let mut buf = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                buf.clear();
                if start > 0 {
                    buf.push_str("##");
                }
                buf.extend(&chars[start..end]);
                if let Some(id) = self.vocab.get(&buf) {
                    found = Some(*id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => out.push(id),
                None => return vec![self.unk],
            }
            start = end;
        }
        out
    }
}

/// `BertNormalizer` with `clean_text`, `handle_chinese_chars`, `lowercase` and (following
/// `lowercase`) `strip_accents`.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (is_control(c)) {
            continue;
        }
        if c.is_whitespace() {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned.to_lowercase().nfd().filter(|c| !is_mark_nonspacing(*c)).collect()
}

/// Control characters as BERT sees them: `\t`, `\n`, `\r` are whitespace, not control.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && (c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{feff}'))
}

/// Combining marks removed by accent stripping (Unicode category Mn, the common blocks).
fn is_mark_nonspacing(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036f}' | '\u{0483}'..='\u{0487}' | '\u{0591}'..='\u{05bd}' | '\u{0610}'..='\u{061a}'
        | '\u{064b}'..='\u{065f}' | '\u{0900}'..='\u{0902}' | '\u{093c}' | '\u{0941}'..='\u{0948}' | '\u{094d}'
        | '\u{1ab0}'..='\u{1aff}' | '\u{1dc0}'..='\u{1dff}' | '\u{20d0}'..='\u{20f0}' | '\u{3099}'..='\u{309a}'
        | '\u{fe20}'..='\u{fe2f}')
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// BERT's punctuation: every non-alphanumeric ASCII printable character, and Unicode
/// punctuation (general punctuation, CJK and full-width forms, and the like).
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(c as u32,
        0x00A1 | 0x00A7 | 0x00AB | 0x00B6 | 0x00B7 | 0x00BB | 0x00BF | 0x037E | 0x0387 | 0x055A..=0x055F
        | 0x0589..=0x058A | 0x05BE | 0x05C0 | 0x05C3 | 0x05C6 | 0x05F3..=0x05F4 | 0x0609..=0x060A
        | 0x060C..=0x060D | 0x061B | 0x061E..=0x061F | 0x066A..=0x066D | 0x06D4 | 0x0964..=0x0965
        | 0x2010..=0x2027 | 0x2030..=0x2043 | 0x2045..=0x2051 | 0x2053..=0x205E | 0x207D..=0x207E
        | 0x208D..=0x208E | 0x2308..=0x230B | 0x2329..=0x232A | 0x2768..=0x2775 | 0x27C5..=0x27C6
        | 0x27E6..=0x27EF | 0x2983..=0x2998 | 0x29D8..=0x29DB | 0x29FC..=0x29FD | 0x2E00..=0x2E4F
        | 0x3001..=0x3003 | 0x3008..=0x3011 | 0x3014..=0x301F | 0x3030 | 0x303D | 0x30A0 | 0x30FB
        | 0xFE10..=0xFE19 | 0xFE30..=0xFE52 | 0xFE54..=0xFE61 | 0xFE63 | 0xFE68 | 0xFE6A..=0xFE6B
        | 0xFF01..=0xFF03 | 0xFF05..=0xFF0A | 0xFF0C..=0xFF0F | 0xFF1A..=0xFF1B | 0xFF1F..=0xFF20
        | 0xFF3B..=0xFF3D | 0xFF3F | 0xFF5B | 0xFF5D | 0xFF5F..=0xFF65)
}

/// `BertPreTokenizer`: split on whitespace; each punctuation character is its own word.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c.is_whitespace() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else if is_punctuation(c) {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_bert() {
        assert_eq!(normalize("Héllo\tWÖRLD\u{0}"), "hello world");
        assert_eq!(pre_tokenize("don't re-run!"), vec!["don", "'", "t", "re", "-", "run", "!"]);
        assert_eq!(pre_tokenize(&normalize("日本語")), vec!["日", "本", "語"]);
    }
}
