//! An installed component as a toolgate [`Tool`]: the gate's whole pipeline runs around it
//! (policy, validation against the schema it declared, approval, limits, output shaping), and
//! `execute` runs it in a fresh instance.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches};

use crate::runtime::{CallLimits, Prepared, WasmRuntime};
use crate::{Capabilities, Services};

/// Registered tool names of WASM tools start with this.
pub const TOOL_PREFIX: &str = "wasm__";
/// The policy group of every WASM tool.
pub const GROUP: &str = "wasm";

/// One installed component, as a tool named `wasm__NAME` in group `wasm`.
pub struct WasmTool {
    runtime: WasmRuntime,
    prepared: Prepared,
    spec: ToolSpec,
    name: Arc<str>,
    caps: Arc<Capabilities>,
    services: Services,
    limits: CallLimits,
}

impl std::fmt::Debug for WasmTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmTool").field("name", &self.name).field("caps", &self.caps).finish_non_exhaustive()
    }
}

impl WasmTool {
    /// Wraps a prepared component. `name` is the installed name (`wasm__` is added).
    pub fn new(runtime: WasmRuntime, prepared: Prepared, name: &str, caps: Capabilities, services: Services) -> Self {
        let d = &prepared.description;
        let mut annotations = d.annotations;
        // What the component claims is a hint; what it is granted is a fact.
        if caps.http.is_some() {
            annotations.open_world = true;
            annotations.read_only = false;
        }
        if caps.tools.is_some() {
            annotations.read_only = false;
        }
        let full = format!("{TOOL_PREFIX}{name}");
        let spec = ToolSpec::new(full.clone(), d.description.clone(), d.input_schema.clone())
            .group(GROUP)
            .annotations(annotations);
        let limits = runtime.limits_for(&caps);
        WasmTool { runtime, prepared, spec, name: Arc::from(full), caps: Arc::new(caps), services, limits }
    }

    /// The capabilities it was installed with.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The runtime it runs in.
    pub fn runtime(&self) -> &WasmRuntime {
        &self.runtime
    }

    /// The compiled component.
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }
}

#[async_trait::async_trait]
impl Tool for WasmTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, _params: &Value) -> CallSafety {
        let mut touches = Touches::default();
        if let Some(http) = &self.caps.http {
            touches.hosts = http.allow.iter().map(|e| e.host.trim_start_matches("*.").to_owned()).collect();
        }
        if let Some(ws) = &self.caps.workspace {
            touches.reads =
                ws.read.iter().map(|p| if p == "./" { "**".to_owned() } else { format!("{p}**") }).collect();
        }
        // A tool that reaches beyond its parameters asks first, unless the caller allowed it
        // before; a pure one (no capability) never does.
        let reaches = self.caps.http.is_some() || self.caps.tools.is_some();
        let (approval, approval_reason) = if reaches && !self.spec.annotations.read_only {
            let summary = self.caps.summary().join("; ");
            (ApprovalRequirement::UnlessAutoApproved, Some(Cow::Owned(format!("WASM tool with {summary}"))))
        } else {
            (ApprovalRequirement::Never, None)
        };
        CallSafety {
            approval,
            approval_reason,
            timeout: Some(self.limits.timeout),
            touches,
            read_only: !reaches,
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let params = serde_json::to_string(&params).map_err(|e| ToolError::failed(e.to_string()))?;
        let run = self.runtime.execute(
            &self.prepared,
            Arc::clone(&self.name),
            Arc::clone(&self.caps),
            self.services.clone(),
            Some(ctx.clone()),
            &params,
        );
        // The guest yields to the executor every few thousand instructions, so cancellation
        // (and the gate's timeout, which drops this future) stops it for real.
        let (result, report) = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            r = run => r,
        };
        if report.logs_dropped > 0 {
            tracing::debug!(tool = %self.name, dropped = report.logs_dropped, "guest log messages dropped");
        }
        match result {
            Ok(Ok(text)) => Ok(ToolOutput::text(text)),
            // The guest's words: the output stage shapes them like untrusted output.
            Ok(Err(message)) => {
                Err(ToolError::ExternalService { service: format!("WASM tool `{}`", self.name), message })
            }
            Err(e) => Err(e.into_tool_error(&self.name)),
        }
    }
}
