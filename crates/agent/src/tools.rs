//! The agent tools, registered in the gate so models (and MCP clients) reach the runtime
//! through the same pipeline as every other tool: `agents_list`, `sessions_list`,
//! `sessions_history`, `session_status`, `sessions_send`, `sessions_spawn`, `subagents`,
//! `delegate`, `delegate_search`, `evaluate_loop`, `handoff`, `team_tasks` and `team_message`.
//!
//! Every tool acts as the agent and session its [`CallContext`] names: a model can only list,
//! steer or cancel what its own session started, and only read sessions of its own user.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_store::{SessionFilter, SessionQuery, SessionRecord, TaskFilter, TaskOrder, TeamMessage, TeamTask};

use crate::runtime::{RunSpec, Runtime, SessionKind, clip, clip_text};
use crate::{AgentError, now_ms};

/// The group of the session tools (`group:sessions` in policy; seed 000 §2).
pub const GROUP: &str = "sessions";
/// The group of the delegation tools: `delegate`, `delegate_search`, `evaluate_loop`, `handoff`.
pub const DELEGATION_GROUP: &str = "delegation";
/// The group of the team tools: `team_tasks`, `team_message`.
pub const TEAMS_GROUP: &str = "teams";

/// Deadline of an agent tool call that waits for a run (`subagents run`, `delegate` sync, ...).
pub const WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

#[derive(Debug, Clone, Copy)]
enum Kind {
    AgentsList,
    SessionsList,
    SessionsHistory,
    SessionStatus,
    SessionsSend,
    SessionsSpawn,
    Subagents,
    Delegate,
    DelegateSearch,
    EvaluateLoop,
    Handoff,
    TeamTasks,
    TeamMessage,
}

impl Kind {
    /// Its policy group, as seed 000 §2 groups them: the coding profile's `group:sessions`
    /// does not grant delegation or teams.
    fn group(self) -> &'static str {
        match self {
            Kind::Delegate | Kind::DelegateSearch | Kind::EvaluateLoop | Kind::Handoff => DELEGATION_GROUP,
            Kind::TeamTasks | Kind::TeamMessage => TEAMS_GROUP,
            _ => GROUP,
        }
    }
}

/// One agent tool.
#[derive(Debug)]
struct AgentTool {
    spec: ToolSpec,
    kind: Kind,
    rt: Arc<Runtime>,
}

