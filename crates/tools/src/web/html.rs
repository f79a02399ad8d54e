//! HTML to Markdown, safe on hostile pages.
//!
//! No DOM and no recursion: one linear tokenizer and a stack of open elements bounded by
//! [`MAX_DEPTH`]. A byte-level pre-pass measures nesting depth and element count first; past
//! the limits the page is converted to flat text instead. [`convert_bounded`] runs the
//! conversion on its own thread with a deadline, and falls back to flat text when it passes.
//!
//! Hidden text is dropped before it reaches the output: `display:none`, `visibility:hidden`,
//! `opacity:0`, `font-size:0`, off-screen positioning, `hidden`, `aria-hidden="true"`,
//! screen-reader-only classes, `<template>`, `<script>`, `<style>`, `<noscript>`, comments and
//! invisible Unicode (zero-width, bidi controls, tag characters).
//!
//! Readability, cheaply: navigation, headers, footers, asides, forms and buttons are dropped,
//! and so are elements whose class or id names chrome (Readability.js's word lists: `menu`,
//! `sidebar`, `footer`, `banner`, ...; a pass that leaves under 500 bytes is redone without
//! that rule); when the page has a `<main>`, `<article>` or `role="main"`, only that is kept.

use std::time::{Duration, Instant};

use url::Url;

/// Deepest nesting converted structurally.
pub const MAX_DEPTH: usize = 256;
/// Most elements converted structurally.
pub const MAX_ELEMENTS: usize = 100_000;

/// What the pre-pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// Deepest nesting of non-void elements (approximate: unclosed `<p>`/`<li>` count).
    pub depth: usize,
    /// Start tags.
    pub elements: usize,
    /// Whether `<main`, `<article` or `role="main"` occurs.
    pub has_main: bool,
}

/// A converted page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The Markdown.
    pub markdown: String,
    /// The `<title>`, if any.
    pub title: Option<String>,
    /// Converted as flat text (past the limits, or past the deadline).
    pub flat: bool,
}

const VOID: [&str; 14] =
    ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"];

/// The linear byte pre-pass: nesting depth and element count, no allocation per tag.
pub fn measure(html: &[u8]) -> Shape {
    let mut shape = Shape::default();
    let mut depth: usize = 0;
    let mut i = 0;
    let n = html.len();
    while let Some(off) = memchr::memchr(b'<', &html[i..]) {
        i += off + 1;
        if i >= n {
            break;
        }
        let closing = html[i] == b'/';
        let start = if closing { i + 1 } else { i };
        let mut end = start;
        while end < n && html[end].is_ascii_alphanumeric() {
            end += 1;
        }
        if end == start {
            continue;
        }
        let name = &html[start..end];
        if closing {
            depth = depth.saturating_sub(1);
            continue;
        }
        shape.elements += 1;
        if name.eq_ignore_ascii_case(b"main") || name.eq_ignore_ascii_case(b"article") {
            shape.has_main = true;
        }
        if !VOID.iter().any(|v| name.eq_ignore_ascii_case(v.as_bytes())) {
            depth += 1;
            shape.depth = shape.depth.max(depth);
        }
    }
    if !shape.has_main && memmem(html, b"role=\"main\"") {
        shape.has_main = true;
    }
    shape
}

