//! Identifiers toolgate mints itself (lock tokens, process ids, call ids, approval ids, and
//! those of tools to come), recognisable as ours so that the leak detector never redacts them.
//!
//! A model must be able to pass an id it read in one result to the next call (`lock_paths` →
//! `unlock_paths`, `exec` in the background → `process`); an id redacted as a "token" breaks
//! that. Recognising ids by their shape alone would open a hole: a secret that merely looks
//! like one of our ids would pass. So every id carries a tag: a keyed hash (SipHash with a
//! random key of this process) of its kind and body. [`is_ours`] recomputes it; a look-alike
//! without the right tag is an ordinary string, scanned like any other.
//!
//! The key lives only in memory: an id is ours only in the process that minted it, which is
//! also the only process where it means anything (locks and background processes do not
//! outlive it).
//!
//! The shape is `tg-<kind>-<body>-<tag>`: `kind` a short lowercase word, `body` lowercase
//! letters and digits, `tag` 12 hex digits. Every character is one a file name and a shell word
//! take as is.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Hex digits of the tag (48 bits: a look-alike passes with probability 2^-48).
const TAG_LEN: usize = 12;

/// Kinds longer than this are refused (ids stay short).
const MAX_KIND: usize = 8;

/// Bodies longer than this are never ours (a bound on the work [`is_ours`] does).
const MAX_BODY: usize = 64;

/// The process's key: `RandomState` seeds SipHash from the OS generator.
fn key() -> &'static std::hash::RandomState {
    static KEY: OnceLock<std::hash::RandomState> = OnceLock::new();
    KEY.get_or_init(std::hash::RandomState::new)
}

fn tag(kind: &str, body: &str) -> String {
    let mut h = key().build_hasher();
    h.write(kind.as_bytes());
    h.write_u8(0xff);
    h.write(body.as_bytes());
    format!("{:0width$x}", h.finish() >> (64 - 4 * TAG_LEN), width = TAG_LEN)
}

fn valid_kind(kind: &str) -> bool {
    !kind.is_empty() && kind.len() <= MAX_KIND && kind.bytes().all(|b| b.is_ascii_lowercase())
}

fn valid_body(body: &str) -> bool {
    !body.is_empty() && body.len() <= MAX_BODY && body.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// An id of `kind` (`lock`, `proc`, `call`, ...) around `body` (lowercase letters and digits,
/// e.g. a counter). Use [`mint`] when the id must also be unpredictable. An invalid `kind` is
/// replaced by `id`, other characters of `body` by `x`: never a panic.
pub fn mark(kind: &str, body: &str) -> String {
    let kind = if valid_kind(kind) { kind } else { "id" };
    let body: String = body
        .chars()
        .take(MAX_BODY)
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { 'x' })
        .collect();
    let body = if body.is_empty() { "0".to_owned() } else { body };
    let tag = tag(kind, &body);
    format!("tg-{kind}-{body}-{tag}")
}

/// A fresh, unpredictable id of `kind`: 10 random bytes from the OS as its body.
pub fn mint(kind: &str) -> String {
    mark(kind, &crate::random::hex_id(10))
}

/// Whether `text` is exactly an id this process minted.
pub fn is_ours(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("tg-") else { return false };
    let Some((kind, rest)) = rest.split_once('-') else { return false };
    let Some((body, tag_text)) = rest.rsplit_once('-') else { return false };
    valid_kind(kind)
        && valid_body(body)
        && tag_text.len() == TAG_LEN
        && tag_text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && tag(kind, body) == tag_text
}

/// Whether `range` of `text` lies inside one of our ids: the run of id characters around it is
/// an id this process minted. The leak detector drops such findings.
pub fn within_ours(text: &str, range: std::ops::Range<usize>) -> bool {
    let bytes = text.as_bytes();
    let id_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
    if range.start > range.end || range.end > bytes.len() || !bytes[range.clone()].iter().all(|&b| id_byte(b)) {
        return false;
    }
    let mut start = range.start;
    while start > 0 && id_byte(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = range.end;
    while end < bytes.len() && id_byte(bytes[end]) {
        end += 1;
    }
    // Longer than any id we make: not ours (and not worth hashing).
    end - start <= 3 + MAX_KIND + 1 + MAX_BODY + 1 + TAG_LEN && is_ours(&text[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_ours_and_look_alikes_are_not() {
        let id = mint("lock");
        assert!(id.starts_with("tg-lock-"), "{id}");
        assert!(is_ours(&id));
        assert_ne!(mint("lock"), id, "unpredictable");
        // Same shape, wrong tag: a secret that imitates our ids is not ours.
        let mut forged = id.clone();
        let last = forged.pop().unwrap_or('0');
        forged.push(if last == '0' { '1' } else { '0' });
        assert!(!is_ours(&forged));
        // Another kind with the same body and tag is not ours either.
        assert!(!is_ours(&id.replacen("tg-lock-", "tg-proc-", 1)));
        for bad in ["", "tg-", "tg-lock", "tg-lock--", "tg-LOCK-abc-000000000000", "xg-lock-abc-000000000000"] {
            assert!(!is_ours(bad), "{bad}");
        }
    }

    #[test]
    fn marked_ids_keep_their_body() {
        let id = mark("call", "ab12x7");
        assert!(id.starts_with("tg-call-ab12x7-"), "{id}");
        assert!(is_ours(&id));
        // Invalid input is made valid, never a panic.
        assert!(is_ours(&mark("Bad Kind", "A/B")));
        assert!(is_ours(&mark("call", "")));
    }

    #[test]
    fn ranges_inside_an_id_are_recognised() {
        let id = mint("proc");
        let text = format!("Token: {id} (pass it on)");
        let start = text.find(&id).unwrap_or(0);
        assert!(within_ours(&text, start..start + id.len()));
        assert!(within_ours(&text, start + 8..start + id.len()), "a match of part of the id");
        assert!(!within_ours(&text, 0..5));
        let glued = format!("x{id}");
        assert!(!within_ours(&glued, 1..glued.len()), "an id glued to other text is not ours");
    }

    #[test]
    fn the_leak_detector_keeps_our_ids_and_catches_look_alikes() {
        for kind in ["lock", "proc", "call", "appr"] {
            let id = mint(kind);
            // A look-alike: the same shape without this process's tag.
            let mut forged = format!("{}{}", &id[..id.len() - TAG_LEN], "0123456789ab");
            if is_ours(&forged) {
                forged = format!("{}{}", &id[..id.len() - TAG_LEN], "ba9876543210");
            }
            // Both are secrets the detector knows verbatim (as it knows a secret environment
            // variable's value): ours is still exempt, the look-alike is caught.
            let detector = crate::leak::LeakDetector::new().with_secret_values([id.clone(), forged.clone()]);
            let text = format!("Token: {id}\napi_key = {id}\nSESSION_TOKEN={id}\n");
            let out = detector.redact(&text);
            assert!(out.findings.is_empty(), "{text}: {:?}", out.findings);
            let text = format!("Token: {forged}\nSESSION_TOKEN={forged}\n");
            let out = detector.redact(&text);
            assert!(!out.text.contains(&forged), "a look-alike passed: {}", out.text);
            assert_eq!(out.findings.len(), 2, "{:?}", out.findings);
        }
    }
}
