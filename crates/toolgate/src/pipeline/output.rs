//! Stage 8: shape what the model reads: truncate (head + tail, on character boundaries), then
//! wrap untrusted text in a boundary with a fresh random id.

use toolgate_core::{Content, OutputTrust, ToolOutput, ToolSpec};
use toolgate_guard::output::{truncate_middle, wrap_untrusted};

pub(crate) fn shape(spec: &ToolSpec, mut output: ToolOutput, max_bytes: usize) -> ToolOutput {
    for block in &mut output.content {
        if let Content::Text { text } = block {
            if text.len() > max_bytes {
                *text = truncate_middle(text, max_bytes).text;
            }
            if spec.output_trust == OutputTrust::Untrusted {
                *text = wrap_untrusted(&spec.name, text);
            }
        }
    }
    output
}
