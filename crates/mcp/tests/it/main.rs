//! `toolgate-mcp`'s integration tests: one binary, a module per area.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod bridge;
mod extra;
mod mounts;
mod peer;
mod sse_client;
