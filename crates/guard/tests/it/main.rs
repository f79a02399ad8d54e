//! `toolgate-guard`'s integration tests: one binary, a module per area.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod injection_boundary;
mod leak_corpus;
mod leak_pipeline_props;
mod net_ranges;
mod shell_table;