fn memmem(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Converts on a dedicated thread with a big stack; past `deadline`, or if the thread fails,
/// the flat-text conversion is used.
pub fn convert_bounded(html: String, base: Option<Url>, deadline: Duration) -> Converted {
    let (tx, rx) = std::sync::mpsc::channel();
    let shared = std::sync::Arc::new(html);
    let for_thread = shared.clone();
    let base_t = base.clone();
    let spawned =
        std::thread::Builder::new().name("html-to-markdown".into()).stack_size(16 * 1024 * 1024).spawn(move || {
            let _ = tx.send(convert(&for_thread, base_t.as_ref(), Some(Instant::now() + deadline)));
        });
    if spawned.is_ok()
        && let Ok(Some(done)) = rx.recv_timeout(deadline + Duration::from_millis(500))
    {
        return done;
    }
    flat(&shared)
}

/// Converts `html` to Markdown, links made absolute against `base`. `None` when `deadline`
/// passed (the caller falls back to [`flat`]).
pub fn convert(html: &str, base: Option<&Url>, deadline: Option<Instant>) -> Option<Converted> {
    let shape = measure(html.as_bytes());
    if shape.depth > MAX_DEPTH || shape.elements > MAX_ELEMENTS {
        return Some(flat(html));
    }
    let strict = pass(html, base, deadline, shape.has_main, true)?;
    // As Readability does: when dropping by class and id leaves almost nothing, the page put
    // its content in such a container; keep the longer of the two passes.
    if strict.markdown.len() >= RETRY_BELOW {
        return Some(strict);
    }
    let loose = pass(html, base, deadline, shape.has_main, false)?;
    Some(if loose.markdown.len() > strict.markdown.len() { loose } else { strict })
}

/// Output shorter than this (bytes of Markdown) is converted again without the class and id
/// rule (Readability's 500 characters).
const RETRY_BELOW: usize = 500;

fn pass(html: &str, base: Option<&Url>, deadline: Option<Instant>, main_only: bool, strict: bool) -> Option<Converted> {
    let mut w = Writer::new(base, main_only, strict);
    let mut tok = Tokenizer { s: html, i: 0 };
    let mut count = 0usize;
    while let Some(t) = tok.next() {
        count += 1;
        if count.is_multiple_of(4096) && deadline.is_some_and(|d| Instant::now() > d) {
            return None;
        }
        w.token(t);
    }
    Some(w.finish())
}

/// Flat text: tags removed, hidden containers (`script`, `style`, `template`, comments)
/// dropped, whitespace collapsed. Linear, no structure.
pub fn flat(html: &str) -> Converted {
    let mut tok = Tokenizer { s: html, i: 0 };
    let mut out = String::new();
    let mut title = None;
    let mut in_title = false;
    while let Some(t) = tok.next() {
        match t {
            Token::Text(text) => {
                let text = decode_entities(text);
                if in_title {
                    title = Some(collapse(&text).trim().to_owned());
                }
                push_collapsed(&mut out, &text);
            }
            Token::Start { name, .. } if name.eq_ignore_ascii_case("title") => in_title = true,
            Token::End { name } if name.eq_ignore_ascii_case("title") => {
                in_title = false;
                out.push('\n');
            }
            Token::Start { name, .. } | Token::End { name }
                if is_block(&name.to_ascii_lowercase()) && !out.ends_with('\n') =>
            {
                out.push('\n');
            }
            _ => {}
        }
    }
    Converted { markdown: tidy(&strip_invisible(&out)), title, flat: true }
}

enum Token<'a> {
    Text(&'a str),
    Start {
        name: &'a str,
        attrs: &'a str,
        self_closing: bool,
    },
    End {
        name: &'a str,
    },
    /// The raw content of `script`, `style`, `textarea`, `title` ... (already consumed).
    Raw {
        name: &'a str,
        attrs: &'a str,
        content: &'a str,
    },
}

struct Tokenizer<'a> {
    s: &'a str,
    i: usize,
}

const RAW_TEXT: [&str; 8] = ["script", "style", "template", "textarea", "title", "xmp", "noscript", "iframe"];

impl<'a> Tokenizer<'a> {
    fn next(&mut self) -> Option<Token<'a>> {
        let s = self.s;
        let b = s.as_bytes();
        loop {
            if self.i >= b.len() {
                return None;
            }
            if b[self.i] != b'<' {
                let end = memchr::memchr(b'<', &b[self.i..]).map_or(b.len(), |o| self.i + o);
                let text = &s[self.i..end];
                self.i = end;
                return Some(Token::Text(text));
            }
            let rest = &b[self.i..];
            if rest.starts_with(b"<!--") {
                self.i = memchr::memmem::find(&rest[4..], b"-->").map_or(b.len(), |o| self.i + 4 + o + 3);
                continue;
            }
            if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
                self.i = memchr::memchr(b'>', rest).map_or(b.len(), |o| self.i + o + 1);
                continue;
            }
            let closing = rest.get(1) == Some(&b'/');
            let name_start = self.i + if closing { 2 } else { 1 };
            let mut name_end = name_start;
            while name_end < b.len() && (b[name_end].is_ascii_alphanumeric() || b[name_end] == b'-') {
                name_end += 1;
            }
            if name_end == name_start {
                // A lone `<`: text.
                let end = memchr::memchr(b'<', &b[self.i + 1..]).map_or(b.len(), |o| self.i + 1 + o);
                let text = &s[self.i..end];
                self.i = end;
                return Some(Token::Text(text));
            }
            let tag_end = find_tag_end(b, name_end);
            let name = &s[name_start..name_end];
            let inner_end = if tag_end > name_end && b[tag_end - 1] == b'>' { tag_end - 1 } else { tag_end };
            let attrs = &s[name_end..inner_end.max(name_end)];
            self.i = tag_end;
            if closing {
                return Some(Token::End { name });
            }
            let self_closing = attrs.trim_end().ends_with('/');
            if RAW_TEXT.iter().any(|r| r.eq_ignore_ascii_case(name)) {
                let close = find_close(b, self.i, name.as_bytes());
                let content = &s[self.i..close.0];
                self.i = close.1;
                return Some(Token::Raw { name, attrs, content });
            }
            return Some(Token::Start { name, attrs, self_closing });
        }
    }
}

