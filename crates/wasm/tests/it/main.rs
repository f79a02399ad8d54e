//! `toolgate-wasm`'s integration tests: one binary, a module per area.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod components;
mod runtime;
