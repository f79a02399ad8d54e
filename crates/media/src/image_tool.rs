//! `image`: local operations (`info`, `resize`, `crop`, `convert`), `generate` (an
//! OpenAI-compatible `/v1/images/generations` endpoint) and `describe` (an OpenAI-compatible
//! chat endpoint with a vision-capable model).

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use toolgate_core::{
    Annotations, CallContext, CallSafety, Content, RateClass, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};
use toolgate_fetch::Request;

use crate::host::Host;
use crate::raster::{self, Caps, Format};

const NAME: &str = "image";

/// The `image` tool.
#[derive(Debug)]
pub(crate) struct ImageTool {
    spec: ToolSpec,
    host: Arc<Host>,
}

impl ImageTool {
    pub(crate) fn new(host: Arc<Host>) -> ImageTool {
        let spec = ToolSpec::new(
            NAME,
            "Work with images in the workspace (PNG, JPEG, WebP). action `info`: format and size, nothing \
             decoded. `resize` (width and/or height; fit `contain` keeps the aspect ratio, `exact` does not), \
             `crop` (x, y, width, height), `convert` (format): write a new file (`output`, default beside the \
             input) and show it. `generate`: make an image from `prompt` with the configured model and save it. \
             `describe`: a vision model's description of the image at `path` (or answer `prompt` about it); use \
             `video` action `frames` first to describe a video.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["info", "resize", "crop", "convert", "generate", "describe"]},
                    "path": {"type": "string", "minLength": 1, "description": "The input image, relative to the workspace"},
                    "output": {"type": "string", "minLength": 1, "description": "Where to write the result (default: beside the input; generate: images/)"},
                    "overwrite": {"type": "boolean", "description": "Replace `output` if it exists (default false)"},
                    "width": {"type": "integer", "minimum": 1, "maximum": 20000},
                    "height": {"type": "integer", "minimum": 1, "maximum": 20000},
                    "x": {"type": "integer", "minimum": 0, "description": "crop: left edge"},
                    "y": {"type": "integer", "minimum": 0, "description": "crop: top edge"},
                    "fit": {"type": "string", "enum": ["contain", "exact"], "description": "resize: keep the aspect ratio (contain, default) or not"},
                    "format": {"type": "string", "enum": ["png", "jpeg", "jpg", "webp"], "description": "Output format (default: from `output`'s extension, else the input's)"},
                    "quality": {"type": "integer", "minimum": 1, "maximum": 100, "description": "JPEG quality (default 85)"},
                    "prompt": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "generate: what to draw; describe: the question (default: describe the image)"},
                    "size": {"type": "string", "pattern": "^[0-9]{2,4}x[0-9]{2,4}$", "description": "generate: WIDTHxHEIGHT, e.g. 1024x1024"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
        .group("media")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: true });
        ImageTool { spec, host }
    }

    fn caps(&self) -> Caps {
        Caps { max_pixels: self.host.config.max_image_pixels }
    }
}

fn action(params: &Value) -> &str {
    params["action"].as_str().unwrap_or_default()
}

fn need_str<'a>(params: &'a Value, key: &str, act: &str) -> Result<&'a str, ToolError> {
    params[key]
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolError::invalid(NAME, format!("/{key}"), format!("action `{act}` needs `{key}`")))
}

fn u32_param(params: &Value, key: &str) -> Option<u32> {
    params[key].as_u64().and_then(|v| u32::try_from(v).ok())
}

/// `a/b/photo.png` + `resized` + png → `a/b/photo.resized.png`.
fn beside(input: &str, tag: &str, format: Format) -> String {
    let (dir, file) = input.rsplit_once('/').map_or(("", input), |(d, f)| (d, f));
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let name =
        if tag.is_empty() { format!("{stem}.{}", format.ext()) } else { format!("{stem}.{tag}.{}", format.ext()) };
    if dir.is_empty() { name } else { format!("{dir}/{name}") }
}

/// The output format: `format`, else `output`'s extension, else `fallback`.
fn out_format(params: &Value, fallback: Format) -> Result<Format, ToolError> {
    if let Some(f) = params["format"].as_str() {
        return Format::parse(f).ok_or_else(|| ToolError::invalid(NAME, "/format", "use png, jpeg or webp"));
    }
    if let Some(f) = params["output"].as_str().and_then(Format::of_path) {
        return Ok(f);
    }
    Ok(fallback)
}

