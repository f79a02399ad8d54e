//! The message tool and its channel adapters.

use std::sync::Arc;

use toolgate_core::Tool;

use crate::Setup;

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let _ = setup;
    Vec::new()
}
