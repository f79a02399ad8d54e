//! Stage 13: run the tool with a deadline, the caller's cancellation, and panic containment.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use toolgate_core::{CallContext, RegisteredTool, ToolError, ToolOutput};

/// Runs the tool. On timeout or cancellation the tool's own token is cancelled (so it can stop
/// its processes) and its future is dropped.
pub(crate) async fn execute(
    tool: &RegisteredTool,
    ctx: &CallContext,
    caller_cancel: &tokio_util::sync::CancellationToken,
    params: Value,
    timeout: Duration,
) -> Result<ToolOutput, ToolError> {
    let name = &tool.tool.spec().name;
    let run = CatchUnwind(tool.tool.execute(ctx, params));
    let result = tokio::select! {
        biased;
        result = run => result.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            tracing::error!(tool = %name, panic = %what, "a tool panicked");
            Err(ToolError::failed(format!("`{name}` failed with an internal error; this is a bug in the tool, not in your call")))
        }),
        () = caller_cancel.cancelled() => Err(ToolError::Cancelled),
        () = tokio::time::sleep(timeout) => Err(ToolError::Timeout { tool: name.clone(), after: timeout }),
    };
    if result.is_err() {
        ctx.cancel.cancel();
    }
    result
}

/// A future that turns a panic while polling into an error value.
struct CatchUnwind<'a, T>(Pin<Box<dyn Future<Output = T> + Send + 'a>>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, Box<dyn std::any::Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