fn sized(width: u32, height: u32) -> String {
    format!("{width}×{height}")
}

#[async_trait]
impl Tool for ImageTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let act = action(params);
        let mut touches = Touches::default();
        if let Some(p) = params["path"].as_str() {
            touches.reads.push(p.to_owned());
        }
        if matches!(act, "resize" | "crop" | "convert" | "generate") {
            touches.writes.push(params["output"].as_str().unwrap_or("(beside the input)").to_owned());
        }
        let endpoint = match act {
            "generate" => self.host.config.generate.as_ref(),
            "describe" => self.host.config.describe.as_ref(),
            _ => None,
        };
        if let Some(e) = endpoint {
            touches.hosts.push(url_host(&e.url));
        }
        CallSafety {
            rate_class: if endpoint.is_some() { RateClass::Http } else { RateClass::default() },
            read_only: matches!(act, "info" | "describe"),
            touches,
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        match action(&params) {
            "info" => self.info(ctx, &params),
            "resize" | "crop" | "convert" => self.transform(ctx, &params),
            "generate" => self.generate(ctx, &params).await,
            "describe" => self.describe(ctx, &params).await,
            other => Err(ToolError::invalid(
                NAME,
                "/action",
                format!("unknown action `{other}`; use info, resize, crop, convert, generate or describe"),
            )),
        }
    }
}

impl ImageTool {
    fn info(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let path = need_str(params, "path", "info")?;
        let bytes = self.host.read(ctx, path)?;
        let p = raster::probe(&bytes, &format!("`{path}`"))?;
        let text = format!(
            "`{path}`: {:?} image, {} pixels, {:?}, {} bytes.",
            p.format,
            sized(p.width, p.height),
            p.color,
            bytes.len()
        );
        Ok(ToolOutput::text(text).with_meta(json!({
            "path": path, "format": p.format.ext(), "width": p.width, "height": p.height,
            "color": format!("{:?}", p.color), "bytes": bytes.len()
        })))
    }

    fn transform(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let act = action(params);
        let path = need_str(params, "path", act)?;
        let bytes = self.host.read(ctx, path)?;
        let (img, probe) = raster::decode(&bytes, &format!("`{path}`"), self.caps())?;
        let format = out_format(params, probe.format)?;
        let (out_img, tag) = match act {
            "resize" => {
                let (w, h) = (u32_param(params, "width"), u32_param(params, "height"));
                let exact = params["fit"].as_str() == Some("exact");
                let (tw, th) = match (w, h, exact) {
                    (None, None, _) => {
                        return Err(ToolError::invalid(NAME, "/width", "resize needs `width`, `height` or both"));
                    }
                    (Some(w), Some(h), _) => (w, h),
                    (Some(w), None, _) => (w, scale(probe.height, w, probe.width)),
                    (None, Some(h), _) => (scale(probe.width, h, probe.height), h),
                };
                if u64::from(tw) * u64::from(th) > self.host.config.max_image_pixels {
                    return Err(ToolError::invalid(
                        NAME,
                        "/width",
                        format!("{} is over the cap of {} pixels", sized(tw, th), self.host.config.max_image_pixels),
                    ));
                }
                let filter = image::imageops::FilterType::Lanczos3;
                let out = if exact || w.is_none() || h.is_none() {
                    img.resize_exact(tw, th, filter)
                } else {
                    img.resize(tw, th, filter)
                };
                (out, "resized")
            }
            "crop" => {
                let (x, y) = (u32_param(params, "x").unwrap_or(0), u32_param(params, "y").unwrap_or(0));
                let (Some(w), Some(h)) = (u32_param(params, "width"), u32_param(params, "height")) else {
                    return Err(ToolError::invalid(NAME, "/width", "crop needs `width` and `height` (and `x`, `y`)"));
                };
                if u64::from(x) + u64::from(w) > u64::from(probe.width)
                    || u64::from(y) + u64::from(h) > u64::from(probe.height)
                {
                    return Err(ToolError::invalid(
                        NAME,
                        "/width",
                        format!(
                            "the crop {} at ({x}, {y}) does not fit in the {} image; keep x + width ≤ {} and y + \
                             height ≤ {}",
                            sized(w, h),
                            sized(probe.width, probe.height),
                            probe.width,
                            probe.height
                        ),
                    ));
                }
                (img.crop_imm(x, y, w, h), "cropped")
            }
            _ => {
                if params["format"].is_null() && params["output"].is_null() {
                    return Err(ToolError::invalid(NAME, "/format", "convert needs `format` (png, jpeg or webp)"));
                }
                (img, "")
            }
        };
        let output = match params["output"].as_str() {
            Some(o) => o.to_owned(),
            None => beside(path, tag, format),
        };
        if Format::of_path(&output).is_some_and(|f| f != format) {
            return Err(ToolError::invalid(
                NAME,
                "/output",
                format!("`{output}`'s extension does not match the {format:?} format; use .{}", format.ext()),
            ));
        }
        if output == path && params["overwrite"].as_bool() != Some(true) {
            return Err(ToolError::invalid(NAME, "/output", "the output is the input; choose another `output`"));
        }
        let quality = params["quality"].as_u64().and_then(|q| u8::try_from(q).ok()).unwrap_or(85);
        let encoded = raster::encode(&out_img, format, quality)?;
        let overwrite = params["overwrite"].as_bool().unwrap_or(false);
        let written = self.host.write(ctx, NAME, &output, &encoded, overwrite)?;
        let verb = match act {
            "resize" => "Resized",
            "crop" => "Cropped",
            _ => "Converted",
        };
        let text = format!(
            "{verb} `{path}` ({}) to `{written}` ({}, {:?}, {} bytes).",
            sized(probe.width, probe.height),
            sized(out_img.width(), out_img.height()),
            format,
            encoded.len()
        );
        Ok(self.with_block(text, &out_img, Some((&encoded, format))).with_meta(json!({
            "path": written, "format": format.ext(), "width": out_img.width(), "height": out_img.height(),
            "bytes": encoded.len()
        })))
    }

