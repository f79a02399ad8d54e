//! Routines, their scheduler, and the cron tool.

use std::sync::Arc;

use toolgate_core::Tool;

use crate::Setup;

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let _ = setup;
    Vec::new()
}
