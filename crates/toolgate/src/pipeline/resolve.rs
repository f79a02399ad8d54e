//! Stage 1: find the tool by name or alias, or say which name was meant.

use std::sync::Arc;

use toolgate_core::{RegisteredTool, Registry, ToolError};

pub(crate) fn resolve(registry: &Registry, name: &str) -> Result<Arc<RegisteredTool>, ToolError> {
    registry
        .resolve(name)
        .ok_or_else(|| ToolError::UnknownTool { name: name.to_owned(), suggestion: registry.suggest(name) })
}