    /// The text, then the image block within the budget (or a note that it did not fit).
    fn with_block(&self, mut text: String, img: &image::DynamicImage, encoded: Option<(&[u8], Format)>) -> ToolOutput {
        let mut content = Vec::new();
        match raster::block(img, encoded, self.host.config.max_block_bytes) {
            Some(block) => {
                content.push(Content::Text { text });
                content.push(block);
            }
            None => {
                text.push_str(" (Too large to show; read a resized copy.)");
                content.push(Content::Text { text });
            }
        }
        ToolOutput { content, ..ToolOutput::default() }
    }

    async fn generate(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let prompt = need_str(params, "prompt", "generate")?;
        let Some(endpoint) = self.host.config.generate.clone() else {
            return Err(ToolError::failed(
                "image generation is not configured: set `[media.generate] url` (an OpenAI-compatible \
                 /v1/images/generations endpoint), `model` and `api_key_env`",
            ));
        };
        let key = self.host.key("image generation", &endpoint)?;
        let mut body = json!({"prompt": prompt, "n": 1});
        if let Some(m) = &endpoint.model {
            body["model"] = json!(m);
        }
        // gpt-image models always answer base64 and refuse the parameter; the others default to a URL.
        if !endpoint.model.as_deref().unwrap_or_default().starts_with("gpt-image") {
            body["response_format"] = json!("b64_json");
        }
        if let Some(s) = params["size"].as_str() {
            body["size"] = json!(s);
        }
        let mut req = Request::get(endpoint.url.clone()).header("Content-Type", "application/json");
        req.method = "POST".into();
        req.body = Some(body.to_string().into_bytes());
        if let Some(k) = &key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let service = "image generation";
        let max = self.host.config.max_input_bytes.saturating_mul(2);
        let resp = self.host.send(ctx, service, req, key.as_deref(), max).await?;
        let answer: Value = serde_json::from_slice(&resp.body).map_err(|_| ToolError::ExternalService {
            service: service.into(),
            message: "the answer is not JSON".into(),
        })?;
        let first = &answer["data"][0];
        let bytes = if let Some(b64) = first["b64_json"].as_str() {
            base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|_| ToolError::ExternalService {
                service: service.into(),
                message: "`b64_json` is not valid base64".into(),
            })?
        } else if let Some(url) = first["url"].as_str() {
            // A URL from the provider is fetched like any other: vetted by the SSRF-safe fetcher.
            let resp = self.host.send(ctx, service, Request::get(url), None, self.host.config.max_input_bytes).await?;
            resp.body.to_vec()
        } else {
            return Err(ToolError::ExternalService {
                service: service.into(),
                message: "the answer has no `data[0].b64_json` or `data[0].url`".into(),
            });
        };
        // The provider's bytes are checked like a workspace file: a bomb or a non-image is refused.
        let (img, probe) = raster::decode(&bytes, "the generated image", self.caps())?;
        let format = out_format(params, probe.format)?;
        let encoded = if format == probe.format { bytes } else { raster::encode(&img, format, 90)? };
        let output = match params["output"].as_str() {
            Some(o) => o.to_owned(),
            None => format!("images/generated-{}.{}", unix_millis(), format.ext()),
        };
        let written = self.host.write(ctx, NAME, &output, &encoded, params["overwrite"].as_bool().unwrap_or(false))?;
        let text = format!(
            "Generated `{written}` ({}, {:?}, {} bytes).",
            sized(img.width(), img.height()),
            format,
            encoded.len()
        );
        Ok(self.with_block(text, &img, Some((&encoded, format))).with_meta(json!({
            "path": written, "format": format.ext(), "width": img.width(), "height": img.height(), "bytes": encoded.len()
        })))
    }

    async fn describe(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let path = need_str(params, "path", "describe")?;
        let Some(endpoint) = self.host.config.describe.clone() else {
            return Err(ToolError::failed(
                "image description is not configured: set `[media.describe] url` (an OpenAI-compatible \
                 /v1/chat/completions endpoint), a vision-capable `model` and `api_key_env`",
            ));
        };
        let bytes = self.host.read(ctx, path)?;
        let (img, probe) = raster::decode(&bytes, &format!("`{path}`"), self.caps())?;
        // What the model is sent is bounded like what it is shown: at most 4 MB of base64.
        let Some(Content::Image { data, mime_type }) = raster::block(&img, Some((&bytes, probe.format)), 4 << 20)
        else {
            return Err(ToolError::failed(format!("`{path}` cannot be made small enough to send")));
        };
        let key = self.host.key("image description", &endpoint)?;
        let question = params["prompt"].as_str().unwrap_or("Describe this image in detail.");
        let body = json!({
            "model": endpoint.model.as_deref().unwrap_or("gpt-4o-mini"),
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": question},
                {"type": "image_url", "image_url": {"url": format!("data:{mime_type};base64,{data}")}}
            ]}],
            "max_tokens": 1000
        });
        let mut req = Request::get(endpoint.url.clone()).header("Content-Type", "application/json");
        req.method = "POST".into();
        req.body = Some(body.to_string().into_bytes());
        if let Some(k) = &key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let service = "image description";
        let resp = self.host.send(ctx, service, req, key.as_deref(), 1 << 20).await?;
        let answer: Value = serde_json::from_slice(&resp.body).map_err(|_| ToolError::ExternalService {
            service: service.into(),
            message: "the answer is not JSON".into(),
        })?;
        let Some(text) = answer["choices"][0]["message"]["content"].as_str() else {
            return Err(ToolError::ExternalService {
                service: service.into(),
                message: "the answer has no `choices[0].message.content`".into(),
            });
        };
        Ok(ToolOutput::text(format!(
            "Description of `{path}` ({}):\n{}",
            sized(probe.width, probe.height),
            text.trim()
        ))
        .with_meta(json!({"path": path, "model": body["model"]})))
    }
}

/// `other × target / this`, rounded, at least 1.
fn scale(other: u32, target: u32, this: u32) -> u32 {
    let v = (u64::from(other) * u64::from(target) + u64::from(this) / 2) / u64::from(this.max(1));
    u32::try_from(v.max(1)).unwrap_or(u32::MAX)
}

pub(crate) fn unix_millis() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default()
}

pub(crate) fn url_host(url: &str) -> String {
    url.split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default().to_owned())
        .unwrap_or_default()
}
