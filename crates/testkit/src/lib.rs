//! Test harness pieces that more than one crate's tests use, so that none is written twice or
//! included across crates with `#[path]`. Dev-only: no library or binary depends on it.
//!
//! - [`approver`]: an [`Approver`](toolgate::Approver) that answers from a script and keeps
//!   every request (the `toolgate` and `toolgate-cli` tests);
//! - [`wasm`]: test components of the `toolgate:tool` world built from WAT (the `toolgate-wasm`
//!   and `toolgate-cli` tests);
//! - [`npm`]: the npm peers and Node 22 (the `toolgate-cli` and `toolgate-conformance` tests);
//! - [`ports`]: a free port for a peer that only takes fixed ports, and a start that tries new
//!   ports when another test took one first (the `toolgate-cli` tests);
//! - [`serve`]: a `serve --http` on a free port, its banner read (the `toolgate` binary's and
//!   the `toolgate-conformance` binary's tests);
//! - [`receiver`]: a loopback HTTP receiver that keeps every request and answers as told, for
//!   what the product sends out: webhooks, a model provider, a guest's calls (the `toolgate` and
//!   `toolgate-cli` tests).
//! - [`postgres`]: a throwaway PostgreSQL cluster on a Unix socket in a temporary folder (the
//!   `toolgate-postgres` tests).
//!
//! Harness pieces only one test binary uses stay in that binary's `support` module.

#![deny(missing_docs)]

pub mod approver;
pub mod npm;
pub mod ports;
pub mod postgres;
pub mod receiver;
pub mod serve;
pub mod wasm;
