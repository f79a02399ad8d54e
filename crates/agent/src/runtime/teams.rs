//! Teams that run (seed 000 §8): posting a task starts the members that can take it, their
//! results go back to the lead, and a team that runs away is stopped.
//!
//! - **Activation.** When the board has pending tasks (a task was posted, a task it waited on
//!   was completed, a lapsed claim was put back), idle members with a model are started, up to
//!   `max_active` running at once: a background run of the member agent (session kind `team`,
//!   in the lead's user and as a child of the lead's session, its tool calls through the gate)
//!   whose task is the team message `[Team message from LEAD]: please claim a task from the
//!   board.` Only the lead has `TEAM.md` in its prompt; members find the rest with the tools.
//!   When a member's run ends and tasks are still pending, idle members are started again. A
//!   direct message to an idle member starts it too (`[Team message from SENDER]: you have a
//!   message ...`). Members run only in a process where the lead used the board (its context).
//! - **Results.** Completing a task sends `teammate:MEMBER completed task #ID ...` with the
//!   result to the session that posted the task (stored on the task): into its next model turn
//!   when it is running (an announcement), else the session is continued with it so the lead
//!   synthesizes (results that arrive close together go as one message); it is in the lead's
//!   mailbox too.
//! - **Leases.** A claim holds for `lease_secs`; the sweeper renews the claims made by the
//!   sessions of members running here (by session: a crashed run's claims lapse even when its
//!   member runs again). A claim whose holder stopped (a crashed run, a dead process) lapses:
//!   the task is pending again (a claim may also take it over at once), the lead gets a team
//!   message from `toolgate` saying so, and a log line is written.
//! - **Budgets.** The model turns and tokens of the members' runs and of the lead's automatic
//!   continuations (the runs the team's results start) are counted per team. The count starts
//!   again only when the lead acts from a run the team did not start (the user's run of the
//!   lead, an MCP client): a lead that answers every result with a new task cannot renew its
//!   own budget. Past `max_turns` or `max_tokens`, or past [`MAX_LEAD_CONTINUATIONS`]
//!   automatic continuations, the running members are cancelled, no member is started again
//!   until the runtime restarts, and the lead gets a team message from `toolgate` (and an
//!   announcement) saying why; a warning is logged.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolgate_core::CallContext;
use toolgate_store::{TaskFilter, TaskOrder, TeamMessage, TeamTask};

use super::{RunSpec, Runtime, SessionKind, clip_text, new_id};
use crate::now_ms;
use crate::runner::{RunOutcome, RunStatus};

/// The sender of the runtime's own team messages (lapsed leases, a stopped team).
pub const TEAM_EVENTS_FROM: &str = "toolgate";

/// The most of a result a `teammate:` message carries; the rest is on the board.
const RESULT_MAX_CHARS: usize = 20_000;

/// Results for an idle lead that arrive within this of each other go as one message.
const DELIVERY_DEBOUNCE: Duration = Duration::from_millis(100);

/// The most times the team's results continue an idle lead's session before the lead acts
/// again from outside the team; one more stops the team.
pub const MAX_LEAD_CONTINUATIONS: u32 = 50;

/// What the runtime tracks of its teams.
#[derive(Debug, Default)]
pub(crate) struct Teams {
    state: Mutex<HashMap<String, TeamState>>,
    /// Results waiting for an idle lead session, by session, each with its team; an entry
    /// exists while a delivery task runs for it.
    deliveries: Mutex<HashMap<String, Vec<(String, String)>>>,
    /// Sessions being continued with team results now: what the lead does in them is the
    /// team's own activity, not a new request.
    continuing: Mutex<HashSet<String>>,
    /// Set once the sweeper runs.
    sweeper: std::sync::OnceLock<()>,
}

#[derive(Debug, Default)]
struct TeamState {
    /// Members running now, with their session and its cancel token.
    active: HashMap<String, (String, CancellationToken)>,
    /// Model turns and tokens of finished member runs and automatic lead continuations since
    /// the lead last acted from outside the team.
    turns: u64,
    tokens: u64,
    /// Automatic lead continuations in the same span.
    lead_runs: u32,
    /// Why the team was stopped; no member is started while set.
    stopped: Option<String>,
    /// The context of the lead's last post: members run as its children; results of tasks
    /// without a posting session, and the team's own events, go to its session.
    lead_ctx: Option<CallContext>,
}

