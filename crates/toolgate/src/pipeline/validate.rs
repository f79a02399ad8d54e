//! Stage 3: aliases, limits, coercions and the tool's JSON Schema (see `toolgate_core::ParamValidator`).

use serde_json::Value;
use toolgate_core::{Limits, RegisteredTool, ToolError};

/// Checks and normalizes `params` in place; refused parameters stay with the caller.
pub(crate) fn validate(tool: &RegisteredTool, params: &mut Value, limits: &Limits) -> Result<(), ToolError> {
    tool.validator.check_in_place(params, limits)
}
