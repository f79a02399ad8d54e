//! Handoff (seed 000 §10): an agent passes the conversation it holds with the user to another
//! agent and steps away. The route lives in the store (`handoff_routes`): the user's next
//! messages to the conversation go to the new agent's session until that agent hands it back
//! with `handoff(action="clear")`.
//!
//! The `handoff` call records the route and a pending start; the runner ends the handing
//! agent's run after the call, and the runtime then starts the new agent's session with the
//! conversation so far, so the user gets the new agent's answer to the same message.

use toolgate_core::CallContext;
use toolgate_store::HandoffRoute;

use super::{Message, RunSpec, Runtime, SessionKind, clip, clip_text, new_id};
use crate::runner::{EventSink, RunOutcome};
use crate::{AgentError, now_ms};

/// Handoffs followed one after another in one exchange, at most (A → B → C ...).
const MAX_HOPS: usize = 5;

/// Messages of the conversation passed to the new agent, at most (the newest).
const CONTEXT_MESSAGES: usize = 12;

/// A handoff to start once the handing agent's run ends.
pub(super) struct Pending {
    spec: RunSpec,
    ctx: CallContext,
    id: String,
}

impl Runtime {
    /// Hands the conversation of the caller's session to `to`. Returns the new session's id.
    pub fn handoff(&self, ctx: &CallContext, to: &str, reason: &str) -> Result<String, AgentError> {
        let me = ctx.identity.session.as_str();
        let from = ctx.identity.agent.as_str();
        let record = self.store.session(me)?.filter(|r| r.user == ctx.identity.user).ok_or_else(|| {
            AgentError::Invalid(
                "handoff works inside an agent session that talks to the user (toolgate agent run / send)".to_owned(),
            )
        })?;
        if ctx.subagent_depth > 0 || !matches!(record.kind.as_str(), "run" | "handoff") {
            return Err(AgentError::Invalid(format!(
                "you are a {} of another agent, not talking to the user: report back instead of handing off",
                if ctx.subagent_depth > 0 { "sub-agent" } else { "delegate" }
            )));
        }
        if to == from {
            return Err(AgentError::Invalid("you cannot hand the conversation to yourself".to_owned()));
        }
        let user = &ctx.identity.user;
        if self.cfg.link(from, to, user).is_none() {
            let targets = self.cfg.targets(from, user);
            return Err(AgentError::Invalid(format!(
                "agent `{from}` has no link to `{}`, so it cannot hand off to it; {}",
                clip(to),
                if targets.is_empty() {
                    "keep helping the user yourself".to_owned()
                } else {
                    format!("you can hand off to: {}", targets.join(", "))
                }
            )));
        }
        let conversation = self.store.handoff_to(me)?.map_or_else(|| me.to_owned(), |r| r.conversation);
        let id = new_id();
        let mut spec = RunSpec::new(to, self.handoff_brief(me, from, reason)?);
        spec.kind = SessionKind::Handoff;
        spec.label = Some(format!("handoff from {from}"));
        self.store.handoff_set(&HandoffRoute {
            conversation,
            user: user.clone(),
            from_agent: from.to_owned(),
            to_agent: to.to_owned(),
            to_session: id.clone(),
            reason: clip_text(reason, 2000),
            created_ms: now_ms(),
        })?;
        let pending = Pending { spec, ctx: ctx.clone(), id: id.clone() };
        self.handoffs.lock().unwrap_or_else(|e| e.into_inner()).insert(me.to_owned(), pending);
        Ok(id)
    }

    /// Hands the conversation the caller's session was given back to the agent that handed it
    /// over. Returns that agent's name.
    pub fn handoff_clear(&self, ctx: &CallContext) -> Result<String, AgentError> {
        let route = self.store.handoff_to(&ctx.identity.session)?.ok_or_else(|| {
            AgentError::Invalid("no conversation was handed to this session: there is nothing to clear".to_owned())
        })?;
        self.store.handoff_clear(&route.conversation)?;
        Ok(route.from_agent)
    }

    /// The first message of the new agent: who handed over, why, and the conversation so far.
    fn handoff_brief(&self, session: &str, from: &str, reason: &str) -> Result<String, AgentError> {
        let records = self.store.session_messages(session, 0)?;
        let turns: Vec<String> = records
            .iter()
            .map(super::from_record)
            .filter_map(|m| match m {
                Message::User { content } => Some(format!("user: {}", clip_text(&content, 2000))),
                Message::Assistant { content: Some(text), .. } if !text.trim().is_empty() => {
                    Some(format!("{from}: {}", clip_text(&text, 2000)))
                }
                _ => None,
            })
            .collect();
        let recent = &turns[turns.len().saturating_sub(CONTEXT_MESSAGES)..];
        Ok(format!(
            "Agent `{from}` handed this conversation over to you: {}\n\nThe conversation so far (newest last):\n{}\n\n\
             From now on you talk to the user. Answer their last message. If it turns out to be for `{from}` \
             after all, call handoff with action `clear`.",
            clip_text(reason, 2000),
            recent.join("\n")
        ))
    }

    /// After a run: starts the session a handoff made during it asked for, and so on for
    /// handoffs made in that one; returns the last run's outcome (the answer the user reads).
    /// `events` carries the live transcript on into the new sessions.
    pub(super) async fn follow_handoffs(&self, mut outcome: RunOutcome, events: Option<EventSink>) -> RunOutcome {
        for _ in 0..MAX_HOPS {
            let pending = self.handoffs.lock().unwrap_or_else(|e| e.into_inner()).remove(&outcome.session);
            let Some(p) = pending else { break };
            let mut spec = p.spec;
            spec.events.clone_from(&events);
            match self.prepare(&spec, &p.ctx, self.shutdown.child_token(), Some(p.id)) {
                Ok((drive, messages)) => {
                    outcome = drive.run(messages).await;
                    self.finish(&outcome);
                }
                Err(e) => {
                    outcome.error = Some(format!("the handoff to `{}` could not start: {e}", spec.agent));
                    break;
                }
            }
        }
        outcome
    }
}
