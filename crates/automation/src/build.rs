//! build_software: an agent that builds a tool, a CLI, a library or a script in a scratch workspace.

use std::sync::Arc;

use toolgate_core::Tool;

use crate::Setup;

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let _ = setup;
    Vec::new()
}
