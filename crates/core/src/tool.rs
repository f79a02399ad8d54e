//! The `Tool` trait.

use serde_json::Value;

use crate::{CallContext, CallSafety, ToolError, ToolOutput, ToolSpec};

/// A tool a model can call.
///
/// Implementations receive parameters that already passed the gate's pipeline: aliases applied,
/// coerced and validated against [`ToolSpec::input_schema`], policy-checked and approved. They
/// must still treat every string as hostile (paths, commands, URLs) and must not panic.
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's self-description. Called often: return a reference to a stored spec.
    fn spec(&self) -> &ToolSpec;

    /// Safety metadata for one call, computed from its (validated) parameters.
    fn safety(&self, _params: &Value) -> CallSafety {
        CallSafety::default()
    }

    /// Looks at what the call will do before anyone is asked to approve it, when that needs the
    /// workspace or I/O (`skill_install` stages and scans the skill). Called only when
    /// [`CallSafety::inspect`] is set, after policy and before approval. The lines returned are
    /// added to the approval request's reason; an error refuses the call before anyone is asked.
    /// Whatever it prepares should be what [`Tool::execute`] then uses (the same
    /// [`CallContext::call_id`]), so what was approved is what runs.
    async fn inspect(&self, _ctx: &CallContext, _params: &Value) -> Result<Vec<String>, ToolError> {
        Ok(Vec::new())
    }

    /// Runs the call. Long work should watch [`CallContext::cancel`] and report
    /// [`CallContext::progress`].
    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError>;
}

impl std::fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.spec().name).finish_non_exhaustive()
    }
}
