//! Shared by the tests that drive `toolgate` with npm peers (the MCP Inspector CLI, reference
//! servers, agent clients): the peers and `serve --http` come from `toolgate-testkit` (the
//! conformance suite's tests, in `crates/conformance`, use them too); this adds the binary.

pub use toolgate_testkit::npm::{node, node_command, peer};
pub use toolgate_testkit::serve::{HttpServer, workspace};

/// The binary under test.
pub const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