/// Every agent tool, bound to `rt`.
pub fn tools(rt: &Arc<Runtime>) -> Vec<Arc<dyn Tool>> {
    let t = |kind: Kind, spec: ToolSpec| {
        Arc::new(AgentTool { spec: spec.group(kind.group()), kind, rt: rt.clone() }) as Arc<dyn Tool>
    };
    let s = |name: &str| json!({"type": "string", "description": name, "maxLength": 200});
    vec![
        t(Kind::AgentsList, ToolSpec::new("agents_list", "List the configured agents you can spawn or delegate to, with what each is for.", json!({"type": "object", "properties": {}, "additionalProperties": false})).annotations(Annotations::READ_ONLY)),
        t(Kind::SessionsList, ToolSpec::new("sessions_list", "List recent agent sessions (newest first): id, agent, status, task.", json!({
            "type": "object", "additionalProperties": false,
            "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "agent": s("only this agent's sessions")},
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::SessionsHistory, ToolSpec::new("sessions_history", "Read a session's messages: the task, model turns, tool calls and results.", json!({
            "type": "object", "additionalProperties": false, "required": ["session_id"],
            "properties": {"session_id": s("the session id"), "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::SessionStatus, ToolSpec::new("session_status", "A session's status, message count, token usage and cost (default: your own session).", json!({
            "type": "object", "additionalProperties": false,
            "properties": {"session_id": s("the session id")},
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::SessionsSend, ToolSpec::new("sessions_send", "Send a message to one of your sessions: a finished one continues the conversation and answers; a running one reads it before its next model turn.", json!({
            "type": "object", "additionalProperties": false, "required": ["session_id", "message"],
            "properties": {"session_id": s("the session id"), "message": {"type": "string", "maxLength": 100000}},
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::SessionsSpawn, ToolSpec::new("sessions_spawn", spawn_description(&rt.config().agents_defaults.research_tools), json!({
            "type": "object", "additionalProperties": false, "required": ["prompt"],
            "properties": {"prompt": {"type": "string", "minLength": 1, "maxLength": 100000}, "agent": s("the agent to run (default: yours)"), "label": s("a short label")},
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::Subagents, ToolSpec::new("subagents", "Manage sub-agents: spawn (background, returns an id), run (waits for the answer), list, cancel (id, `all` or `last`), steer (restart a running one with a new instruction).", json!({
            "type": "object", "additionalProperties": false, "required": ["action"],
            "properties": {
                "action": {"type": "string", "enum": ["spawn", "run", "list", "cancel", "steer"]},
                "task": {"type": "string", "maxLength": 100000}, "id": s("a task id, `all` or `last`"),
                "message": {"type": "string", "maxLength": 100000}, "agent": s("the agent to run (default: yours)"), "label": s("a short label"),
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::Delegate, ToolSpec::new("delegate", "Delegate a task to another agent you are linked to: delegate (the default action; mode sync waits, async returns an id), cancel, list, history.", json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "action": {"type": "string", "enum": ["delegate", "cancel", "list", "history"], "default": "delegate"},
                "agent": s("the agent to delegate to"), "task": {"type": "string", "maxLength": 100000},
                "mode": {"type": "string", "enum": ["sync", "async"], "default": "sync"}, "id": s("a delegation id"),
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::DelegateSearch, ToolSpec::new("delegate_search", "Find the agents you can delegate a task to, best match first (by name and description).", json!({
            "type": "object", "additionalProperties": false, "required": ["query"],
            "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "what the task needs"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}},
        })).annotations(Annotations::READ_ONLY)),
        t(Kind::EvaluateLoop, ToolSpec::new("evaluate_loop", "Have one agent write and another review against your criteria, revising until the reviewer approves (APPROVED / REJECTED: feedback) or the rounds run out. Both need a delegation link from you.", json!({
            "type": "object", "additionalProperties": false, "required": ["generator", "evaluator", "task"],
            "properties": {
                "generator": s("the agent that writes"), "evaluator": s("the agent that reviews"),
                "task": {"type": "string", "minLength": 1, "maxLength": 100000},
                "criteria": {"type": "string", "maxLength": 20000, "description": "what the work must meet to pass"},
                "max_rounds": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::Handoff, ToolSpec::new("handoff", "Hand the conversation with the user to another agent you are linked to: it answers the user from now on, and your turn ends. `action: clear` hands a conversation you were given back to the agent that handed it over.", json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "agent": s("the agent to hand the conversation to"), "reason": {"type": "string", "maxLength": 2000, "description": "why, for the next agent"},
                "action": {"type": "string", "enum": ["handoff", "clear"], "default": "handoff"},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::TeamTasks, ToolSpec::new("team_tasks", "Your team's task board: list (filter active/completed/all, order priority/newest), create (lead; blocked_by for order), claim (a task_id, or none for the next pending task; atomic: one claimer wins), complete (with your result; unblocks tasks waiting on it), search (full text over subject, description and result).", json!({
            "type": "object", "additionalProperties": false, "required": ["action"],
            "properties": {
                "action": {"type": "string", "enum": ["list", "create", "claim", "complete", "search"]},
                "team": s("the team (default: your first team)"), "subject": {"type": "string", "maxLength": 500},
                "description": {"type": "string", "maxLength": 20000}, "priority": {"type": "integer", "minimum": -100, "maximum": 100},
                "blocked_by": {"type": "array", "items": {"type": "integer"}, "maxItems": 50},
                "task_id": {"type": "integer"}, "result": {"type": "string", "maxLength": 100000}, "query": s("words to look for"),
                "filter": {"type": "string", "enum": ["active", "completed", "all"], "default": "active", "description": "list: active (pending, claimed, blocked), completed or all"},
                "order": {"type": "string", "enum": ["priority", "newest"], "default": "priority", "description": "list: priority (highest first, then oldest) or newest first"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
        t(Kind::TeamMessage, ToolSpec::new("team_message", "Message your team: send (to one member), broadcast (to every other member), read (your unread messages, which are then marked read; with `after`, the history after that id).", json!({
            "type": "object", "additionalProperties": false, "required": ["action"],
            "properties": {
                "action": {"type": "string", "enum": ["send", "broadcast", "read"]}, "team": s("the team (default: your first team)"),
                "to": s("the member"), "content": {"type": "string", "maxLength": 20000},
                "after": {"type": "integer", "minimum": 0, "description": "read: the history, the 200 messages after this id, marking nothing read (default: your unread messages)"},
            },
        })).annotations(Annotations::LOCAL_WRITE)),
    ]
}

#[async_trait]
impl Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Calls that wait for another agent's run get a deadline fit for a model run, not the
    /// gate's default for one tool call; the runs have their own iteration limits.
    fn safety(&self, p: &Value) -> CallSafety {
        let waits = match self.kind {
            Kind::SessionsSend | Kind::SessionsSpawn => true,
            Kind::Subagents => matches!(p["action"].as_str(), Some("run" | "steer")),
            Kind::EvaluateLoop => true,
            Kind::Delegate => {
                p["action"].as_str().unwrap_or("delegate") == "delegate" && p["mode"].as_str() != Some("async")
            }
            _ => false,
        };
        CallSafety { timeout: waits.then_some(WAIT_TIMEOUT), ..CallSafety::default() }
    }

    async fn execute(&self, ctx: &CallContext, p: Value) -> Result<ToolOutput, ToolError> {
        let name = self.spec.name.as_str();
        let r = &self.rt;
        let result = match self.kind {
            Kind::AgentsList => Ok(agents_list(r, ctx)),
            Kind::SessionsList => {
                let limit = p["limit"].as_u64().unwrap_or(20).clamp(1, 100) as usize;
                let filter = SessionFilter {
                    agent: p["agent"].as_str(),
                    user: Some(&ctx.identity.user),
                    limit,
                    ..Default::default()
                };
                r.sessions(&filter).map(|list| {
                    let rows: Vec<Value> = list.iter().map(session_json).collect();
                    // The gate's MCP sessions too (from the audit log), unless one agent's are asked for.
                    let mcp = if filter.agent.is_none() { mcp_sessions(r, ctx, limit) } else { Vec::new() };
                    ToolOutput::json(json!({ "sessions": rows, "mcp_sessions": mcp }))
                })
            }
            Kind::SessionsHistory => {
                let id = req_str(name, &p, "session_id")?;
                let limit = p["limit"].as_u64().unwrap_or(50).clamp(1, 200) as usize;
                match own_session(r, ctx, id) {
                    Ok(_) => r
                        .store()
                        .session_messages(id, limit)
                        .map(|msgs| ToolOutput::json(json!({ "session_id": id, "messages": msgs })))
                        .map_err(AgentError::from),
                    // The caller's own session that the runtime does not keep: what was announced to it.
                    Err(_) if id == ctx.identity.session => Ok(caller_history(r, ctx, id, limit)),
                    Err(e) => Err(e),
                }
            }
            Kind::SessionStatus => {
                let id = p["session_id"].as_str().unwrap_or(&ctx.identity.session);
                match own_session(r, ctx, id) {
                    Ok(s) => Ok(ToolOutput::json(session_json(&s))),
                    Err(_) if id == ctx.identity.session => caller_status(r, ctx).map(ToolOutput::json),
                    Err(e) => Err(e),
                }
            }
            Kind::SessionsSend => {
                let id = req_str(name, &p, "session_id")?;
                let message = req_str(name, &p, "message")?;
                // A message from one agent to another passes the leak detector first.
                let message = r.scrub_as(ctx, message);
                match own_session(r, ctx, id) {
                    Ok(_) => match r.send_queued(id, &message).await {
                        Ok(Some(to)) => Ok(ToolOutput::json(json!({
                            "session_id": to, "status": "queued",
                            "note": "the session is running: it reads your message before its next model turn; its answer is in sessions_history",
                        }))),
                        // Continued under the caller's grants (a gateway's), not the gate's base
                        // context: a session is no way around them.
                        Ok(None) => r
                            .send_under(id, &message, None, ctx.grants.clone())
                            .await
                            .map(|o| ToolOutput::text(o.for_model())),
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                }
            }
            Kind::SessionsSpawn => {
                let prompt = req_str(name, &p, "prompt")?;
                let mut spec = RunSpec::new(agent_or_own(&p, ctx), prompt);
                spec.kind = SessionKind::Spawn;
                spec.label = p["label"].as_str().map(str::to_owned);
                spec.only_tools = Some(r.config().agents_defaults.research_tools.clone());
                r.run_child(spec, ctx).await.map(|o| ToolOutput::text(o.for_model()))
            }
            Kind::Subagents => subagents(r, ctx, &p).await,
            Kind::Delegate => delegate(r, ctx, &p).await,
            Kind::DelegateSearch => delegate_search(r, ctx, &p).await,
            Kind::EvaluateLoop => {
                let (generator, evaluator) = (req_str(name, &p, "generator")?, req_str(name, &p, "evaluator")?);
                let task = req_str(name, &p, "task")?;
                let criteria = p["criteria"].as_str().unwrap_or_default();
                let rounds = p["max_rounds"].as_u64().unwrap_or(3) as u32;
                r.evaluate_loop(ctx, generator, evaluator, task, criteria, rounds).await.map(|v| {
                    let text = v["output"].as_str().unwrap_or_default().to_owned();
                    let head = if v["approved"] == true {
                        format!("[approved after {} round(s)]", v["rounds"])
                    } else {
                        format!(
                            "[not approved after {} round(s); last feedback: {}]",
                            v["rounds"],
                            v["feedback"].as_str().unwrap_or_default()
                        )
                    };
                    ToolOutput::text(format!("{head}\n{text}")).with_meta(v)
                })
            }
            Kind::Handoff => handoff(r, ctx, &p),
            Kind::TeamTasks => team_tasks(r, ctx, &p),
            Kind::TeamMessage => team_message(r, ctx, &p),
        };
        result.map_err(|e| to_tool_error(name, e))
    }
}

fn to_tool_error(tool: &str, e: AgentError) -> ToolError {
    match e {
        AgentError::Cancelled => ToolError::Cancelled,
        AgentError::Invalid(m) => ToolError::invalid(tool, "", m),
        AgentError::Model { .. } | AgentError::Provider { .. } => {
            ToolError::ExternalService { service: "model".to_owned(), message: e.to_string() }
        }
        other => ToolError::failed(other.to_string()),
    }
}

fn req_str<'a>(tool: &str, p: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    p[key]
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolError::invalid(tool, format!("/{key}"), format!("`{key}` is required for this action")))
}

fn need<'a>(p: &'a Value, key: &str, action: &str) -> Result<&'a str, AgentError> {
    p[key]
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| AgentError::Invalid(format!("`{key}` is required for action `{action}`")))
}

fn agent_or_own(p: &Value, ctx: &CallContext) -> String {
    p["agent"].as_str().unwrap_or(&ctx.identity.agent).to_owned()
}

/// The session, if it exists and belongs to the caller's user.
fn own_session(r: &Runtime, ctx: &CallContext, id: &str) -> Result<SessionRecord, AgentError> {
    match r.store().session(id)? {
        Some(s) if s.user == ctx.identity.user => Ok(s),
        _ => Err(AgentError::Invalid(format!("no session `{}`; list them with sessions_list", clip(id)))),
    }
}

/// How long a caller's MCP session stays in `sessions_list` after its last call.
const MCP_SESSIONS_LISTED_FOR_MS: i64 = 7 * 24 * 3600 * 1000;

/// What kind of caller a session id the runtime does not keep belongs to (`crates/mcp`'s
/// `session.rs` names them).
fn caller_kind(id: &str) -> &'static str {
    if id.starts_with("mcp-stdio-") {
        "mcp (stdio)"
    } else if id.starts_with("mcp-key-") {
        "mcp (stateless HTTP: one per credential)"
    } else if id.starts_with("mcp-") {
        "mcp (HTTP session)"
    } else {
        "cli or library"
    }
}

/// The caller's MCP sessions with calls in the last week, most recently active first.
fn mcp_sessions(r: &Runtime, ctx: &CallContext, limit: usize) -> Vec<Value> {
    let Ok(caller) = r.caller() else { return Vec::new() };
    let query = SessionQuery {
        user: &ctx.identity.user,
        session: None,
        prefix: "mcp-",
        since_ms: now_ms() - MCP_SESSIONS_LISTED_FOR_MS,
        limit,
    };
    caller
        .session_calls(&query)
        .into_iter()
        .map(|c| {
            json!({"id": c.session, "kind": caller_kind(&c.session), "agent": c.agent, "calls": c.calls,
                "first_ms": c.first_ms, "last_ms": c.last_ms, "you": c.session == ctx.identity.session})
        })
        .collect()
}

/// `session_status` of the caller's own session when the runtime does not keep it (an MCP
/// client's, a CLI call's): its calls from the audit log, and the tokens and cost of the agent
/// sessions it started.
fn caller_status(r: &Runtime, ctx: &CallContext) -> Result<Value, AgentError> {
    let id = ctx.identity.session.as_str();
    let query = SessionQuery { user: &ctx.identity.user, session: Some(id), limit: 1, ..SessionQuery::default() };
    let calls = r.caller()?.session_calls(&query).into_iter().next();
    let filter = SessionFilter { parent: Some(id), user: Some(&ctx.identity.user), limit: 1000, ..Default::default() };
    let children = r.sessions(&filter)?;
    let (input, output, cost) =
        children.iter().fold((0, 0, 0.0), |(i, o, c), s| (i + s.input_tokens, o + s.output_tokens, c + s.cost_usd));
    Ok(json!({
        "id": id, "kind": caller_kind(id), "user": ctx.identity.user, "agent": ctx.identity.agent,
        "calls": calls.as_ref().map_or(0, |c| c.calls),
        "first_ms": calls.as_ref().map(|c| c.first_ms), "last_ms": calls.as_ref().map(|c| c.last_ms),
        "agent_sessions_started": children.len(),
        "input_tokens": input, "output_tokens": output, "cost_usd": cost,
        "announcements": r.kept_announcements(&ctx.identity.user, id).len(),
        "note": "calls counts the calls this session made before this one (the audit log); tokens and cost are those of the agent sessions it started",
    }))
}

/// `sessions_history` of the caller's own session when the runtime does not keep it: what was
/// announced to it (finished background runs), oldest first.
fn caller_history(r: &Runtime, ctx: &CallContext, id: &str, limit: usize) -> ToolOutput {
    let kept = r.kept_announcements(&ctx.identity.user, id);
    let skip = kept.len().saturating_sub(limit);
    let messages: Vec<Value> = kept
        .into_iter()
        .skip(skip)
        .map(|(ts_ms, text)| json!({"role": "user", "content": text, "ts_ms": ts_ms}))
        .collect();
    ToolOutput::json(json!({
        "session_id": id, "kind": caller_kind(id), "messages": messages,
        "note": "a session of an MCP client or a CLI call: these are the announcements of the background runs it started; its calls are in the audit log (toolgate audit)",
    }))
}

fn session_json(s: &SessionRecord) -> Value {
    json!({
        "id": s.id, "agent": s.agent, "kind": s.kind, "status": s.status, "label": s.label,
        "parent": s.parent, "depth": s.depth, "task": clip_text(&s.task, 300),
        "result": s.result.as_deref().map(|t| clip_text(t, 2000)), "error": s.error,
        "messages": s.message_count, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
        "cost_usd": s.cost_usd, "created_ms": s.created_ms, "updated_ms": s.updated_ms,
    })
}

fn agents_list(r: &Runtime, ctx: &CallContext) -> ToolOutput {
    let cfg = r.config();
    let targets = cfg.targets(&ctx.identity.agent, &ctx.identity.user);
    let rows: Vec<Value> = cfg
        .agents
        .iter()
        .map(|(name, a)| {
            json!({
                "name": name, "description": a.description, "type": a.kind,
                "can_delegate": targets.contains(name), "model": a.model,
            })
        })
        .collect();
    if rows.is_empty() {
        let note = "no agents are configured: add [providers.NAME] and [agents.NAME] to toolgate.toml to spawn sub-agents or delegate (docs/agents.md)";
        return ToolOutput::json(json!({ "agents": rows, "you": ctx.identity.agent, "note": note }));
    }
    ToolOutput::json(json!({ "agents": rows, "you": ctx.identity.agent }))
}

fn handoff(r: &Runtime, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    match p["action"].as_str().unwrap_or("handoff") {
        "clear" => {
            let back = r.handoff_clear(ctx)?;
            Ok(ToolOutput::text(format!(
                "Handed the conversation back to `{back}`: the user's next message goes to them. Finish with a short note to the user."
            )))
        }
        "handoff" => {
            let to = need(p, "agent", "handoff")?;
            // The reason reaches the next agent: an agent-to-agent message, scrubbed.
            let session = r.handoff(ctx, to, &r.scrub_as(ctx, p["reason"].as_str().unwrap_or_default()))?;
            // The runner ends the handing agent's run on this result (`handoff_to`).
            Ok(ToolOutput::text(format!("Handed the conversation to `{to}`; it answers the user from now on."))
                .with_meta(json!({"handoff_to": to, "session": session})))
        }
        other => Err(AgentError::Invalid(format!("unknown action `{}`; use handoff or clear", clip(other)))),
    }
}

/// The caller's delegation targets ranked by BM25 over name and description, fused with the
/// embedder's ranking by meaning when there is one (seed 000 §7's `delegate_search`, for agents
/// with more targets than `DELEGATION.md` lists; `search.rs`).
async fn delegate_search(r: &Arc<Runtime>, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    let targets = r.config().targets(&ctx.identity.agent, &ctx.identity.user);
    let query = p["query"].as_str().unwrap_or_default().to_owned();
    let limit = p["limit"].as_u64().unwrap_or(5).clamp(1, 20) as usize;
    if r.vectors().is_none() {
        return Ok(ToolOutput::json(crate::search::rank(r.config(), &targets, &query, limit, None)));
    }
    // The model may run (loading it, embedding the agents or the query): off the async threads.
    let (rt, t, q) = (Arc::clone(r), targets.clone(), query.clone());
    let found = match tokio::task::spawn_blocking(move || crate::search::rank(rt.config(), &t, &q, limit, rt.vectors()))
        .await
    {
        Ok(found) => found,
        // The model panicked: keywords still rank.
        Err(e) => {
            let mut found = crate::search::rank(r.config(), &targets, &query, limit, None);
            found["notes"][0] =
                format!("semantic ranking unavailable: the embedding model failed ({e}); ranked by keywords").into();
            found
        }
    };
    Ok(ToolOutput::json(found))
}

/// `sessions_spawn`'s description: it names exactly the configured research set.
fn spawn_description(tools: &[String]) -> String {
    // Seed 002 §8's six: all read-only.
    const READ_ONLY: &[&str] = &["read", "grep", "glob", "ls", "memory_search", "memory_get"];
    let kind = if tools.iter().all(|t| READ_ONLY.contains(&t.as_str())) { "a read-only" } else { "a" };
    let list = if tools.is_empty() { "none".to_owned() } else { tools.join(", ") };
    format!(
        "Spawn {kind} research sub-agent on a task; waits and returns its answer. It is offered only these tools \
         (fewer if its policy hides some): {list}."
    )
}

async fn subagents(r: &Arc<Runtime>, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    let action = p["action"].as_str().unwrap_or_default();
    let parent = ctx.identity.session.as_str();
    match action {
        "spawn" | "run" => {
            let mut spec = RunSpec::new(agent_or_own(p, ctx), need(p, "task", action)?);
            spec.kind = SessionKind::Subagent;
            spec.label = p["label"].as_str().map(str::to_owned);
            if action == "spawn" {
                let id = r.spawn(spec, ctx)?;
                Ok(ToolOutput::json(json!({"id": id, "status": "running",
                    "note": "check on it with subagents list; cancel or steer it by id"})))
            } else {
                let o = r.run_child(spec, ctx).await?;
                Ok(ToolOutput::text(o.for_model()).with_meta(json!({"id": o.session, "status": o.status})))
            }
        }
        "list" => Ok(ToolOutput::json(json!({ "subagents": r.list(parent, false) }))),
        "cancel" => {
            let ids = r.cancel(parent, need(p, "id", action)?, false)?;
            Ok(ToolOutput::json(json!({ "cancelled": ids })))
        }
        "steer" => {
            let id = r.steer(parent, need(p, "id", action)?, need(p, "message", action)?).await?;
            Ok(ToolOutput::json(
                json!({"id": id, "status": "running", "note": "the old task was cancelled; this is its replacement"}),
            ))
        }
        other => {
            Err(AgentError::Invalid(format!("unknown action `{}`; use spawn, run, list, cancel or steer", clip(other))))
        }
    }
}

async fn delegate(r: &Arc<Runtime>, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    // `delegate_to_agent {target_agent_id, task}` (seed 001) arrives here without an action.
    let action = p["action"].as_str().unwrap_or("delegate");
    let parent = ctx.identity.session.as_str();
    match action {
        "delegate" => {
            let mut spec = RunSpec::new(need(p, "agent", action)?, need(p, "task", action)?);
            spec.kind = SessionKind::Delegation;
            if p["mode"].as_str() == Some("async") {
                let id = r.spawn(spec, ctx)?;
                Ok(ToolOutput::json(json!({"id": id, "status": "running", "note": "check on it with delegate list"})))
            } else {
                let o = r.run_child(spec, ctx).await?;
                Ok(ToolOutput::text(o.for_model()).with_meta(json!({"id": o.session, "status": o.status})))
            }
        }
        "list" => Ok(ToolOutput::json(json!({ "delegations": r.list(parent, true) }))),
        "cancel" => Ok(ToolOutput::json(json!({ "cancelled": r.cancel(parent, need(p, "id", action)?, true)? }))),
        "history" => {
            let filter =
                SessionFilter { parent: Some(parent), kind: Some("delegation"), limit: 50, ..Default::default() };
            let rows: Vec<Value> = r.sessions(&filter)?.iter().map(session_json).collect();
            Ok(ToolOutput::json(json!({ "delegations": rows })))
        }
        other => {
            Err(AgentError::Invalid(format!("unknown action `{}`; use delegate, cancel, list or history", clip(other))))
        }
    }
}

/// The team the caller names (or its first), checking membership.
fn team(r: &Runtime, ctx: &CallContext, p: &Value) -> Result<(String, bool), AgentError> {
    let me = ctx.identity.agent.as_str();
    let teams = &r.config().teams;
    let found = match p["team"].as_str() {
        Some(t) => teams.get_key_value(t),
        None => teams.iter().find(|(_, t)| t.lead == me || t.members.iter().any(|m| m == me)),
    };
    match found {
        Some((name, t)) if t.lead == me || t.members.iter().any(|m| m == me) => Ok((name.clone(), t.lead == me)),
        Some((name, _)) => Err(AgentError::Invalid(format!("you (`{me}`) are not a member of team `{name}`"))),
        None => {
            Err(AgentError::Invalid(format!("no team of yours (`{me}`) by that name; teams are set in [teams.NAME]")))
        }
    }
}

/// Most unread messages one `team_message read` returns; the rest stay unread for the next.
const UNREAD_PAGE: usize = 100;

fn task_filter(p: &Value) -> Result<TaskFilter, AgentError> {
    match p["filter"].as_str().unwrap_or("active") {
        "active" => Ok(TaskFilter::Active),
        "completed" => Ok(TaskFilter::Completed),
        "all" => Ok(TaskFilter::All),
        other => Err(AgentError::Invalid(format!("unknown filter `{}`; use active, completed or all", clip(other)))),
    }
}

fn task_order(p: &Value) -> Result<TaskOrder, AgentError> {
    match p["order"].as_str().unwrap_or("priority") {
        "priority" => Ok(TaskOrder::Priority),
        "newest" => Ok(TaskOrder::Newest),
        other => Err(AgentError::Invalid(format!("unknown order `{}`; use priority or newest", clip(other)))),
    }
}

fn team_tasks(r: &Arc<Runtime>, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    let action = p["action"].as_str().unwrap_or_default();
    let (team, lead) = team(r, ctx, p)?;
    let me = ctx.identity.agent.as_str();
    let store = r.store();
    let limit = p["limit"].as_u64().unwrap_or(100).clamp(1, 500) as usize;
    match action {
        "list" => {
            let tasks = store.team_tasks(&team, task_filter(p)?, task_order(p)?, limit)?;
            Ok(ToolOutput::json(json!({"team": team, "tasks": tasks})))
        }
        "search" => {
            let tasks = store.team_tasks_search(&team, need(p, "query", action)?, limit)?;
            let note = tasks.is_empty().then_some("no task matches those words; try others, or list the tasks");
            Ok(ToolOutput::json(json!({"team": team, "tasks": tasks, "note": note})))
        }
        "create" => {
            if !lead {
                return Err(AgentError::Invalid(format!(
                    "only the lead of team `{team}` creates tasks; message the lead instead"
                )));
            }
            let mut blocked_by = Vec::new();
            for v in p["blocked_by"].as_array().into_iter().flatten() {
                blocked_by.push(v.as_i64().ok_or_else(|| {
                    AgentError::Invalid("`blocked_by` lists task ids (integers) from this board".to_owned())
                })?);
            }
            // What one agent writes for others to read passes the leak detector first.
            let subject = r.scrub(need(p, "subject", action)?);
            let task = store.team_task_create(&TeamTask {
                team: team.clone(),
                subject,
                description: r.scrub(p["description"].as_str().unwrap_or_default()),
                priority: p["priority"].as_i64().unwrap_or(0),
                blocked_by,
                created_ms: now_ms(),
                posted_session: Some(ctx.identity.session.clone()),
                posted_user: Some(ctx.identity.user.clone()),
                ..TeamTask::default()
            })?;
            r.team_board_changed(&team, ctx);
            let note = match r.team_stopped(&team) {
                Some(why) => format!("team `{team}` is stopped ({why}): no member will be started for it"),
                None if task.status == "blocked" => {
                    "members are started for it once the tasks it waits on are done".to_owned()
                }
                None => {
                    "members are started to claim it; each result comes back to you as a `teammate:` message".to_owned()
                }
            };
            Ok(ToolOutput::json(json!({"created": task, "note": note})))
        }
        "claim" => {
            let id = match &p["task_id"] {
                Value::Null => None,
                v => Some(v.as_i64().ok_or_else(|| {
                    AgentError::Invalid(
                        "`task_id` is a task's id (an integer); leave it out to take the next pending task".to_owned(),
                    )
                })?),
            };
            let now = now_ms();
            let lease = r.config().teams[&team].lease();
            match store.team_task_claim(
                &team,
                id,
                me,
                &ctx.identity.session,
                now,
                now.saturating_add(lease.as_millis() as i64),
            )? {
                Some(t) => Ok(ToolOutput::json(json!({"claimed": t,
                    "note": "work on it, then complete it with your result (team_tasks complete, task_id, result)"}))),
                None if id.is_none() => Err(AgentError::Invalid(
                    "no task is pending (all are claimed, blocked or done); list the tasks, or finish".to_owned(),
                )),
                None => Err(AgentError::Invalid(
                    "that task is not pending (claimed by someone else, blocked, done, or unknown); list the tasks and claim another, or claim without task_id".to_owned(),
                )),
            }
        }
        "complete" => {
            let id = p["task_id"]
                .as_i64()
                .ok_or_else(|| AgentError::Invalid("`task_id` is required for action `complete`".to_owned()))?;
            let result = r.scrub(p["result"].as_str().unwrap_or_default());
            match store.team_task_complete(&team, id, me, &result)? {
                Some(t) => {
                    r.team_task_completed(&team, &t, ctx);
                    Ok(ToolOutput::json(json!({"completed": t, "note": "your result was sent to the lead"})))
                }
                None => Err(AgentError::Invalid(
                    "you do not hold that task (claim it first; a claim whose lease lapsed is gone); list the tasks"
                        .to_owned(),
                )),
            }
        }
        other => Err(AgentError::Invalid(format!(
            "unknown action `{}`; use list, create, claim, complete or search",
            clip(other)
        ))),
    }
}

fn team_message(r: &Arc<Runtime>, ctx: &CallContext, p: &Value) -> Result<ToolOutput, AgentError> {
    let action = p["action"].as_str().unwrap_or_default();
    let (team, _) = team(r, ctx, p)?;
    let me = ctx.identity.agent.clone();
    let store = r.store();
    match action {
        "send" | "broadcast" => {
            let to = if action == "send" {
                let to = need(p, "to", action)?;
                let t = &r.config().teams[&team];
                if t.lead != to && !t.members.iter().any(|m| m == to) {
                    return Err(AgentError::Invalid(format!("`{}` is not in team `{team}`", clip(to))));
                }
                Some(to.to_owned())
            } else {
                None
            };
            let id = store.team_message_send(&TeamMessage {
                team: team.clone(),
                from: me,
                to: to.clone(),
                content: r.scrub(need(p, "content", action)?),
                ts_ms: now_ms(),
                ..TeamMessage::default()
            })?;
            if let Some(to) = &to {
                r.team_message_sent(&team, to, ctx);
            }
            Ok(ToolOutput::json(json!({"sent": id})))
        }
        "read" => match p["after"].as_i64() {
            Some(after) => Ok(ToolOutput::json(json!({"messages": store.team_messages(&team, &me, Some(after))?}))),
            None => {
                let unread = store.team_messages_unread(&team, &me, UNREAD_PAGE)?;
                let note = if unread.is_empty() {
                    Some("no unread messages")
                } else if unread.len() == UNREAD_PAGE {
                    Some("there may be more: read again")
                } else {
                    None
                };
                Ok(ToolOutput::json(json!({"messages": unread, "note": note})))
            }
        },
        other => Err(AgentError::Invalid(format!("unknown action `{}`; use send, broadcast or read", clip(other)))),
    }
}
