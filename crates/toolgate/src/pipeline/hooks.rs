//! Stages 9 and 15: code that runs before and after every matching call.
//!
//! Two kinds of hooks share this stage:
//!
//! - [`Hook`]: Rust code a library user registers with [`crate::GateBuilder::hook`].
//! - Command hooks from `[[hooks.pre_tool_use]]` / `[[hooks.post_tool_use]]` in the config
//!   (as in Claude Code): a shell command gets the call as JSON on stdin. Exit code 2 blocks the
//!   call and its stderr is the error the model sees; exit 0 with a JSON reply
//!   `{"decision": "allow" | "deny" | "ask", "reason": "..."}` decides; other output is ignored.
//!
//! Pre-hooks run before the approval stage, so their decision shapes it: `allow` pre-approves
//! (except calls the tool says must always be asked), `ask` asks, `deny` blocks. A command
//! hook that fails (cannot start, times out, exits with another code, replies with nonsense)
//! never silently allows a call: the call then needs approval, and the failure is in the trace.

use std::fmt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use toolgate_core::{CallContext, ToolError, ToolOutput};

/// What a pre-call hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// No opinion: let the call go on.
    Continue,
    /// Pre-approve the call (it still cannot skip an approval the tool always requires).
    Allow,
    /// Ask a person before running it, with this reason.
    Ask(String),
    /// Stop the call; the message is what the model reads.
    Block(String),
}

/// Code run around calls.
#[async_trait::async_trait]
pub trait Hook: Send + Sync + fmt::Debug {
    /// Whether this hook applies to `tool` (default: every tool).
    fn matches(&self, _tool: &str) -> bool {
        true
    }

    /// Runs before approval and execution.
    async fn before(&self, _ctx: &CallContext, _tool: &str, _params: &Value) -> HookVerdict {
        HookVerdict::Continue
    }

    /// Runs after the tool, with what the model will receive.
    async fn after(&self, _ctx: &CallContext, _tool: &str, _result: &Result<ToolOutput, ToolError>) {}
}

/// `[hooks]`: command hooks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    /// Run before matching calls; they can allow, ask or block.
    pub pre_tool_use: Vec<CommandHookConfig>,
    /// Run after matching calls, with the outcome; they only observe.
    pub post_tool_use: Vec<CommandHookConfig>,
}

/// One command hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandHookConfig {
    /// Which tools: `*`, an exact name, or a regular expression matched against the whole name
    /// (`write|edit|multi_edit`, `mcp__github__.*`).
    pub matcher: String,
    /// The command, run with `sh -c` in the workspace.
    pub command: String,
    /// Seconds before the hook counts as failed (default 30).
    #[serde(default = "default_hook_timeout")]
    pub timeout_secs: u64,
}

fn default_hook_timeout() -> u64 {
    30
}

/// A configured command hook, compiled.
#[derive(Debug)]
pub(crate) struct CommandHook {
    matcher: regex::Regex,
    command: String,
    timeout: Duration,
    pre: bool,
}

impl CommandHook {
    pub(crate) fn compile(config: &HooksConfig) -> Result<Vec<Arc<dyn Hook>>, String> {
        let mut hooks: Vec<Arc<dyn Hook>> = Vec::new();
        for (list, pre) in [(&config.pre_tool_use, true), (&config.post_tool_use, false)] {
            for h in list {
                let pattern = if h.matcher == "*" { ".*".to_owned() } else { format!("^(?:{})$", h.matcher) };
                let matcher = regex::Regex::new(&pattern)
                    .map_err(|e| format!("hook matcher `{}` is not a valid regular expression: {e}", h.matcher))?;
                hooks.push(Arc::new(CommandHook {
                    matcher,
                    command: h.command.clone(),
                    timeout: Duration::from_secs(h.timeout_secs.max(1)),
                    pre,
                }));
            }
        }
        Ok(hooks)
    }

