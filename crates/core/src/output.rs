//! What a tool returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's result: content blocks for the model, plus optional structured JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// What the model reads, in order.
    pub content: Vec<Content>,
    /// Machine-readable result matching [`crate::ToolSpec::output_schema`], when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
}

impl ToolOutput {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput { content: vec![Content::Text { text: text.into() }], structured: None }
    }

    /// Structured JSON, with its pretty-printed text as the content the model reads.
    pub fn json(value: Value) -> Self {
        let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        ToolOutput { content: vec![Content::Text { text }], structured: Some(value) }
    }

    /// Adds structured JSON.
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
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
