//! The agent loop: ask the model, run the tool calls it makes through the [`ToolCaller`],
//! hand the results back, until it answers, a limit is reached, or the run is cancelled.
//!
//! Everything a model writes is hostile: malformed arguments, unknown tools, megabytes of
//! arguments and the same call over and over are each answered with an error the model can act
//! on (and recorded in the session), never a panic or a stuck run.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_core::{CallContext, ToolError, TurnSlot};
use toolgate_store::{MessageRecord, SessionStore};

use crate::caller::ToolCaller;
use crate::config::Price;
use crate::model::{Message, ModelClient, ModelRequest, ToolCall, ToolDef, Usage};
use crate::runtime::Inbox;
use crate::turn_calls::TurnCalls;
use crate::{AgentError, now_ms};

/// Largest arguments a tool call may carry (1 MiB); more is refused without parsing.
pub const MAX_ARGUMENTS: usize = 1 << 20;
/// The run stops when the gate's loop breaker (`[loop_breaker]`, which refuses a call repeated
/// too often in a row, and knows which tools are exempt) has refused this many calls in a row.
pub const LOOP_STOP: u32 = 2;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model gave its answer.
    Done,
    /// `max_iterations` model turns passed without an answer.
    MaxIterations,
    /// Stopped by the runtime (the model repeated one call).
    Stopped,
    /// The model endpoint failed.
    Failed,
    /// Cancelled (by `subagents cancel`, a steer, or shutdown).
    Cancelled,
}

impl RunStatus {
    /// The session status stored for it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Done => "done",
            RunStatus::MaxIterations => "stopped",
            RunStatus::Stopped => "stopped",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The session id.
    pub session: String,
    /// The agent that ran.
    pub agent: String,
    /// How it ended.
    pub status: RunStatus,
    /// The final answer (or the last text the model wrote).
    pub answer: String,
    /// Why it did not end with an answer.
    pub error: Option<String>,
    /// Model turns.
    pub iterations: u32,
    /// Tool calls made through the gate.
    pub tool_calls: u32,
    /// Tokens used.
    pub usage: Usage,
    /// Cost in US dollars from the price table (0 when unknown).
    pub cost_usd: f64,
}

impl RunOutcome {
    /// The outcome of a run of `agent` in `session` before anything happened: no turns, no
    /// answer, status `status`.
    pub(crate) fn empty(session: &str, agent: &str, status: RunStatus) -> Self {
        RunOutcome {
            session: session.to_owned(),
            agent: agent.to_owned(),
            status,
            answer: String::new(),
            error: None,
            iterations: 0,
            tool_calls: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
        }
    }

    /// The text a delegating model reads: the answer, or why there is none.
    pub fn for_model(&self) -> String {
        match (&self.status, &self.error) {
            (RunStatus::Done, _) => self.answer.clone(),
            (status, Some(e)) => format!("[session {} ended {}: {e}]\n{}", self.session, status.as_str(), self.answer),
            (status, None) => format!("[session {} ended {}]\n{}", self.session, status.as_str(), self.answer),
        }
    }
}

/// Something that happened during a run, for a live transcript.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The model answered: text, tool calls, or both.
    Assistant {
        /// The session.
        session: &'a str,
        /// Its text.
        text: Option<&'a str>,
        /// Its tool calls.
        calls: &'a [ToolCall],
    },
    /// A tool call finished (or was refused before reaching the gate).
    ToolResult {
        /// The session.
        session: &'a str,
        /// The call.
        call: &'a ToolCall,
        /// Whether it failed.
        is_error: bool,
        /// What the model reads.
        content: &'a str,
    },
}

/// Receives [`Event`]s. Must be quick.
pub type EventSink = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// What one run needs.
pub(crate) struct Drive<'a> {
    pub client: Arc<dyn ModelClient>,
    pub caller: Arc<dyn ToolCaller>,
    pub store: &'a dyn SessionStore,
    pub agent: String,
    pub model: String,
    pub price: Price,
    pub max_iterations: u32,
    pub tools: Vec<ToolDef>,
    pub session: String,
    /// The agent's context; its `cancel` is the run's token.
    pub ctx: CallContext,
    pub events: Option<EventSink>,
    /// A library user's own loop, which runs instead of this one.
    pub runner: Option<Arc<dyn crate::AgentRunner>>,
    /// Announcements and queued messages, taken before each model request.
    pub inbox: Arc<Inbox>,
    /// How long to wait for more items after one arrives (the announce debounce).
    pub debounce: Duration,
    /// This turn's session writes, stored together by [`Drive::commit`].
    pub turn: std::sync::Mutex<Turn>,
}

