//! Stage 3: aliases, limits, coercions and the tool's JSON Schema (see `toolgate_core::ParamValidator`).

use serde_json::Value;
use toolgate_core::{Limits, RegisteredTool, ToolError};

pub(crate) fn validate(tool: &RegisteredTool, params: Value, limits: &Limits) -> Result<Value, ToolError> {
    tool.validator.check(params, limits)
}