    async fn run(&self, ctx: &CallContext, input: Value) -> Result<(i32, String, String), String> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .current_dir(&*ctx.workspace)
            .env_clear()
            .envs(toolgate_guard::env::filter_safe(std::env::vars()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // The hook and whatever it starts die with toolgate, and when it is dropped (timeout).
        toolgate_sandbox::contain(cmd.as_std_mut());
        let mut child = cmd.spawn().map_err(|e| format!("cannot start `{}`: {e}", self.command))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its stdin is allowed: ignore a broken pipe.
            let _ = stdin.write_all(input.to_string().as_bytes()).await;
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Err(_) => Err(format!("`{}` did not finish within {} s", self.command, self.timeout.as_secs())),
            Ok(Err(e)) => Err(format!("`{}` failed: {e}", self.command)),
            Ok(Ok(out)) => Ok((
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            )),
        }
    }
}

fn hook_input(event: &str, ctx: &CallContext, tool: &str) -> Value {
    json!({
        "hook_event_name": event,
        "tool_name": tool,
        "call_id": ctx.call_id,
        "user": ctx.identity.user,
        "agent": ctx.identity.agent,
        "session": ctx.identity.session,
        "cwd": ctx.workspace.display().to_string(),
    })
}

#[async_trait::async_trait]
impl Hook for CommandHook {
    fn matches(&self, tool: &str) -> bool {
        self.matcher.is_match(tool)
    }

    async fn before(&self, ctx: &CallContext, tool: &str, params: &Value) -> HookVerdict {
        if !self.pre {
            return HookVerdict::Continue;
        }
        let mut input = hook_input("PreToolUse", ctx, tool);
        input["tool_input"] = params.clone();
        let failed =
            |why: String| HookVerdict::Ask(format!("the pre-tool-use hook failed ({why}), so a person must decide"));
        match self.run(ctx, input).await {
            Err(why) => failed(why),
            Ok((2, _, stderr)) => HookVerdict::Block(if stderr.is_empty() {
                format!("`{}` refused the call", self.command)
            } else {
                stderr
            }),
            Ok((0, stdout, _)) if stdout.trim().is_empty() => HookVerdict::Continue,
            Ok((0, stdout, _)) => match serde_json::from_str::<Value>(stdout.trim()) {
                Ok(reply) => {
                    let reason = reply["reason"].as_str().unwrap_or("a hook decided").to_owned();
                    match reply["decision"].as_str() {
                        Some("allow") => HookVerdict::Allow,
                        Some("ask") => HookVerdict::Ask(reason),
                        Some("deny") => HookVerdict::Block(reason),
                        None => HookVerdict::Continue,
                        Some(other) => failed(format!("unknown decision `{other}`")),
                    }
                }
                // Plain text on stdout is informational, as in Claude Code.
                Err(_) => HookVerdict::Continue,
            },
            Ok((code, _, stderr)) => failed(format!("exit code {code}: {stderr}")),
        }
    }

    async fn after(&self, ctx: &CallContext, tool: &str, result: &Result<ToolOutput, ToolError>) {
        if self.pre {
            return;
        }
        let mut input = hook_input("PostToolUse", ctx, tool);
        input["tool_response"] = match result {
            Ok(out) => json!({"ok": true, "text": out.text_content()}),
            Err(e) => json!({"ok": false, "error": {"kind": e.kind(), "message": e.to_string()}}),
        };
        if let Err(why) = self.run(ctx, input).await {
            tracing::warn!("post-tool-use hook: {why}");
        }
    }
}

/// The combined verdict of every matching pre-hook: the strictest wins (block > ask > allow).
pub(crate) async fn before(hooks: &[Arc<dyn Hook>], ctx: &CallContext, tool: &str, params: &Value) -> HookVerdict {
    let mut verdict = HookVerdict::Continue;
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        match hook.before(ctx, tool, params).await {
            HookVerdict::Block(message) => return HookVerdict::Block(message),
            HookVerdict::Ask(reason) => verdict = HookVerdict::Ask(reason),
            HookVerdict::Allow if verdict == HookVerdict::Continue => verdict = HookVerdict::Allow,
            HookVerdict::Allow | HookVerdict::Continue => {}
        }
    }
    verdict
}

pub(crate) async fn after(
    hooks: &[Arc<dyn Hook>],
    ctx: &CallContext,
    tool: &str,
    result: &Result<ToolOutput, ToolError>,
) {
    for hook in hooks.iter().filter(|h| h.matches(tool)) {
        hook.after(ctx, tool, result).await;
    }
}
