//! The `nodes` family (issue 29; seed 000 §2 names the tool, OpenClaw's `nodes` is the model):
//! other `toolgate serve` instances paired with this one, where a team runs a tool where the
//! data or the hardware is. A node is paired with `toolgate nodes add NAME URL --key KEY`: its
//! URL and API key are kept as one sealed secret (`node/NAME`), so nodes on one shared database
//! see the same pairings. The tool:
//!
//! - `list`: the paired nodes and their URLs (never their keys);
//! - `status`: each node (or one) reached now: its server, how many tools it lists to this
//!   node's key, how long that took, or why it could not be reached, each within the deadline;
//! - `run`: one tool call made on the node through its own gate: its policy, grants, approvals,
//!   sandbox and audit log apply there; this gate applies its own here (the `nodes` call is
//!   audited, asks for approval as any call that is not read-only, and its answer is untrusted
//!   output, scanned and wrapped like any other server's).
//!
//! [`Pairings`] keeps the pairings; [`NodesTool`] is the tool.

#![deny(missing_docs)]

mod pairings;
mod tool;

pub use pairings::{PAIRING_PREFIX, Pairing, PairingError, Pairings};
pub use tool::NodesTool;