/// The byte after the `>` that ends a tag, skipping quoted attribute values.
fn find_tag_end(b: &[u8], mut i: usize) -> usize {
    let mut quote = 0u8;
    while i < b.len() {
        let c = b[i];
        if quote != 0 {
            if c == quote {
                quote = 0;
            }
        } else if c == b'"' || c == b'\'' {
            quote = c;
        } else if c == b'>' {
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

/// (start of `</name`, byte after its `>`), case-insensitively; the end of input if unclosed.
fn find_close(b: &[u8], from: usize, name: &[u8]) -> (usize, usize) {
    let mut i = from;
    while let Some(o) = memchr::memmem::find(&b[i..], b"</") {
        let at = i + o;
        let after = at + 2;
        if b.len() >= after + name.len() && b[after..after + name.len()].eq_ignore_ascii_case(name) {
            let end = memchr::memchr(b'>', &b[after..]).map_or(b.len(), |e| after + e + 1);
            return (at, end);
        }
        i = after;
    }
    (b.len(), b.len())
}

/// One attribute's value (entities decoded), by name, case-insensitively.
fn attr(attrs: &str, want: &str) -> Option<String> {
    let b = attrs.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let name = &attrs[start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = None;
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = memchr::memchr(q, &b[vs..]).map_or(b.len(), |o| vs + o);
                value = Some(&attrs[vs..ve]);
                i = (ve + 1).min(b.len());
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = Some(&attrs[vs..i]);
            }
        }
        if !name.is_empty() && name.eq_ignore_ascii_case(want) {
            return Some(decode_entities(value.unwrap_or("")));
        }
        if i == start {
            i += 1;
        }
    }
    None
}

/// Whether an element's attributes hide it.
fn hides(name: &str, attrs: &str) -> bool {
    if attrs.is_empty() {
        return false;
    }
    if attr(attrs, "hidden").is_some()
        || attr(attrs, "aria-hidden").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return true;
    }
    if name == "input" && attr(attrs, "type").is_some_and(|t| t.eq_ignore_ascii_case("hidden")) {
        return true;
    }
    if let Some(class) = attr(attrs, "class") {
        let class = class.to_ascii_lowercase();
        const HIDDEN_CLASSES: [&str; 10] = [
            "sr-only",
            "visually-hidden",
            "visuallyhidden",
            "screen-reader-text",
            "screen-reader-only",
            "hidden",
            "d-none",
            "is-hidden",
            "offscreen",
            "invisible",
        ];
        if class.split_ascii_whitespace().any(|c| HIDDEN_CLASSES.contains(&c)) {
            return true;
        }
    }
    if let Some(style) = attr(attrs, "style") {
        let style: String = style.to_ascii_lowercase().chars().filter(|c| !c.is_whitespace()).collect();
        for decl in style.split(';') {
            let Some((prop, value)) = decl.split_once(':') else { continue };
            let value = value.trim_end_matches("!important");
            let zero = |v: &str| {
                v.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%').parse::<f64>().is_ok_and(|n| n == 0.0)
            };
            let far_negative = |v: &str| {
                v.starts_with('-')
                    && v.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                        .trim_start_matches('-')
                        .parse::<f64>()
                        .is_ok_and(|n| n >= 500.0)
            };
            let hidden = match prop {
                "display" => value == "none",
                "visibility" => value == "hidden" || value == "collapse",
                "opacity" => zero(value),
                "font-size" | "max-height" | "height" | "width" | "max-width" if prop.starts_with("font") => {
                    zero(value)
                }
                "height" | "max-height" | "width" | "max-width" => zero(value) && style.contains("overflow:hidden"),
                "left" | "top" | "right" | "text-indent" | "margin-left" | "margin-top" => far_negative(value),
                "clip" => value.starts_with("rect(0") || value.starts_with("rect(1px,1px,1px,1px"),
                "clip-path" => value.starts_with("inset(50%") || value.starts_with("inset(100%"),
                "transform" => value.contains("scale(0)"),
                "color" => value == "transparent",
                _ => false,
            };
            if hidden {
                return true;
            }
        }
    }
    false
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "li"
            | "table"
            | "tr"
            | "pre"
            | "blockquote"
            | "br"
            | "hr"
            | "dl"
            | "dt"
            | "dd"
            | "figure"
            | "figcaption"
            | "details"
            | "summary"
            | "address"
            | "body"
            | "html"
            | "head"
            | "title"
            | "header"
            | "footer"
            | "nav"
            | "aside"
    )
}