/// A turn's messages and usage, not yet stored.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    messages: Vec<MessageRecord>,
    usage: Option<(u64, u64, f64)>,
}

impl Drive<'_> {
    /// Runs the loop over `messages` (already stored) and records every new message.
    pub(crate) async fn run(mut self, messages: Vec<Message>) -> RunOutcome {
        if let Some(runner) = self.runner.take() {
            return self.run_with(runner, messages).await;
        }
        self.inbox.begin(&self.session);
        let mut live = Live { inbox: &self.inbox, store: self.store, session: &self.session, ended: false };
        let out = self.turns(messages).await;
        // The last turn first, then what arrived after the last request (queued until `end`,
        // stored directly after it), so nothing lands before the answer it came after.
        self.commit();
        live.end();
        out
    }

    async fn turns(&self, mut messages: Vec<Message>) -> RunOutcome {
        let cancel = self.ctx.cancel.clone();
        let mut out = RunOutcome::empty(&self.session, &self.agent, RunStatus::MaxIterations);
        // Consecutive calls the gate refused as a loop (`[loop_breaker]`): the model was told
        // to change approach and did not.
        let mut loop_refusals = 0u32;
        let tools: Arc<[ToolDef]> = self.tools.clone().into();
        'turns: while out.iterations < self.max_iterations {
            if cancel.is_cancelled() {
                out.status = RunStatus::Cancelled;
                break;
            }
            out.iterations += 1;
            let waiting = crate::runtime::announce_settle(&self.inbox, &self.session, self.debounce).await;
            if !waiting.is_empty() {
                let m = Message::User { content: crate::runtime::announce_message(&waiting) };
                self.save(&m);
                messages.push(m);
            }
            let request = ModelRequest { model: self.model.clone(), messages: messages.clone(), tools: tools.clone() };
            // Dropping the request future on cancellation aborts the HTTP exchange.
            let reply = tokio::select! {
                r = self.client.complete(&request) => r,
                () = cancel.cancelled() => Err(AgentError::Cancelled),
            };
            let reply = match reply {
                Ok(r) => r,
                Err(AgentError::Cancelled) => {
                    out.status = RunStatus::Cancelled;
                    break;
                }
                Err(e) => {
                    out.status = RunStatus::Failed;
                    out.error = Some(e.to_string());
                    break;
                }
            };
            out.usage += reply.usage;
            out.cost_usd += self.record_usage(reply.usage);
            // What a model writes passes the leak detector before it is stored or shown to
            // anyone (seed 004 §9); its tool calls run with the arguments as written.
            let mut reply = reply;
            reply.content = reply.content.map(|t| self.caller.scrub(&self.ctx, &t));
            if let Some(text) = &reply.content {
                out.answer.clone_from(text);
            }
            let assistant = Message::Assistant { content: reply.content.clone(), tool_calls: reply.tool_calls.clone() };
            let shown_calls = self.scrubbed(&reply.tool_calls);
            self.save(&Message::Assistant { content: reply.content.clone(), tool_calls: shown_calls.clone() });
            if let Some(events) = &self.events {
                events(&Event::Assistant {
                    session: &self.session,
                    text: reply.content.as_deref(),
                    calls: &shown_calls,
                });
            }
            messages.push(assistant);
            if reply.tool_calls.is_empty() {
                out.status = RunStatus::Done;
                break;
            }
            // One turn's calls form a batch: they start together, so the approvals they wait for
            // are in the inbox at once and are decided per call (seed 004 §9); each runs when the
            // one before it is answered. A denied one is answered as an error and the turn goes on.
            let batch = (reply.tool_calls.len() > 1).then(|| format!("{}#{}", self.session, out.iterations));
            let mut turn = TurnCalls::new(self, &reply.tool_calls, &cancel, batch.as_deref());
            for (i, call) in reply.tool_calls.iter().enumerate() {
                let (result, reached_gate) = turn.answer(i).await;
                out.tool_calls += u32::from(reached_gate);
                let cancelled = matches!(result, Err(ToolError::Cancelled)) && cancel.is_cancelled();
                loop_refusals = if is_loop_refusal(&result) { loop_refusals + 1 } else { 0 };
                let handed_off = handed_off(call, &result);
                self.answer(&mut messages, call, result);
                let stop = if cancelled {
                    out.status = RunStatus::Cancelled;
                    true
                } else if loop_refusals >= LOOP_STOP {
                    out.status = RunStatus::Stopped;
                    out.error = Some(format!(
                        "the model repeated the same `{}` call after the gate refused it as a loop; the run was stopped",
                        call.name
                    ));
                    true
                } else if let Some(to) = handed_off {
                    // The conversation is another agent's now: this run steps away.
                    out.status = RunStatus::Done;
                    out.answer = format!("(handed the conversation to `{to}`)");
                    true
                } else {
                    false
                };
                if stop {
                    // The later calls never get their turn; their answers keep the stored
                    // transcript well-formed.
                    turn.end();
                    drop(turn);
                    for rest in &reply.tool_calls[i + 1..] {
                        self.answer(&mut messages, rest, Err(ToolError::failed("not run: the agent run ended")));
                    }
                    break 'turns;
                }
            }
            // The turn is complete (every call answered): stored at once. A run that ends
            // mid-turn is stored by `run` when it ends.
            self.commit();
        }
        if out.status == RunStatus::MaxIterations {
            out.error = Some(format!(
                "no answer after {} model turns (max_iterations); give a smaller task or raise max_iterations",
                self.max_iterations
            ));
        }
        if out.status == RunStatus::Cancelled {
            out.error.get_or_insert_with(|| "cancelled".to_owned());
        }
        out
    }

    /// Tool calls with their arguments scrubbed, for the stored transcript.
    fn scrubbed(&self, calls: &[ToolCall]) -> Vec<ToolCall> {
        calls.iter().map(|c| ToolCall { arguments: self.caller.scrub(&self.ctx, &c.arguments), ..c.clone() }).collect()
    }

    /// Checks a call and runs it through the gate; says whether it reached the gate. `turn`
    /// is its place among the turn's calls, when they were started together.
    pub(crate) async fn call_tool(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
        batch: Option<&str>,
        turn: Option<TurnSlot>,
    ) -> (Result<toolgate_core::ToolOutput, ToolError>, bool) {
        match self.check(call) {
            Ok(params) => {
                let mut ctx = self.ctx.clone();
                ctx.call_id = String::new();
                ctx.batch = batch.map(str::to_owned);
                ctx.turn = turn;
                ctx.cancel = cancel.child_token();
                let result = tokio::select! {
                    r = self.caller.call(&ctx, &call.name, params) => r,
                    () = cancel.cancelled() => Err(ToolError::Cancelled),
                };
                (result, true)
            }
            Err(e) => {
                self.caller.refused(&self.ctx, &call.name, &call.arguments, &e);
                (Err(e), false)
            }
        }
    }

    /// The call's parameters, or why it cannot be made.
    fn check(&self, call: &ToolCall) -> Result<Value, ToolError> {
        if !self.tools.iter().any(|t| t.name == call.name) {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(ToolError::UnknownTool {
                name: truncate(&call.name, 100),
                suggestion: if names.is_empty() { None } else { Some(names.join("`, `")) },
            });
        }
        if call.arguments.len() > MAX_ARGUMENTS {
            return Err(ToolError::invalid(
                &call.name,
                "",
                format!(
                    "the arguments are {} bytes; the limit is {MAX_ARGUMENTS}: send less data",
                    call.arguments.len()
                ),
            ));
        }
        let params: Value = if call.arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(&call.arguments) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => {
                    return Err(ToolError::invalid(
                        &call.name,
                        "",
                        "the arguments must be a JSON object such as {\"path\": \"a.txt\"}",
                    ));
                }
                Err(e) => {
                    return Err(ToolError::invalid(
                        &call.name,
                        "",
                        format!("the arguments are not valid JSON ({e}); send one JSON object"),
                    ));
                }
            }
        };
        Ok(params)
    }

    /// Records a call's result and hands it to the model.
    fn answer(
        &self,
        messages: &mut Vec<Message>,
        call: &ToolCall,
        result: Result<toolgate_core::ToolOutput, ToolError>,
    ) {
        let (content, is_error) = match result {
            Ok(out) => {
                let text = out.text_content();
                if text.is_empty() {
                    (out.structured.map(|v| v.to_string()).unwrap_or_default(), false)
                } else {
                    (text, false)
                }
            }
            Err(e) => (format!("error ({}): {e}", e.kind()), true),
        };
        if let Some(events) = &self.events {
            events(&Event::ToolResult { session: &self.session, call, is_error, content: &content });
        }
        let m = Message::Tool { call_id: call.id.clone(), name: call.name.clone(), content, is_error };
        self.save(&m);
        messages.push(m);
    }

    /// Adds a reply's tokens and their cost (from the price table) to the turn; returns the cost.
    pub(crate) fn record_usage(&self, usage: Usage) -> f64 {
        let cost =
            self.price.input * usage.input_tokens as f64 / 1e6 + self.price.output * usage.output_tokens as f64 / 1e6;
        let mut turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        let (input, output, total) = turn.usage.get_or_insert_default();
        (*input, *output, *total) = (*input + usage.input_tokens, *output + usage.output_tokens, *total + cost);
        cost
    }

    /// Adds a message to the turn; [`Drive::commit`] stores it.
    pub(crate) fn save(&self, m: &Message) {
        self.turn.lock().unwrap_or_else(|e| e.into_inner()).messages.push(to_record(m));
    }

    /// Stores the turn's messages and usage in one transaction: once its tool calls are all
    /// answered, and when the run ends (it was five commits a turn, two per message and one for
    /// the usage). On purpose not the assistant's message before its calls run: a crash mid-call
    /// would leave a transcript ending in tool calls without results (`sessions_fail_orphans`
    /// only marks the session failed, and `from_record` hands the unanswered calls to the
    /// next request of `sessions_send`, which providers reject). Losing the interrupted turn
    /// keeps a continued session well-formed; the audit log has its calls, live events showed
    /// it, and `sessions_history` shows a turn when it ends.
    pub(crate) fn commit(&self) {
        let turn = std::mem::take(&mut *self.turn.lock().unwrap_or_else(|e| e.into_inner()));
        self.log(self.store.session_append_turn(&self.session, &turn.messages, turn.usage, now_ms()).map(drop));
    }

    fn log(&self, r: Result<(), toolgate_store::StoreError>) {
        if let Err(e) = r {
            tracing::warn!(session = self.session, "agent session not saved: {e}");
        }
    }
}

