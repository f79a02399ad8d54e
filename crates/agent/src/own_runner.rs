//! [`AgentRunner`]: a library user's own agent loop in place of toolgate's (GoClaw's
//! `AgentRunFunc`). The runtime still does everything around the loop — sessions, sub-agent and
//! delegation limits, links, narrowing, quality gates, handoff, cancellation — and hands the
//! runner the agent's conversation, the tools it may use and a [`ToolCaller`] whose calls go
//! through the gate with the agent's narrowed context. So `subagents`, `delegate` and the other
//! agent tools run the user's agents, and every tool call those agents make is still checked
//! and audited.

use std::sync::Arc;

use async_trait::async_trait;
use toolgate_core::CallContext;

use crate::AgentError;
use crate::caller::ToolCaller;
use crate::model::{Message, ToolDef, Usage};
use crate::runner::{Drive, RunOutcome, RunStatus};

/// What a runner is asked to do: run `agent` on `messages` to an answer.
#[derive(Clone)]
#[non_exhaustive]
pub struct RunRequest<'a> {
    /// The agent (an `[agents.NAME]`).
    pub agent: &'a str,
    /// Its model, as configured.
    pub model: &'a str,
    /// The session id.
    pub session: &'a str,
    /// The conversation so far (system prompt, task, earlier turns), already stored.
    pub messages: &'a [Message],
    /// The tools the agent may call (what its policy and narrowing let it see).
    pub tools: &'a [ToolDef],
    /// The context every tool call must carry; its `cancel` is the run's token.
    pub ctx: &'a CallContext,
    /// Calls tools through the gate. Calls of tools not in `tools` are refused by policy.
    pub caller: &'a Arc<dyn ToolCaller>,
}

impl std::fmt::Debug for RunRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("agent", &self.agent)
            .field("session", &self.session)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

/// A runner's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReply {
    /// The final answer.
    pub answer: String,
    /// Model turns taken.
    pub iterations: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens used.
    pub usage: Usage,
}

/// Runs an agent its own way. Set it with [`crate::Runtime::set_runner`].
#[async_trait]
pub trait AgentRunner: Send + Sync {
    /// Runs one agent to its answer. Cancellation: stop when `req.ctx.cancel` fires (the
    /// runtime also drops the future).
    async fn run(&self, req: RunRequest<'_>) -> Result<RunReply, AgentError>;
}

impl Drive<'_> {
    /// The run, by the user's runner: its answer is stored as the assistant's message.
    pub(crate) async fn run_with(self, runner: Arc<dyn AgentRunner>, messages: Vec<Message>) -> RunOutcome {
        let cancel = self.ctx.cancel.clone();
        // The run's context carries the call id of the tool call that started it: cleared, so
        // the gate gives each of the runner's calls its own id (and its own audit row).
        let mut ctx = self.ctx.clone();
        ctx.call_id = String::new();
        let req = RunRequest {
            agent: &self.agent,
            model: &self.model,
            session: &self.session,
            messages: &messages,
            tools: &self.tools,
            ctx: &ctx,
            caller: &self.caller,
        };
        let result = tokio::select! {
            r = runner.run(req) => r,
            () = cancel.cancelled() => Err(AgentError::Cancelled),
        };
        let mut out = RunOutcome::empty(&self.session, &self.agent, RunStatus::Done);
        match result {
            Ok(mut reply) => {
                out.cost_usd = self.record_usage(reply.usage);
                reply.answer = self.caller.scrub(&self.ctx, &reply.answer);
                self.save(&Message::Assistant { content: Some(reply.answer.clone()), tool_calls: Vec::new() });
                (out.answer, out.iterations, out.tool_calls, out.usage) =
                    (reply.answer, reply.iterations, reply.tool_calls, reply.usage);
            }
            Err(AgentError::Cancelled) => {
                out.status = RunStatus::Cancelled;
                out.error = Some("cancelled".to_owned());
            }
            Err(e) => {
                out.status = RunStatus::Failed;
                out.error = Some(e.to_string());
            }
        }
        self.commit();
        out
    }
}
