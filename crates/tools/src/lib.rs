//! toolgate's built-in tools, one module per group.
//!
//! - [`basic`]: `echo`, `time`, `json` (pure tools that prove the pipeline end to end).
//! - [`fs`]: files: `read`, `write`, `edit`, `multi_edit`, `apply_patch`, `grep`, `glob`, `ls`,
//!   `lock_paths`, `unlock_paths`, all confined to the workspace by the kernel.
//! - [`memory`]: `memory_search`, `memory_write`, `memory_read`, `memory_get`, `memory_tree`.
//! - [`runtime`]: `exec`, `process`, `execute_code`, run in `toolgate-sandbox`.
//! - [`web`]: `web_fetch`, `html_to_markdown`, `http`, through the SSRF-safe `toolgate-fetch`.
//! - [`custom`]: user-defined shell-template tools, analyzed and run like `exec`.
//! - [`skills`]: Agent Skills: `skill_list`, `skill_read`, `skill_search`, `skill_install`, `skill_remove`.
//!
//! Tools receive parameters the gate already validated against their schema; each still checks
//! the meaning of its parameters and returns a [`toolgate_core::ToolError`] that says what was
//! wrong. The gate (in the `toolgate` crate) registers them in a [`toolgate_core::Registry`].

#![deny(missing_docs)]

pub mod basic;
pub mod custom;
pub mod fs;
pub mod memory;
pub mod runtime;
pub mod skills;
pub mod web;
