//! toolgate's `browser` tool family (ARCHITECTURE.md, "Adding a tool family"): its tools are made
//! by [`tools`] from what the gate shares with it ([`Setup`]).

use std::sync::Arc;

use toolgate_core::Tool;

pub mod canvas;

/// What the family's tools are built from, filled by the `toolgate` facade from its services
/// and the `[browser]` configuration section.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Setup {
    /// The canvas boards the `canvas` tool draws on, shared with the `/canvas` pages the
    /// facade mounts.
    pub canvas: Arc<canvas::Canvas>,
}

/// The family's tools.
pub fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    vec![setup.canvas.tool()]
}
