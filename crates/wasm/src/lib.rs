//! WASM tools for toolgate: tools written in any language that builds a WebAssembly component
//! of the `toolgate:tool@0.1.0` world (`wit/tool.wit`), run in wasmtime under hard limits and
//! with nothing granted unless a person grants it.
//!
//! [`WasmRuntime`] owns one engine (Cranelift, optimized for speed), a linker with the world's
//! imports and an empty WASI (no files, sockets, environment), and the epoch ticker thread
//! (stopped when the runtime is dropped). [`WasmRuntime::prepare`] validates a component,
//! compiles it once (cached on disk by wasmtime version and BLAKE3 of its bytes), pre-links it
//! and asks it to describe itself; [`WasmTool`] wraps the result as a [`toolgate_core::Tool`]
//! that runs every call in a fresh instance with fuel (CPU), an epoch deadline (wall clock),
//! a memory limiter, and per-call budgets for logs, HTTP requests and tool calls.
//! [`Capabilities`] is the grant (`NAME.capabilities.json`, read by [`read_capabilities`]);
//! [`Installer`] installs, checks (BLAKE3) and loads tools, with manifests sealed in
//! `toolgate-store` ([`installer`]: a workspace's, in `.toolgate/`).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(bytes: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate_wasm::{Capabilities, RuntimeConfig, Services, WasmRuntime, WasmTool};
//!
//! let runtime = WasmRuntime::new(RuntimeConfig::default())?;
//! let prepared = runtime.prepare(&bytes, &Capabilities::none()).await?;
//! let tool = WasmTool::new(runtime, prepared, "echo", Capabilities::none(), Services::default());
//! // register `tool` in a `toolgate_core::Registry`; calls go through `Gate::call`.
//! # Ok(()) }
//! ```
//!
//! Sibling crates: `toolgate-core` (the `Tool` trait), `toolgate-store` (installed tools,
//! secrets); the `toolgate` crate loads installed tools into its registry, implements
//! [`ToolInvoker`] with `Gate::call` and [`HttpClient`] with its fetcher and leak detector.

#![deny(missing_docs)]

mod capabilities;
mod error;
mod files;
mod host;
mod install;
mod runtime;
mod services;
mod tool;

pub use capabilities::{
    Capabilities, CredentialLocation, CredentialMapping, EndpointPattern, HttpCapability, LimitOverrides,
    SecretsCapability, ToolsCapability, WorkspaceCapability,
};
pub use error::WasmError;
pub use files::{installer, installer_in, read_capabilities, read_regular_file, runtime_in, user_installer};
pub use host::{LogEntry, MAX_HTTP_REQUESTS, MAX_LOG_BYTES, MAX_LOG_ENTRIES, MAX_READ_BYTES, MAX_TOOL_INVOCATIONS};
pub use install::{InstalledTool, Installer, MANIFEST_PREFIX, component_hash};
pub use runtime::{CallLimits, CallReport, Prepared, RuntimeConfig, ToolDescription, WasmRuntime, wasmtime_version};
pub use services::{
    HttpClient, HttpOrigin, HttpRequest, HttpResponse, SecretLookup, Services, ToolInvoker, WorkspaceReader,
};
pub use tool::{GROUP, TOOL_PREFIX, WasmTool};

/// The WIT world tools target, as text (the contract for tool authors).
pub const WIT: &str = include_str!("../wit/tool.wit");
