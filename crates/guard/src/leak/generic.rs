//! The generic `name = value` rules and the placeholder filter shared by all rules.
//!
//! The generic matcher is hand-written rather than a regex because its keywords (`key`,
//! `token`, `secret`, `password`) occur thousands of times in ordinary code: most hits are
//! rejected after looking at a few bytes.

use std::ops::Range;

/// Which generic rule an assignment belongs to, decided by the whole variable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Password = 0,
    Secret = 1,
    Token = 2,
    ApiKey = 3,
}

impl Class {
    pub(crate) const COUNT: usize = 4;
}

const MAX_NAME: usize = 64;
const MIN_VALUE: usize = 8;
/// Keys, tokens and secrets are long; short values after such names are ids and settings.
const MIN_KEY_VALUE: usize = 16;
const MAX_VALUE: usize = 256;

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
}

fn is_value_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-+/=.~!@#$%^*?|".contains(&b)
}

/// Words of a name (split at `_`, `-`, `.`, and camelCase humps) that make a
/// `key`/`token`/`secret` name something other than a credential: `token_type`, `apiKeyName`,
/// `SECRET_PATH`. Whole words, so that `ACCOUNT_KEY` (count), `ALGOLIA_API_KEY` (algo) and
/// `SECURITY_TOKEN` (uri) stay credentials.
const NAME_DENY_WORDS: &[&str] = &[
    "public",
    "pub",
    "id",
    "ids",
    "cache",
    "foreign",
    "sort",
    "partition",
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "dir",
    "name",
    "names",
    "type",
    "types",
    "size",
    "len",
    "length",
    "count",
    "format",
    "kind",
    "prefix",
    "suffix",
    "header",
    "headers",
    "field",
    "fields",
    "param",
    "params",
    "url",
    "urls",
    "uri",
    "endpoint",
    "limit",
    "ref",
    "refs",
    "version",
    "algorithm",
    "algo",
    "alg",
    "hash",
    "index",
    "digest",
    "env",
    "var",
    "vars",
    "mode",
    "policy",
    "ttl",
    "label",
    "at",
    "page",
    "next",
    "max",
    "min",
    "num",
    "fn",
    "func",
    "column",
    "tokens",
    "keys",
    "expires",
    "expiry",
    "expiration",
    "expire",
    "expired",
    "event",
    "events",
    "usage",
    "lifetime",
    "timeout",
    "regex",
    "pattern",
    "location",
    "loc",
    "position",
    "pos",
    "attr",
    "attribute",
    "store",
    "ring",
    "chain",
    "code",
    "map",
    "set",
    "up",
    "down",
    "press",
    "frame",
    "space",
];

/// Lower-cased substrings of a name that make it a non-credential even inside one word
/// (`keyboard`, `monkey`, `tokenizer`, `idempotency_key`).
const NAME_DENY: &[&str] = &[
    "pubkey",
    "keyboard",
    "keyword",
    "keyspace",
    "keymap",
    "keycode",
    "keypress",
    "keydown",
    "keyup",
    "keyset",
    "keychain",
    "keyring",
    "keystore",
    "keyframe",
    "keyname",
    "keypath",
    "keyfile",
    "keysize",
    "keylen",
    "keytype",
    "monkey",
    "turkey",
    "hotkey",
    "donkey",
    "keyid",
    "tokenid",
    "tokenizer",
    "tokenize",
    "tokentype",
    "tokenname",
    "maxtoken",
    "numtoken",
    "pagetoken",
    "nexttoken",
    "continuation",
    "sortkey",
    "idempot",
    "secretref",
    "secretname",
    "keyfn",
    "keyfunc",
    "keyed",
    "keyer",
];