impl TeamState {
    /// The lead acted from outside the team (a request, not a result): the work it starts gets
    /// a whole budget. A stopped team stays stopped.
    fn new_budget(&mut self) {
        if self.stopped.is_none() {
            self.turns = 0;
            self.tokens = 0;
            self.lead_runs = 0;
        }
    }
}

impl Teams {
    fn state(&self) -> std::sync::MutexGuard<'_, HashMap<String, TeamState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn continuing(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.continuing.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where a message for the lead goes: a session and, when known, its user.
type Target = (String, Option<String>);

impl Runtime {
    /// The board of `team` changed (a task was posted or completed) by `ctx`: starts members
    /// for pending tasks. A post by the lead makes its session the one results go to.
    pub(crate) fn team_board_changed(self: &Arc<Self>, team: &str, ctx: &CallContext) {
        let is_lead = self.cfg.teams.get(team).is_some_and(|t| t.lead == ctx.identity.agent);
        if is_lead {
            let outside = !self.teams.continuing().contains(&ctx.identity.session);
            let mut teams = self.teams.state();
            let st = teams.entry(team.to_owned()).or_default();
            st.lead_ctx = Some(ctx.clone());
            if outside {
                st.new_budget();
            }
        }
        self.ensure_sweeper();
        self.team_activate(team);
    }

    /// A member completed `task`: the result goes to the lead, and tasks it unblocked get members.
    pub(crate) fn team_task_completed(self: &Arc<Self>, team: &str, task: &TeamTask, ctx: &CallContext) {
        let member = &ctx.identity.agent;
        let text = format!(
            "teammate:{member} completed task #{} \"{}\" of team `{team}`:\n{}",
            task.id,
            clip_text(&task.subject, 200),
            clip_text(task.result.as_deref().unwrap_or_default(), RESULT_MAX_CHARS)
        );
        let target = task.posted_session.clone().map(|s| (s, task.posted_user.clone()));
        self.team_tell_lead(team, member, &text, target.into_iter().collect());
        self.team_board_changed(team, ctx);
    }

    /// Why `team` is stopped, if it is.
    pub(crate) fn team_stopped(&self, team: &str) -> Option<String> {
        self.teams.state().get(team).and_then(|s| s.stopped.clone())
    }

    /// Sends `text` to the lead of `team` from `from`: a team message, and to each of
    /// `targets` (announced when running, else continued with it); with no targets, to the
    /// session the lead last acted from. Scrubbed of secrets first: a result is a model's text
    /// passed to another agent.
    fn team_tell_lead(self: &Arc<Self>, team: &str, from: &str, text: &str, mut targets: Vec<Target>) {
        let Some(cfg) = self.cfg.teams.get(team) else { return };
        let text = &self.scrub(text);
        let sent = self.store.team_message_send(&TeamMessage {
            team: team.to_owned(),
            from: from.to_owned(),
            to: Some(cfg.lead.clone()),
            content: text.to_owned(),
            ts_ms: now_ms(),
            ..TeamMessage::default()
        });
        if let Err(e) = sent {
            tracing::warn!(team, "team message to the lead not saved: {e}");
        }
        if targets.is_empty() {
            targets.extend(self.lead_target(team));
        }
        let mut seen = HashSet::new();
        for (session, user) in targets {
            if seen.insert(session.clone()) {
                self.deliver(team, &session, user.as_deref(), text.to_owned());
            }
        }
    }

    /// The session (and user) the lead of `team` last acted from here.
    fn lead_target(&self, team: &str) -> Option<Target> {
        let teams = self.teams.state();
        let ctx = teams.get(team)?.lead_ctx.as_ref()?;
        Some((ctx.identity.session.clone(), Some(ctx.identity.user.clone())))
    }