/// Class and id words of page chrome, and words that overrule them: Readability.js's
/// `unlikelyCandidates` and `okMaybeItsACandidate` lists.
const UNLIKELY: &[&str] = &[
    "-ad-",
    "ai2html",
    "banner",
    "breadcrumbs",
    "combx",
    "comment",
    "community",
    "cover-wrap",
    "disqus",
    "extra",
    "footer",
    "gdpr",
    "header",
    "legends",
    "menu",
    "related",
    "remark",
    "replies",
    "rss",
    "shoutbox",
    "sidebar",
    "skyscraper",
    "social",
    "sponsor",
    "supplemental",
    "ad-break",
    "agegate",
    "pagination",
    "pager",
    "popup",
    "yom-remote",
];
const MAYBE: &[&str] = &["and", "article", "body", "column", "content", "main", "mathjax", "shadow"];

/// Chrome by its class or id (`<div id="sidebar">`, `<td class="menu">`) on pages built without
/// `nav`/`aside`/`footer`: Readability's rule. Never links, code, or the containers of content.
fn unlikely(name: &str, attrs: &str) -> bool {
    if matches!(name, "a" | "html" | "body" | "main" | "article" | "pre" | "code" | "table" | "tbody" | "tr") {
        return false;
    }
    let mut words = attr(attrs, "class").unwrap_or_default();
    words.push(' ');
    words.push_str(&attr(attrs, "id").unwrap_or_default());
    let words = words.to_ascii_lowercase();
    UNLIKELY.iter().any(|w| words.contains(w)) && !MAYBE.iter().any(|w| words.contains(w))
}

/// Elements dropped with their content: chrome, not content.
fn is_chrome(name: &str, attrs: &str) -> bool {
    matches!(
        name,
        "nav"
            | "aside"
            | "footer"
            | "form"
            | "button"
            | "select"
            | "svg"
            | "canvas"
            | "dialog"
            | "menu"
            | "object"
            | "embed"
            | "audio"
            | "video"
            | "map"
    ) || (name == "header" && !attrs.contains("article"))
        || attr(attrs, "role").is_some_and(|r| {
            matches!(r.as_str(), "navigation" | "banner" | "contentinfo" | "complementary" | "search" | "dialog")
        })
}

#[derive(Debug)]
enum Kind {
    Plain,
    Hidden,
    Link { start: usize, href: Option<String> },
    List { ordered: bool, next: u32 },
    Item,
    Pre,
    Quote { start: usize },
    Main,
    Emph { mark: &'static str },
    Code,
    Row { cells: usize, header: bool },
    Table { rows: usize },
}

#[derive(Debug)]
struct Open {
    name: String,
    kind: Kind,
}

struct Writer<'u> {
    out: String,
    stack: Vec<Open>,
    base: Option<&'u Url>,
    /// Hidden or chrome elements open (their content is dropped).
    hidden: usize,
    /// Whether output is restricted to `<main>`/`<article>` and how many are open.
    main_only: bool,
    /// Whether chrome is also recognized by class and id ([`unlikely`]).
    strict: bool,
    mains: usize,
    pre: usize,
    title: Option<String>,
}

impl<'u> Writer<'u> {
    fn new(base: Option<&'u Url>, main_only: bool, strict: bool) -> Self {
        Writer {
            out: String::new(),
            stack: Vec::new(),
            base,
            hidden: 0,
            main_only,
            strict,
            mains: 0,
            pre: 0,
            title: None,
        }
    }

