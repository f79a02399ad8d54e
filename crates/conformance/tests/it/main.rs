//! `toolgate-conformance`'s tests: the official MCP conformance suite against its server and
//! with its client, judged against `tests/baseline.toml` (docs/mcp-conformance.md).
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod suite;
