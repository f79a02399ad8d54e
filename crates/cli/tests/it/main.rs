//! The `toolgate` binary's tests, one binary with a module per area (as ripgrep and
//! rust-analyzer do): the real binary end to end, with the real peers (MCP SDKs and clients,
//! reference servers, the Inspector, local models; the conformance suite's tests are in
//! crates/conformance) it is used with.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod support;

mod agent;
mod agent_search;
mod announce;
mod approvals_inbox;
mod approvals_resume;
mod audit_state;
mod binary_contents;
mod browser;
mod build_software;
mod canvas;
mod capture;
mod cli_mcp;
mod clients;
mod dialects;
mod extension_tools;
mod extensions;
mod fs_processes;
mod gateway;
mod gateway_admin;
mod gateway_cache;
mod gateway_changes;
mod gateway_isolation;
mod gateway_overrides;
mod gateway_page;
mod gateway_routines;
mod gateway_rules;
mod gateway_upstream;
mod gateway_upstream_page;
mod http_sessions;
mod inbound_routines;
mod jobs;
mod kill;
mod mcp_bridge;
mod mcp_inspector;
mod mcp_oauth;
mod mcp_python;
mod mcp_results;
mod mcp_sessions;
mod mcp_tasks;
mod media;
mod memory;
mod message;
mod message_inbound;
mod nodes_audit;
mod nodes_config;
mod nodes_forward;
mod nodes_locks_tools;
mod nodes_migrate;
mod nodes_paired;
mod nodes_shared;
mod openai_strict;
mod ops;
mod routines;
mod signals;
mod teams;
mod terminal;
mod timings;
mod traces;
mod wasm;
