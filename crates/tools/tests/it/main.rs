//! `toolgate-tools`'s integration tests: one binary, a module per area.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod apply_patch_conformance;
mod custom_render;
mod fs_attacks;
mod fs_shared;
mod fs_support;
mod fs_tools;
mod runtime_attacks;
mod runtime_nodes;
mod runtime_support;
mod runtime_tools;
mod web;