    fn visible(&self) -> bool {
        self.hidden == 0 && (!self.main_only || self.mains > 0)
    }

    fn block(&mut self) {
        if self.out.is_empty() {
            return;
        }
        while !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn line(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn list_depth(&self) -> usize {
        self.stack.iter().filter(|o| matches!(o.kind, Kind::List { .. })).count()
    }

    fn absolute(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') {
            return None;
        }
        let url = match self.base {
            Some(b) => b.join(href).ok()?,
            None => Url::parse(href).ok()?,
        };
        matches!(url.scheme(), "http" | "https" | "mailto").then(|| url.to_string())
    }

    fn token(&mut self, t: Token<'_>) {
        match t {
            Token::Text(text) => {
                if !self.visible() {
                    return;
                }
                let text = strip_invisible(&decode_entities(text));
                if self.pre > 0 {
                    self.out.push_str(&text);
                } else {
                    push_collapsed(&mut self.out, &text);
                }
            }
            Token::Raw { name, attrs, content } => {
                let name = name.to_ascii_lowercase();
                if name == "title" && self.title.is_none() {
                    let t = collapse(&strip_invisible(&decode_entities(content))).trim().to_owned();
                    if !t.is_empty() {
                        self.title = Some(t);
                    }
                }
                // textarea/xmp content is text; everything else raw is dropped.
                if matches!(name.as_str(), "textarea" | "xmp") && self.visible() && !hides(&name, attrs) {
                    push_collapsed(&mut self.out, &strip_invisible(&decode_entities(content)));
                }
            }
            Token::Start { name, attrs, self_closing } => self.start(&name.to_ascii_lowercase(), attrs, self_closing),
            Token::End { name } => self.end(&name.to_ascii_lowercase()),
        }
    }

    fn start(&mut self, name: &str, attrs: &str, self_closing: bool) {
        let void = VOID.contains(&name);
        if self.visible() {
            match name {
                "br" => self.out.push_str(if self.pre > 0 { "\n" } else { "  \n" }),
                "hr" => {
                    self.block();
                    self.out.push_str("---\n\n");
                }
                "img" if !hides(name, attrs) => {
                    let alt = attr(attrs, "alt")
                        .map(|a| collapse(&strip_invisible(&a)).trim().to_owned())
                        .unwrap_or_default();
                    if let (false, Some(src)) = (alt.is_empty(), attr(attrs, "src").and_then(|s| self.absolute(&s))) {
                        self.out.push_str(&format!("![{alt}]({src})"));
                    }
                }
                _ => {}
            }
        }
        if void || self_closing {
            return;
        }
        // Implied end tags: a new <p> or <li> closes an open one.
        if matches!(name, "p" | "li" | "tr" | "td" | "th" | "dt" | "dd")
            && let Some(top) = self.stack.last()
            && (top.name == name || (name == "td" || name == "th") && (top.name == "td" || top.name == "th"))
        {
            let top = top.name.clone();
            self.end(&top);
        }
        if self.stack.len() >= MAX_DEPTH {
            return;
        }
        let chrome = is_chrome(name, attrs) || (self.strict && unlikely(name, attrs));
        let kind = if hides(name, attrs) || chrome || matches!(name, "head") {
            self.hidden += 1;
            Kind::Hidden
        } else if matches!(name, "main" | "article") || attr(attrs, "role").is_some_and(|r| r == "main") {
            self.mains += 1;
            self.block();
            Kind::Main
        } else {
            let visible = self.visible();
            match name {
                "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                    if visible {
                        self.block();
                        let level = usize::from(name.as_bytes()[1] - b'0');
                        self.out.push_str(&"#".repeat(level));
                        self.out.push(' ');
                    }
                    Kind::Plain
                }
                "p" | "div" | "section" | "figure" | "figcaption" | "dl" | "details" | "summary" | "address" => {
                    if visible {
                        self.block();
                    }
                    Kind::Plain
                }
                "a" => Kind::Link { start: self.out.len(), href: attr(attrs, "href").and_then(|h| self.absolute(&h)) },
                "ul" | "ol" => {
                    if visible {
                        if self.list_depth() == 0 {
                            self.block();
                        } else {
                            self.line();
                        }
                    }
                    let next = attr(attrs, "start").and_then(|s| s.trim().parse().ok()).unwrap_or(1);
                    Kind::List { ordered: name == "ol", next }
                }
                "li" => {
                    if visible {
                        self.line();
                        let depth = self.list_depth().max(1);
                        let mut marker = "- ".to_owned();
                        if let Some(Open { kind: Kind::List { ordered: true, next }, .. }) =
                            self.stack.iter_mut().rev().find(|o| matches!(o.kind, Kind::List { .. }))
                        {
                            marker = format!("{next}. ");
                            *next += 1;
                        }
                        self.out.push_str(&"  ".repeat(depth - 1));
                        self.out.push_str(&marker);
                    }
                    Kind::Item
                }
                "dt" | "dd" => {
                    if visible {
                        self.line();
                        if name == "dd" {
                            self.out.push_str(": ");
                        }
                    }
                    Kind::Plain
                }
                "pre" => {
                    if visible {
                        self.block();
                        let lang = attr(attrs, "class").and_then(|c| language(&c)).unwrap_or_default();
                        self.out.push_str(&format!("```{lang}\n"));
                    }
                    self.pre += 1;
                    Kind::Pre
                }
                "code" if self.pre > 0 => {
                    // `<pre><code class="language-x">`: the language goes on the fence.
                    if visible
                        && self.out.ends_with("```\n")
                        && let Some(lang) = attr(attrs, "class").and_then(|c| language(&c))
                    {
                        self.out.pop();
                        self.out.push_str(&lang);
                        self.out.push('\n');
                    }
                    Kind::Plain
                }
                "code" | "kbd" | "samp" if self.pre == 0 => {
                    if visible {
                        self.out.push('`');
                    }
                    Kind::Code
                }
                "strong" | "b" => {
                    if visible {
                        self.out.push_str("**");
                    }
                    Kind::Emph { mark: "**" }
                }
                "em" | "i" => {
                    if visible {
                        self.out.push('_');
                    }
                    Kind::Emph { mark: "_" }
                }
                "blockquote" => {
                    if visible {
                        self.block();
                    }
                    Kind::Quote { start: self.out.len() }
                }
                "table" => {
                    if visible {
                        self.block();
                    }
                    Kind::Table { rows: 0 }
                }
                "tr" => {
                    if visible {
                        self.line();
                        self.out.push('|');
                    }
                    Kind::Row { cells: 0, header: false }
                }
                "th" | "td" => {
                    if let Some(Open { kind: Kind::Row { cells, header }, .. }) =
                        self.stack.iter_mut().rev().find(|o| matches!(o.kind, Kind::Row { .. }))
                    {
                        *cells += 1;
                        *header |= name == "th";
                    }
                    if visible {
                        self.out.push(' ');
                    }
                    Kind::Plain
                }
                _ => Kind::Plain,
            }
        };
        self.stack.push(Open { name: name.to_owned(), kind });
    }

    fn end(&mut self, name: &str) {
        // Close up to the matching element; a stray end tag is ignored.
        let Some(pos) = self.stack.iter().rposition(|o| o.name == name) else { return };
        while self.stack.len() > pos {
            let Some(open) = self.stack.pop() else { break };
            self.close(open);
        }
    }

    fn close(&mut self, open: Open) {
        match open.kind {
            Kind::Hidden => {
                self.hidden = self.hidden.saturating_sub(1);
                return;
            }
            Kind::Main => {
                self.mains = self.mains.saturating_sub(1);
                self.block();
                return;
            }
            Kind::Pre => {
                self.pre = self.pre.saturating_sub(1);
                if self.visible() {
                    self.line();
                    self.out.push_str("```\n\n");
                }
                return;
            }
            _ => {}
        }
        if !self.visible() {
            return;
        }
        match open.kind {
            Kind::Link { start, href } => {
                let start = start.min(self.out.len());
                let text = self.out[start..].trim().to_owned();
                if let Some(href) = href
                    && !text.is_empty()
                {
                    self.out.truncate(start);
                    self.out.push_str(&format!("[{text}]({href})"));
                }
            }
            Kind::Code => self.out.push('`'),
            Kind::Emph { mark } => {
                // `**` right after `**` is an empty emphasis: remove it.
                if self.out.ends_with(mark) {
                    self.out.truncate(self.out.len() - mark.len());
                } else {
                    self.out.push_str(mark);
                }
            }
            Kind::Quote { start } => {
                let start = start.min(self.out.len());
                let body = self.out.split_off(start);
                for l in body.trim().lines() {
                    self.out.push_str("> ");
                    self.out.push_str(l);
                    self.out.push('\n');
                }
                self.out.push('\n');
            }
            Kind::Row { cells, header } => {
                self.out.push('\n');
                let table_rows = self.stack.iter_mut().rev().find_map(|o| match &mut o.kind {
                    Kind::Table { rows } => Some(rows),
                    _ => None,
                });
                let first = match table_rows {
                    Some(rows) => {
                        *rows += 1;
                        *rows == 1
                    }
                    None => true,
                };
                if first && (header || cells > 0) {
                    self.out.push('|');
                    self.out.push_str(&" --- |".repeat(cells.max(1)));
                    self.out.push('\n');
                }
            }
            Kind::Table { .. } | Kind::List { .. } => self.block(),
            Kind::Item => self.line(),
            Kind::Plain => match open.name.as_str() {
                "td" | "th" => self.out.push_str(" |"),
                "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "p" | "div" | "section" | "figure" | "dl" | "details"
                | "address" => self.block(),
                "figcaption" | "summary" | "dt" | "dd" => self.line(),
                _ => {}
            },
            _ => {}
        }
    }

    fn finish(mut self) -> Converted {
        while let Some(open) = self.stack.pop() {
            self.close(open);
        }
        Converted { markdown: tidy(&self.out), title: self.title, flat: false }
    }
}

