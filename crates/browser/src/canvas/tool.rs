//! The `canvas` tool: `present`, `update`, `clear`, `snapshot`.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, Content, Tool, ToolError, ToolOutput, ToolSpec, async_trait,
};

use super::{Canvas, Change, Changed, Format, MAX_CONTENT, to_safe_html};

const NAME: &str = "canvas";
/// Longest title (characters).
const MAX_TITLE: usize = 200;
/// Longest section name (characters).
const MAX_SECTION_NAME: usize = 100;

/// `canvas {action, content?, format?, title?, section?, width?, height?}`.
#[derive(Debug)]
pub(super) struct CanvasTool {
    spec: ToolSpec,
    canvas: Arc<Canvas>,
}

impl CanvasTool {
    pub(super) fn new(canvas: Arc<Canvas>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Show the user a live page you control. `present` replaces the page with `content` (HTML, Markdown or \
             SVG; `format` is detected when omitted), `update` adds a section, or replaces the section named by \
             `section`, `clear` empties it, `snapshot` returns a screenshot of it. The user watches the page in \
             any browser and sees each change as it happens; the result says where. Content is sanitized: no \
             scripts, event handlers, forms, remote images or styles that load URLs (images inline as `data:` \
             URLs only).",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["present", "update", "clear", "snapshot"]},
                    "content": {
                        "type": "string",
                        "maxLength": MAX_CONTENT,
                        "description": "`present`, `update`: the HTML fragment, Markdown or SVG to show"
                    },
                    "format": {"type": "string", "enum": ["html", "markdown", "svg"]},
                    "title": {"type": "string", "maxLength": MAX_TITLE, "description": "The page's title"},
                    "section": {
                        "type": "string",
                        "maxLength": MAX_SECTION_NAME,
                        "description": "`update`: the name of the section to replace (added when new); \
                                        `present`: a name for the one section"
                    },
                    "width": {"type": "integer", "minimum": 200, "maximum": 2000, "description": "`snapshot`: viewport width (default 1024)"},
                    "height": {"type": "integer", "minimum": 200, "maximum": 4000, "description": "`snapshot`: viewport height (default 768)"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
        .group("browser")
        .annotations(Annotations::LOCAL_WRITE)
        // The text is the tool's own (counts, the page's address); the content itself is never
        // returned.
        .trusted_output();
        CanvasTool { spec, canvas }
    }

    fn change(&self, action: &str, params: &Value) -> Result<(Change, Option<(Format, usize)>), ToolError> {
        let title = text_param(params, "title", MAX_TITLE)?;
        let section = text_param(params, "section", MAX_SECTION_NAME)?;
        if action == "clear" {
            if params.get("content").is_some() {
                return Err(ToolError::invalid(NAME, "/content", "`clear` takes no `content`: it empties the canvas"));
            }
            return Ok((Change::Clear, None));
        }
        let content = params.get("content").and_then(Value::as_str).ok_or_else(|| {
            ToolError::invalid(
                NAME,
                "/content",
                format!("`{action}` needs `content`: the HTML, Markdown or SVG to show"),
            )
        })?;
        if content.len() > MAX_CONTENT {
            return Err(ToolError::invalid(
                NAME,
                "/content",
                format!(
                    "`content` is {} bytes, more than the {MAX_CONTENT} one call may give; split it into sections \
                     (`update` with `section`)",
                    content.len()
                ),
            ));
        }
        let format = match params.get("format").and_then(Value::as_str) {
            Some(name) => Format::parse(name).ok_or_else(|| {
                ToolError::invalid(NAME, "/format", format!("unknown format `{name}`: use html, markdown or svg"))
            })?,
            None => Format::detect(content),
        };
        let html = to_safe_html(content, format, self.canvas.config().scripts);
        let removed = content.len().saturating_sub(html.len());
        let change = match action {
            "present" => Change::Present { title, section, html },
            _ => Change::Update { title, section, html },
        };
        Ok((change, Some((format, removed))))
    }

    async fn snapshot(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let owner = owner(ctx);
        let Some(shooter) = self.canvas.snapshotter() else {
            return Err(ToolError::failed(
                "canvas snapshots need the browser (Chromium), which this toolgate has not started: check that \
                 `chromium` is installed (`cargo xtask deps`) and the `browser` tools are enabled",
            ));
        };
        let Some(html) = self.canvas.document(&ctx.workspace, &owner) else {
            return Err(ToolError::NotFound {
                what: "a canvas for this session".to_owned(),
                hint: Some("`present` something first".to_owned()),
            });
        };
        let width = params.get("width").and_then(Value::as_u64).unwrap_or(1024) as u32;
        let height = params.get("height").and_then(Value::as_u64).unwrap_or(768) as u32;
        let png = tokio::select! {
            png = shooter.snapshot(html, width, height) => png.map_err(|e| ToolError::failed(format!("canvas snapshot failed: {e}")))?,
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        Ok(ToolOutput {
            content: vec![
                Content::Text {
                    text: format!("Snapshot of the canvas ({width}x{height}, {} bytes of PNG).", png.len()),
                },
                Content::Image { data, mime_type: "image/png".to_owned() },
            ],
            structured: None,
            meta: Some(json!({"width": width, "height": height, "bytes": png.len()})),
        })
    }
}

#[async_trait]
impl Tool for CanvasTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        CallSafety {
            read_only: params.get("action").and_then(Value::as_str) == Some("snapshot"),
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let action = params.get("action").and_then(Value::as_str).unwrap_or_default();
        match action {
            "present" | "update" | "clear" => {}
            "snapshot" => return self.snapshot(ctx, &params).await,
            other => {
                return Err(ToolError::invalid(
                    NAME,
                    "/action",
                    format!("unknown action `{other}`: use present, update, clear or snapshot"),
                ));
            }
        }
        let (change, sanitized) = self.change(action, &params)?;
        let changed =
            self.canvas.apply(&ctx.workspace, owner(ctx), change).map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(self.result(action, &changed, sanitized))
    }
}

impl CanvasTool {
    fn result(&self, action: &str, changed: &Changed, sanitized: Option<(Format, usize)>) -> ToolOutput {
        let done = match action {
            "present" => "Canvas replaced",
            "update" => "Canvas updated",
            _ => "Canvas cleared",
        };
        let mut text = format!(
            "{done} (version {}, {} section{}, {} bytes).",
            changed.version,
            changed.sections,
            if changed.sections == 1 { "" } else { "s" },
            changed.bytes
        );
        if let Some((_, removed)) = sanitized
            && removed > 0
            && !self.canvas.config().scripts
        {
            text.push_str(&format!(
                " The sanitizer removed {removed} bytes: scripts, event handlers, forms, remote URLs and styles that \
                 load URLs are never shown."
            ));
        }
        let mut meta = json!({"version": changed.version, "sections": changed.sections, "bytes": changed.bytes});
        if let Some((format, _)) = sanitized {
            meta["format"] = json!(format.name());
        }
        if let Some(path) = &changed.path {
            let link = match &self.canvas.config().public_url {
                Some(base) => format!("{}{path}", base.trim_end_matches('/')),
                None => format!("{path} on this toolgate server (the address `toolgate serve --http` listens on)"),
            };
            text.push_str(&format!(" The user sees it live at {link}; open pages follow every change by themselves."));
            meta["path"] = json!(path);
        }
        if let Some(file) = &changed.file {
            text.push_str(&format!(
                " No HTTP server shows canvases here, so the page was written to {}: open file://{} in a browser; \
                 it reloads itself every 2 seconds. For changes pushed as they happen, run `toolgate serve --http` \
                 and use the canvas there.",
                file.display(),
                file.display()
            ));
            meta["file"] = json!(file.display().to_string());
        }
        ToolOutput::text(text).with_meta(meta)
    }
}

/// The board a call draws on: its user's and session's.
fn owner(ctx: &CallContext) -> (String, String) {
    (ctx.identity.user.clone(), ctx.identity.session.clone())
}

fn text_param(params: &Value, name: &str, max: usize) -> Result<Option<String>, ToolError> {
    let Some(value) = params.get(name) else { return Ok(None) };
    let text = value
        .as_str()
        .ok_or_else(|| ToolError::invalid(NAME, format!("/{name}"), format!("`{name}` must be a string")))?;
    if text.chars().count() > max {
        return Err(ToolError::invalid(NAME, format!("/{name}"), format!("`{name}` is longer than {max} characters")));
    }
    Ok(Some(text.to_owned()))
}
