//! toolgate-automation's behaviour through its public API, on real SQLite state databases.
#![allow(clippy::unwrap_used)]

mod routines;
