//! Pure safety logic for toolgate: everything that decides whether a string is dangerous, with
//! no I/O of its own.
//!
//! - [`output`]: shapes what a tool returns before a model reads it: head + tail truncation on
//!   character boundaries and the untrusted-content boundary with a fresh random id.
//! - [`shell`]: parses shell commands into simple commands, unwraps wrappers (`env`, `sh -c`,
//!   `sudo`, ...) and classifies each one (safe, needs approval, dangerous, blocked).
//! - [`leak`]: finds credentials in text (tool output, outgoing requests, audit entries).
//! - [`injection`]: neutralizes prompt-injection markers inside untrusted content.
//! - [`env`]: which environment variables a child process may see, and which names are secrets.
//! - [`net`]: SSRF defence: which IP addresses and host names a network tool may reach.
//!
//! The `toolgate` crate runs these in its call pipeline; `toolgate-sandbox` uses [`env`];
//! `toolgate-policy` matches rules against the commands that [`shell`] finds.
//!
//! # Example
//!
//! ```
//! use toolgate_guard::output::{truncate_middle, Truncation};
//!
//! let text = "a".repeat(10_000);
//! let cut = truncate_middle(&text, 1_000);
//! assert!(matches!(cut.truncation, Truncation::Cut { .. }));
//! assert!(cut.text.len() < 1_100); // the kept head and tail, plus one marker line
//! ```

#![deny(missing_docs)]

pub mod env;
pub mod ids;
pub mod injection;
pub mod leak;
pub mod net;
pub mod output;
pub mod random;
pub mod shell;