    /// Delivers `text` to a lead's session, so the lead gets a model turn with it: announced
    /// into its next turn while it runs; when it is idle, it is continued with the text. One
    /// delivery task per session, so continuations never overlap; a result announced to a run
    /// that ended before taking it (stored in its transcript, unanswered) gets a continuation
    /// too. A session the runtime does not keep (an MCP client's) gets it as an announcement.
    /// A continuation counts against the budget of each team whose results it carries.
    fn deliver(self: &Arc<Self>, team: &str, session: &str, user: Option<&str>, text: String) {
        match self.store.session(session) {
            Ok(Some(_)) => {}
            // Kept for that user's caller of that session only.
            Ok(None) => return self.announce_for(user, session, text),
            Err(e) => return tracing::warn!(session, "team result not delivered: {e}"),
        }
        {
            let mut deliveries = self.teams.deliveries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(waiting) = deliveries.get_mut(session) {
                waiting.push((team.to_owned(), text));
                return;
            }
            deliveries.insert(session.to_owned(), vec![(team.to_owned(), text)]);
        }
        let rt = self.clone();
        let session = session.to_owned();
        tokio::spawn(async move {
            // The teams whose results were announced to a run that may end without taking them.
            let mut watching: Vec<String> = Vec::new();
            loop {
                tokio::time::sleep(DELIVERY_DEBOUNCE).await;
                let record = match rt.store.session(&session) {
                    Ok(Some(r)) => r,
                    _ => {
                        rt.teams.deliveries.lock().unwrap_or_else(|e| e.into_inner()).remove(&session);
                        return;
                    }
                };
                let batch = {
                    let mut d = rt.teams.deliveries.lock().unwrap_or_else(|e| e.into_inner());
                    let batch = d.get_mut(&session).map(std::mem::take).unwrap_or_default();
                    if batch.is_empty() && watching.is_empty() {
                        d.remove(&session);
                        return;
                    }
                    batch
                };
                let texts = |b: &[(String, String)]| b.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n\n");
                if record.status == "running" {
                    if !batch.is_empty() {
                        rt.announce(&session, texts(&batch));
                        watching.extend(batch.into_iter().map(|(team, _)| team));
                    }
                    continue;
                }
                let (teams, text) = if batch.is_empty() {
                    // The run ended: if what was announced to it was stored unanswered, the
                    // lead answers it now.
                    let teams = std::mem::take(&mut watching);
                    let last = rt.store.session_messages(&session, 1).ok().and_then(|m| m.into_iter().next());
                    if last.is_none_or(|m| m.role != "user") {
                        continue;
                    }
                    let text = "[toolgate] team results arrived after your last answer (above): combine them into your answer.";
                    (teams, text.to_owned())
                } else {
                    (batch.iter().map(|(team, _)| team.clone()).collect(), texts(&batch))
                };
                let mut teams: Vec<String> = teams;
                teams.sort_unstable();
                teams.dedup();
                if !rt.team_lead_continuation_allowed(&teams) {
                    // Stopped instead: the stop message is queued for this session; these
                    // results go with it (they are in the mailbox too).
                    let mut d = rt.teams.deliveries.lock().unwrap_or_else(|e| e.into_inner());
                    d.entry(session.clone()).or_default().splice(0..0, batch);
                    continue;
                }
                rt.teams.continuing().insert(session.clone());
                // The lead's turn runs under the grants its caller had (a team gateway's user):
                // a session keeps none across turns, the teams' lead context does.
                let grants = rt.team_lead_grants(&teams);
                let outcome = rt.continue_session(&record, &text, rt.shutdown.child_token(), None, grants).await;
                rt.teams.continuing().remove(&session);
                let (turns, tokens) = match &outcome {
                    Ok(o) => (u64::from(o.iterations.max(1)), o.usage.input_tokens + o.usage.output_tokens),
                    Err(e) => {
                        tracing::warn!(session, "the lead's session was not continued with team results: {e}");
                        (1, 0)
                    }
                };
                rt.team_charge(&teams, turns, tokens);
            }
        });
    }