/// The words of a name, lower-cased: `apiKeyName` and `API_KEY_NAME` give `api`, `key`, `name`.
fn name_words(name: &[u8]) -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    for (i, &b) in name.iter().enumerate() {
        if !b.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| name[j]);
        let next = name.get(i + 1).copied();
        // A hump: `aB`, or the last capital of a run followed by a lower-case letter (`APIKey`).
        let hump = b.is_ascii_uppercase()
            && prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
            });
        if hump && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        cur.push(b.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Values (lower-cased substrings) that are placeholders, not credentials.
const VALUE_DENY: &[&str] = &[
    "example",
    "changeme",
    "change_me",
    "change-me",
    "placeholder",
    "password",
    "passwd",
    "secret",
    "your_",
    "your-",
    "yourkey",
    "yourtoken",
    "redacted",
    "xxxx",
    "****",
    "....",
    "<",
    ">",
    "${",
    "{{",
    "%(",
    "dummy",
    "sample",
    "insert",
    "replace",
    "todo",
    "null",
    "none",
    "undefined",
    "test1234",
    "12345678",
    "abcdef",
    "qwerty",
    "foo",
    "localhost",
    "process.env",
    "os.environ",
    "getenv",
    "env(",
    "true",
    "false",
];

/// Well-known sample credentials from public documentation.
const KNOWN_SAMPLES: &[&str] = &[
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-not-a-real-token-this-will-not-work",
    // RFC 6749 (OAuth 2.0) and RFC 5849 (OAuth 1.0) examples.
    "2YotnFZFEjr1zCsicMWpAA",
    "tGzv3JOkF0XG5Qx2TlKWIA",
    "czZCaGRSa3F0MzpnWDFmQmF0M2JW",
    "ad180jjd733klru7",
    "0685bd9184jfhq22",
    "nnch734d00sl2jdk",
    "pfkkdhi9sl3r4s00",
    // PyJWT's README example.
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzb21lIjoicGF5bG9hZCJ9.4twFt5NiznN84AWoo1d7KO1T_yoc0Z6XOpOVswacPZg",
];

/// Whether a candidate secret is a documentation placeholder: contains `example`, is a
/// well-known sample, or has a run of 6 or more of the same character.
pub(crate) fn is_placeholder(secret: &[u8]) -> bool {
    if KNOWN_SAMPLES.iter().any(|s| s.as_bytes() == secret) {
        return true;
    }
    if contains_ci(secret, b"example") {
        return true;
    }
    let mut run = 1;
    for w in secret.windows(2) {
        if w[0] == w[1] {
            run += 1;
            if run >= 6 {
                return true;
            }
        } else {
            run = 1;
        }
    }
    false
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// Matches `name <sep> value` around a keyword hit at `kw_start..kw_end`, where `name`
/// contains the keyword and `<sep>` is `=`, `:`, `:=`, `=>` or `==` (quotes around either side
/// allowed). Returns the value's range and the rule class, or `None` when the value does not
/// look like a credential.
pub(crate) fn assignment(bytes: &[u8], kw_start: usize, kw_end: usize) -> Option<(Range<usize>, Class)> {
    // The name around the keyword.
    let mut name_start = kw_start;
    while name_start > 0 && kw_start - name_start < MAX_NAME && is_name_byte(bytes[name_start - 1]) {
        name_start -= 1;
    }
    let mut name_end = kw_end;
    while name_end < bytes.len() && name_end - kw_end < MAX_NAME && is_name_byte(bytes[name_end]) {
        name_end += 1;
    }
    // A `$NAME` or `${NAME}` reference is a use, not an assignment.
    if name_start > 0 && matches!(bytes[name_start - 1], b'$' | b'{') {
        return None;
    }
    // Separator.
    let mut i = name_end;
    if i < bytes.len() && matches!(bytes[i], b'"' | b'\'' | b'`') {
        i += 1;
    }
    if i < bytes.len() && bytes[i] == b']' {
        i += 1; // config["SECRET_KEY"] = ...
    }
    i = skip_blanks(bytes, i);
    let sep_start = i;
    match bytes.get(i) {
        Some(b'=') => {
            i += 1;
            if matches!(bytes.get(i), Some(b'>' | b'=')) {
                i += 1;
            }
        }
        Some(b':') => {
            i += 1;
            if bytes.get(i) == Some(&b'=') {
                i += 1;
            } else if bytes.get(i) == Some(&b':') {
                return None; // a path: `Token::new`
            } else if let Some(eq) = type_annotation_end(bytes, i) {
                i = eq; // `API_KEY: &str = "..."`, `api_key: str = "..."`: the value follows `=`
            }
        }
        _ => return None,
    }
    if i == sep_start {
        return None;
    }
    i = skip_blanks(bytes, i);
    let quote = match bytes.get(i) {
        Some(&q @ (b'"' | b'\'' | b'`')) => {
            i += 1;
            Some(q)
        }
        _ => None,
    };
    let value_start = i;
    // Inside quotes a value may hold any visible character but the quote and `\\` (Django's
    // generated keys have `(`, `&`, `)`); unquoted, it ends at the first character of syntax.
    let in_value = |b: u8| match quote {
        Some(q) => is_value_byte(b) || (b.is_ascii_graphic() && b != q && b != b'\\'),
        None => is_value_byte(b),
    };
    while i < bytes.len() && i - value_start <= MAX_VALUE && in_value(bytes[i]) {
        i += 1;
    }
    let value_end = i;
    let len = value_end - value_start;
    if !(MIN_VALUE..=MAX_VALUE).contains(&len) {
        return None;
    }
    // What follows the value must end it.
    match (quote, bytes.get(value_end)) {
        (Some(q), Some(&b)) if b == q => {}
        (Some(_), _) => return None,
        (None, None) => {}
        // An unquoted identifier followed by code punctuation is a reference in code
        // (`X => kSecKeyAlgorithmECDH,`, `trait IPrivateKey2: IPrivateKey {`), not a literal:
        // literals in code are quoted.
        (None, Some(b))
            if (b",;)".contains(b) || bytes.get(skip_blanks(bytes, value_end)).is_some_and(|c| b"{+".contains(c)))
                && bytes[value_start].is_ascii_alphabetic()
                && bytes[value_start..value_end].iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
        {
            return None;
        }
        (None, Some(b)) if b.is_ascii_whitespace() || b",;)}]&".contains(b) => {}
        (None, Some(_)) => return None,
    }
    // `NAME: Type = ...` is a declaration: the "value" is a type.
    if quote.is_none() && bytes[sep_start] == b':' {
        let after = skip_blanks(bytes, value_end);
        if bytes.get(after) == Some(&b'=') {
            return None;
        }
    }
    let name = &bytes[name_start..name_end];
    let class = classify(name)?;
    let value = &bytes[value_start..value_end];
    if is_bare_key_with_hex(name, value) {
        return None;
    }
    if class != Class::Password && len < MIN_KEY_VALUE {
        return None;
    }
    if !credential_like(value, class) {
        return None;
    }
    Some((value_start..value_end, class))
}

/// `snake_case_2`, `CONSTANT_CASE_V2`, `_private`: names, not secrets. Random tokens with `_`
/// mix cases and digits.
fn is_identifier(value: &[u8]) -> bool {
    if !value.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        return false;
    }
    let underscores = value.iter().filter(|&&b| b == b'_').count();
    let digits = value.iter().filter(|b| b.is_ascii_digit()).count();
    let upper = value.iter().any(u8::is_ascii_uppercase);
    let lower = value.iter().any(u8::is_ascii_lowercase);
    // `TLS13_CHACHA20_POLY1305_SHA256`: several upper-case segments, each starting with a letter.
    let constant = underscores >= 2
        && !lower
        && value.split(|b| *b == b'_').all(|seg| seg.first().is_some_and(u8::is_ascii_alphabetic));
    value[0] == b'_' || constant || (underscores >= 1 && !(upper && lower) && digits * 4 < value.len())
}

/// `module.Type`, `obj.attr`, `win32api.RegOpenKeyEx`: a path of identifiers.
fn is_qualified_name(value: &[u8]) -> bool {
    value.contains(&b'.')
        && value.split(|b| *b == b'.').all(|seg| {
            seg.first().is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
                && seg.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        })
}

/// Format strings: `VS%0.f0TOOLS`, `key_%s`, `{}`.
fn is_format_string(lower: &[u8]) -> bool {
    const MARKS: &[&[u8]] = &[b"%s", b"%d", b"%r", b"%(", b"%.", b"%0.", b"{}", b"{0}"];
    MARKS.iter().any(|m| lower.windows(m.len()).any(|w| w == *m))
}

/// `16384u32`, `0x8004004A_u32`, `1_000i64`, `0xFFul`: numbers in code.
fn is_number_literal(value: &[u8]) -> bool {
    let mut lower = value.to_ascii_lowercase();
    if lower.first() == Some(&b'-') {
        lower.remove(0);
    }
    let (digits, radix16): (&[u8], bool) = match lower.strip_prefix(b"0x") {
        Some(rest) => (rest, true),
        None => (&lower[..], false),
    };
    let mut end = digits.len();
    for suffix in [
        &b"usize"[..],
        b"isize",
        b"u128",
        b"i128",
        b"u64",
        b"i64",
        b"u32",
        b"i32",
        b"u16",
        b"i16",
        b"u8",
        b"i8",
        b"f32",
        b"f64",
        b"ull",
        b"ul",
        b"u",
        b"l",
    ] {
        if digits.ends_with(suffix) && digits.len() > suffix.len() {
            end = digits.len() - suffix.len();
            break;
        }
    }
    let body = &digits[..end];
    !body.is_empty()
        && body[0].is_ascii_digit() | radix16
        && body.iter().all(|b| *b == b'_' || if radix16 { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
}

/// After `NAME:`, a type followed by `=` (not `==`) on the same line: the position after `=`.
fn type_annotation_end(bytes: &[u8], from: usize) -> Option<usize> {
    let end = bytes.len().min(from + 48);
    let mut i = from;
    while i < end {
        match bytes[i] {
            b'=' => return (bytes.get(i + 1) != Some(&b'=') && i > from).then_some(i + 1),
            b if b.is_ascii_alphanumeric() || b" \t_&<>[]:'.,()".contains(&b) => i += 1,
            _ => return None,
        }
    }
    None
}

/// Mostly made of words (runs of 3+ lower-case letters): `AtomicU32Provider`,
/// `m2m-access-token-12345`, `other.colon2_token`. Random tokens have short lower-case runs.
fn is_wordy(value: &[u8]) -> bool {
    let mut in_words = 0;
    let mut run = 0;
    for &b in value.iter().chain(std::iter::once(&b' ')) {
        if b.is_ascii_lowercase() {
            run += 1;
        } else {
            if run >= 3 {
                in_words += run;
            }
            run = 0;
        }
    }
    in_words * 2 >= value.len()
}

fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// The class of a name: a password wherever `passw`, `pwd` or `passphrase` occurs in it;
/// otherwise a secret, token or key only when a word of the name *ends* with that keyword
/// (`client_secret`, `GITHUB_TOKEN_2`, `apikey`: yes; `keydefs.py`, `tokenizer`, `keyboard`: no)
/// and no word says it is something else (`token_type`, `secret_path`).
fn classify(name: &[u8]) -> Option<Class> {
    let lower = name.to_ascii_lowercase();
    let has = |s: &str| contains_ci(&lower, s.as_bytes());
    if has("passw") || has("pwd") || has("passphrase") {
        return Some(Class::Password);
    }
    if NAME_DENY.iter().any(|d| has(d)) {
        return None;
    }
    let words = name_words(name);
    if words.iter().any(|w| NAME_DENY_WORDS.contains(&std::str::from_utf8(w).unwrap_or(""))) {
        return None;
    }
    let ends = |k: &str| {
        words.iter().any(|w| {
            let digits = w.iter().rev().take_while(|b| b.is_ascii_digit()).count();
            w[..w.len() - digits].ends_with(k.as_bytes())
        })
    };
    if ends("secret") {
        Some(Class::Secret)
    } else if ends("token") {
        Some(Class::Token)
    } else if ends("key") {
        Some(Class::ApiKey)
    } else {
        None
    }
}

/// A name that is only the word `key` (`Key = ...`, `let key = "..."`): with a hex value it is
/// cryptographic material in test vectors and examples, or a digest; API keys carry a longer
/// name (`api_key`, `x-api-key`) or a provider rule of their own.
fn is_bare_key_with_hex(name: &[u8], value: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"key") && value.iter().all(u8::is_ascii_hexdigit)
}

fn credential_like(value: &[u8], class: Class) -> bool {
    let lower = value.to_ascii_lowercase();
    if VALUE_DENY.iter().any(|d| contains_ci(&lower, d.as_bytes())) {
        return false;
    }
    if matches!(value[0], b'$' | b'%' | b'/' | b'.' | b'~' | b'@' | b'#') || is_placeholder(value) {
        return false;
    }
    if is_identifier(value) || is_number_literal(value) || is_qualified_name(value) || is_format_string(&lower) {
        return false;
    }
    let separated = value.iter().any(|b| *b == b'-' || *b == b'_');
    if (class != Class::Password || separated) && is_wordy(value) {
        return false;
    }
    if class == Class::Password && lower.starts_with(b"pass") {
        return false;
    }
    let digits = value.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = value.iter().filter(|b| b.is_ascii_alphabetic()).count();
    if digits == 0 || letters == 0 {
        return false;
    }
    // Dotted identifiers and versions: `config.key2`, `v1.2.3-rc1`.
    if value.iter().filter(|&&b| b == b'.').count() >= 2 && !value.contains(&b'/') && digits * 2 < value.len() {
        return false;
    }
    let entropy = super::shannon_entropy(value);
    let needed = match (class, value.len()) {
        (Class::Password, _) => 2.5,
        (_, n) if n < 16 => 3.0,
        _ => 3.3,
    };
    entropy >= needed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(s: &str) -> Option<(&str, Class)> {
        let b = s.as_bytes();
        for kw in ["key", "token", "secret", "password", "pwd"] {
            if let Some(at) = s.to_ascii_lowercase().find(kw) {
                return assignment(b, at, at + kw.len()).map(|(r, c)| (&s[r], c));
            }
        }
        None
    }

    #[test]
    fn assignments() {
        assert_eq!(find("API_KEY=Zq8vR2mX9tLw4KpB7nYc"), Some(("Zq8vR2mX9tLw4KpB7nYc", Class::ApiKey)));
        assert_eq!(
            find(r#"  "client_secret": "9fJ2kQ8mZ3xV7bN1pL4w","#),
            Some(("9fJ2kQ8mZ3xV7bN1pL4w", Class::Secret))
        );
        assert_eq!(find("db_password: hU7#kq2Lm9"), Some(("hU7#kq2Lm9", Class::Password)));
        assert_eq!(find("token := \"aB3dE5fG7hJ9kL1m\""), Some(("aB3dE5fG7hJ9kL1m", Class::Token)));
        // Names the issue listed, and names a substring deny list used to drop (`account`
        // has `count`, `algolia` has `algo`, `security` has `uri`).
        for (line, class) in [
            ("STORAGE_ACCOUNT_KEY=Zq8vR2mX9tLw4KpB7nYc", Class::ApiKey),
            ("ALGOLIA_API_KEY=Zq8vR2mX9tLw4KpB7nYc", Class::ApiKey),
            ("AWS_SECURITY_TOKEN=Zq8vR2mX9tLw4KpB7nYc", Class::Token),
            ("GITHUB_TOKEN_2=Zq8vR2mX9tLw4KpB7nYc", Class::Token),
            ("DJANGO_SECRET_KEY='k3(x&z9)!q#m2^v@w8*p+y'", Class::Secret),
            ("apiKey: \"Zq8vR2mX9tLw4KpB7nYc\"", Class::ApiKey),
            ("MYSQL_ROOT_PASSWORD=hU7kq2Lm9x", Class::Password),
        ] {
            assert_eq!(find(line).map(|(_, c)| c), Some(class), "{line}");
        }
        for miss in [
            "let key = HashMap::new();",
            "password: String,",
            "api_key: Option<String>,",
            "token = get_token(cfg)",
            "API_KEY=${API_KEY}",
            "secret = os.environ[\"SECRET\"]",
            "key = \"press the red button 2 times\"",
            "password = \"changeme\"",
            "tokenizer = Tokenizer2Fast",
            "public_key = \"ed25519:9fJ2kQ8mZ3xV7bN1pL4w\"",
            "key = v1.22.3",
            "secret_path = /etc/secrets/db1",
            "pub const ERROR_BAD_PASSWORD: u32 = 2147483737u32;",
            "pub const E_PASSWORD: HRESULT = 0x8004004A_u32 as _;",
            "def sign(self, private_key: ed25519.Ed25519PrivateKey, f_priv: _FragList):",
            "toolskey = \"VS%0.f0COMNTOOLS\" % version",
            "#password_encryption = scram-sha-256",
            "* keydefs.py: py-cvs-2001_07_13 (Rev 1.3) merge",
            "Key = 2d773be37adb1e4d683bf0075e79c4ee037918535a7f99ccb7040fb5f5f43aea",
            "ECDHKeyExchangeCofactorX963SHA1 => kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1,",
            "let traffic_secret_expander = TLS13_CHACHA20_POLY1305_SHA256_INTERNAL",
            r#""password": "foo(b%5Dc","#,
            "pub trait IX509PrivateKey2_Impl: IX509PrivateKey_Impl {",
        ] {
            assert_eq!(find(miss), None, "{miss}");
        }
    }
}
