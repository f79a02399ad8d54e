//! toolgate's `automation` tool family (ARCHITECTURE.md, "Adding a tool family"): its tools are made
//! by [`tools`] from what the gate shares with it ([`Setup`]).

use std::sync::Arc;

use toolgate_core::Tool;

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[automation]` configuration section.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Setup {}

/// The family's tools.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let _ = setup;
    Vec::new()
}