    /// The grants the lead of `teams` called under ([`CallContext::grants`], set by a team
    /// gateway), for a turn the runtime starts on its behalf. Each team's lead context is the
    /// lead's last call on it; they share one session, and so one caller.
    fn team_lead_grants(&self, teams: &[String]) -> Option<Arc<dyn toolgate_core::CallGrants>> {
        let state = self.teams.state();
        teams.iter().find_map(|team| state.get(team)?.lead_ctx.as_ref()?.grants.clone())
    }

    /// Whether the teams' results may continue the lead's session once more: counts it against
    /// each running team, and stops a team past [`MAX_LEAD_CONTINUATIONS`] (then `false`). A
    /// stopped team's own messages (why it stopped, lapsed claims) are always delivered: no
    /// member runs, so they are few.
    fn team_lead_continuation_allowed(self: &Arc<Self>, teams: &[String]) -> bool {
        let over: Vec<String> = {
            let mut state = self.teams.state();
            teams
                .iter()
                .filter(|team| {
                    let st = state.entry((*team).clone()).or_default();
                    if st.stopped.is_some() {
                        return false;
                    }
                    st.lead_runs += 1;
                    st.lead_runs > MAX_LEAD_CONTINUATIONS
                })
                .cloned()
                .collect()
        };
        for team in &over {
            let reason = format!(
                "its results continued the lead's session {MAX_LEAD_CONTINUATIONS} times without a new request from outside the team (the most allowed)"
            );
            self.team_stop(team, reason);
        }
        over.is_empty()
    }

    /// Counts a finished automatic lead continuation against each of `teams`' budgets.
    fn team_charge(self: &Arc<Self>, teams: &[String], turns: u64, tokens: u64) {
        for team in teams {
            {
                let mut state = self.teams.state();
                let st = state.entry(team.clone()).or_default();
                st.turns += turns;
                st.tokens += tokens;
            }
            self.team_check_budget(team, 0);
        }
    }

