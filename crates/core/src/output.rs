//! What a tool returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's result: content blocks for the model, optionally the same result as JSON, and
/// facts about it for programs.
///
/// The rule every tool follows (`docs/mcp.md`, "Results"): `content` is the whole result, since
/// it is what every model reads. `structured` is the same result as JSON, equal in information
/// to the text: MCP clients that find `structuredContent` hand the model that and drop the
/// text, so a partial copy hides the result. Tools whose result is text (file lines, matches,
/// listings, Markdown, command output) return no `structured`; what a program may want to know
/// about such a result (counts, line numbers, exit codes) goes to `meta`, which no client hands
/// to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// What the model reads, in order: the complete result.
    pub content: Vec<Content>,
    /// The complete result as JSON, matching [`crate::ToolSpec::output_schema`] when declared.
    /// MCP clients get it as `structuredContent` only from tools for which
    /// [`crate::ToolSpec::returns_structured`] holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Facts about the result for programs (sizes, line numbers, exit codes), never the result
    /// itself; MCP's `_meta` under `io.toolgate/result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl ToolOutput {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput { content: vec![Content::Text { text: text.into() }], structured: None, meta: None }
    }

    /// Structured JSON, with its pretty-printed text as the content the model reads.
    pub fn json(value: Value) -> Self {
        let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        ToolOutput { content: vec![Content::Text { text }], structured: Some(value), meta: None }
    }

    /// Adds the result as JSON: it must say everything the text says (see [`ToolOutput`]).
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
        self
    }

    /// Adds facts about the result for programs (see [`ToolOutput::meta`]).
    pub fn with_meta(mut self, value: Value) -> Self {
        self.meta = Some(value);
        self
    }

    /// All text blocks joined with newlines (what a plain-text client shows).
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Content::Text { text } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// Total bytes of text and image data, for audit.
    pub fn size(&self) -> usize {
        self.content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.len(),
                Content::Image { data, .. } => data.len(),
                Content::ResourceLink { uri, .. } => uri.len(),
            })
            .sum()
    }
}

/// One block of content, in MCP's shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data.
        data: String,
        /// `image/png`, `image/jpeg`, ...
        mime_type: String,
    },
    /// A pointer to a resource the client can fetch.
    ResourceLink {
        /// The resource URI.
        uri: String,
        /// A short name.
        name: String,
        /// Its MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}
