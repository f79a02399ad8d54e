//! Test harness pieces that more than one crate's tests use, so that none is written twice or
//! included across crates with `#[path]`. Dev-only: no library or binary depends on it.
//!
//! - [`approver`]: an [`Approver`](toolgate::Approver) that answers from a script and keeps
//!   every request (the `toolgate` and `toolgate-cli` tests);
//! - [`wasm`]: test components of the `toolgate:tool` world built from WAT (the `toolgate-wasm`
//!   and `toolgate-cli` tests).
//!
//! Harness pieces only one test binary uses stay in that binary's `support` module.

#![deny(missing_docs)]

pub mod approver;
pub mod wasm;