    /// Starts idle members of `team` for its pending tasks, within `max_active` and the budget.
    fn team_activate(self: &Arc<Self>, team: &str) {
        let Some(cfg) = self.cfg.teams.get(team) else { return };
        let tasks = match self.store.team_tasks(team, TaskFilter::Active, TaskOrder::Priority, 0) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(team, "team board not read: {e}");
                return;
            }
        };
        let pending = tasks.iter().filter(|t| t.status == "pending").count();
        let holders: Vec<&str> =
            tasks.iter().filter(|t| t.status == "claimed").filter_map(|t| t.owner.as_deref()).collect();
        let mut teams = self.teams.state();
        let st = teams.entry(team.to_owned()).or_default();
        if st.stopped.is_some() || pending == 0 {
            return;
        }
        // Members running without a claim are about to take a pending task: start only as many
        // more as there are tasks left for them.
        let starting = st.active.keys().filter(|m| !holders.contains(&m.as_str())).count();
        let wanted = pending.saturating_sub(starting);
        let slots = cfg.max_active.saturating_sub(st.active.len());
        let idle: Vec<&String> = cfg
            .members
            .iter()
            .filter(|m| **m != cfg.lead && !st.active.contains_key(*m))
            .filter(|m| self.agent(m).is_ok_and(|a| self.client(&a.provider).is_ok()))
            .take(slots.min(wanted))
            .collect();
        if idle.is_empty() {
            return;
        }
        // Members run as children of the lead's session, in its user: only a process where the
        // lead used the board starts them (not, say, a `toolgate call` that completed a task).
        let Some(lead_ctx) = st.lead_ctx.clone() else {
            tracing::debug!(team, "pending team tasks, but the lead has not used the board here");
            return;
        };
        let task = format!("[Team message from {}]: please claim a task from the board (team `{team}`).", cfg.lead);
        for member in idle {
            self.start_member(st, team, member, task.clone(), &lead_ctx);
        }
    }

    /// A direct message to `to` from `ctx`'s agent: an idle member with a model is started to
    /// read it (seed 000 §8: the message carries the context), within `max_active` and the
    /// budget, once the lead has used the board here. A message from the lead makes its session
    /// the one results go to.
    pub(crate) fn team_message_sent(self: &Arc<Self>, team: &str, to: &str, ctx: &CallContext) {
        let Some(cfg) = self.cfg.teams.get(team) else { return };
        let from = ctx.identity.agent.as_str();
        let outside = !self.teams.continuing().contains(&ctx.identity.session);
        let mut teams = self.teams.state();
        let st = teams.entry(team.to_owned()).or_default();
        if from == cfg.lead {
            st.lead_ctx = Some(ctx.clone());
            if outside {
                st.new_budget();
            }
        }
        let startable = to != cfg.lead
            && cfg.members.iter().any(|m| m == to)
            && st.stopped.is_none()
            && !st.active.contains_key(to)
            && st.active.len() < cfg.max_active
            && self.agent(to).is_ok_and(|a| self.client(&a.provider).is_ok());
        let Some(lead_ctx) = st.lead_ctx.clone().filter(|_| startable) else { return };
        let task = format!(
            "[Team message from {from}]: you have a message: read it with team_message read (team `{team}`), then act on it."
        );
        self.start_member(st, team, to, task, &lead_ctx);
        drop(teams);
        self.ensure_sweeper();
    }

    /// Starts `member` of `team` in the background on `task`, as a child of the lead's session.
    fn start_member(
        self: &Arc<Self>,
        st: &mut TeamState,
        team: &str,
        member: &str,
        task: String,
        lead_ctx: &CallContext,
    ) {
        let session = new_id();
        let cancel = self.shutdown.child_token();
        st.active.insert(member.to_owned(), (session.clone(), cancel.clone()));
        let mut spec = RunSpec::new(member, task);
        spec.kind = SessionKind::Team;
        spec.label = Some(format!("team {team}"));
        spec.internal = true;
        spec.skip_gates = true;
        tracing::info!(team, member, session, "starting a team member");
        let rt = self.clone();
        let (team, member, lead_ctx) = (team.to_owned(), member.to_owned(), lead_ctx.clone());
        tokio::spawn(async move {
            let outcome = match rt.prepare(&spec, &lead_ctx, cancel, Some(session.clone())) {
                Ok((drive, messages)) => drive.run(messages).await,
                Err(e) => {
                    RunOutcome { error: Some(e.to_string()), ..RunOutcome::empty(&session, &member, RunStatus::Failed) }
                }
            };
            rt.finish(&outcome);
            rt.team_member_ended(&team, &member, &outcome);
        });
    }

    /// A member's run ended: its turns and tokens count against the budget, and members are
    /// started again for tasks still pending.
    fn team_member_ended(self: &Arc<Self>, team: &str, member: &str, o: &RunOutcome) {
        {
            let mut teams = self.teams.state();
            let st = teams.entry(team.to_owned()).or_default();
            st.active.remove(member);
            // At least one turn each: a run that fails before its first turn still costs one,
            // so a member that cannot start does not loop for free.
            st.turns += u64::from(o.iterations.max(1));
            st.tokens += o.usage.input_tokens + o.usage.output_tokens;
        }
        if o.status != RunStatus::Done {
            tracing::info!(
                team,
                member,
                status = o.status.as_str(),
                error = o.error.as_deref(),
                "team member's run ended"
            );
        }
        if !self.team_check_budget(team, 0) {
            self.team_activate(team);
        }
    }

    /// Stops `team` when its members went past a budget (`live_tokens`: tokens of runs still
    /// going); returns whether it is stopped.
    fn team_check_budget(self: &Arc<Self>, team: &str, live_tokens: u64) -> bool {
        let Some(cfg) = self.cfg.teams.get(team) else { return false };
        let reason = {
            let mut teams = self.teams.state();
            let st = teams.entry(team.to_owned()).or_default();
            if st.stopped.is_some() {
                return true;
            }
            let tokens = st.tokens + live_tokens;
            if st.turns >= cfg.max_turns {
                format!(
                    "it used {} model turns (max_turns = {}) in its members' runs and the lead's automatic continuations",
                    st.turns, cfg.max_turns
                )
            } else if tokens >= cfg.max_tokens {
                format!(
                    "it used {tokens} tokens (max_tokens = {}) in its members' runs and the lead's automatic continuations",
                    cfg.max_tokens
                )
            } else {
                return false;
            }
        };
        self.team_stop(team, reason);
        true
    }

    /// Stops `team` for `reason`: cancels its running members, starts none again, tells the
    /// lead (team message and delivery) and logs a warning. Once.
    fn team_stop(self: &Arc<Self>, team: &str, reason: String) {
        let cancels: Vec<CancellationToken> = {
            let mut teams = self.teams.state();
            let st = teams.entry(team.to_owned()).or_default();
            if st.stopped.is_some() {
                return;
            }
            st.stopped = Some(reason.clone());
            st.active.values().map(|(_, c)| c.clone()).collect()
        };
        for c in cancels {
            c.cancel();
        }
        let active = self.store.team_tasks(team, TaskFilter::Active, TaskOrder::Priority, 0).unwrap_or_default();
        let left: Vec<String> = active
            .iter()
            .take(20)
            .map(|t| format!("#{} \"{}\" ({})", t.id, clip_text(&t.subject, 80), t.status))
            .collect();
        // To the lead's last session and every session with work left on the board.
        let mut targets: Vec<Target> = self.lead_target(team).into_iter().collect();
        targets.extend(active.iter().filter_map(|t| Some((t.posted_session.clone()?, t.posted_user.clone()))));
        tracing::warn!(team, "team stopped: {reason}");
        let text = format!(
            "[toolgate] team `{team}` was stopped: {reason}. Its running members were cancelled and no member is started again until toolgate restarts. Tasks not done: {}. Finish the work yourself or report what is missing.",
            if left.is_empty() { "none".to_owned() } else { left.join(", ") }
        );
        self.team_tell_lead(team, TEAM_EVENTS_FROM, &text, targets);
    }

    /// Starts the sweeper once: it renews the leases of members running here, puts lapsed
    /// claims back, checks the token budget of running members and starts members for pending
    /// tasks. It holds the runtime weakly and ends with it.
    fn ensure_sweeper(self: &Arc<Self>) {
        if self.teams.sweeper.set(()).is_err() {
            return;
        }
        let shortest = self.cfg.teams.values().map(|t| t.lease()).min().unwrap_or(Duration::from_secs(300));
        let tick = (shortest / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        let weak: Weak<Runtime> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(rt) = weak.upgrade() else { return };
                rt.sweep();
            }
        });
    }

    fn sweep(self: &Arc<Self>) {
        for (team, cfg) in &self.cfg.teams {
            let now = now_ms();
            let lease_ms = cfg.lease().as_millis() as i64;
            let running: Vec<(String, String)> = self
                .teams
                .state()
                .get(team)
                .map(|s| s.active.iter().map(|(m, (session, _))| (m.clone(), session.clone())).collect())
                .unwrap_or_default();
            let mut live_tokens = 0;
            for (member, session) in &running {
                if let Err(e) = self.store.team_tasks_renew(team, session, now + lease_ms) {
                    tracing::warn!(team, member, "team task lease not renewed: {e}");
                }
                if let Ok(Some(s)) = self.store.session(session) {
                    live_tokens += s.input_tokens + s.output_tokens;
                }
            }
            match self.store.team_tasks_expire(team, now) {
                Ok(lapsed) => {
                    for t in lapsed {
                        let owner = t.owner.as_deref().unwrap_or("?");
                        tracing::warn!(team, task = t.id, owner, "team task back to pending: its claim lapsed");
                        let text = format!(
                            "[toolgate] task #{} \"{}\" is pending again: `{owner}` claimed it but did not complete it within its lease ({} s; the member stopped or crashed).",
                            t.id,
                            clip_text(&t.subject, 200),
                            cfg.lease().as_secs_f64()
                        );
                        let target = t.posted_session.clone().map(|s| (s, t.posted_user.clone()));
                        self.team_tell_lead(team, TEAM_EVENTS_FROM, &text, target.into_iter().collect());
                    }
                }
                Err(e) => tracing::warn!(team, "team task leases not checked: {e}"),
            }
            if !self.team_check_budget(team, live_tokens) {
                self.team_activate(team);
            }
        }
    }
}
