//! Bytes to UTF-8: the byte-order mark, then the `Content-Type` charset, then `<meta charset>`
//! or `http-equiv` in the first 4 KB of HTML, then detection (chardetng). Invalid sequences
//! become U+FFFD; the output is always UTF-8.

use encoding_rs::{Encoding, UTF_8};

/// Decodes `body` to UTF-8 and names the encoding used.
pub fn decode(body: &[u8], content_type: Option<&str>) -> (String, &'static str) {
    let encoding = sniff(body, content_type);
    let (text, _, _) = encoding.decode(body);
    (text.into_owned(), encoding.name())
}

/// The encoding of `body`, by the order above.
pub fn sniff(body: &[u8], content_type: Option<&str>) -> &'static Encoding {
    if let Some((enc, _)) = Encoding::for_bom(body) {
        return enc;
    }
    if let Some(enc) = content_type.and_then(charset_param).and_then(|l| Encoding::for_label(l.as_bytes())) {
        return ascii_compatible(enc);
    }
    let head = &body[..body.len().min(4096)];
    if looks_html(content_type, head)
        && let Some(enc) = meta_charset(head)
    {
        return ascii_compatible(enc);
    }
    if valid_utf8_prefix(body) {
        return UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new();
    detector.feed(&body[..body.len().min(64 * 1024)], body.len() <= 64 * 1024);
    detector.guess(None, true)
}

/// UTF-8 up to a character cut at the 64 KB probe boundary.
fn valid_utf8_prefix(body: &[u8]) -> bool {
    let probe = &body[..body.len().min(64 * 1024)];
    match std::str::from_utf8(probe) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && probe.len() - e.valid_up_to() < 4,
    }
}

/// A page that declares UTF-16 in ASCII text is not UTF-16 (the HTML rule).
fn ascii_compatible(enc: &'static Encoding) -> &'static Encoding {
    if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE { UTF_8 } else { enc.output_encoding() }
}

fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("charset").then(|| v.trim().trim_matches(['"', '\'']).to_owned())
    })
}

fn looks_html(content_type: Option<&str>, head: &[u8]) -> bool {
    match content_type {
        Some(ct) => {
            let ct = ct.to_ascii_lowercase();
            ct.contains("html") || ct.contains("xml")
        }
        None => memchr_ci(head, b"<html").is_some() || memchr_ci(head, b"<meta").is_some(),
    }
}

fn memchr_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// `<meta charset="x">` or `<meta http-equiv="content-type" content="...; charset=x">`.
fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let mut rest = head;
    while let Some(at) = memchr_ci(rest, b"<meta") {
        let tag = &rest[at..];
        let end = tag.iter().position(|&b| b == b'>').unwrap_or(tag.len());
        let tag = &tag[..end];
        if let Some(i) = memchr_ci(tag, b"charset") {
            let after = &tag[i + 7..];
            let after = after.strip_prefix(b" ").unwrap_or(after);
            if let Some(value) = after.strip_prefix(b"=") {
                let value: Vec<u8> = value
                    .iter()
                    .copied()
                    .skip_while(|b| matches!(b, b' ' | b'"' | b'\''))
                    .take_while(|b| !matches!(b, b' ' | b'"' | b'\'' | b';' | b'/' | b'>'))
                    .collect();
                if let Some(enc) = Encoding::for_label(&value) {
                    return Some(enc);
                }
            }
        }
        rest = &rest[at + 5..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_of_evidence() {
        let latin1 = b"caf\xe9 cr\xe8me br\xfbl\xe9e, \xe0 la fran\xe7aise, tr\xe8s appr\xe9ci\xe9e par les gourmets";
        assert!(decode(latin1, Some("text/plain; charset=ISO-8859-1")).0.contains("café"));
        let html = b"<html><head><meta charset=\"windows-1251\"></head><body>\xcf\xf0\xe8\xe2\xe5\xf2</body></html>";
        let (text, enc) = decode(html, Some("text/html"));
        assert_eq!(enc, "windows-1251");
        assert!(text.contains("Привет"), "{text}");
        let equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\">\x82\xb1\x82\xf1";
        assert_eq!(decode(equiv, Some("text/html")).1, "Shift_JIS");
        // The header wins over the meta tag; a BOM wins over both.
        assert_eq!(decode(html, Some("text/html; charset=utf-8")).1, "UTF-8");
        assert_eq!(decode(b"\xef\xbb\xbfhi", Some("text/html; charset=latin1")).1, "UTF-8");
        // No label at all: detected.
        assert_eq!(decode(latin1, None).1, "windows-1252");
        assert_eq!(decode("déjà vu".as_bytes(), None).1, "UTF-8");
        // An unknown label falls through; invalid bytes become U+FFFD.
        let (t, _) = decode(b"ok \xff\xfe\xfd", Some("text/plain; charset=x-nonsense"));
        assert!(t.starts_with("ok "));
        let (t, _) = decode(b"ok \xc3", Some("text/plain; charset=utf-8"));
        assert_eq!(t, "ok \u{fffd}");
        // UTF-16 declared in meta is ignored (ASCII-compatible rule).
        assert_eq!(decode(b"<meta charset=utf-16>hi", Some("text/html")).1, "UTF-8");
    }
}
