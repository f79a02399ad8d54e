//! `[browser]` in `toolgate.toml`: what the operator decides for the family.

use serde::{Deserialize, Deserializer, Serialize};

/// `[browser]`: the canvas's choices (`docs/browser.md`, "canvas").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BrowserSettings {
    /// Keep scripts in the canvas's HTML content (off: every script is removed). The page still
    /// runs them sandboxed, in an opaque origin that may not connect anywhere.
    pub canvas_scripts: bool,
    /// The address the user's browser reaches `toolgate serve --http` at (`https://host[:port]`),
    /// so `canvas` results give whole links; without it they give the path.
    #[serde(deserialize_with = "web_url")]
    pub canvas_url: Option<String>,
}

/// An `http://` or `https://` address without a query or fragment, its trailing `/` dropped.
fn web_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(url) = Option::<String>::deserialize(d)? else { return Ok(None) };
    let lower = url.to_ascii_lowercase();
    let ok = (lower.starts_with("http://") || lower.starts_with("https://"))
        && !url.contains(['?', '#', ' ', '"', '<', '>'])
        && url.split_once("://").is_some_and(|(_, rest)| !rest.is_empty());
    if !ok {
        return Err(serde::de::Error::custom(format!(
            "canvas_url `{url}` is not an http:// or https:// address; write where users reach `toolgate serve --http`, e.g. \"https://tools.example.com\""
        )));
    }
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canvas_url_must_be_a_web_address() {
        let ok: BrowserSettings = toml_like(r#"{"canvas_url": "https://tools.example.com/"}"#).unwrap();
        assert_eq!(ok.canvas_url.as_deref(), Some("https://tools.example.com"));
        for bad in ["javascript:alert(1)", "tools.example.com", "https://x/?a=1", "http://"] {
            let err = toml_like(&format!(r#"{{"canvas_url": "{bad}"}}"#)).unwrap_err();
            assert!(err.contains("not an http"), "{bad}: {err}");
        }
        assert!(toml_like(r#"{"canvas_script": true}"#).is_err(), "unknown keys are refused");
    }

    fn toml_like(json: &str) -> Result<BrowserSettings, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }
}