/// A loop that is running: items for its session are queued while it lives. Ended by the
/// loop, or on drop when its future is dropped mid-run (its caller was cancelled): then what
/// was queued goes to the transcript, and the session is marked cancelled rather than left
/// `running` with nothing to take its queue.
struct Live<'a> {
    inbox: &'a Inbox,
    store: &'a dyn SessionStore,
    session: &'a str,
    ended: bool,
}

impl Live<'_> {
    fn end(&mut self) {
        self.ended = true;
        let left: Vec<MessageRecord> =
            self.inbox.end(self.session).into_iter().map(|i| to_record(&Message::User { content: i.text })).collect();
        if left.is_empty() {
            return;
        }
        if let Err(e) = self.store.session_append_turn(self.session, &left, None, now_ms()) {
            tracing::warn!(session = self.session, "announcements not saved: {e}");
        }
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.end();
        let error = "the call that ran it was cancelled; its last turn was not kept";
        if let Err(e) = self.store.session_finish(self.session, "cancelled", None, Some(error), now_ms()) {
            tracing::warn!(session = self.session, "agent session not saved: {e}");
        }
    }
}

/// The agent a successful `handoff` call handed the conversation to.
fn handed_off(call: &ToolCall, result: &Result<toolgate_core::ToolOutput, ToolError>) -> Option<String> {
    match result {
        Ok(out) if call.name == "handoff" => out.meta.as_ref()?.get("handoff_to")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// Whether the gate refused the call as one identical call too many (its loop breaker).
fn is_loop_refusal(result: &Result<toolgate_core::ToolOutput, ToolError>) -> bool {
    matches!(result, Err(ToolError::Denied { reason, .. }) if reason.starts_with("loop detected"))
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// A message as a stored record.
pub(crate) fn to_record(m: &Message) -> MessageRecord {
    let ts_ms = now_ms();
    match m {
        Message::System { content } => {
            MessageRecord { role: "system".into(), content: content.clone(), ts_ms, ..Default::default() }
        }
        Message::User { content } => {
            MessageRecord { role: "user".into(), content: content.clone(), ts_ms, ..Default::default() }
        }
        Message::Assistant { content, tool_calls } => MessageRecord {
            role: "assistant".into(),
            content: content.clone().unwrap_or_default(),
            tool_calls: (!tool_calls.is_empty()).then(|| serde_json::to_string(tool_calls).unwrap_or_default()),
            ts_ms,
            ..Default::default()
        },
        Message::Tool { call_id, name, content, is_error } => MessageRecord {
            role: "tool".into(),
            content: content.clone(),
            tool_call_id: Some(call_id.clone()),
            tool_name: Some(name.clone()),
            is_error: *is_error,
            ts_ms,
            ..Default::default()
        },
    }
}

/// A stored record as a message (for continuing a session).
pub(crate) fn from_record(r: &MessageRecord) -> Message {
    match r.role.as_str() {
        "system" => Message::System { content: r.content.clone() },
        "assistant" => Message::Assistant {
            content: (!r.content.is_empty()).then(|| r.content.clone()),
            tool_calls: r.tool_calls.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default(),
        },
        "tool" => Message::Tool {
            call_id: r.tool_call_id.clone().unwrap_or_default(),
            name: r.tool_name.clone().unwrap_or_default(),
            content: r.content.clone(),
            is_error: r.is_error,
        },
        _ => Message::User { content: r.content.clone() },
    }
}
