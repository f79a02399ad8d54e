//! The vocabulary of toolgate: what a tool is, what a call carries, and what comes back.
//!
//! Every other toolgate crate speaks in these types. A tool implements [`Tool`]: it describes
//! itself with a [`ToolSpec`] (name, description, input schema, [`Annotations`]), says per call
//! how risky that call is with [`CallSafety`], and runs with [`Tool::execute`], receiving a
//! [`CallContext`] (who is calling, in which workspace, a cancellation token and a progress sink)
//! and returning a [`ToolOutput`] or a [`ToolError`].
//!
//! Tools are held by a [`Registry`], which protects built-in names from being shadowed by dynamic
//! tools (MCP, WASM, config), resolves tool-name aliases (`bash` → `exec`) and compiles each
//! tool's [`ParamValidator`] once. The validator applies parameter aliases (`file` → `path`),
//! safe coercions (`"5"` → `5` where the schema says integer), the size limits of [`Limits`],
//! and the tool's JSON Schema, reporting every problem with its JSON pointer.
//! [`export`] turns specs into the tool formats of OpenAI, Anthropic, Gemini and MCP;
//! [`bm25`] ranks short documents (skills, agents) for the search tools.
//!
//! This crate does no I/O. The call pipeline that uses these types lives in the `toolgate`
//! crate; policy in `toolgate-policy`; the built-in tools in `toolgate-tools`.
//!
//! # Example
//!
//! ```
//! use toolgate_core::{async_trait, CallContext, Registry, Tool, ToolError, ToolOutput, ToolSpec};
//! use serde_json::{json, Value};
//!
//! struct Shout(ToolSpec);
//!
//! #[async_trait]
//! impl Tool for Shout {
//!     fn spec(&self) -> &ToolSpec { &self.0 }
//!     async fn execute(&self, _ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
//!         let text = params["text"].as_str().unwrap_or_default().to_uppercase();
//!         Ok(ToolOutput::text(text))
//!     }
//! }
//!
//! let spec = ToolSpec::new("shout", "Repeat text in capitals.", json!({
//!     "type": "object",
//!     "properties": { "text": { "type": "string" } },
//!     "required": ["text"],
//! }));
//! let registry = Registry::new();
//! registry.register_builtin(std::sync::Arc::new(Shout(spec))).unwrap();
//! assert!(registry.resolve("shout").is_some());
//! ```

#![deny(missing_docs)]

pub mod bm25;
mod context;
mod error;
pub mod export;
mod output;
mod registry;
mod safety;
mod spec;
mod tool;
pub mod trace;
mod turn;
mod validate;

pub use async_trait::async_trait;
pub use context::{
    AuditNote, CallContext, CallGrants, ClientChannel, ClientNote, ClientNotifier, ForwardedApproval, GrantSettings,
    GrantedCall, Identity, PrincipalGrants, Progress, ProgressSink,
};
pub use error::{ParamProblem, RateWindow, ToolError};
pub use output::{Content, ToolOutput};
pub use registry::{RESERVED_NAMES, RegisteredTool, Registry, RegistryError, canonical_tool_name};
pub use safety::{ApprovalRequirement, CallSafety, RateClass, Touches};
pub use spec::{Annotations, OutputTrust, ToolSpec};
pub use tokio_util::sync::CancellationToken;
pub use tool::Tool;
pub use turn::{TurnOrder, TurnSlot};
pub use validate::{Limits, ParamValidator};