fn language(class: &str) -> Option<String> {
    class.split_ascii_whitespace().find_map(|c| {
        let l = c.strip_prefix("language-").or_else(|| c.strip_prefix("lang-"))?;
        l.chars().all(|ch| ch.is_ascii_alphanumeric() || "+-#_".contains(ch)).then(|| l.to_owned())
    })
}

/// Appends `text` with whitespace runs collapsed to one space (none at a line start).
fn push_collapsed(out: &mut String, text: &str) {
    let mut space = text.starts_with(char::is_whitespace);
    for word in text.split_whitespace() {
        if space && !out.is_empty() && !out.ends_with([' ', '\n']) {
            out.push(' ');
        }
        out.push_str(word);
        space = true;
    }
    if text.ends_with(char::is_whitespace) && !out.is_empty() && !out.ends_with([' ', '\n']) {
        out.push(' ');
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// No trailing spaces on lines, at most one blank line in a row, no leading blank lines.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    let mut fence = false;
    for line in s.lines() {
        let keep_break = line.ends_with("  ") && !line.trim().is_empty();
        let l = if fence { line.trim_end_matches(['\r']) } else { line.trim_end() };
        if l.trim_start().starts_with("```") {
            fence = !fence;
        }
        if l.trim().is_empty() && !fence {
            blank += 1;
            continue;
        }
        if !out.is_empty() && blank > 0 {
            out.push('\n');
        }
        blank = 0;
        out.push_str(if fence { line } else { l });
        if keep_break && !fence {
            out.push_str("  ");
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// Removes characters a reader cannot see: zero-width, bidi controls, tag characters, soft
/// hyphens, variation selectors.
pub fn strip_invisible(s: &str) -> String {
    s.chars()
        .filter(|&c| {
            !matches!(c,
                '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180e}'
                | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
                | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}' | '\u{e0000}'..='\u{e007f}')
        })
        .collect()
}

/// Decodes character references: numeric ones and the common named ones.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.bytes().take(32).position(|b| b == b';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = if let Some(num) = name.strip_prefix('#') {
                let n = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                    None => num.parse().ok()?,
                };
                char::from_u32(n).filter(|c| *c != '\0').unwrap_or('\u{fffd}')
            } else {
                named(name)?
            };
            Some((c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn named(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "rsquo" => '\u{2019}',
        "lsquo" => '\u{2018}',
        "ldquo" => '\u{201c}',
        "rdquo" => '\u{201d}',
        "laquo" => '«',
        "raquo" => '»',
        "euro" => '€',
        "pound" => '£',
        "middot" => '·',
        "bull" => '•',
        "times" => '×',
        "deg" => '°',
        "rarr" => '→',
        "larr" => '←',
        "shy" => '\u{ad}',
        "zwj" => '\u{200d}',
        "zwnj" => '\u{200c}',
        _ => return None,
    })
}
