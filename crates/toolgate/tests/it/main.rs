//! The `toolgate` library's behaviour through its public API (`Gate::call`), one binary with a
//! module per area. The binary's end-to-end tests are in `crates/cli/tests`.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod automation_build;
mod automation_jobs;
mod automation_message;
mod automation_routines;
mod browser;
mod canvas;
mod dialects;
mod family;
mod gate;
mod media;
mod memory_managed;
mod runtime;
mod web;
