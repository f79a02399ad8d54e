//! `toolgate agent run NAME "prompt" [--json]`, `toolgate agent send ID "message"`,
//! `toolgate agent sessions`, `toolgate agent history ID`.

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;
use toolgate::agent::{Event, RunSpec};
use toolgate::store::{SessionFilter, SessionStore};

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Run an agent on a prompt and print the transcript: model turns, tool calls, results, and
    /// each call's policy decision from the audit log.
    Run {
        /// The agent (`[agents.NAME]`).
        name: String,
        /// The task.
        prompt: String,
        /// Print the outcome, the messages and the audited calls as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send the next message of a conversation to a finished session (or, when the conversation
    /// was handed off, to the agent it was handed to) and print the transcript as `run` does.
    Send {
        /// The session id (from `run` or `sessions`).
        id: String,
        /// The message.
        message: String,
        /// Print the outcome, the messages and the audited calls as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List recent agent sessions.
    Sessions {
        /// How many (default 20).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only this agent's.
        #[arg(long = "of")]
        agent: Option<String>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's messages.
    History {
        /// The session id.
        id: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run { name, prompt, json } => run_agent(global, Turn::Start { name, prompt }, json).await,
        Command::Send { id, message, json } => run_agent(global, Turn::Continue { id, message }, json).await,
        Command::Sessions { limit, agent, json } => {
            let store = open_store(global)?;
            let list = store.sessions(&SessionFilter { agent: agent.as_deref(), limit, ..Default::default() })?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                outln!("no agent sessions yet (toolgate agent run NAME \"prompt\")");
            } else {
                for s in list {
                    outln!(
                        "{}  {:<12} {:<10} {:<9} msgs {:>3}  tokens {}/{}  ${:.4}  {}",
                        s.id,
                        s.agent,
                        s.kind,
                        s.status,
                        s.message_count,
                        s.input_tokens,
                        s.output_tokens,
                        s.cost_usd,
                        one_line(&s.task, 60)
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::History { id, json } => {
            let store = open_store(global)?;
            let Some(session) = store.session(&id)? else {
                eprintln!("error: no session `{id}` (toolgate agent sessions lists them)");
                return Ok(ExitCode::from(1));
            };
            let messages = store.session_messages(&id, 0)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&json!({"session": session, "messages": messages}))?);
            } else {
                outln!("session {} · agent {} · {} · {}", session.id, session.agent, session.kind, session.status);
                for m in messages {
                    match (m.role.as_str(), &m.tool_calls) {
                        ("assistant", Some(calls)) => {
                            if !m.content.is_empty() {
                                outln!("assistant: {}", m.content);
                            }
                            outln!("assistant calls: {calls}");
                        }
                        ("tool", _) => outln!(
                            "{} {}: {}",
                            if m.is_error { "tool error" } else { "tool" },
                            m.tool_name.as_deref().unwrap_or("?"),
                            one_line(&m.content, 400)
                        ),
                        (role, _) => outln!("{role}: {}", m.content),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The workspace's agent sessions: its state database, or the shared one with `[store] url`.
fn open_store(global: &GlobalArgs) -> anyhow::Result<Arc<dyn SessionStore>> {
    Ok(global.state()?.1.sessions)
}

/// A new run, or the next message of a conversation.
enum Turn {
    Start { name: String, prompt: String },
    Continue { id: String, message: String },
}

async fn run_agent(global: &GlobalArgs, turn: Turn, as_json: bool) -> anyhow::Result<ExitCode> {
    let gate = global.gate(true)?;
    gate.start_mcp();
    let Some(rt) = gate.agents().cloned() else {
        anyhow::bail!(
            "no agents are configured: add [providers.NAME] and [agents.NAME] to toolgate.toml (docs/agents.md)"
        );
    };
    let mut events: Option<toolgate::agent::EventSink> = None;
    if !as_json {
        events = Some(Arc::new(|event: &Event<'_>| match event {
            Event::Assistant { text, calls, .. } => {
                if let Some(text) = text {
                    outln!("assistant: {text}");
                }
                for c in *calls {
                    outln!("→ {}({})", c.name, one_line(&c.arguments, 300));
                }
            }
            Event::ToolResult { call, is_error, content, .. } => {
                let mark = if *is_error { "✗" } else { "←" };
                outln!("{mark} {}: {}", call.name, one_line(content, 400));
            }
            _ => {}
        }));
    }
    let ctx = gate.context();
    let exchange = async {
        match turn {
            Turn::Start { name, prompt } => {
                let mut spec = RunSpec::new(name, prompt);
                spec.events = events;
                rt.run(spec, &ctx).await
            }
            Turn::Continue { id, message } => rt.send(&id, &message, events).await,
        }
    };
    let outcome = tokio::select! {
        o = exchange => o,
        _ = tokio::signal::ctrl_c() => {
            rt.shutdown();
            gate.shutdown();
            eprintln!("interrupted");
            return Ok(ExitCode::from(130));
        }
    };
    gate.shutdown();
    let outcome = outcome?;
    // The decisions, from the audit log: every call of this session and of the sessions it
    // started (sub-agents, delegations, reviewers) or was handed from.
    let store = open_store(global).ok();
    let family = store.as_ref().map(|s| family(s.as_ref(), &outcome.session)).unwrap_or_default();
    let db = global.workspace()?.join(".toolgate/state.db");
    let audited: Vec<_> = super::audit::Log::open(global, &db)
        .ok()
        .flatten()
        .and_then(|log| log.tail(10_000).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|r| family.contains(&r.session))
        .collect();
    if as_json {
        let messages = store.as_ref().and_then(|s| s.session_messages(&outcome.session, 0).ok()).unwrap_or_default();
        let calls: Vec<_> = audited
            .iter()
            .map(|r| json!({"tool": r.tool, "decision": r.decision, "outcome": r.outcome, "error": r.error, "params": r.params}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&json!({"outcome": outcome, "messages": messages, "calls": calls}))?);
    } else {
        for r in &audited {
            outln!("audit: {} {} · {}", r.tool, r.outcome, one_line(&r.decision, 200));
        }
        outln!(
            "session {} · {} · {} turns · {} tool calls · tokens {}/{} · ${:.4}",
            outcome.session,
            outcome.status.as_str(),
            outcome.iterations,
            outcome.tool_calls,
            outcome.usage.input_tokens,
            outcome.usage.output_tokens,
            outcome.cost_usd
        );
        if let Some(e) = &outcome.error {
            eprintln!("error: {e}");
        }
    }
    Ok(if outcome.status == toolgate::agent::RunStatus::Done { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `session`, the sessions above it (a handoff's origin) and every session below those.
fn family(store: &dyn SessionStore, session: &str) -> std::collections::HashSet<String> {
    let mut root = session.to_owned();
    for _ in 0..32 {
        match store.session(&root) {
            Ok(Some(s)) => match s.parent {
                Some(p) => root = p,
                None => break,
            },
            _ => break,
        }
    }
    let mut out = std::collections::HashSet::from([root.clone()]);
    let mut queue = vec![root];
    while let Some(id) = queue.pop() {
        let children = store.sessions(&SessionFilter { parent: Some(&id), limit: 1000, ..Default::default() });
        for c in children.unwrap_or_default() {
            if out.insert(c.id.clone()) && out.len() < 10_000 {
                queue.push(c.id);
            }
        }
    }
    out
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() <= max { flat } else { format!("{}…", flat.chars().take(max).collect::<String>()) }
}
